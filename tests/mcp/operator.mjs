// operator.mjs — what the operator asks of `hutch serve` is what runs, over
// stdio and HTTP, on the executor under test ($HUTCH_EXECUTOR, default
// local): `--executor E` and `HUTCH_EXECUTOR=E` both run the code on E (the
// result names it and the sandbox looks like it), `--memory 100` kills a
// 300 MB allocation (137), an operator's executor that the policy file
// contradicts stops hutch at start-up naming both, and a policy hook that
// picks a weaker executor is refused.  (Two bugs of main: the first ran on
// local, the second ignored the flag.)  --output-bytes, the config file's
// key, the policy's limit and its hook against a request's output_bytes.
// TAP; the official SDK client.
import {
  execute, fs, loadSdk, os, path, py, requireEnv, spawnSync, startHttp, startStdio, tap,
} from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 600 });
const E = process.env.HUTCH_EXECUTOR || "local";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-operator-"));

// What a program sees of its sandbox (tests/lib/executor.sh has the same).
const PROBE = `import os
v = open("/proc/version").read()
"docker" if os.path.exists("/.dockerenv") else "gvisor" if "#1 SMP Sun Jan 10 15:06:54 PST 2016" in v else "local"`;
const BOMB = 'x = bytearray(300 << 20)\nprint("still here")';

async function onEach(what, start) {
  for (const kind of ["stdio", "http"]) {
    await t.step(`${what} (${kind})`, async () => {
      const h = await start(kind);
      try {
        const x = await execute(h.client, py(PROBE), { executor: E });
        if (x.s.exit_code !== 0 || x.s.result !== E) {
          throw new Error(`probe: ${JSON.stringify(x.s)}`);
        }
        if (h.memory) {
          const y = await execute(h.client, py(BOMB), { executor: E });
          if (y.s.exit_code !== 137 || /still here/.test(y.s.stdout)) {
            throw new Error(`--memory 100 did not hold: ${JSON.stringify(y.s).slice(0, 600)} ${y.text.slice(0, 600)}\n${h.logs ? h.logs().slice(-1500) : ""}`);
          }
        }
      } finally {
        await h.close();
      }
    }, 300);
  }
}

const starter = (args, env, memory) => async (kind) => {
  const opts = { sdk, hutch, args, env, token: `operator-test-token-${process.pid}` };
  const h = kind === "stdio" ? await startStdio(opts) : await startHttp(opts);
  h.memory = memory;
  return h;
};

// The flag, with no environment variable to help it.
await onEach(`--executor ${E} --memory 100 runs on ${E} and kills a 300 MB allocation`,
  starter(["--executor", E, "--memory", "100"], { HUTCH_EXECUTOR: "" }, true));
// The environment variable alone.
await onEach(`HUTCH_EXECUTOR=${E} runs on ${E}`, starter([], { HUTCH_EXECUTOR: E }, false));
// --memory through a warm pool: the pooled sandbox has the operator's limit.
await onEach("--memory 100 holds for a pooled sandbox too",
  starter(["--executor", E, "--memory", "100", "--pool", "python=1"], { HUTCH_EXECUTOR: "" }, true));

// An operator's executor and a policy file's that differ: an error at
// start-up that names both.
{
  const other = E === "local" ? "docker" : "local";
  const pol = path.join(tmp, "other.lua");
  fs.writeFileSync(pol, `return { executor = "${other}" }\n`);
  const r = spawnSync(hutch, ["serve", "--policy", pol, "--executor", E], {
    input: "", encoding: "utf8", timeout: 60000, env: { ...process.env, HUTCH_EXECUTOR: "" },
  });
  t.ok(r.status !== 0 && r.stderr.includes(`"${E}"`) && r.stderr.includes(`"${other}"`) &&
    r.stderr.includes(pol),
  `--executor ${E} against a policy's executor = "${other}": refused at start-up, naming both`,
  `status ${r.status}: ${r.stderr}`);
  const r2 = spawnSync(hutch, ["run", "--policy", pol, "--executor", E, "--lang", "python", "-e", "1"], {
    encoding: "utf8", timeout: 60000, env: { ...process.env, HUTCH_EXECUTOR: "" },
  });
  t.ok(r2.status === 125 && r2.stderr.includes(`"${other}"`),
    "hutch run refuses the same conflict", `status ${r2.status}: ${r2.stderr}`);
}

// A hook may pick an executor for one execution, never a weaker one.
if (E !== "local") {
  await t.step(`on_execute picking "local" under --executor ${E} is refused, not run`, async () => {
    const pol = path.join(tmp, "weaker.lua");
    fs.writeFileSync(pol, 'return { on_execute = function(req) return { executor = "local" } end }\n');
    const h = await startStdio({ sdk, hutch, args: ["--executor", E, "--policy", pol], env: { HUTCH_EXECUTOR: "" } });
    try {
      const x = await execute(h.client, py(PROBE), { executor: E });
      if (!x.r.isError || x.s.exit_code !== undefined || !/does not isolate as well/.test(x.text)) {
        throw new Error(`not refused: ${x.text}`);
      }
    } finally {
      await h.close();
    }
  }, 300);
}

// What is kept of output (issue 12): every source is a ceiling and the
// lowest wins; the model-sized default when none sets one.  Over stdio.
{
  const CHATTY = 'print("x" * 100000)';
  const kept = (x) => (x.s.stdout_omitted_bytes === undefined ? NaN : 100001 - x.s.stdout_omitted_bytes);
  const cases = [
    ["no source: execute_code's default, 8192", [], null, [[{}, 8192], [{ output_bytes: 20000 }, 20000], [{ output_bytes: 100 }, 100]]],
    ["--output-bytes 1000: a ceiling a request cannot pass", ["--output-bytes", "1000"], null,
      [[{}, 1000], [{ output_bytes: 20000 }, 1000], [{ output_bytes: 100 }, 100]]],
    ["output-bytes = 3000 in --config", ["--config", "CONF"], null, [[{}, 3000], [{ output_bytes: 500 }, 500]]],
    ["a policy's limits.output_bytes = 600 under --output-bytes 1000", ["--output-bytes", "1000"], "limits = { output_bytes = 600 }",
      [[{}, 600], [{ output_bytes: 20000 }, 600]]],
    ["a hook's output_bytes = 300", [], "on_execute = function(req) return { limits = { output_bytes = 300 } } end",
      [[{}, 300], [{ output_bytes: 20000 }, 300]]],
    ["a policy file that sets no output_bytes keeps the default", [], "limits = { timeout_ms = 20000 }", [[{}, 8192]]],
  ];
  const conf = path.join(tmp, "serve.conf");
  fs.writeFileSync(conf, "output-bytes = 3000\n");
  for (const [what, args0, policy, checks] of cases) {
    await t.step(`output kept: ${what}`, async () => {
      const args = args0.map((a) => (a === "CONF" ? conf : a));
      if (policy) {
        const pol = path.join(tmp, "output.lua");
        fs.writeFileSync(pol, `return { ${policy} }\n`);
        args.push("--policy", pol);
      }
      const h = await startStdio({ sdk, hutch, args: ["--executor", E, "--pool", "0", ...args], env: { HUTCH_EXECUTOR: "" } });
      try {
        for (const [extra, want] of checks) {
          const x = await execute(h.client, py(CHATTY, extra), { executor: E });
          if (x.s.exit_code !== 0 || kept(x) !== want) {
            throw new Error(`${JSON.stringify(extra)}: kept ${kept(x)}, want ${want}: ${x.text.slice(0, 300)}`);
          }
        }
      } finally {
        await h.close();
      }
    }, 300);
  }
}

fs.rmSync(tmp, { recursive: true, force: true });
t.done();
