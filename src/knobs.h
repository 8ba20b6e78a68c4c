/* knobs.h — the settings of hutch's core an operator sets from the
 * environment: one table (knobs.def), read, checked and documented by
 * knobs.c.  Nothing else in the core reads a HUTCH_* variable. */
#ifndef HUTCH_KNOBS_H
#define HUTCH_KNOBS_H

#include <stdint.h>
#include <stdio.h>

#include "caps.h"
#include "hutch-executor.h"

/* A row's type: what its value is and how it is checked. */
enum hutch_knob_type {
    HUTCH_KNOB_COUNT,  /* a number from min to max */
    HUTCH_KNOB_MS,     /* the same, in milliseconds */
    HUTCH_KNOB_MIB,    /* the same, in MiB */
    HUTCH_KNOB_CHOICE, /* one of the row's choices */
    HUTCH_KNOB_NAME,   /* a name, checked where it is used */
    HUTCH_KNOB_DIR,    /* a directory, checked where it is used */
    HUTCH_KNOB_FILE,   /* a file, checked where it is used */
    HUTCH_KNOB_SECRET, /* never printed; at least min characters */
};

/* The commands that read a knob (a row's scope). */
#define HUTCH_CMD_SERVE     0x01u /* hutch serve, stdio or HTTP */
#define HUTCH_CMD_HTTP      0x02u /* hutch serve --http only */
#define HUTCH_CMD_RUN       0x04u
#define HUTCH_CMD_WORKSPACE 0x08u
#define HUTCH_CMD_PLUGINS   0x10u
#define HUTCH_CMD_DOCTOR    0x20u
#define HUTCH_CMD_ALL       0x40u /* every command */

enum hutch_knob_id {
#define KNOB(id, env, option, config, type, choices, dflt, min, max, dflt_text, scope, \
             doc)                                                                      \
    HUTCH_KNOB_##id,
#include "knobs.def"
#undef KNOB
    HUTCH_KNOB_N
};

struct hutch_knob {
    const char *env, *option, *config;
    enum hutch_knob_type type;
    const char *choices;
    uint64_t dflt, min, max;
    const char *dflt_text;
    unsigned scope;
    const char *doc;
};

/* The row of `id`. */
const struct hutch_knob *hutch_knob(enum hutch_knob_id id);

/* A string knob's value, NULL when unset or empty (empty is unset for
 * every knob). */
const char *hutch_knob_str(enum hutch_knob_id id);

/* A number knob: 1 and its value when set, 0 and the row's default when
 * not, -EINVAL when it is not a number in the row's range (err:
 * "ENV=VALUE: want WHAT from MIN to MAX").  err may be NULL. */
int hutch_knob_uint(enum hutch_knob_id id, uint64_t *out, struct hutch_err *err);

/* A choice knob: 1 and the index of its value in the row's choices when
 * set, 0 and the default's when not, -EINVAL for another value (err:
 * "ENV=VALUE: want A or B"). */
int hutch_knob_choice(enum hutch_knob_id id, unsigned *out, struct hutch_err *err);

/* Every number and choice knob whose scope meets `scope`, as a command
 * checks them when it starts: 0, or the first bad one's -EINVAL. */
int hutch_knobs_check(unsigned scope, struct hutch_err *err);

/* The "Environment" part of a command's --help: the knobs whose scope
 * meets `scope`, each with its value's form, default and first doc line. */
void hutch_knobs_help(FILE *f, unsigned scope);

/* hutch(1)'s ENVIRONMENT entries for the table, roff, in table order. */
void hutch_knobs_man(FILE *f);

/* One line per knob, tab-separated: env, option, config, commands ("-"
 * for none), for the tests. */
void hutch_knobs_list(FILE *f);

#endif
