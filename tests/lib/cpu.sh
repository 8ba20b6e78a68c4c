# cpu.sh — the cpu controller for the tests of HUTCH_SANDBOXES_CPU_WEIGHT
# (tests/gvisor/cpu.sh, tests/docker/cpu.sh).  Sourced after tap.sh; sets
# CPU (the hierarchy with the cpu controller: /sys/fs/cgroup on v2, v1's cpu
# directory, "" for none writable) and WEIGHT_FILE, and defines:
#   want W           the file's value for weight W (v1: W * 1024 / 100)
#   cgroup_of PID    the process's cgroup in the cpu hierarchy
#   remove_parent P  removes the cgroup P and what is below it, in every
#                    hierarchy (a test's own parent, at its end)
#   sleeper DIR [VAR=VALUE...]
#                    starts `hutch run` of a program that sleeps, with the
#                    variables given, its output in DIR/out and DIR/err;
#                    sets HP (hutch's pid) once the program said it started
#                    (a TAP check)
#   stop_sleeper     ends it
#   refuses_bad_weights
#                    0, 10001, abc and -5 refused at start, each with the
#                    variable, the value and the range (TAP checks)
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CPU=/sys/fs/cgroup
    WEIGHT_FILE=cpu.weight
    want() { echo "$1"; }
else
    CPU=""
    for d in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpuacct,cpu; do
        [ -w "$d/cpu.shares" ] && CPU=$d && break
    done
    WEIGHT_FILE=cpu.shares
    want() { echo $(($1 * 1024 / 100)); }
fi
if [ -n "$CPU" ] && [ ! -f "$CPU/cgroup.procs" ]; then
    CPU=""
fi

cgroup_of() {
    if [ "$CPU" = /sys/fs/cgroup ]; then
        sed -n 's/^0:://p' "/proc/$1/cgroup"
    else
        awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' "/proc/$1/cgroup"
    fi
}

remove_parent() {
    local d
    for d in /sys/fs/cgroup/*"$1" /sys/fs/cgroup"$1"; do
        [ -d "$d" ] || continue
        find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
}

sleeper() {
    local dir=$1
    shift
    # Emptied here, not only by the background hutch's redirection: until
    # that process runs, the loop below would read the previous sleeper's
    # "started" (a CI run beside two CPU hogs did, in both builds).
    : >"$dir/out"
    : >"$dir/err"
    env "$@" "$HUTCH" run --lang python --timeout 600000 -e 'import time
print("started", flush=True)
time.sleep(600)' >"$dir/out" 2>"$dir/err" </dev/null &
    HP=$!
    for _ in $(seq 1200); do
        grep -q started "$dir/out" && break
        kill -0 "$HP" 2>/dev/null || break
        sleep 0.1
    done
    is "a program runs and says so${*:+ ($*)}" "$(cat "$dir/out")" "started"
    if ! grep -q started "$dir/out"; then
        # Why not, for whoever reads the log: hutch's own words, and
        # whether it still runs.
        if kill -0 "$HP" 2>/dev/null; then echo "#   hutch still runs"; else echo "#   hutch has ended"; fi
        tail -20 "$dir/err" | sed 's/^/#   stderr: /'
    fi
}

stop_sleeper() {
    kill -TERM "$HP"
    wait "$HP" 2>/dev/null
}

refuses_bad_weights() {
    local bad
    for bad in 0 10001 abc -5; do
        HUTCH_SANDBOXES_CPU_WEIGHT=$bad run_hutch run --lang python -e 'print(1)'
        is "HUTCH_SANDBOXES_CPU_WEIGHT=$bad: refused (exit 125)" "$RC" 125
        like "HUTCH_SANDBOXES_CPU_WEIGHT=$bad: says the variable, the value and the range" \
            "$ERR" "HUTCH_SANDBOXES_CPU_WEIGHT=$bad: want a weight from 1 to 10000"
    done
}
