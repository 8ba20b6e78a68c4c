#!/bin/bash
# egress_init.sh — a hostile program against the sandbox's end of egress on
# the executors whose 127.0.0.1:3128 is hutch-init's forwarder (docker,
# gvisor: plugins/init/forward.c), where tests/run/egress.sh checks what
# the proxy does with a connection.  The program floods the port (init's
# cap holds, init lives on, the sandbox still answers and egress still
# works), reaches for the unix socket behind it (it does not get it: the
# program's view hides it, or it is root's, mode 0600), tries to take the
# port (init holds it) or to signal init (another uid), and holds no
# descriptor of init's.  $HUTCH_EXECUTOR: docker or gvisor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
is_local && skip_all "the local executor's port is the core's own listener (tests/run/egress.sh)"
executor_require
T=$(mktemp -d)
SRV=
cleanup() {
    [ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

"$PY" "$HUTCH_SRCDIR/tests/lib/egress_servers.py" "$T" 2>"$T/servers.err" &
SRV=$!
for _ in $(seq 600); do [ -f "$T/ports" ] && break; sleep 0.1; done
[ -f "$T/ports" ] || { cat "$T/servers.err"; echo "Bail out! the origin servers did not start"; exit 1; }
read -r HP _ <"$T/ports"
export HUTCH_WORKSPACES="$T/ws"
# Enough connections over the execution's life for the flood and what
# follows it: the caps under test are init's, not the proxy's.
cat >"$T/p.lua" <<EOF
return { egress = { allow = { "127.0.0.1:$HP" }, max_connections = 4096 } }
EOF
erun() { # CODE: python, --json, with egress
    run_hutch run --json --policy "$T/p.lua" --timeout 120000 --lang python -e "$1"
}
GET='
import urllib.request
def get(path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:'"$HP"'" + path, timeout=60) as r:
            return "%d %s" % (r.status, r.read().decode()[:40])
    except Exception as e:
        return "error %s: %s" % (type(e).__name__, e)
'

# --- a flood of connections -------------------------------------------------------
# 200 held at once (the program's RLIMIT_NOFILE is 256): init carries
# HUTCH_SANDBOX_EGRESS_CONNS (64) and answers the rest 503 at once; then
# 1000 more opened and closed one after the other.
erun "$GET"'
import socket, time
held = [socket.create_connection(("127.0.0.1", 3128), timeout=10) for _ in range(200)]
time.sleep(1)
busy = 0
for s in held:
    s.setblocking(False)
    try:
        if b"too many connections" in s.recv(4096):
            busy += 1
    except BlockingIOError:
        pass
print("refused by init:", busy)
for s in held:
    s.close()
for _ in range(1000):
    socket.create_connection(("127.0.0.1", 3128), timeout=10).close()
time.sleep(1)
print("after:", get("/echo"))'
stdout=$(echo "$OUT" | json stdout)
is "a flood: the program ends normally" "$(echo "$OUT" | json exit_code)" 0
refused=$(echo "$stdout" | sed -n 's/^refused by init: //p')
ok "200 at once: init refuses those past its cap, at once, saying why ($refused)" \
    test "${refused:-0}" -ge 136
like "after 1200 connections init still carries one to the origin" "$stdout" "after: 200 GET /echo"
run_hutch run --json --policy "$T/p.lua" --lang python -e 'print("next")'
is "and the next sandbox answers" "$(echo "$OUT" | json stdout)" "next"

# --- the socket behind the port ---------------------------------------------------
erun '
import os, socket
for d in ("/run/hutch/io", "/run/hutch/egress"):
    try:
        print(d, sorted(os.listdir(d)))
    except OSError as e:
        print(d, type(e).__name__)
for p in ("/run/hutch/io/egress", "/run/hutch/egress/egress"):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p)
        print(p, "connected")
    except OSError as e:
        print(p, type(e).__name__)'
stdout=$(echo "$OUT" | json stdout)
unlike "the program cannot connect to the egress socket itself" "$stdout" "connected"
unlike "  nor list more of /run/hutch/io than the egress socket (init's four are gone)" \
    "$stdout" "'ctl'"
if [ "$EXECUTOR" = gvisor ]; then
    like "  gVisor: it sees the egress socket, root's, mode 0600: EACCES" "$stdout" \
        "/run/hutch/io/egress PermissionError"
else
    like "  docker: the program's view has no /run/hutch/egress" "$stdout" \
        "/run/hutch/egress FileNotFoundError"
fi

# --- the port, init's descriptors, init itself ------------------------------------
erun "$GET"'
import errno, os, signal, socket, stat
for addr in ("127.0.0.1", "0.0.0.0"):
    b = socket.socket()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        b.bind((addr, 3128))
        b.listen()
        print("bound", addr)
    except OSError as e:
        print("bind", addr, errno.errorcode[e.errno])
mine = []
for fd in range(1024):
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            continue
        s = socket.socket(fileno=os.dup(fd))
        mine.append(s.getsockname())
        s.close()
    except OSError:
        pass
print("listener inherited:", any(n == ("127.0.0.1", 3128) for n in mine))
for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
    try:
        os.kill(1, sig)
        print("signalled init", sig)
    except OSError as e:
        print("kill", int(sig), errno.errorcode[e.errno])
print("after:", get("/echo"))'
stdout=$(echo "$OUT" | json stdout)
like "the program cannot bind 127.0.0.1:3128 (init holds it)" "$stdout" "bind 127.0.0.1 EADDRINUSE"
like "  nor 0.0.0.0:3128, with SO_REUSEADDR and SO_REUSEPORT" "$stdout" "bind 0.0.0.0 EADDRINUSE"
like "the program holds no descriptor of init's listener" "$stdout" "listener inherited: False"
unlike "the program cannot signal init" "$stdout" "signalled init"
like "  (EPERM)" "$stdout" "kill 9 EPERM"
like "  and egress still works after" "$stdout" "after: 200 GET /echo"

done_testing
