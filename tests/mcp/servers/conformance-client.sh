#!/bin/bash
# conformance-client.sh — the official conformance suite's "client" for
# hutch's upstream client (tests/mcp/conformance_client.sh): the suite
# starts a scenario server and runs this with its URL as the last argument
# ($MCP_CONFORMANCE_SCENARIO names the scenario).  hutch connects to it as
# an upstream (server/discover, then the era it offers) and a program in
# the sandbox does what the scenario asks of a client.
url="${@: -1}"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf '{"mcpServers": {"c": {"type": "http", "url": "%s"}}}\n' "$url" >"$d/servers.json"
case "$MCP_CONFORMANCE_SCENARIO" in
tools_call)
    prog='print(tools.c.add_numbers(a=2, b=3))' ;;
sse-retry)
    # Its one tool's stream closes before the result: hutch must resume it.
    prog='print(tools.c.test_reconnection())' ;;
json-schema-2020-12-preservation)
    # The focal tool's inputSchema as hutch offers it, echoed back verbatim.
    prog='
r = tools.search("json_schema_2020_12_tool", detail="full")
schema = next(t["inputSchema"] for t in r["tools"] if t["name"] == "c.json_schema_2020_12_tool")
print(tools.call("c.json_schema_echo", {"schema": schema}))' ;;
*)
    # Whatever hutch learnt of the server's tools.
    prog='print(sorted(t["name"] for t in tools.search("", limit=100)["tools"]))' ;;
esac
exec "$HUTCH" run --servers "$d/servers.json" --lang python -e "$prog"
