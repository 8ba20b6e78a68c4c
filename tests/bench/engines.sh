#!/bin/bash
# engines.sh — the docker executor's transports and engines side by side
# (tests/bench/engines.mjs): the socket directory of before vs the attach
# stream on the same local daemon vs a second daemon over TCP with TLS,
# cold and pooled; executions per second with two engines vs one.
#
#   make bench-engines [BASELINE_PLUGIN_DIR=DIR] [ROUNDS=15]
#
# As root.  The second and third daemons are tests/lib/dockerd2.sh's
# instances 2 and 3 (started here, stopped at the end).  The local daemon
# is $LOCAL_DOCKER_HOST (default: unix:///var/run/docker.sock).
# BASELINE_PLUGIN_DIR is the plugin directory of a build from before the
# attach stream (e.g. commit e97f36d: `git worktree add /tmp/base e97f36d`,
# build it, and pass /tmp/base/build/plugins/.libs); its hutch-init is found
# next to it.  Without it the first line is the attach stream's.
set -u
: "${HUTCH_SRCDIR:?run through make bench-engines}" "${HUTCH_BUILDDIR:?}"
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
ENGINES_IMAGES=python dockerd2_start 2 >/dev/null || exit 1
d2=$DOCKER_HOST d2c=$DOCKER_CERT_PATH
ENGINES_IMAGES=python dockerd2_start 3 >/dev/null || exit 1
d3=$DOCKER_HOST d3c=$DOCKER_CERT_PATH
trap 'dockerd2_stop 3 >/dev/null 2>&1; dockerd2_stop 2 >/dev/null 2>&1' EXIT
unset DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH
export HUTCH=$HUTCH_BUILDDIR/hutch HUTCH_PLUGIN_DIR=$HUTCH_BUILDDIR/plugins/.libs \
    HUTCH_RUNNER_DIR=$HUTCH_BUILDDIR/runners \
    LOCAL_DOCKER_HOST=${LOCAL_DOCKER_HOST:-unix:///var/run/docker.sock} \
    D2_HOST=$d2 D2_CERTS=$d2c ENDPOINTS_ONE="a=$d2,tls=$d2c" \
    ENDPOINTS_TWO="a=$d2,tls=$d2c b=$d3,tls=$d3c"
/usr/bin/node "$HUTCH_SRCDIR/tests/bench/engines.mjs"
