#!/bin/bash
# sdk_stdio.sh — tests/docker/sdk_stdio.sh on the docker executor against the second Docker daemon
# (tests/lib/remote.sh): TCP with TLS, no path shared with hutch.
. "$HUTCH_SRCDIR/tests/lib/remote.sh"
remote_require_engine
exec bash "$HUTCH_SRCDIR/tests/docker/sdk_stdio.sh"
