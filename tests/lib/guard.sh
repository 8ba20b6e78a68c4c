# guard.sh — the outer guard for hostile tests (sourced): moves this shell
# into a fresh cgroup with a pids and a memory limit, so that a containment
# bug in hutch fails a test instead of taking the machine down.  Sandboxes
# hutch creates are nested below it.  Without a usable cgroup, the hostile
# tests are skipped rather than run unguarded.
GUARD_PIDS=${GUARD_PIDS:-2000}
GUARD_MEM=${GUARD_MEM:-$((4 * 1024 * 1024 * 1024))}
GUARD_DIRS=""

guard_own() { # controller -> this process's cgroup path
    awk -F: -v c="$1" '$2 == c { print $3 }' /proc/self/cgroup
}

guard_enter() {
    name="hutch-guard-$$"
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        own=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
        base="/sys/fs/cgroup${own%/}"
        d="$base/$name"
        mkdir "$d" 2>/dev/null || return 1
        echo "+memory +pids" >"$base/cgroup.subtree_control" 2>/dev/null
        echo "$GUARD_PIDS" >"$d/pids.max" || return 1
        echo "$GUARD_MEM" >"$d/memory.max" || return 1
        # v2: processes live in leaves only; hutch nests below "run"
        mkdir "$d/run" && echo "+memory +pids" >"$d/cgroup.subtree_control" || return 1
        echo $$ >"$d/run/cgroup.procs" || return 1
        GUARD_DIRS="$d/run $d"
    else
        m="/sys/fs/cgroup/memory$(guard_own memory)"
        p="/sys/fs/cgroup/pids$(guard_own pids)"
        m="${m%/}/$name"
        p="${p%/}/$name"
        mkdir "$m" "$p" 2>/dev/null || return 1
        echo "$GUARD_MEM" >"$m/memory.limit_in_bytes" || return 1
        echo "$GUARD_PIDS" >"$p/pids.max" || return 1
        echo $$ >"$m/cgroup.procs" && echo $$ >"$p/cgroup.procs" || return 1
        GUARD_DIRS="$m $p"
    fi
    trap guard_leave EXIT
    return 0
}

# Sandbox cgroups hutch left under the guard (there must be none).
guard_leftovers() {
    for d in $GUARD_DIRS; do
        find "$d" -mindepth 1 -maxdepth 2 -type d -name 'hutch-*' 2>/dev/null
    done
}

guard_leave() {
    # Move back to the parent and remove the guard; kill anything left.
    for d in $GUARD_DIRS; do
        parent=$(dirname "$d")
        case "$d" in */run) parent=$(dirname "$parent") ;; esac
        for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do
            [ "$pid" = $$ ] || kill -9 "$pid" 2>/dev/null
        done
        echo $$ >"$parent/cgroup.procs" 2>/dev/null
    done
    for d in $GUARD_DIRS; do
        find "$d" -depth -mindepth 1 -type d -exec rmdir {} \; 2>/dev/null
        rmdir "$d" 2>/dev/null
    done
}
