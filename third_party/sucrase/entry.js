// What bundle.sh bundles: sucrase's API (transform), nothing else.
module.exports = require('sucrase');
