#!/bin/sh
# block.sh [--check] NAME PAGE < BLOCK — the generated block NAME of a
# man page: the lines between `.\" BEGIN NAME` and `.\" END NAME`.
# Without --check, PAGE's block is replaced by stdin (the page is written
# whole or not at all); with --check, exit 1 (and a diff) when PAGE's
# block differs from stdin.  hutch(1) has two such blocks: knobs (make
# man-knobs, from src/knobs.def; tests/run/knobs.sh checks it) and
# executor-options (make man-executor-options, from the plugins'
# declarations; tests/run/man_options.sh checks it).  make man writes both.
set -eu
check=0
if [ "${1:-}" = --check ]; then
    check=1
    shift
fi
[ $# -eq 2 ] || { echo "usage: block.sh [--check] NAME PAGE < BLOCK" >&2; exit 2; }
name=$1 page=$2
begin=".\\\" BEGIN $name" end=".\\\" END $name"
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.page" "$tmp.old"' EXIT
cat >"$tmp"
[ "$(grep -cxF "$begin" "$page")" = 1 ] && [ "$(grep -cxF "$end" "$page")" = 1 ] || {
    echo "block.sh: $page needs one '$begin' and one '$end' line" >&2
    exit 2
}
# The markers through the environment: awk -v would take their backslash.
export begin end
awk '$0 == ENVIRON["end"] { on = 0 } on { print } $0 == ENVIRON["begin"] { on = 1 }' \
    "$page" >"$tmp.old"
if [ $check = 1 ]; then
    diff -u "$tmp.old" "$tmp" >&2 || {
        echo "block.sh: $page's block $name is not what the code says:" \
            "run make man" >&2
        exit 1
    }
    exit 0
fi
awk -v new="$tmp" '
    $0 == ENVIRON["end"] { while ((getline l < new) > 0) print l; on = 0 }
    !on { print }
    $0 == ENVIRON["begin"] { on = 1 }' "$page" >"$tmp.page"
cat "$tmp.page" >"$page"
