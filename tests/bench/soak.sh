#!/bin/bash
# soak.sh — `make soak`: tests/mcp/soak.mjs for SOAK_MINUTES (20) in all,
# shared by the executors that can run here (local; docker, with a second
# engine whose daemon the soak kills, as root; gvisor as root), one after
# the other, each inside the outer cgroup guard.  Not part of `make check`:
# CI runs the same soak for 75 s on local and docker (tests/mcp/soak.sh,
# tests/docker/soak.sh).  Prints each executor's TAP and the summary
# (requests, faults, what the long-lived hutch held before and after); the
# exit status says whether every check passed.
#   SOAK_MINUTES=60 make soak             20 minutes per executor
#   SOAK_EXECUTORS=docker make soak       one executor
# Other knobs: SOAK_FAULT_EVERY (seconds between faults, 10), SOAK_WORKERS
# (load workers per hutch, 3), SOAK_RSS_SLACK (0.1).
set -u
: "${HUTCH_SRCDIR:?run through make soak}" "${HUTCH_BUILDDIR:?}"
cd "$HUTCH_BUILDDIR" || exit 1
want=${SOAK_EXECUTORS:-local docker gvisor}
run=""
for e in ${want//,/ }; do
    line=$("$HUTCH_BUILDDIR/hutch" plugins 2>&1 | awk -v n="$e" '$1 == n')
    case "$line" in
    *" usable "*) run="$run $e" ;;
    *) echo "soak: $e skipped: ${line:-no $e plugin}" ;;
    esac
done
set -- $run
[ $# -gt 0 ] || { echo "soak: no executor can run"; exit 1; }
secs=$(( ${SOAK_MINUTES:-20} * 60 / $# ))
echo "soak: ${SOAK_MINUTES:-20} minutes in all: $secs s on each of$run"
rc=0
export SOAK_FULL=1 # every check asserted (see tests/mcp/soak.mjs)
for e in "$@"; do
    echo "=== soak on $e ($secs s) ==="
    if [ "$e" = docker ]; then
        SOAK_SECONDS=$secs bash "$HUTCH_SRCDIR/tests/docker/soak.sh" || rc=1
    else
        SOAK_SECONDS=$secs HUTCH_EXECUTOR=$e bash "$HUTCH_SRCDIR/tests/mcp/soak.sh" || rc=1
    fi
done
echo "soak: $([ $rc = 0 ] && echo "every check passed" || echo "FAILED (see the not ok lines above)")"
exit $rc
