// replicas.mjs — two `hutch serve --http` processes with the same
// configuration behind one client whose 2026-07-28 requests alternate
// between them (issue 11, point 2).  Every request works on either
// replica: discovery, tools/list, search_tools, execute_code, a workspace
// written on one and read on the other (a shared --workspaces), and a
// result link made on one and read on the other (a shared
// --resources-dir).  The one exception, a question of the policy parked
// with its sandbox on one replica, is refused on the other with the reason
// and still answered on its own.  The client is raw HTTP (fetch): the
// requests are exactly the revision's.  No timing.  TAP.
import crypto from "node:crypto";
import { fs, makeFixture, path, postModern, requireEnv, spawnHttp, tap } from "./lib.mjs";

const hutch = requireEnv();
const t = tap({ timeout: 900 });
const fx = makeFixture();
const E = process.env.HUTCH_EXECUTOR || "local";
const token = "replica-" + crypto.randomBytes(12).toString("hex");
const shared = fs.mkdtempSync(path.join(fx.dir, "shared-"));
const policy = path.join(fx.dir, "ask.lua");
fs.writeFileSync(policy, `return {
  tools = { allow = { "everything.*" } },
  on_tool_call = function(call)
    if call.name == "echo" then return "ask", "Echo " .. tostring(call.args.message) .. "?" end
    return true
  end,
}
`);
const args = ["--policy", policy, "--resources-dir", path.join(shared, "resources"), "--workspaces",
  path.join(shared, "workspaces"), "--executor", E];
const a = await spawnHttp({ hutch, servers: fx.servers, token, args });
const b = await spawnHttp({ hutch, servers: fx.servers, token, args });

const post = (srv, method, params = {}) => postModern(srv.url, token, method, params);
const execute = (srv, code, extra = {}) =>
  post(srv, "tools/call", { name: "execute_code", arguments: { language: "python", code, timeout_ms: 30000 }, ...extra });

await t.step("discover, tools/list and search_tools, alternating", async () => {
  const d = await post(a, "server/discover");
  const l = await post(b, "tools/list");
  const s = await post(a, "tools/call", { name: "search_tools", arguments: { query: "echo" } });
  if (!d.result?.supportedVersions?.includes("2026-07-28")) throw new Error(JSON.stringify(d));
  if (!l.result?.tools?.some((x) => x.name === "execute_code")) throw new Error(JSON.stringify(l));
  if (!/everything\.echo/.test(JSON.stringify(s.result))) throw new Error(JSON.stringify(s));
});

await t.step("a result link made on one replica is read on the other", async () => {
  const x = await execute(b, 'open("/work/out/data.bin", "wb").write(bytes(range(256)) * 8)');
  const f = x.result?.structuredContent?.files?.find((y) => y.path === "data.bin");
  if (f?.delivery !== "link" || !f.uri) throw new Error(JSON.stringify(x.result?.structuredContent ?? x));
  if (x.result.structuredContent.executor !== E) throw new Error(`ran on ${x.result.structuredContent.executor}`);
  const r = await post(a, "resources/read", { uri: f.uri });
  const blob = r.result?.contents?.[0]?.blob;
  if (!blob || Buffer.from(blob, "base64").length !== 2048) throw new Error(JSON.stringify(r).slice(0, 400));
});

await t.step("a workspace written on one replica is read on the other", async () => {
  const w1 = await post(a, "tools/call", { name: "execute_code", arguments: { language: "python", workspace: "shared", code: 'open("/work/out/workspace/note.txt", "w").write("from A")' } });
  if (w1.result?.isError) throw new Error(JSON.stringify(w1.result));
  const r = await post(b, "tools/call", { name: "execute_code", arguments: { language: "python", workspace: "shared", code: 'open("/work/out/workspace/note.txt").read()' } });
  if (r.result?.structuredContent?.result !== "from A") throw new Error(JSON.stringify(r.result));
});

await t.step("a parked question: refused on the other replica with the reason, answered on its own", async () => {
  const q = await execute(a, 'print(tools.everything.echo(message="hi"))');
  const st = q.result?.requestState;
  if (q.result?.resultType !== "input_required" || !st) throw new Error(JSON.stringify(q));
  const yes = { approve: { action: "accept", content: { approve: true } } };
  const wrong = await execute(b, 'print(tools.everything.echo(message="hi"))', { requestState: st, inputResponses: yes });
  if (!wrong.error || !/another hutch process/.test(wrong.error.message)) throw new Error(JSON.stringify(wrong));
  const right = await execute(a, 'print(tools.everything.echo(message="hi"))', { requestState: st, inputResponses: yes });
  if (!/Echo: hi/.test(right.result?.structuredContent?.stdout ?? "")) throw new Error(JSON.stringify(right));
});

for (const [name, srv] of [["A", a], ["B", b]]) {
  const stopped = await srv.stop();
  t.ok(stopped && stopped.code === 0, `replica ${name} exits 0`, JSON.stringify(stopped));
}
t.done();
