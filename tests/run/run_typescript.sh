#!/bin/bash
# run_typescript.sh — JavaScript as agents write it: `hutch run --lang
# typescript|ts` (types stripped by the runner's bundled sucrase) and ESM
# `import` of Node's built-ins in JavaScript and TypeScript, on the local
# executor (or $HUTCH_EXECUTOR, see tests/lib/executor.sh; docker and gvisor
# run the images' Node 18).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Everything TypeScript adds that is not JavaScript: interfaces, type
# aliases, annotations, generics, `as` casts, enums, a class with a
# parameter property and an access modifier, non-null assertions, satisfies.
cat >"$TMP/prog.ts" <<'EOF'
interface Point { x: number; y: number; label?: string }
type Pair<T> = [T, T];
enum Color { Red, Green = 5, Blue }
const enum Dir { Up = "up" }
class Box<T> {
  constructor(private readonly items: T[]) {}
  first(): T | undefined { return this.items[0]; }
}
function swap<T>(p: Pair<T>): Pair<T> { return [p[1], p[0]]; }
const raw: unknown = JSON.parse('{"x": 3, "y": 4}');
const p = raw as Point;
const dist: number = Math.hypot(p.x, p.y);
const box = new Box<string>(["a", "b"]);
const cfg = { mode: "fast" } satisfies Record<string, string>;
await Promise.resolve<void>(undefined);
return { dist, swapped: swap<number>([1, 2]), color: Color[Color.Blue], blue: Color.Blue,
  dir: Dir.Up, first: box.first()!, mode: cfg.mode, label: p.label ?? "none" };
EOF
run_hutch run --lang typescript --json "$TMP/prog.ts"
is "typescript: exit 0" "$(echo "$OUT" | json exit_code)" 0
is "typescript: interfaces, generics, casts, enums, classes run and return" \
    "$(echo "$OUT" | json result)" \
    '{"dist": 5, "swapped": [2, 1], "color": "Blue", "blue": 6, "dir": "up", "first": "a", "mode": "fast", "label": "none"}'

run_hutch run "$TMP/prog.ts"
is "a .ts file runs as TypeScript without --lang" "$RC" 0
run_hutch run --lang ts -e 'const n: number = 41; return n + 1'
is "--lang ts is typescript" "$OUT" 42
run_hutch run --lang TypeScript -e 'let s: string = "x"; return s'
is "--lang is not case-sensitive" "$OUT" x

# ESM imports of Node's built-ins at the top of the program.
run_hutch run --lang javascript --json -e 'import fs from "node:fs";
import { readFileSync, writeFileSync } from "fs";
import * as path from "node:path";
import { join as pjoin } from "path";
writeFileSync("/work/out/a.txt", "hello");
return [fs.existsSync("/work/out/a.txt"), readFileSync(pjoin("/work", "out", "a.txt"), "utf8"),
  path.basename("/x/y.ts", ".ts")]'
is "javascript: ESM imports of node:fs, fs, node:path and path work" \
    "$(echo "$OUT" | json result)" '[true, "hello", "y"]'

run_hutch run --lang ts --json -e 'import fs from "node:fs";
import { basename } from "node:path";
import type { Stats } from "node:fs";
const st: Stats = fs.statSync("/work");
return [st.isDirectory(), basename("/a/b.c") as string]'
is "typescript: ESM imports (and an import type) work" "$(echo "$OUT" | json result)" '[true, "b.c"]'

run_hutch run --lang js -e 'export const answer = 42;
return answer'
is "javascript: an export statement does not stop the program" "$OUT" 42

run_hutch run --lang js -e 'const { join } = await import("node:path");
return join("a", "b")'
is "javascript: dynamic import() works (natively on Node 20, as require() on 18)" "$OUT" a/b
run_hutch run --lang ts -e 'import os from "node:os";
const { join } = await import("node:path");
return join("a", typeof os.cpus as string)'
is "typescript: dynamic import() beside a static one" "$OUT" a/function

run_hutch run --lang js -e 'import leftPad from "left-pad";
return leftPad("x", 3)'
is "an import of a module the sandbox lacks exits 1" "$RC" 1
like "... and names it" "$ERR" "Cannot find module 'left-pad'"

# Errors point at the user's code: the runtime error's line, the syntax
# error's line and column.
run_hutch run --lang ts -e 'import { sep } from "node:path";
interface Conf { depth: number }
const conf = { depth: 2 } as Conf;
function deep(n: number): never {
  throw new RangeError(`too deep: ${n}${sep}`);
}
deep(conf.depth);'
is "typescript: a runtime error exits 1" "$RC" 1
like "... its traceback names main.ts:5, the throw" "$ERR" "main.ts:5:"
like "... and main.ts:7, the call" "$ERR" "main.ts:7:"
like "... with the message" "$ERR" "RangeError: too deep: 2/"
unlike "... and none of the runner" "$ERR" "runner.js"
unlike "... nor the transform" "$ERR" "sucrase"

run_hutch run --lang ts --json -e 'const ok: number = 1;
function f(a: number, b: ) { return a; }
return f(ok)'
is "typescript: a syntax error exits 1" "$(echo "$OUT" | json exit_code)" 1
is "... as a SyntaxError" "$(echo "$OUT" | json error.type)" SyntaxError
is "... whose message has line:column" "$(echo "$OUT" | json error.message)" "Unexpected token (2:26)"
is "... at the user's line" "$(echo "$OUT" | json error.line)" 2
# The traceback is in stderr only (the result's error is {type, message,
# line}): node's shape, main.ts:line:column, the line, a caret.
is "... whose traceback on stderr is node's shape: main.ts:line:column, the line, a caret" \
    "$(echo "$OUT" | json stderr)" "main.ts:2:26
function f(a: number, b: ) { return a; }
                         ^

SyntaxError: Unexpected token (2:26)"

run_hutch run --lang js -e 'import fs from "node:fs";
const x = ;'
is "javascript with imports: a syntax error exits 1" "$RC" 1
like "... names main.js:2" "$ERR" "main.js:2:"

# Plain JavaScript goes on as before: no transform, so sloppy mode (an
# ES module would be strict), and a line that merely starts with the word
# "import" is not an import statement.
run_hutch run --lang js -e 'undeclared = 5;
var importance = 2;
importance = importance + undeclared;
return [importance, (function () { return this !== undefined; })()]'
is "plain javascript is not transformed (sloppy mode kept)" "$OUT" "[7, true]"
run_hutch run --lang js -e 'let x: number = 1'
is "types in a javascript program are a syntax error" "$RC" 1
like "... from node itself" "$ERR" "SyntaxError"

# Tool calls from TypeScript, as search_tools declares them.
run_hutch run --lang ts -e 'try {
  await tools.call("s.t", { n: 1 } as Record<string, unknown>);
} catch (e: any) {
  console.log("caught", (e as { code: string }).code);
}'
is "typescript: tools.call works and rejects like JavaScript" "$OUT" "caught unknown_tool"

run_hutch run --lang javascript -e 'return process.version'
echo "# on node $OUT (${HUTCH_EXECUTOR:-local} executor)"

done_testing
