/* optcheck.h — the one judge of a policy's executor_options against the
 * options an executor declares (struct hutch_option, hutch-executor.h).
 * The plugins call it when a sandbox starts (opts.c); the core calls it
 * for `hutch policy check` (src/plugin_opts.c), so both say the same.
 * Stateless and thread-safe. */
#ifndef HUTCH_PLUGIN_OPTCHECK_H
#define HUTCH_PLUGIN_OPTCHECK_H

#include <stddef.h>

#include "hutch-executor.h"

/* Row i of `table`, NULL past its end: the plugin steps through its own
 * array, the core at the stride the plugin declared.  opt_check asks for
 * rows 0, 1, … in order and never past the first NULL. */
typedef const struct hutch_option *(*opt_row_fn)(const void *table, size_t i);

/* `json` (the policy's executor_options for `executor`; NULL: none) checked
 * against the table: an object whose every name is declared, not
 * HUTCH_OPTION_ENV_ONLY, with a string value of its type.  When `want` is
 * not NULL and the policy sets it, its value goes to out (left alone
 * otherwise).  0, or -EINVAL naming the option, the executor and the
 * options a policy may set. */
int opt_check(const void *table, opt_row_fn row, const char *executor, const char *json,
              const char *want, char *out, size_t len, struct hutch_err *err);

/* `value` of option o's environment variable checked against o's type,
 * with the same judge: 0, or -EINVAL naming the variable and the type. */
int opt_check_env(const struct hutch_option *o, const char *value,
                  struct hutch_err *err);

#endif
