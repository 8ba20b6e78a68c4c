#!/bin/bash
# soak.sh — tests/mcp/soak.sh on the docker executor, with the second
# engine (tests/lib/dockerd2.sh, instance 5: this test's own) as root,
# whose daemon the soak kills and starts again; without root, on the main
# daemon alone (the engine fault is then not made, and the test says so).
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
# The images the soak runs (the soak starts the engine again after killing
# it: the same list).
export ENGINES_IMAGES="python node"
if [ "$(id -u)" = 0 ] && dockerd2_start 5 >/dev/null; then
    export SOAK_ENGINE2=5
    trap 'dockerd2_stop 5 >/dev/null 2>&1' EXIT
else
    echo "# the second engine (tests/lib/dockerd2.sh 5) did not start: the main daemon alone"
fi
unset DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH
bash "$HUTCH_SRCDIR/tests/mcp/soak.sh"
