#!/bin/bash
# cpu.sh — on the gvisor executor, HUTCH_SANDBOXES_CPU_WEIGHT weighs all
# sandboxes together against hutch's own threads (the issue "Many tenants,
# one hutch": a principal's flood of gVisor executions made the others'
# searches wait): it is written to the sandboxes' cgroup parent (v2
# cpu.weight, v1 cpu.shares 1024 for 100), whose children hold each
# sandbox's gofer and sentry, while hutch and its runsc commands stay
# outside it.  Unset, the parent's weight is left as it is.  A bad weight
# is refused at start with the variable, the value and the range.  (That
# the weight gives the searches the CPU is measured by `make
# bench-tenants`, not here.)
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
# A parent of this test's own: the weight written is this test's to check,
# and the directories are this test's to remove.
export HUTCH_CGROUP_PARENT=/hutch-gvisor-cputest-$$
. "$HUTCH_SRCDIR/tests/lib/cpu.sh"
cleanup() {
    remove_parent "$HUTCH_CGROUP_PARENT"
    rm -rf "$T"
}
trap cleanup EXIT
if [ -z "$CPU" ]; then
    skip_all "no writable cpu controller on this host"
fi
PARENT=$CPU$HUTCH_CGROUP_PARENT

# While a program sleeps, where its runsc commands and its sandbox run.
sleeper "$T"
hp=$HP
hstart=$(proc_start "$hp")
cli="" sandbox=""
for p in $(pgrep -f -- "--root=$GVISOR_DIR/$hp.$hstart/root"); do
    case "$(tr '\0' ' ' <"/proc/$p/cmdline")" in
    runsc-gofer* | runsc-sandbox*) sandbox="$sandbox $(cgroup_of "$p")" ;;
    *) cli="$cli $(cgroup_of "$p")" ;;
    esac
done
ok "a runsc command of this hutch runs" test -n "$cli"
for c in $cli; do
    is "runsc command: in hutch's cgroup, not below the parent" "$c" "$(cgroup_of "$hp")"
done
ok "the sandbox's gofer and sentry run" test -n "$sandbox"
for c in $sandbox; do
    # PARENT/hutch-PID.START.N-box
    is "gofer and sentry: in their sandbox's cgroup below the parent" "${c%.*}" \
        "$HUTCH_CGROUP_PARENT/hutch-$hp.$hstart"
done
is "hutch itself is not below the parent" \
    "$(cgroup_of "$hp" | grep -c "^$HUTCH_CGROUP_PARENT")" 0
is "unset: the parent runsc made weighs the kernel's default ($WEIGHT_FILE)" \
    "$(cat "$PARENT/$WEIGHT_FILE")" "$(want 100)"
stop_sleeper

# The weight is the operator's to choose.
for w in 12 50; do
    HUTCH_SANDBOXES_CPU_WEIGHT=$w run_hutch run --lang python -e "print($w)"
    is "HUTCH_SANDBOXES_CPU_WEIGHT=$w: the run works" "$OUT" "$w"
    is "HUTCH_SANDBOXES_CPU_WEIGHT=$w: the parent weighs $w ($WEIGHT_FILE)" \
        "$(cat "$PARENT/$WEIGHT_FILE")" "$(want "$w")"
done

refuses_bad_weights

done_testing
