# podman_suite.sh — sourced first by tests/podman/*.sh: the docker executor
# against Debian's podman (its Docker-compatible API service, started by
# tests/lib/podman.sh with storage of its own).  HUTCH_TEST_ENGINE=podman
# makes executor_assert check that the sandboxes run there, and bind
# nothing of the host.  What podman does differently is listed at the top
# of tests/lib/podman.sh and in doc/executors.md ("Podman").
. "$HUTCH_SRCDIR/tests/lib/podman.sh"
ENGINES_IMAGES="${ENGINES_IMAGES:-python node}" \
    engines_require "podman's service (tests/lib/podman.sh)" podman_start
export HUTCH_EXECUTOR=docker HUTCH_TEST_ENGINE=podman
