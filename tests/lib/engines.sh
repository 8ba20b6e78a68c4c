# engines.sh — what the tests' extra container engines share (sourced by
# dockerd2.sh and podman.sh, bash): the tools check, the sandbox images'
# names and their copy from the main Docker daemon, and the one way an
# engine is started and ended in namespaces of its own.
#   engines_need TOOL…          say which tools are missing (installs nothing)
#   engines_main_docker ARGS…   the docker CLI on the main daemon, whatever
#                               DOCKER_HOST the caller has exported
#   engines_images              hutch-NAME:VERSION on the main daemon
#   engines_load CLI…           copies the images CLI lacks (or has other ids
#                               of) from the main daemon: docker save | CLI load
#   engines_spawn DIR NETNS MOUNTS CMD…
#                               CMD detached, as the child of tini, pid 1 of a
#                               pid namespace of its own, in a private mount
#                               namespace (and the network namespace bound at
#                               the path NETNS unless empty); MOUNTS: lines
#                               "tmpfs PATH [KEEP…]" (hide an existing
#                               directory but the directories KEEP below it)
#                               or "bind SRC PATH"
#   engines_kill DIR GRACE      SIGTERM to that pid 1 (tini passes it on),
#                               SIGKILL after GRACE seconds: the kernel then
#                               ends every process of the namespace
#                               (containers, shims, conmon) and the private
#                               mounts go with the last of them
#   engines_running DIR         its pid 1 is alive
# Nothing here touches the main daemon but to read its images; nothing is
# created outside DIR (and the namespace's own tmpfs mounts).
ENGINES_MAIN_HOST=${ENGINES_MAIN_HOST:-unix:///var/run/docker.sock}
ENGINES_SRCDIR=$(cd "${BASH_SOURCE[0]%/*}/../.." && pwd)

engines_need() {
    local t missing=""
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
    done
    [ -z "$missing" ] && return 0
    echo "missing:$missing (contrib/test.sh installs them: TEST_DEPS in contrib/deps.sh)" >&2
    return 1
}

engines_main_docker() {
    env -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH -u DOCKER_CONTEXT \
        docker --host "$ENGINES_MAIN_HOST" "$@"
}

# The images' version: the package version the images were built for
# (`make images` names them hutch-NAME:$(PACKAGE_VERSION)).
engines_version() {
    if [ -n "${HUTCH_IMAGE_VERSION:-}" ]; then
        echo "$HUTCH_IMAGE_VERSION"
    elif [ -n "${HUTCH_BUILDDIR:-}" ] && [ -f "$HUTCH_BUILDDIR/Makefile" ]; then
        sed -n 's/^PACKAGE_VERSION = //p' "$HUTCH_BUILDDIR/Makefile"
    else
        sed -n 's/^AC_INIT(\[hutch\], \[\([^]]*\)\].*/\1/p' "$ENGINES_SRCDIR/configure.ac"
    fi
}

# ENGINES_IMAGES (python node python-data) that the main daemon has.
engines_images() {
    local v n
    v=$(engines_version)
    for n in ${ENGINES_IMAGES:-python node python-data}; do
        engines_main_docker image inspect "hutch-$n:$v" >/dev/null 2>&1 && echo "hutch-$n:$v"
    done
}

engines_load() {
    local want="" i id
    for i in $(engines_images); do
        id=$(engines_main_docker image inspect -f '{{.Id}}' "$i")
        [ "$("$@" image inspect -f '{{.Id}}' "$i" 2>/dev/null)" = "$id" ] || want="$want $i"
    done
    [ -z "$want" ] && return 0
    # One stream, no file: ~0.9 GB for the three images.
    engines_main_docker save $want | "$@" load -q >/dev/null
}

engines_spawn() {
    local dir=$1 netns=$2 mounts=$3 pid i
    shift 3
    printf '%s\n' "$mounts" >"$dir/mounts"
    # pid 1 of the new namespaces: the mounts, then tini, which reaps what
    # the engine orphans and passes SIGTERM on to it.
    cat >"$dir/ns-init.sh" <<'EOF'
# ns-init.sh — written by tests/lib/engines.sh: the mounts of an engine's
# private mount namespace, then the engine under tini (pid 1 of its pid
# namespace).  A directory that does not exist is left alone: creating it
# would create it on the host's file system.
#   tmpfs PATH [KEEP…]   an empty tmpfs over PATH, through which the
#                        directories KEEP below it are still seen
#   bind SRC PATH        SRC over PATH
set -e
dir=$1
shift
while read -r kind a rest; do
    case $kind in
    tmpfs)
        [ -d "$a" ] || continue
        n=0
        for k in $rest; do
            n=$((n + 1))
            case $k in "$a"/*) ;; *) continue ;; esac # below PATH only
            [ -d "$k" ] || continue
            mkdir -p "$dir/keep/$n"
            mount --rbind "$k" "$dir/keep/$n"
        done
        mount -t tmpfs -o mode=0755 hutch-engine "$a"
        n=0
        for k in $rest; do
            n=$((n + 1))
            mountpoint -q "$dir/keep/$n" || continue
            mkdir -p "$k"
            mount --rbind "$dir/keep/$n" "$k"
            umount -l "$dir/keep/$n"
        done
        ;;
    bind) [ ! -d "$rest" ] || mount --bind "$a" "$rest" ;;
    esac
done <"$dir/mounts"
exec docker-init -- "$@"
EOF
    set -- unshare --mount --pid --fork --mount-proc --propagation private \
        --kill-child=SIGKILL sh "$dir/ns-init.sh" "$dir" "$@"
    [ -z "$netns" ] || set -- nsenter "--net=$netns" "$@"
    # Detached, holding none of the caller's descriptors (a TAP driver's
    # pipe, make's jobserver), as contrib/deps.sh starts the main dockerd.
    pid=$(/usr/bin/python3 -c 'import subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL,
                     stdout=open(sys.argv[1], "ab"), stderr=subprocess.STDOUT,
                     close_fds=True, start_new_session=True)
print(p.pid)' "$dir/log" "$@") || return 1
    echo "$pid" >"$dir/launcher.pid"
    # nsenter execs unshare, which forks the namespace's pid 1.
    for i in $(seq 50); do
        i=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null)
        i=${i%% *}
        [ -n "$i" ] && {
            echo "$i" >"$dir/init.pid"
            return 0
        }
        engines_alive "$pid" || break
        sleep 0.1
    done
    echo "the engine's namespace did not start: see $dir/log" >&2
    return 1
}

# alive PID: exists and is no zombie (this machine's pid 1 may reap late).
engines_alive() {
    local s
    s=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
    [ -n "$s" ] && [ "$s" != Z ]
}

# The pid recorded in DIR/NAME, if that process is still the one started
# from DIR (a recycled pid is someone else's).
engines_pid() {
    local pid
    pid=$(cat "$1/$2" 2>/dev/null) && [ -n "$pid" ] || return 1
    engines_alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$1/" || return 1
    echo "$pid"
}

engines_running() { engines_pid "$1" init.pid >/dev/null; }

engines_kill() {
    local dir=$1 grace=$2 init launcher i
    init=$(engines_pid "$dir" init.pid)
    launcher=$(engines_pid "$dir" launcher.pid)
    if [ -n "$init" ] && [ "$grace" -gt 0 ]; then
        kill -TERM "$init" 2>/dev/null
        for i in $(seq $((grace * 10))); do
            engines_alive "$init" || break
            sleep 0.1
        done
    fi
    [ -z "$init" ] || ! engines_alive "$init" || kill -KILL "$init" 2>/dev/null
    [ -z "$launcher" ] || ! engines_alive "$launcher" || kill -KILL "$launcher" 2>/dev/null
    for i in $(seq 100); do
        { [ -z "$init" ] || ! engines_alive "$init"; } &&
            { [ -z "$launcher" ] || ! engines_alive "$launcher"; } && break
        sleep 0.1
    done
    rm -f "$dir/init.pid" "$dir/launcher.pid"
    # Anything started from DIR that survived is a bug: say so.
    ! engines_leftover_procs "$dir"
}

# Processes whose command line names DIR (printed); false when none.  The
# engines keep their state in DIR, so that every process of theirs but the
# containers' names it (containerd's --config, a shim's -address, conmon's
# paths); the containers die with the pid namespace, and their cgroups
# say so.  (A namespace's inode number says nothing once it is gone: the
# kernel gives it to the next namespace made.)
engines_leftover_procs() {
    local p found=1
    # (grep names DIR too, but is gone when its pid is looked at)
    for p in $(grep -laF -- "$1/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
        engines_alive "$p" || continue
        echo "left running: $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 200)"
        found=0
    done
    return $found
}

# Mounts of this (the caller's) mount namespace at PATH or below it, or
# bound from there (printed); false when none.
engines_leftover_mounts() {
    awk -v p="$1" 'index($5, p) == 1 || index($4, p) == 1 { print "left mounted: " $5; f = 1 }
                   END { exit !f }' /proc/self/mountinfo
}

# engines_require WHAT CMD…: CMD starts an engine the test file needs; when
# it cannot, the file is skipped, or fails under CI (contrib/test.sh gives
# it everything), as executor_require does for an executor.
engines_require() {
    local what=$1
    shift
    "$@" >/dev/null && return 0
    . "$HUTCH_SRCDIR/tests/lib/tap.sh"
    case "${CI:-}" in
    "" | false | 0) skip_all "$what does not start here" ;;
    esac
    echo "not ok 1 - $what starts"
    echo "1..1"
    exit 1
}
