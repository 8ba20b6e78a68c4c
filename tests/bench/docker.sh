#!/bin/sh
# docker.sh — cold-start benchmark of the docker executor.
#
#   make bench-docker     (from a configured build directory; dockerd running,
#                          images built with `make images`)
#   sh tests/bench/docker.sh [RUNS]   with HUTCH=path/to/hutch
#
# Prints, interleaved so that machine noise hits both alike, the median and
# p90 wall time of:
#   hutch run --executor docker --lang python -e 'print(1)'
#   docker run --rm --network none hutch-python:VERSION python3 -c 'print(1)'
# and their ratio.  Goal: hutch ≤ 1.0× the docker CLI (same image, and
# hutch's container is the hardened one: read-only root, no capabilities,
# limits, a tmpfs volume for /work, its init and runner).
RUNS=${1:-20}
: "${HUTCH:=hutch}"
exec /usr/bin/python3 - "$RUNS" "$HUTCH" "$(dirname "$0")" <<'PY'
import os, subprocess, sys

runs, hutch = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, sys.argv[3])
from interleave import measure, report
env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG": "C.UTF-8"}
for k in ("HUTCH_PLUGIN_DIR", "HUTCH_RUNNER_DIR", "DOCKER_HOST"):
    if k in os.environ:
        env[k] = os.environ[k]
version = subprocess.run([hutch, "--version"], env=env, capture_output=True,
                         text=True).stdout.split()[1]
image = f"hutch-python:{version}"
if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
    sys.exit(f"{image} is missing: run 'make images' (as root) with dockerd running")

cases = [
    ("hutch run --executor docker", [hutch, "run", "--executor", "docker", "--lang",
                                     "python", "-e", "print(1)"]),
    ("docker run --rm --network none", ["docker", "run", "--rm", "--network", "none",
                                        image, "python3", "-c", "print(1)"]),
]

times = measure(cases, runs, env)
med = report(f"docker executor cold start, {image}", times, runs)
ratio = med[cases[0][0]] / med[cases[1][0]]
print(f"hutch / docker CLI: {ratio:.2f}x (goal <= 1.0)")
PY
