# podman.sh — podman's Docker-compatible API service, for the tests that run
# hutch's docker executor against it (sourced by bash tests; root).
#   podman_start    idempotent: `podman system service` on
#                   unix://PODMAN_DIR/podman.sock (/var/tmp/hutch-podman),
#                   with storage, run-time state, locks, events and volumes
#                   of its own in PODMAN_DIR (the host's podman storage is
#                   never touched), and the hutch images copied from the
#                   main daemon; exports DOCKER_HOST=unix://…/podman.sock
#                   (and unsets DOCKER_TLS_VERIFY, DOCKER_CERT_PATH),
#                   PODMAN_LOG
#   podman_docker ARGS…  the docker CLI on it
#   podman_stop     idempotent: its containers, the service, PODMAN_DIR;
#                   false, saying what, if anything is left
#   podman_leftovers  prints what is left; false when nothing
# The service runs as root with the cgroupfs manager (this machine's pid 1
# is no systemd), in a pid and a private mount namespace of its own
# (engines.sh) where an empty tmpfs covers /run (podman's and runc's state,
# /run/containers, /run/runc) but for /run/hutch and PODMAN_KEEP,
# /var/lib (/var/lib/containers, where containers/image keeps a cache
# whatever the storage says) but for /var/lib/hutch, /dev/shm, and each of
# PODMAN_HIDE.  The rest of the host is seen as it is: it stands for a local
# engine, to which hutch bind-mounts its paths.  Its storage (graphroot and
# runroot) is a tmpfs at PODMAN_DIR/storage; its containers' cgroups are
# podman's /libpod_parent/libpod-ID (no setting moves them in 4.3).
#
# What differs from Docker 20.10 (podman 4.3.1 as root, cgroup v1,
# cgroupfs; engines_probe.py --lenient shows it, engines_smoke.sh runs it):
# - GET /version: ApiVersion "1.41", MinAPIVersion "1.24" (hutch: 1.35 to
#   1.41), Components[0].Name "Podman Engine", Version "4.3.1".  GET /info's
#   Runtimes lists every runtime podman knows of (crun, kata, krun, runsc…),
#   installed or not.
# - Loaded images are named localhost/hutch-NAME:V (RepoTags); the name
#   hutch-NAME:V finds them (GET /images/…/json, create); same ids, labels.
# - POST /containers/create with create_body()'s fields: 201, no warnings.
#   Honoured: User, CapDrop ALL + CapAdd (bounding set 0x1e0; inspect shows
#   podman's default list as CapDrop and CapAdd empty), no-new-privileges,
#   ReadonlyRootfs, PidsLimit, NetworkMode none, Tmpfs /tmp, Binds ":ro".
#   Silently ignored:
#   . Mounts[].VolumeOptions (DriverConfig.Options and Labels): /work is a
#     plain directory of podman's storage, no tmpfs, no size cap, and no
#     hutch.owner label (a label filter does not find it);
#   . MaskedPaths: podman's own list; /proc/cmdline and boot_id readable
#     (hutch-init's view for the program masks them again);
#   . CgroupnsMode "private": the host's cgroup namespace
#     (/proc/self/cgroup says /libpod_parent/libpod-ID; the program's view
#     has a cgroup namespace of its own);
#   . LogConfig.Config (max-size).
#   Added: with ReadonlyRootfs, tmpfs on /run and /var/tmp (no size).
# - What works on both for /work: POST /volumes/create {"Driver": "local",
#   "DriverOpts": {"type": "tmpfs", "device": "tmpfs", "o":
#   "nr_blocks=PAGES,uid=…,gid=…,mode=0755,nosuid,nodev"}, "Labels": …},
#   Mounts [{"Type": "volume", "Source": NAME, "Target": "/work"}], and
#   DELETE /volumes/NAME after (v=1 removes anonymous volumes only).  Not
#   "size=" in o: podman takes it for an XFS project quota and refuses the
#   volume ("volume options size and inodes not supported").
# - GET /archive?path=/work/out/.: members "y.txt", "sub", "sub/z"; Docker
#   sends "./", "./y.txt", "./sub/", "./sub/z".  PUT and GET /archive on the
#   running container's volume work as with Docker.
# - POST /containers/ID/attach?stream=1&stdin=1&stdout=1&stderr=1 (Upgrade:
#   tcp) before start: "101 UPGRADED", multiplexed frames, a half-close is
#   the program's EOF on stdin: as Docker.
# - DELETE /containers/ID?force=1&v=1: the anonymous volume goes too.
. "${BASH_SOURCE[0]%/*}/engines.sh"
PODMAN_DIR=${PODMAN_DIR:-/var/tmp/hutch-podman}
PODMAN_WAIT=${PODMAN_WAIT:-120}             # seconds for the service to answer
PODMAN_TMPFS_SIZE=${PODMAN_TMPFS_SIZE:-4g} # the three images take 0.9 GB
PODMAN_HIDE=${PODMAN_HIDE:-} # directories the service must not see
PODMAN_KEEP=${PODMAN_KEEP:-} # directories of /run it must see (hutch's: kept)

podman_docker() {
    env -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH -u DOCKER_CONTEXT \
        docker --host "unix://$PODMAN_DIR/podman.sock" "$@"
}

pm_answers() {
    curl -sf --max-time 3 --unix-socket "$PODMAN_DIR/podman.sock" http://d/version \
        >/dev/null 2>&1
}

pm_lock() {
    exec {PM_LOCKFD}<"${BASH_SOURCE[0]}"
    flock "$PM_LOCKFD"
}
pm_unlock() { exec {PM_LOCKFD}<&-; }

pm_config() {
    local d=$PODMAN_DIR
    cat >"$d/containers.conf" <<EOF
# containers.conf — written by tests/lib/podman.sh: everything in $d.
[containers]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$d/events.log"
lock_type = "file"
runtime = "runc"
static_dir = "$d/storage/root/libpod"
tmp_dir = "$d/storage/tmp"
volume_path = "$d/storage/root/volumes"
[network]
network_backend = "netavark"
network_config_dir = "$d/networks"
EOF
    cat >"$d/storage.conf" <<EOF
# storage.conf — written by tests/lib/podman.sh.
[storage]
driver = "overlay"
graphroot = "$d/storage/root"
runroot = "$d/storage/run"
EOF
}

podman_start() {
    local p rc=0 mounts="tmpfs /run /run/hutch $PODMAN_KEEP
tmpfs /var/lib /var/lib/hutch
tmpfs /dev/shm"
    [ "$(id -u)" = 0 ] || {
        echo "podman: the tests run its service as root" >&2
        return 1
    }
    engines_need podman conmon runc docker docker-init unshare curl flock || return 1
    pm_lock
    # hutch's state directory must be there before the service's /run is
    # made (hutch run as root makes it so, src/plugin.c), or the service
    # would never see the one made later.
    [ -d /run/hutch ] || install -d -m 0711 /run/hutch
    # podman makes /libpod_parent (and its conmon) in every cgroup
    # hierarchy: removed at the end if it was not there before.
    [ -d /sys/fs/cgroup/pids/libpod_parent ] || [ -e "$PODMAN_DIR/cgroups" ] ||
        { mkdir -p "$PODMAN_DIR" && touch "$PODMAN_DIR/cgroups"; }
    if ! engines_running "$PODMAN_DIR" || ! pm_answers; then
        engines_running "$PODMAN_DIR" && engines_kill "$PODMAN_DIR" 0 >/dev/null
        for p in $PODMAN_HIDE; do
            mounts="$mounts
tmpfs $p"
        done
        mkdir -p "$PODMAN_DIR/storage" "$PODMAN_DIR/networks" &&
            { engines_leftover_mounts "$PODMAN_DIR/storage" >/dev/null ||
                mount -t tmpfs -o "size=$PODMAN_TMPFS_SIZE,mode=0710" hutch-podman \
                    "$PODMAN_DIR/storage"; } && pm_config || rc=1
        rm -f "$PODMAN_DIR/podman.sock"
        echo "--- $(date '+%F %T') podman_start" >>"$PODMAN_DIR/log"
        [ "$rc" = 1 ] || engines_spawn "$PODMAN_DIR" "" "$mounts" env \
            "CONTAINERS_CONF=$PODMAN_DIR/containers.conf" \
            "CONTAINERS_STORAGE_CONF=$PODMAN_DIR/storage.conf" \
            podman --log-level=info system service --time=0 \
            "unix://$PODMAN_DIR/podman.sock" || rc=1
        if [ "$rc" = 0 ]; then
            rc=1
            for _ in $(seq $((PODMAN_WAIT * 4))); do
                pm_answers && rc=0 && break
                engines_running "$PODMAN_DIR" || break
                sleep 0.25
            done
            [ "$rc" = 0 ] || {
                echo "podman: the service did not answer: see $PODMAN_DIR/log" >&2
                tail -15 "$PODMAN_DIR/log" | sed 's/^/# /' >&2
            }
        fi
    fi
    if [ "$rc" = 0 ]; then
        engines_load podman_docker || {
            echo "podman: copying the images failed" >&2
            rc=1
        }
    fi
    pm_unlock
    [ "$rc" = 0 ] || return 1
    unset DOCKER_TLS_VERIFY DOCKER_CERT_PATH
    export DOCKER_HOST=unix://$PODMAN_DIR/podman.sock PODMAN_LOG=$PODMAN_DIR/log
}

podman_stop() {
    local rc=0 ids c
    [ -d "$PODMAN_DIR" ] || return 0
    pm_lock
    # Its containers first, through it: podman removes their cgroups
    # (below /libpod_parent, shared with any other podman of the host).
    if engines_running "$PODMAN_DIR" && pm_answers; then
        ids=$(podman_docker ps -aq)
        [ -z "$ids" ] || podman_docker rm -f $ids >/dev/null || rc=1
    fi
    engines_kill "$PODMAN_DIR" 0 || rc=1
    if [ -e "$PODMAN_DIR/cgroups" ]; then
        for c in /sys/fs/cgroup/*/libpod_parent; do
            [ ! -d "$c" ] || find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
        done
    fi
    ! engines_leftover_mounts "$PODMAN_DIR/storage" >/dev/null ||
        umount "$PODMAN_DIR/storage" || rc=1
    if engines_leftover_mounts "$PODMAN_DIR/" >&2; then
        rc=1 # never rm -rf through a mount
    else
        rm -rf --one-file-system "$PODMAN_DIR"
    fi
    pm_unlock
    podman_leftovers >&2 && rc=1
    return $rc
}

podman_leftovers() {
    local found=1
    [ ! -e "$PODMAN_DIR" ] || { echo "left: $PODMAN_DIR" && found=0; }
    engines_leftover_mounts "$PODMAN_DIR/" && found=0
    pgrep -af -- "$PODMAN_DIR/" && found=0
    return $found
}
