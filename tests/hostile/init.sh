# init.sh — sourced by hostile.sh on the docker and gvisor executors: what
# the program can do to hutch-init, pid 1 of its sandbox, and through it to
# the host (plugins/init/init.c), and what the image tells it.  Uses
# hostile.sh's T, PYH, run_hutch and assert_clean.

# pid 1 runs as root with a few capabilities, the program as another uid
# with none: it can neither signal init nor read anything of it.  gVisor's
# kernel would let any uid read /proc/1/environ and maps and open what
# /proc/1/fd links to (it ignores non-dumpable): in the program's view
# /proc/1 is an empty directory, on Docker's engines as on gVisor.
run_hutch run $PYH -e '
import os, stat
res = {}
for sig in (15, 9):
    try:
        os.kill(1, sig)
        res["kill %d" % sig] = "sent"
    except OSError as e:
        res["kill %d" % sig] = e.errno
for f in ("environ", "maps", "status", "cmdline", "auxv"):
    try:
        data = open("/proc/1/" + f, "rb").read()
        res[f] = "read %d" % len(data)
    except OSError as e:
        res[f] = "refused"
try:
    res["fd"] = "listed %s" % os.listdir("/proc/1/fd")
except OSError as e:
    res["fd"] = "refused"
for n in (0, 1, 2):
    try:
        fd = os.open("/proc/1/fd/%d" % n, os.O_WRONLY)
        os.close(fd)
        res["fd %d" % n] = "opened"
    except OSError as e:
        res["fd %d" % n] = "refused"
print(sorted(res.items()))
"still mine"'
S=$(echo "$OUT" | json stdout)
like "pid 1: the program cannot send it SIGTERM (EPERM)" "$S" "('kill 15', 1)"
like "pid 1: the program cannot send it SIGKILL (EPERM)" "$S" "('kill 9', 1)"
is "pid 1: the run reports the program's own result" \
    "$(echo "$OUT" | json exit_code) $(echo "$OUT" | json result)" "0 still mine"
for f in environ maps fd; do
    like "pid 1: /proc/1/$f cannot be read" "$S" "('$f', 'refused')"
done
unlike "pid 1: nothing else of /proc/1 either (status, cmdline, auxv)" "$S" "'read "
for n in 0 1 2; do
    like "pid 1: /proc/1/fd/$n cannot be opened" "$S" "('fd $n', 'refused')"
done
assert_clean "pid 1"

# 300 MB through every way out the program has (its stderr, and init's fds
# where it can open them) grow nothing on the host: hutch's state directory
# (bundles, logs, sockets) and, on docker, the container's log stay small.
# Measured while the program still runs (hutch removes all of it after).
"$HUTCH" run --lang python --timeout 300000 -e '
import os, sys, time
chunk = b"x" * (1 << 20)
outs = [2]
for n in (1, 2):
    try:
        outs.append(os.open("/proc/1/fd/%d" % n, os.O_WRONLY))
    except OSError:
        pass
for fd in outs:
    for _ in range(300):
        try:
            os.write(fd, chunk)
        except OSError:
            break
print("written", len(outs), flush=True)
time.sleep(120)' >"$T/flood.out" 2>/dev/null </dev/null &
fpid=$!
while kill -0 "$fpid" 2>/dev/null && ! grep -q written "$T/flood.out" 2>/dev/null; do
    sleep 0.5
done
if [ "$EXECUTOR" = gvisor ]; then
    state=$(ls -d "$GVISOR_DIR/$fpid".* 2>/dev/null)
else
    state=$(ls -d "$(docker_state_dir)/$fpid".* 2>/dev/null)
fi
kb=$(du -sk $state 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
logkb=0 logs=""
if [ "$EXECUTOR" = docker ]; then
    for c in $(docker ps -q --filter label=hutch.owner); do
        case "$(docker inspect -f '{{index .Config.Labels "hutch.owner"}}' "$c")" in
        *":$fpid:"*)
            # The containers log nothing (LogConfig none: init speaks over
            # the attach stream); a log file, if any, must stay small.
            f=$(docker inspect -f '{{.LogPath}}' "$c")
            logs="$logs $(docker inspect -f '{{.HostConfig.LogConfig.Type}}' "$c")${f:+:$f}"
            [ -n "$f" ] &&
                logkb=$((logkb + $(du -sk "$f"* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')))
            ;;
        esac
    done
fi
kill "$fpid"
wait "$fpid" 2>/dev/null
like "host disk: the flood ran" "$(cat "$T/flood.out")" "written"
ok "host disk: hutch's state directory stays small (${state:-none}: $kb KiB)" \
    test -n "$state" -a "$kb" -lt 8192
if [ "$EXECUTOR" = docker ]; then
    ok "host disk: the container's log stays small (${logs:-no container}: $logkb KiB)" \
        test -n "$logs" -a "$logkb" -lt 8192
    is "host disk: the containers log nothing (log driver)" "$(echo $logs | tr ' ' '\n' | sort -u)" none
fi
assert_clean "flood"

# Docker's archive endpoint resolves /work/out as root, following links:
# a /work/out turned into a link to /etc must not bring the image's /etc
# out, and the run says why, as the core says it on local and gVisor.
mkdir "$T/out"
run_hutch run $PYH --out "$T/out" -e '
import os, shutil
shutil.rmtree("/work/out")
os.symlink("/etc", "/work/out")
"swapped"'
is "symlinked /work/out: nothing arrives" "$(ls -A "$T/out")" ""
is "symlinked /work/out: the run fails (125)" "$(echo "$OUT" | json exit_code)" 125
like "symlinked /work/out: explained" "$(echo "$OUT" | json message)" \
    "it is a symbolic link (not followed)"
assert_clean "symlinked /work/out"

# The image says nothing of the machine that built it.
run_hutch run $PYH -e '
import socket
print(repr(open("/etc/hostname").read().strip()), socket.gethostname())
print(repr(open("/etc/resolv.conf").read()))'
S=$(echo "$OUT" | json stdout)
like "image: /etc/hostname is the sandbox's" "$S" "'hutch' hutch"
unlike "image: /etc/resolv.conf names no name server" "$S" "nameserver"

# Where the engine refuses the mounts of the program's view (a security
# profile such as AppArmor's docker-default; here a container without
# CAP_SYS_ADMIN, whose seccomp profile then refuses unshare), hutch-init
# says which step failed before hello, and the program runs all the same,
# in the container as it is.  hutch-init driven by hand over the attach
# stream's frames (plugins/common/mux.h), in a container of the image.
if [ "$EXECUTOR" = docker ]; then
    IMG="hutch-python:$(sed -n 's/^PACKAGE_VERSION = //p' "$HUTCH_BUILDDIR/Makefile")"
    CID=$(docker create -i --network none --cap-drop ALL \
        ${HUTCH_CGROUP_PARENT:+--cgroup-parent "$HUTCH_CGROUP_PARENT"} \
        --cap-add SETUID --cap-add SETGID --cap-add SETPCAP --cap-add KILL \
        --cap-add SYS_CHROOT --user 0:0 --label hutch.test=noview \
        "$IMG" /run/hutch-init --attach --view 1000:1000 64 1048576 \
        /bin/sh -c 'echo ran')
    ok "no view: a container without CAP_SYS_ADMIN is made" test -n "$CID"
    docker cp "$HUTCH_BUILDDIR/plugins/hutch-init" "$CID:/run/hutch-init" >/dev/null
    S=$($PY -c '
import select, struct, subprocess, sys, time
p = subprocess.Popen(["docker", "start", "-a", "-i", sys.argv[1]], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE)
buf, said, end = b"", [], time.time() + 300
while time.time() < end and not any(s.startswith("ctl exit") for s in said):
    if select.select([p.stdout], [], [], 1)[0]:
        b = p.stdout.read1(65536)
        if not b:
            break
        buf += b
    while len(buf) >= 5 and len(buf) >= 5 + struct.unpack(">I", buf[1:5])[0]:
        n = struct.unpack(">I", buf[1:5])[0]
        if n:
            said.append("%s %s" % (("ctl", "chan", "out", "err")[buf[0] % 4],
                                   buf[5:5 + n].decode(errors="replace").strip()))
        buf = buf[5 + n:]
p.stdin.close()
p.wait(timeout=120)
print("|".join(said))' "$CID")
    docker rm -f "$CID" >/dev/null 2>&1
    like "no view: init says the step the engine refused, before hello" "$S" \
        "ctl noview unshare 1|ctl hello"
    like "no view: the program ran, in the container as it is" "$S" "out ran"
    like "no view: ... and it ended normally" "$S" "ctl exit 0 0"
fi
