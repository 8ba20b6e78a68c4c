#!/bin/bash
# run_python.sh — tests/run/run_python.sh on the docker executor against the second Docker daemon
# (tests/lib/remote.sh): TCP with TLS, no path shared with hutch.
. "$HUTCH_SRCDIR/tests/lib/remote.sh"
exec bash "$HUTCH_SRCDIR/tests/run/run_python.sh"
