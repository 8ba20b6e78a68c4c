#!/bin/bash
# sdk2_http.sh — tests/mcp/sdk_http.mjs (the whole SDK suite against hutch
# serve over http: execute_code, tool calls, files, cancellation, progress)
# with the official SDK v2 client pinned to MCP 2026-07-28: the stateless
# era end to end (lib.mjs loadSdk).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_SDK=2-pin
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/sdk_http.mjs"
