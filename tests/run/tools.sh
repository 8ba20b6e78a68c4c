#!/bin/bash
# tools.sh — programs calling an upstream MCP server's tools (the reference
# server-everything over stdio) through `hutch run --servers`, in both
# languages, on the local executor (or $HUTCH_EXECUTOR, see
# tests/lib/executor.sh): the call crosses the sandbox's channel and comes
# back as a plain value.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
EVERYTHING="$HUTCH_SRCDIR/tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$EVERYTHING" ] || skip_all "npm test dependencies are not installed (npm ci in tests/mcp)"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/servers.json" <<EOS
{"mcpServers": {"everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]}}}
EOS
S="--servers $T/servers.json"

run_hutch run $S --lang python --json -e '
r = tools.everything.echo(message="hello from python")
s = tools.everything.get_sum(a=2, b=3)
try:
    tools.everything.echo(nothing=1)
    bad = "accepted"
except ToolError as e:
    bad = e.code
[r, s, bad]'
is "python: exit 0" "$(echo "$OUT" | json exit_code)" 0
is "python: the tools' answers come back as values" "$(echo "$OUT" | json result)" \
    '["Echo: hello from python", "The sum of 2 and 3 is 5.", "invalid_args"]'
is "python: tool_calls has each call's outcome" \
    "$(echo "$OUT" | $PY -c 'import json,sys; print([c["outcome"] for c in json.load(sys.stdin)["tool_calls"]])')" \
    "['ok', 'ok', 'invalid_args']"
is "python: tool_calls names the upstream's tools (get_sum is get-sum)" \
    "$(echo "$OUT" | $PY -c 'import json,sys; print([c["tool"] for c in json.load(sys.stdin)["tool_calls"]])')" \
    "['everything.echo', 'everything.get-sum', 'everything.echo']"

run_hutch run $S --lang javascript --json -e '
const [r, s] = await Promise.all([tools.everything.echo({message: "hello from node"}),
                                  tools.call("everything.get-sum", {a: 1, b: 2})]);
return [r, s]'
is "javascript: exit 0" "$(echo "$OUT" | json exit_code)" 0
is "javascript: concurrent calls come back as values" "$(echo "$OUT" | json result)" \
    '["Echo: hello from node", "The sum of 1 and 2 is 3."]'

run_hutch run $S --lang python -e 'print(tools.everything.echo(message="x" * 100000) == "Echo: " + "x" * 100000)'
is "python: a 100 kB argument and answer cross the channel intact" "$OUT" "True"

done_testing
