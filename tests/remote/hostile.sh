#!/bin/bash
# hostile.sh — tests/docker/hostile.sh on the docker executor against the second Docker daemon
# (tests/lib/remote.sh): TCP with TLS, no path shared with hutch.
. "$HUTCH_SRCDIR/tests/lib/remote.sh"
exec bash "$HUTCH_SRCDIR/tests/docker/hostile.sh"
