#!/bin/bash
# host_files.sh — how the docker executor collects /work/out
# (plugins/docker/docker.c, docker_get).  With an engine of this host that
# runs its containers with runc, hutch packs /work/out itself from the
# directory the engine names for the container's /work volume, once init
# has stopped every other process and said what /work is (device, inode,
# change time), and the directory is proven to be that one.  Otherwise it
# asks the engine's archive endpoint, as before.  Here hutch runs in both
# ways: as it is ("host"), and in a mount namespace of its own that does not
# receive the mounts the engine makes later ("api"): there the path the
# engine names is another directory (the underlying one of the host's
# disk), as with a daemon in another mount namespace, so the proof fails
# and the endpoint serves.  Which way served is read from the debug log;
# both ways give the same files, and neither gives anything the program
# could plant: links, a fifo, a /work/out that is a link to /etc, more
# than the limit, a process left behind that keeps swapping a file for a
# link to /etc/shadow.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

[ "$(id -u)" = 0 ] || skip_all "not root: hutch cannot read the engine's volumes"
[ -z "${HUTCH_TEST_ENGINE:-}" ] || skip_all "an engine of its own (${HUTCH_TEST_ENGINE})"
case "${DOCKER_HOST:-unix://}" in
unix://*) ;;
*) skip_all "DOCKER_HOST=$DOCKER_HOST is not an engine of this host" ;;
esac
[ "$(docker info -f '{{.DefaultRuntime}}' 2>/dev/null)" = runc ] ||
    skip_all "the engine's default runtime is not runc"
command -v unshare >/dev/null || skip_all "no unshare"

REAL_HUTCH=$HUTCH
printf '#!/bin/sh\nexec unshare -m --propagation private "%s" "$@"\n' "$REAL_HUTCH" \
    >"$T/hutch-ns"
chmod +x "$T/hutch-ns"
HOST_LINE="result files packed from /work on this host"
API_LINE="result files through the engine's archive endpoint: "

# run_as MODE ARGS…: run_hutch run -v -v -x docker ARGS… as MODE says (host:
# as it is; api: in a mount namespace of its own).
run_as() {
    local mode=$1
    shift
    [ "$mode" = api ] && HUTCH=$T/hutch-ns
    run_hutch run -v -v -x docker "$@"
    HUTCH=$REAL_HUTCH
}

# way MODE DESC: the debug log says MODE's way served (api: and why).
way() {
    if [ "$1" = host ]; then
        like "$1: $2: packed on this host" "$ERR" "$HOST_LINE"
        unlike "$1: $2: not through the endpoint" "$ERR" "$API_LINE"
    else
        like "$1: $2: through the endpoint, the host path not being /work" "$ERR" \
            "$API_LINE"
        like "$1: $2: the log says why" "$ERR" "is not the container's /work"
        unlike "$1: $2: not packed on this host" "$ERR" "$HOST_LINE"
    fi
}

# What a tree is: type, mode and size of every entry, by path.
tree() { (cd "$1" && find . -mindepth 1 -printf '%P %y %m %s\n' | sort); }

FILES='
import os
os.makedirs("/work/out/a/b/c", exist_ok=True)
os.makedirs("/work/out/empty", exist_ok=True)
open("/work/out/a/b/c/deep.txt", "w").write("deep")
open("/work/out/bin.dat", "wb").write(bytes(range(256)) * 1000)
open("/work/out/run.sh", "w").write("#!/bin/sh\n")
os.chmod("/work/out/run.sh", 0o4755)
open("/work/out/secret", "w").write("mine")
os.chmod("/work/out/secret", 0)
open("/work/out/empty.txt", "w").close()
open("/work/out/caf\u00e9.txt", "w").write("u")
os.chmod("/work/out/a", 0o700)
"files"'
for mode in host api; do
    mkdir "$T/$mode"
    run_as $mode --json --lang python --out "$T/$mode/files" -e "$FILES"
    is "$mode: files: the run succeeds" "$(echo "$OUT" | json exit_code)" 0
    way $mode "files"
    echo "$OUT" | json files >"$T/$mode/files.json"
    tree "$T/$mode/files" >"$T/$mode/files.tree"
    is "$mode: files: nested file intact" "$(cat "$T/$mode/files/a/b/c/deep.txt")" deep
    ok "$mode: files: binary file intact" cmp -s "$T/$mode/files/bin.dat" \
        <($PY -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 1000)')
done
is "host and api give the same listing" "$(cat "$T/host/files.json")" \
    "$(cat "$T/api/files.json")"
is "host and api give the same tree (types, modes, sizes)" \
    "$(cat "$T/host/files.tree")" "$(cat "$T/api/files.tree")"
like "modes are normalised (setuid dropped)" "$(cat "$T/host/files.tree")" "run.sh f 755 10"

for mode in host api; do
    # Links and a fifo the program plants in /work/out are not followed and
    # not copied out; the fifo does not hang the collection.
    run_as $mode --json --lang python --out "$T/$mode/planted" -e '
import os
os.symlink("/etc/shadow", "/work/out/shadow")
os.symlink("/etc", "/work/out/etc")
os.symlink("/", "/work/out/root")
os.mkfifo("/work/out/fifo")
open("/work/out/plain.txt", "w").write("ok")
"planted"'
    is "$mode: planted: the run succeeds" "$(echo "$OUT" | json exit_code)" 0
    way $mode "planted"
    is "$mode: planted: only the regular file comes back" \
        "$(tree "$T/$mode/planted")" "plain.txt f 644 2"
    unlike "$mode: planted: nothing of /etc/shadow" "$OUT" "root:"

    # /work/out itself a link to /etc: refused before anything is read,
    # either way, as the core says it on local and gVisor.
    mkdir "$T/$mode/swapped"
    run_as $mode --json --lang python --out "$T/$mode/swapped" -e '
import os, shutil
shutil.rmtree("/work/out")
os.symlink("/etc", "/work/out")
"swapped"'
    is "$mode: /work/out a link: the run fails (125)" \
        "$(echo "$OUT" | json exit_code)" 125
    like "$mode: /work/out a link: explained" "$(echo "$OUT" | json message)" \
        "it is a symbolic link (not followed)"
    is "$mode: /work/out a link: nothing arrives" "$(ls -A "$T/$mode/swapped")" ""

    # More file data than a result may hold (HUTCH_TAR_OUT_MAX_BYTES).
    run_as $mode --json --lang python --out "$T/$mode/big" -e '
open("/work/out/big.bin", "wb").write(b"x" * ((64 << 20) + 1))
open("/work/out/small.txt", "w").write("s")
"big"'
    is "$mode: over the limit: the run fails (125)" "$(echo "$OUT" | json exit_code)" 125
    like "$mode: over the limit: explained" "$(echo "$OUT" | json message)" \
        "67108864 bytes of file data (limit)"
    way $mode "over the limit"
    ok "$mode: over the limit: nothing arrives" test -z "$(ls -A "$T/$mode/big" 2>/dev/null)"

    # A process the program leaves behind, in a session of its own, keeps
    # swapping a file for a link to /etc/shadow: init kills it before the
    # files are read, so what arrives is the file or nothing, never the
    # link's target.
    run_as $mode --json --lang python --out "$T/$mode/racer" -e '
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            try:
                open("/work/out/.t", "w").write("file")
                os.replace("/work/out/.t", "/work/out/x")
                os.symlink("/etc/shadow", "/work/out/.l")
                os.replace("/work/out/.l", "/work/out/x")
            except OSError:
                pass
    os._exit(0)
time.sleep(0.5)
"racer"'
    is "$mode: racer: the run succeeds" "$(echo "$OUT" | json exit_code)" 0
    way $mode "racer"
    case "$(cat "$T/$mode/racer/x" 2>/dev/null)" in
    "" | file) t_result 0 "$mode: racer: the file or nothing arrives" ;;
    *) t_result 1 "$mode: racer: the file or nothing arrives" ;;
    esac
    ok "$mode: racer: no link arrives" test ! -L "$T/$mode/racer/x"
done

done_testing
