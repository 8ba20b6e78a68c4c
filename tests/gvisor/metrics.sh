#!/bin/bash
# metrics.sh — tests/mcp/metrics.mjs on the gvisor executor (/readyz probes it).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/metrics.mjs"
