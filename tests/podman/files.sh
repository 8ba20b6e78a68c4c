#!/bin/bash
# files.sh — tests/run/files.sh on the docker executor against podman's service
# (tests/lib/podman_suite.sh).
. "$HUTCH_SRCDIR/tests/lib/podman_suite.sh"
exec bash "$HUTCH_SRCDIR/tests/run/files.sh"
