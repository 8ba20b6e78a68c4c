#!/bin/bash
# approval_mcp.sh — tests/mcp/approval.mjs (the policy's questions asked of
# an MCP client's user, over stdio and HTTP, official SDK clients)
# on the docker executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/approval.mjs"
