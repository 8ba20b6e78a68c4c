#!/bin/bash
# completion.sh — contrib/hutch.bash-completion: commands, each command's
# options (the same set as its --help, so a new option cannot be forgotten
# there), option values, and executor names from `hutch plugins`.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

# shellcheck source=/dev/null
. "$HUTCH_SRCDIR/contrib/hutch.bash-completion"
# Options documented ahead of the branch that adds them (see manpage.sh).
PENDING="doctor:--json plugins:--json serve:--log-format"

# complete WORD…: the completions of the last word of "hutch WORD…".
complete_words() {
    COMP_WORDS=("$HUTCH" "$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _hutch
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

is "complete -F _hutch hutch is registered" "$(complete -p hutch)" "complete -F _hutch hutch"
is "commands" "$(complete_words "")" \
    "--help --version doctor plugins policy run serve tools workspace"
is "a prefix of a command" "$(complete_words se)" "serve"
is "run --l" "$(complete_words run --l)" "--lang"
is "run --lang values" "$(complete_words run --lang "")" "javascript python typescript"
is "tools --detail values" "$(complete_words tools --servers f.json --detail "")" \
    "full names signatures"
is "policy subcommands" "$(complete_words policy "")" "--help bench check test"
is "policy test --m" "$(complete_words policy test f.lua --m)" "--mode"
is "--executor: the usable plugins of hutch plugins" \
    "$(complete_words run --executor "")" \
    "$("$HUTCH" plugins | awk '$2 == "usable" { print $1 }' | sort | tr '\n' ' ' | sed 's/ $//')"
like "--executor offers local" " $(complete_words serve -x "") " " local "

is "workspace subcommands" "$(complete_words workspace "")" "delete list show"
WS=$(mktemp -d)
mkdir "$WS/6c6f63616c" # hex of "local", the caller's principal
: >"$WS/6c6f63616c/notes.tar"
: >"$WS/6c6f63616c/plans.tar"
is "workspace show: the caller's workspaces" \
    "$(HUTCH_WORKSPACES=$WS complete_words workspace show "")" "notes plans"
is "run --workspace: the caller's workspaces" \
    "$(HUTCH_WORKSPACES=$WS complete_words run --workspace p)" "plans"
rm -rf "$WS"

# Each command's options are the ones its --help lists.
for spec in serve run tools plugins doctor workspace "policy test" "policy bench"; do
    # shellcheck disable=SC2086
    help=$("$HUTCH" $spec --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
    # shellcheck disable=SC2086
    comp=$(complete_words $spec f.lua -- | tr ' ' '\n' | sort -u)
    [ "${spec%% *}" = policy ] || comp=$(complete_words $spec -- | tr ' ' '\n' | sort -u)
    help=$( (echo "$help"; echo --help) | sort -u)
    for o in $comp; do
        case " $PENDING " in
        *" $spec:$o "*) grep -qx -- "$o" <<<"$help" || continue ;;
        esac
        ok "hutch $spec: completes $o, which --help lists" grep -qx -- "$o" <<<"$help"
    done
    for o in $help; do
        ok "hutch $spec: --help's $o is completed" grep -qx -- "$o" <<<"$comp"
    done
done

done_testing
