// startup.mjs — hutch serve answers a client at once, whatever its upstream
// servers are doing, and stops at once too (issue 13: initialize was
// answered only after every upstream had started, 30 s with one that hangs,
// and closing stdin took as long again).
//   - initialize and search_tools answer while an upstream is still starting
//     (one that would take ten minutes), and search_tools names it, but not
//     the servers file's disabled and skipped entries (never started);
//   - a program's call of a tool whose server is still starting waits for
//     that server and gets its answer;
//   - once up, the server's tools are in the catalog;
//   - closing stdin ends hutch on its own (status 0) without waiting for the
//     starting server's start timeout: hutch never reports it as failed.
// No timing: every step is a behaviour.  TAP; the official SDK client.
import { execute, fs, loadSdk, os, path, py, requireEnv, startStdio, tap, NODE, SERVERS_DIR } from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const E = process.env.HUTCH_EXECUTOR || "local";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-startup-"));
const slow = path.join(SERVERS_DIR, "slowstart.mjs");
const servers = path.join(tmp, "servers.json");
const gate = path.join(tmp, "later-may-start");
fs.writeFileSync(servers, JSON.stringify({
  mcpServers: {
    // Answers initialize after ten minutes: still starting for the whole test.
    never: { command: NODE, args: [slow], env: { SLOWSTART_MS: "600000" } },
    // Answers once the test creates its gate file.
    later: { command: NODE, args: [slow], env: { SLOWSTART_FILE: gate } },
    // Never started: not "servers whose tools are not listed" to an agent.
    off: { command: NODE, args: [slow], disabled: true },
    legacy: { type: "sse", url: "http://127.0.0.1:1/sse" },
  },
}));

const search = async (h) => {
  const r = await h.client.callTool({ name: "search_tools", arguments: { query: "" } });
  return { text: r.content?.[0]?.text ?? "", s: r.structuredContent ?? {} };
};

const h = await startStdio({ sdk, hutch, servers, args: ["--pool", "0"], waitServers: false });
await t.step("initialize is answered while an upstream is still starting", async () => {
  const { text, s } = await search(h);
  for (const name of ["never", "later"]) {
    const st = (s.servers || []).find((x) => x.server === name);
    if (!st || st.state !== "starting" || !text.includes(`${name}: starting`)) {
      throw new Error(`search_tools does not say "${name}" is starting: ${JSON.stringify(s)} ${text}`);
    }
  }
  for (const name of ["off", "legacy"]) {
    if ((s.servers || []).some((x) => x.server === name) || text.includes(`${name}:`)) {
      throw new Error(`search_tools lists "${name}", which was never started: ${JSON.stringify(s)} ${text}`);
    }
  }
});
await t.step("a call to a tool of a server still starting waits for it", async () => {
  // The program runs while "later" is still starting (its gate is shut);
  // its call is made, then the gate opens.
  const run = execute(h.client, py('print("calling", flush=True)\ntools.later.slow()'), { executor: E });
  const { s } = await search(h);
  if (!(s.servers || []).some((x) => x.server === "later" && x.state === "starting")) {
    throw new Error(`"later" came up before its gate opened: ${JSON.stringify(s.servers)}`);
  }
  fs.writeFileSync(gate, "");
  const x = await run;
  if (x.s.exit_code !== 0 || x.s.result !== "finally") throw new Error(JSON.stringify(x.s));
});
await t.step("once up, its tools are in the catalog", async () => {
  const { s } = await search(h);
  const names = (s.tools || []).map((x) => x.name);
  if (!names.includes("later.slow")) throw new Error(JSON.stringify(s));
  if ((s.servers || []).some((x) => x.server === "later")) throw new Error(`later still listed as not ready: ${JSON.stringify(s.servers)}`);
});
await t.step("closing stdin ends hutch on its own, without waiting out a starting server", async () => {
  const how = await h.close();
  if (!how || how.code !== 0 || how.sig) throw new Error(`hutch did not exit on its own: ${JSON.stringify(how)}`);
  // Had hutch waited for the start timeout, it would have said "never" failed.
  if (/upstream never: .*(within|timed out|no answer)/.test(h.logs())) {
    throw new Error(`hutch waited for the start timeout:\n${h.logs().slice(-2000)}`);
  }
});
fs.rmSync(tmp, { recursive: true, force: true });
t.done();
