#!/bin/bash
# engines.sh — tests/mcp/engines.mjs: one hutch with two Docker endpoints
# (instances 3 and 4 of tests/lib/dockerd2.sh, TCP with TLS), placement,
# one engine killed mid-run and back.  Both are this test's own (instance
# 2 is tests/remote's, which may run beside it): it stops them at the end.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
for n in 3 4; do
    ENGINES_IMAGES=python engines_require "the Docker daemon $n (tests/lib/dockerd2.sh)" \
        dockerd2_start $n
done
trap 'dockerd2_stop 3 >/dev/null 2>&1; dockerd2_stop 4 >/dev/null 2>&1' EXIT
export HUTCH_EXECUTOR=docker HUTCH_TEST_ENGINE_A=3 HUTCH_TEST_ENGINE_B=4
dockerd2_env 3 && a="engine-a=$DOCKER_HOST,tls=$DOCKER_CERT_PATH"
dockerd2_env 4 && b="engine-b=$DOCKER_HOST,tls=$DOCKER_CERT_PATH"
export HUTCH_DOCKER_ENDPOINTS="$a $b"
unset DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH
/usr/bin/node "$HUTCH_SRCDIR/tests/mcp/engines.mjs"
