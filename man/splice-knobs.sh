#!/bin/bash
# splice-knobs.sh HUTCH PAGE — print PAGE (hutch(1)) with the lines between
# its `.\" BEGIN knobs` and `.\" END knobs` markers replaced by what
# `HUTCH __knobs man` makes of src/knobs.def.  `make man-knobs` writes the
# result back to the page; tests/run/knobs.sh fails while the committed
# page differs from it.  Exit 1 when PAGE does not have the two markers,
# once each and in that order.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 HUTCH PAGE" >&2; exit 2; }
GEN=$("$1" __knobs man)
export GEN
awk '
    $0 == ".\\\" BEGIN knobs" { print; print ENVIRON["GEN"]; skip = 1; begin++; next }
    $0 == ".\\\" END knobs" { if (!skip) bad = 1; skip = 0; end++ }
    !skip { print }
    END { if (begin != 1 || end != 1 || skip || bad) exit 1 }' "$2"
