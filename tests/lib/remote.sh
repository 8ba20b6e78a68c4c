# remote.sh — sourced first by tests/remote/*.sh: the docker executor's
# suites against a second Docker daemon (tests/lib/dockerd2.sh, instance
# 2) that shares no path with hutch: its own network and mount namespaces,
# reached over TCP with TLS at an address in the namespace, /run/hutch and
# the source and build trees hidden from it.  Started here if it is not
# running (contrib/test.sh starts it once before the suite and stops it
# after); HUTCH_TEST_ENGINE=dockerd2 makes executor_assert check that the
# sandboxes run there, and bind nothing of the host.
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
ENGINES_IMAGES="${ENGINES_IMAGES:-python node python-data}" \
    engines_require "the second Docker daemon (tests/lib/dockerd2.sh)" dockerd2_start 2
export HUTCH_EXECUTOR=docker HUTCH_TEST_ENGINE=dockerd2

# For wrappers that hand over to a TAP program of their own (the SDK
# suites): the engine is checked here, and a wrong one stops the file.
remote_require_engine() {
    local m
    . "$HUTCH_SRCDIR/tests/lib/tap.sh"
    . "$HUTCH_SRCDIR/tests/lib/executor.sh"
    m=$(docker_sandbox_mounts)
    if ! grep -q '^container [0-9a-f]' <<<"$m" || grep -q '^main daemon: [0-9a-f]' <<<"$m" ||
        grep -q '^bind ' <<<"$m"; then
        echo "Bail out! the sandbox did not run on $DOCKER_HOST alone, without binds: $(echo $m)"
        exit 1
    fi
}
