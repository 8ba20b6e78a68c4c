#!/bin/sh
# test.sh — the quick start's second command, and what CI runs: install the
# dependencies, build twice (plain, and with ASan+UBSan), run the whole test
# suite on both (which replays the fuzz corpus), then build the fuzz
# harnesses with clang and libFuzzer and run each for FUZZ_SECONDS (15 s by
# default), and print one summary line "N passed, N failed, N skipped".
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/contrib/deps.sh"
cd "$SRC" || exit 1

install_deps $BUILD_DEPS $RUNTIME_DEPS $TEST_DEPS && install_npm_deps || {
    echo "installing dependencies failed"
    echo "0 passed, 1 failed"
    exit 1
}

failed_steps=0
# dockerd (with runsc registered) for the docker executor's tests.
setup_docker || {
    echo "setting up Docker failed: the docker executor's tests cannot run"
    failed_steps=$((failed_steps + 1))
}

if [ -n "${CI:-}" ] || [ "${HUTCH_CHECK_FORMAT:-1}" = 1 ]; then
    if ! clang-format --dry-run --Werror src/*.c src/*.h plugins/*/*.c plugins/*/*.h \
        tests/unit/*.c tests/unit/*.h tests/plugins/*.c tests/plugins/*.h \
        tests/fuzz/*.c tests/fuzz/*.h 2>format.out; then
        head -40 format.out
        echo "format check failed: run 'make format'"
        failed_steps=$((failed_steps + 1))
    fi
    rm -f format.out
    # Banned functions (ARCHITECTURE.md, "Conventions").
    if grep -nE '\b(sprintf|vsprintf|strcpy|strcat|gets|system)\(' \
        src/*.c plugins/*/*.c tests/unit/*.c tests/fuzz/*.c | grep -v snprintf; then
        echo "banned function used"
        failed_steps=$((failed_steps + 1))
    fi
fi

run_suite() { # name builddir configure-args…
    name=$1
    dir=$2
    shift 2
    echo "== $name build"
    if ! build "$dir" "$@"; then
        echo "$name build failed"
        failed_steps=$((failed_steps + 1))
        return
    fi
    # The sandbox images, once: built in build/images (Docker's images are
    # per version); other build trees share those rootfs directories.
    if [ -n "$CHECK_ARGS" ]; then
        : # the fuzz build runs no sandbox
    elif [ "$dir" = "$SRC/build" ]; then
        ensure_images "$dir" || {
            echo "building the sandbox images failed"
            failed_steps=$((failed_steps + 1))
        }
    elif [ ! -e "$dir/images" ]; then
        ln -s "$SRC/build/images" "$dir/images"
    fi
    echo "== $name tests"
    make -C "$dir" -j2 check $CHECK_ARGS >"$dir/check.out" 2>&1
    grep -E '^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS)' "$dir/check.out" | grep -v '^PASS' | head -100
    grep -E '^# (TOTAL|PASS|FAIL|SKIP|ERROR)' "$dir/check.out"
    for log in $(grep -lE '^(not ok|Bail out)' "$dir"/tests/*/*.log 2>/dev/null); do
        echo "--- $log"
        grep -B2 -A6 -E '^(not ok|Bail out)' "$log" | head -60
    done
    after_suite "$name"
}

# After a whole suite nothing of hutch's may be left: no container, no
# volume, no socket or state directory, no runsc process, no mount.
after_passed=0
after_suite() {
    left=""
    if command -v docker >/dev/null && docker version >/dev/null 2>&1; then
        left="$left$(docker ps -aq --filter label=hutch.owner | sed 's/^/container:/')"
        left="$left$(docker volume ls -q --filter label=hutch.owner | sed 's/^/volume:/')"
    fi
    for d in /run/hutch/docker /run/hutch/gvisor; do
        [ -d "$d" ] && left="$left$(ls -A "$d" | sed "s|^|$d/|")"
    done
    left="$left$(pgrep -af -- '--root=/run/hutch/gvisor/' | grep -v pgrep)"
    # The extra engines of tests/remote, tests/docker/engines.sh and
    # tests/podman: nothing of hutch's on them, then stopped.
    left="$left$(HUTCH_SRCDIR="$SRC" bash "$SRC/tests/lib/engines_stop.sh" 2>&1)"
    left="$left$(grep -F ' /run/hutch/gvisor/' /proc/self/mountinfo)"
    if [ -n "$left" ]; then
        echo "after the $1 suite, hutch left:"
        echo "$left" | head -20
        failed_steps=$((failed_steps + 1))
    else
        echo "after the $1 suite: no container, volume, state directory, runsc process or mount left"
        after_passed=$((after_passed + 1))
    fi
}

CHECK_ARGS=""
run_suite plain "$SRC/build" --enable-werror
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite sanitizers "$SRC/build-asan" --enable-sanitizers --enable-werror
# The fuzz harnesses under clang (ASan+UBSan): the corpus replayed, then
# each harness fuzzing briefly (7 harnesses, about 2 minutes at 15 s).
CHECK_ARGS="FUZZ_SECONDS=${FUZZ_SECONDS:-15}"
run_suite fuzz "$SRC/build-fuzz" --enable-fuzzers --enable-werror

# Count every TAP result of both runs.
pass=$after_passed
fail=$failed_steps
skip=0
for trs in "$SRC"/build/tests/*/*.trs "$SRC"/build-asan/tests/*/*.trs \
    "$SRC"/build-fuzz/tests/*/*.trs; do
    [ -f "$trs" ] || continue
    p=$(grep -c '^:test-result: PASS' "$trs")
    f=$(grep -cE '^:test-result: (FAIL|ERROR|XPASS)' "$trs")
    s=$(grep -c '^:test-result: SKIP' "$trs")
    pass=$((pass + p))
    fail=$((fail + f))
    skip=$((skip + s))
done
[ $((pass + fail)) -gt 0 ] || fail=$((fail + 1))
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
