#!/bin/bash
# discovery.sh — tests/mcp/discovery.mjs (search_tools, tools.search,
# did-you-mean, --direct-tools) on the docker executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/discovery.mjs"
