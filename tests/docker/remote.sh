#!/bin/bash
# remote.sh — DOCKER_HOST other than the default socket: tcp:// in clear,
# tcp:// with TLS (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) and what goes wrong
# with them.  The daemon is the real dockerd, reached through socat on
# loopback (plain, and TLS with a CA and client certificates made here), so
# no traffic leaves 127.0.0.1 and dockerd's own configuration is untouched.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
for tool in socat openssl; do
    command -v $tool >/dev/null || {
        case "${CI:-}" in
        "" | false | 0) skip_all "$tool is not installed" ;;
        esac
        echo "not ok 1 - $tool is installed (contrib/test.sh installs it)"
        echo "1..1"
        exit 1
    }
done
T=$(mktemp -d)
PIDS=""
trap 'kill $PIDS 2>/dev/null; rm -rf "$T"' EXIT
SOCK=/var/run/docker.sock

free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# --- certificates: a CA, the server's (for 127.0.0.1), the client's ------
C=$T/certs
mkdir -p "$C" "$T/other"
(
    cd "$C" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hutch-test-ca \
        -keyout ca-key.pem -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server-key.pem \
        -out server.csr
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -days 2 -extfile server.ext -out server.pem
    openssl req -newkey rsa:2048 -nodes -subj /CN=hutch-client -keyout key.pem -out client.csr
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -days 2 -extfile client.ext -out cert.pem
    # A CA that signed nothing here: the server must not be trusted with it.
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca \
        -keyout "$T/other/ca-key.pem" -out "$T/other/ca.pem"
    cp key.pem cert.pem "$T/other/"
) >"$T/openssl.log" 2>&1
ok "test certificates made" test -s "$C/cert.pem" -a -s "$C/server.pem"

P1=$(free_port)
socat "TCP-LISTEN:$P1,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$SOCK" 2>"$T/socat1.log" &
PIDS="$PIDS $!"
P2=$(free_port)
socat "OPENSSL-LISTEN:$P2,bind=127.0.0.1,reuseaddr,fork,cert=$C/server.pem,key=$C/server-key.pem,cafile=$C/ca.pem,verify=1" \
    "UNIX-CONNECT:$SOCK" 2>"$T/socat2.log" &
PIDS="$PIDS $!"
ok "plain TCP relay listens on 127.0.0.1:$P1" wait_port "$P1"
ok "TLS relay listens on 127.0.0.1:$P2" wait_port "$P2"

# --- tcp:// in clear ---------------------------------------------------------
DOCKER_HOST=tcp://127.0.0.1:$P1 run_hutch run --lang python -e 'print("over tcp")'
is "tcp://: the run works" "$OUT" "over tcp"
is "tcp://: exit 0" "$RC" 0
DOCKER_HOST=tcp://127.0.0.1:$P1 run_hutch doctor
like "tcp://: doctor names the daemon" "$OUT" "tcp://127.0.0.1:$P1: Engine"
# Egress needs a socket of hutch's in the container: an engine reached over
# TCP (here the same daemon) gets none, and the log says why; an execution
# whose policy gives it egress is refused, one without it finds
# 127.0.0.1:3128 refusing (init was given no port).
printf 'return { egress = { allow = { "127.0.0.1:9" } } }' >"$T/egress.lua"
DOCKER_HOST=tcp://127.0.0.1:$P1 run_hutch run -vv --policy "$T/egress.lua" --lang python \
    -e 'print("ran")'
is "tcp://, egress: the execution is refused" "$RC" 125
like "  saying the executor's sandboxes cannot carry connections" "$ERR" \
    "cannot carry a program's connections"
like "  and the log says why" "$ERR" "no egress: the engine"
unlike "  the program never ran" "$OUT" "ran"
DOCKER_HOST=tcp://127.0.0.1:$P1 run_hutch run --lang python -e 'import socket
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5)
    print("connected")
except OSError as e:
    print(type(e).__name__)'
is "tcp://, no egress: 127.0.0.1:3128 refuses" "$OUT" "ConnectionRefusedError"

# --- tcp:// with TLS ------------------------------------------------------------
export DOCKER_TLS_VERIFY=1
DOCKER_HOST=tcp://127.0.0.1:$P2 DOCKER_CERT_PATH=$C run_hutch run --lang javascript \
    -e 'console.log("over tls")'
is "TLS: the run works" "$OUT" "over tls"
is "TLS: exit 0" "$RC" 0
mkdir -p "$T/in" "$T/out"
echo payload >"$T/in/x.txt"
DOCKER_HOST=tcp://127.0.0.1:$P2 DOCKER_CERT_PATH=$C run_hutch run --lang python \
    --file "$T/in/x.txt:x.txt" --out "$T/out" \
    -e 'open("out/y.txt", "w").write(open("x.txt").read().upper())'
is "TLS: files in and out" "$(cat "$T/out/y.txt" 2>/dev/null)" "PAYLOAD"

DOCKER_HOST=tcp://127.0.0.1:$P2 DOCKER_CERT_PATH=$T/other run_hutch run --lang python -e 'print(1)'
is "TLS, server not signed by our CA: exit 125" "$RC" 125
like "TLS, server not signed by our CA: says it cannot reach the daemon" "$ERR" "Docker"
DOCKER_HOST=tcp://127.0.0.1:$P2 DOCKER_CERT_PATH=$T/nowhere run_hutch run --lang python -e 'print(1)'
is "TLS, no certificates: exit 125" "$RC" 125
like "TLS, no certificates: says which file and how to fix" "$ERR" "DOCKER_CERT_PATH"
unset DOCKER_TLS_VERIFY
# A TLS port spoken to in clear: the daemon's answer never comes.
DOCKER_HOST=tcp://127.0.0.1:$P2 run_hutch run --lang python -e 'print(1)'
is "clear text to a TLS port: exit 125" "$RC" 125

# --- what is not a daemon --------------------------------------------------------
DOCKER_HOST=tcp://127.0.0.1:$(free_port) run_hutch run --lang python -e 'print(1)'
is "nothing listening: exit 125" "$RC" 125
like "nothing listening: says how to fix" "$ERR" "is dockerd running?"
DOCKER_HOST=ftp://127.0.0.1/ run_hutch run --lang python -e 'print(1)'
is "ftp:// DOCKER_HOST: exit 125" "$RC" 125
like "ftp:// DOCKER_HOST: says what is supported" "$ERR" "only unix:// and tcp://"
DOCKER_HOST=unix://$T/no.sock run_hutch run --lang python -e 'print(1)'
is "missing socket: exit 125" "$RC" 125
like "missing socket: names it" "$ERR" "$T/no.sock"

done_testing
