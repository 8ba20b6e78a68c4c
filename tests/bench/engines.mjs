// engines.mjs — the docker executor's transports and engines, in one run
// (issue 15); run it through tests/bench/engines.sh (see there).  Prints:
//  1. execute_code `print(1)` over stdio (SDK client), cold (--pool 0) and
//     pooled (a warm sandbox taken after a pause that lets the pools refill
//     and the daemon go quiet), p50 and p90,
//     interleaved round by round, for:
//       - the socket directory of before (BASELINE_PLUGIN_DIR: the docker
//         plugin and hutch-init of an older build), the local daemon;
//       - the attach stream, the same local daemon over its unix socket;
//       - the attach stream, a second daemon over TCP with TLS;
//     and each one's ratio to the first;
//  2. executions per second (--pool 0, CONC at once) with one engine and
//     with two (HUTCH_DOCKER_ENDPOINTS), interleaved, and their ratio.
import { execute, loadSdk, percentile, py, startStdio } from "../mcp/lib.mjs";

const ROUNDS = Number(process.env.ROUNDS || 15);
const EXECS = Number(process.env.EXECS || 24);
const CONC = Number(process.env.CONC || 6);
const hutch = process.env.HUTCH;
const sdk = await loadSdk();
const med = (v) => percentile([...v].sort((a, b) => a - b), 50);
const p90 = (v) => percentile([...v].sort((a, b) => a - b), 90);
const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const LOCAL = process.env.LOCAL_DOCKER_HOST;
const tls = (host, certs) => ({ DOCKER_HOST: host, DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certs });
const plain = (host) => ({ DOCKER_HOST: host, DOCKER_TLS_VERIFY: "", DOCKER_CERT_PATH: "", HUTCH_DOCKER_ENDPOINTS: "" });
const variants = [
  process.env.BASELINE_PLUGIN_DIR && {
    name: "socket directory (before), local unix socket",
    env: { ...plain(LOCAL), HUTCH_PLUGIN_DIR: process.env.BASELINE_PLUGIN_DIR },
  },
  { name: "attach stream, local unix socket", env: plain(LOCAL) },
  { name: "attach stream, 2nd daemon TCP+TLS", env: { ...plain(""), ...tls(process.env.D2_HOST, process.env.D2_CERTS) } },
].filter(Boolean);

async function serve(env, pool) {
  return startStdio({ sdk, hutch, args: ["--executor", "docker", "--pool", pool], env: { HUTCH_EXECUTOR: "", ...env } });
}
async function once(h) {
  const x = await execute(h.client, py("print(1)"), { executor: "docker" });
  if (x.s.exit_code !== 0) throw new Error(JSON.stringify(x.s).slice(0, 400));
  return x;
}

// 1. cold and pooled
for (const v of variants) {
  v.cold = [];
  v.warm = [];
  v.hc = await serve(v.env, "0");
  v.hw = await serve(v.env, "python=1");
  await once(v.hc); // the first of each is not counted
}
for (let i = 0; i < ROUNDS; i++) {
  for (const v of variants) v.cold.push((await once(v.hc)).ms);
  // One warm sandbox of each, every one after a pause: the pool it is
  // taken from has refilled, and the daemon is not still busy with the
  // previous variant's teardown and refill (two of the variants share the
  // local daemon, and the attach stream passes through it: right after
  // another hutch's refill its p50 was 100 ms instead of 5).
  for (const v of variants) {
    await sleep(2500);
    const x = await once(v.hw);
    if (x.s.warm) v.warm.push(x.ms);
  }
}
for (const v of variants) {
  await v.hc.close();
  await v.hw.close();
}
const b = variants[0];
console.log(`execute_code print(1), docker executor, ${ROUNDS} interleaved rounds (ms, p50 / p90; ratio of p50 to the first line)`);
console.log(`${"transport".padEnd(48)} ${"cold".padEnd(22)} ${"pooled".padEnd(22)}`);
for (const v of variants)
  console.log(
    `${v.name.padEnd(48)} ${`${f(med(v.cold))} / ${f(p90(v.cold))} (${f(med(v.cold) / med(b.cold), 2)}×)`.padEnd(22)} ` +
      `${`${f(med(v.warm))} / ${f(p90(v.warm))} (${f(med(v.warm) / med(b.warm), 2)}×)`} [${v.warm.length} warm]`,
  );

// 2. executions per second, one engine vs two
const one = { name: "one engine (2nd daemon)", env: { ...plain(""), HUTCH_DOCKER_ENDPOINTS: process.env.ENDPOINTS_ONE } };
const two = { name: "two engines (2nd and 3rd daemons)", env: { ...plain(""), HUTCH_DOCKER_ENDPOINTS: process.env.ENDPOINTS_TWO } };
for (const v of [one, two]) {
  v.rates = [];
  v.h = await serve(v.env, "0");
  await once(v.h);
}
for (let rep = 0; rep < 2; rep++) {
  for (const v of [one, two]) {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONC }, async () => {
        while (next++ < EXECS) await once(v.h);
      }),
    );
    v.rates.push(EXECS / ((performance.now() - t0) / 1000));
  }
}
for (const v of [one, two]) await v.h.close();
console.log(`\nexecutions per second, ${EXECS} executions of print(1), ${CONC} at once, --pool 0 (2 interleaved repetitions)`);
for (const v of [one, two]) console.log(`${v.name.padEnd(48)} ${v.rates.map((r) => f(r, 2)).join(", ")}/s`);
console.log(`${"two / one".padEnd(48)} ${f(Math.max(...two.rates) / Math.max(...one.rates), 2)}×`);
process.exit(0);
