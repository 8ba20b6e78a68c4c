#!/bin/bash
# hostile.sh — hostile programs on the local executor (or $HUTCH_EXECUTOR,
# see tests/lib/executor.sh).  Each must be contained and leave nothing
# running.  The whole file runs inside an outer cgroup guard (pids + memory)
# so that a containment bug fails a test instead of taking the machine
# down; Docker containers are created below it (HUTCH_CGROUP_PARENT).
# Network traffic goes to loopback only.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
. "$HUTCH_SRCDIR/tests/lib/guard.sh"

executor_require
guard_enter || skip_all "no writable cgroup for the outer guard (run as root)"
if ! is_local && [ -z "$HUTCH_CGROUP_PARENT" ]; then
    skip_all "no cgroup path below both the memory and the pids guard: containers would run unguarded"
fi
T=$(mktemp -d)
trap 'guard_leave; rm -rf "$T"' EXIT
MYNS=$(readlink /proc/self/ns/pid)

# Nothing of a sandbox may survive its run: no process in another pid
# namespace under the guard, and no sandbox cgroup.
assert_clean() {
    left=""
    for d in $GUARD_DIRS; do
        for pid in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
            ns=$(readlink "/proc/$pid/ns/pid" 2>/dev/null) || continue
            [ "$ns" = "$MYNS" ] || left="$left $pid($(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | head -c 60))"
        done
    done
    cg=$(guard_leftovers)
    is "$1: nothing left running" "$left$cg" ""
}

PYH="--lang python --json"

# The sandbox's processes are in cgroups below the guard.  gVisor's
# kernel shows its own cgroups: look at the sandbox's host processes.
if [ "$EXECUTOR" = gvisor ]; then
    "$HUTCH" run --lang python -e 'import time; print("up", flush=True); time.sleep(30)' \
        >"$T/cg.out" 2>&1 </dev/null &
    cgpid=$!
    # Until the program is up, however long a busy machine takes to start
    # it (the run's own timeout bounds the wait).
    while kill -0 "$cgpid" 2>/dev/null && ! grep -q up "$T/cg.out" 2>/dev/null; do
        sleep 0.1
    done
    sbpid=$(pgrep -f "runsc-sandbox --root=/run/hutch/gvisor/$cgpid\." | head -1)
    OUT=$(cat "/proc/${sbpid:-0}/cgroup" 2>/dev/null)
    kill "$cgpid"
    wait "$cgpid" 2>/dev/null
else
    # Seen from the host: inside, a cgroup namespace hides the path.
    "$HUTCH" run --lang python -e 'import os; os.execv("/usr/bin/sleep", ["sleep", "4'$$'"])' \
        >/dev/null 2>&1 </dev/null &
    cgpid=$!
    sbpid=""
    while kill -0 "$cgpid" 2>/dev/null && [ -z "$sbpid" ]; do
        sleep 0.1
        sbpid=$(pgrep -f "^sleep 4$$\$" | head -1)
    done
    OUT=$(cat "/proc/${sbpid:-0}/cgroup" 2>/dev/null)
    kill "$cgpid"
    wait "$cgpid" 2>/dev/null
fi
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    like "the sandbox is below the outer guard" \
        "$(echo "$OUT" | awk -F: '$1 == "0" { print $3 }')" "/hutch-guard-$$/"
else
    for c in memory pids; do
        like "the sandbox is below the outer guard ($c)" \
            "$(echo "$OUT" | awk -F: -v c="$c" '$2 == c { print $3 }')" "/hutch-guard-$$/"
    done
fi

# The pids limit, not the clock, must end the bomb: the program gets a long
# timeout (a fork costs tens of milliseconds on gVisor, more on a busy
# machine) and the test asserts that fork failed below the limit.  Were the
# limit not applied, the outer guard's (GUARD_PIDS) would stop it instead,
# far above 64.
run_hutch run $PYH --timeout 300000 --pids 64 -e '
import os, time
n = 0
while True:
    try:
        if os.fork() == 0:
            while True:
                time.sleep(1)
        n += 1
    except OSError:
        break
print("forks stopped after", n)'
is "fork bomb: stopped by the pids limit" "$(echo "$OUT" | json exit_code)" 0
like "fork bomb: fork fails inside" "$(echo "$OUT" | json stdout)" "forks stopped after"
n=$(echo "$OUT" | json stdout | awk '/forks stopped after/ { print $4 }')
ok "fork bomb: fork fails below the limit of 64 (after ${n:-?} forks)" \
    test "${n:-999}" -lt 64
ok "fork bomb: the host can still fork" true
assert_clean "fork bomb"

run_hutch run $PYH --memory 64 --timeout 20000 -e '
blocks = []
while True:
    blocks.append(bytearray(16 * 1024 * 1024))'
is "memory bomb: exit 137" "$(echo "$OUT" | json exit_code)" 137
is "memory bomb: oom reported" "$(echo "$OUT" | json oom)" true
like "memory bomb: explained" "$(echo "$OUT" | json message)" "memory limit"
assert_clean "memory bomb"

run_hutch run --lang javascript --json --memory 128 --timeout 20000 -e '
const a = []; while (true) a.push(Buffer.alloc(16 * 1024 * 1024, 1));'
is "javascript memory bomb: exit 137" "$(echo "$OUT" | json exit_code)" 137
assert_clean "javascript memory bomb"

# hutch's own memory: a result of 8 MB of text whose parse would hold about
# 300 MB in hutch (a JSON value costs ~80 bytes) passes the execution's
# memory budget, and the run says so; hutch itself stays small (it peaked
# at 640 MB before the budget).  ru_maxrss of hutch, not of the sandbox.
peak_kb() {
    python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(r.stdout, end="")' "$@"
}
OUT=$(peak_kb "$HUTCH" run $PYH -e '[0] * 4000000')
PEAK=$(echo "$OUT" | head -1)
OUT=$(echo "$OUT" | tail -n +2)
is "a result that would take 300 MB to hold: exit 125" "$(echo "$OUT" | json exit_code)" 125
like "... explained: over the execution's memory budget" "$(echo "$OUT" | json message)" \
    "of hutch's memory to hold, more than this execution has left of its"
is "... named the executor" "$(echo "$OUT" | json executor)" "$EXECUTOR"
ok "... and hutch stayed below 100 MB (peak ${PEAK} KiB)" test "${PEAK:-999999}" -lt 102400
assert_clean "oversized result"

# ... and every execution's budget draws on hutch's for all executions at
# once (here HUTCH_MEMORY_BUDGET_MB=8, below one execution's own 128 MiB):
# a result that fits its execution's budget but not hutch's stops it, saying
# which budget it passed.
OUT=$(HUTCH_MEMORY_BUDGET_MB=8 "$HUTCH" run $PYH -e '[0] * 200000')
is "a result past hutch's budget for all executions: exit 125" \
    "$(echo "$OUT" | json exit_code)" 125
like "... explained: hutch's budget for all executions" "$(echo "$OUT" | json message)" \
    "more than hutch has left of the 8 MiB it holds for all executions"
OUT=$(HUTCH_MEMORY_BUDGET_MB=8 "$HUTCH" run $PYH -e '[0] * 2000')
is "... while a small result under the same budget passes" "$(echo "$OUT" | json exit_code)" 0
assert_clean "result past hutch's budget"

# Killed by its own --timeout: the whole run (sandbox start and teardown
# included, however slow a busy machine makes them) ends before the
# default timeout would have.
DEFAULT_TIMEOUT_MS=$(awk '$1 == "#define" && $2 == "HUTCH_DEFAULT_TIMEOUT_MS" { print $3 }' \
    "$HUTCH_SRCDIR/src/caps.h")
: "${DEFAULT_TIMEOUT_MS:?no HUTCH_DEFAULT_TIMEOUT_MS in src/caps.h}"
start=$(date +%s%N)
run_hutch run $PYH --timeout 1000 -e 'while True: pass'
elapsed=$((($(date +%s%N) - start) / 1000000))
is "infinite loop: exit 124" "$(echo "$OUT" | json exit_code)" 124
is "infinite loop: timed_out" "$(echo "$OUT" | json timed_out)" true
like "infinite loop: ended by its own timeout" "$(echo "$OUT" | json message)" \
    "timed out after 1000 ms"
ok "infinite loop: the run ended before the default timeout (${elapsed} ms)" \
    test "$elapsed" -lt "$DEFAULT_TIMEOUT_MS"
assert_clean "infinite loop"

run_hutch run $PYH --timeout 2000 -e '
import sys
line = "x" * 4096 + "\n"
while True:
    sys.stdout.write(line)'
is "endless output: exit 124" "$(echo "$OUT" | json exit_code)" 124
is "endless output: truncated" "$(echo "$OUT" | json stdout_truncated)" true
ok "endless output: kept output is capped" test "${#OUT}" -lt 3000000
assert_clean "endless output"

# The host's disks: the root, and where Docker keeps its containers.
DISKS=/
[ "$EXECUTOR" = docker ] && DISKS="/ $(docker info -f '{{.DockerRootDir}}')"
avail() { df --output=avail $DISKS | tail -n +2 | awk '{ s += $1 } END { print s }'; }
avail_before=$(avail)
run_hutch run $PYH --timeout 20000 -e '
import os
chunk = b"\0" * (1 << 20)
n = 0
try:
    with open("/work/fill", "wb") as f:
        while True:
            f.write(chunk)
            f.flush()
            n += 1
except OSError as e:
    print("stopped", e.errno, n)'
like "disk fill of /work: stops with ENOSPC" "$(echo "$OUT" | json stdout)" "stopped 28"
n=$(echo "$OUT" | json stdout | awk '{print $3}')
ok "disk fill of /work: ENOSPC at its 256 MiB cap ($n MiB written)" \
    test "${n:-0}" -ge 250 -a "${n:-9999}" -le 260
avail_after=$(avail)
ok "disk fill of /work: the host disk is untouched ($DISKS: $((avail_before - avail_after)) KiB)" \
    test $((avail_before - avail_after)) -lt 100000
assert_clean "disk fill"

# A listener on the host's loopback: the sandbox must not reach it.
$PY -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0)); s.listen(5)
print(s.getsockname()[1], flush=True)
s.settimeout(15)
try:
    c, _ = s.accept(); print("CONNECTED", flush=True)
except OSError:
    pass' >"$T/listener.out" &
LPID=$!
for _ in $(seq 50); do [ -s "$T/listener.out" ] && break; sleep 0.1; done
PORT=$(head -1 "$T/listener.out")
run_hutch run $PYH -e '
import socket
print(sorted(n for _, n in socket.if_nameindex()))
print(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", '"$PORT"'))
    print("connected")
except OSError as e:
    print("refused", e.errno)'
like "network: only loopback inside (interfaces, /proc/net/dev)" \
    "$(echo "$OUT" | json stdout)" "['lo']
['lo']"
like "network: connect to 127.0.0.1 fails" "$(echo "$OUT" | json stdout)" "refused"
kill $LPID 2>/dev/null
wait $LPID 2>/dev/null
unlike "network: the host listener saw nothing" "$(cat "$T/listener.out")" "CONNECTED"
assert_clean "network"

run_hutch run $PYH -e '
import os
out = []
for p in ["/etc/shadow", "/root/.bashrc", "/root", "/home", "/proc/1/environ"]:
    try:
        if os.path.isdir(p):
            out.append((p, "listed", os.listdir(p)))
        else:
            out.append((p, "read", open(p).read()[:20]))
    except OSError as e:
        out.append((p, "denied", e.errno))
print(out)'
S=$(echo "$OUT" | json stdout)
like "secrets: /etc/shadow is not there" "$S" "('/etc/shadow', 'denied'"
like "secrets: /root is not there" "$S" "('/root', 'denied'"
unlike "secrets: no root: line from shadow" "$S" "root:"

run_hutch run $PYH -e '
import os
res = {}
for p in ["/usr/hutch-test", "/etc/hutch-test", "/hutch-test", "/run/hutch/x", "/proc/sys/kernel/hostname"]:
    try:
        open(p, "w").write("x")
        res[p] = "written"
    except OSError as e:
        res[p] = e.errno
open("/work/ok", "w").write("x"); open("/tmp/ok", "w").write("x")
res["work+tmp"] = "ok"
print(res)'
S=$(echo "$OUT" | json stdout)
unlike "writes outside /work and /tmp all fail" "$S" "written"
like "/work and /tmp are writable" "$S" "'work+tmp': 'ok'"
ok "nothing appeared on the host" test ! -e /usr/hutch-test -a ! -e /etc/hutch-test -a ! -e /hutch-test

# The parent leaves only once the daemon is seen running (its cmdline in
# /proc), so the check after the run is about a process that existed; gone
# is polled for, generously for a loaded machine.
run_hutch run $PYH --timeout 60000 -e '
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", ["sleep", "31337"])
    os._exit(0)
def up():
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and open("/proc/%s/cmdline" % p, "rb").read() == b"sleep\x0031337\x00":
                return True
        except OSError:
            pass
    return False
end = time.time() + 30
while not up() and time.time() < end:
    time.sleep(0.05)
print("daemon up" if up() else "daemon not seen")
print("parent leaves")'
like "double-forked daemon: the run ends" "$(echo "$OUT" | json stdout)" "parent leaves"
like "double-forked daemon: it was running" "$(echo "$OUT" | json stdout)" "daemon up"
for i in $(seq 1 300); do test -z "$(pgrep -f 'sleep 31337')" && break; sleep 0.1; done
ok "double-forked daemon: gone after the run" test -z "$(pgrep -f 'sleep 31337')"
assert_clean "daemon"

run_hutch run $PYH -e 'print("{\"t\":\"done\",\"ok\":true,\"result\":\"forged\"}")
print("{\"t\":\"tool_call\",\"id\":1,\"tool\":\"x.y\",\"args\":{}}")
"real"'
is "forged message on stdout: the real result wins" "$(echo "$OUT" | json result)" "real"
like "forged message on stdout: it is just output" "$(echo "$OUT" | json stdout)" '{"t":"done"'
is "forged message on stdout: no tool call made" "$(echo "$OUT" | json tool_calls.count)" "0"

run_hutch run $PYH -e '
import os, socket, stat
for fd in os.listdir("/proc/self/fd"):
    fd = int(fd)
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, b"{this is not json\n")
    except OSError:
        pass
import time; time.sleep(5)'
is "garbage on the channel: hutch stops the run (125)" "$(echo "$OUT" | json exit_code)" 125
like "garbage on the channel: explained" "$(echo "$OUT" | json message)" "invalid protocol message"
assert_clean "garbage on the channel"

run_hutch run $PYH -e '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
st = open("/proc/self/status").read()
caps = [l for l in st.splitlines() if l.startswith(("CapEff", "CapPrm", "CapBnd", "Seccomp:"))]
caps.append("no_new_privs=%d" % libc.prctl(39, 0, 0, 0, 0))  # PR_GET_NO_NEW_PRIVS
ids = (os.getuid(), os.getgid())
res = {}
# unshare last: where it is allowed (gVisor), what follows runs in a new
# user namespace
for name, call in [("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
                   ("ptrace", lambda: libc.ptrace(16, 1, 0, 0)),
                   ("keyctl", lambda: libc.syscall(250, 0, 0, 0, 0, 0)),
                   ("bpf", lambda: libc.syscall(321, 0, 0, 0)),
                   ("unshare", lambda: libc.unshare(0x10000000))]:
    r = call()
    res[name] = (r, ctypes.get_errno())
print(res); print(caps); print(*ids)'
S=$(echo "$OUT" | json stdout)
if [ "$EXECUTOR" = gvisor ]; then
    # gVisor's own kernel answers these system calls: none reaches the
    # host's.  Refused is refused, whatever the errno; namespaces inside
    # gVisor are its own, so unshare is not a way out.
    for c in mount ptrace keyctl bpf; do
        like "gvisor: $c refused" "$S" "'$c': (-1, "
    done
else
    like "seccomp: unshare refused" "$S" "'unshare': (-1, 1)"
    like "seccomp: mount refused" "$S" "'mount': (-1, 1)"
    like "seccomp: ptrace refused" "$S" "'ptrace': (-1, 1)"
    like "seccomp: keyctl refused" "$S" "'keyctl': (-1, 1)"
    like "seccomp: bpf refused" "$S" "'bpf': (-1, 1)"
    like "seccomp filter on" "$S" "Seccomp:\t2"
fi
like "no capabilities" "$S" "CapEff:\t0000000000000000"
like "empty bounding set" "$S" "CapBnd:\t0000000000000000"
like "no_new_privs" "$S" "no_new_privs=1"
if [ "$EXECUTOR" = docker ]; then
    # A host uid (and gid) of the container's own, from the docker
    # executor's range (plugins/docker/docker.c, uid_take()).
    ids=$(echo "$S" | tail -n 1)
    u=${ids% *} g=${ids#* }
    ok "not root inside: a host uid of its own ($ids)" \
        test "$u" = "$g" -a "$u" -ge $((0x10000000)) -a "$u" -le $((0x4fffffff))
else
    like "not root inside" "$S" "1000 1000"
fi

is_local || . "$HUTCH_SRCDIR/tests/hostile/init.sh"

# On local, init (pid 1) is a fork of hutch with the program's uid: kill(1)
# is permitted, and the pid namespace is what protects init.  The kernel
# drops a signal sent to init from inside unless init handles it, so init
# must catch none (hutch's own SIGINT/SIGTERM/SIGHUP handlers are not
# inherited); then no signal has any effect and the run ends normally.
# (Where Landlock scopes signals, kill(1) is refused outright: either way.)
# Not dumpable: its environment and maps are closed; its argv is not
# hutch's.
if is_local; then
    run_hutch run $PYH --out "$T/hutch-init-marker" -e '
import os, time
res = {}
st = dict(l.split(":\t", 1) for l in open("/proc/1/status").read().splitlines() if ":\t" in l)
res["SigCgt"] = st["SigCgt"].strip()
for sig in (1, 2, 3, 10, 12, 14, 15, 9, 19):
    try:
        os.kill(1, sig)
        res["kill %d" % sig] = "sent"
    except OSError as e:
        res["kill %d" % sig] = e.errno
time.sleep(0.5)
for f in ("environ", "maps", "mem", "auxv"):
    try:
        res[f] = "read %d" % len(open("/proc/1/" + f, "rb").read(4096))
    except OSError as e:
        res[f] = e.errno
res["cmdline"] = open("/proc/1/cmdline", "rb").read().decode(errors="replace")
print(sorted(res.items()))
"still mine"'
    S=$(echo "$OUT" | json stdout)
    like "local pid 1: it catches no signal" "$S" "('SigCgt', '0000000000000000')"
    is "local pid 1: signals from the program have no effect, the run ends normally" \
        "$(echo "$OUT" | json exit_code) $(echo "$OUT" | json result)" "0 still mine"
    unlike "local pid 1: /proc/1/environ, maps, mem, auxv are closed" "$S" "'read "
    unlike "local pid 1: its cmdline is not hutch's" "$S" "hutch-init-marker"
    like "local pid 1: its cmdline says init" "$S" "('cmdline', 'init"
    assert_clean "local pid 1"
fi

# Socket families are an allow list (unix, IPv4, IPv6, netlink routing):
# vsock would reach the hypervisor's sockets, outside any network
# namespace.  The sockets are only created, never bound.
run_hutch run $PYH -e '
import socket
res = {}
for name, fam, typ in [("vsock", 40, socket.SOCK_STREAM), ("packet", 17, socket.SOCK_RAW),
                       ("alg", 38, socket.SOCK_SEQPACKET), ("bluetooth", 31, socket.SOCK_STREAM),
                       ("appletalk", 5, socket.SOCK_DGRAM), ("unspec", 0, socket.SOCK_STREAM),
                       ("family 63", 63, socket.SOCK_STREAM), ("family 64", 64, socket.SOCK_STREAM)]:
    try:
        socket.socket(fam, typ, 0).close()
        res[name] = "created"
    except OSError as e:
        res[name] = e.errno
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    res["vsock pair"] = "created"
except OSError as e:
    res["vsock pair"] = e.errno
for name, fam in [("unix", socket.AF_UNIX), ("inet", socket.AF_INET), ("inet6", socket.AF_INET6)]:
    socket.socket(fam, socket.SOCK_STREAM).close()
    res[name] = "created"
socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
res["netlink route"] = "created"
print(sorted(res.items()))'
S=$(echo "$OUT" | json stdout)
is "socket families: the allowed ones work, every other is refused (exit)" \
    "$(echo "$OUT" | json exit_code)" 0
for f in vsock "vsock pair" packet alg bluetooth appletalk unspec "family 63" "family 64"; do
    if [ "$EXECUTOR" = gvisor ]; then
        # gVisor's own kernel answers: refused is refused, whatever the errno.
        unlike "socket families: $f refused" "$S" "('$f', 'created')"
    else
        like "socket families: $f refused with EAFNOSUPPORT" "$S" "('$f', 97)"
    fi
done
for f in unix inet inet6 "netlink route"; do
    like "socket families: $f allowed" "$S" "('$f', 'created')"
done

# Each sandbox has a network namespace of its own: a second sandbox neither
# sees the first one's listeners (/proc/net/tcp, /proc/net/unix) nor finds
# their port or abstract name taken.
"$HUTCH" run --lang python --timeout 60000 -e '
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 47011)); s.listen()
u = socket.socket(socket.AF_UNIX); u.bind("\0hutch-hostile-squat"); u.listen()
print("bound", flush=True)
time.sleep(50)' >"$T/squat.out" 2>&1 </dev/null &
SQPID=$!
while kill -0 "$SQPID" 2>/dev/null && ! grep -q bound "$T/squat.out"; do sleep 0.1; done
like "own network namespace: the first sandbox holds 127.0.0.1:47011 and an abstract name" \
    "$(cat "$T/squat.out")" "bound"
run_hutch run $PYH -e '
import socket
res = {"tcp listed": ":B7A3 " in open("/proc/net/tcp").read(),
       "unix listed": "@hutch-hostile-squat" in open("/proc/net/unix").read()}
s = socket.socket()
try:
    s.bind(("127.0.0.1", 47011)); s.listen(); res["tcp bind"] = "ok"
except OSError as e:
    res["tcp bind"] = e.errno
u = socket.socket(socket.AF_UNIX)
try:
    u.bind("\0hutch-hostile-squat"); res["unix bind"] = "ok"
except OSError as e:
    res["unix bind"] = e.errno
print(sorted(res.items()))'
kill "$SQPID" 2>/dev/null
wait "$SQPID" 2>/dev/null
S=$(echo "$OUT" | json stdout)
like "own network namespace: the port is free in a second sandbox" "$S" "('tcp bind', 'ok')"
like "own network namespace: the abstract name is free too" "$S" "('unix bind', 'ok')"
like "own network namespace: /proc/net/tcp does not list the other's listener" "$S" \
    "('tcp listed', False)"
like "own network namespace: /proc/net/unix does not list the other's name" "$S" \
    "('unix listed', False)"
assert_clean "two sandboxes on one port"

# Per-user kernel quotas: a sandbox that takes every inotify instance and
# queues timers until refused must not take them from another sandbox
# running meanwhile, nor from the host's root.  The kernel charges them to
# a host uid: the local executor as root gives each sandbox one of its own,
# the docker executor one per container (with a shared uid, the second
# sandbox's inotify_init fails with EMFILE).  Timers: the runner's
# RLIMIT_SIGPENDING caps a sandbox at HUTCH_SANDBOX_SIGPENDING (1024) on
# local and docker; the kernel compares the uid's count with the caller's
# limit, so with a shared uid the first sandbox's 1024 would leave the
# second none (EAGAIN).  gVisor's kernel counts per sandbox.
QUOTA_PROG='
import ctypes, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int),
                ("notify", ctypes.c_int), ("pad", ctypes.c_byte * 48)]
tid = ctypes.c_void_p()
def timer():
    return libc.timer_create(1, ctypes.byref(sigevent(None, signal.SIGUSR1, 0)), ctypes.byref(tid))
if sys.argv[-1] != "probe":
    fds = timers = 0
    while libc.inotify_init1(0) >= 0 and fds < 10000:
        fds += 1
    e1 = ctypes.get_errno()
    while timers < 4096 and timer() == 0:
        timers += 1
    print("exhausted", fds, e1, timers, flush=True)
    time.sleep(100)
else:
    fd = libc.inotify_init1(0)
    print("inotify", "ok" if fd >= 0 else ctypes.get_errno())
    print("timer", "ok" if timer() == 0 else ctypes.get_errno())
'
printf '%s' "$QUOTA_PROG" >"$T/quota.py"
"$HUTCH" run --lang python --timeout 120000 "$T/quota.py" >"$T/quota.out" 2>&1 </dev/null &
QPID=$!
# Until the first sandbox holds everything, however long a busy machine
# takes (its own timeout bounds the wait).
while kill -0 "$QPID" 2>/dev/null && ! grep -q exhausted "$T/quota.out"; do sleep 0.1; done
run_hutch run $PYH --timeout 60000 -e "import sys; sys.argv.append('probe')
$QUOTA_PROG"
OTHER=$(echo "$OUT" | json stdout)
HOSTQ=$($PY -c "import sys; sys.argv.append('probe')
$QUOTA_PROG")
kill "$QPID" 2>/dev/null
wait "$QPID" 2>/dev/null
like "per-user quotas: the sandbox ran out of inotify instances" "$(cat "$T/quota.out")" \
    "exhausted"
like "per-user quotas: another sandbox can still inotify_init meanwhile" "$OTHER" "inotify ok"
like "per-user quotas: another sandbox can still create a timer meanwhile" "$OTHER" "timer ok"
like "per-user quotas: root on the host can still inotify_init meanwhile" "$HOSTQ" "inotify ok"
like "per-user quotas: root on the host can still create a timer meanwhile" "$HOSTQ" "timer ok"
if [ "$EXECUTOR" != gvisor ]; then
    n=$(awk '/exhausted/ { print $4 }' "$T/quota.out")
    ok "per-user quotas: pending signals capped per sandbox ($n timers)" \
        test "${n:-4096}" -lt 4096
fi
assert_clean "per-user quotas"

# What of the host a sandbox sees: nothing of hutch's command line (the
# local executor's init is a fork of hutch), not the host kernel's command
# line, build configuration, boot id or build information (/sys/kernel's
# BTF, notes, vmcoreinfo), nor which CPU vulnerabilities it mitigates; no
# host path in its mounts (on Docker and Podman, hutch-init's view: not the
# engine's data root, its overlay's directories, nor a volume's or a bound
# file's host path) or cgroups.
run_hutch run $PYH --out "$T/hutch-leak-marker" -e '
import os
res = {}
for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
    try:
        res["cmdline " + pid] = open("/proc/%s/cmdline" % pid).read().replace("\0", " ")
    except OSError:
        pass
for f in ["cmdline", "sys/kernel/random/boot_id", "config.gz", "keys", "timer_list"]:
    try:
        res[f] = len(open("/proc/" + f, "rb").read())
    except OSError as e:
        res[f] = "denied"
for f in ["/sys/kernel/btf/vmlinux", "/sys/kernel/notes", "/sys/kernel/vmcoreinfo"]:
    try:
        res[f] = len(open(f, "rb").read())
    except OSError as e:
        res[f] = "denied"
try:
    res["vulnerabilities"] = sorted(os.listdir("/sys/devices/system/cpu/vulnerabilities"))
except OSError:
    res["vulnerabilities"] = "denied"
for f in ["self/mountinfo", "self/cgroup"]:
    res[f] = open("/proc/" + f).read()
print(sorted(res.items()))
print("CGROUP", sorted(set(l.split(":", 2)[2] for l in open("/proc/self/cgroup").read().splitlines())))
print("UNIX", [l.split()[7] for l in open("/proc/net/unix").readlines()[1:] if len(l.split()) > 7])'
S=$(echo "$OUT" | json stdout)
like "leaks: the program ran" "$S" "'self/mountinfo'"
unlike "leaks: no process shows hutch's arguments" "$S" "hutch-leak-marker"
unlike "leaks: not the host kernel's command line" "$S" "$(head -c 40 /proc/cmdline)"
unlike "leaks: not the host's boot id" "$S" "$(cat /proc/sys/kernel/random/boot_id)"
empty_or_absent() {
    case "$S" in
    *"('$1', 0)"* | *"('$1', 'denied')"*) return 0 ;;
    *"('$1', "*) return 1 ;;
    esac
}
# gVisor's /proc is its own kernel's (a made-up command line, its own boot
# id): the host's values are checked above.
if [ "$EXECUTOR" != gvisor ]; then
    for f in cmdline sys/kernel/random/boot_id config.gz keys timer_list; do
        ok "leaks: /proc/$f is empty or absent" empty_or_absent "$f"
    done
fi
# The host has them (root reads them), so empty in the sandbox is masked.
for f in /sys/kernel/btf/vmlinux /sys/kernel/notes /sys/kernel/vmcoreinfo; do
    [ -s "$f" ] || [ -n "$(head -c 1 "$f" 2>/dev/null)" ] ||
        echo "# the host has no $f to hide"
    ok "leaks: $f is empty or absent" empty_or_absent "$f"
done
[ -n "$(ls /sys/devices/system/cpu/vulnerabilities 2>/dev/null)" ] ||
    echo "# the host lists no CPU vulnerabilities to hide"
ok "leaks: /sys/devices/system/cpu/vulnerabilities lists nothing" \
    grep -qE "\('vulnerabilities', (\[\]|'denied')\)" <<<"$S"
unlike "leaks: no host path in mountinfo" "$S" "$HUTCH_RUNNER_DIR"
unlike "leaks: no socket directory in mountinfo" "$S" "/run/hutch/$EXECUTOR/"
if [ "$EXECUTOR" = docker ]; then
    # The engine's data root (/var/lib/docker, or Podman's storage), where
    # its overlay's layers, its volumes and its containers' files live.
    ROOTDIR=$(docker info -f '{{.DockerRootDir}}' 2>/dev/null)
    like "leaks: the engine says where its data root is" "$ROOTDIR" "/"
    unlike "leaks: mountinfo names no path of the engine's data root ($ROOTDIR)" "$S" \
        "${ROOTDIR:-/var/lib/docker}"
    unlike "leaks: mountinfo names no /var/lib/docker" "$S" "/var/lib/docker"
    unlike "leaks: mountinfo shows no overlay upper layer of the engine's" "$S" "upperdir="
fi
unlike "leaks: no host cgroup path" "$S" "hutch-guard-"
if [ "$EXECUTOR" = docker ]; then
    # A cgroup namespace of its own: not /docker/ID nor the parent's path.
    is "leaks: /proc/self/cgroup says / only" "$(echo "$S" | grep '^CGROUP ')" "CGROUP ['/']"
fi
if [ "$EXECUTOR" != gvisor ]; then
    # The plugin's sockets live in its state directory, /run/hutch/EXECUTOR/.
    U=$(echo "$S" | grep '^UNIX ')
    like "leaks: /proc/net/unix read" "$U" "UNIX ["
    unlike "leaks: no host socket path in /proc/net/unix" "$U" "/run/hutch/$EXECUTOR/"
fi

# --- hutch killed with SIGKILL --------------------------------------------
# A client may end hutch with SIGKILL (Codex does, right after SIGTERM).
# Its sandboxes stay behind, the warm ones too, and any hutch that starts
# removes them, whichever executor it uses itself: the next hutch here is
# a local one.  The victims: a `hutch run` in the middle of its program,
# started from a cgroup of its own (where a hutch of another cgroup would
# not look for a local sandbox's cgroups), and a `hutch serve` with its
# warm pool.  A hutch that lives meanwhile keeps everything: what goes is
# found by its owner's pid and start time (hutch_resources), and the live
# one's sandbox must come through the sweep running.
SLEEPER='import time
print("up", flush=True)
time.sleep(3600)'
# until PID's output FILE says "up", or PID ended
until_up() {
    while kill -0 "$1" 2>/dev/null && ! grep -q up "$2" 2>/dev/null; do sleep 0.1; done
    grep -q up "$2" 2>/dev/null
}
# until hutch PID (started at START) has a sandbox (more than its state
# directory), or PID ended; at most 600 s however busy the machine is
has_sandbox() { hutch_resources "$1" "$2" | grep -qv '^state '; }
until_sandbox() {
    for _ in $(seq 6000); do
        has_sandbox "$1" "$2" && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
executor_lock -x
"$HUTCH" run --lang python --timeout 3600000 -e "$SLEEPER" >"$T/live.out" 2>&1 </dev/null &
LIVE=$!
(guard_child_enter kill9 && exec "$HUTCH" run --lang python --timeout 3600000 -e "$SLEEPER") \
    >"$T/victim.out" 2>&1 </dev/null &
VICTIM=$!
mkfifo "$T/serve.in"
"$HUTCH" serve <"$T/serve.in" >"$T/serve.out" 2>&1 &
SERVE=$!
exec {SERVE_IN}>"$T/serve.in"
ok "kill -9: a live hutch's program runs" until_up "$LIVE" "$T/live.out"
ok "kill -9: the victim's program runs" until_up "$VICTIM" "$T/victim.out"
L_START=$(proc_start "$LIVE")
V_START=$(proc_start "$VICTIM")
S_START=$(proc_start "$SERVE")
ok "kill -9: the victim serve's pool has a sandbox" until_sandbox "$SERVE" "$S_START"
V_HAD=$(hutch_resources "$VICTIM" "$V_START")
ok "kill -9: the run's sandbox is seen by its hutch's pid and start ($(echo $V_HAD))" \
    has_sandbox "$VICTIM" "$V_START"
kill -9 "$VICTIM" "$SERVE"
wait "$VICTIM" "$SERVE" 2>/dev/null
exec {SERVE_IN}>&-
# (Another hutch on this machine may have swept them already: what they
# left is asserted after the next start only.)
echo "# left by the killed run: $(hutch_resources "$VICTIM" "$V_START" | tr '\n' ' ')"
echo "# left by the killed serve: $(hutch_resources "$SERVE" "$S_START" | tr '\n' ' ')"
run_hutch run --executor local --lang python -e 'print("next")'
is "kill -9: the next hutch (local) runs" "$OUT" "next"
is "kill -9: nothing of the killed run outlives the next hutch's start" \
    "$(hutch_resources "$VICTIM" "$V_START" | tr '\n' ' ')" ""
is "kill -9: nothing of the killed serve and its pool either" \
    "$(hutch_resources "$SERVE" "$S_START" | tr '\n' ' ')" ""
ok "kill -9: the live hutch's sandbox came through the sweep" has_sandbox "$LIVE" "$L_START"
ok "kill -9: ... its hutch still runs" kill -0 "$LIVE"
kill -TERM "$LIVE"
wait "$LIVE"
L_RC=$?
unlike "kill -9: ... and its run never lost its sandbox" "$(cat "$T/live.out")" "ended under"
is "kill -9: ... ended by SIGTERM, it leaves nothing" \
    "$(hutch_resources "$LIVE" "$L_START" | tr '\n' ' ')" ""
echo "# the live run's end: $L_RC $(tail -c 300 "$T/live.out" | tr '\n' ' ')"
executor_lock -s
assert_clean "kill -9"

done_testing
