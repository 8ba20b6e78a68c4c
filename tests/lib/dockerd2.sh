# dockerd2.sh — extra Docker daemons that share no paths with hutch, for the
# tests of remote engines (sourced by bash tests; root).  Instance N (2 to
# 63; 2 unless given) is a dockerd in a network namespace of its own (bound
# at DIR/netns: `nsenter --net=DIR/netns` to look in), reached from the
# host over a veth pair hutch-dNh/hutch-dNn (host 10.251.0.(4N-7)/30, daemon
# 10.251.0.(4N-6)/30: 10.251.0.2 for 2, 10.251.0.6 for 3) at
# tcp://ADDRESS:2376 with TLS and client certificates, and nowhere else
# (but /run/docker.sock of its own mount namespace: nsenter -t "$(cat
# DIR/init.pid)" -m -n docker -H unix:///run/docker.sock …).
#   dockerd2_start [N]     idempotent: namespace, certificates, the daemon,
#                          the hutch images copied from the main daemon;
#                          exports DOCKER_HOST, DOCKER_TLS_VERIFY=1,
#                          DOCKER_CERT_PATH (client ca.pem, cert.pem,
#                          key.pem), DOCKERD2_LOG, DOCKERD2_DIR, DOCKERD2_ADDR
#   dockerd2_env [N]       exports those for N (another instance's)
#   dockerd2_docker N ARGS…  the docker CLI on instance N
#   dockerd2_pause N [KILL]  stops the daemon only, as `systemctl stop`
#                          would (its containers stopped), or at once with
#                          everything in it (KILL: a crash); the namespace,
#                          certificates and data stay for dockerd2_start
#   dockerd2_stop [N]      idempotent: all of it (every instance without N);
#                          false, saying what, if anything is left
#   dockerd2_leftovers [N] prints what is left of N; false when nothing
# The daemon runs in a mount namespace of its own (engines.sh), in which an
# empty tmpfs hides /run (the host's /run/hutch, /run/docker.sock, the main
# daemon's exec-root and containerd), /tmp, /dev/shm, /var/lib/docker and
# each directory in DOCKERD2_HIDE (default: $HUTCH_SRCDIR $HUTCH_BUILDDIR):
# a bind mount of a hutch path made by the daemon finds nothing (an empty
# directory it created on the tmpfs).  Its data-root (a tmpfs of its own
# mounted at DIR/data, DOCKERD2_TMPFS=0 for the disk), exec-root, pidfile,
# certificates, config (bind-mounted over /etc/docker, for key.json) and log
# are in DIR = DOCKERD2_BASE-N (/var/tmp/hutch-dockerd-N), outside
# everything hidden, so that every process of it names DIR (engines.sh's
# leftover check); its other mounts stay in its namespace.  Its containerd
# is the one dockerd manages, under its exec-root; containers' cgroups are
# below /hutch-dockerd-N.  Start and stop are serialised (flock), but an
# instance is the machine's: tests that share one must not stop it under
# each other.
# Not here: what hutch does with the daemon (the tests), runsc (not
# registered: a remote engine's runtime is its own business).
# Times on a 2-core machine beside a loaded CI: the daemon answers ~1.5 s
# after start; copying the images (ENGINES_IMAGES, default python node
# python-data) adds ~3 s for hutch-python alone, ~20 s for all three (the
# first start only: they stay across dockerd2_pause); pause (TERM, no
# container) and start again ~2 s; pause KILL 0.1 s; stop ~1 s.
. "${BASH_SOURCE[0]%/*}/engines.sh"
DOCKERD2_BASE=${DOCKERD2_BASE:-/var/tmp/hutch-dockerd}
DOCKERD2_WAIT=${DOCKERD2_WAIT:-120} # seconds for the daemon to answer
DOCKERD2_GRACE=${DOCKERD2_GRACE:-20} # seconds dockerd2_pause waits
DOCKERD2_HIDE=${DOCKERD2_HIDE-${HUTCH_SRCDIR:-} ${HUTCH_BUILDDIR:-}}
DOCKERD2_TMPFS=${DOCKERD2_TMPFS:-1}           # the data-root in memory
DOCKERD2_TMPFS_SIZE=${DOCKERD2_TMPFS_SIZE:-4g} # the three images take 0.9 GB

# d2_vars N: the instance's names and addresses.
d2_vars() {
    D2_N=${1:-2}
    case $D2_N in
    [2-9] | [1-5][0-9] | 6[0-3]) ;;
    *)
        echo "dockerd2: instance $D2_N: 2 to 63" >&2
        return 1
        ;;
    esac
    D2_VETH=hutch-d${D2_N}h # the host's end; hutch-dNn in the namespace
    D2_HOSTIP=10.251.0.$((4 * D2_N - 7))
    D2_IP=10.251.0.$((4 * D2_N - 6))
    D2_DIR=$DOCKERD2_BASE-$D2_N
    D2_CGROUP=/hutch-dockerd-$D2_N
}

# Start and stop are serialised between the tests of one machine.
d2_lock() {
    exec {D2_LOCKFD}<"${BASH_SOURCE[0]}"
    flock "$D2_LOCKFD"
}
d2_unlock() { exec {D2_LOCKFD}<&-; }

dockerd2_env() {
    d2_vars "${1:-2}" || return 1
    export DOCKER_HOST=tcp://$D2_IP:2376 DOCKER_TLS_VERIFY=1 \
        DOCKER_CERT_PATH=$D2_DIR/certs DOCKERD2_LOG=$D2_DIR/log \
        DOCKERD2_DIR=$D2_DIR DOCKERD2_ADDR=$D2_IP:2376
}

dockerd2_docker() {
    local D2_N D2_VETH D2_HOSTIP D2_IP D2_DIR D2_CGROUP
    d2_vars "$1" || return 1
    shift
    env -u DOCKER_CONTEXT docker --host "tcp://$D2_IP:2376" --tlsverify \
        --tlscacert "$D2_DIR/certs/ca.pem" --tlscert "$D2_DIR/certs/cert.pem" \
        --tlskey "$D2_DIR/certs/key.pem" "$@"
}

# d2_answers: GET /version over TLS answers.
d2_answers() {
    curl -sf --max-time 3 --cacert "$D2_DIR/certs/ca.pem" --cert "$D2_DIR/certs/cert.pem" \
        --key "$D2_DIR/certs/key.pem" "https://$D2_IP:2376/version" >/dev/null 2>&1
}

# The network namespace is held by a bind mount at DIR/netns, not in
# /run/netns: nothing of it is outside DIR.
d2_in_ns() { nsenter --net="$D2_DIR/netns" "$@"; }
d2_netns() {
    if ! d2_in_ns true 2>/dev/null; then
        touch "$D2_DIR/netns" && unshare --net="$D2_DIR/netns" true || return 1
    fi
    d2_in_ns ip link set lo up || return 1
    ip link show "$D2_VETH" >/dev/null 2>&1 && return 0
    ip link add "$D2_VETH" type veth peer name "hutch-d${D2_N}n" netns "$D2_DIR/netns" &&
        ip addr add "$D2_HOSTIP/30" dev "$D2_VETH" &&
        ip link set "$D2_VETH" up &&
        d2_in_ns ip addr add "$D2_IP/30" dev "hutch-d${D2_N}n" &&
        d2_in_ns ip link set "hutch-d${D2_N}n" up
}

# A CA, the daemon's certificate (for its address) and the client's, made
# once per instance.
d2_certs() {
    [ -s "$D2_DIR/certs/key.pem" ] && return 0
    mkdir -p "$D2_DIR/ca" "$D2_DIR/server" "$D2_DIR/certs" && (
        cd "$D2_DIR/ca" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=hutch-dockerd-$D2_N-ca" \
            -keyout ca-key.pem -out ca.pem &&
            openssl req -newkey rsa:2048 -nodes -subj "/CN=$D2_IP" \
                -keyout ../server/key.pem -out server.csr &&
            printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$D2_IP" >server.ext &&
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
                -days 7 -extfile server.ext -out ../server/cert.pem &&
            openssl req -newkey rsa:2048 -nodes -subj /CN=hutch-test-client \
                -keyout ../certs/key.pem.tmp -out client.csr &&
            printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
                -days 7 -extfile client.ext -out ../certs/cert.pem &&
            cp ca.pem ../server/ca.pem && cp ca.pem ../certs/ca.pem &&
            mv ../certs/key.pem.tmp ../certs/key.pem
    ) >"$D2_DIR/openssl.log" 2>&1 || {
        echo "dockerd2: cannot make the certificates: see $D2_DIR/openssl.log" >&2
        return 1
    }
}

d2_daemon() {
    local p mounts="tmpfs /run
tmpfs /tmp
tmpfs /dev/shm
tmpfs /var/lib/docker
bind $D2_DIR/etc /etc/docker"
    for p in $DOCKERD2_HIDE; do
        case $D2_DIR/ in
        "${p%/}"/*)
            echo "dockerd2: $D2_DIR is under $p, which the daemon must not see" >&2
            return 1
            ;;
        esac
        mounts="$mounts
tmpfs $p"
    done
    # The exec-root is run-time state: a daemon started again finds none,
    # as after a reboot.
    rm -rf --one-file-system "$D2_DIR/exec"
    mkdir -p "$D2_DIR/etc" "$D2_DIR/data" "$D2_DIR/exec" || return 1
    # The data-root on a tmpfs of its own (DOCKERD2_TMPFS=0: on disk): the
    # images unpack faster, and the end is an unmount, where removing them
    # from a disk a loaded CI shares takes half a minute.
    if [ "$DOCKERD2_TMPFS" = 1 ] && ! engines_leftover_mounts "$D2_DIR/data" >/dev/null; then
        mount -t tmpfs -o "size=$DOCKERD2_TMPFS_SIZE,mode=0710" "hutch-dockerd-$D2_N" \
            "$D2_DIR/data" || return 1
    fi
    echo '{}' >"$D2_DIR/etc/daemon.json"
    echo "--- $(date '+%F %T') dockerd2_start $D2_N" >>"$D2_DIR/log"
    engines_spawn "$D2_DIR" "$D2_DIR/netns" "$mounts" dockerd \
        --config-file="$D2_DIR/etc/daemon.json" --data-root="$D2_DIR/data" \
        --exec-root="$D2_DIR/exec" --pidfile="$D2_DIR/exec/dockerd.pid" \
        --host="tcp://$D2_IP:2376" --host=unix:///run/docker.sock \
        --tlsverify --tlscacert="$D2_DIR/server/ca.pem" \
        --tlscert="$D2_DIR/server/cert.pem" --tlskey="$D2_DIR/server/key.pem" \
        --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
        --userland-proxy=false --cgroup-parent="$D2_CGROUP" || return 1
    for _ in $(seq $((DOCKERD2_WAIT * 4))); do
        d2_answers && return 0
        engines_running "$D2_DIR" || break
        sleep 0.25
    done
    echo "dockerd2: the daemon did not answer at https://$D2_IP:2376: see $D2_DIR/log" >&2
    tail -15 "$D2_DIR/log" | sed 's/^/# /' >&2
    return 1
}

dockerd2_start() {
    local n=${1:-2} rc=0
    d2_vars "$n" || return 1
    [ "$(id -u)" = 0 ] || {
        echo "dockerd2: needs root (network and mount namespaces)" >&2
        return 1
    }
    engines_need dockerd docker docker-init openssl ip nsenter unshare curl flock || return 1
    d2_lock
    if ! engines_running "$D2_DIR" || ! d2_answers; then
        engines_running "$D2_DIR" && engines_kill "$D2_DIR" 0 >/dev/null
        mkdir -p "$D2_DIR" && d2_netns && d2_certs && d2_daemon || rc=1
    fi
    if [ "$rc" = 0 ]; then
        engines_load dockerd2_docker "$n" || {
            echo "dockerd2: copying the images failed" >&2
            rc=1
        }
    fi
    d2_unlock
    [ "$rc" = 0 ] && dockerd2_env "$n"
}

dockerd2_pause() {
    d2_vars "$1" || return 1
    if [ "${2:-}" = KILL ]; then
        engines_kill "$D2_DIR" 0
    else
        engines_kill "$D2_DIR" "$DOCKERD2_GRACE"
    fi
}

# Instances with anything left: a directory or a veth.
d2_instances() {
    local d
    {
        for d in "$DOCKERD2_BASE"-*; do [ -d "$d" ] && echo "${d##*-}"; done
        ip -br link | sed -n 's/^hutch-d\([0-9]*\)h@.*/\1/p'
    } | sort -un
}

dockerd2_stop() {
    local n rc=0 c
    if [ $# = 0 ]; then
        for n in $(d2_instances); do dockerd2_stop "$n" || rc=1; done
        return $rc
    fi
    d2_vars "$1" || return 1
    d2_lock
    # At once: nothing of it is kept.
    engines_kill "$D2_DIR" 0 || rc=1
    # A killed daemon's containers leave their (empty) cgroups.
    for c in /sys/fs/cgroup/*"$D2_CGROUP"; do
        [ -d "$c" ] || continue
        for _ in $(seq 20); do
            find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$c" ] || break
            sleep 0.1
        done
    done
    ! ip link show "$D2_VETH" >/dev/null 2>&1 || ip link delete "$D2_VETH" || rc=1
    ! engines_leftover_mounts "$D2_DIR/netns" >/dev/null || umount "$D2_DIR/netns" || rc=1
    ! engines_leftover_mounts "$D2_DIR/data" >/dev/null || umount "$D2_DIR/data" || rc=1
    if engines_leftover_mounts "$D2_DIR/" >&2; then
        rc=1 # never rm -rf through a mount
    else
        rm -rf --one-file-system "$D2_DIR"
    fi
    d2_unlock
    dockerd2_leftovers "$1" >&2 && rc=1
    return $rc
}

dockerd2_leftovers() {
    local found=1 c
    d2_vars "${1:-2}" || return 1
    [ ! -e "$D2_DIR" ] || { echo "left: $D2_DIR" && found=0; }
    ! ip link show "$D2_VETH" >/dev/null 2>&1 || { echo "left: link $D2_VETH" && found=0; }
    engines_leftover_mounts "$D2_DIR/" && found=0
    for c in /sys/fs/cgroup/*"$D2_CGROUP"; do
        [ ! -d "$c" ] || { echo "left: cgroup $c" && found=0; }
    done
    [ ! -d "$D2_DIR" ] || ! engines_leftover_procs "$D2_DIR" || found=0
    pgrep -af -- "--data-root=$D2_DIR/" && found=0
    return $found
}
