// approval.mjs — the policy's questions reach an MCP client's user (issue
// 11, point 3): on_tool_call answers "ask", question for everything.echo;
// the program's call waits in its sandbox while the client is asked, and
// is shown every argument's head and tail (an address after 400 harmless
// bytes is not hidden) with what was left out counted.  With
// the official SDK client on $HUTCH_EXECUTOR (local by default):
//   2025 era (SDK 1.32.2), over stdio and HTTP: elicitation/create during
//   the tools/call; approve, decline, cancel, no answer within the call's
//   time, a client without the elicitation capability, and the audit
//   record of each (the question and the answer).
//   2026-07-28 era (SDK v2 client pinned to it), over stdio and HTTP: the
//   execute_code call answers input_required (an elicitation/create and a
//   signed requestState) while the sandbox waits; the client's automatic
//   retry with the answer continues the same program.  The same answers,
//   then by hand (allowInputRequired): a tampered state, a replayed one,
//   another principal's, a missing answer; and every execution ends (the
//   audit log has each one's end: nothing stays parked).
// In every era and transport, the taint rule's question (issue 24): a sink
// (everything.get-sum) called after an untrusted source
// (everything.get-annotated-message) is asked about, naming the source.
// No timing: every step waits for a behaviour; "no answer" waits out a
// budget nobody meets.  TAP.
import {
  callTool, connectHttp, execute, fs, loadSdk, makeFixture, NODE, path, py, requireEnv, SERVERS_DIR, spawnHttp,
  startStdio, tap, waitFor,
} from "./lib.mjs";

const hutch = requireEnv();
const sdk = await loadSdk("1");
const sdk2 = await loadSdk("2-pin");
const t = tap({ timeout: 900 });
const E = process.env.HUTCH_EXECUTOR || "local";
const fx = makeFixture({ extra: { modern: { command: NODE, args: [path.join(SERVERS_DIR, "modern.mjs")] } } });
const audit = path.join(fx.dir, "audit.jsonl");
const policy = path.join(fx.dir, "ask.lua");
fs.writeFileSync(policy, `return {
  tools = { allow = { "everything.*", "modern.*" } },
  taint = { sources = { "everything.get-annotated-message" }, sinks = { "everything.get-sum" },
            on_sink = "ask" },
  on_tool_call = function(call)
    if call.name == "echo" then
      local m = tostring(call.args.message)
      return "ask", "Let the program echo " .. (#m > 40 and "a long message" or m) .. "?"
    end
    return true
  end,
}
`);
const PROGRAM = (msg) => py(`
try:
    print("answer:", tools.everything.echo(message=${JSON.stringify(msg)}))
except ToolError as e:
    print("refused:", e.code, e)
print("after")`);
const events = (kind) =>
  fs.existsSync(audit)
    ? fs.readFileSync(audit, "utf8").split("\n").filter((l) => l.includes(`"event":"${kind}"`)).map((l) => JSON.parse(l))
    : [];
const lastCall = () => events("tool_call").at(-1) ?? {};

// The user: what the elicitation handler answers next (null: never).
let answer = null;
let asked = [];
const user = async (req) => {
  asked.push(req.params);
  // An upstream's own question (modern.mjs's ask): one boolean ok.
  if (req.params?.message === "Proceed?") return { action: "accept", content: { ok: true } };
  if (!answer) return new Promise(() => {}); // nobody answers
  return answer;
};
const onClient = (client) => client.setRequestHandler(sdk.ElicitRequestSchema, user);
const onClient2 = (client) => client.setRequestHandler("elicitation/create", user);

async function steps(label, client) {
  await t.step(`${label}: approved, the call goes ahead`, async () => {
    answer = { action: "accept", content: { approve: true } };
    asked = [];
    const x = await execute(client, PROGRAM("hello"), { executor: E });
    if (!/answer: Echo: hello/.test(x.s.stdout)) throw new Error(x.text);
    if (asked.length !== 1 || !/Let the program echo hello\?/.test(asked[0].message) || !/everything\.echo/.test(asked[0].message))
      throw new Error(`the question: ${JSON.stringify(asked)}`);
    if (asked[0].requestedSchema?.properties?.approve?.type !== "boolean") throw new Error(JSON.stringify(asked[0]));
    const a = lastCall();
    if (a.decision !== "allow" || a.answer !== "approve" || a.question !== "Let the program echo hello?")
      throw new Error(`audit: ${JSON.stringify(a)}`);
  });
  await t.step(`${label}: taint: a sink after an untrusted source is asked about, naming the source`, async () => {
    answer = { action: "accept", content: { approve: true } };
    asked = [];
    const x = await execute(client, py(`
print("plain:", tools.everything.get_sum(a=1, b=1))
tools.everything.get_annotated_message(messageType="success")
print("after:", tools.everything.get_sum(a=2, b=3))`), { executor: E });
    if (!/plain: The sum of 1 and 1 is 2/.test(x.s.stdout) || !/after: The sum of 2 and 3 is 5/.test(x.s.stdout))
      throw new Error(x.text);
    if (asked.length !== 1 || !/read untrusted data from everything\.get-annotated-message/.test(asked[0].message))
      throw new Error(`the question: ${JSON.stringify(asked)}`);
    const a = lastCall();
    if (a.decision !== "allow" || a.answer !== "approve" || a.tainted_by !== "everything.get-annotated-message")
      throw new Error(`audit: ${JSON.stringify(a)}`);
  });
  await t.step(`${label}: declined, the program sees a denial and goes on`, async () => {
    answer = { action: "decline" };
    const x = await execute(client, PROGRAM("no"), { executor: E });
    if (!/refused: denied the user declined: Let the program echo no\?/.test(x.s.stdout) || !/after/.test(x.s.stdout))
      throw new Error(x.text);
    if (lastCall().answer !== "decline") throw new Error(JSON.stringify(lastCall()));
  });
  await t.step(`${label}: every argument's head and tail reach the approver, and what was left out is said`, async () => {
    answer = { action: "decline" };
    asked = [];
    // An address after 400 harmless bytes (another argument), and at the
    // end of 5000 bytes of one: the question cut both away at 300 bytes.
    const x = await execute(client, py(`
for args in ({"message": "harmless " * 45, "to": "attacker@evil.example"},
             {"message": "harmless " * 555 + "to=attacker2@evil.example"}):
    try:
        tools.call("everything.echo", args)
    except ToolError as e:
        print("refused:", e.code)
print("after")`), { executor: E });
    if ((x.s.stdout.match(/refused: denied/g) || []).length !== 2 || !/after/.test(x.s.stdout)) throw new Error(x.text);
    if (asked.length !== 2) throw new Error(`asked ${asked.length} times: ${JSON.stringify(asked)}`);
    const [a, b] = asked.map((q) => q.message);
    if (!/\n {2}to: "attacker@evil\.example"\n/.test(a) || !/\n {2}message: "harmless /.test(a))
      throw new Error(`the second argument is not shown: ${a}`);
    const left = /…\[(\d+) bytes left out\]…/.exec(b);
    if (!/to=attacker2@evil\.example"\n/.test(b) || !left) throw new Error(`the tail is not shown: ${b}`);
    const line = `message: ${JSON.stringify("harmless ".repeat(555) + "to=attacker2@evil.example")}`;
    const shown = b.slice(b.indexOf("  message: ") + 2).replace(left[0], "").trimEnd();
    if (Number(left[1]) + Buffer.byteLength(shown) !== Buffer.byteLength(line))
      throw new Error(`left out ${left[1]} + shown ${Buffer.byteLength(shown)} != ${Buffer.byteLength(line)}: ${b}`);
    if (b.length > 12000) throw new Error(`the question is ${b.length} characters`);
  });
  await t.step(`${label}: an upstream's own question reaches the client and its answer goes back`, async () => {
    asked = [];
    const x = await execute(client, py("print(tools.modern.ask())"), { executor: E });
    if (!/answered: \{"action":"accept","content":\{"ok":true\}\}/.test(x.s.stdout)) throw new Error(x.text);
    if (!asked.some((q) => q.message === "Proceed?")) throw new Error(`asked: ${JSON.stringify(asked)}`);
  });
  await t.step(`${label}: cancelled (dismissed)`, async () => {
    answer = { action: "cancel" };
    const x = await execute(client, PROGRAM("x"), { executor: E });
    if (!/refused: denied the user dismissed the question/.test(x.s.stdout)) throw new Error(x.text);
    if (lastCall().answer !== "cancel") throw new Error(JSON.stringify(lastCall()));
  });
  await t.step(`${label}: no answer within the call's time: denied`, async () => {
    answer = null;
    if (label.startsWith("2026")) {
      // The client waits for its user forever; hutch denies the call when
      // its time is up, the program ends, and its result has nowhere to
      // go.  The client's call is then abandoned.
      const ac = new AbortController();
      const before = events("execution").length;
      const call = execute(client, { ...PROGRAM("late"), timeout_ms: 8000 }, { executor: E, signal: ac.signal }).catch(() => null);
      const ended = await waitFor(() => lastCall().answer === "timeout" && events("execution").length > before, 120000, 100);
      ac.abort(); // the client's own wait for its user is not waited for
      void call;
      if (!ended)
        throw new Error(`no timeout in the audit log: ${JSON.stringify(lastCall())}; executions ended: ${events("execution").length - before}`);
      return;
    }
    const x = await execute(client, { ...PROGRAM("late"), timeout_ms: 8000 }, { executor: E });
    if (!/refused: denied no answer from the user within/.test(x.s.stdout) || !/after/.test(x.s.stdout))
      throw new Error(x.text);
    if (lastCall().answer !== "timeout") throw new Error(JSON.stringify(lastCall()));
  }, 240);
}

// 2026 by hand: the input_required result itself, and answers that must
// be refused.
async function manual(label, client, other) {
  const call = (args, extra = {}) =>
    callTool(client, { name: "execute_code", arguments: args, ...extra }, { timeout: 300000, allowInputRequired: true });
  await t.step(`${label}: input_required carries the question and a signed requestState`, async () => {
    const r = await call(PROGRAM("manual"));
    const q = r.inputRequests?.approve;
    if (r.resultType !== "input_required" || typeof r.requestState !== "string" || q?.method !== "elicitation/create" ||
      !/Let the program echo manual\?/.test(q.params?.message)) throw new Error(JSON.stringify(r));
    const yes = { approve: { action: "accept", content: { approve: true } } };
    // Tampered: one character of the payload changed.
    const bad = (r.requestState[5] === "A" ? "B" : "A");
    const tampered = r.requestState.slice(0, 5) + bad + r.requestState.slice(6);
    const e1 = await call(PROGRAM("manual"), { requestState: tampered, inputResponses: yes }).then((x) => JSON.stringify(x), (e) => e.message);
    if (!/altered|not issued by hutch|another hutch process/.test(e1)) throw new Error(`tampered: ${e1}`);
    // A missing answer.
    const e2 = await call(PROGRAM("manual"), { requestState: r.requestState, inputResponses: {} }).then((x) => JSON.stringify(x), (e) => e.message);
    if (!/inputResponses.approve is missing/.test(e2)) throw new Error(`missing: ${e2}`);
    // Another principal's client presents it.
    if (other) {
      const e3 = await callTool(other, { name: "execute_code", arguments: PROGRAM("manual"), requestState: r.requestState, inputResponses: yes },
        { timeout: 300000, allowInputRequired: true }).then((x) => JSON.stringify(x), (e) => e.message);
      if (!/another principal/.test(e3)) throw new Error(`other principal: ${e3}`);
    }
    // The real answer: the same program goes on.
    const done = await call(PROGRAM("manual"), { requestState: r.requestState, inputResponses: yes });
    const out = done.structuredContent?.stdout ?? "";
    if (!/answer: Echo: manual/.test(out)) throw new Error(JSON.stringify(done));
    // Replayed: the question is no longer asked.
    const e4 = await call(PROGRAM("manual"), { requestState: r.requestState, inputResponses: yes }).then((x) => JSON.stringify(x), (e) => e.message);
    if (!/no longer asked/.test(e4)) throw new Error(`replayed: ${e4}`);
  });
  await t.step(`${label}: every execution ended (nothing stays parked)`, async () => {
    const ok = await waitFor(() => {
      const started = new Set(events("execute_decision").filter((e) => e.decision === "allow").map((e) => e.execution));
      const ended = new Set(events("execution").map((e) => e.execution));
      return [...started].every((x) => ended.has(x));
    }, 120000, 200);
    if (!ok) throw new Error("an execution never ended");
  });
}

const args = ["--policy", policy, "--audit", audit];
{
  const h = await startStdio({ sdk, hutch, servers: fx.servers, args, capabilities: { elicitation: {} }, onClient });
  await steps("stdio", h.client);
  await h.close();
}
{
  const h = await startStdio({ sdk, hutch, servers: fx.servers, args });
  await t.step("a client without elicitation: denied, saying nobody can be asked", async () => {
    const x = await execute(h.client, PROGRAM("hi"), { executor: E });
    if (!/refused: denied .*the client does not support elicitation/.test(x.s.stdout)) throw new Error(x.text);
    if (lastCall().answer !== "none") throw new Error(JSON.stringify(lastCall()));
  });
  await h.close();
}
{
  const token = "tok-" + Math.random().toString(36).slice(2) + "xxxxxxxxxxxx";
  const srv = await spawnHttp({ hutch, servers: fx.servers, token, args });
  const c = await connectHttp({ sdk, url: srv.url, token, capabilities: { elicitation: {} }, onClient });
  await steps("HTTP", c.client);
  await c.client.close();
  const stopped = await srv.stop();
  t.ok(stopped && stopped.code === 0, "hutch serve --http exits 0", JSON.stringify(stopped));
}

// --- the 2026-07-28 era --------------------------------------------------------------
{
  const h = await startStdio({ sdk: sdk2, hutch, servers: fx.servers, args, capabilities: { elicitation: {} }, onClient: onClient2 });
  await steps("2026 stdio", h.client);
  await manual("2026 stdio", h.client, null);
  await h.close();
}
{
  const h = await startStdio({ sdk: sdk2, hutch, servers: fx.servers, args });
  await t.step("2026: a request without the elicitation capability: denied, saying why", async () => {
    const x = await execute(h.client, PROGRAM("hi"), { executor: E });
    if (!/refused: denied .*declared no elicitation capability/.test(x.s.stdout)) throw new Error(x.text);
  });
  await h.close();
}
{
  const alice = "alice-" + Math.random().toString(36).slice(2) + "xxxxxxxxxxxx";
  const bob = "bob-" + Math.random().toString(36).slice(2) + "xxxxxxxxxxxxxx";
  const pol2 = path.join(fx.dir, "ask2.lua");
  fs.writeFileSync(pol2, fs.readFileSync(policy, "utf8").replace("return {",
    `return {\n  principals = { { name = "alice", token = "${alice}" }, { name = "bob", token = "${bob}" } },`));
  const srv = await spawnHttp({ hutch, servers: fx.servers, args: ["--policy", pol2, "--audit", audit] });
  const a = await connectHttp({ sdk: sdk2, url: srv.url, token: alice, capabilities: { elicitation: {} }, onClient: onClient2 });
  const b = await connectHttp({ sdk: sdk2, url: srv.url, token: bob, capabilities: { elicitation: {} }, onClient: onClient2 });
  await steps("2026 HTTP", a.client);
  await manual("2026 HTTP", a.client, b.client);
  if (srv.proc.exitCode !== null || srv.proc.signalCode)
    t.diag(`hutch exited: ${srv.logs().split("\n").filter((l) => !l.startsWith("{")).join("\n").slice(-6000)}`);
  await a.client.close();
  await b.client.close();
  const stopped = await srv.stop();
  t.ok(stopped && stopped.code === 0, "hutch serve --http (2026) exits 0", JSON.stringify(stopped));
}
t.done();
