#!/bin/bash
# faults.sh — tests/docker/faults.sh on the docker executor against podman's service
# (tests/lib/podman_suite.sh): the service stopped before a run and during one.
. "$HUTCH_SRCDIR/tests/lib/podman_suite.sh"
exec bash "$HUTCH_SRCDIR/tests/docker/faults.sh"
