#!/bin/bash
# sucrase.sh — the vendored sucrase bundle is what its recipe makes:
# third_party/sucrase/bundle.sh, run from the pinned package-lock.json
# (`npm ci` in a scratch directory, then the pinned esbuild) into a
# temporary file, gives the committed third_party/sucrase/sucrase.js byte
# for byte, and the build's runners/ got that file.  The source tree is
# only read (distcheck's is read-only): the check says so too.
#
# Skips when node or npm is missing (contrib/deps.sh installs both on CI,
# with the tests' own node_modules).  A registry that cannot be reached is
# a failure, not a skip: the check must not pass quietly where it did not
# run.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
command -v node >/dev/null || skip_all "node is not installed (bundle.sh runs esbuild on it)"
command -v npm >/dev/null || skip_all "npm is not installed (bundle.sh installs the pinned inputs with npm ci)"
SRC=$HUTCH_SRCDIR/third_party/sucrase
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# What the source tree holds before, to see that bundle.sh left it alone.
listing() { (cd "$SRC" && ls -lA --time-style=+%s.%N); }
before=$(listing)

TMPDIR=$TMP sh "$SRC/bundle.sh" "$TMP/sucrase.js" >"$TMP/out" 2>"$TMP/err"
rc=$?
is "bundle.sh runs from the lock file" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$TMP/err" | head -30

if [ -f "$TMP/sucrase.js" ]; then
    if cmp -s "$TMP/sucrase.js" "$SRC/sucrase.js"; then
        t_result 0 "bundle.sh reproduces third_party/sucrase/sucrase.js byte for byte"
    else
        t_result 1 "bundle.sh reproduces third_party/sucrase/sucrase.js byte for byte"
        echo "#   $(cmp "$SRC/sucrase.js" "$TMP/sucrase.js" 2>&1)"
        diff -u "$SRC/sucrase.js" "$TMP/sucrase.js" | head -40 | sed 's/^/#   /'
    fi
else
    t_result 1 "bundle.sh reproduces third_party/sucrase/sucrase.js byte for byte"
    echo "#   bundle.sh wrote no $TMP/sucrase.js"
fi
like "bundle.sh says what it wrote" "$(cat "$TMP/out")" "wrote $TMP/sucrase.js"
left=$(find "$TMP" -mindepth 1 -maxdepth 1 -name 'hutch-sucrase.*')
is "bundle.sh removed its scratch directory" "$left" ""

is "bundle.sh left the source tree as it was" "$(listing)" "$before"
ok "the source tree has no node_modules" test ! -e "$SRC/node_modules"

ok "the build's runners/ has the committed bundle" \
    cmp -s "$HUTCH_BUILDDIR/runners/sucrase.js" "$SRC/sucrase.js"
done_testing
