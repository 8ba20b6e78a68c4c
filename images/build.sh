#!/bin/sh
# build.sh — the sandbox images, offline: `make images` runs this.
#
#   sh images/build.sh OUTDIR VERSION [python|node|python-data]…
#
# For each image, a root file system from Debian's packages only
# (debootstrap --variant=minbase, no registry), with the runtime, a
# non-root user "sandbox" (uid/gid 1000) and nothing else.  The directory
# OUTDIR/rootfs-NAME is what the gVisor executor runs as it is; when a
# Docker daemon answers, it is also imported as hutch-NAME:VERSION (no
# compression, no registry).  python-data is the data flavour: Python
# with Debian's numpy, pandas and matplotlib (the policy's
# executor_options.docker.flavour / gvisor.flavour = "data" selects it).
# The Dockerfile next to this script builds the same content from
# debian:bookworm-slim for users who have a registry.
# HUTCH_REUSE_ROOTFS=1 keeps a rootfs directory already built for VERSION
# and only imports it (contrib/test.sh: the images once per machine).
set -eu
OUT=${1:?usage: build.sh OUTDIR VERSION [python|node|python-data]...}
VERSION=${2:?usage: build.sh OUTDIR VERSION [python|node|python-data]...}
shift 2
[ $# -gt 0 ] || set -- python node python-data
# The mirror apt already uses (a machine may reach no other), unless told.
apt_mirror() {
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -f "$f" ] || continue
        m=$(awk '$1 == "URIs:" && $2 !~ /security/ { print $2; exit }
                 $1 == "deb" && $2 !~ /security/ && $2 ~ /^http/ { print $2; exit }
                 $1 == "deb" && $3 !~ /security/ && $3 ~ /^http/ { print $3; exit }' "$f")
        [ -n "$m" ] && echo "$m" && return
    done
    echo http://deb.debian.org/debian
}
MIRROR=${HUTCH_DEBIAN_MIRROR:-$(apt_mirror)}
SUITE=${HUTCH_DEBIAN_SUITE:-bookworm}

if [ "$(id -u)" != 0 ]; then
    echo "build.sh: building a root file system needs root (debootstrap)" >&2
    exit 1
fi
command -v debootstrap >/dev/null || {
    echo "build.sh: debootstrap is missing: apt-get install -y debootstrap" >&2
    exit 1
}
docker_import() { # LANG DIR
    if command -v docker >/dev/null && docker version >/dev/null 2>&1; then
        echo "importing hutch-$1:$VERSION into Docker"
        tar -C "$2" -c . | docker import --change 'USER 1000:1000' \
            --change 'WORKDIR /work' \
            --change "LABEL org.hutch.runtime=\"$(cat "$2/etc/hutch-runtime")\"" \
            --change "LABEL org.hutch.packages=\"$(cat "$2/etc/hutch-packages" 2>/dev/null)\"" \
            - "hutch-$1:$VERSION" >/dev/null
    else
        echo "no Docker daemon: $2 is built, not imported (run make images again once dockerd runs)"
    fi
}

# What debootstrap copies from the machine that builds the image (its
# hostname, its name servers) says nothing a sandbox should know: the
# sandbox's own name (the executors set the UTS name "hutch" too), no name
# server (there is no network), localhost only.  Docker mounts its own
# over these; gVisor shows the rootfs as it is.  Applied to a reused rootfs
# as well, so one built before this is neutral too.
neutralise() { # DIR
    rm -f "$1/etc/hostname" "$1/etc/resolv.conf" "$1/etc/hosts" # links too
    echo hutch >"$1/etc/hostname"
    : >"$1/etc/resolv.conf"
    printf '127.0.0.1\tlocalhost hutch\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
        >"$1/etc/hosts"
    chmod 0644 "$1/etc/hostname" "$1/etc/resolv.conf" "$1/etc/hosts"
}

# The runtime's version, in /etc/hutch-runtime and the Docker image's label
# org.hutch.runtime: `hutch doctor` shows it beside the host's, which the
# local executor runs (Debian 12 has Python 3.11 and Node.js 18; a host
# may have another Node.js, e.g. NodeSource's).  Recorded for a reused
# rootfs too.
record_runtime() { # LANG DIR
    case $1 in
    python*) v=$(chroot "$2" /usr/bin/python3 --version 2>&1) ;;
    node) v="Node.js $(chroot "$2" /usr/bin/node --version 2>&1)" ;;
    esac
    printf '%s\n' "$v" | tr -cd '[:alnum:] .+~:_\n-' | head -1 >"$2/etc/hutch-runtime"
    chmod 0644 "$2/etc/hutch-runtime"
    # The data flavour's Python packages and versions, in
    # /etc/hutch-packages and the label org.hutch.packages: `hutch doctor`
    # says which of them each executor offers.
    rm -f "$2/etc/hutch-packages"
    case $1 in
    python-data)
        chroot "$2" /usr/bin/python3 -c 'import numpy, pandas, matplotlib
print(", ".join("%s %s" % (m.__name__, m.__version__) for m in (numpy, pandas, matplotlib)))' |
            tr -cd '[:alnum:] .,+~:_\n-' | head -1 >"$2/etc/hutch-packages"
        chmod 0644 "$2/etc/hutch-packages"
        ;;
    esac
}

mkdir -p "$OUT"
for lang in "$@"; do
    case $lang in
    python) pkgs=python3 extra="" ;;
    node) pkgs=nodejs extra="" ;;
    # The data flavour: Debian's own builds (no pip, no registry), put in
    # by apt inside the new root (below), without Recommends.  fonttools
    # (matplotlib's) depends on "python3-scipy | python3-munkres": naming
    # munkres keeps scipy out, and with it pythran, g++ and boost (1.3 GB).
    python-data) pkgs=python3 extra="python3-numpy python3-pandas python3-matplotlib python3-munkres" ;;
    *)
        echo "build.sh: unknown image $lang (python, node or python-data)" >&2
        exit 1
        ;;
    esac
    dir="$OUT/rootfs-$lang"
    tmp="$dir.tmp"
    if [ "${HUTCH_REUSE_ROOTFS:-0}" = 1 ] &&
        [ "$(cat "$dir/etc/hutch-image" 2>/dev/null)" = "hutch-$lang:$VERSION" ]; then
        echo "reusing $dir"
        neutralise "$dir"
        record_runtime "$lang" "$dir"
        docker_import "$lang" "$dir"
        continue
    fi
    rm -rf "$tmp"
    echo "building $dir ($pkgs from $SUITE)"
    debootstrap --variant=minbase --include="$pkgs" "$SUITE" "$tmp" "$MIRROR" >"$tmp.log" 2>&1 || {
        tail -20 "$tmp.log" >&2
        exit 1
    }
    if [ -n "$extra" ]; then
        echo "adding $extra"
        { chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends $extra; } >>"$tmp.log" 2>&1 || {
            tail -20 "$tmp.log" >&2
            exit 1
        }
    fi
    # The sandbox user, and nothing an execution does not need: no package
    # caches, docs or manuals.
    chroot "$tmp" groupadd -g 1000 sandbox
    chroot "$tmp" useradd -u 1000 -g 1000 -d /work -M -s /usr/sbin/nologin sandbox
    mkdir -p "$tmp/work" "$tmp/run/hutch"
    chown 1000:1000 "$tmp/work"
    rm -rf "$tmp/var/cache/apt/archives"/*.deb "$tmp/var/lib/apt/lists"/* \
        "$tmp/usr/share/doc"/* "$tmp/usr/share/man"/* "$tmp/usr/share/locale"/*
    neutralise "$tmp"
    record_runtime "$lang" "$tmp"
    echo "hutch-$lang:$VERSION" >"$tmp/etc/hutch-image"
    rm -rf "$dir" "$tmp.log"
    mv "$tmp" "$dir"
    docker_import "$lang" "$dir"
done
