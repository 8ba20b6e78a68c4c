/* serve_config.h — hutch serve --config FILE: a `key = value` file of serve's
 * own long options, read into the argument list serve parses. */
#ifndef HUTCH_SERVE_CONFIG_H
#define HUTCH_SERVE_CONFIG_H

#include <getopt.h>

#include "hutch-executor.h"

/* Read FILE and append its settings to *args (grown with realloc; *n
 * entries, caller frees the array and each entry) as "--key" or "--key",
 * "value", in file order.  Keys are the long options of `opts` but `skip`
 * (NULL-terminated: help, config…); an option without an argument takes
 * true/false (yes/no, on/off, 1/0), false adding nothing.  Errors are
 * "FILE:LINE: message" (an unknown key with a suggestion). */
int hutch_serve_config(const char *file, const struct option *opts,
                       const char *const *skip, char ***args, int *n,
                       struct hutch_err *err);

#endif
