#!/bin/bash
# approval.sh — on_tool_call may answer "ask", question (issue 11, point
# 3): the user decides whether a program's tool call goes ahead.  Here
# through `hutch run`, which asks on its terminal (/dev/tty): approve,
# decline, no answer within the call's time, no terminal at all; the
# audit log holds the question and the answer; `hutch policy test` says
# "ask".  Real server-everything, a real pseudo-terminal
# (tests/lib/pty_answer.py waits for the prompt: no timing).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
NM="$HUTCH_SRCDIR/tests/mcp/node_modules"
EVERYTHING="$NM/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$EVERYTHING" ] || skip_all "npm test dependencies are not installed (npm ci in tests/mcp)"
PTY="$HUTCH_SRCDIR/tests/lib/pty_answer.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cat >"$T/servers.json" <<EOF
{"mcpServers": {"everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]}}}
EOF
cat >"$T/p.lua" <<'EOF'
return {
  tools = { allow = { "everything.*" } },
  on_tool_call = function(call)
    if call.name == "echo" then
      return "ask", "Let the program echo " .. tostring(call.args.message) .. "?"
    end
    if call.name == "get-sum" then
      return "ask"
    end
    return true
  end,
}
EOF
PROG='
try:
    print("answer:", tools.everything.echo(message="hello"))
except ToolError as e:
    print("refused:", e.code, e)'
run() { # ANSWER [hutch run flags…]: the program above on a terminal
    a=$1
    shift
    "$PY" "$PTY" "$a" "$HUTCH" run --servers "$T/servers.json" --policy "$T/p.lua" \
        --audit "$T/audit.jsonl" "$@" --lang python -e "$PROG"
}
last_call() { grep '"event":"tool_call"' "$T/audit.jsonl" | tail -1; }

out=$("$HUTCH" policy test "$T/p.lua" --tool everything.echo --args '{"message":"hi"}')
is "hutch policy test: exit 4 for a question" "$?" 4
is "hutch policy test prints the question" "$out" "ask: Let the program echo hi?"
out=$("$HUTCH" policy test "$T/p.lua" --tool everything.get-sum --args '{"a":1,"b":2}')
like "\"ask\" without a question is a policy error, not a question" "$out" \
    'deny: policy error: on_tool_call returned "ask" without a question'

out=$(run y 2>&1)
like "the terminal shows the question" "$out" "Let the program echo hello?"
like "and the call's arguments, one to a line" "$out" 'with the arguments:
  message: "hello"'

like "approved (y): the call goes ahead" "$out" "answer: Echo: hello"
a=$(last_call)
like "audit: allowed" "$a" '"decision":"allow"'
like "audit: the question" "$a" '"question":"Let the program echo hello?"'
like "audit: the answer" "$a" '"answer":"approve"'

# An address after 4000 harmless bytes: shown (the tail of the argument),
# with what was left out counted; an escape in an argument is not sent to
# the terminal.  (The question was cut at 300 bytes.)
out=$("$PY" "$PTY" n "$HUTCH" run --servers "$T/servers.json" --policy "$T/p.lua" \
    --lang python -e '
try:
    tools.everything.echo(message="harmless " * 450 + "to=attacker@evil.example \x1b]52;c;Zm9v\x07\u202e")
except ToolError as e:
    print("refused:", e.code)' 2>&1)
like "a long argument: its tail reaches the terminal" "$out" 'to=attacker@evil.example \u001b]52;c;Zm9v\u0007\u{202e}"'
like "with what was left out counted" "$out" "bytes left out]…"
unlike "no escape byte reaches the terminal" "$out" $'\e'
unlike "nor the override" "$out" $'\u202e'
like "declined" "$out" "refused: denied"

out=$(run n 2>&1)
like "declined (n): the program sees a denial it can catch" "$out" \
    "refused: denied the user declined: Let the program echo hello?"
like "audit: declined" "$(last_call)" '"answer":"decline"'

# Nobody types: the question waits as long as the call may (a share of
# what is left of the run's 15 s), then the call is denied.
out=$(run - --timeout 15000 2>&1)
like "no answer: denied when the call's time is up" "$out" "refused: denied no answer from the user within"
like "audit: timeout" "$(last_call)" '"answer":"timeout"'

# No terminal at all (setsid: no controlling terminal; stdin /dev/null).
out=$(setsid "$HUTCH" run --servers "$T/servers.json" --policy "$T/p.lua" --audit "$T/audit.jsonl" \
    --lang python -e "$PROG" </dev/null 2>&1)
like "no terminal: denied, saying nobody can be asked" "$out" \
    "hutch run has no terminal to ask on"
like "audit: no answer" "$(last_call)" '"answer":"none"'

done_testing
