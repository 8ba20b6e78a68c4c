#!/bin/bash
# shapes.sh — tests/mcp/shapes.mjs on the gvisor executor (the results its
# programs get back are what hutch learns return types from).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/shapes.mjs"
