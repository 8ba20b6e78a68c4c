// metrics.mjs — `hutch serve --http`'s operator endpoints: /healthz,
// /readyz (upstream states, before and after one comes up), /metrics in the
// Prometheus text format (parsed strictly), whose counts must match a mixed
// workload run through the official SDK client and the audit log (which
// names arguments without their values); the token rules of each endpoint;
// what /readyz says of policy reloads, and to whom; and --log-format json
// (every stderr line parses).
import http from "node:http";
import {
  MCP,
  NODE,
  SERVERS_DIR,
  assert,
  connectHttp,
  execute,
  fs,
  js,
  loadSdk,
  onExit,
  os,
  path,
  py,
  requireEnv,
  spawnHttp,
  tap,
  waitFor,
} from "./lib.mjs";

const hutch = requireEnv();
const sdk = await loadSdk();
const t = tap({ timeout: 600 });
const executor = process.env.HUTCH_EXECUTOR || "local";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-metrics-"));
onExit(() => fs.rmSync(dir, { recursive: true, force: true }));
const gate = path.join(dir, "gate");
const audit = path.join(dir, "audit.jsonl");
const servers = path.join(dir, "servers.json");
fs.writeFileSync(
  servers,
  JSON.stringify({
    mcpServers: {
      everything: { command: NODE, args: [path.join(MCP, "server-everything", "dist", "index.js"), "stdio"] },
      down: { command: path.join(dir, "no-such-server") },
      gate: { command: NODE, args: [path.join(SERVERS_DIR, "slowstart.mjs")], env: { SLOWSTART_FILE: gate } },
      off: { command: path.join(dir, "no-such-server"), disabled: true },
      legacy: { type: "sse", url: "http://127.0.0.1:1/sse" },
    },
  }),
);
const policy = path.join(dir, "p.lua");
fs.writeFileSync(
  policy,
  `return {
  tools = { allow = { "everything.echo", "everything.get-sum", "everything.get-env" },
            deny = { "everything.get-env" } },
  on_execute = function(req)
    if req.language == "javascript" then return false, "no javascript here" end
    return true
  end,
}
`,
);

const token = "metrics-token-" + process.pid + "-0123456789";
const srv = await spawnHttp({
  hutch,
  servers,
  token,
  args: ["--policy", policy, "--audit", audit, "--log-format", "json", "-v"],
});
onExit(() => srv.proc.kill("SIGKILL"));
const base = `http://127.0.0.1:${srv.port}`;
const auth = { Authorization: `Bearer ${token}` };
const get = async (p, headers = {}, method = "GET") => {
  const r = await fetch(base + p, { method, headers });
  return { status: r.status, type: r.headers.get("content-type") || "", body: await r.text() };
};
const ready = async (headers = auth) => {
  const r = await get("/readyz", headers);
  return { ...r, json: JSON.parse(r.body) };
};
const stateOf = (rz, name) => rz.json.upstreams.find((u) => u.server === name)?.state;

// --- health and readiness --------------------------------------------------------
const hz = await get("/healthz");
t.is(hz.status, 200, "/healthz answers 200 without a token");
t.like(hz.body, /ok/, "/healthz says ok");
t.is((await get("/healthz", {}, "HEAD")).status, 200, "HEAD /healthz answers 200");
t.is((await get("/healthz", {}, "POST")).status, 405, "POST /healthz is 405");
// fetch() will not send another Host: node:http will (DNS rebinding).
const rawStatus = (p, headers) =>
  new Promise((resolve, reject) => {
    const rq = http.request({ host: "127.0.0.1", port: srv.port, path: p, headers }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    rq.on("error", reject);
    rq.end();
  });
for (const p of ["/healthz", "/readyz", "/metrics"]) {
  t.is(await rawStatus(p, { Host: "evil.example" }), 403, `${p} keeps the Host check of a loopback bind`);
  t.is(await rawStatus(p, { Host: `127.0.0.1:${srv.port}`, Origin: "http://evil.example", ...auth }), 403,
    `${p} keeps the Origin check of a loopback bind`);
}

await waitFor(async () => stateOf(await ready(), "everything") === "ready", 120000, 200);
const before = await ready();
t.is(before.status, 200, "/readyz answers 200: the policy is loaded and the executor usable");
t.is(before.json.ready, true, "/readyz says ready");
t.is(before.json.executor?.name, executor, "/readyz names the executor serve uses");
t.is(stateOf(before, "everything"), "ready", "/readyz: the server that is up is ready");
t.is(stateOf(before, "gate"), "starting", "/readyz: the gated server is still starting");
t.like(stateOf(before, "down"), /^(failed|restarting)$/, "/readyz: the server that cannot start is down");
const downDetail = before.json.upstreams.find((u) => u.server === "down");
t.ok(downDetail?.error, "/readyz with the token says why a server is down", JSON.stringify(downDetail));
const anon = await ready({});
t.is(anon.status, 200, "/readyz needs no token");
t.is(stateOf(anon, "everything"), "ready", "/readyz without a token still lists states");
t.ok(anon.json.upstreams.every((u) => u.error === undefined),
  "/readyz without a token leaves out error texts", JSON.stringify(anon.json.upstreams));
t.ok(!anon.body.includes(dir) && anon.json.policy?.source === undefined && anon.json.policy?.ok === true,
  "/readyz without a token shows the policy's state, not where its file is", anon.body);
t.is(before.json.policy?.source, policy, "/readyz with the token names the policy file");
t.ok(Array.isArray(before.json.pools), "/readyz lists the pools");

// --- the token on /metrics -------------------------------------------------------
t.is((await get("/metrics")).status, 401, "/metrics without the token is 401");
t.is((await get("/metrics", { Authorization: "Bearer wrong-token-0123456789" })).status, 401,
  "/metrics with a wrong token is 401");
t.is((await get("/metrics", auth, "DELETE")).status, 405, "DELETE /metrics is 405");

// --- a mixed workload ------------------------------------------------------------
const { client } = await connectHttp({ sdk, url: srv.url, token });
const runs = {};
await t.step("two runs that succeed", async () => {
  for (let i = 0; i < 2; i++) {
    const x = await execute(client, py(`print(${i})`));
    assert(x.s.exit_code === 0, `exit ${x.s.exit_code}`);
  }
});
await t.step("a run with tool calls: ok, denied, invalid arguments, unknown", async () => {
  const x = await execute(
    client,
    py(`
out = []
out.append(tools.everything.echo(message="customer-record-4217"))
out.append(tools.everything.get_sum(a=1, b=2))
for name, args in [("everything.get-env", {}), ("everything.get-sum", {"a": "x"}), ("nosuch.tool", {})]:
    try:
        tools.call(name, args)
        out.append("no error")
    except Exception as e:
        out.append(getattr(e, "code", "?"))
out
`, { trace: true }),
  );
  assert(x.s.exit_code === 0, `exit ${x.s.exit_code}: ${x.text}`);
  runs.tools = x.s.trace.map((c) => c.outcome);
  assert(
    JSON.stringify(x.s.result.slice(2)) === JSON.stringify(["denied", "invalid_args", "unknown_tool"]),
    JSON.stringify(x.s.result),
  );
});
await t.step("a run that exits 1 and one that raises", async () => {
  const a = await execute(client, py("import sys\nsys.exit(1)"));
  assert(a.s.exit_code === 1, `exit ${a.s.exit_code}`);
  const b = await execute(client, py("raise ValueError('no')"));
  assert(b.s.exit_code !== 0, `exit ${b.s.exit_code}`);
});
await t.step("a run over its time", async () => {
  const x = await execute(client, py("while True: pass", { timeout_ms: 1500 }));
  assert(x.s.timed_out === true, JSON.stringify(x.s));
});
await t.step("a run the policy refuses", async () => {
  const x = await client.callTool({ name: "execute_code", arguments: js("return 1") });
  assert(x.isError, JSON.stringify(x));
  assert(/no javascript here/.test(JSON.stringify(x.content)), JSON.stringify(x.content));
});

// --- the exposition --------------------------------------------------------------
// A strict reader of the text format 0.0.4: every line is a comment or a
// sample, every sample's family has HELP and TYPE before it, label values
// use only the escapes the format has, no series twice.
function parse(text) {
  const fams = new Map();
  const samples = [];
  const seen = new Set();
  const errors = [];
  const lines = text.split("\n");
  if (lines.pop() !== "") errors.push("the text does not end with a newline");
  const name = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  const sampleRe = new RegExp(`^(${name})(\\{(.*)\\})? (\\S+)$`);
  for (const line of lines) {
    let m;
    if ((m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line))) {
      const f = fams.get(m[2]) || {};
      if (f[m[1]]) errors.push(`second ${m[1]} for ${m[2]}`);
      if (m[1] === "TYPE" && !["counter", "gauge", "histogram", "summary", "untyped"].includes(m[3]))
        errors.push(`bad type ${line}`);
      f[m[1]] = m[3];
      fams.set(m[2], f);
      continue;
    }
    if (!(m = sampleRe.exec(line))) {
      errors.push(`unparsable line: ${JSON.stringify(line)}`);
      continue;
    }
    const [, metric, , lbl, value] = m;
    const labels = {};
    if (lbl !== undefined) {
      const lre = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y;
      let pos = 0;
      while (pos < lbl.length) {
        lre.lastIndex = pos;
        const l = lre.exec(lbl);
        if (!l) {
          errors.push(`bad labels: ${line}`);
          break;
        }
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        pos = lre.lastIndex;
      }
    }
    if (!/^([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[+-]Inf|NaN)$/.test(value)) errors.push(`bad value: ${line}`);
    const fam = [metric, metric.replace(/_(bucket|sum|count)$/, "")].find((n) => fams.has(n));
    if (!fam) errors.push(`no HELP/TYPE before ${metric}`);
    else if (!fams.get(fam).HELP || !fams.get(fam).TYPE) errors.push(`${fam} lacks HELP or TYPE`);
    else if (fams.get(fam).TYPE === "counter" && !metric.endsWith("_total")) errors.push(`counter ${metric} lacks _total`);
    const key = metric + JSON.stringify(Object.entries(labels).sort());
    if (seen.has(key)) errors.push(`series twice: ${line}`);
    seen.add(key);
    samples.push({ metric, labels, value: Number(value.replace("Inf", "Infinity")), fam });
  }
  return { fams, samples, errors };
}
const val = (p, metric, want = {}) =>
  p.samples
    .filter((s) => s.metric === metric && Object.entries(want).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);

// The pools refill after the runs: settle first so the gauges are still.
const scrape = async () => {
  const r = await get("/metrics", auth);
  assert(r.status === 200, `status ${r.status}`);
  return { ...r, p: parse(r.body) };
};
const m = await scrape();
t.like(m.type, /^text\/plain; version=0\.0\.4/, "/metrics is text/plain version 0.0.4");
t.is(m.p.errors, [], "every line of /metrics parses; every family has HELP and TYPE; no series twice");
t.ok(m.p.samples.every((s) => s.metric.startsWith("hutch_")), "every metric is named hutch_*");

// Histograms: cumulative buckets ending at +Inf, which equals _count.
{
  const problems = [];
  for (const [fam, f] of m.p.fams) {
    if (f.TYPE !== "histogram") continue;
    const series = new Map();
    for (const s of m.p.samples.filter((x) => x.fam === fam)) {
      const { le, ...rest } = s.labels;
      const k = JSON.stringify(Object.entries(rest).sort());
      const e = series.get(k) || { buckets: [], sum: null, count: null };
      if (s.metric.endsWith("_bucket")) e.buckets.push([le, s.value]);
      else if (s.metric.endsWith("_sum")) e.sum = s.value;
      else if (s.metric.endsWith("_count")) e.count = s.value;
      series.set(k, e);
    }
    for (const [k, e] of series) {
      const les = e.buckets.map(([le]) => (le === "+Inf" ? Infinity : Number(le)));
      if (e.buckets.at(-1)?.[0] !== "+Inf") problems.push(`${fam}${k}: last bucket is not +Inf`);
      for (let i = 1; i < e.buckets.length; i++) {
        if (!(les[i] > les[i - 1])) problems.push(`${fam}${k}: le not increasing`);
        if (e.buckets[i][1] < e.buckets[i - 1][1]) problems.push(`${fam}${k}: buckets not cumulative`);
      }
      if (e.buckets.at(-1)?.[1] !== e.count) problems.push(`${fam}${k}: +Inf ${e.buckets.at(-1)?.[1]} != count ${e.count}`);
      if (e.sum === null) problems.push(`${fam}${k}: no _sum`);
    }
  }
  t.is(problems, [], "histograms: cumulative buckets, +Inf last and equal to _count, a _sum");
}

const ex = (outcome, e = executor) => val(m.p, "hutch_executions_total", { executor: e, outcome });
t.is(ex("ok"), 3, "executions ok: the two plain runs and the tool run");
t.is(ex("error"), 2, "executions error: exit 1 and an exception");
t.is(ex("timeout"), 1, "executions timeout: one");
t.is(ex("denied", "none"), 1, "executions denied: one, before any executor");
t.is(val(m.p, "hutch_execution_duration_seconds_count", { executor }), 6,
  "the duration histogram observed the six runs");
t.is(val(m.p, "hutch_tool_calls_total", { server: "everything", outcome: "ok" }), 2, "tool calls ok: 2");
t.is(val(m.p, "hutch_tool_calls_total", { server: "everything", outcome: "denied" }), 1, "tool calls denied: 1");
t.is(val(m.p, "hutch_tool_calls_total", { server: "everything", outcome: "invalid_args" }), 1,
  "tool calls with invalid arguments: 1");
t.is(val(m.p, "hutch_tool_calls_total", { server: "", outcome: "unknown_tool" }), 1,
  "a call to an unknown tool counts under server \"\"");
t.is(val(m.p, "hutch_tool_calls_total"), (runs.tools || []).length, "as many tool calls as the run recorded");
// everything is a stdio server of the 2025 era: its calls go out from the
// execution's loop, and so are a denial and invalid arguments answered; a
// tool the catalog lacks goes to a worker (its server may be starting).
t.is(val(m.p, "hutch_tool_call_threads_total", { thread: "loop" }), 4,
  "four tool calls handled on the execution's loop (two sent, one denied, one invalid)");
t.is(val(m.p, "hutch_tool_call_threads_total", { thread: "worker" }), 1,
  "the unknown tool's call went to a worker");
t.is(val(m.p, "hutch_policy_denials_total", { kind: "execution", reason: "policy" }), 1, "policy denials: 1 execution");
t.is(val(m.p, "hutch_policy_denials_total", { kind: "tool_call", reason: "policy" }), 1, "policy denials: 1 tool call");
t.is(val(m.p, "hutch_upstream_state", { server: "everything", state: "ready" }), 1, "upstream state gauge: everything ready");
t.is(val(m.p, "hutch_upstream_state", { server: "gate", state: "starting" }), 1, "upstream state gauge: gate starting");
t.is(val(m.p, "hutch_upstream_state", { server: "down", state: "ready" }), 0, "upstream state gauge: down is not ready");
for (const [server, state] of [["off", "disabled"], ["legacy", "skipped"]]) {
  const states = ["starting", "ready", "failed", "restarting", "disabled", "skipped"];
  t.is(m.p.samples.filter((x) => x.metric === "hutch_upstream_state" && x.labels.server === server).length,
    states.length, `upstream state gauge: ${server} has a series per state`);
  for (const s of states)
    t.is(val(m.p, "hutch_upstream_state", { server, state: s }), s === state ? 1 : 0,
      `upstream state gauge: ${server} is ${state}, ${s} ${s === state ? 1 : 0}`);
}
t.ok(val(m.p, "hutch_upstream_tools", { server: "everything" }) > 0, "upstream tools gauge");
t.ok(m.p.samples.some((s) => s.metric === "hutch_sandboxes_alive" && s.value >= 0), "sandboxes alive gauge");
{
  // The pool's own status (as /readyz shows it) is what /metrics says.
  const rz = await ready();
  const pyClasses = rz.json.pools.filter((c) => c.language === "python");
  const taken = pyClasses.reduce((a, c) => a + c.hits + c.misses, 0);
  const metricTaken =
    val(m.p, "hutch_pool_hits_total", { language: "python" }) + val(m.p, "hutch_pool_misses_total", { language: "python" });
  if (pyClasses.length === 0) t.skip("pool hits and misses", `no pool on ${executor}`);
  else {
    t.is(metricTaken, taken, "pool hits + misses in /metrics match the pool status");
    t.is(taken, 6, "every python run took from the pool (a hit or a miss)");
  }
}

// --- the same counts from the audit log --------------------------------------------
{
  const recs = fs
    .readFileSync(audit, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
  const n = (f) => recs.filter(f).length;
  const execs = recs.filter((r) => r.event === "execution");
  t.is(n((r) => r.event === "execute_decision" && r.decision === "deny"),
    val(m.p, "hutch_policy_denials_total", { kind: "execution" }), "audit: execution denials match");
  t.is(n((r) => r.event === "tool_call" && r.decision === "deny"),
    val(m.p, "hutch_policy_denials_total", { kind: "tool_call" }), "audit: tool call denials match");
  t.is(n((r) => r.event === "tool_call" && r.decision === "allow"),
    val(m.p, "hutch_tool_calls_total", { server: "everything" }) -
      val(m.p, "hutch_tool_calls_total", { server: "everything", outcome: "denied" }),
    "audit: allowed tool calls match the calls that reached a server");
  t.is(execs.filter((r) => r.decision === "done" && r.exit_code === 0 && !r.timed_out).length, ex("ok"),
    "audit: executions that exited 0 match ok");
  t.is(execs.filter((r) => r.decision === "done" && r.exit_code !== 0 && !r.timed_out && !r.oom).length,
    ex("error"), "audit: executions that failed match error");
  t.is(execs.filter((r) => r.timed_out).length, ex("timeout"), "audit: timed out executions match");
  t.is(execs.filter((r) => r.executor === executor).length,
    val(m.p, "hutch_execution_duration_seconds_count", { executor }), "audit: executions per executor match");
  const echo = recs.find((r) => r.event === "tool_call" && r.tool === "everything.echo");
  t.is(echo?.args, { message: "<string, 20 bytes>" },
    "audit: a tool call's arguments by name and size, not their values (no --audit-values)");
  t.ok(!fs.readFileSync(audit, "utf8").includes("customer-record-4217"), "audit: the value is nowhere in the log");
}

// --- an upstream that comes up --------------------------------------------------------
fs.writeFileSync(gate, "");
const up = await waitFor(async () => stateOf(await ready(), "gate") === "ready", 120000, 200);
t.ok(up, "/readyz shows the gated server ready once it comes up");
{
  const m2 = await scrape();
  t.is(val(m2.p, "hutch_upstream_state", { server: "gate", state: "ready" }), 1, "and /metrics says so too");
  t.is(val(m2.p, "hutch_upstream_state", { server: "gate", state: "starting" }), 0, "no longer starting");
}

// --- a reload that fails, then one that works -------------------------------------------
{
  const good = fs.readFileSync(policy, "utf8");
  fs.writeFileSync(policy, "return {\n  this is not lua\n");
  srv.proc.kill("SIGHUP");
  const failed = await waitFor(async () => (await ready()).json.policy?.reload?.state === "failed", 60000, 100);
  t.ok(failed, "/readyz says the last policy reload failed", JSON.stringify((await ready()).json.policy));
  const r = await ready();
  t.is(r.status, 200, "… and stays ready: the policy before it is still in use");
  t.like(r.json.policy.reload.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, "… and says when");
  t.ok(r.json.policy.reload.error, "… and why, to a caller with the token", JSON.stringify(r.json.policy));
  const a = await ready({});
  t.ok(a.json.policy?.reload?.state === "failed" && a.json.policy.reload.error === undefined && !a.body.includes(dir),
    "… and to a caller without one: the state and when, no path, no error text", a.body);
  fs.writeFileSync(policy, good);
  srv.proc.kill("SIGHUP");
  t.ok(await waitFor(async () => (await ready()).json.policy?.reload?.state === "loaded", 60000, 100),
    "a reload that works: /readyz says loaded");
  t.ok(await waitFor(() => srv.logs().split("\n").some((l) => {
    try {
      const o = JSON.parse(l);
      return o.level === "info" && /policy reloaded/.test(o.msg);
    } catch {
      return false;
    }
  }), 20000, 100), "a reload that works is logged at info", srv.logs().slice(-2000));
}

// --- not ready: a reloaded policy whose executor cannot serve ---------------------------
{
  const good = fs.readFileSync(policy, "utf8");
  fs.writeFileSync(policy, good.replace("return {", 'return {\n  executor = "no-such-executor",'));
  srv.proc.kill("SIGHUP");
  const down = await waitFor(async () => (await ready()).status === 503, 60000, 100);
  t.ok(down, "/readyz answers 503 once the policy names an executor that cannot serve");
  const r = await ready();
  t.is(r.json.ready, false, "and its body says not ready");
  t.ok(r.json.executor?.error || r.json.policy?.error, "and why", JSON.stringify(r.json));
  fs.writeFileSync(policy, good);
  srv.proc.kill("SIGHUP");
  t.ok(await waitFor(async () => (await ready()).status === 200, 60000, 100),
    "/readyz answers 200 again once the policy is fixed");
}

await client.close().catch(() => {});
const exited = await srv.stop();
t.ok(exited && exited.code === 0, "hutch serve stops cleanly", JSON.stringify(exited));

// --- --log-format json -----------------------------------------------------------------
{
  const lines = srv.logs().split("\n").filter((l) => l.length);
  const bad = lines.filter((l) => {
    try {
      const o = JSON.parse(l);
      return !(o.time && o.level && o.who && typeof o.msg === "string");
    } catch {
      return true;
    }
  });
  t.ok(lines.length > 0, `hutch logged something (${lines.length} lines)`);
  t.is(bad, [], "--log-format json: every stderr line is a JSON object with time, level, who, msg");
  t.ok(lines.some((l) => /"fields":\{[^}]*"port":/.test(l)), "the serving line carries its port as a field");
}
t.done();
