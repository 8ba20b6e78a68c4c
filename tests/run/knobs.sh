#!/bin/bash
# knobs.sh — the table of the core's settings (src/knobs.def): hutch(1)'s
# ENVIRONMENT entries are the ones the table makes (make man-knobs), no
# file of src/ but knobs.c reads a HUTCH_* variable, the table's options
# and config keys are real ones, serve's and run's --help list their knobs,
# and the rule for a bad value (src/knobs.c): a bad number or choice stops
# the command that reads it before it starts anything, with the variable,
# the value and what is accepted.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"

unset HUTCH_TOKEN HUTCH_EXECUTOR HUTCH_LOG_FORMAT HUTCH_MEMORY_BUDGET_MB \
    HUTCH_POOL_MAX_IDLE_MS HUTCH_RESOURCE_TTL_MS HUTCH_MAX_EXECUTIONS \
    HUTCH_HTTP_MAX_SESSIONS HUTCH_HTTP_HEAD_TIMEOUT_MS
MAN="$HUTCH_SRCDIR/man/hutch.1"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# --- the page -----------------------------------------------------------------
cp "$MAN" "$T/hutch.1"
"$HUTCH" __knobs man | sh "$HUTCH_SRCDIR/man/block.sh" knobs "$T/hutch.1"
is "hutch(1) has the BEGIN/END knobs markers once each" "$?" 0
D=$(diff -u "$MAN" "$T/hutch.1")
is "hutch(1)'s ENVIRONMENT entries are what src/knobs.def makes (run make man)" \
    "$D" ""
for env in $("$HUTCH" __knobs list | cut -f1); do
    ok "hutch(1) has $env" grep -qx ".B $env" "$MAN"
done

# --- the source ---------------------------------------------------------------
# The literal call, and any getenv of a name built from "HUTCH_".
G=$(grep -n 'getenv *( *"HUTCH_' "$HUTCH_SRCDIR"/src/*.c "$HUTCH_SRCDIR"/src/*.h)
is "no getenv(\"HUTCH_…\") in src/ (knobs.def has them)" "$G" ""
# Every HUTCH_ name the core's C code mentions as a string is a row, or an
# executor plugin's (hutch(1) has them outside the markers), or not read.
ROWS=$("$HUTCH" __knobs list | cut -f1 | sort -u)
STRAY=$(grep -ho '"HUTCH_[A-Z0-9_]*' "$HUTCH_SRCDIR"/src/*.c |
    tr -d '"' | sort -u | comm -23 - <(echo "$ROWS"))
is "every \"HUTCH_*\" string of src/*.c is a row of knobs.def" "$STRAY" ""

# serve's --config keys are its long options (serve_config.c); a knob's
# option is one some command parses.
serve_opts=$(sed -n 's/^ *{"\([a-z][a-z0-9-]*\)", *\(no\|required\)_argument.*/\1/p' \
    "$HUTCH_SRCDIR/src/cmd_serve.c")
all_opts=$(cat "$HUTCH_SRCDIR"/src/cmd_*.c |
    sed -n 's/^ *{"\([a-z][a-z0-9-]*\)", *\(no\|required\)_argument.*/--\1/p')
while IFS=$'\t' read -r env opt key _; do
    [ "$key" = - ] || ok "$env: config key $key is an option of serve" \
        grep -qx -- "$key" <<<"$serve_opts"
    [ "$opt" = - ] || ok "$env: $opt is an option of a command" \
        grep -qx -- "$opt" <<<"$all_opts"
done < <("$HUTCH" __knobs list)

# --- --help -------------------------------------------------------------------
run_hutch serve --help
like "serve --help lists its knobs" "$OUT" "  HUTCH_HTTP_MAX_SESSIONS=N"
like "serve --help gives a knob's range and default" "$OUT" "a thread each. 8 to 4096, default 128."
like "serve --help lists the knobs of every command" "$OUT" "  HUTCH_LOG_FORMAT=text|json"
run_hutch run --help
like "run --help lists its knobs" "$OUT" "  HUTCH_MEMORY_BUDGET_MB=MB"
unlike "run --help does not list serve's" "$OUT" "HUTCH_HTTP_"
HUTCH_LOG_FORMAT=xml run_hutch plugins --help
is "a command's --help works with a bad knob" "$RC" 0

# --- the rule for a bad value -------------------------------------------------
run_hutch serve --check-config
is "serve --check-config: nothing set, valid" "$RC" 0
HUTCH_HTTP_MAX_SESSIONS=0 run_hutch serve --check-config
is "serve --check-config, a bad HTTP knob: 1 (serving stdio too)" "$RC" 1
like "... saying the variable, the value and the range" "$ERR" \
    "HUTCH_HTTP_MAX_SESSIONS=0: want a number from 1 to 65536"
HUTCH_POOL_MAX_IDLE_MS=5 run_hutch serve --check-config
is "serve --check-config: a bad HUTCH_POOL_MAX_IDLE_MS is found before a pool starts" \
    "$RC" 1
like "... with milliseconds" "$ERR" "HUTCH_POOL_MAX_IDLE_MS=5: want milliseconds from 1000 to 300000"
printf 'timeout = 20000\n' >"$T/serve.conf"
HUTCH_RESOURCE_TTL_MS=5 run_hutch serve --config "$T/serve.conf" --check-config
is "serve --config F --check-config, a bad knob: 1" "$RC" 1
unlike "... and the file is not blamed for it" "$ERR" "the value above is the file's"
HUTCH_RESOURCE_TTL_MS=5 timeout 60 "$HUTCH" serve </dev/null >/dev/null 2>"$T/serve.err"
RC=$?
is "serve (stdio), a bad knob: 125 before it serves" "$RC" 125
like "... saying which" "$(cat "$T/serve.err")" "HUTCH_RESOURCE_TTL_MS=5: want milliseconds"
HUTCH_MEMORY_BUDGET_MB=lots run_hutch run --lang python -e 'print(1)'
is "run, a bad HUTCH_MEMORY_BUDGET_MB: 125 (it was the default in silence)" "$RC" 125
like "... saying which" "$ERR" "hutch run: HUTCH_MEMORY_BUDGET_MB=lots: want MiB from 1 to 1048576"
is "... and runs nothing" "$OUT" ""
HUTCH_LOG_FORMAT=xml run_hutch plugins
is "plugins, a bad HUTCH_LOG_FORMAT: 2 (it was a warning)" "$RC" 2
like "... saying which" "$ERR" "hutch plugins: HUTCH_LOG_FORMAT=xml: want text or json"
HUTCH_LOG_FORMAT= run_hutch plugins
is "an empty knob is unset" "$RC" 0

done_testing
