#!/bin/bash
# sdk_stdio.sh — tests/mcp/sdk_stdio.mjs (the official SDK client against
# hutch serve: execute_code, tool calls, cancellation, progress) on the
# docker executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/sdk_stdio.mjs"
