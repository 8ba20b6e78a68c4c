# executor.sh — which executor the shared run, files and hostile tests use
# (sourced after tap.sh): $HUTCH_EXECUTOR, or local.  tests/docker/*.sh set
# HUTCH_EXECUTOR=docker and run the same scripts.
#   executor_require   the executor must be usable: skip_all when it is not,
#                      but fail under CI (contrib/test.sh starts dockerd)
#   is_local           true on the local executor
#   executor_assert    two tests: a result names $EXECUTOR, and a program sees
#                      its kind of sandbox (executor_require runs it); every
#                      `run_hutch run --json` is checked the same way (tap.sh)
# On the gvisor executor, it adds the check that no runsc process, state
# directory or mount of a gone hutch is left.
# On the docker executor, executor_require also takes the Docker test lock
# (shared; faults.sh, which stops dockerd, sets DOCKER_LOCK_MODE=-x) and adds
# the leftover checks (containers, volumes, socket directories) to the end
# of the test file.
# HUTCH_TEST_ENGINE names the Docker engine a suite runs against when it is
# not the main daemon (tests/lib/remote.sh: "dockerd2", the second daemon);
# executor_assert then also checks that the sandbox ran there and nowhere
# else, and that its container binds no path of the host.
EXECUTOR=${HUTCH_EXECUTOR:-local}
export HUTCH_EXECUTOR="$EXECUTOR"
DOCKER_LOCK=/tmp/hutch-docker-tests${HUTCH_TEST_ENGINE:+-$HUTCH_TEST_ENGINE}.lock

is_local() { [ "$EXECUTOR" = local ]; }

# What a program sees of the executor it runs on: gVisor's kernel reports
# its own made-up version; a container of Docker's or Podman's has sysfs at
# /sys (and Docker's /.dockerenv), where the local executor mounts no /sys.
SANDBOX_PROBE='import os
v = open("/proc/version").read()
"gvisor" if "#1 SMP Sun Jan 10 15:06:54 PST 2016" in v else "docker" if os.path.exists("/.dockerenv") or os.path.isdir("/sys/kernel") else "local"'

# The suite runs on $EXECUTOR: the result says so, and so does the sandbox.
executor_assert() {
    run_hutch run --json --lang python -e "$SANDBOX_PROBE"
    is "this suite runs on the $EXECUTOR executor (the result names it)" \
        "$(echo "$OUT" | json executor)" "$EXECUTOR"
    is "this suite runs on the $EXECUTOR executor (the sandbox looks like it)" \
        "$(echo "$OUT" | json result)" "$EXECUTOR"
    [ "$EXECUTOR" = docker ] && [ -n "${HUTCH_TEST_ENGINE:-}" ] && engine_assert
    return 0
}

# docker_container_of PID: the container (on $DOCKER_HOST's engine) whose
# hutch.owner names that hutch process.
docker_container_of() {
    docker ps -a --filter label=hutch.owner \
        --format '{{.ID}} {{.Label "hutch.owner"}}' | awk -v p=":$1:" 'index($2, p) { print $1 }'
}

# docker_sandbox_mounts: the mounts of the container of a running sandbox,
# one "TYPE SOURCE -> DESTINATION" line each, and its HostConfig.Binds,
# seen while a program sleeps in it (generous budget: not a timing).
docker_sandbox_mounts() {
    local hp cid="" dir
    dir=$(mktemp -d)
    "$HUTCH" run --lang python --timeout 600000 -e 'import time
print("started", flush=True)
time.sleep(600)' >"$dir/out" 2>&1 </dev/null &
    hp=$!
    for _ in $(seq 1200); do
        grep -q started "$dir/out" 2>/dev/null && cid=$(docker_container_of "$hp")
        [ -n "$cid" ] && break
        kill -0 "$hp" 2>/dev/null || break
        sleep 0.1
    done
    if [ -n "$cid" ]; then
        echo "container $cid"
        docker inspect -f '{{range .Mounts}}{{.Type}} {{.Source}} -> {{.Destination}}{{println}}{{end}}binds {{json .HostConfig.Binds}}' "$cid"
        if [ -n "${HUTCH_TEST_ENGINE:-}" ] && [ -S /var/run/docker.sock ]; then
            echo "main daemon: $(env -u DOCKER_HOST -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH \
                docker ps -aq --filter "id=$cid" 2>/dev/null)"
        fi
    else
        echo "no container: $(head -c 500 "$dir/out")"
    fi
    kill "$hp" 2>/dev/null
    wait "$hp" 2>/dev/null
    rm -rf "$dir"
}

# The sandbox runs on the engine named, and binds nothing of the host: its
# mounts are volumes and tmpfs only (hutch-init and the runners come
# through the archive endpoint, the streams through the attach stream).
# One exception, on an engine of this host only (podman's service): the
# egress socket's directory, read-only at /run/hutch/egress (docker.c: a
# per-sandbox directory of hutch's state dir holding one socket).  An
# engine elsewhere (dockerd2, a TCP engine) gets none.
engine_assert() {
    local m rest
    m=$(docker_sandbox_mounts)
    ok "this suite runs on the engine $HUTCH_TEST_ENGINE ($DOCKER_HOST)" \
        grep -q '^container [0-9a-f]' <<<"$m"
    not_ok "... and not on the main daemon" grep -q '^main daemon: [0-9a-f]' <<<"$m"
    if [[ $DOCKER_HOST == unix://* ]]; then
        rest=$(grep -v '^bind /[^ ]* -> /run/hutch/egress$' <<<"$m" |
            sed -E 's#"/[^"]*:/run/hutch/egress:ro[^"]*",?##')
    else
        rest=$m
    fi
    not_ok "its container has no bind mount of a host path (but egress's socket directory)" \
        grep -q '^bind ' <<<"$rest"
    # Docker says null; Podman lists the volumes there, by name.
    not_ok "its container's HostConfig.Binds names no host path (but egress's)" \
        grep -qE '^binds .*"/' <<<"$rest"
    [ "$T_FAILED" = 0 ] 2>/dev/null || printf '%s\n' "$m" | sed 's/^/#   /' | head -20
}

executor_require() { # [--exec]: another TAP program follows; it asserts itself
    assert_here=1
    [ "${1:-}" = --exec ] && assert_here=0
    if is_local; then
        [ "$assert_here" = 1 ] && executor_assert
        return 0
    fi
    # The test locks first: faults.sh stops dockerd (or removes runsc's
    # pieces) under its exclusive lock, and a usability check made while it
    # holds it would see the executor down.
    if [ "$EXECUTOR" = docker ]; then
        docker_lock "${DOCKER_LOCK_MODE:--s}"
    fi
    if [ "$EXECUTOR" = gvisor ]; then
        # faults.sh kills a hutch and checks what the next start removes:
        # no other gvisor test may start one in between.
        exec 8>>/tmp/hutch-gvisor-tests.lock
        flock "${GVISOR_LOCK_MODE:--s}" 8
    fi
    line=$("$HUTCH" plugins 2>&1 | awk -v n="$EXECUTOR" '$1 == n')
    case "$line" in
    *" usable "*) ;;
    *)
        why=$(echo "${line:-no $EXECUTOR plugin in $HUTCH_PLUGIN_DIR}" |
            sed 's/^ *[^ ]*  *unusable  *//')
        case "${CI:-}" in
        "" | false | 0) skip_all "the $EXECUTOR executor is not usable here: $why" ;;
        esac
        # CI provides every executor: an unusable one is a failure.
        echo "not ok 1 - the $EXECUTOR executor is usable: $why"
        echo "1..1"
        exit 1
        ;;
    esac
    if [ "$EXECUTOR" = docker ]; then
        DOCKER_VOLUMES_BEFORE=$(docker_dangling_volumes)
        T_AT_END="$T_AT_END docker_assert_clean"
    fi
    [ "$EXECUTOR" = gvisor ] && T_AT_END="$T_AT_END gvisor_assert_clean"
    [ "$assert_here" = 1 ] && executor_assert
    return 0
}

# executor_lock -x|-s: turns the executor's test lock (executor_require
# took it shared) exclusive, or back: a test that kills a hutch holds it
# exclusive until the next start has swept, so that no other test of the
# executor counts the killed hutch's things as leftovers of its own.
executor_lock() {
    case "$EXECUTOR" in
    docker) flock "$1" 9 ;;
    gvisor) flock "$1" 8 ;;
    esac
}

# --- what one hutch process has, whatever its executor ---------------------

# proc_start PID: the start time of process PID (field 22 of its stat), as
# hutch names its things; nothing when it is gone.
proc_start() {
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $20 }'
}

# janitor_of PID: the pid of hutch PID's janitor (src/janitor.h), its
# child that outlives it to sweep; nothing when it has none.
janitor_of() {
    pgrep -P "$1" -f -- " __janitor $1 " | head -1
}

# hutch_resources PID START: what the hutch process PID, started at START
# (proc_start), made, or left once gone, on this host, whatever its
# executor: its state directories (every executor), the local executor's
# sandbox cgroups (hutch-PID.START-…, wherever they are) and gVisor's
# (hutch-gvisor/hutch-PID.START.N-box), the runsc processes and mounts of its
# gVisor state root, and the containers and volumes labelled with it on
# $DOCKER_HOST's engine.  One "KIND WHAT" line each; nothing once there is
# nothing.  By pid and start time, never by a pattern another hutch's
# things could match: the leftovers of one killed hutch, told apart from
# what live hutches of other tests (or other users of this machine) have.
hutch_resources() {
    local p=$1.$2 d
    for d in /run/hutch/*/"$p" /run/hutch/*/"$p".* \
        "${XDG_RUNTIME_DIR:-/nonexistent}"/hutch/*/"$p" "${XDG_RUNTIME_DIR:-/nonexistent}"/hutch/*/"$p".* \
        "/tmp/hutch-$(id -u)"/*/"$p" "/tmp/hutch-$(id -u)"/*/"$p".*; do
        [ -e "$d" ] && echo "state $d"
    done
    find /sys/fs/cgroup -maxdepth 8 -type d \( -name "hutch-$p-*" -o -name "hutch-$p.*" \) \
        2>/dev/null | sed 's/^/cgroup /'
    pgrep -f -- "--root=$GVISOR_DIR/$p(\.[0-9]+)?/" | sed 's/^/runsc /'
    awk -v d="$GVISOR_DIR/$p" 'index($5, d "/") == 1 || index($5, d ".") == 1 { print "mount " $5 }' \
        /proc/self/mountinfo
    if command -v docker >/dev/null 2>&1 && docker version >/dev/null 2>&1; then
        docker ps -a --filter label=hutch.owner --format '{{.ID}} {{.Label "hutch.owner"}}' |
            awk -v o=":$1:$2" 'substr($2, length($2) - length(o) + 1) == o { print "container " $1 }'
        docker volume ls -q --filter label=hutch.owner | while read -r d; do
            case "$(docker volume inspect -f '{{index .Labels "hutch.owner"}}' "$d" 2>/dev/null)" in
            *":$1:$2") echo "volume $d" ;;
            esac
        done
    fi
}

# --- gvisor ---------------------------------------------------------------

GVISOR_DIR=/run/hutch/gvisor

# What hutch processes that are gone left of the gVisor executor: state
# directories (PID.START), runsc processes using their state root, mounts.
# (Live runs of tests next to this one are not leftovers.)
gvisor_leftovers() {
    for d in "$GVISOR_DIR"/*; do
        [ -d "$d" ] || continue
        b=${d##*/}
        case "$b" in [0-9]*.[0-9]*) ;; *) continue ;; esac
        o_start=$(sed 's/.*) //' "/proc/${b%%.*}/stat" 2>/dev/null | awk '{ print $20 }')
        # Listed while its hutch lived, gone once it had ended: not left.
        [ "$o_start" = "${b#*.}" ] || { [ -d "$d" ] && echo "dir:$b"; }
    done
    for p in $(pgrep -f -- "--root=$GVISOR_DIR/"); do
        b=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n "s|^--root=$GVISOR_DIR/\([0-9]*\)\..*|\1|p" | head -1)
        [ -n "$b" ] && ! kill -0 "$b" 2>/dev/null && echo "process:$p"
    done
    awk -v d="$GVISOR_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo |
        while read -r m; do
            b=${m#"$GVISOR_DIR/"}
            kill -0 "${b%%.*}" 2>/dev/null || echo "mount:$m"
        done
}

gvisor_assert_clean() {
    is "gvisor: no sandbox, process, bundle or mount left behind" \
        "$(gvisor_leftovers | tr '\n' ' ')" ""
}

# --- docker ---------------------------------------------------------------

# docker_lock -s|-x: hold the Docker test lock until this shell exits.
docker_lock() {
    exec 9>>"$DOCKER_LOCK"
    flock "$1" 9
}

# Where the docker plugin keeps its socket directories (see state_dir()).
docker_state_dir() {
    if [ "$(id -u)" = 0 ]; then
        echo /run/hutch/docker
    elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then
        echo "$XDG_RUNTIME_DIR/hutch/docker"
    else
        echo "/tmp/hutch-$(id -u)/docker"
    fi
}

docker_dangling_volumes() {
    docker volume ls -q --filter dangling=true | sort
}

# owner_dead HOST:PID:START — the hutch.owner label names a process of this
# host that is gone (PID reused by another process counts as gone).
owner_dead() {
    o_host=${1%%:*}
    o_rest=${1#*:}
    o_pid=${o_rest%%:*}
    o_start=${o_rest#*:}
    [ "$o_host" = "$(cat /proc/sys/kernel/hostname)" ] || return 1
    o_now=$(sed 's/.*) //' "/proc/$o_pid/stat" 2>/dev/null | awk '{ print $20 }')
    [ "$o_now" != "$o_start" ]
}

# Every leftover check below lists things first and asks whether their
# hutch is gone second; a test running beside this one may remove its own
# things and exit in between.  So what is reported is what still exists
# after its owner was seen gone (a gone hutch removes nothing more).

# Containers whose hutch is gone (other tests' live runs are not leftovers).
docker_orphans() {
    docker ps -a --filter label=hutch.owner \
        --format '{{.ID}} {{.Label "hutch.owner"}}' | while read -r id owner; do
        owner_dead "$owner" && [ -n "$(docker ps -aq --filter "id=$id")" ] && echo "$id"
    done
}

# Volumes of hutch's whose hutch is gone.  (Removing a container with its
# volume leaves the volume dangling for a moment: a live owner's dangling
# volume is not a leftover.)
docker_orphan_volumes() {
    docker volume ls -q --filter label=hutch.owner | while read -r v; do
        owner=$(docker volume inspect -f '{{index .Labels "hutch.owner"}}' "$v" 2>/dev/null) ||
            continue
        owner_dead "$owner" && docker volume inspect "$v" >/dev/null 2>&1 && echo "$v"
    done
}

docker_assert_clean() {
    host=$(cat /proc/sys/kernel/hostname)
    is "docker: no container left behind" "$(docker_orphans | tr '\n' ' ')" ""
    is "docker: no volume left behind" \
        "$(docker_orphan_volumes | tr '\n' ' ')$(docker_dangling_volumes |
            comm -13 <(echo "$DOCKER_VOLUMES_BEFORE") - | while read -r v; do
                # an unlabelled dangling volume (not one of a live hutch's)
                [ -z "$(docker volume inspect -f '{{index .Labels "hutch.owner"}}' "$v" 2>/dev/null)" ] &&
                    docker volume inspect "$v" >/dev/null 2>&1 && echo "$v"
            done | tr '\n' ' ')" ""
    # The state directories are the host's, shared by the suites of every
    # engine, whose test locks are their own: a suite of another engine may
    # have just killed a hutch on purpose (under its own exclusive lock),
    # and the next hutch to start sweeps what it left.  So a gone owner's
    # directory is a leftover only when it outlives a budget for that
    # sweep (generous: a loaded machine), not when it is first seen; one
    # run of this suite's own starts such a sweep.
    swept=0
    for _ in $(seq 240); do
        left=""
        for d in "$(docker_state_dir)"/*; do
            [ -d "$d" ] || continue
            b=${d##*/} # PID.START.N
            s=${b#*.}
            owner_dead "$host:${b%%.*}:${s%%.*}" && [ -d "$d" ] && left="$left $b"
        done
        [ -z "$left" ] && break
        if [ "$swept" = 0 ]; then
            "$HUTCH" run --lang python -e 'pass' </dev/null >/dev/null 2>&1
            swept=1
        fi
        sleep 0.5
    done
    is "docker: no socket directory left in $(docker_state_dir)" "$left" ""
}
