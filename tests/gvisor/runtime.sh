#!/bin/bash
# runtime.sh — `hutch doctor` says which runtime each gVisor rootfs carries
# (its /etc/hutch-runtime, written by images/build.sh), next to the host's
# that the local executor runs: Debian 12's images carry Node.js 18 while a
# host may run another (doc/executors.md: "One runtime per language?").  The rootfs
# directories are the built ones seen through an overlay whose upper layer
# holds a made-up version, so the line shown can only come from the file.
# The sandboxes doctor tries the platforms in leave no cgroup behind.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
IMAGES=${HUTCH_IMAGES_DIR:-$HUTCH_BUILDDIR/images}
T=$(mktemp -d)
MOUNTS=()
cleanup() {
    for m in "${MOUNTS[@]}"; do umount "$m"; done
    rm -rf "$T"
}
trap cleanup EXIT

for r in python node; do
    mkdir -p "$T/images/rootfs-$r" "$T/u-$r/etc" "$T/w-$r"
    echo "Made-up $r 0.0.1-test" >"$T/u-$r/etc/hutch-runtime"
    mount -t overlay overlay -o "lowerdir=$IMAGES/rootfs-$r,upperdir=$T/u-$r,workdir=$T/w-$r" \
        "$T/images/rootfs-$r" || skip_all "no overlay mount here"
    MOUNTS+=("$T/images/rootfs-$r")
done
HUTCH_IMAGES_DIR="$T/images" run_hutch doctor
like "doctor: the python rootfs's runtime" "$OUT" "rootfs-python (Made-up python 0.0.1-test)"
like "doctor: the node rootfs's runtime" "$OUT" "rootfs-node (Made-up node 0.0.1-test)"
like "doctor: the host's Node.js, the local executor's" "$OUT" "($(/usr/bin/node --version))"

# The data flavour's packages, from its /etc/hutch-packages (doctor reads
# only that file of it).
like "doctor: no data rootfs, a warning that says how to build it" "$OUT" \
    'warn  python packages        gvisor: base rootfs-python: none of numpy, pandas, matplotlib; flavour "data": '
mkdir -p "$T/images/rootfs-python-data/etc"
echo "numpy 0.0-test, pandas 0.0-test, matplotlib 0.0-test" >"$T/images/rootfs-python-data/etc/hutch-packages"
HUTCH_IMAGES_DIR="$T/images" run_hutch doctor
like "doctor: the data rootfs's Python packages" "$OUT" \
    "ok    python packages        gvisor: base rootfs-python: none of numpy, pandas, matplotlib; flavour \"data\" ($T/images/rootfs-python-data): numpy 0.0-test, pandas 0.0-test, matplotlib 0.0-test"
like "doctor: the host's Python packages, the local executor's" "$OUT" \
    "python packages        local (the host's"

rm "$T/images/rootfs-node/etc/hutch-runtime" # through the overlay
HUTCH_IMAGES_DIR="$T/images" run_hutch doctor
like "doctor: a rootfs without the file is said to need make images" "$OUT" \
    "rootfs-node (runtime version not recorded: run 'make images' again)"

# Each platform doctor tries runs a sandbox of its own, whose cgroup is
# /hutch-try-PID-XXXXXX in every hierarchy; runsc left them all behind, 9
# empty cgroups a doctor on cgroup v1.  By doctor's pid, made after the
# marker: not another hutch's, nor an old one's whose pid this one reuses.
touch "$T/marker"
"$HUTCH" doctor >"$T/doctor.out" 2>&1 </dev/null &
dp=$!
wait "$dp"
like "doctor: the ptrace platform was tried" "$(cat "$T/doctor.out")" "gvisor platform ptrace"
is "doctor: its try sandboxes left no cgroup" \
    "$(find /sys/fs/cgroup /sys/fs/cgroup/* -maxdepth 1 -type d -name "hutch-try-$dp-*" \
        -newer "$T/marker" 2>/dev/null | tr '\n' ' ')" ""

# One left behind all the same (a try still busy past the wait, a doctor
# killed mid-try) is swept by the next hutch once its process is gone: a
# made one, named for a pid that ended, in the cpu hierarchy (v1) or the
# top (v2).
true &
gone=$!
wait "$gone"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cgtop=/sys/fs/cgroup; else cgtop=/sys/fs/cgroup/cpu; fi
if mkdir "$cgtop/hutch-try-$gone-tEsT00" 2>/dev/null; then
    "$HUTCH" doctor >/dev/null 2>&1 </dev/null
    ok "a gone doctor's leftover try cgroup is swept" [ ! -d "$cgtop/hutch-try-$gone-tEsT00" ]
    rmdir "$cgtop/hutch-try-$gone-tEsT00" 2>/dev/null
else
    ok "a gone doctor's leftover try cgroup is swept # SKIP cannot make a cgroup in $cgtop" true
fi

done_testing
