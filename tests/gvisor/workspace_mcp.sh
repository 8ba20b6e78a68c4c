#!/bin/bash
# workspace_mcp.sh — tests/mcp/workspace.mjs (execute_code's workspace over
# stdio and over HTTP with two principals, through the official SDK client)
# on the gvisor executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/workspace.mjs"
