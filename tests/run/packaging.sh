#!/bin/bash
# packaging.sh — `make install DESTDIR=…` puts hutch(1), hutch-policy(5),
# the systemd unit (with the configured bindir), the bash completion, the
# example policies, README/ARCHITECTURE/NEWS/LICENSE, the pages of doc/,
# third_party/README.md and the runners (sucrase.js with them) where they
# belong, and the installed unit passes `systemd-analyze
# verify`; `make uninstall` removes it all (the plugins too, whose .la files
# install drops).
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
D="$T/root"
# The configured directories, from the Makefile make check runs.
# (Not the make check around it: its MAKEFLAGS would have make say which
# directory it enters.)
var() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$HUTCH_BUILDDIR" \
    --no-print-directory -f Makefile -f - print-var V="$1" \
    <<<'print-var: ; @echo $($(V))' | grep -v '^make\[' | tail -n 1; }
bindir=$(var bindir)
mandir=$(var mandir)
unitdir=$(var systemdsystemunitdir)
datadir=$(var datadir)
pkgdatadir=$(var pkgdatadir)
docdir=$(var docdir)

make -s -C "$HUTCH_BUILDDIR" install DESTDIR="$D" >"$T/install.log" 2>&1
RC=$?
is "make install DESTDIR=… succeeds" "$RC" 0
[ "$RC" = 0 ] || sed 's/^/# /' "$T/install.log" | tail -20

ok "hutch in bindir" test -x "$D$bindir/hutch"
ok "hutch(1) installed" test -s "$D$mandir/man1/hutch.1"
ok "hutch-policy(5) installed" test -s "$D$mandir/man5/hutch-policy.5"
ok "bash completion installed" test -s "$D$datadir/bash-completion/completions/hutch"
for p in "$HUTCH_SRCDIR"/contrib/policies/*.lua; do
    ok "example policy $(basename "$p") installed" \
        cmp -s "$p" "$D$pkgdatadir/policies/$(basename "$p")"
done
for f in README.md ARCHITECTURE.md NEWS LICENSE; do
    ok "$f installed in docdir" test -s "$D$docdir/$f"
done
# Every page of doc/, where the README's links (doc/NAME.md) find it.
for p in "$HUTCH_SRCDIR"/doc/*.md; do
    ok "doc/$(basename "$p") installed in docdir/doc" \
        cmp -s "$p" "$D$docdir/doc/$(basename "$p")"
done
ok "third_party/README.md installed in docdir/third_party (doc/ links it)" \
    cmp -s "$HUTCH_SRCDIR/third_party/README.md" "$D$docdir/third_party/README.md"
# The runners, in the directory hutch looks in by default (HUTCH_RUNNER_DIR
# unset), with the vendored sucrase bundle beside transpile.js, which loads
# it from there.
runnersdir=$(var runnersdir)
is "the runner directory is pkgdatadir/runners" "$runnersdir" "$pkgdatadir/runners"
for f in src/runners/runner.py src/runners/hutch_runner.py src/runners/runner.js \
    src/runners/egress.js src/runners/transpile.js third_party/sucrase/sucrase.js; do
    ok "$(basename "$f") installed in the runner directory" \
        cmp -s "$HUTCH_SRCDIR/$f" "$D$runnersdir/$(basename "$f")"
done

unit="$D$unitdir/hutch.service"
ok "hutch.service installed in $unitdir" test -s "$unit"
like "the unit runs the installed hutch" "$(grep '^ExecStart=' "$unit")" \
    "ExecStart=$bindir/hutch serve --http"
unlike "no @substitution@ left" "$(cat "$unit")" "@"
like "the unit reloads with SIGHUP" "$(grep '^ExecReload=' "$unit")" 'kill -HUP $MAINPID'
like "the unit delegates its cgroup" "$(cat "$unit")" "Delegate=yes"
like "the unit has /run/hutch" "$(cat "$unit")" "RuntimeDirectory=hutch"
for bad in RestrictNamespaces ProtectControlGroups ProtectKernelTunables ProtectProc \
    ProtectHostname MemoryDenyWriteExecute PrivateUsers; do
    unlike "the unit leaves out $bad (it breaks the local executor)" \
        "$(grep -v '^#' "$unit")" "$bad="
done

if ! command -v systemd-analyze >/dev/null; then
    # CI installs it (contrib/deps.sh's TEST_DEPS: Debian's systemd): there
    # a missing one is a failure, never a silent skip.
    case "${CI:-}" in
    "" | false | 0)
        T_N=$((T_N + 1))
        echo "ok $T_N - # SKIP systemd-analyze verify: no systemd-analyze (apt-get install systemd)"
        ;;
    *) t_result 1 "systemd-analyze is installed under CI (apt-get install systemd)" ;;
    esac
else
    # verify checks that ExecStart's binary exists: the unit is verified
    # with bindir's hutch in place (a copy of the DESTDIR's under $T when
    # bindir is not this machine's installed one).
    cp "$unit" "$T/hutch.service"
    sed -i "s|^ExecStart=$bindir/hutch|ExecStart=$D$bindir/hutch|" "$T/hutch.service"
    out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$T/hutch.service" 2>&1)
    RC=$?
    is "systemd-analyze verify passes on the installed unit" "$RC" 0
    # Messages about other units (this machine's) are not the unit's.
    is "systemd-analyze verify says nothing of hutch.service" \
        "$(grep -i 'hutch' <<<"$out")" ""
fi

make -s -C "$HUTCH_BUILDDIR" uninstall DESTDIR="$D" >"$T/uninstall.log" 2>&1
is "make uninstall DESTDIR=… succeeds" "$?" 0
is "make uninstall leaves no file behind" "$(cd "$D" && find . -type f -o -type l)" ""

done_testing
