// discovery.mjs — issue 12, points 2 and 5, with the official SDK client
// over stdio on the executor HUTCH_EXECUTOR names (local by default; the
// docker and gvisor wrappers in tests/docker, tests/gvisor):
//   - search_tools: a default answer of at most 2 KB of text for a broad
//     query, the rest by name; detail "full" puts the schemas in the text;
//   - a tool the policy denies is absent from search_tools and from
//     tools.search inside a program (Python and JavaScript);
//   - an unknown tool called from a program gets "did you mean";
//   - (issue 20) function words match nothing; a server stuck starting
//     is named at once by search_tools and tools.search; dir(), help(),
//     Object.keys() and .signature in programs;
//   - execute_code's description names the policy's host folders;
//   - --direct-tools (here through serve --config, and the policy field):
//     the upstream tools as MCP tools only with the switch, a call works, a
//     denied call is refused and audited, the tool-call rate limit applies,
//     notifications/tools/list_changed arrives when a slow server comes up.
// Also prints (as TAP comments) the sizes issue 12 asks for: tools/list and
// a default search_tools answer next to the upstream tool definitions.
// No timing: every step is a behaviour.
import {
  assert, describe, execute, fs, js, loadSdk, makeFixture, NODE, onExit, path, py, requireEnv, SERVERS_DIR, startStdio,
  tap, waitFor,
} from "./lib.mjs";

const hutch = requireEnv();
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const E = process.env.HUTCH_EXECUTOR || "local";
// The gate file lives in a directory of its own, removed when the test ends.
const gateDir = fs.mkdtempSync(path.join("/tmp", "hutch-disc-"));
onExit(() => fs.rmSync(gateDir, { recursive: true, force: true }));
const gate = path.join(gateDir, "later-may-start");
const fx = makeFixture({
  extra: { later: { command: NODE, args: [path.join(SERVERS_DIR, "slowstart.mjs")], env: { SLOWSTART_FILE: gate } } },
});
const outDir = path.join(fx.dir, "out");
fs.mkdirSync(outDir);
const allow = '{ "everything.*", "fs.*", "memory.*", "recorder.*", "later.*" }';
const deny = '{ "fs.write_file", "everything.get-sum" }';
const policy = (extra = "") => {
  const f = path.join(fx.dir, `policy-${Math.random().toString(36).slice(2)}.lua`);
  fs.writeFileSync(f, `return {
  tools = { allow = ${allow}, deny = ${deny} },
  paths = { { host = ${JSON.stringify(fx.tree)}, sandbox = "/data", mode = "ro" },
            { host = ${JSON.stringify(outDir)}, sandbox = "/out", mode = "rw" } },
  ${extra}
}
`);
  return f;
};
const audit = path.join(fx.dir, "audit.jsonl");
const ex = (client, args) => execute(client, args, { executor: E });
const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
const bytes = (s) => Buffer.byteLength(s, "utf8");

// Wait for the reference servers, not for "later", which waits for its gate.
async function upstreamsUp(client) {
  let last;
  const ok = await waitFor(async () => {
    const r = await client.callTool({ name: "search_tools", arguments: { query: "", limit: 1 } });
    last = r.structuredContent?.servers ?? [];
    return !last.some((x) => x.server !== "later" && x.state === "starting");
  }, 120000, 200);
  if (!ok) throw new Error(`upstreams still starting: ${JSON.stringify(last)}`);
}

// --- without the switch ----------------------------------------------------------------
const h = await startStdio({
  sdk, hutch, servers: fx.servers, waitServers: false,
  args: ["--policy", policy(), "--audit", audit, "--pool", "0"],
});
await upstreamsUp(h.client);
const search = async (args) => {
  const r = await h.client.callTool({ name: "search_tools", arguments: args });
  assert(!r.isError, `search_tools failed: ${textOf(r)}`);
  return r;
};

await t.step("the default search_tools answer fits 2 KB of text for a broad query, the rest by name", async () => {
  for (const query of ["", "file", "read file", "memory entities"]) {
    const r = await search({ query });
    const text = textOf(r);
    assert(bytes(text) <= 2048, `"${query}": ${bytes(text)} bytes of text:\n${text}`);
    const s = r.structuredContent;
    assert(s.tools.length >= 1 && s.tools[0].python && s.tools[0].typescript, `"${query}": ${JSON.stringify(s.tools[0])}`);
    assert(text.includes(s.tools[0].python), `the first result's signature is in the text: ${text}`);
    if (query === "") {
      assert(s.more?.length > 0 && text.includes(`${s.more.length} more:`), `the rest by name: ${text}`);
      assert(s.tools.length + s.more.length === Math.min(10, s.matches), JSON.stringify(s));
    }
  }
});
await t.step('search_tools detail "signatures" gives every result; "full" puts the schemas in the text', async () => {
  const sig = await search({ query: "file", detail: "signatures", limit: 8 });
  assert(sig.structuredContent.tools.length === 8 && !sig.structuredContent.more, JSON.stringify(sig.structuredContent).slice(0, 400));
  const full = await search({ query: "echo", detail: "full", limit: 1 });
  const text = textOf(full);
  assert(/input schema: \{.*"message"/.test(text), `no input schema in the text: ${text}`);
  assert(text !== textOf(await search({ query: "echo", detail: "signatures", limit: 1 })), "full equals signatures");
});
await t.step("a tool the policy denies is not offered by search_tools", async () => {
  const r = await search({ query: "write file", detail: "names", limit: 100 });
  const names = r.structuredContent.tools.map((x) => x.name);
  assert(names.includes("fs.edit_file") && !names.includes("fs.write_file"), JSON.stringify(names));
  const all = await search({ query: "", detail: "names", limit: 100 });
  const every = all.structuredContent.tools.map((x) => x.name);
  assert(!every.includes("everything.get-sum") && every.includes("everything.echo"), JSON.stringify(every));
  assert(all.structuredContent.total === every.length, `total ${all.structuredContent.total} counts what is offered (${every.length})`);
  assert(!textOf(all).includes("fs.write_file"), textOf(all));
});
await t.step("tools.search in Python: ranked, policy-filtered, over the wire", async () => {
  const x = await ex(h.client, py(
    'r = tools.search("write file", 100)\nn = tools.search("", 100, "names")\n' +
    '[[t["name"] for t in r["tools"]], [t["name"] for t in n["tools"]], r["tools"][0].get("python"), n["total"]]'));
  assert(x.s.exit_code === 0, describe(x));
  const [hits, all, sig, total] = x.s.result;
  assert(hits.includes("fs.edit_file") && !hits.includes("fs.write_file"), JSON.stringify(hits));
  assert(!all.includes("everything.get-sum") && all.includes("everything.echo") && total === all.length, JSON.stringify(all));
  assert(typeof sig === "string" && sig.startsWith("def "), `signature ${sig}`);
  const bad = await ex(h.client, py('try:\n    tools.search("x", 0)\nexcept ToolError as e:\n    out = e.code\nout'));
  assert(bad.s.result === "invalid_args", describe(bad));
});
await t.step("tools.search in JavaScript, and the search is recorded with the calls", async () => {
  const x = await ex(h.client, js(
    'const r = await tools.search("list directory", 5);\nreturn r.tools.map((t) => t.name);'));
  assert(x.s.exit_code === 0 && x.s.result.includes("fs.list_directory") && x.s.result.length <= 5, describe(x));
  assert(JSON.stringify(x.s.tool_calls).includes("search_tools"), JSON.stringify(x.s.tool_calls));
  const d = await ex(h.client, js('const r = await tools.search("sum"); return r.tools.map((t) => t.name)'));
  assert(d.s.exit_code === 0 && !d.s.result.includes("everything.get-sum"), describe(d));
});
await t.step('search_tools: function words match nothing ("send email to bob")', async () => {
  const r = await search({ query: "send email to bob" });
  assert(r.structuredContent.tools.length === 0 && r.structuredContent.matches === 0, JSON.stringify(r.structuredContent));
  assert(textOf(r).includes('No tool matches "send email to bob"'), textOf(r));
  const x = await ex(h.client, py('tools.search("send email to bob")["matches"]'));
  assert(x.s.exit_code === 0 && x.s.result === 0, describe(x));
});
await t.step("a server stuck starting: searches answer at once and name it, in programs too", async () => {
  // "later" stays stuck until the --direct-tools part below.  Each search
  // used to wait 5 s for it (a minute for these twelve); now only the
  // searches of the first seconds after hutch started wait.
  const t0 = Date.now();
  for (let i = 0; i < 12; i++) {
    const r = await search({ query: "echo" });
    assert(r.structuredContent.servers?.some((x) => x.server === "later" && x.state === "starting"), JSON.stringify(r.structuredContent.servers));
  }
  const spent = Date.now() - t0;
  assert(spent < 30000, `12 searches took ${spent} ms while a server was stuck starting`);
  const x = await ex(h.client, py(
    'found = [tools.search("echo") for _ in range(8)]\n' +
    '[[s["server"] + ": " + s["state"] for s in r.get("servers", [])] for r in found]'));
  assert(x.s.exit_code === 0 && x.s.result.length === 8 && x.s.result.every((s) => s.includes("later: starting")), describe(x));
  const j = await ex(h.client, js('const r = await tools.search("echo"); return [r.tools.length, r.servers];'));
  assert(j.s.exit_code === 0 && j.s.result[0] >= 1 && j.s.result[1].some((s) => s.server === "later" && s.state === "starting"), describe(j));
});
await t.step("Python: dir(tools), dir(tools.fs), help() and signatures show what the policy offers", async () => {
  const x = await ex(h.client, py(
    'import contextlib, io\nshown = io.StringIO()\n' +
    'with contextlib.redirect_stdout(shown):\n    help(tools.memory.create_entities)\n    help(tools)\n' +
    '[dir(tools), dir(tools.fs), shown.getvalue(), tools.fs.write_file.__doc__, tools.everything.echo.signature]'));
  assert(x.s.exit_code === 0, describe(x));
  const [top, fsTools, shown, denied, sig] = x.s.result;
  for (const n of ["call", "search", "everything", "fs", "memory"]) assert(top.includes(n), `dir(tools) lacks ${n}: ${top}`);
  assert(!top.includes("later"), `dir(tools) lists a server still starting: ${top}`);
  assert(fsTools.includes("read_text_file") && !fsTools.includes("write_file"), `dir(tools.fs): ${fsTools}`);
  assert(shown.includes('def create_entities(*, entities: list[{"name": str, "entityType": str, "observations": list[str]}])'), shown);
  assert(/tools\.fs: read_file, read_text_file/.test(shown) && /not ready: later \(starting/.test(shown), shown);
  assert(denied.includes('unknown tool "fs.write_file"'), denied);
  assert(sig === "def echo(*, message: str) -> Any", sig);
  assert(!JSON.stringify(x.s.tool_calls).includes("describe"), `dir() and help() are no tool calls: ${JSON.stringify(x.s.tool_calls)}`);
});
await t.step("JavaScript: Object.keys(tools), Object.keys(tools.fs), .signature and String() of a tool", async () => {
  const x = await ex(h.client, js(
    'return [Object.keys(tools), Object.keys(tools.fs), tools.memory.create_entities.signature, ' +
    'String(tools.everything.echo), await tools.everything.echo({ message: "still callable" })];'));
  assert(x.s.exit_code === 0, describe(x));
  const [top, fsTools, sig, text, echoed] = x.s.result;
  assert(["everything", "fs", "memory"].every((n) => top.includes(n)) && !top.includes("later"), JSON.stringify(top));
  assert(fsTools.includes("read_text_file") && !fsTools.includes("write_file"), JSON.stringify(fsTools));
  assert(sig.startsWith("create_entities(args: { entities: { name: string; entityType: string; observations: string[] }[] })"), sig);
  assert(text.startsWith("tools.everything.echo\necho(args: { message: string }): Promise<any>\n"), text);
  assert(JSON.stringify(echoed).includes("still callable"), JSON.stringify(echoed));
});
await t.step('an unknown tool called from a program gets "did you mean"', async () => {
  const x = await ex(h.client, py(
    'try:\n    tools.fs.read_text_fil(path="a.txt")\nexcept ToolError as e:\n    out = [e.code, str(e)]\nout'));
  assert(x.s.result?.[0] === "unknown_tool" && x.s.result[1].includes('did you mean "fs.read_text_file"'), describe(x));
  const j = await ex(h.client, js(
    'try { await tools.call("files.list_directory", {path: "."}); } catch (e) { return [e.code, e.message]; }'));
  assert(j.s.result?.[0] === "unknown_tool" && j.s.result[1].includes('did you mean "fs.list_directory"'), describe(j));
  // A denied tool is never the suggestion.
  const d = await ex(h.client, py(
    'try:\n    tools.everything.get_sun(a=1, b=2)\nexcept ToolError as e:\n    out = str(e)\nout'));
  assert(typeof d.s.result === "string" && !d.s.result.includes("get-sum"), describe(d));
});
await t.step("execute_code's description names the host folders the policy lets it take", async () => {
  const { tools } = await h.client.listTools();
  const ec = tools.find((x) => x.name === "execute_code");
  assert(ec.description.includes(`${fx.tree} (→ /work/data)`), ec.description);
  assert(ec.description.includes(`\`output_dir\` may be in: ${outDir}`), ec.description);
  const x = await ex(h.client, py('open("data/a.txt").read()', { inputs: [fx.tree] }));
  assert(x.s.exit_code === 0 && x.s.result === "alpha\n", describe(x));
});
await t.step("without the switch: tools/list is search_tools and execute_code, listChanged false", async () => {
  const { tools } = await h.client.listTools();
  assert(JSON.stringify(tools.map((x) => x.name).sort()) === '["execute_code","search_tools"]', JSON.stringify(tools.map((x) => x.name)));
  assert(h.client.getServerCapabilities().tools.listChanged === false, JSON.stringify(h.client.getServerCapabilities()));
  let err;
  try {
    await h.client.callTool({ name: "everything__echo", arguments: { message: "x" } });
  } catch (e) {
    err = e;
  }
  assert(err && err.code === -32602, `everything__echo without the switch: ${err && err.message}`);
});
{
  const { tools } = await h.client.listTools();
  const list = bytes(JSON.stringify({ tools }));
  const brief = await search({ query: "" });
  const briefBytes = bytes(JSON.stringify({ content: brief.content, structuredContent: brief.structuredContent }));
  const full = await search({ query: "", detail: "full", limit: 100 });
  t.diag(`sizes: tools/list ${list} bytes; a default search_tools answer ${bytes(textOf(brief))} bytes of text ` +
    `(${briefBytes} with structuredContent); detail full of every offered tool ${bytes(textOf(full))} bytes of text`);
}
await h.close();

// --- with the switch: serve --config direct-tools = true ---------------------------------
const cfg = path.join(fx.dir, "serve.conf");
fs.writeFileSync(cfg, "direct-tools = true\npool = 0\n");
fs.writeFileSync(audit, "");
const d = await startStdio({
  sdk, hutch, servers: fx.servers, waitServers: false,
  args: ["--config", cfg, "--policy", policy(), "--audit", audit],
});
await upstreamsUp(d.client);
const ups = {};
await t.step("--direct-tools: listChanged true; the tools the policy offers as server__tool", async () => {
  assert(d.client.getServerCapabilities().tools.listChanged === true, JSON.stringify(d.client.getServerCapabilities()));
  const { tools } = await d.client.listTools();
  const names = tools.map((x) => x.name);
  for (const n of ["search_tools", "execute_code", "everything__echo", "fs__read_text_file", "memory__read_graph"])
    assert(names.includes(n), `${n} missing: ${names}`);
  assert(!names.includes("fs__write_file") && !names.includes("everything__get-sum"), `denied tools listed: ${names}`);
  assert(!names.some((n) => n.startsWith("later__")), `a server still starting is listed: ${names}`);
  assert(names.every((n) => /^[A-Za-z0-9_-]{1,64}$/.test(n)), JSON.stringify(names));
  const echo = tools.find((x) => x.name === "everything__echo");
  assert(echo.inputSchema?.properties?.message && /^\[everything\] /.test(echo.description), JSON.stringify(echo));
  // For the sizes below: the upstream definitions as the servers list them.
  for (const x of tools) if (x.name.includes("__")) ups[x.name] = x;
});
await t.step("--direct-tools: a call works and returns the upstream's own result", async () => {
  const r = await d.client.callTool({ name: "everything__echo", arguments: { message: "direct" } });
  assert(!r.isError && r.content?.[0]?.text === "Echo: direct", JSON.stringify(r));
  const f = await d.client.callTool({ name: "fs__read_text_file", arguments: { path: path.join(fx.tree, "a.txt") } });
  assert(!f.isError && textOf(f).includes("alpha"), JSON.stringify(f));
});
await t.step("--direct-tools: a denied call is refused and audited like a call from a sandbox", async () => {
  const r = await d.client.callTool({ name: "fs__write_file", arguments: { path: path.join(fx.tree, "x.txt"), content: "no" } });
  assert(r.isError === true && /denied/.test(textOf(r)) && /tools\.deny/.test(textOf(r)), JSON.stringify(r));
  assert(!fs.existsSync(path.join(fx.tree, "x.txt")), "the denied write happened");
  const bad = await d.client.callTool({ name: "everything__echo", arguments: { nope: 1 } });
  assert(bad.isError === true && /invalid_args/.test(textOf(bad)), JSON.stringify(bad));
  const lines = fs.readFileSync(audit, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const calls = lines.filter((l) => l.event === "tool_call");
  const denied = calls.find((l) => l.tool === "fs.write_file");
  assert(denied && denied.decision === "deny" && /^d/.test(denied.execution) && denied.principal === "local", JSON.stringify(calls));
  assert(calls.some((l) => l.tool === "everything.echo" && l.decision === "allow"), JSON.stringify(calls));
});
await t.step("--direct-tools: notifications/tools/list_changed when a slow server comes up", async () => {
  const before = d.seen.notifications.filter((n) => n.method === "notifications/tools/list_changed").length;
  fs.writeFileSync(gate, "");
  const came = await waitFor(() => d.seen.notifications.filter((n) => n.method === "notifications/tools/list_changed").length > before, 60000, 50);
  assert(came, "no notifications/tools/list_changed");
  const { tools } = await d.client.listTools();
  assert(tools.some((x) => x.name === "later__slow"), JSON.stringify(tools.map((x) => x.name)));
  const r = await d.client.callTool({ name: "later__slow", arguments: {} });
  assert(!r.isError, JSON.stringify(r));
});
{
  const { tools } = await d.client.listTools();
  const own = tools.filter((x) => !x.name.includes("__"));
  const upstream = Object.values(ups).filter((x) => !x.name.startsWith("later__") && !x.name.startsWith("recorder__"));
  t.diag(`sizes: hutch's own tools/list ${bytes(JSON.stringify({ tools: own }))} bytes; ` +
    `the upstream definitions of server-everything + server-filesystem + server-memory ` +
    `(as offered, denied tools left out) ${bytes(JSON.stringify({ tools: upstream }))} bytes; ` +
    `tools/list with --direct-tools ${bytes(JSON.stringify({ tools }))} bytes`);
}
await d.close();

// --- the policy's switch, and the tool-call rate limit ------------------------------------
const p = await startStdio({
  sdk, hutch, servers: fx.servers, waitServers: false,
  args: ["--policy", policy("direct_tools = true, rate = { tool_calls_per_minute = 2 },"), "--pool", "0"],
});
await upstreamsUp(p.client);
await t.step("the policy's direct_tools = true turns it on; the tool-call rate limit applies to direct calls", async () => {
  const { tools } = await p.client.listTools();
  assert(tools.some((x) => x.name === "everything__echo"), JSON.stringify(tools.map((x) => x.name)));
  const outs = [];
  for (let i = 0; i < 3; i++)
    outs.push(await p.client.callTool({ name: "everything__echo", arguments: { message: `n${i}` } }));
  assert(!outs[0].isError && !outs[1].isError, JSON.stringify(outs.slice(0, 2)));
  assert(outs[2].isError === true && /rate limit/.test(textOf(outs[2])), JSON.stringify(outs[2]));
  // …and the same count covers a program's calls.
  const x = await ex(p.client, py('try:\n    tools.everything.echo(message="x")\nexcept ToolError as e:\n    out = e.code\nout'));
  assert(x.s.result === "denied", describe(x));
});
await p.close();

t.done();
