// tasks.mjs — execute_code as a task (the 2026-07-28 tasks extension,
// SEP-2663; issue 11 point 5), over HTTP with raw 2026 requests:
//   - server/discover advertises the extension; tasks/* from a request
//     that does not declare it: -32021; tasks/result and tasks/list: -32601;
//   - a 90 s execution through a client whose every request gives up after
//     30 s: the call answers at once with the task, tasks/get is polled,
//     and the result arrives inline once it completed;
//   - tasks/cancel of a running task: acknowledged, then "cancelled", and
//     the execution ends;
//   - a question of the policy in a task: input_required with the
//     elicitation in tasks/get, answered with tasks/update;
//   - another principal's task and an unknown one: -32602.
// No timing is asserted: the 90 s is the program's, the 30 s the client's
// limit per request.  TAP.
import crypto from "node:crypto";
import { fs, makeFixture, path, postModern, requireEnv, spawnHttp, tap, waitFor } from "./lib.mjs";

const hutch = requireEnv();
const t = tap({ timeout: 600 });
const fx = makeFixture();
const E = process.env.HUTCH_EXECUTOR || "local";
const alice = "alice-" + crypto.randomBytes(12).toString("hex");
const bob = "bob-" + crypto.randomBytes(12).toString("hex");
const audit = path.join(fx.dir, "audit.jsonl");
const policy = path.join(fx.dir, "tasks.lua");
fs.writeFileSync(policy, `return {
  principals = { { name = "alice", token = "${alice}" }, { name = "bob", token = "${bob}" } },
  tools = { allow = { "everything.*" } },
  limits = { timeout_ms = 300000 },
  on_tool_call = function(call)
    if call.name == "echo" then return "ask", "Echo " .. tostring(call.args.message) .. "?" end
    return true
  end,
}
`);
const srv = await spawnHttp({ hutch, servers: fx.servers, args: ["--policy", policy, "--audit", audit, "--timeout", "300000", "--executor", E] });
const TASKS = { "io.modelcontextprotocol/tasks": {} };

// The client's limit for every request: 30 s, as several SDKs have it.
const post = (token, method, params = {}, { tasks = true } = {}) =>
  postModern(srv.url, token, method, params, {
    capabilities: { elicitation: {}, ...(tasks ? { extensions: TASKS } : {}) },
    timeoutMs: 30000,
  });
const run = (token, code, extra = {}) =>
  post(token, "tools/call", { name: "execute_code", arguments: { language: "python", code, timeout_ms: 200000 } }, extra);
const get = (token, taskId) => post(token, "tasks/get", { taskId });
async function until(token, taskId, status) {
  let last;
  const ok = await waitFor(async () => {
    last = await get(token, taskId);
    return last.result?.status === status;
  }, 400000, 1000);
  if (!ok) throw new Error(`task never ${status}: ${JSON.stringify(last)}`);
  return last.result;
}

// The long one first; the other steps run while it does.
const long = await run(alice, 'import time\ntime.sleep(90)\n"done after 90 s"');

await t.step("server/discover advertises the tasks extension", async () => {
  const d = await post(alice, "server/discover");
  if (!d.result?.capabilities?.extensions?.["io.modelcontextprotocol/tasks"]) throw new Error(JSON.stringify(d));
});

await t.step("execute_code answers at once with the task (flat, resultType task)", async () => {
  const r = long.result;
  if (r?.resultType !== "task" || typeof r.taskId !== "string" || r.status !== "working" ||
    !Number.isInteger(r.ttlMs) || !Number.isInteger(r.pollIntervalMs) || !r.createdAt || r.task || r.ttl !== undefined)
    throw new Error(JSON.stringify(long));
  const g = await get(alice, r.taskId);
  if (g.result?.resultType !== "complete" || g.result.taskId !== r.taskId || g.result.result) throw new Error(JSON.stringify(g));
});

await t.step("tasks/* without the extension declared: -32021; removed methods: -32601", async () => {
  const g = await post(alice, "tasks/get", { taskId: long.result.taskId }, { tasks: false });
  if (g.error?.code !== -32021) throw new Error(JSON.stringify(g));
  for (const m of ["tasks/result", "tasks/list"]) {
    const e = await post(alice, m, { taskId: long.result.taskId });
    if (e.error?.code !== -32601) throw new Error(`${m}: ${JSON.stringify(e)}`);
  }
});

await t.step("another principal's task, and an unknown one: -32602", async () => {
  const b = await get(bob, long.result.taskId);
  const u = await get(alice, long.result.taskId.replace(/.$/, (c) => (c === "0" ? "1" : "0")));
  if (b.error?.code !== -32602 || u.error?.code !== -32602) throw new Error(JSON.stringify([b, u]));
});

await t.step("tasks/cancel: acknowledged, then cancelled, and the execution ends", async () => {
  const c = await run(alice, "import time\ntime.sleep(600)");
  const id = c.result?.taskId;
  if (!id) throw new Error(JSON.stringify(c));
  const ack = await post(alice, "tasks/cancel", { taskId: id });
  if (ack.result?.resultType !== "complete" || ack.result.taskId) throw new Error(JSON.stringify(ack));
  const g = await get(alice, id);
  if (g.result?.status !== "cancelled") throw new Error(JSON.stringify(g));
  const again = await post(alice, "tasks/cancel", { taskId: id });
  if (again.result?.resultType !== "complete") throw new Error(`twice: ${JSON.stringify(again)}`);
  const ended = await waitFor(() => fs.existsSync(audit) && fs.readFileSync(audit, "utf8").split("\n").some((l) =>
    l.includes('"event":"execution"') && l.includes('"principal":"alice"') && /"timed_out":false/.test(l) && /"exit_code":(137|143|-?\d+)/.test(l)), 120000, 200);
  if (!ended) throw new Error("the cancelled execution never ended");
});

await t.step("a question in a task: input_required in tasks/get, answered with tasks/update", async () => {
  const q = await run(alice, 'print(tools.everything.echo(message="from a task"))');
  const id = q.result?.taskId;
  const asked = await until(alice, id, "input_required");
  const el = asked.inputRequests?.approve;
  if (el?.method !== "elicitation/create" || !/Echo from a task\?/.test(el.params?.message)) throw new Error(JSON.stringify(asked));
  const up = await post(alice, "tasks/update", { taskId: id, inputResponses: { approve: { action: "accept", content: { approve: true } } } });
  if (up.result?.resultType !== "complete") throw new Error(JSON.stringify(up));
  const done = await until(alice, id, "completed");
  if (!/Echo: from a task/.test(done.result?.structuredContent?.stdout ?? "")) throw new Error(JSON.stringify(done));
});

await t.step("the 90 s execution completes; its result is inline in tasks/get", async () => {
  const done = await until(alice, long.result.taskId, "completed");
  const sc = done.result?.structuredContent;
  if (sc?.result !== "done after 90 s" || sc.executor !== E) throw new Error(JSON.stringify(done).slice(0, 600));
  if (done.result.resultType !== "complete") throw new Error("the inline result has no resultType complete");
}, 300);

const stopped = await srv.stop();
t.ok(stopped && stopped.code === 0, "hutch serve --http exits 0", JSON.stringify(stopped));
t.done();
