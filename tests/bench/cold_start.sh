#!/bin/sh
# cold_start.sh — cold-start benchmark of the local executor (issue #2).
#
#   make bench            (from a configured build directory)
#   sh tests/bench/cold_start.sh [RUNS]   with HUTCH=path/to/hutch
#
# Prints, in one run and interleaved so that machine noise hits all alike,
# the median wall time of:
#   hutch run --lang python -e 'print(1)'      (local executor, cold sandbox)
#   /usr/bin/python3 -c 'print(1)'             (bare interpreter)
#   bwrap --unshare-all … /usr/bin/python3 -c 'print(1)'
# and hutch's ratio to each.  Goals: ≤ 1.5× bare python, faster than bwrap.
RUNS=${1:-40}
: "${HUTCH:=hutch}"
BWRAP=$(command -v bwrap || true)
exec /usr/bin/python3 - "$RUNS" "$HUTCH" "$BWRAP" <<'PY'
import os, statistics, subprocess, sys, time

runs, hutch, bwrap = int(sys.argv[1]), sys.argv[2], sys.argv[3]
env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
for k in ("HUTCH_PLUGIN_DIR", "HUTCH_RUNNER_DIR"):
    if k in os.environ:
        env[k] = os.environ[k]

cases = [
    ("hutch run --lang python (local)", [hutch, "run", "--lang", "python", "-e", "print(1)"]),
    ("python3 -c (bare)", ["/usr/bin/python3", "-c", "print(1)"]),
]
if bwrap:
    cases.append(("bwrap --unshare-all + python3", [
        bwrap, "--unshare-all", "--die-with-parent",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "/usr/bin/python3", "-c", "print(1)"]))

def once(argv):
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0 or p.stdout.strip() != b"1":
        sys.exit(f"benchmark command failed: {argv[0]}: rc={p.returncode} {p.stderr.decode()[:300]}")
    return dt * 1000

times = {name: [] for name, _ in cases}
for _, argv in cases:          # warm-up: page cache, first-run costs
    for _ in range(3):
        once(argv)
for _ in range(runs):
    for name, argv in cases:
        times[name].append(once(argv))

med = {n: statistics.median(v) for n, v in times.items()}
base = med["hutch run --lang python (local)"]
print(f"cold start, median of {runs} interleaved runs (ms)")
print(f"{'command':34} {'median':>8} {'p90':>8}  {'hutch / this':>12}")
for name, v in times.items():
    v = sorted(v)
    p90 = v[int(len(v) * 0.9) - 1]
    print(f"{name:34} {med[name]:8.2f} {p90:8.2f}  {base / med[name]:11.2f}x")
PY
