# podman_suite.sh — sourced first by tests/podman/*.sh: the docker executor
# against Debian's podman (its Docker-compatible API service, started by
# tests/lib/podman.sh with storage of its own).  HUTCH_TEST_ENGINE=podman
# makes executor_assert check that the sandboxes run there, and bind
# nothing of the host.  What podman does differently is listed at the top
# of tests/lib/podman.sh and in the README ("Podman").
. "$HUTCH_SRCDIR/tests/lib/podman.sh"
if ! ENGINES_IMAGES="${ENGINES_IMAGES:-python node}" podman_start >/dev/null; then
    . "$HUTCH_SRCDIR/tests/lib/tap.sh"
    case "${CI:-}" in
    "" | false | 0) skip_all "podman's service does not start here (tests/lib/podman.sh)" ;;
    esac
    echo "not ok 1 - podman's service starts (tests/lib/podman.sh)"
    echo "1..1"
    exit 1
fi
export HUTCH_EXECUTOR=docker HUTCH_TEST_ENGINE=podman
