/* plugin_opts.c — the executor options a plugin declares (struct
 * hutch_option in hutch-executor.h), seen from the core: the table checked
 * when the plugin loads, read row by row at the plugin's stride, and a
 * policy's executor_options checked against it (`hutch policy check`)
 * by the judge the plugins use when a sandbox starts
 * (plugins/common/optcheck.c).  Reads static tables only: thread-safe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../plugins/common/optcheck.h"
#include "plugin.h"

/* The first version of the row: every member through flags. */
#define ROW_MIN (offsetof(struct hutch_option, flags) + sizeof(uint32_t))

static const struct hutch_option *table_of(const struct hutch_executor *ex)
{
    return ex && HUTCH_HAS_MEMBER(ex, struct hutch_executor, options) ? ex->options
                                                                      : NULL;
}

const struct hutch_option *hutch_plugin_option(const struct hutch_executor *ex,
                                               size_t i)
{
    const struct hutch_option *t = table_of(ex), *row;
    if (!t || i >= HUTCH_OPTIONS_MAX)
        return NULL;
    row = (const struct hutch_option *)(const void *)((const char *)t +
                                                      i * t->struct_size);
    return row->name ? row : NULL;
}

static int name_ok(const char *s, const char *first, const char *rest, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    return n && n <= max && strchr(first, s[0]) && strspn(s, rest) == n;
}

/* Fit for a message: printable ASCII (at most 40 bytes are shown). */
static int printable(const char *s)
{
    for (size_t i = 0; s[i] && i < 40; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define DIGIT "0123456789"

int hutch_plugin_options_check_table(const struct hutch_executor *ex, char *reason,
                                     size_t len)
{
    const struct hutch_option *t = table_of(ex);
    size_t i;

    if (!t)
        return 0;
    if (t->struct_size < ROW_MIN || t->struct_size % _Alignof(struct hutch_option)) {
        snprintf(reason, len,
                 "its options table's rows are %u bytes: at least %zu, a multiple "
                 "of %zu",
                 t->struct_size, ROW_MIN, _Alignof(struct hutch_option));
        return -EPROTO;
    }
    for (i = 0; i <= HUTCH_OPTIONS_MAX; i++) {
        const struct hutch_option *o =
            (const void *)((const char *)t + i * t->struct_size);
        if (!o->name)
            return 0;
        if (i == HUTCH_OPTIONS_MAX)
            break;
        if (o->struct_size != t->struct_size ||
            !name_ok(o->name, LOWER, LOWER DIGIT "_", HUTCH_OPTION_NAME_MAX) ||
            o->type < HUTCH_OPTION_STRING || o->type > HUTCH_OPTION_INT || !o->doc ||
            (o->env && !name_ok(o->env, UPPER, UPPER DIGIT "_", 64)) ||
            ((o->flags & HUTCH_OPTION_ENV_ONLY) && !o->env)) {
            snprintf(reason, len,
                     "its option %zu (\"%.40s\") is malformed: a name of [a-z0-9_] "
                     "from a letter, at most %d bytes; a known type; a doc; an "
                     "environment variable of [A-Z0-9_] (required when "
                     "environment-only); the table's row size",
                     i + 1, o->name && printable(o->name) ? o->name : "?",
                     HUTCH_OPTION_NAME_MAX);
            return -EPROTO;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(hutch_plugin_option(ex, j)->name, o->name)) {
                snprintf(reason, len, "its option \"%s\" is declared twice", o->name);
                return -EPROTO;
            }
    }
    snprintf(reason, len, "its options table has more than %d rows or no end",
             HUTCH_OPTIONS_MAX);
    return -EPROTO;
}

const char *hutch_option_type_name(uint32_t type)
{
    return type == HUTCH_OPTION_BOOL  ? "bool"
           : type == HUTCH_OPTION_INT ? "int"
                                      : "string";
}

static const struct hutch_option *core_row(const void *ex, size_t i)
{
    return hutch_plugin_option(ex, i);
}

int hutch_plugin_check_options(const struct hutch_executor *ex, const char *json,
                               struct hutch_err *err)
{
    if (!table_of(ex))
        return 0;
    return opt_check(ex, core_row, ex->name, json, NULL, NULL, 0, err);
}
