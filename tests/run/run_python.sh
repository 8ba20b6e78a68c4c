#!/bin/bash
# run_python.sh — `hutch run --lang python` on the local executor (or
# $HUTCH_EXECUTOR, see tests/lib/executor.sh): output, exit status, return
# value, --json, errors with the user's line numbers, tool calls without
# upstreams, timeout, a clean environment.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
L="--lang python"

run_hutch run $L -e 'import os; print(os.path.exists("/etc/hutch-image"))'
is "runs on the $EXECUTOR executor (image-based ones have /etc/hutch-image)" \
    "$OUT" "$(is_local && echo False || echo True)"

run_hutch run $L -e 'print("hello from python")'
is "print exits 0" "$RC" 0
is "stdout is the program's" "$OUT" "hello from python"

run_hutch run $L -e 'import sys; sys.stderr.write("to stderr\n"); print("to stdout")'
is "stdout and stderr stay apart (stdout)" "$OUT" "to stdout"
is "stdout and stderr stay apart (stderr)" "$ERR" "to stderr"

run_hutch run $L -e 'import sys; print("bye"); sys.exit(3)'
is "sys.exit(3) is hutch's exit status" "$RC" 3
is "output before sys.exit is kept" "$OUT" "bye"

run_hutch run $L -e 'x = 20
x * 2 + 2'
is "last expression exits 0" "$RC" 0
is "last expression is the result" "$OUT" "42"

run_hutch run $L --json -e 'print("out"); {"a": [1, 2], "b": None}'
is "--json exits 0" "$RC" 0
is "--json exit_code" "$(echo "$OUT" | json exit_code)" 0
is "--json stdout" "$(echo "$OUT" | json stdout)" "out"
is "--json result" "$(echo "$OUT" | json result)" '{"a": [1, 2], "b": null}'
is "--json timed_out" "$(echo "$OUT" | json timed_out)" false
is "--json files" "$(echo "$OUT" | json files)" "[]"
is "--json executor names the executor" "$(echo "$OUT" | json executor)" "$EXECUTOR"
# hutch run is one-shot and has no pool: its sandbox is always cold.
is "--json warm is false (run is always cold)" "$(echo "$OUT" | json warm)" false
like "--json duration_ms is a number" "$(echo "$OUT" | json duration_ms)" ""
$PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert isinstance(d["duration_ms"], (int, float)) and d["duration_ms"] >= 0' "$OUT"
is "--json duration_ms is not negative (a program that ends within the millisecond it started in takes 0)" "$?" 0

run_hutch run $L --json -e 'result = {"answer": 42}'
is "explicit result = …" "$(echo "$OUT" | json result.answer)" 42

run_hutch run $L --json -e 'object()'
like "a value that is not JSON comes back as its repr" "$(echo "$OUT" | json result)" "<object object at"

run_hutch run $L -e 'x = 1
y = (2 +
print(x)'
is "syntax error exits 1" "$RC" 1
like "syntax error names main.py" "$ERR" 'main.py'
like "syntax error is a SyntaxError" "$ERR" "SyntaxError"

run_hutch run $L -e 'def f(d):
    return d["missing"]

f({})'
is "uncaught exception exits 1" "$RC" 1
like "traceback has the user's line 4" "$ERR" 'File "main.py", line 4'
like "traceback has the user's line 2" "$ERR" 'File "main.py", line 2'
like "traceback ends with the exception" "$ERR" "KeyError: 'missing'"
unlike "traceback hides the runner" "$ERR" "runner.py"

run_hutch run $L --json -e '1/0'
is "--json error type" "$(echo "$OUT" | json error.type)" ZeroDivisionError
is "--json exit_code of an error" "$(echo "$OUT" | json exit_code)" 1

run_hutch run $L -e 'try:
    tools.everything.echo(message="hi")
except ToolError as e:
    print("caught", e.code)'
is "unknown tool is catchable" "$OUT" "caught unknown_tool"

run_hutch run $L --json -e 'help(tools)
help(len)
dir(tools)'
is "without servers dir(tools) is call and search" "$(echo "$OUT" | json result)" '["call", "search"]'
like "help(tools) says there is nothing to call" "$(echo "$OUT" | json stdout)" \
    "(no tools this program may call)"
like "help() of anything else is Python's own" "$(echo "$OUT" | json stdout)" "len(obj, /)"

run_hutch run $L --json -e 'tools.call("some-server.do-thing", {"x": 1})'
is "uncaught tool error exits 1" "$(echo "$OUT" | json exit_code)" 1
like "the error says what to do" "$(echo "$OUT" | json error.message)" "--servers"
is "tool_calls records the call" "$(echo "$OUT" | json tool_calls.failed.0.tool)" "some-server.do-thing"
is "tool_calls records the outcome" "$(echo "$OUT" | json tool_calls.failed.0.outcome)" "unknown_tool"

HUTCH_TEST_SECRET=hunter2 run_hutch run $L -e 'import os; print(sorted(os.environ))
print("hunter2" in repr(os.environ))'
like "host environment never reaches the sandbox" "$OUT" "False"
unlike "no HUTCH_ variables inside" "$OUT" "HUTCH_"

# A NUL byte in the output or the result loses nothing after it.  Plain
# output is the program's own, byte for byte; the result and --json's
# strings show a NUL (and any byte that is not UTF-8) as U+FFFD.
got=$("$HUTCH" run $L -e 'print("a\0b"); "x\0y"' </dev/null |
    $PY -c 'import sys; print(repr(sys.stdin.buffer.read()))')
is "NUL: plain stdout byte for byte, the result's NUL as U+FFFD" "$got" \
    "b'a\\x00b\\nx\\xef\\xbf\\xbdy\\n'"
run_hutch run $L --json -e 'print("a\0b\0c"); ["x\0y", "tail"]'
is "NUL: --json stdout keeps what follows a NUL" "$(echo "$OUT" | json stdout)" "a"$'\xef\xbf\xbd'"b"$'\xef\xbf\xbd'"c"
is "NUL: --json result keeps what follows a NUL" "$(echo "$OUT" | json result)" '["x\ufffdy", "tail"]'

# Exactly the fixed list of plugins/common/env.h (doc/executors.md, "Environments"):
# nothing of hutch's, nothing a container engine adds (Docker's HOSTNAME).
SANDBOX_ENV="HOME LANG LC_ALL NODE_OPTIONS PATH PYTHONDONTWRITEBYTECODE PYTHONIOENCODING TMPDIR USER"
HUTCH_TOKEN=hutch-token-0123456789 SECRET=$RANDOM$RANDOM run_hutch run $L -e 'import os; print(" ".join(sorted(os.environ)))'
is "the program's environment is exactly the allowlist" "$OUT" "$SANDBOX_ENV"

echo in >"${TMPDIR:-/tmp}/hutch-in-$$.txt"
run_hutch run $L --file "${TMPDIR:-/tmp}/hutch-in-$$.txt:in.txt" -e 'import os
s = os.stat("/work/in.txt")
print(os.getcwd(), os.getuid(), os.getgid(), os.stat("/work").st_uid, s.st_uid, s.st_gid)'
rm -f "${TMPDIR:-/tmp}/hutch-in-$$.txt"
if [ "$EXECUTOR" = docker ]; then
    # A host uid of the container's own (plugins/docker/docker.c), the
    # owner of /work and of the files put there.
    set -- $OUT
    ok "cwd is /work, uid is not 0 but the container's own ($OUT)" \
        test "$1" = /work -a "$2" -ge $((0x10000000)) -a "$2" -le $((0x4fffffff))
    is "the uid owns /work and the files in it, gid alike" "$3 $4 $5 $6" "$2 $2 $2 $2"
else
    is "cwd is /work, uid is not 0" "$OUT" "/work 1000 1000 1000 1000 1000"
fi

# 124 is the cause; the program would sleep 300 s, so ending within 60 s
# (a sandbox start on a loaded machine included) is the timeout's doing.
start=$(date +%s%N)
run_hutch run $L --timeout 500 -e 'import time; time.sleep(300)'
elapsed=$((($(date +%s%N) - start) / 1000000))
is "timeout exits 124" "$RC" 124
like "timeout is explained" "$ERR" "timed out"
ok "timeout stops the run early (${elapsed} ms)" test "$elapsed" -lt 60000

printf 'print("from a file")\n' >"${TMPDIR:-/tmp}/hutch-prog-$$.py"
run_hutch run "${TMPDIR:-/tmp}/hutch-prog-$$.py"
is "FILE with .py needs no --lang" "$OUT" "from a file"
rm -f "${TMPDIR:-/tmp}/hutch-prog-$$.py"

OUT=$(echo 'print("from stdin")' | "$HUTCH" run $L - 2>&1)
is "program from stdin" "$OUT" "from stdin"

run_hutch run $L -e 'import threading, json
out = []
def work(i):
    try:
        tools.call("x.y", {"i": i})
    except ToolError as e:
        out.append(e.code)
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
len(out)'
is "tool calls from 8 threads all answered" "$OUT" 8

# A chatty program (2 MB on stdout): the first and last bytes are kept,
# with the number left out between (issue 12).
CHATTY='import sys
_ = sys.stdout.write("BEGIN\n" + "x" * 1999989 + "\nEND\n")'
run_hutch run $L --json -e "$CHATTY"
is "chatty: exit 0" "$(echo "$OUT" | json exit_code)" 0
is "chatty: 2,000,000 bytes, 1 MiB kept, the rest counted" \
    "$(echo "$OUT" | json stdout_omitted_bytes)" $((2000000 - 1048576))
is "chatty: head, the note of what was left out, tail" \
    "$(echo "$OUT" | $PY -c 'import json,sys,re; s=json.load(sys.stdin)["stdout"]; print(s.startswith("BEGIN\n"), s.endswith("\nEND\n"), re.findall(r"\[… (\d+) bytes of stdout left out …\]", s))')" \
    "True True ['951424']"
run_hutch run $L --json --output-bytes 1000 -e "$CHATTY"
is "--output-bytes 1000: 500 bytes of head and 500 of tail" \
    "$(echo "$OUT" | $PY -c 'import json,sys; d=json.load(sys.stdin); s=d["stdout"]; h,t=s.split("\n[… "); print(len(h), len(t.split(" …]\n",1)[1]), d["stdout_omitted_bytes"])')" \
    "500 500 1999000"
run_hutch run $L --output-bytes 1000 -e "$CHATTY"
# (1000 bytes; $(…) drops the last newline)
is "plain: the head, then the tail" "${#OUT} ${OUT:0:5} ${OUT: -3}" "999 BEGIN END"
like "plain: stderr says how much was left out" "$ERR" "1999000 bytes of stdout left out"

# A failing program: its traceback once (stderr), the error with the
# user's line.
run_hutch run $L --json -e 'def f(d):
    return d["missing"]

f({})'
is "error: the user's innermost line" "$(echo "$OUT" | json error.line)" 2
is "error: no second copy of the traceback" "$(echo "$OUT" | json error.traceback)" null
is "error: the traceback once, in stderr" \
    "$(echo "$OUT" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)).count("Traceback (most recent call last)"))')" 1

done_testing
