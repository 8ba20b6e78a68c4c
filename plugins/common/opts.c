/* opts.c — see opts.h.  The core checks the same rules in
 * src/plugin_opts.c (hutch policy check); the messages match. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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

static int type_ok(const struct hutch_option *o, const char *v)
{
    char *end;
    switch (o->type) {
    case HUTCH_OPTION_BOOL:
        return !strcmp(v, "true") || !strcmp(v, "false");
    case HUTCH_OPTION_INT:
        errno = 0;
        (void)strtoll(v, &end, 10);
        return *v && !*end && !errno;
    default:
        return 1;
    }
}

static const char *type_name(unsigned type)
{
    return type == HUTCH_OPTION_BOOL  ? "a boolean (\"true\" or \"false\")"
           : type == HUTCH_OPTION_INT ? "an integer"
                                      : "a string";
}

/* ", platform, flavour)": the options a policy may set, for messages. */
static void append_known(const struct hutch_option *table, struct hutch_err *err)
{
    size_t n;
    int first = 1;

    if (!err)
        return;
    n = strlen(err->msg);
    for (; table->name && n < sizeof(err->msg); table++) {
        if (table->flags & HUTCH_OPTION_ENV_ONLY)
            continue;
        n += (size_t)snprintf(err->msg + n, sizeof(err->msg) - n, "%s%s",
                              first ? " (it knows " : ", ", table->name);
        first = 0;
    }
    if (!first && n < sizeof(err->msg))
        snprintf(err->msg + n, sizeof(err->msg) - n, ")");
}

int opt_get(const struct hutch_option *table, const char *executor,
            const struct hutch_sandbox_class *cls, const char *name, int fallback,
            char *out, size_t len, struct hutch_err *err)
{
    const char *json = cls && HUTCH_HAS_MEMBER(cls, struct hutch_sandbox_class, options)
                           ? cls->options
                           : NULL;
    const char *env = fallback ? opt_env(table, name) : NULL;
    cJSON *o, *it;
    int r = 0;

    snprintf(out, len, "%s", env ? env : "");
    if (!json)
        return 0;
    o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return hutch_err_set(err, -EINVAL, "executor_options.%s is not an object",
                             executor);
    }
    cJSON_ArrayForEach(it, o)
    {
        const struct hutch_option *d = find(table, it->string);
        if (!d) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: the %s executor "
                              "has no such option",
                              executor, it->string, executor);
            append_known(table, err);
            break;
        }
        if (d->flags & HUTCH_OPTION_ENV_ONLY) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: a setting of the "
                              "whole hutch process, not of a policy: set %s instead",
                              executor, it->string, d->env ? d->env : "nothing");
            break;
        }
        if (!cJSON_IsString(it) || !type_ok(d, it->valuestring)) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: expected %s",
                              executor, it->string, type_name(d->type));
            break;
        }
        if (strcmp(it->string, name) == 0)
            snprintf(out, len, "%s", it->valuestring);
    }
    cJSON_Delete(o);
    return r;
}
