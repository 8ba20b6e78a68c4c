#!/bin/bash
# config.sh — hutch serve --config FILE: the file's settings are used (the
# HTTP address, the executor), a flag overrides the file, an unknown key is
# reported with the nearest one, and --check-config's exit codes.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

command -v curl >/dev/null || skip_all "curl is not installed"
unset HUTCH_TOKEN HUTCH_EXECUTOR
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
# answers PORT: the HTTP status of an unauthenticated POST to /mcp (000:
# nothing listens).
answers() {
    curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST \
        -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$1/mcp"
}
# serve ARGS…: start hutch serve in the background; SERVER_PID.
serve() {
    "$HUTCH" serve "$@" </dev/null >/dev/null 2>"$T/serve.log" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
# wait_answer PORT: until something answers there, or the server is gone.
wait_answer() {
    for _ in $(seq 1 300); do
        [ "$(answers "$1")" != 000 ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

echo "config-sh-token-0123456789abcdef" >"$T/token"
P1=$(free_port)
P2=$(free_port)
cat >"$T/serve.conf" <<CONF
# hutch serve settings
http = 127.0.0.1:$P1
token-file = $T/token

executor = local
pool = 0
timeout = 20000
no-envelope = true
CONF

# --- --check-config ------------------------------------------------------------
run_hutch serve --config "$T/serve.conf" --check-config
is "--check-config: a valid file exits 0" "$RC" 0
like "--check-config says ok" "$OUT" "ok: $T/serve.conf"

printf 'http = 127.0.0.1:%s\ntimout = 5000\n' "$P1" >"$T/typo.conf"
run_hutch serve --check-config --config "$T/typo.conf"
is "--check-config: an unknown key exits 1" "$RC" 1
like "the unknown key is named with its line and the nearest key" "$ERR" \
    "$T/typo.conf:2: unknown key \"timout\" (did you mean \"timeout\"?)"
run_hutch serve --config "$T/typo.conf"
is "serve refuses to start on an unknown key (exit 2)" "$RC" 2
like "and says why" "$ERR" 'unknown key "timout"'

printf 'timeout = 0\n' >"$T/value.conf"
run_hutch serve --config "$T/value.conf" --check-config
is "--check-config: a bad value in the file exits 1" "$RC" 1
like "the bad value is explained" "$ERR" "--timeout"
run_hutch serve --config "$T/value.conf" --check-config --timeout 1000
is "... and 1 even when a flag overrides it" "$RC" 1

# The shapes cache (--shapes, key shapes): a bad one is a warning, not an error.
printf '{"hutch_shapes":1,' >"$T/shapes.json"
printf 'shapes = %s\n' "$T/shapes.json" >"$T/shapes.conf"
run_hutch serve --config "$T/shapes.conf" --check-config
is "--check-config: a corrupt shapes file exits 0" "$RC" 0
like "... with a warning naming it" "$ERR" "warning: result shapes: $T/shapes.json"
printf '{"hutch_shapes":2,"principals":{}}' >"$T/shapes.json"
run_hutch serve --config "$T/shapes.conf" --check-config
is "--check-config: a valid shapes file says nothing of it" "$RC:$ERR" "0:"
printf '{"hutch_shapes":1,"tools":{}}' >"$T/shapes.json"
run_hutch serve --config "$T/shapes.conf" --check-config
is "--check-config: a version 1 shapes file exits 0" "$RC" 0
like "... with a warning that it is not read, and why" "$ERR" "version 1 of the shapes file holds the shapes of every principal together"

printf 'http\n' >"$T/syntax.conf"
run_hutch serve --config "$T/syntax.conf" --check-config
is "--check-config: a line without = exits 1" "$RC" 1
like "it says which line" "$ERR" "$T/syntax.conf:1:"
printf 'no-envelope = maybe\n' >"$T/bool.conf"
run_hutch serve --config "$T/bool.conf" --check-config
is "--check-config: a switch wants true or false" "$RC" 1
printf 'pids = 64\npids = 65\n' >"$T/twice.conf"
run_hutch serve --config "$T/twice.conf" --check-config
is "--check-config: a key set twice exits 1" "$RC" 1
run_hutch serve --config "$T/nonexistent.conf" --check-config
is "--check-config: a missing file exits 1" "$RC" 1
like "and names it" "$ERR" "$T/nonexistent.conf"
printf 'policy = %s/nonexistent.lua\n' "$T" >"$T/policy.conf"
run_hutch serve --config "$T/policy.conf" --check-config
is "--check-config: a policy that does not load exits 1" "$RC" 1
run_hutch serve --config "$T/serve.conf" --check-config --frobnicate
is "--check-config: a bad command line exits 2" "$RC" 2
run_hutch serve --check-config --pids 64
is "--check-config without --config checks the flags" "$RC" 0

# --check-config reads what serve reads before it starts anything: the
# servers file (parsed, variables expanded, no server started), the
# executor (found and probed) and the audit log (nothing created).
cat >"$T/servers.json" <<JSON
{"mcpServers": {
  "up": {"command": "/bin/sh", "args": ["-c", "touch $T/started"],
         "env": {"K": "\${CONFIG_SH_SET:-fallback}"}, "tmeout_ms": 5},
  "off": {"command": "/bin/sh", "disabled": true}
}}
JSON
run_hutch serve --check-config --servers "$T/servers.json" --executor local \
    --audit "$T/audit.log"
is "--check-config: a good servers file, executor and audit path exit 0" "$RC" 0
like "... the servers file's unknown key is warned about as serve would" "$ERR" \
    'unknown key "tmeout_ms"'
ok "... no server was started" test ! -e "$T/started"
ok "... the audit log was not created" test ! -e "$T/audit.log"

printf '{"mcpServers": {"bad": {"command": 5}, "good": {"command": "/bin/true"}}}\n' \
    >"$T/bad-servers.json"
run_hutch serve --check-config --servers "$T/bad-servers.json"
is "--check-config: a broken entry exits 1 (serve would skip it)" "$RC" 1
like "... naming the file" "$ERR" "servers: $T/bad-servers.json: 1 broken entry would be skipped"
like "... and the server and why" "$ERR" 'server "bad" is skipped: "command" must be a non-empty string'
printf '{"mcpServers": ' >"$T/broken-servers.json"
run_hutch serve --check-config --servers "$T/broken-servers.json"
is "--check-config: a servers file that is not JSON exits 1" "$RC" 1
like "... saying where" "$ERR" "$T/broken-servers.json: invalid JSON"
run_hutch serve --check-config --servers "$T/nonexistent.json"
is "--check-config: a missing servers file exits 1" "$RC" 1

printf '{"mcpServers": {"u": {"command": "/bin/sh", "args": ["${CONFIG_SH_UNSET}"]}}}\n' \
    >"$T/unset-servers.json"
unset CONFIG_SH_UNSET
run_hutch serve --check-config --servers "$T/unset-servers.json"
is "--check-config: an unset \${VAR} without a default exits 1" "$RC" 1
like "... naming the variable" "$ERR" "CONFIG_SH_UNSET"
CONFIG_SH_UNSET=set run_hutch serve --check-config --servers "$T/unset-servers.json"
is "... and passes once it is set" "$RC" 0

# VS Code's .vscode/mcp.json as it is: JSON with comments and trailing
# commas; an entry with VS Code's own variables is named and skipped.
cat >"$T/mcp.json" <<'JSON'
// .vscode/mcp.json
{
  "inputs": [
    { "type": "promptString", "id": "api-key", "description": "API key", "password": true },
  ],
  "servers": {
    /* a local server */
    "local": { "type": "stdio", "command": "/bin/true", "args": ["--url=http://h//x"], },
    "remote": { "type": "http", "url": "http://127.0.0.1:9/mcp",
                "headers": { "Authorization": "Bearer ${input:api-key}" } },
  },
}
JSON
run_hutch serve --check-config --servers "$T/mcp.json"
is "--check-config: VS Code's mcp.json with an \${input:...} entry exits 1" "$RC" 1
like "... naming the entry and the VS Code input" "$ERR" \
    'server "remote" is skipped: "headers"."Authorization": ${input:api-key} is a VS Code input'
unlike "... and nothing about the comments or commas" "$ERR" "invalid JSON"
grep -v remote "$T/mcp.json" | sed 's/"headers".*//' >"$T/mcp2.json"
run_hutch serve --check-config --servers "$T/mcp2.json"
is "--check-config: VS Code's mcp.json (comments, trailing commas) is valid" "$RC" 0
printf '{"servers": {\n  /* never closed\n}}\n' >"$T/open-comment.json"
run_hutch serve --check-config --servers "$T/open-comment.json"
is "--check-config: a comment never closed exits 1" "$RC" 1
like "... saying where it starts" "$ERR" \
    "$T/open-comment.json: a comment that starts at line 2, column 3 is never closed"

run_hutch serve --check-config --executor nosuch
is "--check-config: an unknown executor exits 1" "$RC" 1
like "... naming it" "$ERR" 'executor: no executor named "nosuch"'
HUTCH_EXECUTOR=nosuch run_hutch serve --check-config
is "--check-config: an unknown \$HUTCH_EXECUTOR exits 1" "$RC" 1
printf 'return { executor = "nosuch" }\n' >"$T/nosuch.lua"
run_hutch serve --check-config --policy "$T/nosuch.lua"
is "--check-config: a policy's unknown executor exits 1" "$RC" 1
like "... naming it" "$ERR" '"nosuch"'

run_hutch serve --check-config --audit "$T/no-such-dir/audit.log"
is "--check-config: an audit log in a missing directory exits 1" "$RC" 1
like "... naming the directory" "$ERR" "audit: audit log $T/no-such-dir/audit.log cannot be created: its directory $T/no-such-dir"
mkdir "$T/ro"
chmod 0555 "$T/ro"
if [ "$(id -u)" != 0 ]; then
    run_hutch serve --check-config --audit "$T/ro/audit.log"
    is "--check-config: an audit log in an unwritable directory exits 1" "$RC" 1
    like "... saying so" "$ERR" "its directory $T/ro is not writable"
else # root writes anywhere: a read-only file system stops it
    mkdir "$T/rofs"
    if mount -t tmpfs -o ro,size=64k tmpfs "$T/rofs" 2>/dev/null; then
        run_hutch serve --check-config --audit "$T/rofs/audit.log"
        umount "$T/rofs"
        is "--check-config: an audit log in an unwritable directory exits 1" "$RC" 1
        like "... saying so" "$ERR" "its directory $T/rofs is not writable"
    else
        ok "# SKIP no tmpfs mount here to make an unwritable directory for root" true
        ok "# SKIP" true
    fi
fi
run_hutch serve --check-config --audit "$T"
is "--check-config: an audit log that is a directory exits 1" "$RC" 1
like "... saying why" "$ERR" "cannot be opened for appending"
echo old >"$T/existing.log"
run_hutch serve --check-config --audit "$T/existing.log"
is "--check-config: an existing audit log passes" "$RC" 0
is "... untouched" "$(cat "$T/existing.log")" old

# --- the file is used, a flag overrides it -------------------------------------
serve --config "$T/serve.conf"
ok "serve listens on the file's address" wait_answer "$P1"
is "... and asks for the file's token" "$(answers "$P1")" 401
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null

serve --config "$T/serve.conf" --http "127.0.0.1:$P2"
ok "--http overrides the file's address" wait_answer "$P2"
is "... and nothing listens on the file's" "$(answers "$P1")" 000
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null

sed 's/^executor = local$/executor = nosuch/' "$T/serve.conf" >"$T/nosuch.conf"
run_hutch serve --config "$T/nosuch.conf"
is "the file's executor is used (nosuch: refused at start-up)" "$RC" 125
like "... naming it" "$ERR" "nosuch"
serve --config "$T/nosuch.conf" --executor local
ok "--executor overrides the file's executor" wait_answer "$P1"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null

done_testing
