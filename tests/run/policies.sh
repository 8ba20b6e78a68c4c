#!/bin/bash
# policies.sh — every example policy shipped in contrib/policies/ (installed
# in $(pkgdatadir)/policies) passes `hutch policy check` once the paths it
# names exist and its placeholders are replaced, as each file's "Before
# use" comment says: the host paths all live under /srv/hutch (replaced
# here by a temporary tree) and the tokens start with CHANGE-ME.  The
# directories are made one by one from check's own "does not exist"
# message, so the test needs no list of them and a policy that names a
# path outside the tree fails.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

n=0
for src in "$HUTCH_SRCDIR"/contrib/policies/*.lua; do
    name=$(basename "$src")
    n=$((n + 1))
    ok "$name says what to change before use" grep -q "Before use" "$src"
    # As shipped, check fails and names what to fix (a /srv/hutch path
    # unless this machine has one).
    if [ ! -e /srv/hutch ]; then
        run_hutch policy check "$src"
        is "$name as shipped: check exits 1" "$RC" 1
        like "$name as shipped: the message names the missing path" "$ERR" '"/srv/hutch/'
    fi
    root="$T/${name%.lua}"
    mkdir -p "$root"
    token="test-only-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    sed -e "s|/srv/hutch|$root|g" -e "s|CHANGE-ME|$token|g" "$src" >"$T/$name"
    made=""
    for _ in $(seq 20); do
        run_hutch policy check "$T/$name"
        [ "$RC" = 0 ] && break
        missing=$(sed -n 's/.*"\([^"]*\)" does not exist.*/\1/p' <<<"$ERR" | head -1)
        case "$missing" in
        "$root"/*) mkdir -p "$missing" && made="$made ${missing#"$root"/}" ;;
        *) break ;;
        esac
    done
    is "$name passes hutch policy check once its paths exist (made:$made)" "$RC" 0
    [ "$RC" = 0 ] || echo "# $ERR" | head -5
    like "$name: check says ok" "$OUT" "ok: $T/$name"
done
ok "there are example policies" test "$n" -ge 3

done_testing
