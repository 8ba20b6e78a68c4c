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

# --- what is refused before the body is read ----------------------------
req -H "$CT" -d "$LIST" "$URL"
is "no token: 401" "$CODE" 401
like "no token: WWW-Authenticate names Bearer" "$(header WWW-Authenticate)" "Bearer"
req -H "Authorization: Bearer wrong-$TOKEN" -H "$CT" -d "$LIST" "$URL"
is "wrong token: 401" "$CODE" 401
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
