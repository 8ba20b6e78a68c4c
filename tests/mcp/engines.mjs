// engines.mjs — one `hutch serve` on the docker executor with two Docker
// endpoints (HUTCH_DOCKER_ENDPOINTS): two daemons of tests/lib/dockerd2.sh,
// instances 3 and 4, each in namespaces of its own, over TCP with TLS.
// Run by tests/docker/engines.sh, which starts them.  Through the official
// SDK client:
//   - placement: two executions at once run one on each engine;
//   - one engine killed mid-run: its execution ends with a clear error
//     naming it, the other engine's execution finishes, and executions go
//     on, all on the engine that is left;
//   - the engine comes back: executions land on it again, by themselves;
//   - with pools: warm sandboxes on both engines.
// Where a sandbox runs is read from each daemon (docker ps by hutch.owner
// label), not taken from hutch's word.  Budgets are generous: nothing here
// depends on the machine's speed.  TAP.
import { execute, loadSdk, py, requireEnv, sleep, spawnSync, startStdio, tap, waitFor } from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 1800 });
const SRC = process.env.HUTCH_SRCDIR;
const A = process.env.HUTCH_TEST_ENGINE_A; // "3"
const B = process.env.HUTCH_TEST_ENGINE_B; // "4"

function d2(...args) {
  const r = spawnSync("bash", ["-c", `. "${SRC}/tests/lib/dockerd2.sh" && "$@"`, "d2", ...args], {
    encoding: "utf8",
    timeout: 600000,
  });
  return { rc: r.status, out: (r.stdout || "").trim(), err: (r.stderr || "").trim() };
}
// The containers of hutch process `pid` on instance n.
function containersOn(n, pid) {
  const r = d2("dockerd2_docker", n, "ps", "--filter", "label=hutch.owner", "--format", '{{.ID}} {{.Label "hutch.owner"}}');
  return r.out.split("\n").filter((l) => l.includes(`:${pid}:`)).map((l) => l.split(" ")[0]);
}
const SLEEP = (s) => py(`import time\nprint("started", flush=True)\ntime.sleep(${s})\n${s}`, { timeout_ms: 600000 });

// The endpoints, and nothing that could lead hutch to the main daemon.
if (!/engine-a=tcp:.* engine-b=tcp:/.test(process.env.HUTCH_DOCKER_ENDPOINTS || "") || process.env.DOCKER_HOST)
  throw new Error(`run by tests/docker/engines.sh: HUTCH_DOCKER_ENDPOINTS=${process.env.HUTCH_DOCKER_ENDPOINTS}`);
const ENV = { HUTCH_EXECUTOR: "", HUTCH_DOCKER_ENDPOINTS: process.env.HUTCH_DOCKER_ENDPOINTS };
const h = await startStdio({ sdk, hutch, args: ["--executor", "docker", "--pool", "0", "--timeout", "900000"], env: ENV });

await t.step("two executions at once run one on each engine (fewest in flight)", async () => {
  const runs = [execute(h.client, SLEEP(8), { executor: "docker" }), execute(h.client, SLEEP(8), { executor: "docker" })];
  let a = [], b = [];
  await waitFor(() => {
    a = containersOn(A, h.pid);
    b = containersOn(B, h.pid);
    return a.length + b.length >= 2;
  }, 240000, 200);
  const xs = await Promise.all(runs);
  for (const x of xs) if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s).slice(0, 500));
  if (a.length !== 1 || b.length !== 1) throw new Error(`engine ${A}: ${a.length}, engine ${B}: ${b.length} containers`);
});

// The engine that is killed is the one the first long run lands on
// (placement picks; the test does not guess): DOWN, its name DOWN_NAME.
let DOWN = null, UP = null, DOWN_NAME = null;
await t.step("an engine killed mid-run: its execution fails saying so, the other's finishes", async () => {
  // A long run; once its container is up, a short one (on the other engine:
  // fewest in flight); then the first one's engine dies (SIGKILL of its
  // daemon, its containerd and its containers: a crash).
  // The first step's containers gone first (docker ps lists them while
  // they are being removed): the one container seen next is the long run's.
  const none = () => containersOn(A, h.pid).length + containersOn(B, h.pid).length === 0;
  await waitFor(none, 240000, 200);
  if (!none()) throw new Error("the first step's containers are still there");
  const long = execute(h.client, SLEEP(600), { executor: "docker" });
  await waitFor(() => containersOn(A, h.pid).length + containersOn(B, h.pid).length === 1, 240000, 200);
  DOWN = containersOn(A, h.pid).length === 1 ? A : B;
  UP = DOWN === A ? B : A;
  DOWN_NAME = DOWN === A ? "engine-a" : "engine-b";
  // Its program running (not its files still on their way in): the
  // container's processes, as its daemon lists them, include Python.
  const [id] = containersOn(DOWN, h.pid);
  const running = () => /python/.test(d2("dockerd2_docker", DOWN, "top", id).out);
  await waitFor(running, 240000, 200);
  if (!running()) {
    const top = d2("dockerd2_docker", DOWN, "top", id);
    throw new Error(`the long run never started its program on engine ${DOWN}: ${id}: ${top.out} ${top.err}`);
  }
  const short = execute(h.client, SLEEP(20), { executor: "docker" });
  await waitFor(() => containersOn(UP, h.pid).length === 1, 240000, 200);
  if (containersOn(UP, h.pid).length !== 1) throw new Error(`the second run is not on engine ${UP}`);
  const k = d2("dockerd2_pause", DOWN, "KILL");
  if (k.rc !== 0) throw new Error(`could not kill engine ${DOWN}: ${k.err}`);
  // Its run is hutch's failure, not the program's: a tool error (or exit
  // 125) saying what happened, and where.
  const xl = await long;
  const said = xl.s.message || xl.text || "";
  if (!xl.r.isError || (xl.s.exit_code !== undefined && xl.s.exit_code !== 125))
    throw new Error(`engine ${DOWN}'s run: ${JSON.stringify(xl.r).slice(0, 500)}`);
  if (!/ended under the program|no longer answers/.test(said)) throw new Error(`not explained: ${said}`);
  if (!said.includes(DOWN_NAME)) throw new Error(`the message does not name the engine: ${said}`);
  const xs = await short;
  if (xs.s.exit_code !== 0 || xs.s.result !== 20) throw new Error(`engine ${UP}'s run: ${JSON.stringify(xs.s).slice(0, 500)}`);
}, 600);

await t.step("while it is down, executions go on, all on the engine that is left", async () => {
  for (let i = 0; i < 4; i++) {
    const x = await execute(h.client, py(`${i} * 2`), { executor: "docker" });
    if (x.s.exit_code !== 0 || x.s.result !== i * 2) throw new Error(`run ${i}: ${JSON.stringify(x.s).slice(0, 500)}`);
  }
  // Two at once: both on the engine that is up.
  const runs = [execute(h.client, SLEEP(5), { executor: "docker" }), execute(h.client, SLEEP(5), { executor: "docker" })];
  const both = await waitFor(() => containersOn(UP, h.pid).length === 2 && 2, 240000, 200);
  for (const x of await Promise.all(runs)) if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s).slice(0, 500));
  if (both !== 2) throw new Error(`never 2 containers at once on engine ${UP}`);
});

await t.step("the engine comes back: executions land on it again, by themselves", async () => {
  const s = d2("dockerd2_start", DOWN);
  if (s.rc !== 0) throw new Error(`could not start engine ${DOWN} again: ${s.err}`);
  let seen = false;
  const until = Date.now() + 240000;
  while (!seen && Date.now() < until) {
    const runs = [execute(h.client, SLEEP(3), { executor: "docker" }), execute(h.client, SLEEP(3), { executor: "docker" })];
    const watch = waitFor(() => containersOn(DOWN, h.pid).length > 0, 30000, 200).then((v) => { if (v) seen = true; });
    for (const x of await Promise.all(runs)) if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s).slice(0, 500));
    await watch;
    if (!seen) await sleep(500);
  }
  if (!seen) throw new Error(`no execution ran on engine ${DOWN} after it came back`);
}, 600);
await h.close();

await t.step("pools: warm sandboxes on both engines, and warm executions answer", async () => {
  const p = await startStdio({ sdk, hutch, args: ["--executor", "docker", "--pool", "python=2"], env: ENV });
  try {
    await waitFor(() => containersOn(A, p.pid).length >= 1 && containersOn(B, p.pid).length >= 1, 240000, 200);
    let warm = 0;
    for (let i = 0; i < 6; i++) {
      const x = await execute(p.client, py("6 * 7"), { executor: "docker" });
      if (x.s.exit_code !== 0 || x.s.result !== 42) throw new Error(JSON.stringify(x.s).slice(0, 500));
      if (x.s.warm) warm++;
      await sleep(300);
    }
    if (!warm) throw new Error("no execution came warm");
  } finally {
    await p.close();
  }
});

t.done();
