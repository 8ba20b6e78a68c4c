#!/bin/bash
# run_python.sh — tests/run/run_python.sh on the docker executor against podman's service
# (tests/lib/podman_suite.sh).
. "$HUTCH_SRCDIR/tests/lib/podman_suite.sh"
exec bash "$HUTCH_SRCDIR/tests/run/run_python.sh"
