// bench.mjs — the benchmark of `hutch serve` (issue #3); run it through
// tests/bench/mcp.sh (see there).  Prints, in one run:
//  1. p50/p90 of execute_code `print(1)` over stdio (local executor, SDK
//     client) side by side with `hutch run --lang python -e 'print(1)'`'s cold
//     start (timed from a Python driver, as tests/bench/cold_start.sh does),
//     interleaved; goal: execute_code p50 ≤ 1.3 × hutch run p50;
//  2. tool calls per second to server-everything's echo: N sequential calls
//     timed inside one execution (JavaScript and Python) against the same N
//     calls made directly by the SDK client to server-everything over stdio;
//     goal: a call from a sandbox costs ≤ 2 × a direct call;
//  3. 100 sequential echo calls from one execution, timed inside the program;
//     goal: < 30 ms; and each of those calls timed on its own, interleaved
//     with a bare JSON-RPC client (NDJSON over server-everything's stdio, no
//     SDK) making the same 100 calls: p50 per call both ways and their
//     ratio; goal: hutch / bare ≤ 1.5× (issue 22).  Beside them, the same
//     bare client through socat, a relay that only copies bytes: what any
//     process between a program and its server costs, before it does
//     anything (hutch is such a process: the policy decides every call).
import { spawn } from "node:child_process";
import events from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MCP, NODE, hutchEnv, loadSdk, percentile, startStdio } from "./lib.mjs";

const RUNS = Number(process.argv[2] || 40);
const CALLS = Number(process.argv[3] || 500);
// Promise.all of PAR calls: an execution runs HUTCH_CALL_WORKERS (32) of
// them at once and queues the rest (src/calls.c).
const PAR = Math.min(CALLS, 250);
events.defaultMaxListeners = 1000; // the SDK's stdio transport waits for "drain" per message
const hutch = process.env.HUTCH || path.join(process.env.HUTCH_BUILDDIR || ".", "hutch");
if (!fs.existsSync(path.join(MCP, "sdk", "package.json"))) {
  console.error("bench: npm packages not installed (npm ci in tests/mcp)");
  process.exit(2);
}
if (!fs.existsSync(hutch)) {
  console.error(`bench: ${hutch} not found (set HUTCH=path/to/hutch)`);
  process.exit(2);
}

const sdk = await loadSdk();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-bench-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
const everything = { command: NODE, args: [path.join(MCP, "server-everything", "dist", "index.js"), "stdio"] };
const servers = path.join(dir, "servers.json");
fs.writeFileSync(servers, JSON.stringify({ mcpServers: { everything } }));

const med = (v) => percentile([...v].sort((a, b) => a - b), 50);
const p90 = (v) => percentile([...v].sort((a, b) => a - b), 90);
const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");
const goal = (ok) => (ok ? "goal met" : "GOAL MISSED");

// hutch serve (stdio) and a direct SDK client to server-everything.
const h = await startStdio({ sdk, hutch, servers });
const direct = new sdk.Client({ name: "bench-direct", version: "1.0.0" });
await direct.connect(
  new sdk.StdioClientTransport({ command: everything.command, args: everything.args, stderr: "ignore" }),
);

async function exec(language, code) {
  const t0 = performance.now();
  const r = await h.client.callTool({ name: "execute_code", arguments: { language, code } }, undefined, { timeout: 120000 });
  const ms = performance.now() - t0;
  const s = r.structuredContent || {};
  if (r.isError || s.exit_code !== 0) throw new Error(`execute_code failed: ${JSON.stringify(s).slice(0, 500)}`);
  return { ms, s };
}

// A Python driver that runs `hutch run` once per line on its stdin and
// prints the wall time, so cold starts are timed as cold_start.sh does.
const driver = spawn(
  "/usr/bin/python3",
  [
    "-u",
    "-c",
    `import subprocess, sys, time
argv = sys.argv[1:]
for _ in sys.stdin:
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t0) * 1000
    if p.returncode != 0 or p.stdout.strip() != b"1":
        print("error", p.returncode, p.stderr[:200])
    else:
        print(dt)`,
    hutch,
    "run",
    "--lang",
    "python",
    "-e",
    "print(1)",
  ],
  { env: hutchEnv(), stdio: ["pipe", "pipe", "inherit"] },
);
driver.stdout.setEncoding("utf8");
let dbuf = "";
const dwait = [];
driver.stdout.on("data", (d) => {
  dbuf += d;
  let i;
  while ((i = dbuf.indexOf("\n")) >= 0) {
    const line = dbuf.slice(0, i);
    dbuf = dbuf.slice(i + 1);
    dwait.shift()?.(line);
  }
});
function coldRun() {
  return new Promise((resolve, reject) => {
    dwait.push((line) => (line.startsWith("error") ? reject(new Error(`hutch run: ${line}`)) : resolve(Number(line))));
    driver.stdin.write("go\n");
  });
}

// --- 1. latency -------------------------------------------------------------------------
for (let i = 0; i < 5; i++) {
  await exec("python", "print(1)");
  await coldRun();
}
const lat = { exec: [], run: [], execJs: [] };
for (let i = 0; i < RUNS; i++) {
  lat.exec.push((await exec("python", "print(1)")).ms);
  lat.run.push(await coldRun());
  lat.execJs.push((await exec("javascript", "console.log(1)")).ms);
}
driver.stdin.end();

// --- 2. tool calls per second --------------------------------------------------------------
const jsLoop = (n) => `const t0 = performance.now();
for (let i = 0; i < ${n}; i++) {
  const r = await tools.everything.echo({message: "m" + i});
  if (r !== "Echo: m" + i) throw new Error("bad echo " + r);
}
return performance.now() - t0;`;
const pyLoop = (n) => `import time
t0 = time.perf_counter()
for i in range(${n}):
    r = tools.everything.echo(message="m%d" % i)
    assert r == "Echo: m%d" % i, r
(time.perf_counter() - t0) * 1000`;
const jsParallel = (n) => `const t0 = performance.now();
const rs = await Promise.all(Array.from({length: ${n}}, (_, i) => tools.everything.echo({message: "m" + i})));
if (rs.length !== ${n}) throw new Error("short");
return performance.now() - t0;`;

async function directLoop(n) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const r = await direct.callTool({ name: "echo", arguments: { message: "m" + i } });
    if (r.content[0].text !== "Echo: m" + i) throw new Error("bad echo");
  }
  return performance.now() - t0;
}
async function directParallel(n) {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, (_, i) => direct.callTool({ name: "echo", arguments: { message: "m" + i } })));
  return performance.now() - t0;
}

// The floor: the same calls as bare NDJSON JSON-RPC over the server's
// stdio, no SDK on the client side.  The relay: the same client, with
// socat copying bytes between it and the server.
async function bareClient(command, args) {
  const proc = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"] });
  proc.stdout.setEncoding("utf8");
  let buf = "", id = 0;
  const wait = new Map();
  proc.stdout.on("data", (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const m = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      if (m.id !== undefined && wait.has(m.id)) {
        wait.get(m.id)(m);
        wait.delete(m.id);
      }
    }
  });
  const req = (method, params) =>
    new Promise((resolve) => {
      const n = ++id;
      wait.set(n, resolve);
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: n, method, params }) + "\n");
    });
  await req("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } });
  proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  return { proc, req };
}
const bare = await bareClient(everything.command, everything.args);
const rawReq = bare.req;
const socat = ["/usr/bin/socat", "/bin/socat"].find((f) => fs.existsSync(f));
const relay = socat
  ? await bareClient(socat, ["-b", "65536", "STDIO", `EXEC:${[everything.command, ...everything.args].join(" ")},pipes`])
  : null;
async function rawLoop(n) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const m = await rawReq("tools/call", { name: "echo", arguments: { message: "m" + i } });
    if (m.result?.content?.[0]?.text !== "Echo: m" + i) throw new Error("bad raw echo " + JSON.stringify(m));
  }
  return performance.now() - t0;
}

await rawLoop(100);
await directLoop(100);
await exec("javascript", jsLoop(100));
await exec("python", pyLoop(100));
const REP = 5;
const thr = { raw: [], direct: [], js: [], py: [], directPar: [], jsPar: [] };
for (let i = 0; i < REP; i++) {
  thr.raw.push(await rawLoop(CALLS));
  thr.direct.push(await directLoop(CALLS));
  thr.js.push((await exec("javascript", jsLoop(CALLS))).s.result);
  thr.py.push((await exec("python", pyLoop(CALLS))).s.result);
  thr.directPar.push(await directParallel(PAR));
  thr.jsPar.push((await exec("javascript", jsParallel(PAR))).s.result);
}

// --- 3. 100 sequential echo calls from one execution ------------------------------------------
// Each call is timed on its own, inside the program, and the same 100 calls
// by the bare JSON-RPC client are timed the same way, interleaved with them:
// the p50 per call both ways is what a tool call from a sandbox costs.
const jsPer = (n) => `const per = [], t0 = performance.now();
for (let i = 0; i < ${n}; i++) {
  const t = performance.now();
  const r = await tools.everything.echo({message: "x"});
  per.push(performance.now() - t);
  if (r !== "Echo: x") throw new Error("bad echo " + r);
}
return {total: performance.now() - t0, per};`;
const pyPer = (n) => `import time
per = []
t0 = time.perf_counter()
for i in range(${n}):
    t = time.perf_counter()
    r = tools.everything.echo(message="x")
    per.append((time.perf_counter() - t) * 1000)
    assert r == "Echo: x", r
result = {"total": (time.perf_counter() - t0) * 1000, "per": per}`;
async function rawPer(n, req = rawReq) {
  const per = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const m = await req("tools/call", { name: "echo", arguments: { message: "x" } });
    per.push(performance.now() - t);
    if (m.result?.content?.[0]?.text !== "Echo: x") throw new Error("bad raw echo " + JSON.stringify(m));
  }
  return per;
}
const HUNDRED_REP = 10;
const hundred = { js: [], py: [], jsE2E: [], pyE2E: [], jsPer: [], pyPer: [], rawPer: [], relayPer: [] };
for (let i = 0; i < HUNDRED_REP; i++) {
  hundred.rawPer.push(...(await rawPer(100)));
  if (relay) hundred.relayPer.push(...(await rawPer(100, relay.req)));
  const a = await exec("javascript", jsPer(100));
  hundred.js.push(a.s.result.total);
  hundred.jsPer.push(...a.s.result.per);
  hundred.jsE2E.push(a.ms);
  hundred.rawPer.push(...(await rawPer(100)));
  if (relay) hundred.relayPer.push(...(await rawPer(100, relay.req)));
  const b = await exec("python", pyPer(100));
  hundred.py.push(b.s.result.total);
  hundred.pyPer.push(...b.s.result.per);
  hundred.pyE2E.push(b.ms);
}

await direct.close();
bare.proc.kill();
relay?.proc.kill();
await h.close();

// --- report ---------------------------------------------------------------------------------
const out = [];
const p = (s = "") => out.push(s);
const cpus = os.cpus();
p(`hutch serve benchmark — ${new Date().toISOString()}, ${cpus.length} × ${cpus[0]?.model?.trim() ?? "cpu"}, node ${process.version}`);
p(`local executor, stdio transport, upstream server-everything (stdio); ${RUNS} interleaved runs`);
p();
p(`1. end-to-end latency (ms)                        p50      p90`);
p(`   execute_code print(1), python (SDK client) ${f(med(lat.exec)).padStart(8)} ${f(p90(lat.exec)).padStart(8)}`);
p(`   hutch run --lang python -e 'print(1)'      ${f(med(lat.run)).padStart(8)} ${f(p90(lat.run)).padStart(8)}`);
p(`   execute_code console.log(1), javascript    ${f(med(lat.execJs)).padStart(8)} ${f(p90(lat.execJs)).padStart(8)}`);
const r1 = med(lat.exec) / med(lat.run);
p(`   execute_code / hutch run (p50): ${f(r1)}×   (goal ≤ 1.3×: ${goal(r1 <= 1.3)})`);
p();
const per = (ms, n = CALLS) => (ms * 1000) / n;
const rate = (ms, n = CALLS) => n / (ms / 1000);
p(`2. ${CALLS} sequential echo calls to server-everything (median of ${REP})`);
p(`                                              total ms   µs/call    calls/s`);
const row = (name, v, n = CALLS) =>
  p(`   ${name.padEnd(41)} ${f(med(v), 1).padStart(8)} ${f(per(med(v), n), 0).padStart(9)} ${f(rate(med(v), n), 0).padStart(10)}`);
row("direct: SDK client → server (stdio)", thr.direct);
row("direct: bare JSON-RPC, no SDK (floor)", thr.raw);
row("from execute_code, javascript", thr.js);
row("from execute_code, python", thr.py);
const rj = med(thr.js) / med(thr.direct);
const rp = med(thr.py) / med(thr.direct);
p(`   sandbox / direct: javascript ${f(rj)}×, python ${f(rp)}×   (goal ≤ 2×: ${goal(Math.max(rj, rp) <= 2)})`);
p(`   concurrent, Promise.all of ${PAR} (an execution runs 32 at once, queues the rest):`);
row("direct: SDK client, Promise.all", thr.directPar, PAR);
row("from execute_code, javascript Promise.all", thr.jsPar, PAR);
p();
p(`3. 100 sequential echo calls from one execution (ms, timed inside; median of ${HUNDRED_REP})`);
p(`   javascript ${f(med(hundred.js))}  (p90 ${f(p90(hundred.js))}; whole execute_code ${f(med(hundred.jsE2E), 1)})`);
p(`   python     ${f(med(hundred.py))}  (p90 ${f(p90(hundred.py))}; whole execute_code ${f(med(hundred.pyE2E), 1)})`);
p(`   goal < 30 ms: ${goal(Math.max(med(hundred.js), med(hundred.py)) < 30)}` +
  `   (100 direct calls: SDK ${f(med(thr.direct) / CALLS * 100, 1)} ms, bare ${f(med(thr.raw) / CALLS * 100, 1)} ms)`);
p(`   per call, interleaved with a bare JSON-RPC client making the same 100 calls`);
p(`   (µs, ${hundred.rawPer.length} calls each way)          p50      p90   hutch/bare p50`);
const us = (ms) => f(ms * 1000, 0).padStart(8);
const perRow = (name, v) =>
  p(`   ${name.padEnd(33)} ${us(med(v))} ${us(p90(v))}   ${f(med(v) / med(hundred.rawPer)).padStart(6)}×`);
perRow("bare JSON-RPC client (stdio)", hundred.rawPer);
if (relay) perRow("the same through socat (a relay)", hundred.relayPer);
perRow("from execute_code, javascript", hundred.jsPer);
perRow("from execute_code, python", hundred.pyPer);
const rPer = Math.max(med(hundred.jsPer), med(hundred.pyPer)) / med(hundred.rawPer);
p(`   hutch / bare, p50 per call: javascript ${f(med(hundred.jsPer) / med(hundred.rawPer))}×, ` +
  `python ${f(med(hundred.pyPer) / med(hundred.rawPer))}×   (goal ≤ 1.5×: ${goal(rPer <= 1.5)})`);
if (relay)
  p(`   a relay that only copies bytes already costs ${f(med(hundred.relayPer) / med(hundred.rawPer))}× bare; ` +
    `hutch / relay: javascript ${f(med(hundred.jsPer) / med(hundred.relayPer))}×, ` +
    `python ${f(med(hundred.pyPer) / med(hundred.relayPer))}×`);
fs.writeSync(1, out.join("\n") + "\n");
process.exit(0);
