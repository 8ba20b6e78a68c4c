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
http-custom-headers)
    # The calls the scenario asks for ($MCP_CONFORMANCE_CONTEXT), without
    # its null arguments: hutch checks arguments against the tool's schema
    # first (schema.c), and null is not the boolean it declares.  Left out,
    # the argument checks the other half of the same rule (no header for an
    # argument not given); test_upstream.c checks the null half.
    ctx=$(printf '%s' "$MCP_CONFORMANCE_CONTEXT" | python3 -c 'import sys; print(repr(sys.stdin.read()))')
    prog="
import json
for c in json.loads($ctx)['toolCalls']:
    args = {k: v for k, v in c['arguments'].items() if v is not None}
    print(tools.call('c.' + c['name'], args))" ;;
http-invalid-tool-headers)
    # Every tool hutch offers, called: the ones it dropped cannot be.
    prog='
for t in tools.search("", limit=100, detail="full")["tools"]:
    props = t.get("inputSchema", {}).get("properties", {})
    print(t["name"], tools.call(t["name"], {k: "x" for k in props}))' ;;
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
