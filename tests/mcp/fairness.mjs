// fairness.mjs — fair shares between the principals of one `hutch serve
// --http` (issue "Many tenants, one hutch"), with raw 2026-07-28 requests
// from three principals:
//   - the link store: bob's live resource_link outlives alice's 1100 links
//     (her flood drops her own oldest ones);
//   - executions at once: alice's six tasks against concurrency = 2 running
//     and 3 queued: at most two of hers ever run together, the sixth is
//     refused at once ("hutch is busy"), and bob's execution runs while
//     her queue waits, not after it; her two running sandboxes weigh
//     one sandbox's share of contended CPU together (50 each);
//   - hutch's real memory: a burst of six large executions peaks within
//     1.25 times the budget (and a fixed base) over hutch's baseline, and
//     goes back down after it;
//   - hutch's memory shared: while alice's executions hold what they may of
//     the process budget (HUTCH_MEMORY_BUDGET_MB=256), her second 76 MiB
//     call is refused as past her share, and bob's 37 MiB call still fits;
//   - warm sandboxes shared: on a pool of one, while one of alice's
//     executions runs, her next one starts cold and leaves the idle
//     sandbox to bob (who took one lately and has none under way), whose
//     execution comes warm.
// Nothing here is timed: overlaps are counted from the programs' own clock
// readings, and every wait is a generous budget.  TAP.
import crypto from "node:crypto";
import { fs, makeFixture, path, postModern, requireEnv, spawnHttp, tap, waitFor } from "./lib.mjs";

const hutch = requireEnv();
const t = tap({ timeout: 900 });
const E = process.env.HUTCH_EXECUTOR || "local";
const fx = makeFixture();
// The recorder's calls may be held for minutes (alice's, until cancelled).
{
  const cfg = JSON.parse(fs.readFileSync(fx.servers, "utf8"));
  cfg.mcpServers.recorder.timeout_ms = 600000;
  fs.writeFileSync(fx.servers, JSON.stringify(cfg));
}
const tok = {};
for (const p of ["alice", "bob", "carol"]) tok[p] = `${p}-${crypto.randomBytes(12).toString("hex")}`;
const policy = path.join(fx.dir, "fairness.lua");
fs.writeFileSync(policy, `return {
  principals = {
    { name = "alice", token = "${tok.alice}" },
    { name = "bob", token = "${tok.bob}" },
    { name = "carol", token = "${tok.carol}", concurrency = { executions = 8 } },
  },
  concurrency = { executions = 2, queued = 3 },
  tools = { allow = { "recorder.*" } },
  limits = { timeout_ms = 600000 },
}
`);
const srv = await spawnHttp({
  hutch, servers: fx.servers,
  args: ["--policy", policy, "--timeout", "600000", "--executor", E],
  env: { HUTCH_MEMORY_BUDGET_MB: "256" },
});
const TASKS = { "io.modelcontextprotocol/tasks": {} };
// Memory past the budget that hutch may hold in a burst (threads, line
// buffers, texts on their way out), and what may stay resident after it
// (step 3 says why).
const BASE_KB = 64 << 10, RETURNED_KB = 16 << 10;
const post = (who, method, params = {}, { tasks = false } = {}) =>
  postModern(srv.url, tok[who], method, params, {
    capabilities: tasks ? { extensions: TASKS } : {},
    timeoutMs: 600000,
  });
const run = (who, code, opts) =>
  post(who, "tools/call", { name: "execute_code", arguments: { language: "python", code, timeout_ms: 500000 } }, opts);
const text = (r) => (r?.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
async function until(who, taskId, pred = (r) => ["completed", "failed", "cancelled"].includes(r?.status)) {
  let last;
  const ok = await waitFor(async () => {
    last = (await post(who, "tasks/get", { taskId }, { tasks: true })).result;
    return pred(last);
  }, 600000, 500);
  if (!ok) throw new Error(`task ${taskId}: ${JSON.stringify(last).slice(0, 400)}`);
  return last;
}

// The CPU weights (cgroup v2's scale; v1's cpu.shares / 10.24) of the
// live sandbox cgroups this hutch made: named hutch-PID.… (local) or
// …/hutch-PID.N (gvisor), below the cpu hierarchy.
function sandboxWeights(pid) {
  const v2 = fs.existsSync("/sys/fs/cgroup/cgroup.controllers");
  const root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu";
  const out = [];
  const walk = (dir, depth) => {
    let ents = [];
    try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const e of ents) {
      if (!e.isDirectory()) continue;
      const d = path.join(dir, e.name);
      if (e.name.startsWith(`hutch-${pid}.`)) {
        try {
          if (!fs.readFileSync(path.join(d, "cgroup.procs"), "utf8").trim()) continue;
          const w = Number(fs.readFileSync(path.join(d, v2 ? "cpu.weight" : "cpu.shares"), "utf8"));
          out.push(v2 ? w : Math.floor((w * 100) / 1024));
        } catch { /* gone meanwhile, or no cpu controller there */ }
      } else if (depth < 4) walk(d, depth + 1);
    }
  };
  walk(root, 0);
  return out;
}

const only = process.env.FAIRNESS_STEP; // some steps alone (tests/docker/fairness.sh)
const step = (n, name, f, budget) => (!only || only.split(",").includes(String(n)) ? t.step(name, f, budget) : null);
await step(1, "the link store: alice's 1100 links drop her own oldest, not bob's live link", async () => {
  const files = (n) => `import os
os.makedirs("/work/out", exist_ok=True)
for i in range(${n}):
    open(f"/work/out/f{i:03}.bin", "wb").write(bytes([0, 1, 2, i % 256]) * 16)
"ok"`;
  const b = await run("bob", files(1));
  const bobLink = (b.result?.content || []).find((c) => c.type === "resource_link")?.uri;
  if (!bobLink) throw new Error(`bob's link: ${JSON.stringify(b).slice(0, 400)}`);
  let first = null;
  for (let k = 0; k < 11; k++) {
    const a = await run("alice", files(100));
    const links = (a.result?.content || []).filter((c) => c.type === "resource_link");
    if (links.length !== 100) throw new Error(`alice's run ${k}: ${links.length} links: ${text(a.result).slice(0, 300)}`);
    first ??= links[0].uri;
  }
  const rb = await post("bob", "resources/read", { uri: bobLink });
  if (!rb.result?.contents?.[0]?.blob) throw new Error(`bob's link after alice's flood: ${JSON.stringify(rb).slice(0, 300)}`);
  const ra = await post("alice", "resources/read", { uri: first });
  if (ra.error?.code !== -32602 || !/Resource not found/.test(ra.error.message)) throw new Error(`alice's oldest link: ${JSON.stringify(ra).slice(0, 300)}`);
});

await step(2, "executions at once: alice runs 2, waits 3, is refused the sixth; bob is not held behind her queue", async () => {
  const S = 20;
  const prog = `import time\nt0 = time.time()\ntime.sleep(${S})\n[t0, time.time()]`;
  const ids = [];
  for (let i = 0; i < 6; i++) {
    const c = await run("alice", prog, { tasks: true });
    if (!c.result?.taskId) throw new Error(JSON.stringify(c));
    ids.push(c.result.taskId);
  }
  const bob = await run("bob", "import time\ntime.time()");
  const bobStart = bob.result?.structuredContent?.result;
  if (typeof bobStart !== "number") throw new Error(`bob: ${JSON.stringify(bob).slice(0, 400)}`);
  // CPU shared between principals (src/fair.h): while two of alice's run,
  // her two sandboxes weigh one together (50 each).  Read from the
  // cgroups hutch names (local, gvisor); docker's weights are the
  // engine's CpuShares (test_contract checks those).
  if (E !== "docker") {
    let seen = [];
    const halves = await waitFor(() => (seen = sandboxWeights(srv.pid)).filter((w) => w === 50).length === 2, 60000, 100);
    if (!halves) throw new Error(`alice's two running sandboxes weigh 50 each: weights seen ${JSON.stringify(seen)}`);
  }
  const ended = [];
  for (const id of ids) ended.push(await until("alice", id));
  const refused = ended.filter((r) => /hutch is busy: principal "alice" has 2 executions running/.test(text(r.result)));
  if (refused.length !== 1 || refused[0].result?.isError !== true)
    throw new Error(`one refused, saying why: ${JSON.stringify(ended.map((r) => text(r.result).slice(0, 200)))}`);
  const spans = ended.filter((r) => r !== refused[0]).map((r) => r.result?.structuredContent?.result);
  if (spans.length !== 5 || !spans.every((s) => Array.isArray(s) && s.length === 2))
    throw new Error(`five ran: ${JSON.stringify(spans)}`);
  // The most of hers that ever ran together, from their own clock readings.
  let most = 0;
  for (const [s0] of spans) most = Math.max(most, spans.filter(([a, b]) => a <= s0 && s0 < b).length);
  if (most !== 2) throw new Error(`at most 2 of alice's at once, saw ${most}: ${JSON.stringify(spans)}`);
  const lastStart = Math.max(...spans.map(([a]) => a));
  if (!(bobStart < lastStart)) throw new Error(`bob started at ${bobStart}, after alice's queue drained (${lastStart})`);
}, 600);

await step(3, "hutch's real memory: a burst peaks within 1.25x the budget, and is returned after", async () => {
  // Six executions of three principals at once, each with a call of
  // 600,000 values (46 MiB as hutch holds it) and a result as large: more
  // than the 256 MiB budget in all, so some are refused; what hutch holds
  // meanwhile is measured by the kernel (VmHWM, reset before the burst),
  // never by time.  Before the shares step, whose calls stay in flight
  // upstream after their tasks are cancelled.
  //
  // After it, hutch keeps nothing of the burst's: its results went out
  // inline (no files, no links), its calls were not tasks (no records),
  // what stays is recorder.slow's result shape and audit lines of about a
  // line each.  What the process may keep besides is its allocator's and
  // threads' state: the stacks glibc keeps for reuse after their threads
  // exit (their pages given back but the last frames), the pages of each
  // arena that hold live chunks or the edges of free ones, thread caches:
  // 1 to 4 MiB measured.  Hence at most 16 MiB of anonymous memory (the
  // heap, arenas, stacks: RssAnon; the binary's and libraries' pages are
  // code the burst ran first, and the kernel's to drop) may stay: a third
  // of one call's 46 MiB, so one call or result held, or freed but not
  // given back to the system, fails.  The wait is a budget for the trims
  // (budget.c) on a loaded machine, not a measured time.
  const status = () => fs.readFileSync(`/proc/${srv.pid}/status`, "utf8");
  const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status())?.[1]);
  const threads = () => fs.readdirSync(`/proc/${srv.pid}/task`).length;
  for (const p of ["alice", "bob", "carol"]) await run(p, "1");
  const base = kb("VmRSS"), baseAnon = kb("RssAnon"), baseThreads = threads();
  fs.writeFileSync(`/proc/${srv.pid}/clear_refs`, "5"); // VmHWM := VmRSS
  const prog = `K = 600000
try:
    tools.recorder.slow(ms=1, pad=[0] * K)
    a = "ok"
except Exception as e:
    a = "refused"
[0] * K if a == "ok" else a`;
  const rs = await Promise.all(["alice", "alice", "bob", "bob", "carol", "carol"].map((p) => run(p, prog)));
  const peak = kb("VmHWM");
  const ran = rs.filter((r) => Array.isArray(r.result?.structuredContent?.result)).length;
  let after = kb("RssAnon");
  await waitFor(() => (after = kb("RssAnon")) - baseAnon <= RETURNED_KB, 60000, 500);
  const budgetKb = 256 * 1024, limit = 1.25 * budgetKb + BASE_KB;
  t.diag(`baseline ${base >> 10} MiB; burst: peak +${(peak - base) >> 10} MiB (limit ${limit >> 10} MiB = 1.25 x 256 + ${BASE_KB >> 10}), ` +
    `${ran} of 6 returned their 46 MiB result; after: anonymous +${(after - baseAnon) >> 10} MiB, ` +
    `${baseThreads} threads before, ${threads()} after`);
  if (ran < 2) throw new Error(`too few ran to measure anything: ${JSON.stringify(rs.map((r) => text(r.result).slice(0, 200)))}`);
  // Under AddressSanitizer, freed memory waits in its quarantine and every
  // byte has shadow: the figures are the sanitizer's, not hutch's.
  if (fs.readFileSync(`/proc/${srv.pid}/maps`, "utf8").includes("libasan")) {
    t.diag("a sanitizers build: the burst ran, its memory is not measured against the budget");
    return;
  }
  if (peak - base > limit) throw new Error(`peak RSS +${(peak - base) >> 10} MiB over the baseline, past ${limit >> 10} MiB`);
  if (after - baseAnon > RETURNED_KB) {
    t.diag(fs.readFileSync(`/proc/${srv.pid}/smaps_rollup`, "utf8"));
    throw new Error(`${(after - baseAnon) >> 10} MiB stayed resident after the burst (at most ${RETURNED_KB >> 10})`);
  }
}, 600);

await step(4, "hutch's memory: alice's second 76 MiB call is past her share, bob's 37 MiB call fits", async () => {
  // Each of alice's programs holds 76 MiB of hutch's memory in one call
  // (a million values) until it is cancelled; past her share, a call fails
  // with too_large and the program says so.
  const hold = `try:
    tools.recorder.slow(ms=500000, pad=[0] * 1000000)
    r = "returned"
except Exception as e:
    r = "refused: " + str(e)
r`;
  const count = async () => (await run("carol", 'tools.recorder.calls()["count"]')).result?.structuredContent?.result;
  const before = await count();
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const c = await run("alice", hold, { tasks: true });
    if (!c.result?.taskId) throw new Error(JSON.stringify(c));
    ids.push(c.result.taskId);
  }
  // Each call is either held upstream or refused (its task ended).
  let states = [];
  const settled = await waitFor(async () => {
    states = [];
    for (const id of ids) states.push((await post("alice", "tasks/get", { taskId: id }, { tasks: true })).result);
    const done = states.filter((s) => s?.status === "completed").length;
    return done + ((await count()) - before) >= 3;
  }, 300000, 1000);
  if (!settled) t.diag(srv.logs().slice(-3000));
  if (!settled) throw new Error(`alice's calls never settled (${(await count()) - before} reached the recorder): ${JSON.stringify(states).slice(0, 1500)}`);
  const bob = await run("bob", 'r = tools.recorder.slow(ms=1, pad=[0] * 480000)\nr["slept"]');
  const ok = bob.result?.structuredContent?.exit_code === 0 && bob.result.structuredContent.result === 1;
  for (const id of ids) await post("alice", "tasks/cancel", { taskId: id }, { tasks: true });
  if (!ok) throw new Error(`bob's call: ${text(bob.result).slice(0, 600)}`);
  // Refused past her share: at the call (too_large, the program caught
  // it) or at the message that carried it (the execution stopped).
  const refused = states.filter((s) => /principal \\?"alice\\?" may hold/.test(JSON.stringify(s?.result ?? "")));
  if (refused.length < 1) throw new Error(`none of alice's calls was refused as past her share: ${JSON.stringify(states).slice(0, 600)}`);
  t.diag(`alice refused: ${text(refused[0].result).slice(0, 400)}`);
}, 600);

await step(5, "warm sandboxes: alice with one under way leaves the idle one to bob", async () => {
  // A server of its own with a pool of one python sandbox; nothing given
  // back or forgotten meanwhile (an hour each), however slow the machine.
  const ps = await spawnHttp({
    hutch, servers: fx.servers,
    args: ["--policy", policy, "--timeout", "600000", "--executor", E, "--pool", "python=1,javascript=0"],
    env: { HUTCH_POOL_SHRINK_MS: "3600000", HUTCH_POOL_SHARE_MS: "3600000" },
  });
  try {
    const call = (who, code, opts) =>
      postModern(ps.url, tok[who], "tools/call",
        { name: "execute_code", arguments: { language: "python", code, timeout_ms: 500000 } },
        { capabilities: opts?.tasks ? { extensions: TASKS } : {}, timeoutMs: 600000 });
    const metric = async (name) => {
      const r = await fetch(`http://127.0.0.1:${ps.port}/metrics`, { headers: { Authorization: `Bearer ${tok.carol}` } });
      const m = new RegExp(`^${name}\\{[^}]*language="python"[^}]*\\} (\\S+)$`, "m").exec(await r.text());
      return m ? Number(m[1]) : NaN;
    };
    const settle = async (hits, what) => {
      const ok = await waitFor(async () => (await metric("hutch_pool_hits_total")) === hits &&
        (await metric("hutch_pool_idle")) === 1, 300000, 200);
      if (!ok) throw new Error(`${what}: hits ${await metric("hutch_pool_hits_total")}, idle ${await metric("hutch_pool_idle")}`);
    };
    const sc = (r) => r.result?.structuredContent || {};
    await settle(0, "the pool filled");
    const b1 = await call("bob", "1");
    if (sc(b1).warm !== true || sc(b1).executor !== E) throw new Error(`bob's first: ${JSON.stringify(sc(b1))}`);
    await settle(1, "bob's sandbox replaced");
    // alice's first is held upstream (a task, cancelled at the end).
    const a1 = await call("alice", "tools.recorder.slow(ms=500000)", { tasks: true });
    const a1id = a1.result?.taskId;
    if (!a1id) throw new Error(JSON.stringify(a1));
    try {
      await settle(2, "alice's first took the warm sandbox, which was replaced");
      const a2 = await call("alice", "1");
      if (sc(a2).exit_code !== 0 || sc(a2).warm !== false || sc(a2).executor !== E)
        throw new Error(`alice's second, with one under way, starts cold on ${E}: ${JSON.stringify(sc(a2))}`);
      const b2 = await call("bob", "1");
      if (sc(b2).warm !== true || sc(b2).executor !== E) throw new Error(`bob's second comes warm: ${JSON.stringify(sc(b2))}`);
    } finally {
      await postModern(ps.url, tok.alice, "tasks/cancel", { taskId: a1id }, { capabilities: { extensions: TASKS } });
    }
  } finally {
    await ps.stop();
  }
}, 600);

const stopped = await srv.stop();
t.ok(stopped && stopped.code === 0, "hutch serve --http exits 0", JSON.stringify(stopped));
t.done();
