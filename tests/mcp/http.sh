#!/bin/bash
# http.sh — the streamable HTTP transport of `hutch serve --http`, spoken to
# with curl: token, Host/Origin checks, methods, paths, body cap, sessions,
# JSON and SSE answers, and refusing to serve unprotected on a public address.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

command -v curl >/dev/null || skip_all "curl is not installed"
"$HUTCH" serve --help >/dev/null 2>&1 || skip_all "this hutch has no serve command"

# The server under test gets its token explicitly; nothing else inherits one.
unset HUTCH_TOKEN
TOKEN=http-sh-token-$$-$RANDOM-abcdef
T=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

free_port() {
    $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# serve LOG ARGS…: start hutch serve in the background (SERVER_PID), then
# wait until it answers HTTP.
serve() {
    local log=$1 i
    shift
    "$HUTCH" serve "$@" </dev/null >/dev/null 2>"$log" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for i in $(seq 1 100); do
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$URL")" != 000 ] && return 0
        sleep 0.1
    done
    return 1
}

# req CURL-ARGS…: sets CODE, BODY and HDRS (header names as sent, no CRs).
req() {
    : >"$T/body"
    : >"$T/hdrs"
    CODE=$(curl -s -m 30 -o "$T/body" -D "$T/hdrs" -w '%{http_code}' "$@")
    BODY=$(cat "$T/body")
    HDRS=$(tr -d '\r' <"$T/hdrs")
}
# header NAME: the value of a response header of the last req.
header() {
    printf '%s\n' "$HDRS" | awk -v n="$(printf '%s' "$1" | tr A-Z a-z)" '
        { i = index($0, ":"); if (i && tolower(substr($0, 1, i - 1)) == n) { v = substr($0, i + 1); sub(/^[ \t]+/, "", v); print v; exit } }'
}
AUTH="Authorization: Bearer $TOKEN"
CT="Content-Type: application/json"
ACCEPT_JSON="Accept: application/json"
ACCEPT_BOTH="Accept: application/json, text/event-stream"
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"http.sh","version":"1"}}}'
LIST='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
# mcp ARGS…: a POST to /mcp with the token, JSON body and session (if any).
mcp() {
    req -H "$AUTH" -H "$CT" ${SID:+-H "Mcp-Session-Id: $SID"} "$@" "$URL"
}

PORT=$(free_port)
URL="http://127.0.0.1:$PORT/mcp"
if ! HUTCH_TOKEN=$TOKEN serve "$T/serve.err" --http "127.0.0.1:$PORT"; then
    t_result 1 "hutch serve --http 127.0.0.1:$PORT answers"
    sed 's/^/#   /' "$T/serve.err" | head -20
    done_testing
    exit 1
fi
t_result 0 "hutch serve --http 127.0.0.1:$PORT answers"

# --- sessions -------------------------------------------------------------
SID=
mcp -H "$ACCEPT_JSON" -d "$INIT"
is "initialize: 200" "$CODE" 200
SID=$(header Mcp-Session-Id)
ok "initialize: Mcp-Session-Id is handed out" test -n "$SID"
like "initialize: result names a protocol version" "$BODY" '"protocolVersion"'

mcp -H "$ACCEPT_JSON" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
is "notification: 202" "$CODE" 202
is "notification: empty body" "$BODY" ""

mcp -H "$ACCEPT_JSON" -d "$LIST"
is "tools/list as JSON: 200" "$CODE" 200
like "tools/list as JSON: application/json" "$(header Content-Type)" "application/json"
like "tools/list as JSON: execute_code listed" "$BODY" '"execute_code"'

mcp -N -H "$ACCEPT_BOTH" -d '{"jsonrpc":"2.0","id":3,"method":"tools/list"}'
is "tools/list over SSE: 200" "$CODE" 200
like "tools/list over SSE: text/event-stream" "$(header Content-Type)" "text/event-stream"
like "tools/list over SSE: a message event" "$BODY" "event: message"
DATA=$(printf '%s\n' "$BODY" | sed -n 's/^data: //p' | tail -1)
is "tools/list over SSE: the event carries the response" "$(printf '%s' "$DATA" | json id)" 3
like "tools/list over SSE: with the result" "$DATA" '"execute_code"'

SAVED=$SID
SID=
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "request without Mcp-Session-Id: 400" "$CODE" 400
SID=0123456789abcdef0123456789abcdef
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "unknown session: 404" "$CODE" 404
SID=$SAVED

mcp -H "$ACCEPT_JSON" -H "MCP-Protocol-Version: 1999-01-01" -d "$LIST"
is "unsupported MCP-Protocol-Version: 400" "$CODE" 400

mcp -H "$ACCEPT_JSON" -d '{"jsonrpc": "2.0", "id": '
is "malformed JSON: answered" "$CODE" 200
is "malformed JSON: parse error -32700" "$(printf '%s' "$BODY" | json error.code)" -32700
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "after malformed JSON: still serving" "$CODE" 200

mcp -H "$ACCEPT_JSON" -d '[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]'
is "batch: answered by the core" "$CODE" 200
like "batch: with a JSON-RPC error" "$BODY" '"error"'

# --- 2026-07-28: no session, everything in the request ----------------------
# The era is decided per request from the body (params._meta), the headers
# cross-checked; the 2025 session above keeps working beside it.
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
V26="MCP-Protocol-Version: 2026-07-28"
# m26 BODY CURL-ARGS…: a POST to /mcp with the token and no session.
m26() {
    local body=$1
    shift
    req -H "$AUTH" -H "$CT" -H "$ACCEPT_JSON" "$@" -d "$body" "$URL"
}
L26='{"jsonrpc":"2.0","id":30,"method":"tools/list","params":{'"$META"'}}'
m26 "$L26" -H "$V26" -H "Mcp-Method: tools/list"
is "2026 tools/list without a session: 200" "$CODE" 200
is "2026 tools/list: no Mcp-Session-Id handed out" "$(header Mcp-Session-Id)" ""
is "2026 tools/list: resultType complete" "$(printf '%s' "$BODY" | json result.resultType)" complete
is "2026 tools/list: cacheScope public (the same for everyone)" "$(printf '%s' "$BODY" | json result.cacheScope)" public
m26 '{"jsonrpc":"2.0","id":31,"method":"server/discover","params":{'"$META"'}}' -H "$V26" -H "Mcp-Method: server/discover"
is "2026 server/discover: 200" "$CODE" 200
like "2026 server/discover: supportedVersions" "$(printf '%s' "$BODY" | json result.supportedVersions)" '"2026-07-28"'
m26 "$L26" -H "$V26" -H "Mcp-Method: tools/list" -H "Mcp-Session-Id: $SID"
is "2026 request that also names a session: served by its body's era (200)" "$CODE" 200
is "… as 2026 (resultType)" "$(printf '%s' "$BODY" | json result.resultType)" complete
# check26 NAME STATUS CODE: the last answer's HTTP status, JSON-RPC error
# code, and id (echoed from the request).
check26() {
    is "$1: HTTP $2" "$CODE" "$2"
    is "$1: error $3" "$(printf '%s' "$BODY" | json error.code)" "$3"
    is "$1: the request's id" "$(printf '%s' "$BODY" | json id)" "$4"
}
m26 "$L26" -H "$V26" -H "Mcp-Method: prompts/list"
check26 "2026 Mcp-Method not the body's method" 400 -32020 30
m26 "$L26" -H "$V26" -H "Mcp-Method: TOOLS/LIST"
check26 "2026 Mcp-Method in another case" 400 -32020 30
m26 "$L26" -H "$V26"
check26 "2026 Mcp-Method missing" 400 -32020 30
m26 "$L26" -H "Mcp-Method: tools/list"
check26 "2026 MCP-Protocol-Version missing" 400 -32020 30
m26 "$L26" -H "MCP-Protocol-Version: 2025-11-25" -H "Mcp-Method: tools/list"
check26 "2026 MCP-Protocol-Version not the body's" 400 -32020 30
C26='{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"x"},'"$META"'}}'
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call" -H "Mcp-Name: execute_code"
check26 "2026 Mcp-Name not the tool called" 400 -32020 32
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call"
check26 "2026 Mcp-Name missing on tools/call" 400 -32020 32
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call" -H "Mcp-Name: =?base64?c2VhcmNoX3Rvb2xz?="
is "2026 Mcp-Name as Base64 (search_tools): 200" "$CODE" 200
is "2026 tools/call: resultType complete" "$(printf '%s' "$BODY" | json result.resultType)" complete
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call" -H "Mcp-Name: =?base64?!!!?="
check26 "2026 Mcp-Name with bad Base64" 400 -32020 32
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call" -H "Mcp-Name:  search_tools	"
is "2026 Mcp-Name with whitespace around it: 200" "$CODE" 200
m26 "$C26" -H "$V26" -H "Mcp-Method: tools/call" -H "Mcp-Name: search_tools$(printf 'x%.0s' $(seq 1 3000))"
check26 "2026 Mcp-Name the body's name and 3000 bytes more" 400 -32020 32
m26 '{"jsonrpc":"2.0","id":33,"method":"tools/list","params":{}}' -H "$V26" -H "Mcp-Method: tools/list"
check26 "2026 header, no _meta" 400 -32602 33
mcp -H "$ACCEPT_JSON" -H "$V26" -d '{"jsonrpc":"2.0","id":40,"method":"tools/list"}'
check26 "a session's request with a 2026 MCP-Protocol-Version and no _meta" 400 -32602 40
m26 '{"jsonrpc":"2.0","id":34,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}' -H "$V26" -H "Mcp-Method: tools/list"
check26 "2026 _meta without clientCapabilities" 400 -32602 34
m26 '{"jsonrpc":"2.0","id":35,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}' -H "MCP-Protocol-Version: 2099-01-01" -H "Mcp-Method: tools/list"
check26 "2026 a version hutch does not speak" 400 -32022 35
is "… the error lists the versions hutch speaks" "$(printf '%s' "$BODY" | json error.data.supported)" '["2026-07-28"]'
is "… and echoes the one asked for" "$(printf '%s' "$BODY" | json error.data.requested)" 2099-01-01
m26 '{"jsonrpc":"2.0","id":36,"method":"ping","params":{'"$META"'}}' -H "$V26" -H "Mcp-Method: ping"
check26 "2026 ping (removed by the revision)" 404 -32601 36
m26 '{"jsonrpc":"2.0","id":37,"method":"foo/bar","params":{'"$META"'}}' -H "$V26" -H "Mcp-Method: foo/bar"
check26 "2026 an unknown method" 404 -32601 37
m26 '{"jsonrpc":"2.0","id":38,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' -H "$V26" -H "Mcp-Method: initialize"
check26 "initialize with a 2026 MCP-Protocol-Version" 400 -32020 38
m26 '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}' -H "$V26" -H "Mcp-Method: notifications/cancelled"
is "2026 notification: 202" "$CODE" 202
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "the 2025 session still serves beside them" "$CODE" 200
# Closing the stream is cancellation (2026-07-28): a program that would
# sleep 300 s is cancelled when its client gives up, as JSON and as SSE.
# The metric proves it (the program cannot have ended on its own).
S26='{"jsonrpc":"2.0","id":39,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"python","code":"import time\ntime.sleep(300)"},'"$META"'}}'
for accept in "$ACCEPT_JSON" "$ACCEPT_BOTH"; do
    curl -s -m 3 -o /dev/null -H "$AUTH" -H "$CT" -H "$accept" -H "$V26" -H "Mcp-Method: tools/call" \
        -H "Mcp-Name: execute_code" -d "$S26" "$URL"
done
cancelled() {
    curl -s -H "$AUTH" "http://127.0.0.1:$PORT/metrics" |
        awk '/^hutch_executions_total\{.*outcome="cancelled"/ { n += $2 } END { print n + 0 }'
}
for i in $(seq 1 600); do [ "$(cancelled)" -ge 2 ] && break; sleep 0.1; done
is "2026 requests whose client went away were cancelled (JSON and SSE)" "$(cancelled)" 2

# --- what is refused before the body is read ----------------------------
req -H "$CT" -d "$LIST" "$URL"
is "no token: 401" "$CODE" 401
like "no token: WWW-Authenticate names Bearer" "$(header WWW-Authenticate)" "Bearer"
unlike "no token: a bare challenge, no error (RFC 6750 3.1)" "$(header WWW-Authenticate)" "error="
req -H "Authorization: Bearer wrong-$TOKEN" -H "$CT" -d "$LIST" "$URL"
is "wrong token: 401" "$CODE" 401
like "wrong token: error=\"invalid_token\"" "$(header WWW-Authenticate)" 'error="invalid_token"'
req -H "Authorization: Bearer wrong-$TOKEN" "http://127.0.0.1:$PORT/metrics"
like "wrong token on /metrics: error=\"invalid_token\"" "$(header WWW-Authenticate)" 'error="invalid_token"'
# A static token and no OAuth: clients that look for OAuth metadata (RFC
# 9728, RFC 8414, OpenID) learn there is none, with or without a token,
# instead of a 401 they would take as "start an OAuth flow".
for p in /.well-known/oauth-protected-resource /.well-known/oauth-protected-resource/mcp \
    /.well-known/oauth-authorization-server /.well-known/oauth-authorization-server/mcp \
    /.well-known/openid-configuration; do
    req "http://127.0.0.1:$PORT$p"
    is "GET $p without a token: 404" "$CODE" 404
    req -H "$AUTH" "http://127.0.0.1:$PORT$p"
    is "GET $p with the token: 404" "$CODE" 404
done
like "the 404 says hutch takes a static token" "$BODY" "static token"
req -H "Authorization: Bearer ${TOKEN%?}" -H "$CT" -d "$LIST" "$URL"
is "token prefix: 401" "$CODE" 401

mcp -H "Host: evil.example" -d "$LIST"
is "Host evil.example (DNS rebinding): 403" "$CODE" 403
mcp -H "Origin: http://evil.example" -d "$LIST"
is "Origin http://evil.example: 403" "$CODE" 403
mcp -H "Origin: http://localhost:$PORT" -H "$ACCEPT_JSON" -d "$LIST"
is "Origin http://localhost:PORT: 200" "$CODE" 200
mcp -H "Host: localhost:$PORT" -H "$ACCEPT_JSON" -d "$LIST"
is "Host localhost:PORT: 200" "$CODE" 200

mcp -X PUT -d "$LIST"
is "PUT: 405" "$CODE" 405
like "PUT: Allow lists POST" "$(header Allow)" "POST"
req -H "$AUTH" ${SID:+-H "Mcp-Session-Id: $SID"} -H "Accept: text/event-stream" "$URL"
is "GET (no standalone stream): 405" "$CODE" 405
req -H "$AUTH" -H "$CT" -d "$LIST" "http://127.0.0.1:$PORT/other"
is "path other than /mcp: 404" "$CODE" 404

req -H "$AUTH" -H "Content-Type: text/plain" -H "Mcp-Session-Id: $SID" -d "$LIST" "$URL"
is "Content-Type text/plain: 415" "$CODE" 415

head -c $((20 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >"$T/big.json"
START=$(date +%s)
mcp --data-binary @"$T/big.json"
is "20 MiB body: 413" "$CODE" 413
# 413 is the cause; the time (generous for a loaded machine) only says the
# body was not waited for in some slow way.
ok "20 MiB body: refused within 30 s" test $(($(date +%s) - START)) -le 30
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "after 20 MiB body: still serving" "$CODE" 200

# --- ending a session -----------------------------------------------------
req -X DELETE -H "$AUTH" -H "Mcp-Session-Id: $SID" "$URL"
ok "DELETE session: 2xx ($CODE)" test "${CODE#2}" != "$CODE"
mcp -H "$ACCEPT_JSON" -d "$LIST"
is "session after DELETE: 404" "$CODE" 404

kill -TERM "$SERVER_PID"
for i in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
not_ok "SIGTERM stops the server within 30 s" kill -0 "$SERVER_PID" 2>/dev/null

# --- where a token is required, and where it is not ------------------------
PORT2=$(free_port)
timeout 10 "$HUTCH" serve --http "0.0.0.0:$PORT2" </dev/null >/dev/null 2>"$T/public.err"
RC=$?
ok "0.0.0.0 without a token: refused" test "$RC" != 0 -a "$RC" != 124
like "0.0.0.0 without a token: says to set HUTCH_TOKEN" "$(cat "$T/public.err")" "HUTCH_TOKEN"

# What serve is told is checked before anything starts: a bad address
# stops it before any pool or upstream server started (the audit log, on
# stderr here, would show a pool record), and so does a bad HUTCH_HTTP_*.
timeout 60 "$HUTCH" serve --http "localhost:$PORT2" </dev/null >/dev/null 2>"$T/badaddr.err"
RC=$?
ok "--http localhost:PORT: refused" test "$RC" != 0 -a "$RC" != 124
like "--http localhost:PORT: wants an IP address" "$(cat "$T/badaddr.err")" "IP address"
unlike "--http localhost:PORT: refused before any pool started" "$(cat "$T/badaddr.err")" '"event":"pool"'
"$HUTCH" serve --http "localhost:$PORT2" --check-config </dev/null >/dev/null 2>"$T/check.err"
is "--check-config --http localhost:PORT: invalid (1)" "$?" 1
like "--check-config --http localhost:PORT: says why" "$(cat "$T/check.err")" "IP address"
HUTCH_HTTP_MAX_SESSIONS=0 timeout 60 "$HUTCH" serve --http "127.0.0.1:$PORT2" </dev/null >/dev/null 2>"$T/knob.err"
RC=$?
ok "HUTCH_HTTP_MAX_SESSIONS=0: refused" test "$RC" != 0 -a "$RC" != 124
like "HUTCH_HTTP_MAX_SESSIONS=0: says which variable and what it takes" "$(cat "$T/knob.err")" \
    "HUTCH_HTTP_MAX_SESSIONS=0: want a number from 1"
unlike "HUTCH_HTTP_MAX_SESSIONS=0: refused before any pool started" "$(cat "$T/knob.err")" '"event":"pool"'

PORT3=$(free_port)
URL="http://127.0.0.1:$PORT3/mcp"
serve "$T/open.err" --http "127.0.0.1:$PORT3"
ok "127.0.0.1 without a token: serves" test $? = 0
like "127.0.0.1 without a token: warns" "$(cat "$T/open.err")" "warning"
SID=
req -H "$CT" -H "$ACCEPT_JSON" -d "$INIT" "$URL"
is "127.0.0.1 without a token: initialize needs no Authorization" "$CODE" 200
req -H "$CT" -H "Host: evil.example" -d "$INIT" "$URL"
is "127.0.0.1 without a token: Host still checked" "$CODE" 403
kill -TERM "$SERVER_PID"

PORT4=$(free_port)
URL="http://127.0.0.1:$PORT4/mcp"
printf '%s\n' "$TOKEN" >"$T/token"
chmod 600 "$T/token"
serve "$T/file.err" --http "127.0.0.1:$PORT4" --token-file "$T/token"
ok "--token-file: serves" test $? = 0
mcp -H "$ACCEPT_JSON" -d "$INIT"
is "--token-file: the file's token is accepted" "$CODE" 200
req -H "$CT" -d "$INIT" "$URL"
is "--token-file: no token: 401" "$CODE" 401
kill -TERM "$SERVER_PID"

done_testing
