#!/usr/bin/python3
"""engines_probe.py — what an engine makes of the Docker API calls hutch's
docker executor makes (tests/lib/engines_smoke.sh runs it against the second
dockerd and podman's service): GET /version, POST /containers/create with
the fields of create_body() in plugins/docker/docker.c (no Binds: a remote
engine has none of hutch's paths), PUT and GET /archive, a hijacked attach
of stdin/stdout/stderr, and the removal of the container with its volume.

    engines_probe.py IMAGE [--lenient] (DOCKER_HOST, DOCKER_TLS_VERIFY,
                                       DOCKER_CERT_PATH as the docker CLI;
                                       refused without DOCKER_HOST or on
                                       the main daemon's socket)

Prints one line per check, "ok - …" or "not ok - …" with what came back,
and the HostConfig fields the engine dropped or changed; exit 1 when a
check failed.  With --lenient (podman), a hardening hutch asks for and the
engine does not give (masked paths, cgroup namespace, /work's size) is
"differs - …" and fails nothing.  Not here: hutch itself (the run and files suites)."""
import http.client
import io
import json
import os
import socket
import ssl
import sys
import tarfile
import time
import urllib.parse

API = "/v1.41"
FAILED = 0


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def connection(timeout=60):
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        return UnixConnection(host[7:], timeout)
    hostport = host[6:]
    h, p = hostport.rsplit(":", 1)
    if os.environ.get("DOCKER_TLS_VERIFY"):
        d = os.environ.get("DOCKER_CERT_PATH", os.path.expanduser("~/.docker"))
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
        ctx.load_cert_chain(os.path.join(d, "cert.pem"), os.path.join(d, "key.pem"))
        return http.client.HTTPSConnection(h, int(p), context=ctx, timeout=timeout)
    return http.client.HTTPConnection(h, int(p), timeout=timeout)


def call(method, path, body=None, ctype="application/json", timeout=60):
    c = connection(timeout)
    headers = {}
    if body is not None:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers["Content-Type"] = ctype
    c.request(method, API + path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


LENIENT = False


def check(desc, cond, got="", hardening=False):
    """hardening: a property of hutch's sandbox the engine may not give
    (--lenient reports it as "differs -" instead of failing)."""
    global FAILED
    if cond:
        print("ok - " + desc)
    elif hardening and LENIENT:
        print("differs - %s: %s" % (desc, str(got)[:300]))
    else:
        FAILED += 1
        print("not ok - %s: %s" % (desc, str(got)[:600]))
    return cond


def frames(data):
    """Docker's multiplexed stream: 8-byte headers (stream, 0, 0, 0, size)."""
    out = {1: b"", 2: b""}
    i = 0
    while i + 8 <= len(data):
        n = int.from_bytes(data[i + 4:i + 8], "big")
        out[data[i]] = out.get(data[i], b"") + data[i + 8:i + 8 + n]
        i += 8 + n
    return out


def body_like_hutch(image, cmd, attach=False):
    """create_body() of plugins/docker/docker.c, without Binds."""
    return {
        "Image": image,
        "Entrypoint": [],
        "Cmd": cmd,
        "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"],
        "User": "0:0",
        "WorkingDir": "/work",
        "Hostname": "hutch",
        "NetworkDisabled": True,
        "AttachStdin": attach,
        "AttachStdout": attach,
        "AttachStderr": attach,
        "OpenStdin": attach,
        "StdinOnce": attach,
        "Labels": {"hutch.instance": "probe", "hutch.execution": "probe",
                   "hutch.owner": "probe"},
        "HostConfig": {
            "NetworkMode": "none",
            "ReadonlyRootfs": True,
            "MaskedPaths": ["/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys",
                            "/proc/latency_stats", "/proc/timer_list",
                            "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                            "/sys/firmware", "/sys/devices/virtual/powercap",
                            "/proc/cmdline", "/proc/config.gz",
                            "/proc/sys/kernel/random/boot_id"],
            "CapDrop": ["ALL"],
            "CapAdd": ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL"],
            "SecurityOpt": ["no-new-privileges"],
            "PidsLimit": 128,
            "Memory": 256 << 20,
            "MemorySwap": 256 << 20,
            "NanoCpus": 1000000000,
            "ShmSize": 16 << 20,
            "CgroupnsMode": "private",
            "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=16777216,mode=1777"},
            "Mounts": [{
                "Type": "volume",
                "Target": "/work",
                "VolumeOptions": {
                    "Labels": {"hutch.owner": "probe"},
                    "DriverConfig": {"Name": "local", "Options": {
                        "type": "tmpfs", "device": "tmpfs",
                        "o": "size=33554432,uid=1000,gid=1000,mode=0755,nosuid,nodev"}},
                },
            }],
            "LogConfig": {"Type": "json-file", "Config": {"max-size": "1m"}},
        },
    }


# What the container reports of itself, once /work/in.txt is there; then,
# as the sandbox user, /work/out/y.txt; then it waits to be removed.: user, capabilities, /work's and
# /tmp's mounts, the masked files, its cgroup, the pids limit, the root.
REPORT = r"""
def r(p):
    try:
        return open(p).read().strip()
    except Exception as e:
        return "ERR " + type(e).__name__
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
mounts = [l.split() for l in open("/proc/self/mounts")]
def mnt(p):
    return [m[2] + " " + m[3] for m in mounts if m[1] == p]
import json
print(json.dumps({
    "uid": os.getuid(), "CapBnd": st["CapBnd"].strip(), "NoNewPrivs": st["NoNewPrivs"].strip(),
    "work": mnt("/work"), "tmp": mnt("/tmp"), "shm": mnt("/dev/shm"),
    "cmdline": r("/proc/cmdline")[:20], "boot_id": r("/proc/sys/kernel/random/boot_id")[:8],
    "cgroup": r("/proc/self/cgroup").splitlines()[0],
    "pids_max": r("/sys/fs/cgroup/pids/pids.max") if os.path.exists("/sys/fs/cgroup/pids") else r("/sys/fs/cgroup/pids.max"),
    "root": mnt("/"), "hostname": r("/etc/hostname"), "nets": sorted(os.listdir("/sys/class/net")),
    "work_files": sorted(os.listdir("/work")),
}), flush=True)
"""
PROGRAM = """
import os, time
for _ in range(600):
    if os.path.exists("/work/in.txt"):
        break
    time.sleep(0.1)
os.setgroups([])
os.setgid(1000)
os.setuid(1000)
os.makedirs("/work/out")
open("/work/out/y.txt", "w").write(open("/work/in.txt").read().upper())
""" + REPORT + """
time.sleep(600)
"""


def tar_of(name, data):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        i = tarfile.TarInfo(name)
        i.size = len(data)
        i.uid = i.gid = 1000
        t.addfile(i, io.BytesIO(data))
    return b.getvalue()


def volumes_labelled():
    q = urllib.parse.quote(json.dumps({"label": ["hutch.owner=probe"]}))
    s, d = call("GET", "/volumes?filters=" + q)
    return [v["Name"] for v in (json.loads(d).get("Volumes") or [])] if s == 200 else None


def remove(cid):
    s, d = call("DELETE", "/containers/%s?force=1&v=1" % cid)
    return s, d


def main():
    global LENIENT
    image = sys.argv[1]
    LENIENT = "--lenient" in sys.argv[2:]
    # It creates containers: never on the machine's main daemon, which
    # the other tests (and CI) own.
    host = os.environ.get("DOCKER_HOST", "")
    if not host or os.path.realpath(host.replace("unix://", "", 1)) in (
            "/run/docker.sock", "/var/run/docker.sock"):
        sys.exit("engines_probe.py: DOCKER_HOST must name the engine to probe "
                 "(not the main daemon): %r" % host)
    s, d = call("GET", "/version")
    v = json.loads(d)
    check("GET /version", s == 200, d)
    print("# version: %s %s, ApiVersion %s, MinAPIVersion %s" % (
        (v.get("Components") or [{}])[0].get("Name"), v.get("Version"),
        v.get("ApiVersion"), v.get("MinAPIVersion")))
    s, d = call("GET", "/images/%s/json" % image)
    check("GET /images/NAME/json", s == 200, d)
    if s == 200:
        img = json.loads(d)
        print("# image RepoTags %s, labels %s" % (img.get("RepoTags"),
                                                 (img.get("Config") or {}).get("Labels")))

    # --- create with hutch's fields; as hutch does, files go in with PUT
    # /archive once the program runs, and come out with GET /archive while
    # the container still runs (its /work is a tmpfs volume).
    s, d = call("POST", "/containers/create", body_like_hutch(image, ["python3", "-c", PROGRAM]))
    if not check("POST /containers/create with hutch's fields", s == 201, d):
        return
    cid = json.loads(d)["Id"]
    for w in json.loads(d).get("Warnings") or []:
        print("# create warning: " + w)
    s, d = call("GET", "/containers/%s/json" % cid)
    hc = json.loads(d)["HostConfig"]
    sent = body_like_hutch(image, [])["HostConfig"]
    for k in sorted(sent):
        got = hc.get(k)
        if k == "Mounts":
            got = json.loads(d).get("Mounts")
            print("# inspect .Mounts: %s" % json.dumps(got)[:400])
            continue
        if got != sent[k]:
            print("# HostConfig.%s: sent %s, inspect says %s" % (
                k, json.dumps(sent[k])[:200], json.dumps(got)[:200]))
    s, d = call("POST", "/containers/%s/start" % cid)
    check("POST /start", s == 204, (s, d))
    s, d = call("PUT", "/containers/%s/archive?path=/work" % cid, tar_of("in.txt", b"payload"),
                "application/x-tar")
    check("PUT /archive into the running container's volume", s == 200, (s, d))
    rep, d = {}, b""
    for _ in range(300):
        s, d = call("GET", "/containers/%s/logs?stdout=1&stderr=1" % cid)
        lines = frames(d)[1].decode(errors="replace").strip().splitlines()
        if lines:
            try:
                rep = json.loads(lines[-1])
            except ValueError:
                pass
            break
        time.sleep(0.1)
    check("the program's report in the logs", bool(rep), frames(d))
    print("# inside: " + json.dumps(rep))
    check("hutch's four capabilities only (bounding set)",
          rep.get("CapBnd") == "00000000000001e0", rep.get("CapBnd"))
    check("/work is a 32 MiB tmpfs of uid 1000 (volume, DriverConfig local tmpfs)",
          any(w.startswith("tmpfs") and "size=32768k" in w and "uid=1000" in w
              for w in rep.get("work", [])), rep.get("work"), True)
    check("/work has the file put in", "in.txt" in rep.get("work_files", []), rep)
    check("/tmp is a tmpfs", any(w.startswith("tmpfs") for w in rep.get("tmp", [])), rep)
    check("read-only root", any(w.split()[1].startswith("ro") for w in rep.get("root", [])),
          rep.get("root"))
    check("masked /proc/cmdline (MaskedPaths)", rep.get("cmdline") in ("", "ERR PermissionError"),
          rep.get("cmdline"), True)
    check("masked boot_id (MaskedPaths)", rep.get("boot_id") in ("", "ERR PermissionError"),
          rep.get("boot_id"), True)
    check("no network but lo", rep.get("nets") == ["lo"], rep.get("nets"))
    check("pids limit 128", rep.get("pids_max") == "128", rep.get("pids_max"))
    check("cgroup namespace private (CgroupnsMode)", rep.get("cgroup", "").endswith(":/"),
          rep.get("cgroup"), True)
    check("no_new_privs", rep.get("NoNewPrivs") == "1", rep)
    s, d = call("GET", "/containers/%s/archive?path=/work/out/." % cid)
    got = {}
    if s == 200:
        with tarfile.open(fileobj=io.BytesIO(d)) as t:
            for m in t.getmembers():
                if m.isfile():
                    got[m.name] = t.extractfile(m).read()
    check("GET /archive of /work/out/. while it runs",
          got.get("./y.txt", got.get("y.txt")) == b"PAYLOAD", (s, got or d[:200]))
    check("its members are named ./NAME", "./y.txt" in got, sorted(got), True)
    vols = volumes_labelled()
    check("the volume is listed by its label", vols and len(vols) == 1, vols, True)
    s, d = remove(cid)
    check("DELETE /containers/ID?force=1&v=1", s == 204, (s, d))
    left = volumes_labelled()
    check("the anonymous volume went with the container", not left, left)
    for n in left:
        call("DELETE", "/volumes/%s?force=1" % n)

    # --- /work as a named volume made first (POST /volumes/create), its
    # size as tmpfs's nr_blocks (pages): podman reads "size=" in "o" as an
    # XFS project quota and refuses it, and ignores the DriverConfig of a
    # volume made by /containers/create; Docker takes both forms.
    s, d = call("POST", "/volumes/create", {
        "Name": "hutch-probe-work", "Driver": "local",
        "DriverOpts": {"type": "tmpfs", "device": "tmpfs",
                       "o": "nr_blocks=8192,uid=1000,gid=1000,mode=0755,nosuid,nodev"},
        "Labels": {"hutch.owner": "probe"}})
    if check("POST /volumes/create, tmpfs with nr_blocks", s == 201, (s, d)):
        body = body_like_hutch(image, ["sh", "-c", "grep ' /work ' /proc/mounts"])
        body["HostConfig"]["Mounts"] = [{"Type": "volume", "Source": "hutch-probe-work",
                                         "Target": "/work"}]
        s, d = call("POST", "/containers/create", body)
        if check("create with the named volume", s == 201, (s, d)):
            cid = json.loads(d)["Id"]
            call("POST", "/containers/%s/start" % cid)
            call("POST", "/containers/%s/wait" % cid, timeout=120)
            s, d = call("GET", "/containers/%s/logs?stdout=1&stderr=1" % cid)
            w = frames(d).get(1, b"").decode(errors="replace")
            check("the named volume is a 32 MiB tmpfs of uid 1000",
                  "size=32768k" in w and "uid=1000" in w, w)
            remove(cid)
        check("the named volume is listed by its label", volumes_labelled() == ["hutch-probe-work"],
              volumes_labelled())
        s, d = call("DELETE", "/volumes/hutch-probe-work")
        check("DELETE /volumes/NAME", s == 204, (s, d))

    # --- attach: hijacked stdin/stdout/stderr before start.  Over a unix
    # socket stdin's end is a half-close (shutdown(SHUT_WR)); over TLS it
    # would be a close_notify alert (Go's tls.Conn.CloseWrite, as the docker
    # CLI does), which Python's ssl cannot send alone: there the program
    # reads one line instead.
    tls = isinstance(connection(), http.client.HTTPSConnection)
    prog = ("import sys; d = sys.stdin.%s(); print(d.upper().strip()); "
            "print('err', file=sys.stderr)" % ("readline" if tls else "read"))
    s, d = call("POST", "/containers/create", body_like_hutch(
        image, ["python3", "-c", prog], attach=True))
    if not check("create with OpenStdin", s == 201, d):
        return
    cid = json.loads(d)["Id"]
    c = connection(60)
    c.connect()
    sock = c.sock
    req = ("POST %s/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
           "Host: localhost\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
           "Content-Type: application/vnd.docker.raw-stream\r\n\r\n" % (API, cid))
    sock.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = sock.recv(1)
        if not b:
            break
        head += b
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    print("# attach answered: %s" % " | ".join(head.decode(errors="replace").strip().splitlines()))
    check("attach is hijacked (101 or 200 then raw stream)",
          " 101 " in status or " 200 " in status, status)
    s, d = call("POST", "/containers/%s/start" % cid)
    check("start after attach", s == 204, (s, d))
    sock.sendall(b"hello from stdin\n")
    if not tls:
        sock.shutdown(socket.SHUT_WR)  # EOF on the program's stdin
    data = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            b = sock.recv(65536)
        except socket.timeout:
            break
        except ssl.SSLError as e:
            print("# TLS read: %s" % e)
            break
        if not b:
            break
        data += b
    sock.close()
    out = frames(data)
    check("attach: stdout through the stream", b"HELLO FROM STDIN" in out.get(1, b""),
          (out, data[:200]))
    check("attach: stderr through the stream", b"err" in out.get(2, b""), (out, data[:200]))
    s, d = call("POST", "/containers/%s/wait" % cid, timeout=120)
    check("attach: exit 0", s == 200 and json.loads(d).get("StatusCode") == 0, (s, d))
    remove(cid)

    # --- what hutch's Binds become on this engine (a path of this host)
    body = body_like_hutch(image, ["sh", "-c", "ls -A /probe-bind | head -3; echo end"])
    body["HostConfig"]["Binds"] = [os.path.dirname(os.path.abspath(__file__)) + ":/probe-bind:ro"]
    s, d = call("POST", "/containers/create", body)
    if s == 201:
        cid = json.loads(d)["Id"]
        call("POST", "/containers/%s/start" % cid)
        call("POST", "/containers/%s/wait" % cid, timeout=120)
        s, d = call("GET", "/containers/%s/logs?stdout=1&stderr=1" % cid)
        seen = frames(d).get(1, b"").decode().split()
        print("# a bind of this host's %s shows: %s" % (
            os.path.dirname(os.path.abspath(__file__)), seen))
        remove(cid)
    else:
        print("# a bind of this host's path: create says %s %s" % (s, d[:200]))


if __name__ == "__main__":
    main()
    sys.exit(1 if FAILED else 0)
