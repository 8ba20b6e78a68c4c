#!/bin/bash
# soak.sh — tests/mcp/soak.mjs, short (SOAK_SECONDS, 75 by default), on the
# local executor (or $HUTCH_EXECUTOR; tests/docker/soak.sh sets docker),
# inside the outer cgroup guard: mixed load on two hutches while upstream
# servers, sandboxes and one of the hutches are killed, then the leak
# checks.  `make soak` runs the same for 20 minutes (tests/bench/soak.sh).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
. "$HUTCH_SRCDIR/tests/lib/guard.sh"
# It kills hutches with -9 and checks what the next start removes: the
# executor's test lock alone (as pool.sh), so that no other test cleans or
# counts what a killed one left in between.
DOCKER_LOCK_MODE=-x GVISOR_LOCK_MODE=-x executor_require --exec
guard_enter || skip_all "no writable cgroup for the outer guard (run as root)"
if [ "$EXECUTOR" = docker ] && [ -z "$HUTCH_CGROUP_PARENT" ]; then
    skip_all "no cgroup path below both the memory and the pids guard: containers would run unguarded"
fi
export SOAK_SECONDS=${SOAK_SECONDS:-75}
/usr/bin/node "$HUTCH_SRCDIR/tests/mcp/soak.mjs"
