#!/bin/bash
# engines_smoke.sh — the test engines of tests/lib on their own, without
# hutch: the second dockerd (dockerd2.sh, instance 2) and podman's service
# (podman.sh) start, answer, run a container of hutch-python from the
# docker CLI and take engines_probe.py's API calls (hutch's create body,
# archives, attach); then both stop and nothing of them is left (network
# namespace, veth, mounts, processes, cgroups, files of podman's in /run
# and /var/lib).  Not part of `make check` (it needs root and a few
# minutes); run it by hand as root after changing tests/lib/engines.sh,
# dockerd2.sh or podman.sh:
#   bash tests/lib/engines_smoke.sh    (HUTCH_BUILDDIR: the build, for the
#                                       images' version; else configure.ac's)
# It prints TAP, and how long each engine took to start.
HUTCH_SRCDIR=${HUTCH_SRCDIR:-$(cd "${BASH_SOURCE[0]%/*}/../.." && pwd)}
export HUTCH_SRCDIR
export HUTCH_BUILDDIR=${HUTCH_BUILDDIR:-$HUTCH_SRCDIR/build}
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
. "$HUTCH_SRCDIR/tests/lib/dockerd2.sh"
. "$HUTCH_SRCDIR/tests/lib/podman.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root"
engines_need dockerd docker podman openssl ip nsenter unshare curl docker-init ||
    skip_all "tools missing (above)"
V=$(engines_version)
IMG=hutch-python:$V
engines_main_docker image inspect "$IMG" >/dev/null 2>&1 ||
    skip_all "no $IMG on the main daemon (make images)"

# What podman would make on the host if its namespace did not cover it,
# and its cgroup.
HOST_PATHS="/run/containers /run/runc /run/libpod /var/lib/containers /dev/shm/libpod_lock
  /sys/fs/cgroup/pids/libpod_parent"
BEFORE=""
for p in $HOST_PATHS; do [ ! -e "$p" ] || BEFORE="$BEFORE $p"; done

trap 'dockerd2_stop >/dev/null 2>&1; podman_stop >/dev/null 2>&1' EXIT
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_one DESC CLI…: a container printing 1, without network, removed after.
run_one() {
    local what=$1 name=hutch-smoke-$$ out
    shift
    out=$("$@" run --name "$name" --network none "$IMG" python3 -c 'print(1)' 2>&1)
    is "$what: a container prints 1" "$out" 1
    ok "$what: it is removed" quiet "$@" rm "$name"
    is "$what: no container left" "$("$@" ps -aq)" ""
}
quiet() { "$@" >/dev/null 2>&1; }

# --- the second dockerd ------------------------------------------------------
t=$(now)
ok "dockerd2_start 2" dockerd2_start 2
echo "# dockerd2 started in $(took "$t") s (with the images)"
is "DOCKER_HOST" "$DOCKER_HOST" "tcp://10.251.0.2:2376"
is "DOCKER_TLS_VERIFY" "$DOCKER_TLS_VERIFY" 1
ok "client ca.pem, cert.pem, key.pem in DOCKER_CERT_PATH" \
    test -s "$DOCKER_CERT_PATH/ca.pem" -a -s "$DOCKER_CERT_PATH/cert.pem" -a -s "$DOCKER_CERT_PATH/key.pem"
C=$DOCKER_CERT_PATH
VER=$(curl -sf --cacert "$C/ca.pem" --cert "$C/cert.pem" --key "$C/key.pem" \
    "https://$DOCKERD2_ADDR/version")
like "GET /version over TLS" "$VER" '"ApiVersion":"1.4'
not_ok "no answer without a client certificate" \
    curl -sf --max-time 5 --cacert "$C/ca.pem" "https://$DOCKERD2_ADDR/version"
not_ok "nothing listens on the host's side" \
    curl -sf --max-time 5 --cacert "$C/ca.pem" --cert "$C/cert.pem" --key "$C/key.pem" \
    "https://10.251.0.1:2376/version"
run_one "dockerd2" docker --host "tcp://$DOCKERD2_ADDR" --tlsverify --tlscacert "$C/ca.pem" \
    --tlscert "$C/cert.pem" --tlskey "$C/key.pem"
OUT=$(docker run --rm --network none -v /run/hutch:/a -v "$HUTCH_SRCDIR:/b" "$IMG" \
    sh -c 'ls -A /a /b | tr -d "\n"' 2>&1)
is "dockerd2: a bind of /run/hutch or the source tree finds them empty" "$OUT" "/a:/b:"
PROBE=$(python3 "$HUTCH_SRCDIR/tests/lib/engines_probe.py" "$IMG" 2>&1)
ok "dockerd2: the API calls hutch makes (engines_probe.py)" test $? = 0
printf '%s\n' "$PROBE" | grep -v '^ok' | sed 's/^/#   /' | cut -c1-240
t=$(now)
ok "dockerd2_pause 2 (TERM)" dockerd2_pause 2
ok "dockerd2: started again on the same data" dockerd2_start 2
echo "# dockerd2 paused and started again in $(took "$t") s"
ok "dockerd2: the image is still there" quiet docker image inspect "$IMG"

# --- a second instance beside it, killed mid-run and started again ----------------
t=$(now)
ENGINES_IMAGES=python
ok "dockerd2_start 3 (hutch-python only)" dockerd2_start 3
unset ENGINES_IMAGES
echo "# instance 3 started in $(took "$t") s (one image)"
CID=$(dockerd2_docker 3 run -d --network none "$IMG" sleep 600)
ok "instance 3 runs a container" test -n "$CID"
t=$(now)
ok "dockerd2_pause 3 KILL mid-run" dockerd2_pause 3 KILL
echo "# instance 3 killed in $(took "$t") s"
not_ok "instance 3 no longer answers" quiet dockerd2_docker 3 version
is "instance 2 still answers" "$(dockerd2_docker 2 version -f '{{.Server.APIVersion}}')" 1.41
ENGINES_IMAGES=python
ok "instance 3 started again" dockerd2_start 3
unset ENGINES_IMAGES
like "its container is gone (exited)" "$(dockerd2_docker 3 ps -a --format '{{.Status}}')" Exited
is "DOCKER_HOST names instance 3 now" "$DOCKER_HOST" "tcp://10.251.0.6:2376"

# --- podman's service -------------------------------------------------------------
t=$(now)
ok "podman_start" podman_start
echo "# podman's service started in $(took "$t") s (with the images)"
is "DOCKER_HOST" "$DOCKER_HOST" "unix://$PODMAN_DIR/podman.sock"
VER=$(curl -sf --unix-socket "$PODMAN_DIR/podman.sock" http://d/version)
like "podman: GET /version" "$VER" '"ApiVersion":"1.41"'
run_one "podman" podman_docker
PROBE=$(python3 "$HUTCH_SRCDIR/tests/lib/engines_probe.py" "$IMG" --lenient 2>&1)
ok "podman: the API calls hutch makes (engines_probe.py --lenient)" test $? = 0
printf '%s\n' "$PROBE" | grep -v '^ok' | sed 's/^/#   /' | cut -c1-240

# --- the end: nothing left --------------------------------------------------------
t=$(now)
ok "dockerd2_stop" dockerd2_stop
ok "podman_stop" podman_stop
echo "# both stopped in $(took "$t") s"
not_ok "dockerd2: nothing left of 2" dockerd2_leftovers 2
not_ok "dockerd2: nothing left of 3" dockerd2_leftovers 3
not_ok "podman: nothing left" podman_leftovers
is "no veth hutch-d*" "$(ip -br link | grep -c '^hutch-d')" 0
is "no mount of either" "$(grep -cE 'hutch-dockerd|hutch-podman' /proc/self/mountinfo)" 0
is "no process of either" "$(pgrep -f 'hutch-dockerd-|hutch-podman' | wc -l)" 0
is "no cgroup of dockerd2" "$(ls -d /sys/fs/cgroup/*/hutch-dockerd-* 2>/dev/null)" ""
AFTER=""
for p in $HOST_PATHS; do [ ! -e "$p" ] || AFTER="$AFTER $p"; done
is "nothing of podman's in /run, /var/lib, /dev/shm, the cgroups" "$AFTER" "$BEFORE"
done_testing
