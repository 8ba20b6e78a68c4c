/* knobs.c — the core's settings from the environment (knobs.def): the only
 * place in src/ that reads a HUTCH_* variable, and where --help's
 * "Environment" part and hutch(1)'s ENVIRONMENT entries come from.
 *
 * The rule for a bad value.  Empty is unset.  A number knob set to
 * anything but a decimal number in its range, or a choice knob set to
 * anything but one of its choices, is an error naming the variable, the
 * value (its first 40 bytes, a control byte shown as '?') and what is
 * accepted: "HUTCH_HTTP_MAX_SESSIONS=0: want a number from 1 to 65536".
 * Never clamped, never silently the default.  Every command checks the
 * knobs it reads when it starts, before it starts anything
 * (hutch_knobs_check; serve checks its --http knobs too when it serves
 * stdio): serve and run then exit 125 (serve --check-config 1, as for any
 * bad setting), the other commands, which read no number, exit 2 for a bad
 * HUTCH_LOG_FORMAT (main.c).  The string knobs (a name, a directory, the
 * token) are checked where they are used, with the flag that takes their
 * place and by the same code: an unknown executor or a missing directory
 * when it is opened, a relative workspaces directory by workspace.c, a
 * token shorter than the row's min by serve.
 *
 * Not knobs, and read where they are used: XDG_RUNTIME_DIR (plugin.c),
 * XDG_STATE_HOME and HOME (workspace.c), a servers file's ${VAR} (its
 * author's variables, upstream_servers.c); the executor plugins' own
 * variables (HUTCH_PYTHON, HUTCH_INIT, DOCKER_HOST…) are the plugins'.
 *
 * Threads: the table is constant; a value is read from the environment at
 * each call (callers read theirs at start-up; nothing here calls setenv). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "util.h"

static const struct hutch_knob table[] = {
#define KNOB(id, env, option, config, type, choices, dflt, min, max, dflt_text, scope, \
             doc)                                                                      \
    {env, option, config, type, choices, dflt, min, max, dflt_text, scope, doc},
#include "knobs.def"
#undef KNOB
};
_Static_assert(sizeof(table) / sizeof(table[0]) == HUTCH_KNOB_N,
               "one row of knobs.def per id");

/* What a number knob's value is: --help's placeholder, the error's and
 * hutch(1)'s words. */
static const struct {
    const char *placeholder, *want, *unit;
} forms[] = {
    [HUTCH_KNOB_COUNT] = {"N", "a number", ""},
    [HUTCH_KNOB_MS] = {"MS", "milliseconds", " milliseconds"},
    [HUTCH_KNOB_MIB] = {"MB", "MiB", " MiB"},
    [HUTCH_KNOB_CHOICE] = {NULL, NULL, NULL},
    [HUTCH_KNOB_NAME] = {"NAME", NULL, NULL},
    [HUTCH_KNOB_DIR] = {"DIR", NULL, NULL},
    [HUTCH_KNOB_FILE] = {"FILE", NULL, NULL},
    [HUTCH_KNOB_SECRET] = {"TOKEN", NULL, NULL},
};

/* The commands of a scope bit, in hutch(1)'s words and in order. */
static const struct {
    unsigned bit;
    const char *name;
} commands[] = {
    {HUTCH_CMD_ALL, "every command"},         {HUTCH_CMD_SERVE, "hutch serve"},
    {HUTCH_CMD_HTTP, "hutch serve --http"},   {HUTCH_CMD_RUN, "hutch run"},
    {HUTCH_CMD_WORKSPACE, "hutch workspace"}, {HUTCH_CMD_PLUGINS, "hutch plugins"},
    {HUTCH_CMD_DOCTOR, "hutch doctor"},
};

static int is_number(const struct hutch_knob *k)
{
    return k->type == HUTCH_KNOB_COUNT || k->type == HUTCH_KNOB_MS ||
           k->type == HUTCH_KNOB_MIB;
}

const struct hutch_knob *hutch_knob(enum hutch_knob_id id)
{
    return &table[id];
}

const char *hutch_knob_str(enum hutch_knob_id id)
{
    const char *v = getenv(table[id].env);
    return v && *v ? v : NULL;
}

/* The value as an error shows it: at most 40 bytes, control bytes as '?'. */
static void shown(const char *v, char out[48])
{
    size_t i;
    for (i = 0; v[i] && i < 40; i++)
        out[i] = iscntrl((unsigned char)v[i]) ? '?' : v[i];
    if (v[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
}

int hutch_knob_uint(enum hutch_knob_id id, uint64_t *out, struct hutch_err *err)
{
    const struct hutch_knob *k = &table[id];
    const char *v = hutch_knob_str(id);
    char s[48];
    uint64_t x;

    *out = k->dflt;
    if (!is_number(k))
        return hutch_err_set(err, -EINVAL, "%s is not a number", k->env);
    if (!v)
        return 0;
    /* Decimal digits only: no sign, no space around. */
    if (!isdigit((unsigned char)v[0]) || hutch_parse_u64(v, k->min, k->max, &x) < 0) {
        shown(v, s);
        return hutch_err_set(err, -EINVAL, "%s=%s: want %s from %llu to %llu", k->env,
                             s, forms[k->type].want, (unsigned long long)k->min,
                             (unsigned long long)k->max);
    }
    *out = x;
    return 1;
}

/* "text or json", "a, b or c": a choice knob's choices, in words. */
static void choices_words(const struct hutch_knob *k, char *out, size_t len)
{
    size_t n = 0, o = 0;
    const char *c;

    for (c = k->choices; *c; c++)
        n += *c == '|';
    out[0] = '\0';
    for (c = k->choices; *c && o + 8 < len;) {
        size_t w = strcspn(c, "|");
        const char *sep = !n ? "" : n == 1 ? " or " : ", ";
        int r = snprintf(out + o, len - o, "%.*s%s", (int)w, c, sep);
        if (r < 0)
            break;
        o += (size_t)r < len - o ? (size_t)r : len - o - 1;
        c += w + (c[w] == '|');
        if (n)
            n--;
    }
}

int hutch_knob_choice(enum hutch_knob_id id, unsigned *out, struct hutch_err *err)
{
    const struct hutch_knob *k = &table[id];
    const char *v = hutch_knob_str(id), *c;
    char s[48], words[128];
    unsigned i = 0;

    *out = (unsigned)k->dflt;
    if (k->type != HUTCH_KNOB_CHOICE)
        return hutch_err_set(err, -EINVAL, "%s is not a choice", k->env);
    if (!v)
        return 0;
    for (c = k->choices; *c; i++) {
        size_t w = strcspn(c, "|");
        if (strlen(v) == w && !strncmp(v, c, w)) {
            *out = i;
            return 1;
        }
        c += w + (c[w] == '|');
    }
    shown(v, s);
    choices_words(k, words, sizeof(words));
    return hutch_err_set(err, -EINVAL, "%s=%s: want %s", k->env, s, words);
}

int hutch_knobs_check(unsigned scope, struct hutch_err *err)
{
    for (int i = 0; i < HUTCH_KNOB_N; i++) {
        uint64_t v;
        unsigned c;
        int r = 0;

        if (!(table[i].scope & scope))
            continue;
        if (is_number(&table[i]))
            r = hutch_knob_uint((enum hutch_knob_id)i, &v, err);
        else if (table[i].type == HUTCH_KNOB_CHOICE)
            r = hutch_knob_choice((enum hutch_knob_id)i, &c, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* --- --help ---------------------------------------------------------------- */

/* Print `s` (without its backticks) wrapped to 79 columns at `indent`,
 * starting at column *col; *col is where it ended. */
static void wrap(FILE *f, const char *s, int indent, int *col)
{
    while (*s) {
        size_t w = 0, n = 0;
        while (s[n] == ' ')
            n++;
        s += n;
        while (s[w] && s[w] != ' ')
            w++;
        if (!w)
            break;
        {
            int shown_w = (int)w;
            for (size_t i = 0; i < w; i++)
                shown_w -= s[i] == '`';
            if (*col > indent && *col + 1 + shown_w > 79) {
                fprintf(f, "\n%*s", indent, "");
                *col = indent;
            } else if (*col > indent) {
                fputc(' ', f);
                (*col)++;
            }
            for (size_t i = 0; i < w; i++)
                if (s[i] != '`')
                    fputc(s[i], f);
            *col += shown_w;
        }
        s += w;
    }
}

/* The row's value in words, after its doc: "1 to 65536, default 256." */
static void value_help(const struct hutch_knob *k, char *out, size_t len)
{
    char words[128];
    switch (k->type) {
    case HUTCH_KNOB_COUNT:
    case HUTCH_KNOB_MS:
    case HUTCH_KNOB_MIB:
        if (k->dflt_text)
            snprintf(out, len, "%llu to %llu%s; default: %s.",
                     (unsigned long long)k->min, (unsigned long long)k->max,
                     forms[k->type].unit, k->dflt_text);
        else
            snprintf(out, len, "%llu to %llu%s, default %llu.",
                     (unsigned long long)k->min, (unsigned long long)k->max,
                     forms[k->type].unit, (unsigned long long)k->dflt);
        break;
    case HUTCH_KNOB_CHOICE: {
        const char *c = k->choices;
        size_t w;
        for (unsigned i = 0; i < k->dflt && c[strcspn(c, "|")]; i++)
            c += strcspn(c, "|") + 1;
        w = strcspn(c, "|");
        choices_words(k, words, sizeof(words));
        snprintf(out, len, "Values: %s; default %.*s.", words, (int)w, c);
        break;
    }
    case HUTCH_KNOB_SECRET:
        snprintf(out, len, "At least %llu characters.", (unsigned long long)k->min);
        break;
    default:
        snprintf(out, len, "Default: %s.", k->dflt_text ? k->dflt_text : "none");
    }
}

void hutch_knobs_help(FILE *f, unsigned scope)
{
    fprintf(f, "\nEnvironment (hutch(1), ENVIRONMENT; a bad number or choice stops "
               "hutch\nbefore it starts anything; empty is unset):\n");
    for (int i = 0; i < HUTCH_KNOB_N; i++) {
        const struct hutch_knob *k = &table[i];
        char value[256], first[256];
        size_t n = strcspn(k->doc, "\n");
        int col = 6;

        if (!(k->scope & (scope | HUTCH_CMD_ALL)))
            continue;
        if (k->type == HUTCH_KNOB_CHOICE)
            fprintf(f, "  %s=%s\n      ", k->env, k->choices);
        else
            fprintf(f, "  %s=%s\n      ", k->env, forms[k->type].placeholder);
        snprintf(first, sizeof(first), "%.*s", (int)n, k->doc);
        wrap(f, first, 6, &col);
        value_help(k, value, sizeof(value));
        wrap(f, value, 6, &col);
        fputc('\n', f);
    }
}

/* --- hutch(1) -------------------------------------------------------------- */

/* `s` as roff text: '-' and '\' escaped, `x` in bold; `len` bytes. */
static void roff(FILE *f, const char *s, size_t len)
{
    int bold = 0;
    for (size_t i = 0; i < len && s[i]; i++) {
        if (s[i] == '`') {
            fputs(bold ? "\\fR" : "\\fB", f);
            bold = !bold;
        } else if (s[i] == '-') {
            fputs("\\-", f);
        } else if (s[i] == '\\') {
            fputs("\\e", f);
        } else {
            if ((s[i] == '.' || s[i] == '\'') && (i == 0 || s[i - 1] == '\n'))
                fputs("\\&", f);
            fputc(s[i], f);
        }
    }
    if (bold)
        fputs("\\fR", f);
}

static void roff_str(FILE *f, const char *s)
{
    roff(f, s, strlen(s));
}

/* "Read by hutch serve, hutch run and hutch doctor." */
static void read_by(FILE *f, unsigned scope)
{
    const char *names[sizeof(commands) / sizeof(commands[0])];
    size_t n = 0;

    for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
        if (scope & commands[c].bit)
            names[n++] = commands[c].name;
    fputs("Read by ", f);
    for (size_t j = 0; j < n; j++) {
        int cmd = !strncmp(names[j], "hutch ", 6);
        fputs(!j ? "" : j == n - 1 ? " and " : ", ", f);
        fputs(cmd ? "\\fB" : "", f);
        roff_str(f, names[j]);
        fputs(cmd ? "\\fR" : "", f);
    }
    fputs(".\n", f);
}

void hutch_knobs_man(FILE *f)
{
    fputs(".\\\" Generated from src/knobs.def by hutch __knobs man (make "
          "man-knobs):\n.\\\" edit the table, not these lines.\n",
          f);
    fputs("An empty variable is unset.\n"
          "A number or a choice that is not one of the accepted values stops the "
          "command\nthat reads it before it starts anything, with a message that "
          "names the\nvariable, the value and what is accepted.\n",
          f);
    for (int i = 0; i < HUTCH_KNOB_N; i++) {
        const struct hutch_knob *k = &table[i];
        char value[256];

        fprintf(f, ".TP\n.B %s\n", k->env);
        roff_str(f, k->doc);
        fputc('\n', f);
        switch (k->type) {
        case HUTCH_KNOB_COUNT:
        case HUTCH_KNOB_MS:
        case HUTCH_KNOB_MIB:
            snprintf(value, sizeof(value), "%s %llu to %llu%s; default",
                     k->type == HUTCH_KNOB_COUNT ? "A number from" : "From",
                     (unsigned long long)k->min, (unsigned long long)k->max,
                     forms[k->type].unit);
            roff_str(f, value);
            if (k->dflt_text) {
                fputs(": ", f);
                roff_str(f, k->dflt_text);
            } else {
                fprintf(f, " %llu", (unsigned long long)k->dflt);
            }
            fputs(".\n", f);
            break;
        default:
            value_help(k, value, sizeof(value));
            roff_str(f, value);
            fputc('\n', f);
        }
        if (k->option) {
            fputs("\\fB", f);
            roff_str(f, k->option);
            fputs("\\fR takes precedence", f);
            if (k->config) {
                fputs(" (in a \\fBhutch serve \\-\\-config\\fR file: \\fB", f);
                roff_str(f, k->config);
                fputs("\\fR)", f);
            }
            fputs(".\n", f);
        }
        read_by(f, k->scope);
    }
}

void hutch_knobs_list(FILE *f)
{
    for (int i = 0; i < HUTCH_KNOB_N; i++) {
        const struct hutch_knob *k = &table[i];
        fprintf(f, "%s\t%s\t%s\t", k->env, k->option ? k->option : "-",
                k->config ? k->config : "-");
        for (size_t c = 0, n = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
            if (k->scope & commands[c].bit)
                fprintf(f, "%s%s", n++ ? "," : "", commands[c].name);
        fputc('\n', f);
    }
}
