#!/bin/bash
# run_javascript.sh — `hutch run --lang javascript` on the local executor
# (or $HUTCH_EXECUTOR, see tests/lib/executor.sh).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
L="--lang javascript"

run_hutch run $L -e 'console.log("hello from node")'
is "console.log exits 0" "$RC" 0
is "stdout is the program's" "$OUT" "hello from node"

run_hutch run $L -e 'console.error("to stderr"); console.log("to stdout")'
is "stdout and stderr stay apart (stdout)" "$OUT" "to stdout"
is "stdout and stderr stay apart (stderr)" "$ERR" "to stderr"

run_hutch run $L -e 'console.log("bye"); process.exit(3)'
is "process.exit(3) is hutch's exit status" "$RC" 3
is "output before process.exit is kept" "$OUT" "bye"

run_hutch run $L --json -e 'const x = 20; return {v: x * 2 + 2, list: [1, "a"]}'
is "return value is the result" "$(echo "$OUT" | json result.v)" 42
is "--json exit_code" "$(echo "$OUT" | json exit_code)" 0

run_hutch run $L --json -e 'await new Promise(r => setTimeout(r, 10)); return "awaited"'
is "top-level await" "$(echo "$OUT" | json result)" "awaited"

run_hutch run $L -e 'const a = 1;
const b = ;'
is "syntax error exits 1" "$RC" 1
like "syntax error names main.js:2" "$ERR" "main.js:2"
like "syntax error is a SyntaxError" "$ERR" "SyntaxError"

run_hutch run $L -e 'function f() {
  throw new TypeError("bad thing");
}
f();'
is "uncaught exception exits 1" "$RC" 1
like "stack has the user's line 2" "$ERR" "main.js:2"
like "stack has the message" "$ERR" "TypeError: bad thing"
unlike "stack hides the runner" "$ERR" "runner.js"

run_hutch run $L -e 'try { await tools.everything.echo({message: "hi"}) } catch (e) { console.log("caught", e.code) }'
is "unknown tool is catchable" "$OUT" "caught unknown_tool"

run_hutch run $L --json -e 'console.log(tools); return Object.keys(tools)'
is "without servers Object.keys(tools) is empty" "$(echo "$OUT" | json result)" '[]'
like "console.log(tools) says there is nothing to call" "$(echo "$OUT" | json stdout)" \
    "(no tools this program may call)"

run_hutch run $L --json -e 'const rs = await Promise.allSettled(Array.from({length: 100}, (_, i) => tools.call("s.t", {i})));
return rs.filter(r => r.status === "rejected" && r.reason.code === "unknown_tool").length'
is "100 concurrent tool calls all answered" "$(echo "$OUT" | json result)" 100
is "tool_calls counts all 100" "$(echo "$OUT" | json tool_calls.count)" 100
is "… all failed as unknown_tool, 5 listed, 95 counted" \
    "$(echo "$OUT" | json tool_calls.errors) $(echo "$OUT" | json tool_calls.failed.4.outcome) $(echo "$OUT" | json tool_calls.failed_omitted)" \
    "100 unknown_tool 95"

HUTCH_TEST_SECRET=hunter2 run_hutch run $L -e 'return JSON.stringify(process.env).includes("hunter2")'
is "host environment never reaches the sandbox" "$OUT" "false"

# A NUL byte in the output or the result loses nothing after it.  Plain
# output is the program's own, byte for byte; the result and --json's
# strings show a NUL (and any byte that is not UTF-8) as U+FFFD.
got=$("$HUTCH" run $L -e 'console.log("a\0b"); return "x\0y"' </dev/null |
    $PY -c 'import sys; print(repr(sys.stdin.buffer.read()))')
is "NUL: plain stdout byte for byte, the result's NUL as U+FFFD" "$got" \
    "b'a\\x00b\\nx\\xef\\xbf\\xbdy\\n'"
run_hutch run $L --json -e 'console.log("a\0b\0c"); return ["x\0y", "tail"]'
is "NUL: --json stdout keeps what follows a NUL" "$(echo "$OUT" | json stdout)" "a"$'\xef\xbf\xbd'"b"$'\xef\xbf\xbd'"c"
is "NUL: --json result keeps what follows a NUL" "$(echo "$OUT" | json result)" '["x\ufffdy", "tail"]'

# Exactly the fixed list of plugins/common/env.h (doc/executors.md, "Environments").
HUTCH_TOKEN=hutch-token-0123456789 SECRET=$RANDOM$RANDOM run_hutch run $L -e 'return Object.keys(process.env).sort().join(" ")'
is "the program's environment is exactly the allowlist" "$OUT" \
    "HOME LANG LC_ALL NODE_OPTIONS PATH PYTHONDONTWRITEBYTECODE PYTHONIOENCODING TMPDIR USER"

run_hutch run $L --timeout 500 -e 'while (true) {}'
is "timeout exits 124" "$RC" 124

run_hutch run $L -e 'const fs = require("fs"); fs.writeFileSync("/work/out/r.txt", "x"); return fs.readdirSync("/work/out")'
like "require works" "$OUT" "r.txt"

done_testing
