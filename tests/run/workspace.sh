#!/bin/bash
# workspace.sh — hutch run --workspace: /work/out/workspace starts with what
# the last successful run of the workspace left, is saved only when a run
# succeeds and within the policy's cap, is held by one run at a time, and
# expires; hutch workspace list/show/delete.  On the local executor, or
# $HUTCH_EXECUTOR (see tests/lib/executor.sh).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
BG=
cleanup() {
    [ -n "$BG" ] && kill -TERM "$BG" 2>/dev/null && wait "$BG" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
W="$T/ws"
export HUTCH_WORKSPACES="$W"
# The store keeps one directory per principal: hutch run's is "local".
LOCAL_DIR="$W/$(printf local | od -An -tx1 | tr -d ' \n')"

# --- a file written in run 1 is there in run 2 -------------------------------
run_hutch run --json --lang python -w notes -e '
import os
print(sorted(os.listdir("/work/out/workspace")))
open("/work/out/workspace/a.txt", "w").write("first")
os.makedirs("/work/out/workspace/sub", exist_ok=True)
open("/work/out/workspace/sub/b.bin", "wb").write(bytes(range(256)))
open("/work/out/result.txt", "w").write("r")'
is "run 1 exits 0" "$(echo "$OUT" | json exit_code)" 0
is "run 1 starts with an empty workspace folder" "$(echo "$OUT" | json stdout)" "[]"
is "workspace files are not result files" "$(echo "$OUT" | json files)" \
    '[{"path": "result.txt", "size": 1}]'
ok "the workspace is stored under the principal's directory" test -f "$LOCAL_DIR/notes.tar"

run_hutch run --lang javascript -w notes -e '
const fs = require("fs");
console.log(fs.readFileSync("/work/out/workspace/a.txt", "utf8"));
console.log(fs.readFileSync("/work/out/workspace/sub/b.bin").length);
fs.writeFileSync("/work/out/workspace/a.txt", "second");'
is "run 2 (another language) finds run 1's files" "$OUT" "first
256"
is "run 2 exits 0" "$RC" 0
run_hutch run --lang python -w notes -e 'print(open("/work/out/workspace/a.txt").read())'
is "run 3 sees run 2's change" "$OUT" "second"

run_hutch run --lang python --out "$T/out" -w notes -e '
open("/work/out/workspace/c.txt", "w").write("c")
open("/work/out/plain.txt", "w").write("p")'
is "--out receives the result files" "$(cat "$T/out/plain.txt")" "p"
ok "--out does not receive the workspace" test ! -e "$T/out/workspace"

run_hutch run --lang python -e 'import os; print(os.path.exists("/work/out/workspace"))'
is "a run without --workspace sees no workspace" "$OUT" "False"

# --- a run that fails keeps the previous content ----------------------------
run_hutch run --lang python -w notes -e '
open("/work/out/workspace/a.txt", "w").write("half-done")
raise SystemExit(1)'
is "a failing run exits 1" "$RC" 1
like "it says the workspace was not saved" "$ERR" 'workspace "notes" not saved'
run_hutch run --lang python -w notes -e 'print(open("/work/out/workspace/a.txt").read())'
is "after exit 1 the workspace holds what it held before" "$OUT" "second"

run_hutch run --lang python --timeout 3000 -w notes -e '
open("/work/out/workspace/a.txt", "w").write("half-done")
import time
time.sleep(60)'
is "a run killed by its timeout exits 124" "$RC" 124
run_hutch run --lang python -w notes -e 'print(open("/work/out/workspace/a.txt").read())'
is "after a timeout the workspace holds what it held before" "$OUT" "second"

# --- over the cap: refused, previous content kept ---------------------------
cat >"$T/small.lua" <<'EOF'
return { workspaces = { max_bytes = 4096 } }
EOF
run_hutch run --policy "$T/small.lua" --lang python -w notes -e '
open("/work/out/workspace/big.bin", "wb").write(b"x" * 10000)
print("wrote")'
is "a run whose workspace is over max_bytes exits 125" "$RC" 125
is "its output still comes back" "$OUT" "wrote"
like "the error names the cap" "$ERR" "workspaces.max_bytes (4096)"
like "the error says the previous content stays" "$ERR" "keeps what it held before"
run_hutch run --lang python -w notes -e '
import os; print(os.path.exists("/work/out/workspace/big.bin"), open("/work/out/workspace/a.txt").read())'
is "the workspace over its cap kept its previous content" "$OUT" "False second"

# --- one run at a time -------------------------------------------------------
# Whether someone holds the record lock of $1, read from /proc/locks: a probe that
# took the lock (flock -n), even for an instant, could make the execution
# it watches find its workspace busy (it did, in a loaded CI run).
lock_held() {
    ino=$(stat -c %i "$1" 2>/dev/null) || return 1
    grep -Eq "POSIX +ADVISORY +WRITE +[0-9]+ +[0-9a-f]+:[0-9a-f]+:$ino " /proc/locks
}
"$HUTCH" run --lang python --timeout 120000 -w notes -e 'import time; time.sleep(110)' \
    >"$T/bg.out" 2>"$T/bg.err" </dev/null &
BG=$!
held=0
for i in $(seq 1 600); do
    if lock_held "$LOCAL_DIR/notes.lock"; then
        held=1
        break
    fi
    kill -0 "$BG" 2>/dev/null || break
    sleep 0.1
done
is "a running execution holds its workspace" "$held" 1
run_hutch run --lang python -w notes -e 'print("second")'
is "a second execution of a busy workspace is refused" "$RC" 125
like "refused with a clear error" "$ERR" 'workspace "notes" is in use by another execution'
run_hutch workspace delete notes
is "a busy workspace cannot be deleted" "$RC" 1
like "delete says why" "$ERR" "in use"
run_hutch run --lang python -w other -e 'print("free")'
is "another workspace is not held up" "$OUT" "free"
kill -TERM "$BG"
wait "$BG"
BG=
run_hutch run --lang python -w notes -e 'print(open("/work/out/workspace/a.txt").read())'
is "once it ended (cancelled, not saved) the workspace is usable and unchanged" "$OUT" "second"

# --- hutch workspace list / show / delete -------------------------------------
run_hutch workspace list
like "list names the workspaces" "$OUT" "notes	"
like "with their size and last use" "$OUT" " bytes	last used 20"
like "list names every one" "$OUT" "other"
run_hutch workspace list --json
is "list --json" "$(echo "$OUT" | json 0.name)" notes
run_hutch workspace show notes
like "show lists its files" "$OUT" "a.txt	6 bytes"
like "show lists files in folders" "$OUT" "sub/b.bin	256 bytes"
run_hutch workspace list --principal someone-else
is "another principal has none" "$OUT" ""
run_hutch workspace show notes --principal someone-else
is "another principal's show finds nothing" "$RC" 1
run_hutch workspace delete other
is "delete exits 0" "$RC" 0
run_hutch workspace list
unlike "a deleted workspace is not listed" "$OUT" "other"
ok "its files are gone" test ! -e "$LOCAL_DIR/other.tar" -a ! -e "$LOCAL_DIR/other.lock"
run_hutch workspace delete other
is "deleting a missing one fails" "$RC" 1
like "and says so" "$ERR" 'no workspace "other"'
run_hutch run --lang python -w other -e 'import os; print(os.listdir("/work/out/workspace"))'
is "a deleted workspace starts empty again" "$OUT" "[]"

# --- names --------------------------------------------------------------------
run_hutch run --lang python -w a/../../etc -e 'print(1)'
is "a name with / is refused" "$RC" 2
like "with the rule" "$ERR" "may only hold letters"
run_hutch run --lang python -w .hidden -e 'print(1)'
is "a name starting with . is refused" "$RC" 2
run_hutch run --lang python -w "$(printf 'x%.0s' $(seq 1 65))" -e 'print(1)'
like "a name over 64 characters is refused" "$ERR" "longer than 64"

# --- the policy ---------------------------------------------------------------
cat >"$T/off.lua" <<'EOF'
return { workspaces = { allow = false } }
EOF
run_hutch run --policy "$T/off.lua" --lang python -w notes -e 'print(1)'
is "workspaces.allow = false refuses an execution naming one" "$RC" 125
like "saying why" "$ERR" "does not allow workspaces"
cat >"$T/count.lua" <<'EOF'
return { workspaces = { max_count = 2 } }
EOF
run_hutch run --policy "$T/count.lua" --lang python -w third -e 'print(1)'
is "a new workspace over max_count is refused" "$RC" 125
like "saying why" "$ERR" "max_count"
run_hutch run --policy "$T/count.lua" --lang python -w notes -e 'print(1)'
is "an existing one is still usable at max_count" "$RC" 0

cat >"$T/hook.lua" <<'EOF'
return {
  on_execute = function(req)
    if req.workspace == "forbidden" then return false, "not that workspace" end
    return true
  end,
}
EOF
run_hutch run --policy "$T/hook.lua" --lang python -w forbidden -e 'print(1)'
is "on_execute sees req.workspace and may refuse" "$RC" 125
like "with its reason" "$ERR" "not that workspace"
ok "a refused execution creates no workspace" test ! -e "$LOCAL_DIR/forbidden.tar" -a ! -e "$LOCAL_DIR/forbidden.lock"
run_hutch run --policy "$T/hook.lua" --audit "$T/audit.jsonl" --lang python -w notes -e 'print(1)'
is "on_execute lets another through" "$RC" 0
like "the audit record of the execution names its workspace" \
    "$(grep '"event":"execution"' "$T/audit.jsonl")" '"workspace":"notes"'

# --- what the program does to the folder ---------------------------------------
run_hutch run --lang python -w notes -e '
import shutil
shutil.rmtree("/work/out/workspace")
open("/work/out/workspace", "w").write("not a folder")'
is "a workspace folder replaced by a file is an error" "$RC" 125
like "saying so" "$ERR" "is not a folder"
run_hutch run --lang python -w notes -e 'print(open("/work/out/workspace/a.txt").read())'
is "and the previous content stays" "$OUT" "second"

# A store file that is not a tar (damaged on the host) is refused by the
# judge, clearly, and never reaches the sandbox.
printf 'garbage' >"$LOCAL_DIR/broken.tar"
run_hutch run --lang python -w broken -e 'print(1)'
is "a damaged workspace is an error" "$RC" 125
like "naming the workspace" "$ERR" 'loading workspace "broken"'
rm -f "$LOCAL_DIR/broken.tar"

# --- names a program chose -------------------------------------------------------
# A file name with a newline would forge lines of `hutch workspace show`;
# one with an OSC 52 escape would write the operator's clipboard when shown.
# The tar judge refuses both, naming the entry escaped, and nothing is saved.
run_hutch run --lang python -w notes -e '
open("/work/out/workspace/a\nb.txt\t6 bytes\nforged.txt", "w").write("x")
print("wrote")'
is "a workspace file name with a newline: the run fails (125)" "$RC" 125
like "the refusal names the entry, escaped" "$ERR" 'a\x0ab.txt\x096 bytes\x0aforged.txt": control characters'
is "the refusal is one line" "$(printf '%s\n' "$ERR" | grep -c .)" 1
run_hutch workspace show notes
unlike "and the workspace did not take it" "$OUT" "forged"
run_hutch run --lang python --out "$T/ctl" -e '
open("/work/out/\x1b]52;c;cm0gLXJmIH4K\x07.txt", "w").write("x")'
is "a result file named with an OSC 52 escape: refused (125)" "$RC" 125
like "named escaped" "$ERR" '\x1b]52;c;cm0gLXJmIH4K\x07.txt": control characters'
unlike "no escape byte reaches the terminal" "$ERR" $'\e'
run_hutch run --lang python --out "$T/ctl" -e '
open("/work/out/csi\u009b2J.txt", "w").write("x")'
is "a result file named with a C1 control (U+009B): refused (125)" "$RC" 125
like "named escaped" "$ERR" 'csi\xc2\x9b2J.txt": control characters'
ok "--out received nothing" test -z "$(ls -A "$T/ctl" 2>/dev/null)"

# What passes the judge but could still mislead a reader is shown escaped:
# a right-to-left override, a backslash.  A tar a store holds from before
# (or a store changed on the host) with a newline in a name is refused by
# show, naming it escaped; a store file named with an escape is listed
# escaped.
"$PY" - "$LOCAL_DIR/odd.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for name in ["evil\u202etxt.exe", "back\\slash"]:
        i = tarfile.TarInfo(name)
        i.size = 1
        t.addfile(i, io.BytesIO(b"x"))
EOF
run_hutch workspace show odd
is "show of names that pass the judge exits 0" "$RC" 0
like "a right-to-left override is shown as \\u{202e}" "$OUT" 'evil\u{202e}txt.exe	1 bytes'
like "a backslash is shown doubled" "$OUT" 'back\\slash	1 bytes'
unlike "no override reaches the terminal" "$OUT" $'\u202e'
run_hutch workspace show odd --json
like "--json keeps the name as it is, JSON-escaped" "$OUT" '"evil‮txt.exe"'
"$PY" - "$LOCAL_DIR/forged.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo("a\nforged.txt\t1 bytes\n\x1b]52;c;cm0K\x07")
    i.size = 1
    t.addfile(i, io.BytesIO(b"x"))
EOF
run_hutch workspace show forged
is "show of a stored tar with a newline in a name fails" "$RC" 1
like "naming the entry escaped" "$ERR" 'a\x0aforged.txt\x091 bytes\x0a\x1b]52;c;cm0K\x07": control characters'
is "on one line" "$(printf '%s\n' "$ERR" | grep -c .)" 1
unlike "with no escape byte" "$ERR" $'\e'
touch "$LOCAL_DIR/"$'x\e]52;c;cm0K\a'".tar"
run_hutch workspace list
like "list shows a store file's odd name escaped" "$OUT" 'x\x1b]52;c;cm0K\x07	0 bytes'
unlike "with no escape byte" "$OUT" $'\e'
rm -f "$LOCAL_DIR/odd.tar" "$LOCAL_DIR/forged.tar" "$LOCAL_DIR/"$'x\e]52;c;cm0K\a'".tar"

# --- idle lifetime -------------------------------------------------------------
cat >"$T/idle.lua" <<'EOF'
return { workspaces = { idle_s = 3600 } }
EOF
touch -d '-2 hours' "$LOCAL_DIR/other.tar"
run_hutch workspace list --policy "$T/idle.lua"
unlike "a workspace unused for longer than idle_s is not listed" "$OUT" "other"
like "one used since is" "$OUT" "notes"
ok "the expired workspace is removed from the store" test ! -e "$LOCAL_DIR/other.tar"
touch -d '-2 hours' "$LOCAL_DIR/notes.tar"
run_hutch run --policy "$T/idle.lua" --lang python -w notes -e 'import os; print(os.listdir("/work/out/workspace"))'
is "an execution of an expired workspace starts empty" "$OUT" "[]"

done_testing
