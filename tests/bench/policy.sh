#!/bin/sh
# policy.sh — cost of one policy decision per tool call, measured inside the
# running server (issue #4's benchmark).
#
#   make bench-policy        (from a configured build directory)
#   sh tests/bench/policy.sh [CALLS]   with HUTCH, HUTCH_PLUGIN_DIR, HUTCH_RUNNER_DIR
#
# Starts `hutch serve` with a policy of 50 glob rules and an on_tool_call
# hook (tests/policy/bench.lua plus an allow rule for server-everything's
# echo), runs one execution that makes CALLS sequential echo calls, and
# reads the duration of every tool-call decision from the audit log (the
# server times rate limit + globs + hook around each call).  Prints p50 and
# p99 in µs; goal p50 ≤ 20 µs.  Also prints `hutch policy bench` (the same
# decision in a loop, without the server) for comparison.
CALLS=${1:-2000}
: "${HUTCH:=hutch}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EVERYTHING="$SRC/tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$EVERYTHING" ] || { echo "run npm ci in tests/mcp first"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
sed 's|"s3.read_\*", "s3.list_\*", "s3.get_\*", "s3.search_\*", "s3.describe_\*",|"s3.read_*", "s3.list_*", "s3.get_*", "s3.search_*", "everything.echo",|' \
    "$SRC/tests/policy/bench.lua" >"$T/p.lua"
cat >"$T/servers.json" <<EOT
{"mcpServers": {"everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]}}}
EOT
exec /usr/bin/python3 - "$HUTCH" "$T" "$CALLS" <<'PY'
import json, statistics, subprocess, sys
hutch, t, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = subprocess.Popen([hutch, "serve", "--policy", t + "/p.lua", "--audit", t + "/audit.jsonl",
                      "--servers", t + "/servers.json"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def rpc(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    return json.loads(p.stdout.readline())
rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"experimental": {"hutch/structured-content": {}}}, "clientInfo": {"name": "bench", "version": "1"}})
code = "for i in range(%d):\n    tools.everything.echo(message='m%%d' %% i)\n" % calls
r = rpc(2, "tools/call", {"name": "execute_code", "arguments": {"language": "python", "code": code, "timeout_ms": 600000}})
assert r["result"]["structuredContent"]["exit_code"] == 0, r
p.stdin.close(); p.wait()
d = sorted(json.loads(l)["duration_ms"] * 1000 for l in open(t + "/audit.jsonl")
           if '"event":"tool_call"' in l)
assert len(d) == calls, len(d)
print(f"policy decision per tool call, inside hutch serve ({calls} calls, 50 globs + on_tool_call)")
print(f"  p50 {d[len(d)//2]:.1f} us   p99 {d[int(len(d)*0.99)]:.1f} us   max {d[-1]:.1f} us   (goal p50 <= 20 us)")
out = subprocess.run([hutch, "policy", "bench", t + "/p.lua", "--tool", "everything.echo"],
                     capture_output=True, text=True)
print("hutch policy bench (the decision alone, in a loop):")
print("  " + (out.stdout or out.stderr).strip().replace("\n", "\n  "))
PY
