/* budget.h — how much of hutch's own memory one execution may make it hold.
 *
 * A sandbox's memory limit covers the sandbox.  What the program makes
 * hutch hold on its behalf is counted here: each protocol message it sends
 * while hutch parses and keeps it, the arguments of its tool calls while
 * they are in flight, their results until they are written back, the
 * answers waiting for it to read them.  A charge that would take an
 * execution past its budget (HUTCH_EXEC_MEMORY_BUDGET) fails, and the
 * caller fails what asked for it with a message that says so.
 *
 * Every execution's budget draws on one more, hutch's own for all of them
 * at once (HUTCH_PROCESS_MEMORY_BUDGET, or $HUTCH_MEMORY_BUDGET_MB): many
 * executions each within theirs, or many sessions each running its
 * allowed executions, cannot together take hutch past it.
 *
 * JSON is what hutch holds, and a cJSON tree costs far more than its text
 * (about 80 bytes for each value: "[0,0,...]" takes 40 times its size).
 * hutch_json_text_cost tells, from the text alone and before anything is
 * parsed, what parsing it would hold; hutch_json_check_text is the one
 * check every parser of untrusted JSON runs first, so a message below the
 * byte cap cannot still make hutch hold hundreds of megabytes.
 *
 * Not here: the caps themselves (caps.h).  Thread-safe: charges are atomic. */
#ifndef HUTCH_BUDGET_H
#define HUTCH_BUDGET_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stddef.h>

#include "hutch-executor.h"

struct hutch_budget {
    size_t max;
    atomic_size_t used;
    atomic_size_t peak;
    struct hutch_budget *parent; /* charged too (NULL: none) */
};

void hutch_budget_init(struct hutch_budget *b, size_t max);

/* hutch's budget for all executions at once (initialised on first use). */
struct hutch_budget *hutch_budget_process(void);

/* Charges n bytes to b and its parent: 0; -ENOMEM when that would pass b's
 * own budget, -ENOSPC when it would pass its parent's (nothing charged
 * either way).  b NULL: no budget, always 0. */
int hutch_budget_take(struct hutch_budget *b, size_t n);
/* Gives back what a take charged.  b NULL or n 0: nothing. */
void hutch_budget_give(struct hutch_budget *b, size_t n);

/* The end of a message for a take that failed with rc: "more than this
 * execution has left of its N MiB budget" or the same of hutch's budget
 * for all executions. */
const char *hutch_budget_why(const struct hutch_budget *b, int rc, char *buf,
                             size_t len);

/* An upper estimate of the bytes a cJSON tree parsed from this text holds
 * (nodes, keys and strings, with malloc's overhead), for any text. */
size_t hutch_json_text_cost(const char *text, size_t len);
/* The same for a tree already held. */
size_t hutch_json_cost(const cJSON *j);

/* 0 when parsing `text` would hold at most max bytes; else -E2BIG with a
 * message naming `what` and both sizes. */
int hutch_json_check_text(const char *text, size_t len, size_t max, const char *what,
                          struct hutch_err *err);

#endif
