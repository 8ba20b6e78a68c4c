#!/bin/bash
# files.sh — files into /work and out of /work/out, through tar streams:
# what comes back is unpacked safely or not at all.  On the local executor,
# or $HUTCH_EXECUTOR (see tests/lib/executor.sh).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

printf 'a,b\n1,2\n3,4\n' >"$T/data.csv"
mkdir -p "$T/tree/sub"
printf 'one' >"$T/tree/one.txt"
printf 'two' >"$T/tree/sub/two.txt"

run_hutch run --lang python --file "$T/data.csv" --file "$T/tree:inputs/tree" \
    --file "$T/data.csv:deep/er/copy.csv" -e '
import os
print(open("data.csv").read().count("\n"))
print(open("inputs/tree/sub/two.txt").read())
print(open("deep/er/copy.csv").read() == open("data.csv").read())'
is "files land under /work at their DEST" "$OUT" "3
two
True"

# The directories a DEST implies are the program's, as /work is, on every
# executor (docker's engine, unpacking as root, once made them root's).
run_hutch run --lang python --file "$T/data.csv:deep/er/copy.csv" \
    --file "$T/tree:inputs/tree" -e '
for d in ("deep", "deep/er", "inputs", "inputs/tree/sub"):
    open(d + "/new.txt", "w").write("x")
print("written")'
is "the program writes in the directories its files' DESTs made" "$OUT" "written"

run_hutch run --lang python --out "$T/out" -e '
import os
os.makedirs("/work/out/nested", exist_ok=True)
open("/work/out/report.txt", "w").write("report\n")
open("/work/out/nested/data.bin", "wb").write(bytes(range(256)))'
is "writing /work/out exits 0" "$RC" 0
is "report.txt copied out" "$(cat "$T/out/report.txt")" "report"
ok "binary file copied out intact" cmp -s "$T/out/nested/data.bin" <($PY -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))')

run_hutch run --lang python --json -e 'open("/work/out/a.txt","w").write("12345")'
is "--json lists files without --out" "$(echo "$OUT" | json files.0.path)" "a.txt"
is "--json lists sizes" "$(echo "$OUT" | json files.0.size)" 5

# A symlink the sandbox plants in /work/out is never followed on the host.
echo "precious" >"$T/target"
run_hutch run --lang python --out "$T/out2" -e '
import os
os.symlink("/etc/passwd", "/work/out/link")
os.symlink("'"$T"'/target", "/work/out/link2")
open("/work/out/plain.txt", "w").write("ok")'
ok "planted symlinks are not copied out" test ! -e "$T/out2/link" -a ! -L "$T/out2/link" -a ! -L "$T/out2/link2"
is "the regular file still comes back" "$(cat "$T/out2/plain.txt")" "ok"
is "the symlink target is untouched" "$(cat "$T/target")" "precious"

# A symlink already in --out at a path the program writes: refused, and
# nothing is written through it.
mkdir -p "$T/out3"
ln -s "$T/target" "$T/out3/victim"
run_hutch run --lang python --out "$T/out3" -e 'open("/work/out/victim","w").write("pwned")
open("/work/out/other.txt","w").write("x")'
is "collision with a host symlink exits 125" "$RC" 125
like "collision is explained" "$ERR" "victim"
is "nothing written through the symlink" "$(cat "$T/target")" "precious"
ok "nothing half-written in --out" test ! -e "$T/out3/other.txt"
is "no staging directory left in --out" "$(ls -A "$T/out3")" "victim"

run_hutch run --lang javascript --out "$T/out4" -e '
const fs = require("fs");
fs.mkdirSync("/work/out/js", {recursive: true});
fs.writeFileSync("/work/out/js/r.json", JSON.stringify({ok: true}));'
is "javascript writes /work/out too" "$(cat "$T/out4/js/r.json")" '{"ok":true}'

# One file more than a result may hold (HUTCH_TAR_MAX_ENTRIES).  The
# program gets a long timeout: creating 10,000 files takes seconds on gVisor
# when the machine is idle and much longer when it is busy; what is asserted
# is the refusal, not how soon it comes.
MAX_ENTRIES=$(awk '$1 == "#define" && $2 == "HUTCH_TAR_MAX_ENTRIES" { print $3 }' \
    "$HUTCH_SRCDIR/src/caps.h")
: "${MAX_ENTRIES:?no HUTCH_TAR_MAX_ENTRIES in src/caps.h}"
run_hutch run --lang python --timeout 600000 --out "$T/out5" -e '
for i in range('"$((MAX_ENTRIES + 1))"'):
    open("/work/out/f%05d" % i, "w").close()
'
is "too many output files exits 125" "$RC" 125
like "too many output files is explained" "$ERR" "entries"
ok "nothing half-written in --out" test -z "$(ls -A "$T/out5" 2>/dev/null)"

run_hutch run --lang python -e 'open("/work/out/x", "w").write("y"); print("done")'
is "without --out or --json, /work/out is not fetched (and does not matter)" "$OUT" "done"

# The local executor's sandboxes pack and unpack with libarchive in the
# code they run after fork(): each must have it loaded whole before it was
# forked, never dlopen() it itself.  A warm sandbox forked while http.c was
# loading libmicrohttpd (and libnettle with it) once failed its first result
# with "cannot load libarchive.so.13 (... undefined symbol:
# nettle_sha256_update)".  They are forks of the factory, hutch's child
# (hutch __plugin-helper, plugins/local/factory.c), which loads libarchive
# as it starts: so the sandboxes are the hutch processes among hutch's
# grandchildren (the factory itself is looked at only through them: it may
# be seen before it has loaded anything).
if is_local; then
    PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    env -u HUTCH_TOKEN "$HUTCH" serve --http "127.0.0.1:$PORT" --pool 2 >"$T/serve.log" 2>&1 &
    SPID=$!
    EXE=$(readlink -f "$HUTCH")
    forks=""
    # A generous budget for the pool's first sandboxes; what is asserted is
    # what they have loaded, not how soon they come.
    for _ in $(seq 1 1200); do
        forks=$(for f in $(pgrep -P "$SPID"); do
            [ "$(readlink "/proc/$f/exe" 2>/dev/null)" = "$EXE" ] || continue
            for c in $(pgrep -P "$f"); do
                [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = "$EXE" ] && echo "$c"
            done
        done)
        [ -n "$forks" ] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    ok "hutch serve --http forks warm sandboxes (local, from its factory)" test -n "$forks"
    missing=""
    for c in $forks; do
        grep -q 'libarchive\.so' "/proc/$c/maps" 2>/dev/null || missing="$missing $c"
    done
    is "every sandbox forked from hutch has libarchive loaded before the fork" "${missing# }" ""
    kill "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null
fi

done_testing
