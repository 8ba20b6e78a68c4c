/* optcheck.c — see optcheck.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "optcheck.h"

static int value_ok(const struct hutch_option *o, const char *v)
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

static const char *type_name(uint32_t type)
{
    return type == HUTCH_OPTION_BOOL  ? "a boolean (\"true\" or \"false\")"
           : type == HUTCH_OPTION_INT ? "an integer"
                                      : "a string";
}

int opt_check_env(const struct hutch_option *o, const char *value,
                  struct hutch_err *err)
{
    if (value_ok(o, value))
        return 0;
    return hutch_err_set(err, -EINVAL, "%s=%s: expected %s", o->env ? o->env : o->name,
                         value, type_name(o->type));
}

/* " (it knows platform, flavour)": what a policy may set, into err. */
static void append_known(const void *table, opt_row_fn row, struct hutch_err *err)
{
    const struct hutch_option *o;
    size_t n;
    int first = 1;

    if (!err)
        return;
    n = strlen(err->msg);
    for (size_t i = 0; (o = row(table, i)) && n < sizeof(err->msg); i++) {
        if (o->flags & HUTCH_OPTION_ENV_ONLY)
            continue;
        n += (size_t)snprintf(err->msg + n, sizeof(err->msg) - n, "%s%s",
                              first ? " (it knows " : ", ", o->name);
        first = 0;
    }
    if (first && n < sizeof(err->msg))
        snprintf(err->msg + n, sizeof(err->msg) - n, " (it has none)");
    else if (n < sizeof(err->msg))
        snprintf(err->msg + n, sizeof(err->msg) - n, ")");
}

int opt_check(const void *table, opt_row_fn row, const char *executor, const char *json,
              const char *want, char *out, size_t len, struct hutch_err *err)
{
    cJSON *obj, *it;
    int r = 0;

    if (!json)
        return 0;
    obj = cJSON_Parse(json);
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return hutch_err_set(err, -EINVAL, "executor_options.%s is not an object",
                             executor);
    }
    cJSON_ArrayForEach(it, obj)
    {
        const struct hutch_option *o = NULL;
        for (size_t i = 0; (o = row(table, i)); i++)
            if (!strcmp(o->name, it->string))
                break;
        if (!o) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: the %s executor "
                              "has no such option",
                              executor, it->string, executor);
            append_known(table, row, err);
        } else if (o->flags & HUTCH_OPTION_ENV_ONLY) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: a setting of the "
                              "whole hutch process, not of a policy: set %s instead",
                              executor, it->string, o->env ? o->env : "nothing");
        } else if (!cJSON_IsString(it) || !value_ok(o, it->valuestring)) {
            r = hutch_err_set(err, -EINVAL,
                              "the policy's executor_options.%s.%s: expected %s",
                              executor, it->string, type_name(o->type));
        } else if (want && !strcmp(it->string, want)) {
            snprintf(out, len, "%s", it->valuestring);
        }
        if (r < 0)
            break;
    }
    cJSON_Delete(obj);
    return r;
}
