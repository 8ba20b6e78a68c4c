#!/bin/sh
# gvisor.sh — benchmark of the gVisor executor (issue #6).
#
#   make bench-gvisor     (from a configured build directory, as root)
#   sh tests/bench/gvisor.sh [RUNS]   with HUTCH=path/to/hutch, HUTCH_IMAGES_DIR
#
# Prints, in one run and interleaved so that machine noise hits all alike,
# the median wall time of:
#   hutch run --executor gvisor --lang python -e 'print(1)'
#   runsc run on an equivalent hand-written bundle (same rootfs, same flags)
#   docker run --rm --runtime=runsc --network none IMAGE python3 -c 'print(1)'
#     (when a Docker daemon with the runsc runtime answers)
# and hutch's ratio to each.  Goal: hutch ≤ 1.0× docker run --runtime=runsc.
RUNS=${1:-15}
: "${HUTCH:=hutch}"
: "${HUTCH_IMAGES_DIR:?set HUTCH_IMAGES_DIR to the directory of rootfs-python}"
VERSION=$("$HUTCH" --version | awk '{print $2}')
exec /usr/bin/python3 - "$RUNS" "$HUTCH" "$HUTCH_IMAGES_DIR" "$VERSION" "$(dirname "$0")" <<'PY'
import json, os, shutil, subprocess, sys, tempfile

runs, hutch, images, version = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
from interleave import measure, report
env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
       "HUTCH_IMAGES_DIR": images}
for k in ("HUTCH_PLUGIN_DIR", "HUTCH_RUNNER_DIR", "HUTCH_INIT"):
    if k in os.environ:
        env[k] = os.environ[k]
runsc = shutil.which("runsc", path=env["PATH"])
if not runsc:
    sys.exit("runsc is not installed: apt-get install -y runsc")
rootfs = os.path.join(images, "rootfs-python")

# The hand-written bundle: what an expert would write for one run — the
# same rootfs read-only, uid 1000, no capabilities, tmpfs /tmp, a /work
# bind mount, the same runsc flags hutch uses.
tmp = tempfile.mkdtemp(prefix="hutch-bench-gvisor-")
bundle, state, work = (os.path.join(tmp, d) for d in ("bundle", "state", "work"))
for d in (bundle, state, work):
    os.mkdir(d)
os.chown(work, 1000, 1000)
spec = {
    "ociVersion": "1.0.2",
    "process": {"user": {"uid": 1000, "gid": 1000}, "cwd": "/work",
                "args": ["/usr/bin/python3", "-c", "print(1)"],
                "env": ["PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8"],
                "capabilities": {k: [] for k in ("bounding", "effective", "inheritable",
                                                 "permitted", "ambient")},
                "noNewPrivileges": True},
    "root": {"path": rootfs, "readonly": True},
    "hostname": "bench",
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "mode=1777"]},
        {"destination": "/work", "type": "bind", "source": work, "options": ["rbind", "rw"]},
    ],
    "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
              "resources": {"memory": {"limit": 512 << 20}, "pids": {"limit": 128}}},
}
with open(os.path.join(bundle, "config.json"), "w") as f:
    json.dump(spec, f)
seq = [0]
def runsc_argv():
    seq[0] += 1
    return [runsc, "--root=" + state, "--network=none", "--overlay2=root:memory",
            "--host-uds=open", "--platform=ptrace", "run", "--bundle", bundle,
            f"bench-{os.getpid()}-{seq[0]}"]

cases = [
    ("hutch run --executor gvisor", lambda: [hutch, "run", "--executor", "gvisor",
                                             "--lang", "python", "-e", "print(1)"]),
    ("runsc run (hand-written bundle)", runsc_argv),
]
image = f"hutch-python:{version}"
docker = shutil.which("docker", path=env["PATH"])
if docker and subprocess.run([docker, "image", "inspect", image], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0:
    cases.append(("docker run --runtime=runsc", lambda: [
        docker, "run", "--rm", "--runtime=runsc", "--network", "none", image,
        "python3", "-c", "print(1)"]))
else:
    print(f"(no Docker daemon with {image}: docker run --runtime=runsc is not measured)")

try:
    times = measure(cases, runs, env)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
report("gVisor cold start", times, runs)
PY
