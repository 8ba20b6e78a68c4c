# guard.sh — the outer guard for hostile tests (sourced): moves this shell
# into a fresh cgroup with a pids and a memory limit, so that a containment
# bug in hutch fails a test instead of taking the machine down.  Sandboxes
# hutch creates are nested below it.  Without a usable cgroup, the hostile
# tests are skipped rather than run unguarded.
#
# Docker makes a container's cgroups at one path (its CgroupParent) in every
# hierarchy, so guard_enter exports HUTCH_CGROUP_PARENT, the guard's path
# relative to the hierarchy root, when one path can hold both limits (empty
# otherwise); guard_leave removes what was made at that path in every
# hierarchy.
GUARD_PIDS=${GUARD_PIDS:-2000}
GUARD_MEM=${GUARD_MEM:-$((4 * 1024 * 1024 * 1024))}
GUARD_DIRS=""  # where this shell is limited
GUARD_ALL=""   # the guard's directory in every hierarchy (sandboxes below)
GUARD_MADE=""  # directories to remove on leave, deepest first
GUARD_HOME=""  # this shell's cgroups before
export HUTCH_CGROUP_PARENT=""

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
        GUARD_HOME=$base
        echo $$ >"$d/run/cgroup.procs" || return 1
        GUARD_DIRS="$d/run $d"
        GUARD_ALL=$d
        HUTCH_CGROUP_PARENT="${own%/}/$name"
    else
        mo=$(guard_own memory)
        po=$(guard_own pids)
        # One path below this shell's cgroup in both hierarchies, if any.
        rel=""
        case "${mo%/}/" in "${po%/}/"*) rel="${mo%/}/$name" ;; esac
        case "${po%/}/" in "${mo%/}/"*) rel="${po%/}/$name" ;; esac
        if [ -n "$rel" ]; then
            m="/sys/fs/cgroup/memory$rel"
            p="/sys/fs/cgroup/pids$rel"
            for h in /sys/fs/cgroup/*; do
                [ -d "$h" ] && [ ! -L "$h" ] && [ -f "$h/cgroup.procs" ] || continue
                GUARD_ALL="$GUARD_ALL $h$rel"
                d="$h$rel"
                while [ ! -d "$d" ]; do
                    GUARD_MADE="$GUARD_MADE $d"
                    d=$(dirname "$d")
                done
            done
            [ ! -d "$m" ] && [ ! -d "$p" ] && mkdir -p "$m" "$p" || return 1
            HUTCH_CGROUP_PARENT=$rel
        else
            m="/sys/fs/cgroup/memory${mo%/}/$name"
            p="/sys/fs/cgroup/pids${po%/}/$name"
            mkdir "$m" "$p" 2>/dev/null || return 1
            GUARD_ALL="$m $p"
        fi
        echo "$GUARD_MEM" >"$m/memory.limit_in_bytes" || return 1
        echo "$GUARD_PIDS" >"$p/pids.max" || return 1
        GUARD_HOME="/sys/fs/cgroup/memory$mo /sys/fs/cgroup/pids$po"
        echo $$ >"$m/cgroup.procs" && echo $$ >"$p/cgroup.procs" || return 1
        GUARD_DIRS="$m $p"
    fi
    trap guard_leave EXIT
    return 0
}

# guard_child_enter NAME: moves the calling (sub)shell into a cgroup NAME
# of its own below the guard, in every hierarchy that limits it (a hutch
# started there makes its sandbox cgroups there, not beside the guard's).
guard_child_enter() {
    local d c
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        d="$GUARD_ALL/$1" # beside "run": v2's processes live in leaves
        mkdir -p "$d" && echo "$BASHPID" >"$d/cgroup.procs"
        return
    fi
    for d in $GUARD_DIRS; do
        c="$d/$1"
        mkdir -p "$c" && echo "$BASHPID" >"$c/cgroup.procs" || return 1
    done
}

# Sandbox cgroups left under the guard (there must be none): the local
# executor's hutch-*, Docker's container ids.
guard_leftovers() {
    for d in $GUARD_ALL; do
        find "$d" -mindepth 1 -maxdepth 2 -regextype posix-extended -type d \
            \( -name 'hutch-*' -o -regex '.*/[0-9a-f]{64}' \) 2>/dev/null
    done
}

guard_leave() {
    # Kill anything left, move back home and remove the guard.
    for d in $GUARD_DIRS; do
        for pid in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
            [ "$pid" = $$ ] || kill -9 "$pid" 2>/dev/null
        done
    done
    for d in $GUARD_HOME; do
        echo $$ >"$d/cgroup.procs" 2>/dev/null
    done
    for d in $GUARD_DIRS $GUARD_ALL $GUARD_MADE; do
        find "$d" -depth -mindepth 1 -type d -exec rmdir {} \; 2>/dev/null
        rmdir "$d" 2>/dev/null
    done
}
