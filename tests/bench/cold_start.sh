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
exec /usr/bin/python3 - "$RUNS" "$HUTCH" "$BWRAP" "$(dirname "$0")" <<'PY'
import os, sys

runs, hutch, bwrap = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4])
from interleave import measure, report
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

times = measure(cases, runs, env, warmup=3)
report("cold start", times, runs)
PY
