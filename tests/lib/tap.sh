# tap.sh — TAP helpers for the shell tests (sourced).
#   ok DESC CMD…        pass when CMD succeeds
#   not_ok DESC CMD…    pass when CMD fails
#   is DESC GOT WANT    pass when the strings are equal
#   like DESC GOT SUB   pass when GOT contains SUB
#   skip_all REASON     plan 0 and stop
#   done_testing        run the checks named in T_AT_END, print the plan;
#                       exit 1 when anything failed
set -u
T_N=0
T_FAILED=0
T_AT_END=""
: "${HUTCH_BUILDDIR:?run the tests through make check}"
HUTCH="$HUTCH_BUILDDIR/hutch"
PY=/usr/bin/python3
export LC_ALL=C.UTF-8

t_result() {
    T_N=$((T_N + 1))
    if [ "$1" = 0 ]; then
        echo "ok $T_N - $2"
    else
        echo "not ok $T_N - $2"
        T_FAILED=$((T_FAILED + 1))
    fi
}
ok() {
    d=$1
    shift
    if "$@"; then t_result 0 "$d"; else t_result 1 "$d"; fi
}
not_ok() {
    d=$1
    shift
    if "$@"; then t_result 1 "$d"; else t_result 0 "$d"; fi
}
is() {
    if [ "$2" = "$3" ]; then
        t_result 0 "$1"
    else
        t_result 1 "$1"
        printf '#   got:  %s\n#   want: %s\n' "$2" "$3" | head -20
    fi
}
like() {
    case "$2" in
    *"$3"*) t_result 0 "$1" ;;
    *)
        t_result 1 "$1"
        printf '#   got:  %s\n#   want substring: %s\n' "$2" "$3" | head -20
        ;;
    esac
}
unlike() {
    case "$2" in
    *"$3"*)
        t_result 1 "$1"
        printf '#   got:  %s\n#   unwanted substring: %s\n' "$2" "$3" | head -20
        ;;
    *) t_result 0 "$1" ;;
    esac
}
skip_all() {
    echo "1..0 # SKIP $1"
    exit 0
}
done_testing() {
    for f in $T_AT_END; do "$f"; done
    echo "1..$T_N"
    [ "$T_FAILED" = 0 ]
}
# json FIELD < JSON: print one top-level field (strings raw, others as JSON)
json() {
    $PY -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}
# run_hutch ARGS…: sets OUT, ERR, RC
run_hutch() {
    T_TMP_OUT=$(mktemp)
    T_TMP_ERR=$(mktemp)
    "$HUTCH" "$@" >"$T_TMP_OUT" 2>"$T_TMP_ERR" </dev/null
    RC=$?
    OUT=$(cat "$T_TMP_OUT")
    ERR=$(cat "$T_TMP_ERR")
    rm -f "$T_TMP_OUT" "$T_TMP_ERR"
    t_check_executor "$@"
}
# A `hutch run --json` whose program ran must name the executor the test
# asked for (--executor, else $HUTCH_EXECUTOR, else local): a suite never
# passes on the wrong executor.  A mismatch is a failed test.
t_check_executor() {
    [ "${1:-}" = run ] || return 0
    want=${HUTCH_EXECUTOR:-local}
    json_out=0
    prev=""
    for a in "$@"; do
        [ "$a" = --json ] && json_out=1
        [ "$prev" = --executor ] || [ "$prev" = -x ] && want=$a
        prev=$a
    done
    [ "$json_out" = 1 ] || return 0
    got=$(printf '%s' "$OUT" | $PY -c 'import json, sys
try:
    print(json.loads(sys.stdin.read()).get("executor", "-"))
except Exception:
    print("")' 2>/dev/null)
    [ -z "$got" ] && return 0 # no result: hutch refused before running
    if [ "$got" != "$want" ]; then
        t_result 1 "hutch run ran on the $want executor"
        printf '#   got: %s (hutch %s)\n' "$got" "$*" | head -c 400
    fi
}
