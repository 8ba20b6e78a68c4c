# run.sh — every fuzz harness (or those in FUZZ_TARGETS) for FUZZ_SECONDS
# seconds each on its corpus, in a build configured with --enable-fuzzers
# (`make fuzz`, and CI through `make check`): one TAP result per harness,
# with its executions per second.  Inputs that find new coverage go to
# tests/fuzz/new/TARGET of the build tree (not into the source tree: minimise
# and copy the useful ones by hand); a crash, a leak or a hang (an input
# running longer than 60 s) fails the harness and is kept in
# tests/fuzz/crashes-TARGET/ of the build tree, with the log.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

FUZZ="$HUTCH_SRCDIR/tests/fuzz"
seconds=${FUZZ_SECONDS:-60}
for t in $FUZZ_TARGETS; do
    bin="$HUTCH_BUILDDIR/tests/fuzz/fuzz_$t"
    new="$HUTCH_BUILDDIR/tests/fuzz/new/$t"
    arts="$HUTCH_BUILDDIR/tests/fuzz/crashes-$t"
    log="$HUTCH_BUILDDIR/tests/fuzz/fuzz-$t.out"
    mkdir -p "$new" "$arts"
    # Room for the inputs each parser takes: tars and messages are larger.
    case $t in
    tar | mcp | sse) max_len=65536 ;;
    *) max_len=16384 ;;
    esac
    "$bin" -max_total_time="$seconds" -timeout=60 -max_len="$max_len" \
        -print_final_stats=1 -artifact_prefix="$arts/" "$new" "$FUZZ/corpus/$t" \
        >"$log" 2>&1
    rc=$?
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    desc="fuzz_$t: $(stat number_of_executed_units) runs, $(stat average_exec_per_sec)/s,"
    desc="$desc ${cov:-cov: ?}, $(ls "$new" | wc -l) new inputs, $(stat peak_rss_mb) MB"
    if [ "$rc" = 0 ]; then
        t_result 0 "$desc"
    else
        t_result 1 "$desc (exit $rc; see $log)"
        grep -E -A30 '^==[0-9]+==|fuzz invariant|^ALARM|deadly signal' "$log" |
            head -60 | sed 's/^/#   /'
    fi
done
done_testing
