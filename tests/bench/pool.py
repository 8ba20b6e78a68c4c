"""pool.py — the warm-pool benchmark (make bench-pool); run it through
tests/bench/pool.sh (see there for what it prints).

The driver speaks JSON-RPC (newline-delimited, as over stdio) to `hutch
serve` processes it starts itself: per executor one with a pool of python
sandboxes (the hits) and one with `--pool 0` (cold starts).  Every result
is checked: the executor it names, `warm: true` for a hit, `warm: false`
for a cold start.  A hit is measured only when its pool is full again: the
servers run with -vv and the driver counts their "... ready ... (pooled)"
log lines, then waits until the sandboxes of the last job are gone
(local, gvisor: the server's child processes) and pauses PAUSE ms more, so
that no refill or teardown runs beside a measured sample."""
import atexit
import glob
import json
import math
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time


def arg(i, name, default):
    """Positional argument i, else $name (make bench-pool ROUNDS=40), else default."""
    return int(sys.argv[i]) if len(sys.argv) > i else int(os.environ.get(name, default))


ROUNDS = arg(1, "ROUNDS", 15)
BURST = arg(2, "BURST", 200)
MEM_N = arg(3, "POOL_N", 3)
DATA_ROUNDS = int(os.environ.get("DATA_ROUNDS", "5"))
PAUSE = float(os.environ.get("PAUSE_MS", "200")) / 1000
BURST_MAX_S = float(os.environ.get("BURST_MAX_S", "30"))  # per executor
HUTCH = os.environ.get("HUTCH", "hutch")
PY = "/usr/bin/python3"
CALL_TIMEOUT = 60
SETTLE_TIMEOUT = 30

ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG": "C.UTF-8"}
for k in ("HUTCH_PLUGIN_DIR", "HUTCH_RUNNER_DIR", "HUTCH_IMAGES_DIR", "HUTCH_INIT",
          "DOCKER_HOST"):
    if os.environ.get(k):
        ENV[k] = os.environ[k]

notes = []  # odd things seen, printed at the end


def note(s):
    notes.append(s)
    print(f"pool bench: {s}", file=sys.stderr, flush=True)


def progress(s):
    print(f"pool bench: {s}", file=sys.stderr, flush=True)


sys.stdout.reconfigure(line_buffering=True)

# --- processes -------------------------------------------------------------------------

def children(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def sandboxes(pid):
    """The host processes that are sandboxes of hutch `pid`: its children
    (gvisor: `runsc run`), the local executor's factory's children, not its
    helpers themselves (the factory, the janitor)."""
    out = []
    for c in children(pid):
        cmd = cmdline(c)
        if "__plugin-helper" in cmd:
            out += children(c)
        elif "__janitor" not in cmd:
            out.append(c)
    return out


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid, start):
    """pid is still the process that started at `start`, and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0] != "Z" and int(fields[19]) == start
    except (OSError, IndexError, ValueError):
        return False


def ppid_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def smaps(pid):
    """(rss, pss, uss) in bytes, from smaps_rollup."""
    v = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    v[parts[0][:-1]] = int(parts[1]) * 1024
    except OSError:
        return (0, 0, 0)
    return (v.get("Rss", 0), v.get("Pss", 0),
            v.get("Private_Clean", 0) + v.get("Private_Dirty", 0))


def mem_cgroup(pid):
    """The path under /sys/fs/cgroup of pid's memory cgroup, or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(","):
            return "/sys/fs/cgroup/memory" + path
    for line in lines:
        if line.startswith("0::"):
            return "/sys/fs/cgroup" + line[3:]
    return None


def cgroup_usage(cg):
    """What `docker stats` shows: usage less the inactive page cache."""
    def num(name):
        with open(os.path.join(cg, name)) as f:
            return int(f.read().split()[0])
    try:
        stat = {}
        with open(os.path.join(cg, "memory.stat")) as f:
            for line in f:
                k, v = line.split()
                stat[k] = int(v)
        if os.path.exists(os.path.join(cg, "memory.usage_in_bytes")):
            return num("memory.usage_in_bytes") - stat.get("total_inactive_file", 0)
        return num("memory.current") - stat.get("inactive_file", 0)
    except (OSError, ValueError):
        return None


# --- hutch serve over stdio ------------------------------------------------------------

READY = re.compile(r"sandbox for \w+ ready \(ms\).*\(pooled\)")


class Serve:
    """One `hutch serve --executor E --pool SPEC`, spoken to as a client."""
    all = []

    def __init__(self, executor, pool, size, env=None, args=()):
        self.executor, self.pool, self.size = executor, pool, size
        self.p = subprocess.Popen(
            [HUTCH, "serve", "--executor", executor, "--pool", pool, "-vv",
             "--audit", "/dev/null", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**ENV, **(env or {})})
        Serve.all.append(self)
        self.pid = self.p.pid
        self.start = start_time(self.pid)
        self.ready = 0    # pooled sandboxes the server said are ready
        self.taken = 0    # hits: each one is refilled
        self.ready_t = []  # when each "ready (pooled)" line came
        self.last_hit = None
        self.refills = []  # ms from a hit's answer to its replacement being ready
        self.warnings = []
        self.seen = {}    # pid -> start time of every descendant seen
        self.cv = threading.Condition()
        self.q = queue.Queue()
        self.id = 0
        threading.Thread(target=self._stderr, daemon=True).start()
        threading.Thread(target=self._stdout, daemon=True).start()
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {"experimental": {"hutch/structured-content": {}}},
                               "clientInfo": {"name": "bench-pool", "version": "1"}}})
        r = self._recv(0)
        if "result" not in r:
            sys.exit(f"hutch serve --executor {executor}: initialize failed: {r}")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _stderr(self):
        for raw in self.p.stderr:
            line = raw.decode(errors="replace").rstrip()
            if READY.search(line):
                with self.cv:
                    self.ready += 1
                    self.ready_t.append(time.monotonic())
                    self.cv.notify_all()
            elif ": warning:" in line or ": error:" in line:
                self.warnings.append(line)

    def _stdout(self):
        for line in self.p.stdout:
            try:
                self.q.put(json.loads(line))
            except ValueError:
                self.q.put({"bad": line[:300]})
        self.q.put(None)

    def _send(self, m):
        self.p.stdin.write(json.dumps(m).encode() + b"\n")
        self.p.stdin.flush()

    def _recv(self, want_id):
        while True:
            try:
                m = self.q.get(timeout=CALL_TIMEOUT)
            except queue.Empty:
                sys.exit(f"hutch serve --executor {self.executor}: no answer in "
                         f"{CALL_TIMEOUT} s")
            if m is None:
                sys.exit(f"hutch serve --executor {self.executor} ended: "
                         + "; ".join(self.warnings[-3:]))
            if m.get("id") == want_id:
                return m

    def call(self, language="python", code="print(1)"):
        """(ms, structuredContent) of one execute_code."""
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
               "params": {"name": "execute_code",
                          "arguments": {"language": language, "code": code}}}
        t0 = time.perf_counter()
        self._send(msg)
        r = self._recv(self.id)
        ms = (time.perf_counter() - t0) * 1000
        sc = (r.get("result") or {}).get("structuredContent") or {}
        if r.get("result", {}).get("isError") or sc.get("exit_code") != 0 or \
                sc.get("stdout") != "1\n":
            sys.exit(f"execute_code on {self.executor} failed: {json.dumps(r)[:600]}")
        if sc.get("executor") != self.executor:
            sys.exit(f"execute_code on hutch serve --executor {self.executor} ran on "
                     f"{sc.get('executor')!r}: the benchmark measures the wrong path")
        if sc.get("warm"):
            self.taken += 1
            self.last_hit = time.monotonic()
        return ms, sc

    def remember(self):
        for d in descendants(self.pid):
            self.seen.setdefault(d, start_time(d))

    def settle(self):
        """Wait until the pool is full and the sandboxes of past jobs are gone."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        with self.cv:
            while self.ready < self.size + self.taken:
                left = deadline - time.monotonic()
                if left <= 0:
                    note(f"{self.executor} pool (--pool {self.pool}) not refilled after "
                         f"{SETTLE_TIMEOUT} s: {self.ready} ready of "
                         f"{self.size + self.taken} expected")
                    self.taken = self.ready - self.size  # do not wait again
                    return
                self.cv.wait(left)
            if self.last_hit is not None:
                self.refills.append(
                    (self.ready_t[self.size + self.taken - 1] - self.last_hit) * 1000)
                self.last_hit = None
        if self.executor == "docker":
            count = lambda: docker_count(self.pid)  # noqa: E731
        else:
            count = lambda: len(sandboxes(self.pid))  # noqa: E731
        n = count()
        while n is not None and n > self.size:
            if time.monotonic() > deadline:
                note(f"{self.executor} (--pool {self.pool}): {n} sandboxes after "
                     f"{SETTLE_TIMEOUT} s, {self.size} expected")
                return
            time.sleep(0.005)
            n = count()
        if n is None:  # cannot see Docker's containers: give it time
            time.sleep(0.5)
        self.remember()

    def close(self):
        if self.p.poll() is None:
            self.remember()
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                note(f"hutch serve --executor {self.executor} did not end within 30 s "
                     "of EOF: terminated")
                self.p.terminate()
                try:
                    self.p.wait(10)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.p.wait()
        if self.p.returncode not in (0, None):
            note(f"hutch serve --executor {self.executor} exited with {self.p.returncode}")
        if self.warnings:
            note(f"hutch serve --executor {self.executor} --pool {self.pool} warned: "
                 + " | ".join(w[:200] for w in self.warnings[:3]))
            self.warnings = []


# --- what is available ------------------------------------------------------------------

def run(argv, **kw):
    return subprocess.run(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          **kw)


version = run([HUTCH, "--version"]).stdout.decode().split()[1]
IMAGE = f"hutch-python:{version}"
DOCKER = shutil.which("docker", path=ENV["PATH"])
skipped = {}
have_docker = False
if not DOCKER:
    skipped["docker"] = "no docker client installed"
else:
    try:
        ok = run([DOCKER, "version", "--format", "{{.Server.Version}}"], timeout=10)
        if ok.returncode:
            skipped["docker"] = "dockerd does not answer: " + ok.stderr.decode().strip()[:120]
        elif run([DOCKER, "image", "inspect", IMAGE]).returncode:
            skipped["docker"] = f"image {IMAGE} is missing (make images, as root)"
        else:
            have_docker = True
    except subprocess.TimeoutExpired:
        skipped["docker"] = "dockerd does not answer within 10 s"
executors = ["local"]
if have_docker:
    executors.append("docker")
if not shutil.which("runsc", path=ENV["PATH"]):
    skipped["gvisor"] = "runsc is not installed"
elif os.geteuid() != 0:
    skipped["gvisor"] = "not root (the gvisor executor needs root)"
else:
    dirs = [ENV["HUTCH_IMAGES_DIR"]] if "HUTCH_IMAGES_DIR" in ENV else ["/var/lib/hutch/images"]
    if not any(os.path.isdir(os.path.join(d, "rootfs-python")) and
               os.path.isdir(os.path.join(d, "rootfs-node")) for d in dirs):
        skipped["gvisor"] = f"no rootfs-python and rootfs-node in {dirs[0]} (make images)"
    else:
        executors.append("gvisor")
if os.environ.get("EXECUTORS"):
    want = os.environ["EXECUTORS"].split(",")
    for e in executors:
        if e not in want:
            skipped[e] = "not in $EXECUTORS"
    executors = [e for e in executors if e in want]

# Docker's containers of one hutch serve, counted from the daemon's own
# directory (cheap enough to poll, unlike `docker ps`): a container is gone
# when Docker has removed it.
DOCKER_ROOT = None
if have_docker:
    r = run([DOCKER, "info", "--format", "{{.DockerRootDir}}"])
    d = os.path.join(r.stdout.decode().strip(), "containers")
    if r.returncode == 0 and os.access(d, os.R_OK | os.X_OK):
        DOCKER_ROOT = d
_owners = {}


def docker_count(pid):
    """How many containers hutch serve `pid` has (any state), or None."""
    if not DOCKER_ROOT:
        return None
    n = 0
    for cid in os.listdir(DOCKER_ROOT):
        if cid not in _owners:
            try:
                with open(os.path.join(DOCKER_ROOT, cid, "config.v2.json")) as f:
                    labels = json.load(f)["Config"].get("Labels") or {}
            except (OSError, ValueError, KeyError):
                continue  # being created or removed
            _owners[cid] = labels.get("hutch.owner", "")
        parts = _owners[cid].rsplit(":", 2)
        if len(parts) == 3 and parts[0] == HOST and parts[1] == str(pid) and \
                os.path.isdir(os.path.join(DOCKER_ROOT, cid)):
            n += 1
    return n


# --- clean-up ---------------------------------------------------------------------------

exec_container = None
HOST = socket.gethostname()


def owned_containers(pids):
    """Docker containers (id, owner pid, image) whose hutch.owner is one of pids."""
    if not have_docker:
        return []
    r = run([DOCKER, "ps", "-a", "--filter", "label=hutch.owner", "--format",
             '{{.ID}}\t{{.Label "hutch.owner"}}\t{{.Image}}'])
    out = []
    for line in r.stdout.decode().splitlines():
        cid, owner, image = line.split("\t")
        parts = owner.rsplit(":", 2)
        if len(parts) == 3 and parts[0] == HOST and parts[1].isdigit() and \
                int(parts[1]) in pids:
            out.append((cid, int(parts[1]), image))
    return out


def cleanup():
    global exec_container
    for s in Serve.all:
        s.close()
    if exec_container:
        run([DOCKER, "rm", "-f", exec_container])
        exec_container = None
    seen = [(p, st) for s in Serve.all for p, st in s.seen.items() if st is not None]
    deadline = time.monotonic() + 5  # what was killed may take a moment to go
    while True:
        left = [p for p, st in seen if alive(p, st)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        note(f"processes of the sandboxes still there after hutch serve ended: "
             + ", ".join(f"{p} ({comm(p)})" for p in left[:10]))
    if os.geteuid() == 0:  # the plugins' state directories (src/plugin.c)
        dirs = [d for s in Serve.all
                for d in glob.glob(f"/run/hutch/*/{s.pid}.{s.start}*")]
        if dirs:
            note("state directories left by hutch serve: " + ", ".join(dirs[:5]))
    cs = owned_containers({s.pid for s in Serve.all})
    if cs:
        note("containers left by hutch serve: " + ", ".join(c[0] for c in cs))
    Serve.all = []


def on_signal(sig, frame):
    sys.exit(128 + sig)


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
atexit.register(cleanup)

# --- 1-3: interleaved latency -----------------------------------------------------------

t_begin = time.monotonic()
progress("executors " + ", ".join(executors)
         + "".join(f"; {e} skipped: {why}" for e, why in skipped.items()))
hit = {e: Serve(e, "python=2,javascript=0", 2) for e in executors}
cold = {e: Serve(e, "0", 0) for e in executors}
if have_docker:
    r = run([DOCKER, "run", "-d", "--rm", "--network", "none", "--label",
             "hutch-bench=pool", IMAGE, "sleep", "infinity"])
    if r.returncode:
        sys.exit("docker run of the exec container failed: " + r.stderr.decode()[:300])
    exec_container = r.stdout.decode().strip()


def settle_all():
    for s in hit.values():
        s.settle()
    for s in cold.values():
        s.settle()
    time.sleep(PAUSE)


def timed(argv):
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t0) * 1000
    if p.returncode:
        sys.exit(f"{' '.join(argv)}: rc={p.returncode} {p.stderr.decode()[:300]}")
    return ms


cases = []  # (name, function returning ms)
lat = {}
cold_hits = {e: 0 for e in executors}  # hits that came cold


def hit_case(e):
    def f():
        ms, sc = hit[e].call()
        if not sc.get("warm"):
            cold_hits[e] += 1
            return None
        return ms
    return f


def cold_case(e):
    def f():
        ms, sc = cold[e].call()
        if sc.get("warm") is not False:
            sys.exit(f"a cold execution on {e} (--pool 0) says warm: "
                     f"{sc.get('warm')!r}: the benchmark measures the wrong path")
        return ms
    return f


for e in executors:
    cases.append((f"{e} hit", hit_case(e)))
    cases.append((f"{e} cold", cold_case(e)))
cases.append(("python3 -c pass", lambda: timed([PY, "-c", "pass"])))
if exec_container:
    cases.append(("docker exec", lambda: timed([DOCKER, "exec", exec_container,
                                                 "python3", "-c", "pass"])))
for name, _ in cases:
    lat[name] = []

progress(f"1-3: warming up, then {ROUNDS} interleaved rounds of {len(cases)} cases")
for _ in range(1):
    for name, f in cases:
        settle_all()
        f()
for e in executors:
    cold_hits[e] = 0
    hit[e].refills = []
for i in range(ROUNDS):
    for name, f in cases:
        settle_all()
        ms = f()
        if ms is not None:
            lat[name].append(ms)
refills = {e: hit[e].refills for e in executors}
for e in executors:
    if cold_hits[e]:
        note(f"{cold_hits[e]} of {ROUNDS} {e} hits came cold although the pool "
             "had refilled (left out of the hit figures)")
t_lat = time.monotonic() - t_begin

# --- 4: back to back --------------------------------------------------------------------

for s in list(hit.values()) + list(cold.values()):
    s.close()
# Each burst on a server of its own per HUTCH_POOL_REFILL_MAX of BURST_REFILL
# ("2": the two refill threads hutch had before they grew with demand, the
# baseline; "default": unset, the machine's CPUs), one after the other per
# executor, alternating.
burst = {}
REFILLS = [x.strip() for x in os.environ.get("BURST_REFILL", "2,default").split(",")
           if x.strip()]
for e in executors:
    for rf in REFILLS:
        progress(f"4: {BURST} back-to-back executions on {e}, refill {rf}")
        s = Serve(e, "python=2,javascript=0", 2,
                  None if rf == "default" else {"HUTCH_POOL_REFILL_MAX": rf})
        s.settle()
        time.sleep(PAUSE)
        rec = []
        t0 = time.perf_counter()
        for _ in range(BURST):
            ms, sc = s.call()
            rec.append((ms, bool(sc.get("warm"))))
            if time.perf_counter() - t0 > BURST_MAX_S:
                note(f"4: {e} refill {rf} stopped after {len(rec)} of {BURST} "
                     f"executions ({BURST_MAX_S:.0f} s, BURST_MAX_S)")
                break
        wall = time.perf_counter() - t0
        burst[(e, rf)] = (wall, rec)
        s.close()

# --- 6: the data flavour's chart, warm and cold -----------------------------------------

CHART = """import os
import pandas as pd
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
os.makedirs('/work/out', exist_ok=True)
df = pd.DataFrame({'x': range(10), 'y': [i * i for i in range(10)]})
df.plot(x='x', y='y')
plt.savefig('/work/out/chart.png')
print(1)
"""
chart = {}
for e in executors:
    progress(f"6: {DATA_ROUNDS} rounds of the data flavour's chart on {e}, warm and cold")
    w = Serve(e, "python=1,javascript=0", 1, args=["--flavour", "data"])
    c = Serve(e, "0", 0, args=["--flavour", "data"])
    try:
        got = {"warm": [], "cold": []}
        for i in range(DATA_ROUNDS + 1):  # the first round warms caches up, not counted
            for name, s in (("warm", w), ("cold", c)):
                s.settle()
                time.sleep(PAUSE)
                ms, sc = s.call(code=CHART)
                if bool(sc.get("warm")) != (name == "warm"):
                    note(f"6: a {name} chart on {e} came {'warm' if sc.get('warm') else 'cold'}")
                elif i:
                    got[name].append(ms)
        chart[e] = got
    except SystemExit as ex:
        note(f"6: {e} skipped: {ex}")
    w.close()
    c.close()

# --- 5: memory of idle pooled sandboxes -------------------------------------------------


def sandbox_groups(e, s):
    """[(language, [pids])]: the host processes of each idle sandbox of s."""
    groups = []
    if e == "docker":
        for cid, _, image in owned_containers({s.pid}):
            r = run([DOCKER, "inspect", "-f", "{{.State.Pid}}", cid])
            try:
                init = int(r.stdout.decode().strip())
            except ValueError:
                continue
            shim = ppid_of(init)
            pids = [shim] + descendants(shim) if shim and \
                "containerd-shim" in cmdline(shim) else [init] + descendants(init)
            groups.append(("javascript" if "hutch-node" in image else "python", pids))
        return groups
    for c in sandboxes(s.pid):
        pids = [c] + descendants(c)
        lang = "python"
        if e == "gvisor":
            m = re.search(r"--bundle (\S+)", cmdline(c))
            try:
                with open(os.path.join(m.group(1), "config.json")) as f:
                    if "rootfs-node" in json.load(f)["root"]["path"]:
                        lang = "javascript"
            except (AttributeError, OSError, ValueError, KeyError):
                lang = "?"
        elif any(comm(p).startswith("node") for p in pids):
            lang = "javascript"
        groups.append((lang, pids))
    return groups


def group_memory(e, s, pids):
    rss = pss = uss = 0
    for p in pids:
        a, b, c = smaps(p)
        rss, pss, uss = rss + a, pss + b, uss + c
    own = {mem_cgroup(s.pid), mem_cgroup(1)}
    cgs = {mem_cgroup(p) for p in pids} - own - {None}
    if e == "docker":  # the shim lives in dockerd's cgroup
        cgs = {c for c in cgs if "/docker/" in c}
    usage = [cgroup_usage(c) for c in cgs]
    cg = sum(u for u in usage if u is not None) if cgs and None not in usage else None
    return rss, pss, uss, cg


memory = {}
for e in executors:
    progress(f"5: memory of {MEM_N} idle pooled sandboxes per language on {e}")
    s = Serve(e, f"python={MEM_N},javascript={MEM_N}", 2 * MEM_N)
    s.settle()
    time.sleep(1)  # let the runners finish what they do after "ready"
    groups = sandbox_groups(e, s)
    for lang in ("python", "javascript"):
        g = [group_memory(e, s, pids) for l, pids in groups if l == lang]
        memory[(e, lang)] = g
        if len(g) != MEM_N:
            note(f"{e} {lang}: {len(g)} idle sandboxes found, {MEM_N} expected")
    s.close()
    # The data flavour's, which hold numpy, pandas and matplotlib (preloaded).
    s = Serve(e, f"python={MEM_N},javascript=0", MEM_N, args=["--flavour", "data"])
    s.settle()
    time.sleep(1)
    g = [group_memory(e, s, pids) for l, pids in sandbox_groups(e, s) if l == "python"]
    memory[(e, "python data")] = g
    if len(g) != MEM_N:
        note(f"{e} python data: {len(g)} idle sandboxes found, {MEM_N} expected")
    s.close()

cleanup()
t_total = time.monotonic() - t_begin

# --- report -----------------------------------------------------------------------------


def pct(v, q):
    v = sorted(v)
    return v[max(0, math.ceil(q / 100 * len(v)) - 1)] if v else float("nan")


def p50(name):
    return statistics.median(lat[name]) if lat.get(name) else float("nan")


cpu = "cpu"
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
except (OSError, StopIteration):
    pass
print(f"hutch warm-pool benchmark — hutch {version}, "
      f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} × {cpu}")
print(f"executors measured: {', '.join(executors)}")
for e, why in skipped.items():
    print(f"  {e} skipped: {why}")
print()
print(f"1-3. execute_code print(1) over stdio (JSON-RPC to hutch serve --executor E), "
      f"python;")
print(f"     {ROUNDS} interleaved rounds; before every sample each pool refilled, the last "
      f"job's sandbox gone, then {PAUSE * 1000:.0f} ms pause (ms)")
print(f"     {'':48} {'n':>4} {'p50':>9} {'p99':>9}")
labels = {"python3 -c pass": "/usr/bin/python3 -c pass (host)",
          "docker exec": "docker exec (running container) python3 -c pass"}
for name, _ in cases:
    e, _, kind = name.partition(" ")
    if kind == "hit":
        label = f"{e:7} pool hit  (--pool python=2), warm: true"
    elif kind == "cold":
        label = f"{e:7} cold start (--pool 0),      warm: false"
    else:
        label = labels[name]
    v = lat[name]
    print(f"     {label:48} {len(v):4} {p50(name):9.2f} {pct(v, 99):9.2f}")
print(f"     (p99 is the nearest rank: with {ROUNDS} samples, the largest)")
for e in executors:
    v = refills[e]
    print(f"     {e}: cold / hit p50 = {p50(e + ' cold') / p50(e + ' hit'):.1f}x; "
          f"refill after a hit (answer to replacement ready): p50 "
          f"{statistics.median(v) if v else float('nan'):.0f} ms, max "
          f"{max(v) if v else float('nan'):.0f} ms")
print()
print("goals (ratios of p50s from this run)")
rows = [("local", "warm local / bare python3 -c pass", "python3 -c pass", 0.25),
        ("docker", "warm docker / docker exec", "docker exec", 0.1),
        ("gvisor", "warm gvisor / docker exec", "docker exec", 0.1)]
for e, text, base, goal in rows:
    if e not in executors:
        print(f"     {text:38} n/a   (goal <= {goal}; {e} skipped)")
    elif not lat.get(base):
        print(f"     {text:38} n/a   (goal <= {goal}; no {base} baseline)")
    else:
        r = p50(e + " hit") / p50(base)
        print(f"     {text:38} {r:5.3f} (goal <= {goal}: {'PASS' if r <= goal else 'MISS'})")
print()
print(f"4. {BURST} execute_code back to back (no pause), pool of 2 python sandboxes "
      f"(at most {BURST_MAX_S:.0f} s each), per HUTCH_POOL_REFILL_MAX (refill: 2 is "
      f"the baseline, default the CPUs)")
print(f"     {'':8} {'refill':>7} {'wall s':>7} {'exec/s':>7} {'warm':>9} {'p50':>8} "
      f"{'p50 warm':>9} {'p50 cold':>9} {'p99':>8} {'rate/base':>9}")
for e in executors:
    base_rate = None
    for rf in REFILLS:
        wall, rec = burst[(e, rf)]
        allv = [m for m, _ in rec]
        w = [m for m, x in rec if x]
        c = [m for m, x in rec if not x]
        med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
        rate = len(rec) / wall
        if base_rate is None:
            base_rate = rate
        print(f"     {e:8} {rf:>7} {wall:7.2f} {rate:7.1f} {len(w):4}/{len(rec):<4} "
              f"{med(allv):8.2f} {med(w):9.2f} {med(c):9.2f} {pct(allv, 99):8.2f} "
              f"{rate / base_rate:9.2f}")
for e in executors:
    for rf in REFILLS:
        rec = burst[(e, rf)][1]
        pattern = "".join("W" if x else "." for _, x in rec)
        print(f"     {e}, refill {rf} (W warm, . cold):")
        for i in range(0, len(pattern), 100):
            print(f"       {pattern[i:i + 100]}")
print()
MB = 1 << 20
print(f"5. memory held per idle pooled sandbox (pool of {MEM_N} per language), MiB per "
      f"sandbox")
print("     host processes of the sandbox: RSS, PSS (shared pages split between sharers),")
print("     USS (its own pages); cgroup: its memory cgroup's usage less inactive file")
print("     cache, as docker stats shows it")
print(f"     {'':20} {'n':>3} {'RSS':>7} {'PSS':>7} {'USS':>7} {'cgroup':>7}")
for e in executors:
    for lang in ("python", "javascript", "python data"):
        g = memory.get((e, lang), [])
        if not g:
            print(f"     {e:8} {lang:11} {0:3}       -")
            continue
        avg = lambda i: sum(x[i] for x in g) / len(g) / MB
        cgv = [x[3] for x in g]
        cg = f"{sum(cgv) / len(cgv) / MB:7.1f}" if None not in cgv else "      -"
        print(f"     {e:8} {lang:11} {len(g):3} {avg(0):7.1f} {avg(1):7.1f} {avg(2):7.1f} {cg}")
what = {"local": "the sandbox's processes (a child of the local factory, init, runner)",
        "docker": "containerd-shim and the container's processes",
        "gvisor": "runsc run, its gofer, sentry and ptrace stubs"}
for e in executors:
    print(f"     {e}: {what[e]}")
print()
print(f"6. the data flavour's chart (import pandas and matplotlib, plot, save a PNG), "
      f"{DATA_ROUNDS} rounds: a warm sandbox (its runner preloads the packages) "
      f"against a cold start")
print(f"     {'':8} {'warm p50':>9} {'cold p50':>9} {'warm/cold':>9}")
for e in executors:
    got = chart.get(e)
    if not got or not got["warm"] or not got["cold"]:
        print(f"     {e:8}       n/a")
        continue
    wv, cv = statistics.median(got["warm"]), statistics.median(got["cold"])
    r = wv / cv
    print(f"     {e:8} {wv:9.1f} {cv:9.1f} {r:9.3f} (goal <= 0.1: "
          f"{'PASS' if r <= 0.1 else 'MISS'})")
print()
print(f"took {t_total:.0f} s ({t_lat:.0f} s for 1-3)")
if notes:
    print("observations:")
    for n in notes:
        print(f"  - {n}")
