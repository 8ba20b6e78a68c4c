// eras.mjs — the two MCP eras side by side over HTTP, in one run (issue
// 11's benchmark; `make bench-eras`):
//   1. execute_code print(1): p50 and p90 per era, the calls of the two
//      clients interleaved (the official SDK 1.32.2 client in the 2025
//      session protocol, the SDK v2 client pinned to 2026-07-28);
//   2. the cost of an approval round trip: a program whose one tool call
//      the policy asks about (the client's user approves at once) against
//      the same program whose call is not asked about, per era: 2025 asks
//      with elicitation/create during the call, 2026 answers input_required
//      and the client's retry takes the parked execution over.
// Ratios are from the same run (this machine's speed drifts from day to
// day); N (default 30) executions per figure.  Local executor unless
// EXECUTOR says otherwise.
import crypto from "node:crypto";
import {
  connectHttp, execute, fs, loadSdk, makeFixture, path, percentile, py, spawnHttp,
} from "../mcp/lib.mjs";

const hutch = process.env.HUTCH;
const N = Math.max(5, Number(process.env.N || 30));
const E = process.env.EXECUTOR || process.env.HUTCH_EXECUTOR || "local";
process.env.HUTCH_EXECUTOR = E;
const fx = makeFixture();
const token = "bench-" + crypto.randomBytes(12).toString("hex");
const policy = path.join(fx.dir, "eras.lua");
fs.writeFileSync(policy, `return {
  tools = { allow = { "everything.*" } },
  on_tool_call = function(call)
    if call.name == "echo" and call.args.message == "ask" then return "ask", "Allow?" end
    return true
  end,
}
`);
const srv = await spawnHttp({ hutch, servers: fx.servers, token, args: ["--policy", policy, "--executor", E] });
const yes = async () => ({ action: "accept", content: { approve: true } });
const sdk1 = await loadSdk("1");
const sdk2 = await loadSdk("2-pin");
const c1 = await connectHttp({ sdk: sdk1, url: srv.url, token, capabilities: { elicitation: {} },
  onClient: (c) => c.setRequestHandler(sdk1.ElicitRequestSchema, yes) });
const c2 = await connectHttp({ sdk: sdk2, url: srv.url, token, capabilities: { elicitation: {} },
  onClient: (c) => c.setRequestHandler("elicitation/create", yes) });
const eras = [["2025", c1.client], ["2026", c2.client]];

async function timed(client, args) {
  const x = await execute(client, args, { executor: E });
  if (x.s.exit_code !== 0) throw new Error(x.text);
  return x.ms;
}
async function series(progs) { // interleaved: every round runs each once
  const out = progs.map(() => []);
  for (let i = 0; i < 3; i++) for (const [c, a] of progs) await timed(c, a); // warm-up
  for (let i = 0; i < N; i++)
    for (let k = 0; k < progs.length; k++) out[k].push(await timed(progs[k][0], progs[k][1]));
  return out.map((v) => v.sort((a, b) => a - b));
}
const f = (v) => v.toFixed(1).padStart(7);

console.log(`bench-eras: MCP 2025 vs 2026-07-28 over HTTP, executor ${E}, ${N} executions per figure (ms)`);
const plain = await series(eras.map(([, c]) => [c, py("print(1)")]));
console.log("1. execute_code print(1)               p50      p90");
eras.forEach(([era], k) => console.log(`   ${era} era${" ".repeat(28)}${f(percentile(plain[k], 50))}  ${f(percentile(plain[k], 90))}`));
console.log(`   2026 / 2025, p50: ${(percentile(plain[1], 50) / percentile(plain[0], 50)).toFixed(2)}x`);

console.log("2. one tool call, asked about vs not    p50 plain  p50 asked  asked / plain");
for (const [era, c] of eras) {
  const [p, a] = await series([[c, py('tools.everything.echo(message="plain")')], [c, py('tools.everything.echo(message="ask")')]]);
  const pp = percentile(p, 50), pa = percentile(a, 50);
  console.log(`   ${era} era${" ".repeat(28)}${f(pp)}    ${f(pa)}     ${(pa / pp).toFixed(2)}x  (+${(pa - pp).toFixed(1)} ms)`);
}
await c1.client.close();
await c2.client.close();
await srv.stop();
process.exit(0);
