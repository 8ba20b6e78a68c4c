#!/bin/bash
# egress.sh — a program's connections through hutch's egress proxy (issue
# 24): the policy's egress.allow by name or address and port, plain HTTP
# and HTTPS (CONNECT, the origin's certificate checked by the program
# against the test's own CA), refusals with a message the program can
# print (a name, a port, a name that resolves to loopback, a redirect to a
# refused host), the caps, the audit records, and no egress at all without
# the field.  Origin servers of the test's own on 127.0.0.1
# (tests/lib/egress_servers.py); names resolve through HUTCH_TEST_RESOLVE
# only: nothing leaves the machine.  On the local executor, or
# $HUTCH_EXECUTOR (tests/lib/executor.sh).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
SRV=
cleanup() {
    [ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

"$PY" "$HUTCH_SRCDIR/tests/lib/egress_servers.py" "$T" 2>"$T/servers.err" &
SRV=$!
for _ in $(seq 600); do [ -f "$T/ports" ] && break; sleep 0.1; done
[ -f "$T/ports" ] || { cat "$T/servers.err"; echo "Bail out! the origin servers did not start"; exit 1; }
read -r HP SP <"$T/ports"
CA=$(cat "$T/ca.pem")
# Names of the test: api.test and tls.test are the servers' address; evil.test
# would be refused by name anyway.
export HUTCH_WORKSPACES="$T/ws"
export HUTCH_TEST_RESOLVE="api.test=127.0.0.1,tls.test=127.0.0.1,meta.test=169.254.169.254"

cat >"$T/p.lua" <<EOF
return {
  egress = { allow = { "127.0.0.1:$HP", "127.0.0.1:$SP", "api.test:$HP", "tls.test:$SP",
                       "meta.test" } },
}
EOF
cat >"$T/caps.lua" <<EOF
return {
  egress = { allow = { "127.0.0.1:$HP" }, max_bytes = 100000 },
}
EOF
cat >"$T/none.lua" <<'EOF'
return { }
EOF

erun() { # POLICY CODE: python, --json
    run_hutch run --json --policy "$T/$1.lua" --audit "$T/audit.jsonl" --lang python -e "$2"
}
GET='
import urllib.request, urllib.error
def get(url, **kw):
    try:
        with urllib.request.urlopen(url, timeout=120, **kw) as r:
            return "%d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode().strip())
    except Exception as e:
        return "error %s: %s" % (type(e).__name__, e)
'

# --- no egress field: no network at all ------------------------------------------
erun none 'import os, socket
print("proxy:", os.environ.get("HTTP_PROXY"))
s = socket.socket()
try:
    s.connect(("127.0.0.1", 3128))
    print("connected")
except OSError as e:
    print("refused:", type(e).__name__)'
stdout=$(echo "$OUT" | json stdout)
like "without egress the program gets no proxy variable" "$stdout" "proxy: None"
like "and 127.0.0.1:3128 refuses the connection" "$stdout" "refused: ConnectionRefusedError"

# --- plain HTTP -------------------------------------------------------------------
erun p "$GET"'
import os
print("proxy:", os.environ["HTTP_PROXY"], os.environ["https_proxy"])
print(get("http://127.0.0.1:'"$HP"'/echo"))'
stdout=$(echo "$OUT" | json stdout)
like "the program is told the proxy (HTTP_PROXY, https_proxy)" "$stdout" \
    "proxy: http://127.0.0.1:3128 http://127.0.0.1:3128"
like "an allowed address and port: the origin answers" "$stdout" "200 GET /echo HTTP/1.1"
like "  the origin saw the request in origin form, with Connection: close" "$stdout" "Connection: close"
like "  and the Host of the URL" "$stdout" "Host: 127.0.0.1:$HP"
like "audit: the connection, allowed, with its bytes" \
    "$(grep '"event":"egress"' "$T/audit.jsonl" | tail -1)" \
    "\"tool\":\"127.0.0.1:$HP\",\"decision\":\"allow\""

erun p "$GET"'
print(get("http://api.test:'"$HP"'/echo"))
print(get("http://example.com/"))
print(get("http://127.0.0.1:1/"))
print(get("http://meta.test/latest/meta-data/"))'
stdout=$(echo "$OUT" | json stdout)
like "a name that resolves to loopback: refused (DNS rebinding) unless an address rule names it: this one does" \
    "$stdout" "200 GET /echo HTTP/1.1"
like "a name no rule allows: 403, one line saying why" "$stdout" \
    "403 hutch egress: example.com:80 is not allowed by the policy (egress.allow)"
like "a port no rule allows: 403, naming the ports it has" "$stdout" "403 hutch egress: port 1 of 127.0.0.1 is not allowed by the policy (egress.allow has 127.0.0.1:$HP)"
like "a name that resolves to the metadata address: refused" "$stdout" "403 hutch egress: meta.test"
like "  saying what the address is" "$stdout" "link-local"
like "audit: the refusal and its outcome" "$(grep '"event":"egress"' "$T/audit.jsonl" | grep example.com)" \
    '"decision":"deny"'

# The rule for api.test without the address rule: refused by address.
cat >"$T/names.lua" <<EOF
return { egress = { allow = { "api.test:$HP" } } }
EOF
erun names "$GET"'
print(get("http://api.test:'"$HP"'/echo"))'
like "a name rule alone does not reach loopback" "$(echo "$OUT" | json stdout)" "403 hutch egress: api.test"

# A redirect to a refused host: the client follows it through the proxy,
# which refuses it.
erun p "$GET"'
print(get("http://127.0.0.1:'"$HP"'/redirect?to=http://evil.test/steal"))'
like "a redirect to a refused host is refused" "$(echo "$OUT" | json stdout)" \
    "403 hutch egress: evil.test:80 is not allowed"

# --- HTTPS: CONNECT, the origin's certificate checked in the sandbox --------------
erun p "$GET"'
import ssl
ctx = ssl.create_default_context(cadata="""'"$CA"'""")
print(get("https://127.0.0.1:'"$SP"'/echo", context=ctx))
print(get("https://tls.test:'"$SP"'/echo", context=ctx))
print(get("https://127.0.0.1:1/", context=ctx))'
stdout=$(echo "$OUT" | json stdout)
like "HTTPS to an allowed address: a tunnel, the certificate verified" "$stdout" "Host: 127.0.0.1:$SP"
like "HTTPS by name" "$stdout" "Host: tls.test:$SP"
is "  both answered" "$(echo "$stdout" | grep -c '^200 GET /echo HTTP/1.1')" 2
like "CONNECT to a refused port: refused, saying so" "$stdout" "Tunnel connection failed: 403"

# --- what the program sends cannot steer the proxy -------------------------------
erun p "$GET"'
import os, urllib.request
os.environ["HUTCH_TEST_RESOLVE"] = "example.com=127.0.0.1"
os.environ["HUTCH_EGRESS"] = "allow-all"
print(get("http://example.com/"))
req = urllib.request.Request("http://127.0.0.1:'"$HP"'/echo",
    headers={"Host": "evil.test", "Proxy-Authorization": "Basic c2VjcmV0", "Connection": "keep-alive, X-Up"})
print(get(req))'
stdout=$(echo "$OUT" | json stdout)
like "variables the program sets do not reach the proxy" "$stdout" "403 hutch egress: example.com:80 is not allowed"
like "the Host the program sends is replaced by the URL's" "$stdout" "Host: 127.0.0.1:$HP"
unlike "  (evil.test never reaches the origin)" "$stdout" "evil.test"
unlike "Proxy-Authorization is not forwarded" "$stdout" "Proxy-Authorization"

# --- the caps ---------------------------------------------------------------------
cat >"$T/conns.lua" <<EOF
return { egress = { allow = { "127.0.0.1:$HP" }, max_connections = 2 } }
EOF
erun conns "$GET"'
for i in range(3):
    print(get("http://127.0.0.1:'"$HP"'/echo")[:100].splitlines()[0])'
stdout=$(echo "$OUT" | json stdout)
is "max_connections = 2: two connections go" "$(echo "$stdout" | grep -c '^200 GET')" 2
like "  the third is refused, saying why" "$stdout" "403 hutch egress"
like "  (max_connections)" "$stdout" "max_connections"
erun caps "$GET"'
print(get("http://127.0.0.1:'"$HP"'/echo")[:3])
r = get("http://127.0.0.1:'"$HP"'/bytes?n=500000")
print("got", r.count("x"), r[:40])'
stdout=$(echo "$OUT" | json stdout)
like "under max_bytes: the first request goes" "$stdout" "200"
unlike "a download over max_bytes does not arrive whole" "$stdout" "got 500000"
like "audit: the cut connection says cap_bytes" "$(grep '"event":"egress"' "$T/audit.jsonl")" '"outcome":"cap_bytes"'

# --- taint: egress as an untrusted source and as a sink ---------------------------
cat >"$T/taint.lua" <<EOF
return {
  tools = { allow = { "everything.*" } },
  egress = { allow = { "127.0.0.1:$HP" } },
  taint = { sources = { "egress", "everything.echo" }, sinks = { "egress", "everything.get-sum" } },
}
EOF
sed 's/sinks = { "egress", "everything.get-sum" } }/sinks = { "egress", "everything.get-sum" }, on_sink = "ask" }/' \
    "$T/taint.lua" >"$T/taint_ask.lua"
NM="$HUTCH_SRCDIR/tests/mcp/node_modules"
EVERYTHING="$NM/@modelcontextprotocol/server-everything/dist/index.js"
cat >"$T/servers.json" <<EOF
{"mcpServers": {"everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]}}}
EOF
trun() { # POLICY CODE
    run_hutch run --json --servers "$T/servers.json" --policy "$T/$1.lua" \
        --audit "$T/audit.jsonl" --lang python "${@:3}" -e "$2"
}
if [ -f "$EVERYTHING" ]; then
    trun taint "$GET"'
print("first:", get("http://127.0.0.1:'"$HP"'/echo")[:3])
print("second:", get("http://127.0.0.1:'"$HP"'/echo"))
try:
    tools.everything.get_sum(a=1, b=2)
except PermissionError as e:
    print("sum:", e)'
    stdout=$(echo "$OUT" | json stdout)
    like "taint: the first connection goes (nothing read yet)" "$stdout" "first: 200"
    like "  what it read taints: a second connection is refused, naming the first" "$stdout" \
        "second: 403 hutch egress: denied by the policy's taint rule: this program has read untrusted data from egress to 127.0.0.1:$HP"
    like "  and a sink tool is denied, naming the connection" "$stdout" \
        "sum: denied by the policy's taint rule: this program has read untrusted data from egress to 127.0.0.1:$HP"
    like "audit: the connection's decision names the source" \
        "$(grep '"event":"egress_decision"' "$T/audit.jsonl" | tail -1)" '"tainted_by":"egress to 127.0.0.1:'"$HP"'"'
    trun taint "$GET"'
tools.everything.echo(message="from a stranger")
print("after the source:", get("http://127.0.0.1:'"$HP"'/echo"))'
    like "a tool source taints: a connection after it is refused" "$(echo "$OUT" | json stdout)" \
        "after the source: 403 hutch egress: denied by the policy's taint rule: this program has read untrusted data from everything.echo"
    # Through a workspace: the connection's taint reaches the next execution.
    trun taint "$GET"'
open("/work/out/workspace/page.txt", "w").write(get("http://127.0.0.1:'"$HP"'/echo"))' -w fetched
    trun taint "$GET"'
print(get("http://127.0.0.1:'"$HP"'/echo"))' -w fetched
    like "a workspace saved after a connection taints the next execution's connections" \
        "$(echo "$OUT" | json stdout)" 'untrusted data from workspace "fetched" (egress to 127.0.0.1:'"$HP"')'
    # on_sink = "ask": the user decides on the connection.
    out=$("$PY" "$HUTCH_SRCDIR/tests/lib/pty_answer.py" y "$HUTCH" run --servers "$T/servers.json" \
        --policy "$T/taint_ask.lua" --lang python -e "$GET"'
tools.everything.echo(message="from a stranger")
print("asked:", get("http://127.0.0.1:'"$HP"'/echo")[:3])' 2>&1)
    like "ask: the user is asked about the connection, naming the source" "$out" \
        "Allow it to connect to 127.0.0.1:$HP"
    like "  approved: it goes" "$out" "asked: 200"
else
    not_ok "server-everything is not installed (npm ci in tests/mcp)"
fi

# --- JavaScript: the same proxy, through the variable -----------------------------
run_hutch run --json --policy "$T/p.lua" --lang javascript -e '
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
const body = await new Promise((resolve, reject) => {
  http.get({host: proxy.hostname, port: proxy.port, path: "http://127.0.0.1:'"$HP"'/echo"}, (res) => {
    let b = ""; res.on("data", (c) => b += c); res.on("end", () => resolve(res.statusCode + " " + b));
  }).on("error", reject);
});
console.log(body);'
like "JavaScript reaches an allowed origin through HTTP_PROXY" "$(echo "$OUT" | json stdout)" \
    "200 GET /echo HTTP/1.1"

done_testing
