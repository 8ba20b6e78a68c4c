'use strict';
// hutch runner: turns TypeScript, and JavaScript with ESM import or export
// statements, into the JavaScript that runner.js runs as the body of its
// async function.
//
// runner.js loads this file only for such programs (its cheap test,
// mayHaveImports), so plain JavaScript never pays for it; this file loads
// sucrase.js (sucrase, pinned and bundled by third_party/sucrase/bundle.sh,
// copied in beside this file by the build) on first use.
// Sucrase strips the types (interfaces, annotations, generics, `as` casts;
// `enum` becomes an object) without checking them, and its "imports"
// transform turns `import fs from "node:fs"` into a require() call on the
// same line (hence also "use strict", as in any ES module).  Lines are
// kept, so a traceback names the user's line; a column on a line that lost
// a type annotation counts in the stripped line.  Dynamic import() is left
// alone where node can load it from a vm script (Node 20), and becomes a
// require() where it cannot (Node 18); modern syntax is left as written.
//
// What does not live here: running the program, and the stack clean-up
// (runner.js).  Runs once per sandbox, before the program starts.

const path = require('path');

let sucrase;

// Sucrase's syntax errors say "Unexpected token (3:7)" and carry loc, with
// a 1-based column: made into node's own shape for a syntax error (the
// file:line:column, the line, a caret under the column), so the traceback
// reads like one from node itself.
function syntaxError(e, code, filename) {
  const loc = e && e.loc;
  if (!(e instanceof SyntaxError) || !loc || !Number.isInteger(loc.line) || !Number.isInteger(loc.column)) {
    return e;
  }
  const err = new SyntaxError(String(e.message));
  const text = String(code.split('\n')[loc.line - 1] || '').replace(/\r$/, '');
  const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  const caret = loc.column >= 1 && loc.column - 1 <= shown.length ? `${' '.repeat(loc.column - 1)}^\n` : '';
  err.stack = `${filename}:${loc.line}:${loc.column}\n${shown}\n${caret}\nSyntaxError: ${err.message}`;
  return err;
}

// The code to run: `typescript` strips types, `imports` turns ESM import
// and export statements into require() and `exports` (and import() too
// unless `dynamicImport`).  Throws a SyntaxError that names
// filename:line:column.
function transpile(code, { typescript, imports, dynamicImport, filename }) {
  if (!sucrase) sucrase = require(path.join(__dirname, 'sucrase.js'));
  const transforms = [];
  if (typescript) transforms.push('typescript');
  if (imports) transforms.push('imports');
  try {
    return sucrase.transform(code, {
      transforms,
      disableESTransforms: true,
      preserveDynamicImport: Boolean(dynamicImport),
      production: true,
    }).code;
  } catch (e) {
    throw syntaxError(e, code, filename);
  }
}

module.exports = { transpile };
