#!/bin/bash
# faults.sh — the docker executor when things go wrong around it: a missing
# image, hutch killed with SIGKILL mid-run, dockerd stopped before a run and
# restarted during one.  Each failure must be reported (exit 125 and a
# message saying what to do, or a clean non-zero exit), never hang, and
# leave nothing behind once the next run has started.
#
# This stops and restarts the real dockerd: it holds the Docker test lock
# exclusively (the other Docker tests share it), restarts dockerd the way it
# was started (its command line, environment and log file, or systemctl),
# and whatever happens, leaves it running.  Against the second daemon
# (tests/remote/faults.sh, HUTCH_TEST_ENGINE=dockerd2) it stops and starts
# that one (tests/lib/dockerd2.sh); against podman's service
# (tests/podman/faults.sh, HUTCH_TEST_ENGINE=podman) that one, with its
# namespace: Podman has no daemon that outlives its containers here, so
# its containers stop with it (tests/lib/podman.sh).
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
DOCKER_LOCK_MODE=-x
executor_require

T=$(mktemp -d)
BG=""
PIDFILE=/var/run/docker.pid
SYSTEMD=0
REMOTE=0
PODMAN=0
[ "${HUTCH_TEST_ENGINE:-}" = dockerd2 ] && REMOTE=1 && . "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
[ "${HUTCH_TEST_ENGINE:-}" = podman ] && PODMAN=1 && . "$HUTCH_SRCDIR/tests/lib/podman.sh"
DAEMON=dockerd
[ "$PODMAN" = 1 ] && DAEMON="podman's service"
[ "$REMOTE" = 0 ] && [ "$PODMAN" = 0 ] && systemctl is-active --quiet docker 2>/dev/null &&
    SYSTEMD=1
DPID=$(cat "$PIDFILE" 2>/dev/null)
if [ "$SYSTEMD" = 0 ] && [ "$REMOTE" = 0 ] && [ "$PODMAN" = 0 ]; then
    [ -n "$DPID" ] && [ -r "/proc/$DPID/cmdline" ] ||
        skip_all "dockerd runs, but not from $PIDFILE or systemd: cannot restart it"
    mapfile -d '' DARGV <"/proc/$DPID/cmdline"
    DARGV[0]=$(readlink "/proc/$DPID/exe") # its PATH may not be ours
    mapfile -d '' DENV <"/proc/$DPID/environ"
    DLOG=$(readlink "/proc/$DPID/fd/1")
    [ -f "$DLOG" ] || DLOG=/var/log/hutch-test-dockerd.log
fi

docker_up() { docker version >/dev/null 2>&1; }

dockerd_stop() {
    if [ "$REMOTE" = 1 ]; then
        dockerd2_pause 2
        return
    fi
    if [ "$PODMAN" = 1 ]; then
        engines_kill "$PODMAN_DIR" 10
        return
    fi
    if [ "$SYSTEMD" = 1 ]; then
        systemctl stop docker.socket docker
        return
    fi
    pid=$(cat "$PIDFILE" 2>/dev/null)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    # dockerd stops its containers first (SIGTERM, SIGKILL after 10 s)
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || [ -S /var/run/docker.sock ] || return 0
        sleep 0.1
    done
    return 1
}

dockerd_start() {
    if [ "$REMOTE" = 1 ]; then
        dockerd2_start 2 >/dev/null
        return
    fi
    if [ "$PODMAN" = 1 ]; then
        podman_start >/dev/null
        return
    fi
    if [ "$SYSTEMD" = 1 ]; then
        systemctl start docker
    else
        # Detached, with none of this test's descriptors (the TAP driver's
        # pipe, make's jobserver, the lock), so it outlives the test freely.
        (
            for fd in $(ls "/proc/$BASHPID/fd"); do
                [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
            done
            exec setsid env -i "${DENV[@]}" "${DARGV[@]}" </dev/null >>"$DLOG" 2>&1
        ) &
    fi
    for _ in $(seq 600); do
        docker_up && return 0
        sleep 0.1
    done
    return 1
}

cleanup() {
    for p in $BG; do kill -9 "$p" 2>/dev/null; done
    docker_up || dockerd_start || echo "# could not restart dockerd: see $DLOG"
    rm -rf "$T"
}
trap cleanup EXIT

# wait_for FILE TEXT SECONDS: until FILE contains TEXT
wait_for() {
    for _ in $(seq $(($3 * 10))); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# ends_within PID SECONDS: the process ended in time (else it is killed)
ends_within() {
    for _ in $(seq $(($2 * 10))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$1" 2>/dev/null
    return 1
}
exists() { docker inspect "$1" >/dev/null 2>&1; }
sockdir_of() { ls -d "$(docker_state_dir)/$1".* 2>/dev/null; }
SLEEPER='import time
print("started", flush=True)
time.sleep(100)'

# --- a missing image ---------------------------------------------------
HUTCH_DOCKER_IMAGE_PYTHON=hutch-nosuch:1 run_hutch run --lang python -e 'print(1)'
is "missing image: exit 125" "$RC" 125
like "missing image: named" "$ERR" "hutch-nosuch:1"
like "missing image: says how to build it" "$ERR" "make images"

# --- hutch killed with SIGKILL mid-run -----------------------------------
# With its janitor killed first: what it leaves waits for the next start.
"$HUTCH" run --lang python -e "$SLEEPER" >"$T/k.out" 2>"$T/k.err" </dev/null &
HP=$!
BG="$BG $HP"
ok "kill -9: the run started" wait_for "$T/k.out" started 30
CID=$(docker_container_of "$HP")
ok "kill -9: its container is labelled hutch.owner with hutch's pid" test -n "$CID"
JP=$(janitor_of "$HP")
ok "kill -9: hutch has a janitor" test -n "$JP"
kill -9 "$JP" "$HP"
wait "$HP" 2>/dev/null
# Its init ends with the attach stream, and the engine removes a container
# that ended (AutoRemove): nothing waits for the next hutch's sweep.
gone_within() {
    for _ in $(seq $(($2 * 10))); do
        exists "$1" || return 0
        sleep 0.1
    done
    return 1
}
ok "kill -9: the engine removes its container by itself" gone_within "$CID" 120
ok "kill -9: its socket directory is left behind" test -n "$(sockdir_of "$HP")"
run_hutch run --lang python -e 'print("next")'
is "kill -9: the next run works" "$OUT" "next"
not_ok "kill -9: the next run removed the dead hutch's container" exists "$CID"
is "kill -9: ... and its socket directory" "$(sockdir_of "$HP")" ""

# hutch alone killed, while the containers of a pool of four are being
# created: its janitor removes everything of it (containers, volumes,
# socket directory; one the engine was still creating included) with no
# other hutch started.  Where the kill lands is the machine's choice;
# whatever it is, nothing may stay.
# (stdin: a fifo this shell holds open, read and write, so that serve
# never sees its end.)
mkfifo "$T/in"
exec 7<>"$T/in"
"$HUTCH" serve --pool python=4,javascript=0 <&7 >"$T/p.out" 2>"$T/p.err" &
HP=$!
exec 7>&-
BG="$BG $HP"
HS=""
for _ in $(seq 1200); do
    [ -z "$HS" ] && HS=$(proc_start "$HP")
    [ -n "$(docker_container_of "$HP")" ] && break
    kill -0 "$HP" 2>/dev/null || break
    sleep 0.05
done
ok "janitor: the pool's first container exists" test -n "$(docker_container_of "$HP")"
JP=$(janitor_of "$HP")
ok "janitor: hutch serve has one" test -n "$JP"
kill -9 "$HP"
wait "$HP" 2>/dev/null
left_of() { hutch_resources "$HP" "$HS"; }
for _ in $(seq 1200); do
    [ -z "$(left_of)" ] && ! kill -0 "$JP" 2>/dev/null && break
    sleep 0.1
done
is "janitor: nothing of the killed hutch is left, no other hutch started" "$(left_of)" ""
not_ok "janitor: it has exited" kill -0 "$JP"

# --- dockerd stopped before a run ----------------------------------------
ok "$DAEMON stops" dockerd_stop
run_hutch run --lang python -e 'print(1)'
is "no $DAEMON: exit 125" "$RC" 125
# (hutch cannot tell a stopped Podman service from a stopped dockerd)
like "no $DAEMON: the message says to start dockerd" "$ERR" "dockerd"
ok "$DAEMON starts again" dockerd_start
run_hutch run --lang python -e 'print("back")'
is "$DAEMON back: runs work" "$OUT" "back"

# --- dockerd restarted during a run --------------------------------------
"$HUTCH" run --lang python --timeout 120000 -e "$SLEEPER" >"$T/r.out" 2>"$T/r.err" </dev/null &
HP=$!
BG="$BG $HP"
ok "restart: the run started" wait_for "$T/r.out" started 30
ok "restart: $DAEMON stops" dockerd_stop
ok "restart: $DAEMON starts again" dockerd_start
ok "restart: the run ends, no hang" ends_within "$HP" 30
wait "$HP" 2>/dev/null
RC=$?
is "restart: the run failed as hutch's failure" "$RC" 125
like "restart: the failure is explained" "$(cat "$T/r.err")" "ended under the program"
run_hutch run --lang javascript -e 'console.log("after restart")'
is "restart: the next run works" "$OUT" "after restart"

done_testing
