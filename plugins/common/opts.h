/* opts.h — how the in-tree plugins read their options: each declares its
 * options once, in a table of struct hutch_option (hutch-executor.h) that
 * its struct hutch_executor points to, and reads every option through that
 * table: the policy's value (cls->options, checked against the table), else
 * the declared environment variable.  No plugin calls getenv() for a
 * HUTCH_* variable of its own anywhere else.  Stateless and thread-safe. */
#ifndef HUTCH_PLUGIN_OPTS_H
#define HUTCH_PLUGIN_OPTS_H

#include <stddef.h>

#include "hutch-executor.h"

/* One row of an options table. */
#define OPT_ROW(name, type, env, flags, doc)                                           \
    {                                                                                  \
        sizeof(struct hutch_option), (type), (name), (env), (doc), (flags)             \
    }
#define OPT_END                                                                        \
    {                                                                                  \
        sizeof(struct hutch_option), 0, NULL, NULL, NULL, 0                            \
    }

/* The value of option `name` from the environment (its declared
 * variable), or NULL when that is unset or empty, or `name` is not
 * declared (a bug: the plugin's own table). */
const char *opt_env(const struct hutch_option *table, const char *name);

/* Boolean option `name` (declared HUTCH_OPTION_BOOL) from its environment
 * variable: 1 or 0, `dflt` when unset or empty; -EINVAL naming the
 * variable when its value is not "true" or "false". */
int opt_env_bool(const struct hutch_option *table, const char *name, int dflt,
                 struct hutch_err *err);

/* The policy's executor_options for this class checked against `table`
 * (every name declared, not HUTCH_OPTION_ENV_ONLY, a value of its type),
 * then the value of `name` into out: the policy's, else (when `fallback`)
 * its environment variable's, else "".  -EINVAL naming the option, the
 * executor and the options it knows. */
int opt_get(const struct hutch_option *table, const char *executor,
            const struct hutch_sandbox_class *cls, const char *name, int fallback,
            char *out, size_t len, struct hutch_err *err);

#endif
