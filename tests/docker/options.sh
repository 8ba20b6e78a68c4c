#!/bin/bash
# options.sh — a policy's executor_options on the docker executor: the
# container runtime (runsc: gVisor under Docker), and what it refuses.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

policy() { # FILE OPTIONS
    printf 'return {\n  executor = "docker",\n  executor_options = { docker = %s },\n}\n' \
        "$2" >"$1"
}

runsc_args=$(docker info -f '{{json .Runtimes}}' 2>/dev/null)
case "$runsc_args" in
*'"runsc"'*'--host-uds=open'*)
    policy "$T/runsc.lua" '{ runtime = "runsc" }'
    run_hutch run --policy "$T/runsc.lua" --lang python -e '
import os
print(os.uname().release, os.getuid())'
    is "runtime runsc: the program runs" "$RC" 0
    # gVisor's kernel says 4.4.0 whatever the host runs; the uid is the
    # container's own, from the docker executor's range (docker.c).
    set -- $OUT
    like "runtime runsc: under gVisor's kernel" "$1" "4.4.0"
    ok "runtime runsc: as the container's own uid ($2)" \
        test "${2:-0}" -ge $((0x10000000)) -a "${2:-0}" -le $((0x4fffffff))
    ;;
*)
    ok "runtime runsc # SKIP dockerd's runsc runtime lacks --host-uds=open (contrib/test.sh registers it with it)" true
    ;;
esac

policy "$T/nosuch.lua" '{ runtime = "nosuch" }'
run_hutch run --policy "$T/nosuch.lua" --lang python -e 'print(1)'
is "unknown runtime: exit 125" "$RC" 125
like "unknown runtime: the daemon's words" "$ERR" "nosuch"

policy "$T/bad.lua" '{ runtime = "../x y" }'
run_hutch run --policy "$T/bad.lua" --lang python -e 'print(1)'
is "runtime that is no name: exit 125" "$RC" 125
like "runtime that is no name: explained" "$ERR" "is not a runtime name"

policy "$T/unknown.lua" '{ privileged = "yes" }'
run_hutch run --policy "$T/unknown.lua" --lang python -e 'print(1)'
is "unknown option: exit 125" "$RC" 125
like "unknown option: named, with what docker knows" "$ERR" \
    "executor_options.docker.privileged: the docker executor has no such option (it knows runtime, flavour, endpoints)"

# The data flavour: Python with numpy, pandas and matplotlib
# (hutch-python-data, make images); the base image has none of them.
policy "$T/data.lua" '{ flavour = "data" }'
run_hutch run --policy "$T/data.lua" --lang python -e '
import numpy, pandas, matplotlib
print(int(numpy.arange(5).sum()), pandas.__name__, matplotlib.__name__)'
is "flavour data: numpy, pandas, matplotlib import" "$OUT" "10 pandas matplotlib"
run_hutch run --policy "$T/data.lua" --lang javascript -e 'console.log("js")'
is "flavour data: JavaScript runs in its one image" "$OUT" "js"
policy "$T/base.lua" '{ flavour = "base" }'
run_hutch run --policy "$T/base.lua" --lang python -e '
try:
    import numpy
    print("numpy")
except ImportError:
    print("no numpy")'
is "flavour base: no numpy" "$OUT" "no numpy"
policy "$T/flavour.lua" '{ flavour = "science" }'
run_hutch run --policy "$T/flavour.lua" --lang python -e 'print(1)'
is "unknown flavour: exit 125" "$RC" 125
like "unknown flavour: says which there are" "$ERR" \
    'executor_options.docker.flavour "science" is not a flavour: "base" or "data"'

# endpoints: the policy gives a class its own list of Docker endpoints
# (HUTCH_DOCKER_ENDPOINTS' syntax).  The daemon this suite runs on, named
# through the policy, takes the sandbox; a list of one endpoint nobody
# listens on says so by its name; a URL of another scheme is refused.
here=${DOCKER_HOST:-unix:///var/run/docker.sock}
[ -n "${DOCKER_TLS_VERIFY:-}" ] && here="$here,tls=${DOCKER_CERT_PATH:-$HOME/.docker}"
policy "$T/ep.lua" "{ endpoints = \"here=$here\" }"
run_hutch run --policy "$T/ep.lua" --lang python -e 'print(6 * 7)'
is "endpoints: the policy's endpoint runs the program" "$RC:$OUT" "0:42"
port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
policy "$T/ep-down.lua" "{ endpoints = \"nobody=tcp://127.0.0.1:$port\" }"
run_hutch run --policy "$T/ep-down.lua" --lang python -e 'print(1)'
is "endpoints: an endpoint nobody listens on: exit 125" "$RC" 125
like "endpoints: ... and it says so" "$ERR" "cannot reach the Docker daemon at tcp://127.0.0.1:$port"
policy "$T/ep-two.lua" "{ endpoints = \"nobody=tcp://127.0.0.1:$port here=$here\" }"
run_hutch run --policy "$T/ep-two.lua" --lang python -e 'print(7)'
is "endpoints: one of two down: the other takes the sandbox" "$RC:$OUT" "0:7"
policy "$T/ep-bad.lua" '{ endpoints = "x=ftp://example" }'
run_hutch run --policy "$T/ep-bad.lua" --lang python -e 'print(1)'
is "endpoints: another scheme: exit 125" "$RC" 125
like "endpoints: ... says what is supported" "$ERR" \
    "executor_options.docker.endpoints ftp://example: only unix:// and tcp:// are supported"

# HUTCH_DOCKER_ENDPOINTS: what is wrong with the deployment's list is said
# before anything starts.
HUTCH_DOCKER_ENDPOINTS="a=ftp://example" run_hutch run --lang python -e 'print(1)'
is "HUTCH_DOCKER_ENDPOINTS: another scheme: exit 125" "$RC" 125
like "... says what is supported" "$ERR" "HUTCH_DOCKER_ENDPOINTS ftp://example: only unix:// and tcp:// are supported"
HUTCH_DOCKER_ENDPOINTS="a=$here a=$here" run_hutch run --lang python -e 'print(1)'
like "HUTCH_DOCKER_ENDPOINTS: two endpoints of one name are refused" "$ERR" "two endpoints are named a"
HUTCH_DOCKER_ENDPOINTS="a=tcp://127.0.0.1:$port,tls=$T/nocerts" run_hutch run --lang python -e 'print(1)'
like "HUTCH_DOCKER_ENDPOINTS: TLS material that is not there is named" "$ERR" "$T/nocerts/ca.pem cannot be read"
like "... and what names the directory" "$ERR" "its tls= must name the directory holding ca.pem"
HUTCH_DOCKER_ENDPOINTS="b@d=$here" run_hutch run --lang python -e 'print(1)'
like "HUTCH_DOCKER_ENDPOINTS: a name that is not one is refused" "$ERR" '"b@d" is not an endpoint name'

done_testing
