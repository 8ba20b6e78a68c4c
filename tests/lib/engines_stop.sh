#!/bin/bash
# engines_stop.sh — after a suite (contrib/test.sh): the extra engines the
# tests started (tests/lib/dockerd2.sh's instances, tests/lib/podman.sh's
# service) must hold nothing of hutch's (no container, no volume labelled
# hutch.owner); then they are stopped, leaving nothing.  Prints what was
# left; exit 1 when anything was.
. "${BASH_SOURCE[0]%/*}/dockerd2.sh"
. "${BASH_SOURCE[0]%/*}/podman.sh"
rc=0
left() { # ENGINE-NAME docker-cli-function [args]
    local name=$1 c v
    shift
    c=$("$@" ps -aq --filter label=hutch.owner 2>/dev/null | tr '\n' ' ')
    v=$("$@" volume ls -q --filter label=hutch.owner 2>/dev/null | tr '\n' ' ')
    [ -z "$c$v" ] && return 0
    echo "$name: containers: ${c:-none}; volumes: ${v:-none}"
    return 1
}
for n in $(d2_instances); do
    d2_vars "$n" && engines_running "$D2_DIR" && { left "dockerd $n" dockerd2_docker "$n" || rc=1; }
    dockerd2_stop "$n" || { echo "dockerd $n: not all of it stopped"; rc=1; }
done
if [ -e "$PODMAN_DIR" ]; then
    engines_running "$PODMAN_DIR" && { left podman podman_docker || rc=1; }
    podman_stop || { echo "podman: not all of it stopped"; rc=1; }
fi
exit $rc
