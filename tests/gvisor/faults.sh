#!/bin/bash
# faults.sh — the gVisor executor when things go wrong: runsc missing, a
# damaged root file system, hutch killed with -9 in the middle of a run.
# Every failure must be a clear message with exit 125 and leave nothing:
# no runsc process, no bundle directory, no mount.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
GVISOR_LOCK_MODE=-x # alone among the gvisor tests (see executor.sh)
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
GV=/run/hutch/gvisor

# What gone hutch processes left: gvisor_leftovers (tests/lib/executor.sh;
# live runs of tests next to this one are not leftovers).
gv_left() { gvisor_leftovers; }
runsc_procs() { # runsc processes whose state root is under $GV, by hutch pid
    pgrep -af -- "--root=$GV/$1" 2>/dev/null | grep -v pgrep
}

# runsc missing: the probe says so, with the fix.
HUTCH_RUNSC=/nonexistent/runsc run_hutch run --lang python -e 'print(1)'
is "runsc missing: exit 125" "$RC" 125
like "runsc missing: says it is not installed" "$ERR" "runsc is not installed"
like "runsc missing: says how to install it" "$ERR" "apt-get install -y runsc"

# No root file system at all.
HUTCH_IMAGES_DIR=$T/none run_hutch run --lang python -e 'print(1)'
is "rootfs missing: exit 125" "$RC" 125
like "rootfs missing: points at make images" "$ERR" "make images"

# A damaged rootfs: no interpreter.
mkdir -p "$T/bad1/rootfs-python/usr/bin"
HUTCH_IMAGES_DIR=$T/bad1 run_hutch run --lang python -e 'print(1)'
is "rootfs without python: exit 125" "$RC" 125
like "rootfs without python: says it is damaged" "$ERR" "is damaged"

# A damaged rootfs: the interpreter is not a program.
mkdir -p "$T/bad2/rootfs-python/usr/bin" "$T/bad2/rootfs-python/work" \
    "$T/bad2/rootfs-python/tmp" "$T/bad2/rootfs-python/run/hutch"
printf 'garbage\n' >"$T/bad2/rootfs-python/usr/bin/python3"
chmod 755 "$T/bad2/rootfs-python/usr/bin/python3"
HUTCH_IMAGES_DIR=$T/bad2 run_hutch run --lang python --timeout 5000 -e 'print(1)'
is "rootfs with a broken python: exit 125" "$RC" 125
like "rootfs with a broken python: says the runner failed" "$ERR" "failed to start"
is "damaged rootfs: nothing left" "$(gv_left)" ""

# kill -9 of hutch in the middle of a run: the sandbox ends by itself (its
# init loses hutch's sockets), what it leaves on the host (state directory,
# the /work tmpfs) the next start removes (its janitor, which would remove
# it first, killed too).
"$HUTCH" run --lang python -e 'import time; print("up", flush=True); time.sleep(60)' \
    >"$T/killed.out" 2>&1 &
victim=$!
for _ in $(seq 100); do
    grep -q up "$T/killed.out" 2>/dev/null && break
    sleep 0.1
done
like "kill -9: the run was under way" "$(cat "$T/killed.out")" "up"
jp=$(janitor_of "$victim")
ok "kill -9: hutch has a janitor" test -n "$jp"
kill -9 "$jp" "$victim"
wait "$victim" 2>/dev/null
left_dir=$(ls -d "$GV/$victim".* 2>/dev/null)
ok "kill -9: the dead hutch left its state directory" test -n "$left_dir"
ok "kill -9: and its /work mount" grep -qF " $left_dir/" /proc/self/mountinfo
for _ in $(seq 50); do
    [ -z "$(runsc_procs "$victim.")" ] && break
    sleep 0.1
done
is "kill -9: the sandbox ended with hutch" "$(runsc_procs "$victim.")" ""
run_hutch run --lang python -e 'print(2)'
is "kill -9: the next run works" "$OUT" "2"
ok "kill -9: and the state directory" test ! -e "$left_dir"
is "kill -9: and its mounts" "$(grep -cF " $left_dir/" /proc/self/mountinfo)" 0

# The cgroups runsc makes for a sandbox (PARENT/hutch-PID.START.N-box) stay
# when runsc itself was killed before it could delete the sandbox (all of a
# hutch's processes killed at once, a `runsc run` killed for not ending):
# a start removes those of a hutch that is gone, even with nothing else of
# it left, and never a live hutch's.  Made here as runsc leaves them:
# empty, in every hierarchy.
CGP=${HUTCH_CGROUP_PARENT:-/hutch-gvisor}
sleep 600 &
gone_pid=$!
gone=hutch-$gone_pid.$(proc_start "$gone_pid").1-box
kill "$gone_pid"
wait "$gone_pid" 2>/dev/null
live=hutch-$$.$(proc_start $$).1-box
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CGROOTS="/sys/fs/cgroup$CGP"
else
    CGROOTS="/sys/fs/cgroup/memory$CGP /sys/fs/cgroup/pids$CGP"
fi
made=0
for r in $CGROOTS; do
    mkdir -p "$r/$gone" "$r/$live" && made=$((made + 1))
done
ok "left cgroups: made for a gone and a live hutch" test "$made" -gt 0
run_hutch run --lang python -e 'print(3)'
is "left cgroups: the next run works" "$OUT" "3"
for r in $CGROOTS; do
    ok "left cgroups: the gone hutch's is removed ($r)" test ! -e "$r/$gone"
    ok "left cgroups: the live hutch's stays ($r)" test -d "$r/$live"
    rmdir "$r/$live"
done

# Timeout and cancellation leave nothing either.
run_hutch run --lang python --timeout 800 -e 'while True: pass'
is "timeout: exit 124" "$RC" 124
is "after everything: nothing left" "$(gv_left)" ""

done_testing
