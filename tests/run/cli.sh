#!/bin/bash
# cli.sh — the command line contract: --version, --help everywhere, bad
# arguments, plugins, doctor, and hutch's own failures exiting 125 with a
# message that says what to do.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

run_hutch --version
is "--version exits 0" "$RC" 0
like "--version names hutch" "$OUT" "hutch "

for cmd in "" run plugins doctor; do
    run_hutch $cmd --help
    is "hutch $cmd --help exits 0" "$RC" 0
    like "hutch $cmd --help prints usage" "$OUT" "Usage: hutch"
done

run_hutch frobnicate
is "unknown command exits 2" "$RC" 2
like "unknown command is named" "$ERR" 'unknown command "frobnicate"'

run_hutch run --lang cobol -e 'x'
is "unknown language exits 2" "$RC" 2
like "unknown language says what is allowed" "$ERR" "python or javascript"

run_hutch run --lang python
is "no program exits 2" "$RC" 2

run_hutch run --lang python -e 'print(1)' --timeout 0
like "bad --timeout is explained" "$ERR" "--timeout wants milliseconds"
is "bad --timeout exits 2 (bad arguments)" "$RC" 2
run_hutch run --lang python -e 'print(1)' --memory 1
is "out-of-range --memory exits 2" "$RC" 2
run_hutch run --lang python -e 'print(1)' --pids 99999999
is "out-of-range --pids exits 2" "$RC" 2

run_hutch run --lang python --executor nosuch -e 'print(1)'
is "unknown executor exits 125" "$RC" 125
like "unknown executor points at hutch plugins" "$ERR" "hutch plugins"

run_hutch run --lang python --plugins /nonexistent -e 'print(1)'
is "missing plugin dir exits 125" "$RC" 125
like "missing plugin dir says how to fix" "$ERR" "HUTCH_PLUGIN_DIR"

run_hutch run --lang python /nonexistent/prog.py
is "missing program file exits 125" "$RC" 125
like "missing program file is named" "$ERR" "/nonexistent/prog.py"

run_hutch run --lang python -e 'print(1)' --file /nonexistent/input.txt
is "missing --file exits 125" "$RC" 125
like "missing --file is named" "$ERR" "/nonexistent/input.txt"

run_hutch run --lang python -e 'print(1)' --file /etc/hostname:../escape
is "--file DEST with .. exits 125" "$RC" 125
like "--file DEST with .. is refused" "$ERR" ".."

run_hutch plugins
is "hutch plugins exits 0" "$RC" 0
like "hutch plugins lists local as usable" "$OUT" "local      usable"

TP=$(mktemp -d)
ln -s "$HUTCH_TEST_PLUGINS/wrongabi.so" "$TP/wrongabi.so"
ln -s "$HUTCH_TEST_PLUGINS/nosym.so" "$TP/nosym.so"
printf 'garbage' >"$TP/garbage.so"
run_hutch plugins --plugins "$TP"
is "hutch plugins survives broken plugins" "$RC" 0
like "wrong ABI is listed with its reason" "$OUT" "built for executor ABI 42"
like "missing symbol is listed with its reason" "$OUT" "no symbol hutch_executor_entry"
like "garbage is listed with its reason" "$OUT" "cannot load"
rm -rf "$TP"

run_hutch doctor
is "hutch doctor passes on this machine" "$RC" 0
like "doctor checks namespaces" "$OUT" "namespaces"
like "doctor checks seccomp" "$OUT" "seccomp"
like "doctor checks cgroups" "$OUT" "cgroups"
like "doctor finds python" "$OUT" "python"
like "doctor finds node" "$OUT" "javascript"

HUTCH_RUNNER_DIR=/nonexistent run_hutch doctor
is "doctor fails without runners" "$RC" 1
like "doctor says how to fix missing runners" "$ERR$OUT" "HUTCH_RUNNER_DIR"

done_testing
