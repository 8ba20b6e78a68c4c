// pool.mjs — warm pools of single-use sandboxes on the executor under test
// ($HUTCH_EXECUTOR, default local), through `hutch serve` and the official
// SDK client:
//   - a pooled sandbox answers, and says so (warm: true, the executor);
//   - a pooled sandbox's memory and pids limits hold from its program's
//     first instruction;
//   - a pooled sandbox is never used twice: what one execution leaves in
//     /work, /tmp and a background process, no later execution sees;
//   - 64 executions through a pool of 2 while the policy is reloaded (the
//     class changes): all answered, all right, all audited, the old class
//     drained;
//   - sizes from the policy's pool field (and an executor's table), a flag
//     over them;
//   - a pool that ran dry grows with demand (up to four times its size)
//     and shrinks back ($HUTCH_POOL_SHRINK_MS) when the demand is gone;
//   - TypeScript runs in a warm sandbox of the javascript pool;
//   - the data flavour's warm sandboxes have numpy, pandas and matplotlib
//     loaded before the program starts (a cold one not), and two of them
//     draw different numbers from numpy's random state;
//   - an idle sandbox older than HUTCH_POOL_MAX_IDLE_MS is replaced;
//   - kill -9 of hutch with full pools leaves nothing after the next start
//     (local: nor cgroups), its janitor killed too; killed alone, its
//     janitor removes all of it with no other hutch started;
//   - a pool whose refill fails degrades to cold starts with the reason in
//     the log, and recovers by itself.
// Budgets are generous: nothing here depends on the machine's speed.  TAP.
import {
  descendants, execute, fs, js, loadSdk, os, path, pidAlive, py, requireEnv, sleep, spawnSync,
  startStdio, tap, waitFor,
} from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 1800 });
const STEP_S = 300; // per step: generous, nothing here is timed
const E = process.env.HUTCH_EXECUTOR || "local";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-pool-"));
const env = { HUTCH_EXECUTOR: "" };
const base = ["--executor", E];

// Executes until one comes warm (the pool filled), within a generous budget;
// every execution must succeed unless `failing`.
async function untilWarm(h, args = py("1"), failing = false) {
  const until = Date.now() + 120000;
  while (Date.now() < until) {
    const x = await execute(h.client, args, { executor: E });
    if (x.s.exit_code !== 0 && !failing) throw new Error(`execution failed: ${JSON.stringify(x.s).slice(0, 400)}`);
    if (x.s.warm === true) return x;
    await sleep(300);
  }
  throw new Error("no execution came warm within 120 s");
}

await t.step(`a pooled sandbox answers, warm, on ${E}`, async () => {
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2,javascript=1"], env });
  try {
    const x = await untilWarm(h, py("print('hi')\n6 * 7"));
    if (x.s.result !== 42 || x.s.stdout !== "hi\n" || x.s.executor !== E) throw new Error(JSON.stringify(x.s));
    const y = await untilWarm(h, js("console.log('js'); return 6 * 7"));
    if (y.s.result !== 42 || y.s.stdout !== "js\n") throw new Error(JSON.stringify(y.s));
    // Cold still works next to the pool, and says so.
    const z = await execute(h.client, py("1", { timeout_ms: 20000 }), { executor: E });
    if (z.s.exit_code !== 0 || typeof z.s.warm !== "boolean") throw new Error(JSON.stringify(z.s));
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step(`a pooled sandbox's limits are in force before its program starts, on ${E}`, async () => {
  // The local executor attaches a pooled sandbox to its cgroups on a thread
  // of its own, after the start: the job must not begin before that.  One
  // server per limit (forked interpreters weigh more on gVisor).
  const mem = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2", "--memory", "128"], env });
  try {
    for (let i = 0; i < 3; i++) {
      await untilWarm(mem);
      const x = await untilWarm(mem, py("b = bytearray(400 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('not limited')"), true);
      t.ok(x.s.exit_code !== 0 && x.s.stdout.indexOf("not limited") < 0 && (x.s.oom === true || x.s.exit_code === 137),
        `round ${i + 1}: 400 MiB in a warm sandbox of 128 MiB is stopped (${JSON.stringify({ exit: x.s.exit_code, oom: x.s.oom })})`);
    }
  } finally {
    await mem.close();
  }
  const pids = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2", "--pids", "32"], env });
  try {
    for (let i = 0; i < 3; i++) {
      await untilWarm(pids);
      const y = await untilWarm(pids, py(`import os, time
n = 0
kids = []
for i in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
    n += 1
for k in kids:
    os.kill(k, 9)
n`));
      t.ok(y.s.exit_code === 0 && y.s.result < 32, `round ${i + 1}: a warm sandbox of 32 pids forks ${y.s.result} processes, not 100`);
    }
  } finally {
    await pids.close();
  }
}, STEP_S);

await t.step("a pooled sandbox is never used twice (/work, /tmp, processes)", async () => {
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2"], env });
  const leave = `import os, subprocess
open("/work/marker", "w").write("x")
open("/tmp/marker", "w").write("x")
subprocess.Popen(["sleep", "600"], start_new_session=True)
os.getpid()`;
  // /proc/1 may be an empty directory (hutch-init hides itself), and a
  // process may end between the listing and the read.
  const look = `import os
def cmd(p):
    try:
        return open("/proc/%s/cmdline" % p, "rb").read().split(b"\\0")[0].decode()
    except OSError:
        return ""
procs = [cmd(p) for p in os.listdir("/proc") if p.isdigit()]
[os.path.exists("/work/marker"), os.path.exists("/tmp/marker"), [p for p in procs if p.endswith("sleep")]]`;
  try {
    const a = await untilWarm(h, py(leave));
    if (a.s.exit_code !== 0) throw new Error(JSON.stringify(a.s));
    let warm = 0;
    for (let i = 0; i < 8; i++) {
      const b = await execute(h.client, py(look), { executor: E });
      if (b.s.exit_code !== 0) throw new Error(JSON.stringify(b.s));
      if (JSON.stringify(b.s.result) !== JSON.stringify([false, false, []])) {
        throw new Error(`execution ${i} saw what another left: ${JSON.stringify(b.s.result)}`);
      }
      warm += b.s.warm ? 1 : 0;
      await sleep(200);
    }
    if (warm === 0) throw new Error("none of the later executions came from the pool");
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("64 executions through a pool of 2 while the policy is reloaded", async () => {
  const live = path.join(tmp, "live.lua"), audit = path.join(tmp, "audit.jsonl");
  const pol = (mb) => `return { tools = { allow = { "*" } }, limits = { memory_mb = ${mb} } }\n`;
  fs.writeFileSync(live, pol(256));
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2", "--policy", live, "--audit", audit], env });
  try {
    await untilWarm(h);
    let next = 0, wrong = [], warm = 0;
    const reloads = (async () => {
      for (let i = 0; i < 6; i++) {
        await sleep(250);
        fs.writeFileSync(live, pol(i % 2 ? 256 : 200)); // a new class each time
        process.kill(h.pid, "SIGHUP");
      }
    })();
    const worker = async () => {
      while (next < 64) {
        const i = ++next;
        const x = await execute(h.client, py(`${i} * 3`), { executor: E });
        if (x.s.exit_code !== 0 || x.s.result !== i * 3) wrong.push([i, x.text.slice(0, 300)]);
        warm += x.s.warm ? 1 : 0;
      }
    };
    await Promise.all([worker(), worker(), worker(), worker(), reloads]);
    if (wrong.length) throw new Error(`wrong answers: ${JSON.stringify(wrong.slice(0, 3))}`);
    // How many of the 64 came warm depends on the machine (each reload
    // drains the class); that the pool serves the last policy's class once
    // the reloads are over does not.
    t.diag(`${warm} of 64 came warm during the reloads`);
    await untilWarm(h);
    // The old class (200 MB) was drained: within a generous budget, the
    // pool shows no 200 MB python sandbox idle or starting, and the last
    // policy's class (256 MB) kept at its size.
    const pyOf = (cs, mb) => cs.filter((c) => c.language === "python" && c.memory_mb === mb);
    await poolUntil(h, audit, (cs) => pyOf(cs, 200).every((c) => c.size === 0 && c.idle === 0 && c.starting === 0) &&
      pyOf(cs, 256).some((c) => c.size === 2), "the old class drained");
    await h.close();
    const recs = fs.readFileSync(audit, "utf8").split("\n").filter((l) => l.includes('"event":"execution"'));
    const ran = recs.map((l) => JSON.parse(l)).filter((r) => r.decision === "done" && r.executor === E);
    // untilWarm's executions are audited too.
    if (ran.length < 66) throw new Error(`audited ${ran.length} executions on ${E}, want at least 65`);
    if (!ran.some((r) => r.warm === true)) throw new Error("the audit shows no warm execution");
  } finally {
    await h.close();
  }
}, STEP_S);

// The pool's classes on E, as hutch's pool audit record shows them: a
// SIGHUP (the same policy again) makes hutch write one with every class's
// state.  Polls until want(classes) holds, within a generous budget; the
// last classes seen either way.
async function poolUntil(h, audit, want, what) {
  let last = [];
  const ok = await waitFor(() => {
    process.kill(h.pid, "SIGHUP");
    const recs = fs.readFileSync(audit, "utf8").split("\n").filter((l) => l.includes('"event":"pool"'))
      .flatMap((l) => {
        try {
          return [JSON.parse(l)];
        } catch {
          return []; // a line being written
        }
      });
    if (!recs.length) return false;
    last = (recs[recs.length - 1].classes || []).filter((c) => c.executor === E);
    return want(last);
  }, 120000, 1000);
  if (!ok) throw new Error(`${what}: the pool shows ${JSON.stringify(last)}`);
  return last;
}
const sizes = (classes) => Object.fromEntries(classes.filter((c) => c.size > 0).map((c) => [c.language, c.size]));

await t.step("pool sizes come from the policy's pool field; an executor's table refines it; a flag overrides", async () => {
  const pol = path.join(tmp, "sizes.lua"), audit = path.join(tmp, "sizes.jsonl");
  const run = async (policy, args, want, what) => {
    fs.writeFileSync(pol, policy);
    fs.rmSync(audit, { force: true });
    const h = await startStdio({ sdk, hutch, args: [...base, ...args, "--policy", pol, "--audit", audit], env });
    try {
      // The sizes, and the classes filled to them (the sizes are used,
      // not only recorded).
      await poolUntil(h, audit, (cs) => JSON.stringify(sizes(cs)) === JSON.stringify(want) &&
        cs.filter((c) => c.size > 0).every((c) => c.idle === c.size), what);
    } finally {
      await h.close();
    }
  };
  const allow = 'tools = { allow = { "*" } }';
  await run(`return { ${allow}, pool = { python = 1, javascript = 0 } }\n`, [], { python: 1 },
    "pool = { python = 1, javascript = 0 }");
  await run(`return { ${allow}, pool = { python = 1, javascript = 1, [${JSON.stringify(E)}] = { python = 3 } } }\n`, [],
    { javascript: 1, python: 3 }, `pool = { ..., ${E} = { python = 3 } }`);
  await run(`return { ${allow}, pool = { python = 1, javascript = 0, [${JSON.stringify(E)}] = { python = 3 } } }\n`,
    ["--pool", "python=2,javascript=1"], { javascript: 1, python: 2 }, "--pool over the policy's pool");
}, STEP_S);

await t.step("a pool that ran dry grows with demand, and shrinks back when demand is gone", async () => {
  const pol = path.join(tmp, "grow.lua");
  fs.writeFileSync(pol, 'return { tools = { allow = { "*" } } }\n');
  const python = (cs) => cs.find((c) => c.language === "python") || {};
  // Four at once on a pool of one: the three that find it empty each add
  // one to keep warm (up to four times its size).  Once it filled to
  // that, three at once all come warm (HUTCH_POOL_SHRINK_MS at its most,
  // an hour: nothing is given back meanwhile, however slow the machine).
  {
    const audit = path.join(tmp, "grow.jsonl");
    const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=1,javascript=0", "--policy", pol, "--audit", audit],
      env: { ...env, HUTCH_POOL_SHRINK_MS: "3600000" } });
    try {
      await poolUntil(h, audit, (cs) => python(cs).idle === 1, "filled");
      const burst = async (n) => Promise.all(Array.from({ length: n }, (_, i) => execute(h.client, py(`${i} + 1`), { executor: E })));
      // Each burst of four finds the pool short at least three times
      // less what it grew already; a few bursts reach the ceiling.
      let cs = [];
      for (let i = 0; i < 6 && python(cs).target !== 4; i++) {
        for (const x of await burst(4)) if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s).slice(0, 300));
        cs = await poolUntil(h, audit, () => true, "a pool record");
      }
      cs = await poolUntil(h, audit, (cs) => python(cs).size === 1 && python(cs).target === 4 && python(cs).idle === 4,
        "grown to four and filled");
      t.diag(`after bursts of four: ${JSON.stringify(python(cs))}`);
      const xs = await burst(3);
      if (xs.some((x) => x.s.exit_code !== 0 || x.s.warm !== true || x.s.executor !== E)) {
        throw new Error(`not all three warm on ${E}: ${JSON.stringify(xs.map((x) => x.s)).slice(0, 600)}`);
      }
    } finally {
      await h.close();
    }
  }
  // With HUTCH_POOL_SHRINK_MS=1000 it gives one back each second without
  // a dry take, down to its size.
  {
    const audit = path.join(tmp, "shrink.jsonl");
    const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=1,javascript=0", "--policy", pol, "--audit", audit],
      env: { ...env, HUTCH_POOL_SHRINK_MS: "1000" } });
    try {
      await poolUntil(h, audit, (cs) => python(cs).idle === 1, "filled");
      let cs = [];
      for (let i = 0; i < 6 && !(python(cs).misses >= 1); i++) {
        await Promise.all(Array.from({ length: 4 }, () => execute(h.client, py("1"), { executor: E })));
        cs = await poolUntil(h, audit, () => true, "a pool record");
      }
      if (!(python(cs).misses >= 1)) throw new Error(`bursts of four never found the pool of one empty: ${JSON.stringify(python(cs))}`);
      cs = await poolUntil(h, audit, (cs) => python(cs).size === 1 && python(cs).target === 1 && python(cs).idle === 1 &&
        python(cs).starting === 0, "shrunk back to its size");
      t.diag(`after ${python(cs).misses} dry takes it is back to: ${JSON.stringify(python(cs))}`);

    } finally {
      await h.close();
    }
  }
}, STEP_S);

await t.step("TypeScript takes a warm sandbox of the javascript pool (no class of its own)", async () => {
  const audit = path.join(tmp, "ts.jsonl");
  fs.rmSync(audit, { force: true });
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=0,javascript=1", "--audit", audit], env });
  try {
    const full = (cs) => cs.some((c) => c.language === "javascript" && c.size === 1 && c.idle === 1);
    await poolUntil(h, audit, full, "the javascript pool filled");
    // Its first execution, with the javascript sandbox idle: warm at once.
    const x = await execute(h.client, { language: "typescript", code: "const n: number = 6 * 7;\nreturn n" }, { executor: E });
    if (x.s.exit_code !== 0 || x.s.result !== 42 || x.s.warm !== true) throw new Error(JSON.stringify(x.s));
    const cs = await poolUntil(h, audit, full, "the javascript pool refilled");
    if (cs.some((c) => c.language !== "javascript" && c.language !== "python")) {
      throw new Error(`a class of another language: ${JSON.stringify(cs)}`);
    }
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("the data flavour: a warm sandbox has numpy, pandas and matplotlib loaded, a cold one not", async () => {
  // What the program finds imported before its own imports, and a draw
  // from numpy's global random state (seeded per process: two sandboxes
  // never draw the same).
  const prog = py([
    "import sys",
    "pre = [m for m in ('numpy', 'pandas', 'matplotlib.pyplot') if m in sys.modules]",
    "import os, numpy, matplotlib",
    "matplotlib.use('Agg')",
    "os.makedirs('/work/out', exist_ok=True)",
    "import matplotlib.pyplot as plt",
    "plt.plot([1, 2, 3]); plt.savefig('/work/out/c.png')",
    "[pre, float(numpy.random.random())]",
  ].join("\n"));
  const h = await startStdio({ sdk, hutch, args: [...base, "--flavour", "data", "--pool", "python=1,javascript=0"], env });
  let first;
  try {
    first = await untilWarm(h, prog);
    const again = await untilWarm(h, prog);
    for (const x of [first, again]) {
      if (x.s.exit_code !== 0 || x.s.executor !== E) throw new Error(JSON.stringify(x.s).slice(0, 600));
      t.is(x.s.result[0], ["numpy", "pandas", "matplotlib.pyplot"], "warm: numpy, pandas and matplotlib.pyplot are loaded before the program imports them");
    }
    t.ok(first.s.result[1] !== again.s.result[1], "two warm sandboxes draw different numbers from numpy's global random state",
      `both drew ${first.s.result[1]}`);
  } finally {
    await h.close();
  }
  const c = await startStdio({ sdk, hutch, args: [...base, "--flavour", "data", "--pool", "0"], env });
  try {
    const x = await execute(c.client, prog, { executor: E });
    if (x.s.exit_code !== 0 || x.s.warm !== false || x.s.executor !== E) throw new Error(JSON.stringify(x.s).slice(0, 600));
    t.is(x.s.result[0], [], "cold: nothing is loaded before the program's imports (its job does not wait for them)");
  } finally {
    await c.close();
  }
}, STEP_S);

await t.step("an idle sandbox older than HUTCH_POOL_MAX_IDLE_MS is replaced", async () => {
  const pol = path.join(tmp, "idle.lua"), audit = path.join(tmp, "idle.jsonl");
  fs.writeFileSync(pol, 'return { tools = { allow = { "*" } } }\n');
  const maxIdleS = 10;
  const h = await startStdio({
    sdk, hutch, args: [...base, "--pool", "python=1,javascript=0", "--policy", pol, "--audit", audit],
    env: { ...env, HUTCH_POOL_MAX_IDLE_MS: String(maxIdleS * 1000) },
  });
  // When the runner process that answers started (wall clock, seconds):
  // which sandbox answered.  The runner runs the program in its own
  // process, started with the sandbox.
  const started = `import os, time
ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))`;
  const python = (cs) => cs.find((c) => c.language === "python") || {};
  try {
    // A sandbox idle in the pool (A); it started before now.
    const before = await poolUntil(h, audit, (cs) => python(cs).idle === 1, "filled");
    const seen = Date.now() / 1000, r0 = python(before).recycled;
    // Replaced for its age, and its replacement too: the pool counts two
    // more recycled (nothing took them).
    await poolUntil(h, audit, (cs) => python(cs).recycled >= r0 + 2 && python(cs).idle === 1,
      "recycled for their age");
    // The sandbox that answers now started after its predecessor aged
    // maxIdleS, so well after A was seen (A started before that).
    const x = await untilWarm(h, py(started));
    if (!(typeof x.s.result === "number" && x.s.result > seen + 1)) {
      throw new Error(`the warm sandbox started at ${x.s.result}, A was idle at ${seen}: ${JSON.stringify(x.s).slice(0, 300)}`);
    }
  } finally {
    await h.close();
  }
}, STEP_S);

// The cgroup directories a live process (pid) is in, one per hierarchy:
// the local executor makes its sandboxes' cgroups below them.
function cgroupDirs(pid) {
  let lines = [];
  try {
    lines = fs.readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
  return lines.map((l) => {
    const [, ctl, rel] = l.match(/^\d+:([^:]*):(.*)$/) || [];
    if (rel === undefined) return null;
    const root = ctl === "" ? "/sys/fs/cgroup" : `/sys/fs/cgroup/${ctl.replace(/^name=/, "")}`;
    return path.join(root, rel);
  }).filter((d) => d && fs.existsSync(d));
}

// What a hutch process (pid) left of the executor, once it is gone.  For
// local: its sandboxes' cgroups (hutch-PID.START-…) below cgdirs, the
// cgroups hutch was in (cgroupDirs(pid), read while it ran).
function leftovers(pid, cgdirs = []) {
  if (E === "docker") {
    const r = spawnSync("docker", ["ps", "-a", "--filter", "label=hutch.owner", "--format", '{{.ID}} {{.Label "hutch.owner"}}'], { encoding: "utf8" });
    return r.stdout.split("\n").filter((l) => l.includes(`:${pid}:`));
  }
  if (E === "gvisor") {
    const dir = "/run/hutch/gvisor";
    const dirs = fs.existsSync(dir) ? fs.readdirSync(dir).filter((d) => d.startsWith(`${pid}.`)) : [];
    const r = spawnSync("pgrep", ["-af", `--root=${dir}/${pid}\\.`], { encoding: "utf8" });
    return [...dirs, ...r.stdout.split("\n").filter((l) => l && !l.includes("pgrep"))];
  }
  return cgdirs.flatMap((d) => {
    try {
      return fs.readdirSync(d).filter((n) => n.startsWith(`hutch-${pid}.`)).map((n) => path.join(d, n));
    } catch {
      return [];
    }
  });
}

// hutch's janitor (src/janitor.h): the child that outlives it to sweep.
const janitorOf = (pid) => descendants(pid).find((p) => p.cmd.includes(` __janitor ${pid} `));

await t.step("kill -9 of hutch (and its janitor) with full pools leaves nothing after the next start", async () => {
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2,javascript=2"], env });
  await untilWarm(h);
  await untilWarm(h, js("1"));
  await sleep(3000); // refills under way finish (not a timing assertion: more only helps)
  const pid = h.pid;
  const janitor = janitorOf(pid);
  if (!janitor) throw new Error(`hutch ${pid} has no janitor: ${JSON.stringify(descendants(pid).map((p) => p.cmd))}`);
  process.kill(janitor.pid, "SIGKILL"); // what it would sweep waits for the next start
  const below = descendants(pid).map((p) => p.pid);
  const cgdirs = cgroupDirs(pid);
  // With cgroup limits (root, or a delegated cgroup), the pooled sandboxes'
  // cgroups are there to be left; without, there are none to check.
  if (E === "local") t.diag(`local cgroups before the kill: ${leftovers(pid, cgdirs).length}`);
  // Something of the pools exists to be left: sandbox processes below hutch
  // (local), containers or gVisor state owned by it.
  if (E === "local" ? below.length === 0 : leftovers(pid).length === 0) {
    throw new Error(`nothing of the pools to see before the kill: ${JSON.stringify(below)}`);
  }
  process.kill(pid, "SIGKILL");
  await waitFor(() => !pidAlive(pid), 30000);
  // The next hutch on this executor cleans what a dead one left.
  const h2 = await startStdio({ sdk, hutch, args: [...base, "--pool", "0"], env });
  const x = await execute(h2.client, py("1"), { executor: E });
  await h2.close();
  if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s));
  const alive = await waitFor(() => below.every((p) => !pidAlive(p)) && leftovers(pid, cgdirs).length === 0, 60000);
  if (!alive) {
    throw new Error(`left: processes ${JSON.stringify(below.filter(pidAlive))}, ${JSON.stringify(leftovers(pid, cgdirs))}`);
  }
  await h.close().catch(() => {});
}, STEP_S);

await t.step("kill -9 of hutch alone: its janitor removes what it left, no other hutch started", async () => {
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=2,javascript=2"], env });
  await untilWarm(h);
  const pid = h.pid;
  const janitor = janitorOf(pid);
  if (!janitor) throw new Error(`hutch ${pid} has no janitor: ${JSON.stringify(descendants(pid).map((p) => p.cmd))}`);
  // Its sandboxes (warm, and those being started: a refill follows each
  // take) and their processes, whatever the moment of the kill.
  await execute(h.client, py("1"), { executor: E });
  const below = descendants(pid).filter((p) => p.pid !== janitor.pid).map((p) => p.pid);
  const cgdirs = cgroupDirs(pid);
  process.kill(pid, "SIGKILL");
  await waitFor(() => !pidAlive(pid), 30000);
  const clean = await waitFor(() => below.every((p) => !pidAlive(p)) && leftovers(pid, cgdirs).length === 0 &&
    !pidAlive(janitor.pid), 120000, 500);
  if (!clean) {
    throw new Error(`left: processes ${JSON.stringify(below.filter(pidAlive))}, ${JSON.stringify(leftovers(pid, cgdirs))}, ` +
      `janitor ${pidAlive(janitor.pid) ? "still running" : "gone"}`);
  }
  await h.close().catch(() => {});
}, STEP_S);

await t.step("a refill that fails degrades to cold starts, says why, and recovers", async () => {
  // A runner directory of our own whose Python runner we take away and
  // give back: every executor starts the runner from it.
  const runners = path.join(tmp, "runners");
  fs.cpSync(process.env.HUTCH_RUNNER_DIR, runners, { recursive: true });
  const h = await startStdio({ sdk, hutch, args: [...base, "--pool", "python=1", "-v"], env: { ...env, HUTCH_RUNNER_DIR: runners } });
  try {
    await untilWarm(h);
    fs.renameSync(path.join(runners, "runner.py"), path.join(runners, "runner.py.away"));
    // The pool's sandbox (started before) may still answer; after it, every
    // start fails, warm or cold, and the agent is told why.
    let failed;
    for (let i = 0; i < 5 && !failed; i++) {
      const x = await execute(h.client, py("1"), { executor: E });
      if (x.r.isError && x.s.exit_code === undefined) failed = x;
    }
    if (!failed || !/runner failed to start|runner\.py/.test(failed.text)) {
      throw new Error(`no clear failure: ${failed ? failed.text : "every execution succeeded"}`);
    }
    // A refill that began before the runner went away may have succeeded
    // (the failed execution above was a miss): executions take what the
    // pool holds until a refill has failed.
    const failedRe = /pool: starting a \w+ python sandbox failed/;
    const logged = await waitFor(async () => {
      if (failedRe.test(h.logs())) return true;
      await execute(h.client, py("1"), { executor: E });
      return failedRe.test(h.logs());
    }, 60000, 300);
    if (!logged) throw new Error(`the pool's failure is not in the log:\n${h.logs().slice(-2000)}`);
    fs.renameSync(path.join(runners, "runner.py.away"), path.join(runners, "runner.py"));
    // A box that a refill started before the runner went away may still
    // be idle (a pool that grew refills two at once): an execution can come
    // warm before any start has worked again.  So the recovery is awaited
    // in the log first, and a warm execution after it.
    const recovered = await waitFor(async () => {
      if (/sandboxes start again/.test(h.logs())) return true;
      await execute(h.client, py("1"), { executor: E });
      return /sandboxes start again/.test(h.logs());
    }, 60000, 300);
    if (!recovered) throw new Error(`the recovery is not in the log:\n${h.logs().slice(-2000)}`);
    const back = await untilWarm(h);
    if (back.s.exit_code !== 0) throw new Error(JSON.stringify(back.s));
  } finally {
    await h.close();
  }
}, STEP_S);

fs.rmSync(tmp, { recursive: true, force: true });
t.done();
