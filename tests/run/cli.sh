#!/bin/bash
# cli.sh — the command line contract: --version, --help everywhere, bad
# arguments, language aliases, plugins and doctor (and their --json), the
# exit status of hutch tools, and hutch's own failures exiting 125 with a
# message that says what to do.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

run_hutch --version
is "--version exits 0" "$RC" 0
like "--version names hutch" "$OUT" "hutch "

for cmd in "" run plugins doctor; do
    run_hutch $cmd --help
    is "hutch $cmd --help exits 0" "$RC" 0
    like "hutch $cmd --help prints usage" "$OUT" "Usage: hutch"
done

run_hutch frobnicate
is "unknown command exits 2" "$RC" 2
like "unknown command is named" "$ERR" 'unknown command "frobnicate"'

run_hutch run --lang cobol -e 'x'
is "unknown language exits 2" "$RC" 2
like "unknown language says what is allowed" "$ERR" "python, javascript or typescript"
like "the refusal lists the aliases" "$ERR" "js, node, nodejs; ts"

run_hutch run --lang python
is "no program exits 2" "$RC" 2

run_hutch run --lang py -e 'print(6 * 7)'
is "--lang py is python" "$OUT" 42
run_hutch run --lang Python3 -e 'print(6 * 7)'
is "--lang python3 (any case) is python" "$OUT" 42
run_hutch run --lang node -e 'console.log(6 * 7)'
is "--lang node is javascript" "$OUT" 42
run_hutch run --lang js -e 'console.log(6 * 7)'
is "--lang js is javascript" "$OUT" 42
run_hutch run --lang ts -e 'const n: number = 6 * 7; console.log(n)'
is "--lang ts is typescript" "$OUT" 42

run_hutch run --lang python -e 'print(1)' --timeout 0
like "bad --timeout is explained" "$ERR" "--timeout wants milliseconds"
is "bad --timeout exits 2 (bad arguments)" "$RC" 2
run_hutch run --lang python -e 'print(1)' --memory 1
is "out-of-range --memory exits 2" "$RC" 2
run_hutch run --lang python -e 'print(1)' --pids 99999999
is "out-of-range --pids exits 2" "$RC" 2

run_hutch run --lang python --executor nosuch -e 'print(1)'
is "unknown executor exits 125" "$RC" 125
like "unknown executor points at hutch plugins" "$ERR" "hutch plugins"

run_hutch run --lang python --plugins /nonexistent -e 'print(1)'
is "missing plugin dir exits 125" "$RC" 125
like "missing plugin dir says how to fix" "$ERR" "HUTCH_PLUGIN_DIR"

run_hutch run --lang python /nonexistent/prog.py
is "missing program file exits 125" "$RC" 125
like "missing program file is named" "$ERR" "/nonexistent/prog.py"

run_hutch run --lang python -e 'print(1)' --file /nonexistent/input.txt
is "missing --file exits 125" "$RC" 125
like "missing --file is named" "$ERR" "/nonexistent/input.txt"

run_hutch run --lang python -e 'print(1)' --file /etc/hostname:../escape
is "--file DEST with .. exits 125" "$RC" 125
like "--file DEST with .. is refused" "$ERR" ".."

run_hutch plugins
is "hutch plugins exits 0" "$RC" 0
like "hutch plugins lists local as usable" "$OUT" "local      usable"
like "hutch plugins lists an executor's policy options" "$OUT" \
    "      platform          string  policy or \$HUTCH_GVISOR_PLATFORM"
like "... and its environment-only ones" "$OUT" "      python            string  \$HUTCH_PYTHON"
like "... each with its doc" "$OUT" "The platform of the sandboxes: ptrace (the default) or kvm"

TP=$(mktemp -d)
ln -s "$HUTCH_TEST_PLUGINS/wrongabi.so" "$TP/wrongabi.so"
ln -s "$HUTCH_TEST_PLUGINS/nosym.so" "$TP/nosym.so"
printf 'garbage' >"$TP/garbage.so"
run_hutch plugins --plugins "$TP"
is "hutch plugins survives broken plugins" "$RC" 0
like "wrong ABI is listed with its reason" "$OUT" "built for executor ABI 42"
like "missing symbol is listed with its reason" "$OUT" "no symbol hutch_executor_entry"
like "garbage is listed with its reason" "$OUT" "cannot load"
run_hutch plugins --plugins "$TP" --json
is "hutch plugins --json exits 0" "$RC" 0
is "hutch plugins --json is one JSON document" \
    "$(echo "$OUT" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(sorted(d), len(d["plugins"]))')" \
    "['plugin_dir', 'plugins'] 3"
is "hutch plugins --json: every plugin with name, file, path, usable, version and a reason" \
    "$(echo "$OUT" | $PY -c '
import json,sys
d = json.load(sys.stdin)
print(sorted(set(k for p in d["plugins"] for k in p)), [p["usable"] for p in d["plugins"]])')" \
    "['file', 'name', 'path', 'reason', 'usable', 'version'] [False, False, False]"
like "hutch plugins --json keeps the reasons" "$OUT" "built for executor ABI 42"
rm -rf "$TP"
run_hutch plugins --json
is "hutch plugins --json: local is usable, with its version and summary" \
    "$(echo "$OUT" | $PY -c '
import json,sys
p = [p for p in json.load(sys.stdin)["plugins"] if p["name"] == "local"][0]
print(p["usable"], bool(p["version"]), bool(p["summary"]), p["file"])')" \
    "True True True local.so"
is "hutch plugins --json: the options local declares, with type, env and doc" \
    "$(echo "$OUT" | $PY -c '
import json,sys
p = [p for p in json.load(sys.stdin)["plugins"] if p["name"] == "local"][0]
print([(o["name"], o["type"], o["env"], o["policy"], bool(o["doc"])) for o in p["options"]])')" \
    "[('flavour', 'string', None, True, True), ('python', 'string', 'HUTCH_PYTHON', False, True), ('node', 'string', 'HUTCH_NODE', False, True), ('zygote', 'bool', 'HUTCH_LOCAL_ZYGOTE', False, True), ('uid_base', 'int', 'HUTCH_LOCAL_UID_BASE', False, True)]"

# An environment-only option's bad value: judged as a policy's would be.
HUTCH_LOCAL_ZYGOTE=yes run_hutch run --executor local --lang python -e 'print(1)'
is "HUTCH_LOCAL_ZYGOTE=yes: hutch run fails" "$RC" 125
like "... saying what the variable wants" "$ERR" 'HUTCH_LOCAL_ZYGOTE=yes: expected a boolean ("true" or "false")'

run_hutch doctor
is "hutch doctor passes on this machine" "$RC" 0
like "doctor checks namespaces" "$OUT" "namespaces"
like "doctor checks seccomp" "$OUT" "seccomp"
like "doctor checks cgroups" "$OUT" "cgroups"
like "doctor finds python" "$OUT" "python"
like "doctor finds node" "$OUT" "javascript"
# Which of the data flavour's packages the local executor offers: the host's.
like "doctor says the host's numpy, the local executor's" "$OUT" \
    "python packages        local (the host's $(readlink -f /usr/bin/python3)): numpy $(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)' 2>/dev/null)"

# --flavour: base or data; the data flavour on local is the host's Python
# with its packages (numpy is installed here, as doctor just said).
run_hutch run -l python --flavour bogus -e 1
is "run --flavour bogus: a usage error" "$RC" 2
like "... naming the flavours" "$ERR" "--flavour must be base or data"
run_hutch run -l python --flavour data -e 'import numpy, pandas, matplotlib; print("ok")'
is "run --flavour data on local: numpy, pandas and matplotlib import" "$RC:$OUT" "0:ok"
FLDIR=$(mktemp -d)
printf 'return { executor_options = { ["local"] = { flavour = "base" } } }\n' >"$FLDIR/p.lua"
run_hutch run -l python --policy "$FLDIR/p.lua" --flavour data -e 1
like "--flavour and the policy's flavour must agree" "$ERR" \
    "--flavour data and the policy's executor_options.local.flavour \"base\" differ"
run_hutch serve --check-config --flavour data --policy "$FLDIR/p.lua"
is "serve --check-config refuses the disagreement too" "$RC" 1
rm -rf "$FLDIR"

HUTCH_RUNNER_DIR=/nonexistent run_hutch doctor
is "doctor fails without runners" "$RC" 1
like "doctor says how to fix missing runners" "$ERR$OUT" "HUTCH_RUNNER_DIR"

run_hutch doctor --json
is "hutch doctor --json exits 0 here too" "$RC" 0
is "hutch doctor --json: ok, failures and the checks" \
    "$(echo "$OUT" | $PY -c '
import json,sys
d = json.load(sys.stdin)
c = {x["check"]: x for x in d["checks"]}
print(d["ok"], d["failures"], sorted(d), sorted(c["namespaces"]), c["namespaces"]["status"],
      "python" in c and "javascript" in c and "executor local" in c)')" \
    "True 0 ['checks', 'failures', 'ok'] ['check', 'detail', 'essential', 'status'] ok True"
HUTCH_RUNNER_DIR=/nonexistent run_hutch doctor --json
is "hutch doctor --json fails without runners, with the same exit status" "$RC" 1
is "hutch doctor --json says which check failed and how to fix it" \
    "$(echo "$OUT" | $PY -c '
import json,sys
d = json.load(sys.stdin)
f = [x for x in d["checks"] if x["status"] == "FAIL"]
print(d["ok"], d["failures"] >= 1, f[0]["check"], "HUTCH_RUNNER_DIR" in f[0]["detail"])')" \
    "False True runners True"

# hutch tools: a server that did not start makes the exit status 1 (the
# others' tools are still printed); disabled and skipped entries do not.
EVERYTHING="$HUTCH_SRCDIR/tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ -f "$EVERYTHING" ]; then
    TS=$(mktemp -d)
    cat >"$TS/good.json" <<EOS
{"mcpServers": {
  "everything": {"command": "/usr/bin/node", "args": ["\${CLI_TEST_JS}", "stdio"]},
  "off": {"command": "nosuchcmd-cli", "disabled": true},
  "legacy": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}
EOS
    cat >"$TS/some.json" <<EOS
{"mcpServers": {
  "everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]},
  "broken": {"command": "nosuchcmd-cli"}}}
EOS
    cat >"$TS/none.json" <<EOS
{"mcpServers": {"broken": {"command": "nosuchcmd-cli"}}}
EOS
    cat >"$TS/typo.json" <<EOS
{"mcpServers": {
  "everything": {"command": "/usr/bin/node", "args": ["$EVERYTHING", "stdio"]},
  "typo": {"comand": "nosuchcmd-cli"}}}
EOS
    CLI_TEST_JS=$EVERYTHING run_hutch tools --servers "$TS/good.json" --detail names
    is "hutch tools exits 0 when every started server is up" "$RC" 0
    like "hutch tools: \${VAR} in args is expanded" "$OUT" "tools.everything.echo"
    like "hutch tools lists a disabled server as disabled" "$ERR" "upstream off is disabled"
    like "hutch tools warns about a skipped sse server" "$ERR" 'server "legacy" is skipped'
    run_hutch tools --servers "$TS/some.json" --detail names
    is "hutch tools exits 1 when a server failed" "$RC" 1
    like "... still printing the others' tools" "$OUT" "tools.everything.echo"
    like "... naming the failure on stderr" "$ERR" "upstream broken is failed"
    like "... and counting" "$ERR" "1 of 2 servers did not start"
    run_hutch tools --servers "$TS/none.json"
    is "hutch tools exits 1 when every server failed" "$RC" 1
    run_hutch tools --servers "$TS/typo.json" --detail names
    is "hutch tools exits 1 for a broken entry" "$RC" 1
    like "... which is skipped while the others start" "$OUT" "tools.everything.echo"
    like "... pointing at the typo" "$ERR" \
        'server "typo": unknown key "comand" is ignored (did you mean "command"?)'
    like "... and saying why it is skipped" "$ERR" 'server "typo" is skipped: "command" is missing'
    run_hutch tools --servers "$TS/good.json"
    is "hutch tools exits 1 for an unset \${VAR}" "$RC" 1
    like "... naming the variable, the server and the field" "$ERR" \
        'server "everything" is skipped: "args"[0]: ${CLI_TEST_JS} is not set'
    rm -rf "$TS"
fi

done_testing
