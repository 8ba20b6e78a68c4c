// upstream_eras.mjs — hutch as a client of upstream servers of both MCP
// eras (issue 11, point 4), each the real thing:
//   - servers built on the official SDK v2 (@modelcontextprotocol/server
//     2.4.0, tests/mcp/servers/modern.mjs) that refuse 2025's initialize,
//     over stdio and over streamable HTTP: hutch finds them with
//     server/discover and calls their tools; each call carries the 2026
//     _meta (protocol version, client info, capabilities), over HTTP the
//     MCP-Protocol-Version, Mcp-Method and Mcp-Name headers and no session;
//   - the 2025-era reference server-everything over stdio and HTTP still
//     works (initialize after the probe's -32601 or HTTP 4xx);
//   - a 2025-era server that never answers what it does not know is
//     outwaited (HUTCH_UPSTREAM_PROBE_MS) and then initialized;
//   - a 2026 server's question for the user (input_required) reaches the
//     program as a clear error, since hutch declares no elicitation;
//   - hutch's log names the protocol each server speaks.
// No timing: every check is a behaviour.  TAP.
import { spawn, spawnSync } from "node:child_process";
import { fs, os, path, requireEnv, tap, NODE, SERVERS_DIR, hutchEnv, onExit, waitFor } from "./lib.mjs";

const hutch = requireEnv();
const t = tap({ timeout: 900 });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-eras-"));
onExit(() => fs.rmSync(tmp, { recursive: true, force: true }));

// The two HTTP servers, each printing its port.
async function startHttp(args, re) {
  const p = spawn(NODE, args, { stdio: ["ignore", "pipe", "inherit"] });
  onExit(() => p.kill("SIGKILL"));
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  const ok = await waitFor(() => re.test(out), 60000, 50);
  if (!ok) throw new Error(`${args.join(" ")} did not start: ${out}`);
  return Number(re.exec(out)[1]);
}
const modernPort = await startHttp([path.join(SERVERS_DIR, "modern.mjs"), "http"], /listening (\d+)/);
const legacyPort = await startHttp([path.join(SERVERS_DIR, "everything-http.mjs")], /port (\d+)/);

const servers = path.join(tmp, "servers.json");
fs.writeFileSync(servers, JSON.stringify({
  mcpServers: {
    modern: { command: NODE, args: [path.join(SERVERS_DIR, "modern.mjs")] },
    modernhttp: { type: "http", url: `http://127.0.0.1:${modernPort}/mcp` },
    everything: { command: NODE, args: [path.join(SERVERS_DIR, "..", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"] },
    everythinghttp: { type: "http", url: `http://127.0.0.1:${legacyPort}/mcp` },
    silent: { command: NODE, args: [path.join(SERVERS_DIR, "slowstart.mjs")], env: { SLOWSTART_MS: "0", SLOWSTART_IGNORE_UNKNOWN: "1" } },
    // Reads nothing for 12 s, past the silence that makes a stdio server
    // 2025-era (HUTCH_UPSTREAM_PROBE_MS, 10 s): it then refuses initialize,
    // and is asked server/discover again.
    slowmodern: { command: NODE, args: [path.join(SERVERS_DIR, "modern.mjs")], env: { MODERN_SLOW_START_MS: "12000" } },
  },
}));

const program = `
out = {}
for name in ("modern", "modernhttp"):
    s = getattr(tools, name)
    out[name] = {"whoami": s.whoami(), "add": s.add(a=2, b=40)}
    try:
        s.ask()
        out[name]["ask"] = "answered"
    except ToolError as e:
        out[name]["ask"] = str(e)
out["everything"] = tools.everything.echo(message="hello")
out["everythinghttp"] = tools.everythinghttp.echo(message="hello")
out["silent"] = tools.silent.slow()
out["slowmodern"] = tools.slowmodern.add(a=1, b=2)
out
`;
const r = spawnSync(hutch, ["run", "-v", "--servers", servers, "--json", "--lang", "python", "-e", program], {
  encoding: "utf8",
  env: hutchEnv(),
  timeout: 240000,
});
let res = {};
try {
  res = JSON.parse(r.stdout);
} catch {}
const out = res.result ?? {};
const why = `status ${r.status}; stdout: ${r.stdout.slice(0, 1500)}\nstderr: ${r.stderr.slice(-2500)}`;
t.ok(r.status === 0 && res.exit_code === 0, "one program calls tools of all six servers", why);

for (const name of ["modern", "modernhttp"]) {
  const w = out[name]?.whoami ?? {};
  const env = w.envelope ?? {};
  t.ok(env["io.modelcontextprotocol/protocolVersion"] === "2026-07-28" &&
    env["io.modelcontextprotocol/clientInfo"]?.name === "hutch" &&
    typeof env["io.modelcontextprotocol/clientCapabilities"] === "object",
    `${name}: the call carried the 2026-07-28 _meta (version, client info, capabilities)`, JSON.stringify(w));
  t.is(out[name]?.add, "42", `${name}: a 2026-only server's tool answers`);
  t.ok(/ask: .*(elicitation|capabilit)/i.test(out[name]?.ask ?? "") || /capabilit/.test(out[name]?.ask ?? ""),
    `${name}: a question for the user is a clear error in the program`, String(out[name]?.ask));
}
{
  const w = out.modernhttp?.whoami ?? {};
  t.ok(w.mcpMethod === "tools/call" && w.mcpName === "whoami" && w.sessionId === null,
    "modernhttp: Mcp-Method and Mcp-Name headers, no Mcp-Session-Id", JSON.stringify(w));
}
t.is(out.everything, "Echo: hello", "everything (2025, stdio): still initialized and called");
t.is(out.everythinghttp, "Echo: hello", "everything (2025, HTTP): still initialized and called");
t.is(out.silent, "finally", "a 2025 server that ignores server/discover is outwaited, then initialized");
t.is(out.slowmodern, "3", "a 2026-only server too slow for the first server/discover is asked again once it refuses initialize");
for (const [name, proto] of [["modern", "2026-07-28 \\(stateless\\)"], ["modernhttp", "2026-07-28 \\(stateless\\)"],
  ["everything", "2025-"], ["everythinghttp", "2025-"], ["silent", "2025-"], ["slowmodern", "2026-07-28 \\(stateless\\)"]]) {
  t.ok(new RegExp(`upstream ${name}\\b.*ready: .*protocol ${proto}`).test(r.stderr),
    `the log says ${name} speaks ${proto.replace(/\\\\/g, "")}`, r.stderr.split("\n").filter((l) => l.includes(`upstream ${name}`)).join("\n"));
}
t.done();
