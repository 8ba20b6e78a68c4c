// zygote.mjs — the local executor's Python zygote (plugins/local/zygote.c),
// through `hutch serve` and the official SDK client:
//   - `hutch run`, and a server's first cold start, exec the interpreter
//     (the zygote's own start costs more than one);
//   - a Python sandbox's runner is a fork of the zygote (/proc/self/exe is
//     hutch, not the interpreter), cold and pooled; with
//     HUTCH_LOCAL_ZYGOTE=false it is the interpreter;
//   - what the program sees is what an exec'd runner shows: flags,
//     encodings, locale, environment, sys.path, argv, orig_argv, signal
//     handlers, standard streams, descriptors, /proc/self/cmdline;
//   - siblings (sandboxes of one zygote) draw different random numbers
//     (random, uuid4, tempfile names, os.urandom); they share the str hash
//     secret, as zygote.c says, and a zygote that retired after
//     HUTCH_ZYGOTE_FORKS sandboxes gives way to one with a new secret;
//   - nothing one execution changes in its interpreter (a module, builtins,
//     os.environ, a file in /work or /tmp) reaches the next one;
//   - no byte of hutch's environment is in the zygote's memory, nor in a
//     pooled sandbox's (read from outside, as root);
//   - SIGINT raises KeyboardInterrupt, as in an exec'd runner;
//   - a runner changed on disk is what the next sandboxes run;
//   - a zygote that cannot start says why once, and Python runs anyway.
// Budgets are generous: nothing here depends on the machine's speed.  TAP.
import {
  HOST_SECRET, descendants, execute, fs, hutchEnv, loadSdk, os, path, py, requireEnv, spawnSync, startStdio, tap,
  waitFor,
} from "./lib.mjs";

const hutch = requireEnv({ needServers: false });
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const STEP_S = 300;
const E = "local";
const FORKS = 100; // HUTCH_ZYGOTE_FORKS (src/caps.h)
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-zygote-"));

async function run(h, code) {
  const x = await execute(h.client, py(code), { executor: E });
  if (x.s.exit_code !== 0 || x.s.executor !== E) throw new Error(`execution failed: ${JSON.stringify(x.s).slice(0, 600)}`);
  return x.s.result;
}
const EXE = `import os, sys
[os.readlink('/proc/self/exe'), os.path.realpath(sys.executable)]`;
// /proc/self/exe of a fork of the zygote: hutch's binary.
const forked = (exe) => /hutch/.test(path.basename(exe));

// A copy of the runner directory, `tail` appended to hutch_runner.py.
function runnersCopy(name, tail = "") {
  const dir = path.join(tmp, name);
  fs.cpSync(process.env.HUTCH_RUNNER_DIR, dir, { recursive: true });
  if (tail) fs.appendFileSync(path.join(dir, "hutch_runner.py"), tail);
  return dir;
}

// A server, past its first cold Python start (which execs its interpreter:
// see local.c) unless `first`.
async function start(args = [], env = {}, first = false) {
  const h = await startStdio({ sdk, hutch, args: ["--executor", E, ...args], env: { HUTCH_EXECUTOR: "", ...env } });
  if (!first) await run(h, "1");
  return h;
}

await t.step("`hutch run` and a server's first cold start exec the interpreter (the zygote costs more)", async () => {
  const r = spawnSync(hutch, ["run", "--executor", E, "--lang", "python", "-e",
    "import os, sys\nprint(os.readlink('/proc/self/exe'), os.path.realpath(sys.executable))"],
  { encoding: "utf8", env: hutchEnv({ HUTCH_EXECUTOR: "" }) });
  const [exe, interp] = (r.stdout || "").trim().split(" ");
  t.ok(r.status === 0 && exe === interp && /python3\.\d+$/.test(exe), `hutch run: /proc/self/exe is ${exe} (${r.stderr})`);
  const h = await start(["--pool", "0"], {}, true);
  try {
    const [e1, i1] = await run(h, EXE);
    t.ok(e1 === i1, `the first cold start: ${e1}`);
    const [e2] = await run(h, EXE);
    t.ok(forked(e2), `the second: ${e2}`);
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("a Python sandbox is a fork of the zygote, cold and pooled; with HUTCH_LOCAL_ZYGOTE=false, the interpreter", async () => {
  for (const pool of ["0", "python=2"]) {
    const h = await start(["--pool", pool]);
    try {
      for (let i = 0; i < 3; i++) {
        const [exe, interp] = await run(h, EXE);
        if (!/\/python3\.\d+$/.test(interp)) throw new Error(`sys.executable is ${interp}`);
        if (exe === interp || !forked(exe))
          throw new Error(`--pool ${pool}: /proc/self/exe is ${exe}: not a fork of the zygote`);
      }
    } finally {
      await h.close();
    }
  }
  const h = await start(["--pool", "0"], { HUTCH_LOCAL_ZYGOTE: "false" });
  try {
    const [exe, interp] = await run(h, EXE);
    if (exe !== interp) throw new Error(`HUTCH_LOCAL_ZYGOTE=false: /proc/self/exe is ${exe}, not ${interp}`);
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("what the program sees is what an exec'd runner shows", async () => {
  const view = `import sys, os, locale, signal
def mode(fd):
    try:
        return oct(os.fstat(fd).st_mode)
    except OSError as e:
        return str(e.errno)
{
  'flags': repr(sys.flags), 'fsenc': sys.getfilesystemencoding(),
  'streams': [(s.encoding, s.errors, s.line_buffering, s.seekable(), s.isatty()) for s in (sys.stdout, sys.stderr)],
  'stdin': [sys.stdin.encoding, sys.stdin.isatty(), os.path.realpath('/proc/self/fd/0')],
  'locale': [locale.getpreferredencoding(False), locale.setlocale(locale.LC_CTYPE)],
  'env': sorted(os.environ.items()), 'path': sys.path, 'argv': sys.argv, 'orig_argv': sys.orig_argv,
  'executable': sys.executable, 'prefix': [sys.prefix, sys.exec_prefix, sys.base_prefix],
  'signals': [str(signal.getsignal(s)) for s in range(1, signal.NSIG) if s not in (9, 19, 32, 33)],
  'fds': sorted((int(f), mode(int(f))) for f in os.listdir('/proc/self/fd')),
  'cmdline': [a.decode() for a in open('/proc/self/cmdline', 'rb').read().split(b'\\0') if a][:4],
  'comm': open('/proc/self/comm').read(), 'cwd': os.getcwd(), 'ids': [os.getuid(), os.getgid(), os.getgroups()],
  'dumpable': open('/proc/self/status').read().count('\\n') > 0,
  'run': sorted(os.listdir('/run/hutch')),
}`;
  const got = {};
  for (const z of ["true", "false"]) {
    const h = await start(["--pool", "0"], { HUTCH_LOCAL_ZYGOTE: z });
    try {
      got[z] = await run(h, view);
    } finally {
      await h.close();
    }
  }
  if (typeof got.false !== "object" || typeof got.true !== "object") throw new Error(`not a dict: ${JSON.stringify(got).slice(0, 300)}`);
  for (const k of Object.keys(got.false)) t.is(got.true[k], got.false[k], `the same ${k}`);
}, STEP_S);

await t.step("siblings draw different random numbers and share the hash secret; a retired zygote's successor has another", async () => {
  const h = await start(["--pool", "0"]);
  const draw = `import random, uuid, tempfile, os
[random.random(), random.getrandbits(64), str(uuid.uuid4()), next(tempfile._get_candidate_names()), os.urandom(8).hex(), hash('hutch'), os.readlink('/proc/self/exe')]`;
  try {
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(await run(h, draw));
    for (let k = 0; k < 5; k++) {
      const values = new Set(seen.map((v) => String(v[k])));
      t.is(values.size, seen.length, `siblings differ in draw ${k} (${["random", "getrandbits", "uuid4", "tempfile", "urandom"][k]})`);
    }
    t.is(new Set(seen.map((v) => v[5])).size, 1, "siblings of one zygote share the str hash secret (documented in zygote.c)");
    // Past HUTCH_ZYGOTE_FORKS sandboxes the zygote retires: its successor
    // draws a new secret.
    const hashes = new Set();
    for (let i = 0; i < FORKS + 2; i++) hashes.add((await run(h, "hash('hutch')")));
    t.ok(hashes.size >= 2, `a new zygote after ${FORKS} sandboxes: ${hashes.size} hash secrets in ${FORKS + 2} executions`);
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("nothing one execution changes in its interpreter reaches the next", async () => {
  const h = await start(["--pool", "python=2"]);
  const leave = `import os, sys, builtins, hutch_runner, json
hutch_runner.LEFT = 1
builtins.LEFT = 1
os.environ['LEFT'] = '1'
sys.modules['left_module'] = sys
sys.path.append('/left')
json.LEFT = 1
open('/work/left', 'w').write('x'); open('/tmp/left', 'w').write('x')
1`;
  const look = `import os, sys, builtins, hutch_runner, json
[hasattr(hutch_runner, 'LEFT'), hasattr(builtins, 'LEFT'), 'LEFT' in os.environ, 'left_module' in sys.modules,
 '/left' in sys.path, hasattr(json, 'LEFT'), os.path.exists('/work/left'), os.path.exists('/tmp/left')]`;
  try {
    for (let i = 0; i < 3; i++) {
      await run(h, leave);
      t.is(await run(h, look), [false, false, false, false, false, false, false, false], `round ${i + 1}: nothing left`);
    }
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("no byte of hutch's environment is in the zygote's memory, nor a pooled sandbox's", async () => {
  // Read from outside (root reads any process's memory): the zygote's, of
  // which every sandbox's is a copy, and a pooled sandbox's runner.
  if (process.getuid() !== 0) {
    t.ok(true, "# SKIP not root: cannot read another process's memory");
    return;
  }
  const h = await start(["--pool", "python=1"]);
  const secret = Buffer.from(HOST_SECRET);
  function scan(pid) {
    const found = [];
    let regions = 0;
    const fd = fs.openSync(`/proc/${pid}/mem`, "r");
    try {
      for (const line of fs.readFileSync(`/proc/${pid}/maps`, "utf8").split("\n")) {
        const m = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
        if (!m || /\[(vvar|vsyscall)\]/.test(line)) continue;
        const lo = parseInt(m[1], 16), len = parseInt(m[2], 16) - lo;
        if (len > 1 << 30) continue;
        const buf = Buffer.alloc(len);
        try {
          fs.readSync(fd, buf, 0, len, lo);
        } catch {
          continue;
        }
        regions++;
        if (buf.indexOf(secret) >= 0) found.push(line);
      }
    } finally {
      fs.closeSync(fd);
    }
    return { regions, found };
  }
  try {
    await run(h, "1");
    const isZygote = (p) => / factory 3 python /.test(p.cmd);
    const isRunner = (p) => /^\/usr\/bin\/python3\.\d+ -I -S/.test(p.cmd);
    const ok = await waitFor(async () => {
      const procs = descendants(h.pid);
      return procs.some(isZygote) && procs.some(isRunner);
    }, 60000, 200);
    t.ok(ok, "a zygote and a pooled sandbox's runner are there");
    // The execution's own runner goes away with its sandbox, and the pool
    // may have grown by one: scan a runner that is still there, looking
    // again when the one picked went away meanwhile.
    for (const [what, is] of [["the zygote", isZygote], ["a pooled runner", isRunner]]) {
      let r = null;
      await waitFor(async () => {
        for (const p of descendants(h.pid).filter(is).reverse()) {
          try {
            r = scan(p.pid);
            if (r.regions > 10) return true; // else it ended while scanned
          } catch (e) {
            if (e.code !== "ENOENT" && e.code !== "ESRCH") throw e;
          }
        }
        return false;
      }, 60000, 200);
      t.ok(r && r.regions > 10, `${what}: scanned ${r?.regions} readable regions`);
      t.is(r?.found, [], `${what}: hutch's environment (the test's secret) is nowhere in its memory`);
    }
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("SIGINT raises KeyboardInterrupt, as in an exec'd runner", async () => {
  const h = await start(["--pool", "0"]);
  try {
    const x = await execute(h.client, py("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nimport time\ntime.sleep(5)"), { executor: E });
    if (x.s.exit_code === 0 || !/KeyboardInterrupt/.test(JSON.stringify(x.s))) throw new Error(JSON.stringify(x.s).slice(0, 600));
    const [exe] = await run(h, EXE);
    if (!forked(exe)) throw new Error(`not the zygote: ${exe}`);
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("a runner changed on disk is what the next sandboxes run", async () => {
  const runners = runnersCopy("runners");
  const h = await start(["--pool", "0"], { HUTCH_RUNNER_DIR: runners });
  try {
    t.is(await run(h, "import hutch_runner\ngetattr(hutch_runner, 'ZYGOTE_MARK', 0)"), 0, "the installed runner");
    fs.appendFileSync(path.join(runners, "hutch_runner.py"), "\nZYGOTE_MARK = 2\n");
    const ok = await waitFor(async () => (await run(h, "import hutch_runner\ngetattr(hutch_runner, 'ZYGOTE_MARK', 0)")) === 2, 60000, 100);
    t.ok(ok, "the changed runner runs");
    const [exe] = await run(h, EXE);
    t.ok(forked(exe), `and from a zygote again (${exe})`);
  } finally {
    await h.close();
  }
}, STEP_S);

await t.step("a zygote that cannot start says why, and Python runs anyway", async () => {
  // The zygote calls _zygote(); an exec'd runner never does.
  const runners = runnersCopy("broken", "\ndef _zygote():\n    raise RuntimeError('no zygote here')\n");
  const h = await start(["--pool", "python=1", "-v"], { HUTCH_RUNNER_DIR: runners });
  try {
    for (let i = 0; i < 3; i++) {
      const [exe, interp] = await run(h, EXE);
      if (exe !== interp) throw new Error(`ran in a zygote: ${exe}`);
    }
    // Said at each try (another 10 s later: how many depends on the
    // machine's speed), each time with the reason.
    const said = h.logs().match(/the Python zygote: .*/g) || [];
    t.ok(said.length >= 1 && said.every((l) => /no zygote here/.test(l)),
      `said, with the reason: ${said[0] || h.logs().slice(-800)}`);
  } finally {
    await h.close();
  }
}, STEP_S);

fs.rmSync(tmp, { recursive: true, force: true });
t.done();
