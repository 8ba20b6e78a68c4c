// agent.mjs — what code mode saves in the model's context (issue #12); run
// it with `make bench-agent`, or `node tests/bench/agent.mjs` with HUTCH
// (path to hutch) and, from a build tree, HUTCH_PLUGIN_DIR and
// HUTCH_RUNNER_DIR.  EXECUTOR (or HUTCH_EXECUTOR) picks the executor
// hutch runs the code on; local by default.
//
// Scripted agent tasks over the npm reference servers, each done two ways
// in one run, and each answer checked against the truth computed from the
// fixture:
//   direct  an MCP client (the official SDK) calls the upstream's tools as a
//           model would with plain MCP: the bytes that reach the model are
//           the upstream's tool definitions (its tools/list result as JSON),
//           every call's request ({name, arguments} as JSON) and every
//           call's whole CallToolResult as JSON.  Only the server the task
//           uses is counted (not every configured server): the smallest
//           honest direct figure.
//   hutch   the same work as one `execute_code`: hutch's tools/list, one
//           default `search_tools` answer (a query, no limit or detail),
//           the execute_code request and its whole CallToolResult as JSON.
// The tasks:
//   fs      server-filesystem over a generated tree of 300 small notes in
//           10 directories: how many notes mention "overdue", and the sum of
//           their amounts.  Both ways call directory_tree once and
//           read_multiple_files once with every path (the fewest calls and
//           bytes a direct client can spend); only where the text goes
//           differs.
//   logs    the same two calls over 300 request logs of 100 lines (about
//           3 KB each, one per service and day): how many requests failed
//           with a 5xx and how many took a second or more.  The size of
//           what an agent is asked to look through; hutch's fixed cost
//           (tools/list and a search) is small beside it, where it
//           dominates the two small tasks.
//   memory  server-memory holding 200 people and 10 cities with
//           observations and relations, created through its tools before
//           the task (not counted either way): how many people over 60
//           live in Oslo, and the sum of their ages.  Direct: search_nodes
//           "person" (every person, smaller than read_graph); hutch: the
//           same call, filtered inside the sandbox.
// Then the sizes of hutch's tools/list and of a default search_tools answer
// next to the sum of the three upstreams' tool definitions (server-
// everything, server-filesystem, server-memory).  Goal: ≥ 99% fewer bytes
// with the right answer, per task, marked PASS or MISS (a MISS does not
// fail the run; a wrong answer does, exit 1).  Everything it starts is
// stopped and its temp directory removed when it ends.
//
// Also printed per task: the same counts with only the results' content
// blocks (a client that hands the model the text and drops
// structuredContent, which server-filesystem and hutch both duplicate), and
// the per-task share of hutch's bytes (the execute_code request and result,
// without tools/list and the search answer, which a session pays once).
//
// `node tests/bench/agent.mjs [FILES] [PEOPLE] [LOGS]` scales the fixture
// (300 notes, 200 people and 300 logs by default; `make bench-agent
// FILES=3000`).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { MCP, NODE, execute, loadSdk, onExit, startStdio } from "../mcp/lib.mjs";

const hutch = process.env.HUTCH || path.join(process.env.HUTCH_BUILDDIR || ".", "hutch");
if (!fs.existsSync(path.join(MCP, "sdk", "package.json"))) {
  console.error("bench-agent: npm packages not installed (npm ci in tests/mcp)");
  process.exit(2);
}
for (const p of ["server-everything", "server-filesystem", "server-memory"]) {
  if (!fs.existsSync(path.join(MCP, p, "dist", "index.js"))) {
    console.error(`bench-agent: ${p} not installed (npm ci in tests/mcp)`);
    process.exit(2);
  }
}
if (!fs.existsSync(hutch)) {
  console.error(`bench-agent: ${hutch} not found (set HUTCH=path/to/hutch)`);
  process.exit(2);
}
const executor = process.env.EXECUTOR || process.env.HUTCH_EXECUTOR || "local";
process.env.HUTCH_EXECUTOR = executor; // hutchEnv passes it on to hutch serve

// Everything fails loudly within this budget rather than hanging.
const deadline = setTimeout(() => {
  console.error("bench-agent: gave up after 10 minutes");
  process.exit(1);
}, 600000);

const bytes = (v) => Buffer.byteLength(typeof v === "string" ? v : JSON.stringify(v), "utf8");
// A result as a client that drops structuredContent hands it over.
const contentBytes = (r) => bytes(r.content ?? []);

// --- fixture -------------------------------------------------------------------------

// A small deterministic PRNG (mulberry32), so every run sees the same data.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(12);
const FILES = Math.max(10, Math.floor(Number(process.argv[2] || 300)));
const PEOPLE = Math.max(10, Math.floor(Number(process.argv[3] || 200)));
const LOGS = Math.max(30, Math.floor(Number(process.argv[4] || 300)));
const pick = (a) => a[Math.floor(rand() * a.length)];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-bench-agent-"));
onExit(() => fs.rmSync(dir, { recursive: true, force: true }));
const tree = path.join(dir, "notes");
const WORDS = ["invoice", "paid", "pending", "shipping", "refund", "client", "order", "review", "draft", "archive", "urgent", "call"];
const fsTruth = { files: 0, sum: 0 };
for (let d = 0; d * 30 < FILES; d++) {
  const sub = path.join(tree, `batch-${String(d).padStart(2, "0")}`);
  fs.mkdirSync(sub, { recursive: true });
  for (let i = 0; i < 30 && d * 30 + i < FILES; i++) {
    const words = Array.from({ length: 3 + Math.floor(rand() * 6) }, () => pick(WORDS));
    const overdue = rand() < 0.2;
    if (overdue) words.splice(Math.floor(rand() * words.length), 0, "overdue");
    const amount = 1 + Math.floor(rand() * 999);
    if (overdue) {
      fsTruth.files++;
      fsTruth.sum += amount;
    }
    fs.writeFileSync(path.join(sub, `note-${d * 30 + i}.txt`), `${words.join(" ")}\namount: ${amount}\n`);
  }
}

// Request logs, LOGS files (one per service and day) of 100 lines: the
// size of logs an agent is asked about, where the small notes above are
// the smallest task worth a program.
const logs = path.join(dir, "logs");
const ENDPOINTS = ["/api/cart", "/api/checkout", "/api/login", "/api/search", "/api/items", "/health"];
const logTruth = { errors: 0, slow: 0 };
for (let f = 0; f < LOGS; f++) {
  const sub = path.join(logs, `service-${String(f % 30).padStart(2, "0")}`);
  fs.mkdirSync(sub, { recursive: true });
  const lines = [];
  for (let i = 0; i < 100; i++) {
    const status = rand() < 0.03 ? pick([500, 502, 503]) : pick([200, 200, 200, 201, 204, 301, 404]);
    const ms = rand() < 0.05 ? 1000 + Math.floor(rand() * 4000) : 5 + Math.floor(rand() * 400);
    if (status >= 500) logTruth.errors++;
    if (ms >= 1000) logTruth.slow++;
    const t = `${String(i % 24).padStart(2, "0")}:${String(Math.floor(rand() * 60)).padStart(2, "0")}:${String(Math.floor(rand() * 60)).padStart(2, "0")}`;
    lines.push(`2026-11-${String(1 + Math.floor(f / 30)).padStart(2, "0")}T${t}Z ${pick(["GET", "GET", "POST"])} ${pick(ENDPOINTS)} ${status} ${ms}ms`);
  }
  fs.writeFileSync(path.join(sub, `day-${Math.floor(f / 30)}.log`), lines.join("\n") + "\n");
}

const CITIES = ["Oslo", "Lima", "Porto", "Quito", "Riga", "Sofia", "Turin", "Varna", "Wells", "York"];
const people = [];
for (let i = 0; i < PEOPLE; i++) {
  people.push({
    name: `person-${i}`,
    age: 18 + Math.floor(rand() * 70),
    city: pick(CITIES),
    likes: pick(WORDS),
  });
}
const memTruth = { people: 0, sum: 0 };
for (const p of people)
  if (p.city === "Oslo" && p.age > 60) {
    memTruth.people++;
    memTruth.sum += p.age;
  }
const memoryFile = path.join(dir, "memory.jsonl");

const srv = {
  everything: { command: NODE, args: [path.join(MCP, "server-everything", "dist", "index.js"), "stdio"] },
  fs: { command: NODE, args: [path.join(MCP, "server-filesystem", "dist", "index.js"), tree, logs] },
  // Both memory servers (the direct client's and hutch's) keep the graph in
  // one file, which server-memory reads on every call.
  memory: {
    command: NODE,
    args: [path.join(MCP, "server-memory", "dist", "index.js")],
    env: { MEMORY_FILE_PATH: memoryFile },
  },
};
const servers = path.join(dir, "servers.json");
fs.writeFileSync(servers, JSON.stringify({ mcpServers: srv }, null, 2));

// --- the direct clients --------------------------------------------------------------------

const sdk = await loadSdk();
const direct = {};
for (const [name, s] of Object.entries(srv)) {
  const client = new sdk.Client({ name: `bench-agent-${name}`, version: "1.0.0" });
  const env = { PATH: process.env.PATH || "/usr/bin:/bin", HOME: process.env.HOME || "/tmp", ...(s.env || {}) };
  await client.connect(new sdk.StdioClientTransport({ command: s.command, args: s.args, env, stderr: "ignore" }));
  direct[name] = { client, tools: await client.listTools() };
}

// A direct agent's context: the tool definitions, then each call and result.
function directAgent(name) {
  const ctx = { bytes: bytes(direct[name].tools), text: bytes(direct[name].tools), calls: 0 };
  ctx.call = async (tool, args) => {
    const req = bytes({ name: tool, arguments: args });
    const r = await direct[name].client.callTool({ name: tool, arguments: args }, undefined, { timeout: 120000 });
    ctx.bytes += req + bytes(r);
    ctx.text += req + contentBytes(r);
    ctx.calls++;
    if (r.isError) throw new Error(`${name}.${tool}: ${JSON.stringify(r.content).slice(0, 300)}`);
    return r;
  };
  return ctx;
}
const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

// Set-up, not counted: the memory graph, created through server-memory's tools.
{
  const m = direct.memory.client;
  const entities = [
    ...CITIES.map((c) => ({ name: c, entityType: "city", observations: [`a city called ${c}`] })),
    ...people.map((p) => ({
      name: p.name,
      entityType: "person",
      observations: [`age: ${p.age}`, `lives in ${p.city}`, `likes ${p.likes}`],
    })),
  ];
  const r1 = await m.callTool({ name: "create_entities", arguments: { entities } });
  const relations = people.map((p) => ({ from: p.name, to: p.city, relationType: "lives_in" }));
  const r2 = await m.callTool({ name: "create_relations", arguments: { relations } });
  if (r1.isError || r2.isError) throw new Error(`memory set-up failed: ${textOf(r1)} ${textOf(r2)}`);
}

// --- hutch -----------------------------------------------------------------------------------

const h = await startStdio({
  sdk,
  hutch,
  servers,
  name: "bench-agent",
  // What a model-facing client gets (doc/code-mode.md, "What the model reads"): the
  // content blocks, no structuredContent; the answer is read off the text.
  structured: false,
  env: process.env.HUTCH_IMAGES_DIR ? { HUTCH_IMAGES_DIR: process.env.HUTCH_IMAGES_DIR } : {},
});
const hutchTools = await h.client.listTools();
async function hutchAgent(query, code) {
  const search = await h.client.callTool({ name: "search_tools", arguments: { query } });
  const args = { language: "python", code };
  const x = await execute(h.client, args, { timeout: 120000 });
  // The exit code and the result, as the model reads them in the text.
  const exit = /^exit code: (\d+)/m.exec(x.text);
  const res = /\n--- result ---\n([\s\S]*?)\n(?:--- |<\/untrusted-data-)/.exec(x.text);
  x.s = { exit_code: exit ? Number(exit[1]) : undefined, result: res ? JSON.parse(res[1]) : undefined };
  const req = bytes({ name: "execute_code", arguments: args });
  if (process.env.BENCH_AGENT_SHOW) console.log(JSON.stringify({ search, execute_code: x.r }, null, 1));
  return {
    bytes: bytes(hutchTools) + bytes(search) + req + bytes(x.r),
    text: bytes(hutchTools) + contentBytes(search) + req + contentBytes(x.r),
    perTask: req + bytes(x.r),
    searchBytes: bytes(search),
    searchText: contentBytes(search),
    x,
  };
}

// --- the tasks -------------------------------------------------------------------------------

const rows = [];
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// fs, both ways: list the tree, read every file; the answer is counted in
// the "model" (direct) or in the program (hutch).  `count` is the direct
// agent's counting (JavaScript), `pyCount` the program's (Python: a
// function count(parts) of the files' texts).
async function fsTask({ label, root, truth, count, pyCount }) {
  const ctx = directAgent("fs");
  const t = JSON.parse(textOf(await ctx.call("directory_tree", { path: root })));
  const paths = [];
  (function walk(nodes, pre) {
    for (const n of nodes) {
      if (n.type === "directory") walk(n.children || [], path.join(pre, n.name));
      else paths.push(path.join(pre, n.name));
    }
  })(t, root);
  const text = textOf(await ctx.call("read_multiple_files", { paths }));
  const answer = count(text.split("\n---\n"));
  const hw = await hutchAgent(
    "read file",
    `import json, re
root = ${JSON.stringify(root)}
def text(r):
    return r["content"] if isinstance(r, dict) else r
paths = []
def walk(nodes, pre):
    for n in nodes:
        if n["type"] == "directory":
            walk(n.get("children", []), pre + "/" + n["name"])
        else:
            paths.append(pre + "/" + n["name"])
walk(json.loads(text(tools.fs.directory_tree(path=root))), root)
${pyCount}
count(text(tools.fs.read_multiple_files(paths=paths)).split("\\n---\\n"))
`,
  );
  rows.push({
    task: label(paths.length),
    direct: ctx.bytes,
    directText: ctx.text,
    calls: ctx.calls,
    hutch: hw.bytes,
    hutchText: hw.text,
    perTask: hw.perTask,
    directRight: same(answer, truth),
    hutchRight: hw.x.s.exit_code === 0 && same(hw.x.s.result, truth),
    got: { direct: answer, hutch: hw.x.s.result ?? hw.x.text, truth },
  });
  rows.searchBytes ??= hw.searchBytes;
  rows.searchText ??= hw.searchText;
}

await fsTask({
  label: (n) => `fs: ${n} notes, count "overdue" + sum`,
  root: tree,
  truth: fsTruth,
  count(parts) {
    const answer = { files: 0, sum: 0 };
    for (const part of parts) {
      if (!/\boverdue\b/.test(part)) continue;
      answer.files++;
      answer.sum += Number(/amount: (\d+)/.exec(part)?.[1] ?? NaN);
    }
    return answer;
  },
  pyCount: `def count(parts):
    files = total = 0
    for part in parts:
        if re.search(r"\\boverdue\\b", part):
            files += 1
            total += int(re.search(r"amount: (\\d+)", part).group(1))
    return {"files": files, "sum": total}`,
});

await fsTask({
  label: (n) => `fs: ${n} request logs, 5xx + slow requests`,
  root: logs,
  truth: logTruth,
  count(parts) {
    const answer = { errors: 0, slow: 0 };
    for (const part of parts)
      for (const m of part.matchAll(/ (\d{3}) (\d+)ms$/gm)) {
        if (Number(m[1]) >= 500) answer.errors++;
        if (Number(m[2]) >= 1000) answer.slow++;
      }
    return answer;
  },
  pyCount: `def count(parts):
    errors = slow = 0
    for part in parts:
        for status, ms in re.findall(r" (\\d{3}) (\\d+)ms$", part, re.M):
            errors += int(status) >= 500
            slow += int(ms) >= 1000
    return {"errors": errors, "slow": slow}`,
});

// memory, direct: every person, filtered in the "model".
{
  const ctx = directAgent("memory");
  const r = await ctx.call("search_nodes", { query: "person" });
  const g = r.structuredContent ?? JSON.parse(textOf(r));
  const answer = { people: 0, sum: 0 };
  for (const e of g.entities) {
    if (e.entityType !== "person" || !e.observations.includes("lives in Oslo")) continue;
    const age = Number(/^age: (\d+)$/m.exec(e.observations.join("\n"))?.[1]);
    if (age > 60) {
      answer.people++;
      answer.sum += age;
    }
  }
  const hw = await hutchAgent(
    "knowledge graph search nodes",
    `import re
g = tools.memory.search_nodes(query="person")
n = total = 0
for e in g["entities"]:
    if e["entityType"] != "person" or "lives in Oslo" not in e["observations"]:
        continue
    age = int(re.search(r"^age: (\\d+)$", "\\n".join(e["observations"]), re.M).group(1))
    if age > 60:
        n += 1
        total += age
{"people": n, "sum": total}
`,
  );
  rows.push({
    task: `memory: ${people.length} people, over 60 in Oslo + sum of ages`,
    direct: ctx.bytes,
    directText: ctx.text,
    calls: ctx.calls,
    hutch: hw.bytes,
    hutchText: hw.text,
    perTask: hw.perTask,
    directRight: same(answer, memTruth),
    hutchRight: hw.x.s.exit_code === 0 && same(hw.x.s.result, memTruth),
    got: { direct: answer, hutch: hw.x.s.result ?? hw.x.text, truth: memTruth },
  });
}

// --- report ----------------------------------------------------------------------------------

const defs = Object.fromEntries(Object.entries(direct).map(([n, d]) => [n, bytes(d.tools)]));
const defsSum = Object.values(defs).reduce((a, b) => a + b, 0);
const nTools = Object.values(direct).reduce((a, d) => a + d.tools.tools.length, 0);

const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
const yn = (b) => (b ? "right" : "WRONG");
console.log(`bench-agent: bytes that reach the model, direct MCP calls vs one execute_code (executor ${executor})`);
console.log(
  `${pad("task", 50)} ${lpad("direct B", 9)} ${lpad("hutch B", 8)} ${lpad("fewer", 8)}  ${pad("direct", 6)} ${pad("hutch", 6)} goal ≥ 99%`,
);
let right = true;
for (const r of rows) {
  const red = 100 * (1 - r.hutch / r.direct);
  const pass = red >= 99 && r.directRight && r.hutchRight;
  right &&= r.directRight && r.hutchRight;
  console.log(
    `${pad(r.task, 50)} ${lpad(r.direct, 9)} ${lpad(r.hutch, 8)} ${lpad(red.toFixed(2) + "%", 8)}  ${pad(yn(r.directRight), 6)} ${pad(yn(r.hutchRight), 6)} ${pass ? "PASS" : "MISS"}`,
  );
  const pct = (a, b) => (100 * (1 - a / b)).toFixed(2) + "%";
  console.log(
    `  content blocks only: direct ${r.directText} B, hutch ${r.hutchText} B, ${pct(r.hutchText, r.directText)} fewer;` +
      ` per task (execute_code request + result): ${r.perTask} B, ${pct(r.perTask, r.direct)} fewer`,
  );
  if (red < 99) console.log(`  99% fewer needs a direct context of at least ${r.hutch * 100} B (100 x hutch's)`);
  if (!r.directRight || !r.hutchRight) console.log(`  answers: ${JSON.stringify(r.got)}`);
}
console.log(
  `(direct: the used upstream's tools/list + ${rows.map((r) => r.calls).join(" and ")} calls' requests and results;` +
    ` hutch: tools/list + one search_tools answer + the execute_code request and result)`,
);
console.log(`hutch tools/list:                       ${lpad(bytes(hutchTools), 7)} B (${hutchTools.tools.length} tools)`);
console.log(
  `default search_tools answer ("read file"): ${lpad(rows.searchBytes, 4)} B (${rows.searchText} B of it content blocks)`,
);
console.log(
  `upstream tool definitions, sum:         ${lpad(defsSum, 7)} B (${nTools} tools: ` +
    Object.entries(defs)
      .map(([n, b]) => `server-${n} ${b} B`)
      .join(", ") +
    ")",
);

// --- stop everything ------------------------------------------------------------------------

for (const d of Object.values(direct)) await d.client.close().catch(() => {});
const exited = await h.close();
if (!exited) console.log("bench-agent: hutch did not exit within its budget (killed)");
clearTimeout(deadline);
process.exit(right && exited ? 0 : 1);
