# replay.sh — every fuzz harness on its corpus (tests/fuzz/corpus/TARGET)
# and on every crash found so far (tests/fuzz/crashes/TARGET): one TAP
# result each.  Works on both kinds of harness binaries: libFuzzer's
# (--enable-fuzzers) and replay.c's take the same file arguments.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

FUZZ="$HUTCH_SRCDIR/tests/fuzz"
for t in $FUZZ_TARGETS; do
    bin="$HUTCH_BUILDDIR/tests/fuzz/fuzz_$t"
    for kind in corpus crashes; do
        dir="$FUZZ/$kind/$t"
        set -- "$dir"/*
        [ -e "$1" ] || {
            [ "$kind" = crashes ] || t_result 1 "fuzz_$t has a corpus"
            continue
        }
        log="$HUTCH_BUILDDIR/tests/fuzz/replay-$t-$kind.out"
        if "$bin" "$@" >"$log" 2>&1; then
            t_result 0 "fuzz_$t replays its $kind ($# inputs)"
        else
            t_result 1 "fuzz_$t replays its $kind ($# inputs)"
            tail -40 "$log" | sed 's/^/#   /'
        fi
    done
done
done_testing
