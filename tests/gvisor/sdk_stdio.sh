#!/bin/bash
# sdk_stdio.sh — tests/mcp/sdk_stdio.mjs (the official SDK client against
# hutch serve: execute_code, tool calls, cancellation, progress) on the
# gvisor executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/sdk_stdio.mjs"
