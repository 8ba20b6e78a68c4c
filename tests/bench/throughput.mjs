// throughput.mjs — `make bench-throughput` (issue 22, "Benchmarks"): executions
// back to back through the official SDK client (v1, stdio), each in a fresh
// sandbox, against the baselines the issue names, all measured in one run:
//   local           executions per second of `print(1)`, and of a program that
//                   checks it is fresh (it lists /work, finds no marker an
//                   earlier execution left in /work or /tmp, and leaves one),
//                   against bare `/usr/bin/python3 -c pass` starts per second
//                   on the host (goal: ≥ 4×);
//   docker, gvisor  the p50 of the same back-to-back executions against
//                   `docker exec` of `python3 -c pass` in a running container
//                   of hutch's python image (goal: ≤ 0.25×).
// The cases are interleaved: each of ROUNDS rounds runs BLOCK executions of
// each case on each executor, BLOCK python starts and BLOCK docker execs,
// so the machine's drift touches them all alike; rates and p50s are over
// every round.  Every execution must say it ran on the executor measured,
// and every fresh-check must find nothing of an earlier one (the benchmark
// stops otherwise: it would be measuring the wrong thing).  A MISS does not
// fail the target.
// Knobs (environment): ROUNDS (5), BLOCK (40), EXECUTORS (local,docker,gvisor:
// those `hutch plugins` calls usable), POOL (the --pool of each hutch serve,
// python=2,javascript=0), HUTCH_POOL_REFILL_MAX (passed to hutch).
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MCP, loadSdk, percentile, startStdio } from "../mcp/lib.mjs";

const ROUNDS = Number(process.env.ROUNDS || 5);
const BLOCK = Number(process.env.BLOCK || 40);
const POOL = process.env.POOL || "python=2,javascript=0";
const hutch = process.env.HUTCH || path.join(process.env.HUTCH_BUILDDIR || ".", "hutch");
const PY = "/usr/bin/python3";
if (!fs.existsSync(path.join(MCP, "sdk", "package.json"))) {
  console.error("bench-throughput: npm packages not installed (npm ci in tests/mcp)");
  process.exit(2);
}
const progress = (s) => process.stderr.write(`bench-throughput: ${s}\n`);
const med = (v) => percentile([...v].sort((a, b) => a - b), 50);
const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");

// Which executors can run here, as `hutch plugins` says.
const want = (process.env.EXECUTORS || "local,docker,gvisor").split(",");
const plugins = spawnSync(hutch, ["plugins"], { encoding: "utf8" }).stdout || "";
const executors = [];
const skipped = [];
for (const e of want) {
  const line = plugins.split("\n").find((l) => l.trim().split(/\s+/)[0] === e);
  if (line && / usable /.test(line)) executors.push(e);
  else skipped.push(`${e} skipped: ${line ? line.trim().slice(0, 120) : `no ${e} plugin`}`);
}
if (!executors.length) {
  console.error(`bench-throughput: no executor can run (${skipped.join("; ")})`);
  process.exit(2);
}

// docker exec's baseline: a running container of hutch's python image.
let container = null;
const version = execFileSync(hutch, ["--version"], { encoding: "utf8" }).split(/\s+/)[1];
const hasDocker = spawnSync("docker", ["version", "--format", "{{.Server.Version}}"], { timeout: 10000 }).status === 0;
if (hasDocker) {
  const r = spawnSync("docker", ["run", "-d", "--rm", "--network", "none", "--label", "hutch-bench=throughput",
    `hutch-python:${version}`, "sleep", "infinity"], { encoding: "utf8" });
  if (r.status === 0) container = r.stdout.trim();
  else progress(`no docker exec baseline: ${r.stderr.trim().slice(0, 200)}`);
}
process.on("exit", () => {
  if (container) spawnSync("docker", ["rm", "-f", container]);
});

function timedRun(cmd, args) {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.status}: ${r.stderr}`);
  return ms;
}

const PROGRAMS = {
  print: "print(1)",
  fresh: [
    "import os",
    "seen = [p for p in ('/work/.hutch-bench-mark', '/tmp/.hutch-bench-mark') if os.path.exists(p)]",
    "names = sorted(os.listdir('/work'))",
    "for p in ('/work/.hutch-bench-mark', '/tmp/.hutch-bench-mark'):",
    "    open(p, 'w').write('x')",
    "print('fresh' if not seen else 'SEEN ' + ' '.join(seen), len(names))",
  ].join("\n"),
};

const sdk = await loadSdk();
const servers = {};
for (const e of executors) {
  const env = {};
  if (process.env.HUTCH_POOL_REFILL_MAX) env.HUTCH_POOL_REFILL_MAX = process.env.HUTCH_POOL_REFILL_MAX;
  servers[e] = await startStdio({ sdk, hutch, args: ["--executor", e, "--pool", POOL], env });
}

async function exec(e, kind) {
  const t0 = performance.now();
  const r = await servers[e].client.callTool(
    { name: "execute_code", arguments: { language: "python", code: PROGRAMS[kind] } }, undefined, { timeout: 120000 });
  const ms = performance.now() - t0;
  const s = r.structuredContent || {};
  if (r.isError || s.exit_code !== 0) throw new Error(`${e} ${kind}: ${JSON.stringify(s).slice(0, 400)}`);
  if (s.executor !== e) throw new Error(`${e} ${kind} ran on ${s.executor}: the benchmark measures the wrong executor`);
  if (kind === "fresh" && !/^fresh /.test(s.stdout || ""))
    throw new Error(`${e}: a sandbox was not fresh: ${JSON.stringify(s.stdout)}`);
  return { ms, warm: s.warm === true };
}

// Per case: the wall time of each block (for the rate), every sample, warm count.
const res = {};
const add = (k) => (res[k] ??= { wall: 0, n: 0, ms: [], warm: 0 });
async function block(key, one) {
  const r = add(key);
  const t0 = performance.now();
  for (let i = 0; i < BLOCK; i++) {
    const x = await one();
    r.ms.push(x.ms);
    if (x.warm) r.warm++;
  }
  r.wall += performance.now() - t0;
  r.n += BLOCK;
}

progress(`executors ${executors.join(", ")}${skipped.length ? "; " + skipped.join("; ") : ""}`);
progress(`warming up, then ${ROUNDS} rounds of ${BLOCK} back-to-back executions per case`);
for (const e of executors) for (let i = 0; i < 5; i++) await exec(e, "print");
for (let round = 0; round < ROUNDS; round++) {
  await block("python3 -c pass", async () => ({ ms: timedRun(PY, ["-c", "pass"]) }));
  if (container)
    await block("docker exec", async () => ({ ms: timedRun("docker", ["exec", container, "python3", "-c", "pass"]) }));
  for (const e of executors) for (const kind of Object.keys(PROGRAMS)) await block(`${e} ${kind}`, () => exec(e, kind));
  progress(`round ${round + 1} of ${ROUNDS} done`);
}
for (const e of executors) await servers[e].close();

const rate = (k) => (res[k] ? (res[k].n * 1000) / res[k].wall : NaN);
const p50 = (k) => (res[k] ? med(res[k].ms) : NaN);
const out = [];
const p = (s = "") => out.push(s);
p(`hutch throughput benchmark — ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model.split(" ").slice(0, 2).join(" ")}, node ${process.version}`);
p(`execute_code back to back through the SDK client (v1, stdio), a fresh sandbox each, --pool ${POOL}` +
  (process.env.HUTCH_POOL_REFILL_MAX ? `, HUTCH_POOL_REFILL_MAX=${process.env.HUTCH_POOL_REFILL_MAX}` : ""));
p(`${ROUNDS} interleaved rounds of ${BLOCK} per case${skipped.length ? "; " + skipped.join("; ") : ""}`);
p();
p("case                                      n    per s    p50 ms   p90 ms    warm");
const row = (k) => {
  const r = res[k];
  if (!r) return;
  const p90 = percentile([...r.ms].sort((a, b) => a - b), 90);
  const warm = k.includes(" print") || k.includes(" fresh") ? `${r.warm}/${r.n}` : "";
  p(`${k.padEnd(40)} ${String(r.n).padStart(3)} ${f(rate(k)).padStart(8)} ${f(p50(k), 2).padStart(9)} ${f(p90, 2).padStart(8)}    ${warm}`);
};
row("python3 -c pass");
row("docker exec");
for (const e of executors) for (const kind of Object.keys(PROGRAMS)) row(`${e} ${kind}`);
p();
p("goals (ratios from this run)");
const goal = (label, x, ok, g) => p(`  ${label.padEnd(52)} ${Number.isFinite(x) ? f(x, 2) + "×" : "n/a"}   (goal ${g}: ${!Number.isFinite(x) ? "n/a" : ok ? "PASS" : "MISS"})`);
if (executors.includes("local"))
  for (const kind of Object.keys(PROGRAMS)) {
    const x = rate(`local ${kind}`) / rate("python3 -c pass");
    goal(`local ${kind}: rate / python3 -c pass starts`, x, x >= 4, "≥ 4×");
  }
for (const e of executors.filter((x) => x !== "local"))
  for (const kind of Object.keys(PROGRAMS)) {
    const x = p50(`${e} ${kind}`) / p50("docker exec");
    goal(`${e} ${kind}: p50 / docker exec p50`, x, x <= 0.25, "≤ 0.25×");
  }
console.log(out.join("\n"));
