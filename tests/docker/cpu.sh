#!/bin/bash
# cpu.sh — on the docker executor, HUTCH_SANDBOXES_CPU_WEIGHT weighs all
# sandboxes of an engine together against the Docker daemon, hutch's own
# threads and every other process (the issue "Many tenants, one hutch": a
# principal's flood of docker executions made the others' searches wait):
# on an engine of this host with the cgroupfs driver, hutch makes the
# containers' cgroup parent (HUTCH_CGROUP_PARENT, /hutch-docker when
# unset) and writes the weight to it (v2 cpu.weight, v1 cpu.shares 1024 for
# 100); each container's cgroup is below it, hutch is not.  Unset, the
# containers go where the daemon puts them.  With the systemd driver the
# weight is not applied, and the log says why.  A bad weight is refused at
# start with the variable, the value and the range.  (That the weight gives
# the searches the CPU is measured by `make bench-tenants`, not here.)
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
# A parent of this test's own: the weight written is this test's to check,
# and the directories are this test's to remove.
PARENT_NAME=/hutch-docker-cputest-$$
. "$HUTCH_SRCDIR/tests/lib/cpu.sh"
cleanup() {
    remove_parent "$PARENT_NAME"
    rm -rf "$T"
}
trap cleanup EXIT
if [ -z "$CPU" ]; then
    skip_all "no writable cpu controller on this host"
fi
DRIVER=$(docker info -f '{{.CgroupDriver}}' 2>/dev/null)

# sleeper_in [VAR=VALUE...]: sleeper (tests/lib/cpu.sh), then CPARENT (its
# container's CgroupParent as the daemon has it) and CCG (the cgroup of the
# container's first process in the cpu hierarchy).
sleeper_in() {
    sleeper "$T" "$@"
    local owner id
    owner="$(hostname):$HP:$(proc_start "$HP")"
    id=$(docker ps -q --filter "label=hutch.owner=$owner" | head -1)
    ok "its container runs, labelled with this hutch" test -n "$id"
    CPARENT=$(docker inspect -f '{{.HostConfig.CgroupParent}}' "$id" 2>/dev/null)
    CCG=$(cgroup_of "$(docker inspect -f '{{.State.Pid}}' "$id" 2>/dev/null)")
}

# Unset: the daemon's parent, as it is.
sleeper_in
is "unset: the container has the daemon's default parent" "$CPARENT" ""
stop_sleeper

if [ "$DRIVER" = cgroupfs ]; then
    sleeper_in HUTCH_CGROUP_PARENT="$PARENT_NAME" HUTCH_SANDBOXES_CPU_WEIGHT=12
    is "weight 12: the container's parent is the one named" "$CPARENT" "$PARENT_NAME"
    is "weight 12: the container's cgroup is below the parent" "${CCG%/*}" "$PARENT_NAME"
    is "weight 12: the parent weighs 12 ($WEIGHT_FILE)" \
        "$(cat "$CPU$PARENT_NAME/$WEIGHT_FILE")" "$(want 12)"
    is "hutch itself is not below the parent" \
        "$(cgroup_of "$HP" | grep -c "^$PARENT_NAME")" 0
    stop_sleeper
    HUTCH_CGROUP_PARENT="$PARENT_NAME" HUTCH_SANDBOXES_CPU_WEIGHT=50 \
        run_hutch run --lang python -e 'print(50)'
    is "weight 50: the run works" "$OUT" "50"
    is "weight 50: the parent weighs 50 ($WEIGHT_FILE)" \
        "$(cat "$CPU$PARENT_NAME/$WEIGHT_FILE")" "$(want 50)"
else
    HUTCH_CGROUP_PARENT="$PARENT_NAME" HUTCH_SANDBOXES_CPU_WEIGHT=12 \
        run_hutch run --lang python -e 'print(12)'
    is "the $DRIVER driver: the run works" "$OUT" "12"
    like "the $DRIVER driver: the weight is not applied" "$ERR" \
        "HUTCH_SANDBOXES_CPU_WEIGHT=12 not applied: the engine "
    like "the $DRIVER driver: the log says why" "$ERR" "uses the $DRIVER cgroup driver"
fi

refuses_bad_weights

done_testing
