# deps.sh — installs what hutch needs from Debian's packages (sourced by
# demo.sh and test.sh).  Idempotent: apt runs only when something is missing.
# python3-dev: the headers of the local executor's Python zygote (its
# library, libpython3.X, comes with them; hutch loads it at run time).
BUILD_DEPS="build-essential autoconf automake libtool pkg-config
  libcurl4-openssl-dev libcjson-dev libarchive-dev liblua5.4-dev
  libseccomp-dev libmicrohttpd-dev libssl-dev python3-dev"
RUNTIME_DEPS="python3 nodejs procps"
# systemd: systemd-analyze, for tests/run/packaging.sh's verify of the unit.
# python3-numpy/pandas/matplotlib: the data flavour on the local executor
# (it runs the host's Python with the host's packages; the chart test).
# iproute2, podman: the remote engines' tests (tests/lib/dockerd2.sh: a
# second dockerd in a network namespace, over a veth; tests/lib/podman.sh:
# podman's Docker-compatible service, which brings conmon and runc).
TEST_DEPS="bubblewrap hyperfine clang clang-format curl docker.io runsc debootstrap socat
  openssl systemd python3-numpy python3-pandas python3-matplotlib iproute2 podman"

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_deps() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
            missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

# The pinned MCP clients and servers the tests use (tests/mcp/package-lock.json),
# and the agent clients (tests/clients/package-lock.json).
install_npm_deps() {
    command -v npm >/dev/null 2>&1 || install_deps npm || return 1
    if ! [ -d "$SRC/tests/mcp/node_modules/@modelcontextprotocol/sdk" ] ||
        ! [ "$SRC/tests/mcp/node_modules/.package-lock.json" -nt "$SRC/tests/mcp/package-lock.json" ]; then
        (cd "$SRC/tests/mcp" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || return 1
    fi
    # The agent clients (tests/clients), in their own lock file so that the
    # MCP suite's install stays small.  --ignore-scripts: Claude Code's
    # postinstall only copies its platform binary, which the tests take from
    # the platform package; Gemini CLI's optional node-pty would be compiled.
    if ! [ -d "$SRC/tests/clients/node_modules/@openai/codex" ] ||
        ! [ "$SRC/tests/clients/node_modules/.package-lock.json" -nt "$SRC/tests/clients/package-lock.json" ]; then
        (cd "$SRC/tests/clients" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null) || return 1
    fi
}

# build DIR [configure args…]: configure and build out of tree in DIR.
build() {
    dir=$1
    shift
    [ -x "$SRC/configure" ] || (cd "$SRC" && autoreconf -fi >autoreconf.out 2>&1) || {
        cat "$SRC/autoreconf.out"
        return 1
    }
    mkdir -p "$dir" && cd "$dir" || return 1
    [ -f Makefile ] || "$SRC/configure" "$@" >configure.out || {
        cat configure.out
        return 1
    }
    make -j"$(nproc)" >make.out 2>&1 || {
        cat make.out
        return 1
    }
    cd "$SRC"
}

# The docker executor's tests need a running dockerd that knows runsc
# (registered without a network, see doc/executors.md, "The gVisor
# executor") and the sandbox images.
# Idempotent: a configured, running daemon and built images are left as
# they are.
docker_up() { docker version >/dev/null 2>&1; }

setup_docker() {
    runsc=$(command -v runsc) || {
        echo "runsc is missing"
        return 1
    }
    # Register runsc in /etc/docker/daemon.json unless it is there already
    # (someone's own registration is left alone); 10: changed.
    as_root /usr/bin/python3 - "$runsc" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
try:
    with open(path) as f:
        conf = json.load(f)
except FileNotFoundError:
    conf = {}
runtimes = conf.setdefault("runtimes", {})
if "runsc" in runtimes:
    sys.exit(0)
# --host-uds=open: hutch-init reaches hutch's sockets bind-mounted into the
# sandbox (executor_options.docker.runtime = "runsc").
runtimes["runsc"] = {"path": sys.argv[1],
                     "runtimeArgs": ["--network=none", "--host-uds=open"]}
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".tmp", "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)
print(f"registered runsc in {path}")
sys.exit(10)
PY
    case $? in
    0) ;;
    10) [ ! -f /var/run/docker.pid ] || as_root kill -HUP "$(cat /var/run/docker.pid)" ;;
    *)
        echo "cannot update /etc/docker/daemon.json"
        return 1
        ;;
    esac
    docker_up && return 0
    echo "starting dockerd (log: /var/log/hutch-dockerd.log)"
    if [ -d /run/systemd/system ]; then
        as_root systemctl start docker
    else
        # Detached and holding none of our descriptors (CI's output pipe).
        as_root /usr/bin/python3 -c 'import os, subprocess
subprocess.Popen(["dockerd"], stdin=subprocess.DEVNULL,
                 stdout=open("/var/log/hutch-dockerd.log", "ab"),
                 stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)'
    fi
    for _ in $(seq 120); do
        docker_up && return 0
        sleep 0.5
    done
    echo "dockerd did not come up: see /var/log/hutch-dockerd.log"
    return 1
}

# ensure_images BUILDDIR: the rootfs directories in BUILDDIR/images and the
# hutch-python/hutch-node/hutch-python-data images of this version, built
# once (as root, debootstrap from Debian's mirror); built rootfs
# directories are reused, so a machine that has the first two builds only
# the data flavour (about three minutes).
ensure_images() {
    v=$(sed -n 's/^PACKAGE_VERSION = //p' "$1/Makefile")
    if [ -d "$1/images/rootfs-python" ] && [ -d "$1/images/rootfs-node" ] &&
        [ -d "$1/images/rootfs-python-data" ] &&
        docker image inspect "hutch-python:$v" "hutch-node:$v" "hutch-python-data:$v" \
            >/dev/null 2>&1; then
        return 0
    fi
    echo "building the sandbox images (log: $1/images.out)"
    as_root env HUTCH_REUSE_ROOTFS=1 make -C "$1" images >"$1/images.out" 2>&1 &&
        docker image inspect "hutch-python:$v" "hutch-node:$v" "hutch-python-data:$v" \
            >/dev/null 2>&1 || {
        tail -30 "$1/images.out"
        return 1
    }
}
