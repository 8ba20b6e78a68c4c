#!/bin/sh
# mcp.sh — benchmark of `hutch serve` (issue #3), one command, one run:
#
#   make bench-mcp                          (from a configured build directory)
#   sh tests/bench/mcp.sh [RUNS] [CALLS]    with HUTCH=path/to/hutch, and from a
#                                           build tree HUTCH_PLUGIN_DIR and
#                                           HUTCH_RUNNER_DIR
#
# Prints
#  1. p50/p90 of execute_code `print(1)` over stdio (local executor, official
#     SDK client), side by side with `hutch run --lang python -e 'print(1)'`
#     cold start, interleaved (goal: execute_code p50 ≤ 1.3× hutch run);
#  2. tool calls per second to server-everything's `echo`: CALLS (default 500)
#     sequential calls timed inside one execution, JavaScript and Python,
#     against the same calls made directly by the SDK client to
#     server-everything over stdio (goal: ≤ 2× a direct call);
#  3. the time of 100 sequential `echo` calls from one execution (goal < 30 ms),
#     and the p50 per call of those calls next to a bare JSON-RPC client
#     (newline-delimited JSON-RPC over server-everything's stdio, no SDK)
#     making the same 100 calls, interleaved (goal: hutch / bare ≤ 1.5×,
#     issue 22), and the same bare client through socat, a relay that only
#     copies bytes: what any process in the middle costs.
# Needs the npm packages of tests/mcp (npm ci there) and node (Node ≥ 20).
here=$(cd "$(dirname "$0")" && pwd)
NODE=${NODE:-$(command -v node || echo /usr/bin/node)}
exec "$NODE" "$here/../mcp/bench.mjs" "$@"
