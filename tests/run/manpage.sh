#!/bin/bash
# manpage.sh — every option a command parses is in its --help, and every
# option of every --help is in hutch(1) under that command, and the reverse:
# an option hutch(1) gives a command is in the command's --help.  The
# options a command parses are read from the getopt_long tables of
# src/main.c and src/cmd_*.c.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

MAN="$HUTCH_SRCDIR/man/hutch.1"
# Options hutch(1) documents ahead of the branch that adds them: while the
# command does not parse one of these yet, the reverse check skips it.
PENDING="doctor:--json plugins:--json serve:--log-format"

# The long options of a getopt_long table in FILE, one a line.
parsed() {
    sed -n 's/^ *{"\([a-z][a-z0-9-]*\)", *\(no\|required\|optional\)_argument.*/--\1/p' \
        "$HUTCH_SRCDIR/src/$1" | sort -u
}
# The options a --help text names, one a line.
helped() {
    "$HUTCH" "$@" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}
# The options of hutch(1)'s ".SS hutch CMD" section, one a line.
manned() {
    awk -v want="hutch $1" '
        /^\.S[HS]/ { on = ($0 == ".SS " want); next }
        on' "$MAN" | sed 's/\\-/-/g' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

ok "hutch(1) exists" test -s "$MAN"
# The page is valid roff: man(1)'s own checker, when there is one.
if command -v groff >/dev/null; then
    warn=$(groff -man -ww -z "$MAN" 2>&1)
    is "hutch(1) formats without warnings" "$warn" ""
fi

# Commands, the source of their options, and the --help calls that
# together show them (policy's three subcommands share one table).
for spec in "serve:cmd_serve.c:serve" "run:cmd_run.c:run" \
    "tools:cmd_tools.c:tools" "plugins:cmd_plugins.c:plugins" \
    "doctor:cmd_doctor.c:doctor" "workspace:cmd_workspace.c:workspace" \
    "policy:cmd_policy.c:policy check|policy test|policy bench"; do
    cmd=${spec%%:*}
    rest=${spec#*:}
    src=${rest%%:*}
    calls=${rest#*:}
    help=$(IFS='|'
        for c in $calls; do
            IFS=' '
            # shellcheck disable=SC2086
            helped $c
        done | sort -u)
    man=$(manned "$cmd")
    ok "hutch(1) has a section for hutch $cmd" test -n "$man"
    for o in $(parsed "$src"); do
        [ "$o" = --help ] && continue
        ok "hutch $cmd --help lists $o" grep -qx -- "$o" <<<"$help"
    done
    for o in $help; do
        [ "$o" = --help ] && continue
        ok "hutch(1) lists $o under hutch $cmd" grep -qx -- "$o" <<<"$man"
    done
    for o in $man; do
        if ! grep -qx -- "$o" <<<"$help" && ! parsed "$src" | grep -qx -- "$o"; then
            case " $PENDING " in
            *" $cmd:$o "*)
                T_N=$((T_N + 1))
                echo "ok $T_N - # SKIP hutch $cmd does not parse $o yet"
                continue
                ;;
            esac
        fi
        ok "hutch $cmd --help lists $o (from hutch(1))" grep -qx -- "$o" <<<"$help"
    done
done

# The global options.
help=$(helped)
for o in --version --help; do
    ok "hutch --help lists $o" grep -qx -- "$o" <<<"$help"
    ok "hutch(1) lists $o" grep -q -- "$(sed 's/-/\\\\-/g' <<<"$o")" "$MAN"
done
# Every command hutch --help names has its section.
for cmd in $("$HUTCH" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
    ok "hutch(1) has a section for $cmd (from hutch --help)" grep -qx ".SS hutch $cmd" "$MAN"
done

done_testing
