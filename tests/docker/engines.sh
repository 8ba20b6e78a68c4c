#!/bin/bash
# engines.sh — tests/mcp/engines.mjs: one hutch with two Docker endpoints
# (instances 2 and 3 of tests/lib/dockerd2.sh, TCP with TLS), placement,
# one engine killed mid-run and back.  Instance 3 is this test's own: it
# stops it at the end.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
for n in 2 3; do
    ENGINES_IMAGES=python engines_require "the Docker daemon $n (tests/lib/dockerd2.sh)" \
        dockerd2_start $n
done
trap 'dockerd2_stop 3 >/dev/null 2>&1' EXIT
export HUTCH_EXECUTOR=docker HUTCH_TEST_ENGINE_A=2 HUTCH_TEST_ENGINE_B=3
dockerd2_env 2 && a="engine-a=$DOCKER_HOST,tls=$DOCKER_CERT_PATH"
dockerd2_env 3 && b="engine-b=$DOCKER_HOST,tls=$DOCKER_CERT_PATH"
export HUTCH_DOCKER_ENDPOINTS="$a $b"
unset DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH
/usr/bin/node "$HUTCH_SRCDIR/tests/mcp/engines.mjs"
