/* opts.c — see opts.h.  The policy's options are judged by opt_check
 * (optcheck.c), which the core uses too (hutch policy check). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optcheck.h"
#include "opts.h"

static const struct hutch_option *find(const struct hutch_option *table,
                                       const char *name)
{
    for (; table && table->name; table++)
        if (strcmp(table->name, name) == 0)
            return table;
    return NULL;
}

const char *opt_env(const struct hutch_option *table, const char *name)
{
    const struct hutch_option *o = find(table, name);
    const char *v = o && o->env ? getenv(o->env) : NULL;
    return v && *v ? v : NULL;
}

int opt_env_bool(const struct hutch_option *table, const char *name, int dflt,
                 struct hutch_err *err)
{
    const struct hutch_option *o = find(table, name);
    const char *v = opt_env(table, name);
    int r;
    if (!v)
        return dflt;
    r = opt_check_env(o, v, err);
    return r < 0 ? r : strcmp(v, "true") == 0;
}

/* Row i of a table this plugin compiled itself: its own stride.  opt_check
 * asks for rows 0, 1, … and stops at the first NULL, so row i is only
 * asked for once rows 0 … i-1 were there. */
static const struct hutch_option *own_row(const void *table, size_t i)
{
    const struct hutch_option *t = table;
    return t[i].name ? &t[i] : NULL;
}

int opt_get(const struct hutch_option *table, const char *executor,
            const struct hutch_sandbox_class *cls, const char *name, int fallback,
            char *out, size_t len, struct hutch_err *err)
{
    const char *json = cls && HUTCH_HAS_MEMBER(cls, struct hutch_sandbox_class, options)
                           ? cls->options
                           : NULL;
    const char *env = fallback ? opt_env(table, name) : NULL;

    snprintf(out, len, "%s", env ? env : "");
    return opt_check(table, own_row, executor, json, name, out, len, err);
}
