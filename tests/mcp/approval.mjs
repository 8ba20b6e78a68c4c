// approval.mjs — the policy's questions reach an MCP client's user (issue
// 11, point 3): on_tool_call answers "ask", question for everything.echo;
// the program's call waits in its sandbox while the client is asked.  With
// the official SDK client on $HUTCH_EXECUTOR (local by default):
//   2025 era (SDK 1.32.2), over stdio and HTTP: elicitation/create during
//   the tools/call; approve, decline, cancel, no answer within the call's
//   time, a client without the elicitation capability, and the audit
//   record of each (the question and the answer).
// No timing: every step waits for a behaviour; "no answer" waits out a
// budget nobody meets.  TAP.
import {
  connectHttp, execute, fs, loadSdk, makeFixture, path, py, requireEnv, spawnHttp, startStdio, tap,
} from "./lib.mjs";

const hutch = requireEnv();
const sdk = await loadSdk("1");
const t = tap({ timeout: 400 });
const E = process.env.HUTCH_EXECUTOR || "local";
const fx = makeFixture();
const audit = path.join(fx.dir, "audit.jsonl");
const policy = path.join(fx.dir, "ask.lua");
fs.writeFileSync(policy, `return {
  tools = { allow = { "everything.*" } },
  on_tool_call = function(call)
    if call.name == "echo" then
      return "ask", "Let the program echo " .. tostring(call.args.message) .. "?"
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
const lastCall = () => {
  const lines = fs.readFileSync(audit, "utf8").split("\n").filter((l) => l.includes('"event":"tool_call"'));
  return lines.length ? JSON.parse(lines[lines.length - 1]) : {};
};

// The user: what the elicitation handler answers next (null: never).
let answer = null;
let asked = [];
const onClient = (client) =>
  client.setRequestHandler(sdk.ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    if (!answer) return new Promise(() => {}); // nobody answers
    return answer;
  });

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
  await t.step(`${label}: declined, the program sees a denial and goes on`, async () => {
    answer = { action: "decline" };
    const x = await execute(client, PROGRAM("no"), { executor: E });
    if (!/refused: denied the user declined: Let the program echo no\?/.test(x.s.stdout) || !/after/.test(x.s.stdout))
      throw new Error(x.text);
    if (lastCall().answer !== "decline") throw new Error(JSON.stringify(lastCall()));
  });
  await t.step(`${label}: cancelled (dismissed)`, async () => {
    answer = { action: "cancel" };
    const x = await execute(client, PROGRAM("x"), { executor: E });
    if (!/refused: denied the user dismissed the question/.test(x.s.stdout)) throw new Error(x.text);
    if (lastCall().answer !== "cancel") throw new Error(JSON.stringify(lastCall()));
  });
  await t.step(`${label}: no answer within the call's time: denied`, async () => {
    answer = null;
    const x = await execute(client, { ...PROGRAM("late"), timeout_ms: 8000 }, { executor: E });
    if (!/refused: denied no answer from the user within/.test(x.s.stdout) || !/after/.test(x.s.stdout))
      throw new Error(x.text);
    if (lastCall().answer !== "timeout") throw new Error(JSON.stringify(lastCall()));
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
t.done();
