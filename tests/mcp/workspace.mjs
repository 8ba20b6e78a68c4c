// workspace.mjs — execute_code's `workspace` through the official SDK
// client: over stdio, a file written in one execution is there in the
// next, its files are not result files, a failed execution keeps the
// previous content, a bad name and a busy workspace are tool errors, a
// name with an escaped NUL ("a\u0000b") is refused, not taken as "a"; over
// HTTP with two principals (two bearer tokens), neither sees the other's
// workspace of the same name, and workspaces.max_bytes counts what is
// stored (3000 empty files are 1.5 MB of tar headers).  On
// $HUTCH_EXECUTOR (tests/docker/ and tests/gvisor/workspace_mcp.sh).  TAP.
import {
  connectHttp, execute, fs, loadSdk, os, path, py, requireEnv, spawnHttp, spawnSync, startStdio, tap, waitFor,
} from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-ws-"));
const store = path.join(dir, "store");
const hex = (s) => Buffer.from(s).toString("hex");
const WS = "/work/out/workspace";

// Who holds a workspace's lock file open (for a failure's message): every
// process with a descriptor on it, and what it is.
function holders(name) {
  const out = [];
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    let fds = [];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {}
    for (const fd of fds) {
      try {
        if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`).endsWith(`/${name}.lock`)) {
          const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").slice(0, 120);
          out.push(`pid ${pid} fd ${fd}: ${cmd}`);
        }
      } catch {}
    }
  }
  return out.join("; ") || "none";
}

// Whether someone holds the record lock of `file`, read from /proc/locks without
// taking the lock (a probe that took it, even briefly, could make the
// execution it watches find its workspace busy).
function lockHeld(file) {
  let st;
  try {
    st = fs.statSync(file);
  } catch {
    return false;
  }
  const major = Number((BigInt(st.dev) >> 8n) & 0xfffn);
  const minor = Number((BigInt(st.dev) & 0xffn) | ((BigInt(st.dev) >> 12n) & 0xfff00n));
  const id = `${major.toString(16).padStart(2, "0")}:${minor.toString(16).padStart(2, "0")}:${st.ino}`;
  return fs.readFileSync("/proc/locks", "utf8").split("\n").some((l) => /\bPOSIX\b/.test(l) && l.includes(` ${id} `));
}

let h;
try {
  h = await startStdio({ sdk, hutch, args: ["--workspaces", store, "--timeout", "120000"] });
} catch (e) {
  t.ok(false, "hutch serve --workspaces starts over stdio", e.message);
  t.done();
}

await t.step("a file written in one execution is there in the next", async () => {
  const a = await execute(h.client, py(`
import os
before = os.listdir("${WS}")
open("${WS}/data.txt", "w").write("kept")
open("/work/out/result.txt", "w").write("r")
before`, { workspace: "notes" }));
  if (a.r.isError || JSON.stringify(a.s.result) !== "[]") throw new Error(`run 1: ${a.text}`);
  const paths = a.s.files.map((f) => f.path);
  if (JSON.stringify(paths) !== '["result.txt"]') throw new Error(`result files: ${JSON.stringify(paths)}`);
  if (JSON.stringify(a.r.content).includes("kept")) throw new Error("the workspace's content reached the result");
  const b = await execute(h.client, py(`open("${WS}/data.txt").read()`, { workspace: "notes" }));
  if (b.s.result !== "kept") throw new Error(`run 2: ${b.text}`);
  if (!fs.existsSync(path.join(store, hex("local"), "notes.tar"))) throw new Error("not stored under principal local");
}, 180);

await t.step("a failed execution keeps the previous content and says so", async () => {
  const a = await execute(h.client, py(`
open("${WS}/data.txt", "w").write("broken")
raise RuntimeError("boom")`, { workspace: "notes" }));
  if (!a.r.isError || !/workspace "notes" not saved/.test(a.text)) throw new Error(`${a.text} (lock holders: ${holders("notes")})`);
  const b = await execute(h.client, py(`open("${WS}/data.txt").read()`, { workspace: "notes" }));
  if (b.s.result !== "kept") throw new Error(`after the failure: ${b.text}`);
}, 180);

await t.step("a bad workspace name is a tool error naming the rule", async () => {
  const a = await execute(h.client, py("1", { workspace: "../x" }));
  if (!a.r.isError || !/"workspace".*must not start with/.test(a.text)) throw new Error(a.text);
});

await t.step("a name with a NUL (\"a\\u0000b\") is refused, not taken as \"a\"", async () => {
  let refused;
  try {
    const a = await execute(h.client, py(`open("${WS}/x", "w").write("x")`, { workspace: "a\u0000b" }));
    refused = a.r.isError ? a.text : null;
    if (!refused) throw new Error(`it ran: ${a.text}`);
  } catch (e) {
    refused = e.message;
  }
  if (!/params\.arguments\.workspace holds a NUL character/.test(refused)) throw new Error(refused);
  if (fs.existsSync(path.join(store, hex("local"), "a.tar"))) throw new Error("workspace \"a\" was saved");
  if (fs.existsSync(path.join(store, hex("local"), "a.lock"))) throw new Error("workspace \"a\" was opened");
  // The session goes on.
  const b = await execute(h.client, py("1 + 1"));
  if (b.s.result !== 2) throw new Error(`then: ${b.text}`);
});

await t.step("a second execution of a busy workspace is refused", async () => {
  const lock = path.join(store, hex("local"), "notes.lock");
  const slow = execute(h.client, py(`import time\ntime.sleep(40)\n"slow"`, { workspace: "notes", timeout_ms: 120000 }),
    { timeout: 180000 });
  const held = await waitFor(() => lockHeld(lock), 120000, 100);
  if (!held) throw new Error(`the first execution never held the workspace (lock holders: ${holders("notes")})`);
  const b = await execute(h.client, py("1", { workspace: "notes" }));
  if (!b.r.isError || !/in use by another execution/.test(b.text)) {
    const a = await slow.catch((e) => ({ text: String(e) }));
    throw new Error(`${b.text}; the first one: ${a.text} (lock holders: ${holders("notes")})`);
  }
  const a = await slow;
  if (a.s.result !== "slow") throw new Error(`the first one: ${a.text} (lock holders: ${holders("notes")})`);
}, 240);

const closed = await h.close();
t.ok(closed && closed.code === 0, "hutch serve (stdio) exits 0", JSON.stringify(closed));

// --- two principals over HTTP ---------------------------------------------------------
const alice = "alice-token-" + Math.random().toString(36).slice(2) + "xxxxxxxx";
const bob = "bob-token-" + Math.random().toString(36).slice(2) + "xxxxxxxxxx";
const policy = path.join(dir, "policy.lua");
fs.writeFileSync(policy, `return {
  principals = { { name = "alice", token = "${alice}" }, { name = "bob", token = "${bob}" } },
  workspaces = { max_bytes = 262144 },
}
`);
let srv;
try {
  srv = await spawnHttp({ hutch, args: ["--policy", policy, "--workspaces", store, "--pool", "0"] });
} catch (e) {
  t.ok(false, "hutch serve --http with two principals starts", e.message);
  t.done();
}
await t.step("two principals cannot see each other's workspace of the same name", async () => {
  const a = await connectHttp({ sdk, url: srv.url, token: alice });
  const b = await connectHttp({ sdk, url: srv.url, token: bob });
  try {
    const w1 = await execute(a.client, py(`open("${WS}/secret.txt", "w").write("alice's")`, { workspace: "shared" }));
    if (w1.r.isError) throw new Error(`alice: ${w1.text}`);
    const r1 = await execute(b.client, py(`import os\nsorted(os.listdir("${WS}"))`, { workspace: "shared" }));
    if (JSON.stringify(r1.s.result) !== "[]") throw new Error(`bob sees: ${r1.text}`);
    const w2 = await execute(b.client, py(`open("${WS}/secret.txt", "w").write("bob's")`, { workspace: "shared" }));
    if (w2.r.isError) throw new Error(`bob: ${w2.text}`);
    const r2 = await execute(a.client, py(`open("${WS}/secret.txt").read()`, { workspace: "shared" }));
    if (r2.s.result !== "alice's") throw new Error(`alice reads: ${r2.text}`);
    for (const who of ["alice", "bob"])
      if (!fs.existsSync(path.join(store, hex(who), "shared.tar"))) throw new Error(`no store for ${who}`);
    const list = spawnSync(hutch, ["workspace", "list", "--all", "--workspaces", store], { encoding: "utf8" });
    if (!/^alice\tshared\t/m.test(list.stdout) || !/^bob\tshared\t/m.test(list.stdout))
      throw new Error(`hutch workspace list --all: ${list.stdout}${list.stderr}`);
  } finally {
    await a.client.close();
    await b.client.close();
  }
}, 240);
await t.step("workspaces.max_bytes counts the tar: 3000 empty files do not fit 256 KiB", async () => {
  const a = await connectHttp({ sdk, url: srv.url, token: alice });
  try {
    const w = await execute(a.client, py(`
import os
os.makedirs("${WS}/many")
for i in range(3000):
    open(f"${WS}/many/f{i:04d}", "w").close()
"written"`, { workspace: "empty-files" }));
    if (!w.r.isError || !/workspace "empty-files" not saved/.test(w.text) ||
        !/0 bytes of data in 3001 files and folders/.test(w.text) || !/workspaces\.max_bytes \(262144\)/.test(w.text))
      throw new Error(w.text);
    if (fs.existsSync(path.join(store, hex("alice"), "empty-files.tar"))) throw new Error("it was stored");
    const ok = await execute(a.client, py(`
for i in range(100):
    open(f"${WS}/f{i:03d}", "w").close()
"written"`, { workspace: "few-files" }));
    if (ok.r.isError) throw new Error(`100 empty files: ${ok.text}`);
    const size = fs.statSync(path.join(store, hex("alice"), "few-files.tar")).size;
    if (size > 262144) throw new Error(`stored ${size} bytes`);
  } finally {
    await a.client.close();
  }
}, 240);
const stopped = await srv.stop();
t.ok(stopped && stopped.code === 0, "hutch serve --http exits 0 on SIGTERM", JSON.stringify(stopped));

fs.rmSync(dir, { recursive: true, force: true });
t.done();
