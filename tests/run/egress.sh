#!/bin/bash
# egress.sh — a program's connections through hutch's egress proxy (issue
# 24): the policy's egress.allow by name or address and port, plain HTTP
# and HTTPS (CONNECT, the origin's certificate checked by the program
# against the test's own CA), refusals with a message the program can
# print (a name, a port, a name that resolves to loopback, a redirect to a
# refused host), the caps, the audit records, no egress at all without
# the field, and secrets (egress.secrets): added by hutch outside the
# sandbox, over TLS it intercepts with the deployment's CA, never seen by
# the program but where an origin reflects them.  Origin servers of the test's own on 127.0.0.1
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
read -r HP SP WP RP <"$T/ports"
CA=$(cat "$T/ca.pem")
# Names of the test: api.test and tls.test are the servers' address; evil.test
# would be refused by name anyway.
export HUTCH_WORKSPACES="$T/ws"
export HUTCH_TEST_RESOLVE="api.test=127.0.0.1,tls.test=127.0.0.1,meta.test=169.254.169.254,\
secret.test=127.0.0.1,wrong.test=127.0.0.1,rogue.test=127.0.0.1"
# Secrets: hutch's CA in the test's directory; the origins' CA trusted by
# hutch on the way out (never by the program, unless it says so itself).
export HUTCH_EGRESS_CA_DIR="$T/egress-ca" HUTCH_EGRESS_TRUST_FILE="$T/ca.pem"

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

# --- secrets: added outside the sandbox ------------------------------------------
# The secret lives in hutch's environment (and a file) only.  secret.test
# is the echo origin: /echo reflects the request headers it got, so what it
# answers shows the secret to the program: hutch cannot stop an origin from
# repeating what it was sent (hutch-policy(5), egress).  Everything else
# the program can reach must not hold it.
SECRET="hutch-secret-$RANDOM$RANDOM$RANDOM"
export HUTCH_EGRESS_TEST_TOKEN="$SECRET"
printf '%s\n' "file-$SECRET" >"$T/key.txt"
cat >"$T/sec.lua" <<LUA
return { egress = {
  allow = { "secret.test:$SP", "tls.test:$SP", "wrong.test:$WP", "rogue.test:$RP",
            "127.0.0.1:$SP", "127.0.0.1:$WP", "127.0.0.1:$RP" },
  secrets = {
    ["secret.test:$SP"] = { header = "Authorization", value = "Bearer \${HUTCH_EGRESS_TEST_TOKEN}" },
    ["wrong.test:$WP"] = { header = "X-Key", file = "$T/key.txt" },
    ["rogue.test:$RP"] = { header = "X-Key", file = "$T/key.txt" },
    ["127.0.0.1:$SP"] = { header = "X-Key", file = "$T/key.txt" },
  } } }
LUA
: >"$T/headers.log"
erun sec "$GET"'
import os, urllib.request
print("echo:", get("https://secret.test:'"$SP"'/echo"))
print("mine:", get(urllib.request.Request("https://secret.test:'"$SP"'/echo?mine",
    headers={"authorization": "Bearer the-programs-own", "X-Other": "kept"})))
r = get("https://secret.test:'"$SP"'/bytes?n=10")
print("bytes:", r[:40], "'"$SECRET"'" in r)
print("env holds it:", "'"$SECRET"'" in repr(dict(os.environ)))
print("by address:", get("https://127.0.0.1:'"$SP"'/bytes?n=1"))
print("ca env:", os.environ["SSL_CERT_FILE"], os.environ["REQUESTS_CA_BUNDLE"],
      os.environ["NODE_EXTRA_CA_CERTS"], os.environ["CURL_CA_BUNDLE"])'
stdout=$(echo "$OUT" | json stdout)
like "a secret: the request reaches the origin through hutch's TLS, trusted by the program's defaults" \
    "$stdout" "echo: 200 GET /echo HTTP/1.1"
is "  the origin received the secret's header once per request, from hutch's environment" \
    "$(grep -c "^Authorization: Bearer $SECRET\$" "$T/headers.log")" 3
like "  the program is told where the bundle is (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE)" \
    "$stdout" "ca env: /work/.hutch/ca-bundle.pem /work/.hutch/ca-bundle.pem /work/.hutch/ca-bundle.pem /work/.hutch/ca-bundle.pem"
unlike "  a header of that name the program sent is replaced, not doubled" \
    "$(cat "$T/headers.log")" "the-programs-own"
like "  its other headers go through" "$(cat "$T/headers.log")" "X-Other: kept"
like "  the origin saw Connection: close" "$(cat "$T/headers.log")" "Connection: close"
like "an echo origin reflects the secret to the program: hutch cannot stop an origin repeating it" \
    "$stdout" "Authorization: Bearer $SECRET"
like "  an origin that does not reflect it: the answer holds no secret" "$stdout" \
    "bytes: 200 xxxxxxxxxx False"
like "  nor does the program's environment" "$stdout" "env holds it: False"
like "a secret for an IP literal: hutch's certificate names the address" "$stdout" "by address: 200 x"
is "  its value read from a file, the trailing newline dropped" \
    "$(grep -c "^X-Key: file-$SECRET\$" "$T/headers.log")" 1
audit=$(grep '"event":"egress"' "$T/audit.jsonl" | grep secret.test | tail -1)
like "audit: the record names the secret's header, by name" "$audit" '"secret":"Authorization"'
unlike "  and never its value" "$(cat "$T/audit.jsonl")" "$SECRET"

# Every file the program can read, and every process's environment and
# command line it can see: no secret (the echo origin is not asked here).
erun sec '
import os
secret = b"'"$SECRET"'"
found, seen = [], 0
def look(path):
    global seen
    try:
        with open(path, "rb") as f:
            data = f.read(4 << 20)
    except OSError:
        return
    seen += 1
    if secret in data:
        found.append(path)
for top in ("/work", "/tmp", "/run", "/etc", "/home", "/root", "/var", "/opt", "/dev/shm"):
    for d, dirs, files in os.walk(top):
        for f in files:
            look(os.path.join(d, f))
for pid in os.listdir("/proc"):
    if pid.isdigit() or pid == "self":
        for f in ("environ", "cmdline"):
            look("/proc/%s/%s" % (pid, f))
print("read", seen > 10, "found", found)'
like "the secret is in no file the program can read (/work, /tmp, /run, /etc, /proc/*/environ, ...)" \
    "$(echo "$OUT" | json stdout)" "read True found []"

# The program sees hutch's certificate only where hutch adds a secret; a
# host without one is a plain tunnel, the origin's own certificate checked
# by the test's CA (not hutch's).
erun sec '
import socket, ssl
def issuer(host, port, ctx):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    t = ctx.wrap_socket(s, server_hostname=host)
    cn = dict(x[0] for x in t.getpeercert()["issuer"])["commonName"]
    t.close()
    return cn
test_ca = ssl.create_default_context(cadata="""'"$CA"'""")
print("plain:", issuer("tls.test", '"$SP"', test_ca))
print("secret:", issuer("secret.test", '"$SP"', ssl.create_default_context()))'
stdout=$(echo "$OUT" | json stdout)
like "a host without a secret is tunnelled: the program verifies the origin's certificate by the test CA" \
    "$stdout" "plain: hutch egress test CA"
like "a host with one: the program sees hutch's CA, which its bundle trusts" "$stdout" \
    "secret: hutch egress CA"
is "hutch's CA is kept in HUTCH_EGRESS_CA_DIR, its key 0600" \
    "$(stat -c %a "$T/egress-ca/ca.key")" 600

# The origin's certificate is verified: another name, an untrusted CA.
: >"$T/headers.log"
erun sec "$GET"'
print("wrong:", get("https://wrong.test:'"$WP"'/echo"))
print("rogue:", get("https://rogue.test:'"$RP"'/echo"))'
stdout=$(echo "$OUT" | json stdout)
like "an origin whose certificate names another host: 502, saying why" "$stdout" \
    "wrong: 502 hutch egress: TLS to wrong.test:$WP (127.0.0.1): its certificate does not verify: hostname mismatch"
like "an origin whose certificate no trusted CA signed: 502, saying why" "$stdout" \
    "rogue: 502 hutch egress: TLS to rogue.test:$RP (127.0.0.1): its certificate does not verify: unable to get local issuer certificate"
unlike "  neither was sent the secret" "$(cat "$T/headers.log")" "X-Key"

# What the program sets in its environment changes nothing in hutch (the
# bug class of OpenSandbox PR #1194): not the secret's variable, not
# hutch's trust or CA directory, not the proxy it is told.
: >"$T/headers.log"
erun sec "$GET"'
import os
os.environ["HUTCH_EGRESS_TEST_TOKEN"] = "from-the-sandbox"
os.environ["HUTCH_EGRESS_TRUST_FILE"] = "/work/evil.pem"
os.environ["HUTCH_EGRESS_CA_DIR"] = "/tmp/evil-ca"
os.environ["SSLKEYLOGFILE"] = "/tmp/keys"
os.environ["HTTPS_PROXY"] = os.environ["HTTPS_PROXY"] + "/"
print("echo:", get("https://secret.test:'"$SP"'/echo")[:3])
print("rogue:", get("https://rogue.test:'"$RP"'/echo")[:3])'
stdout=$(echo "$OUT" | json stdout)
like "variables the program sets: the secret is still hutch's" "$(cat "$T/headers.log")" \
    "Authorization: Bearer $SECRET"
unlike "  not the program's" "$(cat "$T/headers.log")" "from-the-sandbox"
like "  and hutch's trust is still its own" "$stdout" "rogue: 502"

# The policy: a secret is checked when it loads, and never shown.
pcheck() { # LUA: hutch policy check on egress = { allow = ..., LUA }
    printf 'return { egress = { allow = { "secret.test" }, %s } }\n' "$1" >"$T/pc.lua"
    run_hutch policy check "$T/pc.lua"
}
pcheck 'secrets = { ["secret.test"] = { header = "Authorization", value = "Bearer ${HUTCH_EGRESS_TEST_TOKEN}" } }'
is "policy check: a secret from hutch's environment loads" "$RC" 0
unlike "  and the check shows nothing of it" "$OUT$ERR" "$SECRET"
pcheck 'secrets = { ["secret.test"] = { header = "Authorization", value = "Bearer ${HUTCH_EGRESS_UNSET_VAR}" } }'
like "an unset variable: a load error naming it" "$ERR" 'HUTCH_EGRESS_UNSET_VAR} is not set'
pcheck 'secrets = { ["evil.test"] = { header = "X-Key", value = "v" } }'
like "a secret for a host no rule admits: an error" "$ERR" "no rule of egress.allow admits evil.test"
pcheck 'secrets = { ["*.test"] = { header = "X-Key", value = "v" } }'
like "a wildcard: an error (a secret goes to one host)" "$ERR" "a secret goes to one host"
pcheck 'secrets = { ["secret.test"] = { header = "Host", value = "v" } }'
like "a header hutch sets itself: an error" "$ERR" "hutch sets or drops Host itself"
printf 'line1\nline2-%s\n' "$SECRET" >"$T/bad.txt"
pcheck 'secrets = { ["secret.test"] = { header = "X-Key", file = "'"$T/bad.txt"'" } }'
like "a value with a newline: an error" "$ERR" "control character"
unlike "  that does not show the value" "$ERR" "$SECRET"

# --- JavaScript: fetch, http and https through the proxy -------------------------
# Node ignores HTTP_PROXY and reads NODE_EXTRA_CA_CERTS only at start: the
# runner routes them itself (src/runners/egress.js).
JGET='
const http = require("http"), https = require("https");
const show = (e) => "error " + (e.cause ? e.cause.message : e.message);
const fget = (url, init) => fetch(url, init).then(async (r) => r.status + " " + (await r.text()).trim(), show);
const nget = (mod, url, opts) => new Promise((resolve) => {
  mod.get(url, opts || {}, (res) => {
    let b = ""; res.on("data", (c) => b += c); res.on("end", () => resolve(res.statusCode + " " + b.trim()));
  }).on("error", (e) => resolve(show(e)));
});
'
jrun() { # POLICY CODE
    run_hutch run --json --policy "$T/$1.lua" --audit "$T/audit.jsonl" --lang javascript -e "$2"
}
: >"$T/headers.log"
jrun p "$JGET"'
console.log("http:", await nget(http, "http://127.0.0.1:'"$HP"'/echo"));
console.log("fetch:", await fget("http://127.0.0.1:'"$HP"'/echo"));
console.log("https:", await nget(https, "https://tls.test:'"$SP"'/echo", {ca: `'"$CA"'`}));
console.log("refused http:", await nget(http, "http://example.com/"));
console.log("refused fetch:", await fget("http://example.com/"));
console.log("refused https:", await nget(https, "https://evil.test/"));
console.log("refused tunnel:", await fget("https://evil.test/"));
console.log("refused port:", await fget("https://127.0.0.1:8081/"));'
stdout=$(echo "$OUT" | json stdout)
like "JavaScript: http.get reaches an allowed origin through the proxy" "$stdout" \
    "http: 200 GET /echo HTTP/1.1"
like "  in origin form, with the URL's Host" "$stdout" "Host: 127.0.0.1:$HP"
like "  fetch() too" "$stdout" "fetch: 200 GET /echo HTTP/1.1"
like "  https.get: a tunnel, the origin's certificate checked by the program's own ca" "$stdout" \
    "https: 200 GET /echo HTTP/1.1"
like "  a refused name over http: the proxy's 403 and its reason" "$stdout" \
    "refused http: 403 hutch egress: example.com:80 is not allowed by the policy"
like "  over fetch()" "$stdout" "refused fetch: 403 hutch egress: example.com:80 is not allowed"
like "  a refused tunnel over https: an error with the reason" "$stdout" \
    "refused https: error hutch egress: evil.test:443 is not allowed by the policy"
like "  over fetch(): its cause says why" "$stdout" \
    "refused tunnel: error hutch egress: evil.test:443 is not allowed"
like "  a refused port" "$stdout" "refused port: error hutch egress: port 8081 of 127.0.0.1 is not allowed"
jrun sec "$JGET"'
console.log("fetch:", await fget("https://secret.test:'"$SP"'/bytes?n=3"));
console.log("https:", await nget(https, "https://secret.test:'"$SP"'/bytes?n=2"));
console.log("env holds it:", JSON.stringify(process.env).includes("'"$SECRET"'"));'
stdout=$(echo "$OUT" | json stdout)
like "JavaScript: fetch() to a host with a secret, through hutch's TLS, its CA trusted" "$stdout" \
    "fetch: 200 xxx"
like "  https.get too" "$stdout" "https: 200 xx"
is "  the origin received the secret once per request" \
    "$(grep -c "^Authorization: Bearer $SECRET\$" "$T/headers.log")" 2
like "  and the program's environment holds none of it" "$stdout" "env holds it: false"

done_testing
