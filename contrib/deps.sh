# deps.sh — installs what hutch needs from Debian's packages (sourced by
# demo.sh and test.sh).  Idempotent: apt runs only when something is missing.
BUILD_DEPS="build-essential autoconf automake libtool pkg-config
  libcurl4-openssl-dev libcjson-dev libarchive-dev liblua5.4-dev
  libseccomp-dev libmicrohttpd-dev"
RUNTIME_DEPS="python3 nodejs procps"
TEST_DEPS="bubblewrap hyperfine clang-format curl"

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

# The pinned MCP clients and servers the tests use (tests/mcp/package-lock.json).
install_npm_deps() {
    command -v npm >/dev/null 2>&1 || install_deps npm || return 1
    if [ -d "$SRC/tests/mcp/node_modules/@modelcontextprotocol/sdk" ] &&
        [ "$SRC/tests/mcp/node_modules/.package-lock.json" -nt "$SRC/tests/mcp/package-lock.json" ]; then
        return 0
    fi
    (cd "$SRC/tests/mcp" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
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
