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

run_hutch run $S --lang python --json --trace -e '
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
is "python: the trace has each call's outcome" \
    "$(echo "$OUT" | $PY -c 'import json,sys; print([c["outcome"] for c in json.load(sys.stdin)["trace"]])')" \
    "['ok', 'ok', 'invalid_args']"
is "python: the trace names the upstream's tools (get_sum is get-sum)" \
    "$(echo "$OUT" | $PY -c 'import json,sys; print([c["tool"] for c in json.load(sys.stdin)["trace"]])')" \
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

# What a program can see of its tools (issue 20): dir(), help(), keys.
run_hutch run $S --lang python --json -e 'help(tools.everything.get_sum)
[dir(tools), "echo" in dir(tools.everything), tools.everything.echo.signature]'
is "python: dir(tools), dir(tools.everything), .signature" "$(echo "$OUT" | json result)" \
    '[["call", "everything", "search"], true, "def echo(*, message: str) -> Any"]'
like "python: help() of a tool prints its signature" "$(echo "$OUT" | json stdout)" \
    'tools.everything.get_sum
def get_sum(*, a: float, b: float)'
is "python: dir() and help() are no tool calls" "$(echo "$OUT" | json tool_calls.count)" 0
run_hutch run $S --lang javascript --json -e 'console.log(tools.everything.get_sum)
return [Object.keys(tools), Object.keys(tools.everything).includes("echo"), tools.everything.echo.signature]'
is "javascript: Object.keys(tools), Object.keys(tools.everything), .signature" \
    "$(echo "$OUT" | json result)" \
    '[["everything"], true, "echo(args: { message: string }): Promise<any>"]'
like "javascript: console.log() of a tool prints its signature" "$(echo "$OUT" | json stdout)" \
    'tools.everything.get_sum
get_sum(args: { a: number; b: number })'

# Compact results (issue 12): 300 calls are summarised, not listed; the
# whole trace is in the audit log, and in the result only with --trace.
PROG='n = 0
for i in range(300):
    n += tools.everything.echo(message=str(i)) == "Echo: %d" % i
n'
run_hutch run $S --audit "$T/audit.jsonl" --lang python --json -e "$PROG"
is "300 calls: all answered" "$(echo "$OUT" | json result)" 300
is "300 calls: the summary counts 300, all ok" \
    "$(echo "$OUT" | json tool_calls.count) $(echo "$OUT" | json tool_calls.ok) $(echo "$OUT" | json tool_calls.errors)" \
    "300 300 0"
is "300 calls: one line for the one tool" \
    "$(echo "$OUT" | $PY -c 'import json,sys; t=json.load(sys.stdin)["tool_calls"]["tools"]; print(len(t), t[0]["tool"], t[0]["count"], t[0]["total_ms"] > 0)')" \
    "1 everything.echo 300 True"
is "300 calls: no trace unless asked" "$(echo "$OUT" | json trace)" null
SUMMARY_BYTES=$(echo "$OUT" | $PY -c 'import json,sys; print(len(json.dumps(json.load(sys.stdin)["tool_calls"])))')
ok "300 calls: the summary is small ($SUMMARY_BYTES bytes)" test "$SUMMARY_BYTES" -lt 400
ALL_BYTES=${#OUT}
ok "300 calls: the whole result is small ($ALL_BYTES bytes)" test "$ALL_BYTES" -lt 1500
is "300 calls: the audit log has the whole trace, in bounded records" \
    "$($PY -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if "\"tool_trace\"" in l]
calls = [c for r in recs for c in r["calls"]]
print(len(recs), len(calls), [c["id"] for c in calls] == sorted(c["id"] for c in calls) and len(set(c["id"] for c in calls)),
      all(c["outcome"] == "ok" for c in calls), max(r["first"] for r in recs), recs[0]["count"])' "$T/audit.jsonl")" \
    "6 300 300 True 250 300"
run_hutch run $S --lang python --json --trace -e "$PROG"
is "--trace: all 300 calls, each with its outcome" \
    "$(echo "$OUT" | $PY -c 'import json,sys; t=json.load(sys.stdin)["trace"]; print(len(t), len({c["id"] for c in t}), all(c["outcome"] == "ok" and c["tool"] == "everything.echo" for c in t))')" \
    "300 300 True"
run_hutch run $S --lang python --trace -e 1
is "--trace without --json is a usage error" "$RC" 2

done_testing
