#!/bin/bash
# hostile.sh — tests/hostile/hostile.sh on the docker executor against podman's service
# (tests/lib/podman_suite.sh).
. "$HUTCH_SRCDIR/tests/lib/podman_suite.sh"
exec bash "$HUTCH_SRCDIR/tests/docker/hostile.sh"
