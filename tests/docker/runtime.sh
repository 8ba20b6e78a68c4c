#!/bin/bash
# runtime.sh — `hutch doctor` and the execute_code description say which
# runtime each Docker image carries (its org.hutch.runtime label, set by
# images/build.sh), as tests/gvisor/runtime.sh checks for the rootfs.  The
# images are the built ones committed again with a made-up label, so the
# line shown can only come from the label.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
command -v docker >/dev/null || skip_all "no docker CLI to make a labelled image with"
V=$("$HUTCH" --version | awk '{print $2}')
TAG="hutch-runtime-test-$$"
CIDS=()
cleanup() {
    for c in "${CIDS[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
    docker rmi -f "$TAG-python:1" "$TAG-node:1" "$TAG-nolabel:1" "$TAG-data:1" >/dev/null 2>&1
}
trap cleanup EXIT

# relabel FROM TO LABEL: TO is FROM with org.hutch.runtime=LABEL.
relabel() {
    local cid
    cid=$(docker create "$1" /bin/true) || return 1
    CIDS+=("$cid")
    docker commit --change "LABEL org.hutch.runtime=\"$3\"" "$cid" "$2" >/dev/null
}
ok "made a python image labelled Made-up python" \
    relabel "hutch-python:$V" "$TAG-python:1" "Made-up python 0.0.1-test"
ok "made a node image labelled Made-up node" \
    relabel "hutch-node:$V" "$TAG-node:1" "Made-up node 0.0.1-test"
ok "made an image whose label is empty" relabel "hutch-python:$V" "$TAG-nolabel:1" ""

HUTCH_DOCKER_IMAGE_PYTHON="$TAG-python:1" HUTCH_DOCKER_IMAGE_JAVASCRIPT="$TAG-node:1" \
    run_hutch doctor
like "doctor: the python image's runtime" "$OUT" "$TAG-python:1 (Made-up python 0.0.1-test)"
like "doctor: the node image's runtime" "$OUT" "$TAG-node:1 (Made-up node 0.0.1-test)"
HUTCH_DOCKER_IMAGE_PYTHON="$TAG-nolabel:1" run_hutch doctor
like "doctor: an image with an empty label is said to need make images" "$OUT" \
    "$TAG-nolabel:1 (runtime version not recorded: run 'make images' again)"

# The data flavour's Python packages, from its org.hutch.packages label.
ok "made a data image labelled with made-up packages" \
    relabel "hutch-python-data:$V" "$TAG-data:1" "Made-up python 0.0.1-test"
cid=$(docker create "$TAG-data:1" /bin/true) && CIDS+=("$cid") &&
    docker commit --change 'LABEL org.hutch.packages="numpy 0.0-test, pandas 0.0-test, matplotlib 0.0-test"' \
        "$cid" "$TAG-data:1" >/dev/null
HUTCH_DOCKER_IMAGE_PYTHON_DATA="$TAG-data:1" run_hutch doctor
like "doctor: the data image's Python packages" "$OUT" \
    "ok    python packages        docker: base image: none of numpy, pandas, matplotlib; flavour \"data\" ($TAG-data:1): numpy 0.0-test, pandas 0.0-test, matplotlib 0.0-test"
HUTCH_DOCKER_IMAGE_PYTHON_DATA="$TAG-missing:1" run_hutch doctor
like "doctor: a missing data image is a warning that says how to build it" "$OUT" \
    "warn  python packages        docker: base image: none of numpy, pandas, matplotlib; flavour \"data\": $TAG-missing:1 is missing (build it with 'make images')"
is "doctor: a missing data image does not fail the doctor" "$RC" 0

# The execute_code description, from the labels (no sandbox started).
list_tools() {
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' |
        timeout 120 "$HUTCH" serve --pool 0 2>/dev/null
}
OUT=$(HUTCH_DOCKER_IMAGE_PYTHON="$TAG-python:1" HUTCH_DOCKER_IMAGE_JAVASCRIPT="$TAG-node:1" list_tools)
like "execute_code's description names the images' runtimes" "$OUT" \
    'Runs on Made-up python 0.0.1-test, Made-up node 0.0.1-test (docker executor).'
OUT=$(HUTCH_DOCKER_IMAGE_PYTHON="$TAG-nolabel:1" HUTCH_DOCKER_IMAGE_JAVASCRIPT="$TAG-node:1" list_tools)
like "... and leaves out one it cannot know" "$OUT" \
    'Runs on Made-up node 0.0.1-test (docker executor).'

done_testing
