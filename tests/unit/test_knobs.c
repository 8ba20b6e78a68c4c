/* test_knobs.c — the table of the core's settings (src/knobs.def, knobs.c):
 * every row well formed, a number or a choice parsed and its range held
 * with the message that names the variable, the value and what is
 * accepted, a command's check seeing only its own knobs, and the --help
 * and hutch(1) texts made from the rows.  TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "tap.h"

static int is_number(const struct hutch_knob *k)
{
    return k->type == HUTCH_KNOB_COUNT || k->type == HUTCH_KNOB_MS ||
           k->type == HUTCH_KNOB_MIB;
}

static void rows(void)
{
    int bad = 0;
    for (int i = 0; i < HUTCH_KNOB_N; i++) {
        const struct hutch_knob *k = hutch_knob((enum hutch_knob_id)i);
        const char *why = NULL;
        size_t first = strcspn(k->doc, "\n");

        if (strncmp(k->env, "HUTCH_", 6))
            why = "its variable is not HUTCH_*";
        for (int j = 0; j < i; j++)
            if (!strcmp(k->env, hutch_knob((enum hutch_knob_id)j)->env))
                why = "its variable is another row's";
        if (!k->scope)
            why = "no command reads it";
        if (!first || k->doc[first - 1] != '.')
            why = "its doc's first line is not a sentence";
        if (k->config && (!k->option || strncmp(k->option, "--", 2) ||
                          strcmp(k->option + 2, k->config)))
            why = "a config key that is not its option (serve's --config keys are "
                  "its long options)";
        if (is_number(k) && (k->min > k->max || k->max > UINT32_MAX))
            why = "its range is empty or wider than its fields";
        if (is_number(k) && !k->dflt_text && (k->dflt < k->min || k->dflt > k->max))
            why = "its default is outside its range";
        if (k->type == HUTCH_KNOB_CHOICE &&
            (!k->choices || !strchr(k->choices, '|') || k->dflt_text))
            why = "a choice without choices";
        if (k->type != HUTCH_KNOB_CHOICE && k->choices)
            why = "choices on a row that is not a choice";
        if (k->type == HUTCH_KNOB_SECRET && !k->min)
            why = "a secret without a shortest length";
        if ((k->type == HUTCH_KNOB_NAME || k->type == HUTCH_KNOB_DIR) && !k->dflt_text)
            why = "a string without its default in words";
        if (why) {
            printf("# %s: %s\n", k->env, why);
            bad++;
        }
    }
    ok(!bad, "every row of knobs.def is well formed (%d knobs)", HUTCH_KNOB_N);
}

static void numbers(void)
{
    struct hutch_err err = {0};
    uint64_t v = 7;
    char long_value[101];

    unsetenv("HUTCH_HTTP_MAX_SESSIONS");
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == 0 &&
           v == HUTCH_HTTP_MAX_SESSIONS,
       "unset: 0 and the default (%llu)", (unsigned long long)v);
    setenv("HUTCH_HTTP_MAX_SESSIONS", "", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == 0 &&
           v == HUTCH_HTTP_MAX_SESSIONS,
       "empty is unset");
    setenv("HUTCH_HTTP_MAX_SESSIONS", "300", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == 1 && v == 300,
       "300: 1 and 300");
    setenv("HUTCH_HTTP_MAX_SESSIONS", "1", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == 1 && v == 1,
       "the min is accepted");
    setenv("HUTCH_HTTP_MAX_SESSIONS", "65536", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == 1 && v == 65536,
       "the max is accepted");
    setenv("HUTCH_HTTP_MAX_SESSIONS", "0", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == -EINVAL &&
           !strcmp(err.msg,
                   "HUTCH_HTTP_MAX_SESSIONS=0: want a number from 1 to 65536") &&
           v == HUTCH_HTTP_MAX_SESSIONS,
       "below the min: an error naming the variable, the value and the range "
       "(never clamped): %s",
       err.msg);
    setenv("HUTCH_HTTP_MAX_SESSIONS", "65537", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == -EINVAL &&
           strstr(err.msg, "=65537: want a number from 1 to 65536"),
       "above the max: an error: %s", err.msg);
    {
        static const char *const bad[] = {
            "12abc", "-1",  "+5",  " 5",  "5 ",
            "0x10",  "1e3", "1.5", "abc", "99999999999999999999999"};
        int refused = 0;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            setenv("HUTCH_HTTP_MAX_SESSIONS", bad[i], 1);
            refused +=
                hutch_knob_uint(HUTCH_KNOB_HTTP_MAX_SESSIONS, &v, &err) == -EINVAL;
        }
        ok(refused == (int)(sizeof(bad) / sizeof(bad[0])),
           "not a plain decimal number (sign, space, hex, exponent, overflow): an "
           "error, %d of %zu",
           refused, sizeof(bad) / sizeof(bad[0]));
    }
    unsetenv("HUTCH_HTTP_MAX_SESSIONS");

    setenv("HUTCH_POOL_MAX_IDLE_MS", "999", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_POOL_MAX_IDLE_MS, &v, &err) == -EINVAL &&
           !strcmp(err.msg, "HUTCH_POOL_MAX_IDLE_MS=999: want milliseconds from 1000 "
                            "to 300000"),
       "a duration says milliseconds: %s", err.msg);
    unsetenv("HUTCH_POOL_MAX_IDLE_MS");
    setenv("HUTCH_MEMORY_BUDGET_MB", "0", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_MEMORY_BUDGET_MB, &v, &err) == -EINVAL &&
           strstr(err.msg, "want MiB from 1 to 1048576") &&
           v == HUTCH_PROCESS_MEMORY_BUDGET_MB,
       "a size says MiB, and the default stays: %s", err.msg);
    unsetenv("HUTCH_MEMORY_BUDGET_MB");

    memset(long_value, '7', 100);
    long_value[100] = '\0';
    setenv("HUTCH_MAX_EXECUTIONS", long_value, 1);
    ok(hutch_knob_uint(HUTCH_KNOB_MAX_EXECUTIONS, &v, &err) == -EINVAL &&
           strstr(err.msg,
                  "HUTCH_MAX_EXECUTIONS=7777777777777777777777777777777777777777"
                  "...: want") &&
           !strstr(err.msg, "77777777777777777777777777777777777777777"),
       "a long value is shown by its first 40 bytes: %s", err.msg);
    setenv("HUTCH_MAX_EXECUTIONS", "\033[31m9\n", 1);
    ok(hutch_knob_uint(HUTCH_KNOB_MAX_EXECUTIONS, &v, &err) == -EINVAL &&
           strstr(err.msg, "HUTCH_MAX_EXECUTIONS=?[31m9?: want") &&
           !strchr(err.msg, '\033') && !strchr(err.msg, '\n'),
       "control bytes are shown as '?', never sent to the terminal: %s", err.msg);
    unsetenv("HUTCH_MAX_EXECUTIONS");
    ok(hutch_knob_uint(HUTCH_KNOB_MAX_EXECUTIONS, &v, NULL) == 0 && v == 0,
       "a computed default is 0 from the table (the caller sizes it); err may be "
       "NULL");
    ok(hutch_knob_uint(HUTCH_KNOB_LOG_FORMAT, &v, &err) == -EINVAL,
       "a choice is not read as a number");
}

static void choices(void)
{
    struct hutch_err err = {0};
    unsigned c = 9;

    unsetenv("HUTCH_LOG_FORMAT");
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == 0 && c == 0,
       "unset: the default, text");
    setenv("HUTCH_LOG_FORMAT", "json", 1);
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == 1 && c == 1, "json: 1");
    setenv("HUTCH_LOG_FORMAT", "text", 1);
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == 1 && c == 0, "text: 0");
    setenv("HUTCH_LOG_FORMAT", "jso", 1);
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == -EINVAL &&
           !strcmp(err.msg, "HUTCH_LOG_FORMAT=jso: want text or json") && c == 0,
       "a prefix of a choice is refused: %s", err.msg);
    setenv("HUTCH_LOG_FORMAT", "JSON", 1);
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == -EINVAL,
       "choices are exact (JSON is not json)");
    setenv("HUTCH_LOG_FORMAT", "jsonx", 1);
    ok(hutch_knob_choice(HUTCH_KNOB_LOG_FORMAT, &c, &err) == -EINVAL,
       "nor is a longer word");
    unsetenv("HUTCH_LOG_FORMAT");
    ok(hutch_knob_choice(HUTCH_KNOB_MAX_EXECUTIONS, &c, &err) == -EINVAL,
       "a number is not read as a choice");
}

static void strings(void)
{
    unsetenv("HUTCH_WORKSPACES");
    ok(hutch_knob_str(HUTCH_KNOB_WORKSPACES) == NULL, "a string unset: NULL");
    setenv("HUTCH_WORKSPACES", "", 1);
    ok(hutch_knob_str(HUTCH_KNOB_WORKSPACES) == NULL, "empty: NULL (unset)");
    setenv("HUTCH_WORKSPACES", "/srv/ws", 1);
    ok(hutch_knob_str(HUTCH_KNOB_WORKSPACES) &&
           !strcmp(hutch_knob_str(HUTCH_KNOB_WORKSPACES), "/srv/ws"),
       "set: its value");
    unsetenv("HUTCH_WORKSPACES");
}

static void check(void)
{
    struct hutch_err err = {0};

    ok(hutch_knobs_check(
           HUTCH_CMD_SERVE | HUTCH_CMD_HTTP | HUTCH_CMD_RUN | HUTCH_CMD_ALL, &err) == 0,
       "nothing set: every command's check passes");
    setenv("HUTCH_HTTP_HEAD_TIMEOUT_MS", "5", 1);
    ok(hutch_knobs_check(HUTCH_CMD_RUN | HUTCH_CMD_ALL, &err) == 0,
       "a bad HTTP knob is not hutch run's");
    ok(hutch_knobs_check(HUTCH_CMD_SERVE | HUTCH_CMD_HTTP, &err) == -EINVAL &&
           strstr(err.msg, "HUTCH_HTTP_HEAD_TIMEOUT_MS=5: want milliseconds from 100"),
       "serve's check refuses it: %s", err.msg);
    unsetenv("HUTCH_HTTP_HEAD_TIMEOUT_MS");
    setenv("HUTCH_MEMORY_BUDGET_MB", "lots", 1);
    ok(hutch_knobs_check(HUTCH_CMD_RUN, &err) == -EINVAL &&
           strstr(err.msg, "HUTCH_MEMORY_BUDGET_MB=lots"),
       "run's check refuses a bad memory budget (no longer the default in silence)");
    unsetenv("HUTCH_MEMORY_BUDGET_MB");
    setenv("HUTCH_LOG_FORMAT", "xml", 1);
    ok(hutch_knobs_check(HUTCH_CMD_ALL, &err) == -EINVAL &&
           strstr(err.msg, "HUTCH_LOG_FORMAT=xml"),
       "every command's check refuses a bad log format");
    unsetenv("HUTCH_LOG_FORMAT");
    setenv("HUTCH_EXECUTOR", "no such executor", 1);
    ok(hutch_knobs_check(HUTCH_CMD_SERVE | HUTCH_CMD_RUN, &err) == 0,
       "a name is checked where it is used, not by the table");
    unsetenv("HUTCH_EXECUTOR");
}

/* What f printed, as a string (caller frees). */
static char *printed(void (*fn)(FILE *, unsigned), unsigned scope, void (*man)(FILE *))
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    if (fn)
        fn(f, scope);
    else
        man(f);
    fclose(f);
    return s;
}

static int longest_line(const char *s)
{
    int longest = 0;
    while (*s) {
        int n = (int)strcspn(s, "\n");
        longest = n > longest ? n : longest;
        s += n + (s[n] == '\n');
    }
    return longest;
}

static void texts(void)
{
    char *run = printed(hutch_knobs_help, HUTCH_CMD_RUN, NULL),
         *serve = printed(hutch_knobs_help, HUTCH_CMD_SERVE | HUTCH_CMD_HTTP, NULL),
         *man = printed(NULL, 0, hutch_knobs_man);
    int all_manned = 1;

    ok(run && strstr(run, "  HUTCH_MEMORY_BUDGET_MB=MB\n") &&
           strstr(run, "  HUTCH_LOG_FORMAT=text|json\n") &&
           !strstr(run, "HUTCH_HTTP_MAX_SESSIONS") && !strstr(run, "HUTCH_TOKEN"),
       "run's --help lists its knobs and every command's, not serve's");
    ok(serve && strstr(serve, "  HUTCH_HTTP_MAX_SESSIONS=N\n") &&
           strstr(serve, "  HUTCH_HTTP_MAX_CONNECTIONS=N\n      HTTP connections at "
                         "once, a thread each. 8 to 4096, default 128.\n") &&
           strstr(serve, "  HUTCH_RESOURCE_TTL_MS=MS\n") &&
           strstr(serve, "  HUTCH_TOKEN=TOKEN\n") &&
           strstr(serve, "HUTCH_EXECUTOR=NAME"),
       "serve's --help lists its knobs with their range and default");
    ok(run && serve && longest_line(run) <= 79 && longest_line(serve) <= 79 &&
           !strchr(run, '`') && !strchr(serve, '`'),
       "--help is wrapped to 79 columns, without the table's markup (longest %d)",
       serve ? longest_line(serve) : -1);
    for (int i = 0; man && i < HUTCH_KNOB_N; i++) {
        char want[128];
        snprintf(want, sizeof(want), ".TP\n.B %s\n",
                 hutch_knob((enum hutch_knob_id)i)->env);
        all_manned &= strstr(man, want) != NULL;
    }
    ok(man && all_manned, "hutch(1)'s entries have every knob");
    ok(man && !strchr(man, '`') &&
           strstr(man, "From 1000 to 86400000 milliseconds; default 600000.") &&
           strstr(man, "\\fB\\-\\-plugins\\fR takes precedence (in a \\fBhutch serve "
                       "\\-\\-config\\fR file: \\fBplugins\\fR).") &&
           strstr(man, "Read by \\fBhutch serve \\-\\-http\\fR.\n"),
       "hutch(1)'s entries are roff: bold for the markup, ranges, precedence, "
       "commands");
    ok(man && !strstr(man, "2025-era"), "a hyphen in the text is escaped (\\-)");
    free(run);
    free(serve);
    free(man);
}

int main(void)
{
    rows();
    numbers();
    choices();
    strings();
    check();
    texts();
    return tap_done();
}
