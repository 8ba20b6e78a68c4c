#!/bin/bash
# shutdown.sh — no container of a `hutch serve` outlives it when it is killed
# while its pool is being filled, as an MCP client does it: SIGTERM (or its
# stdin closed), then SIGKILL after a grace period.  The moments are taken
# from dockerd's own events for that hutch's containers (hutch.owner names
# its pid), not from timing:
#   - SIGKILL as one of its containers starts: the engine removes every
#     container of it that started, once it ends (init ends with the attach
#     stream); one that a refill was still creating (a pool of 3 makes them
#     together) never started, and is the next hutch's, as below;
#   - SIGTERM as one of its containers is created (a refill in flight),
#     SIGKILL after a grace: the start is cancelled and what it made
#     removed, and the containers already up go as above;
#   - SIGKILL as one is created: a container that never started is the one
#     thing the engine keeps — the next hutch removes it (its owner is gone).
# Only the containers whose hutch.owner names the killed hutch are counted:
# other tests' containers on the same daemon are not this test's business.
# And no other hutch may remove them: any hutch that starts on this machine
# sweeps the containers of dead hutch processes of this host (their owner
# label's host name is this one), which would hide a container the killed
# hutch left.  So these hutch processes run in a UTS namespace with a host
# name of their own: another hutch takes their containers for another
# machine's, and leaves them.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
# The last case needs a leftover to stay until the next start: no other
# test's hutch may sweep it in between.
export DOCKER_LOCK_MODE=-x
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec

T=$(mktemp -d)
HP=""
cleanup() {
    [ -n "$HP" ] && kill -9 "$HP" 2>/dev/null
    exec 3>&-
    rm -rf "$T"
}
trap cleanup EXIT
HOSTNAME_=hutch-shutdown-$$
# in_uts CMD…: CMD (exec'd, same pid) with the host name $HOSTNAME_.
in_uts() {
    unshare --uts sh -c 'hostname "$0" && exec "$@"' "$HOSTNAME_" "$@"
}
in_uts true || skip_all "cannot make a UTS namespace (unshare --uts)"
GRACE=${GRACE:-2} # seconds, as the official SDKs give a server after SIGTERM
ROUNDS=3

# containers_of PID: the containers (any state) of that hutch process.
containers_of() {
    docker ps -a --filter label=hutch.owner --format '{{.ID}} {{.Label "hutch.owner"}}' |
        awk -v p="$HOSTNAME_:$1:" 'index($2, p) == 1 { print $1 }'
}
# started_of PID: those of its containers that were ever started (a
# container created but never started has a zero StartedAt).
started_of() {
    for c in $(containers_of "$1"); do
        docker inspect -f '{{.State.StartedAt}}' "$c" 2>/dev/null | grep -qv '^0001-' &&
            echo "$c"
    done
}
# gone_within PID SECONDS [started]: no container of that hutch (or none
# that started) is left in time.
gone_within() {
    local of=containers_of
    [ "${3:-}" = started ] && of=started_of
    for _ in $(seq $(($2 * 10))); do
        [ -z "$($of "$1")" ] && return 0
        sleep 0.1
    done
    return 1
}
# serve_until EVENT: starts `hutch serve` with a pool of 3 python sandboxes
# (its stdin a pipe it reads from, as a client's) and returns once dockerd
# says EVENT (create, start) of one of its containers; HP is its pid.
serve_until() {
    local ev found=1
    rm -f "$T/in" "$T/events"
    mkfifo "$T/in"
    # --since: what happened before dockerd took the subscription too.
    docker events --since "$(date +%s.%N)" --filter type=container --filter "event=$1" \
        --filter label=hutch.owner \
        --format '{{index .Actor.Attributes "hutch.owner"}}' >"$T/events" &
    ev=$!
    # (not through in_uts: $! must be hutch's pid, which unshare and sh
    # exec into)
    unshare --uts sh -c 'hostname "$0" && exec "$@"' "$HOSTNAME_" \
        "$HUTCH" serve --pool python=3 <"$T/in" >"$T/out" 2>"$T/err" &
    HP=$!
    exec 3>"$T/in"
    for _ in $(seq 3000); do
        grep -q "^$HOSTNAME_:$HP:" "$T/events" && found=0 && break
        kill -0 "$HP" 2>/dev/null || break
        sleep 0.1
    done
    kill "$ev"
    wait "$ev" 2>/dev/null
    [ "$found" = 0 ] || echo "# hutch serve said: $(tail -c 600 "$T/err")"
    return $found
}
# stop_hutch SIGNAL: sends it and waits for hutch to end, SIGKILL past the
# grace period (the client's way).
stop_hutch() {
    kill "-$1" "$HP"
    for _ in $(seq $((GRACE * 10))); do
        kill -0 "$HP" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$HP" 2>/dev/null
    wait "$HP" 2>/dev/null
    exec 3>&-
}

for i in $(seq $ROUNDS); do
    ok "SIGKILL as a container starts ($i): dockerd saw it start" serve_until start
    stop_hutch KILL
    ok "SIGKILL as a container starts ($i): none of that hutch's started containers is left" \
        gone_within "$HP" 120 started
    echo "# left, never started (the next hutch's): $(containers_of "$HP" | tr '\n' ' ')"
done

for i in $(seq $ROUNDS); do
    ok "SIGTERM as a refill creates a container ($i): dockerd saw it created" \
        serve_until create
    stop_hutch TERM
    ok "SIGTERM, SIGKILL after ${GRACE}s ($i): none of that hutch's containers is left" \
        gone_within "$HP" 120
    echo "# left: $(containers_of "$HP")"
done

ok "SIGKILL as a container is created: dockerd saw it created" serve_until create
stop_hutch KILL
DEAD=$HP
HP=""
echo "# left by the killed hutch (never started): $(containers_of "$DEAD" | tr '\n' ' ')"
run_hutch() {
    OUT=$(in_uts "$HUTCH" "$@" 2>"$T/run.err" </dev/null)
    RC=$?
}
run_hutch run --lang python -e 'print("next")'
is "SIGKILL as a container is created: the next run works" "$OUT" "next"
ok "SIGKILL as a container is created: the next hutch removed what it left" \
    gone_within "$DEAD" 120

done_testing
