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
};

void hutch_budget_init(struct hutch_budget *b, size_t max);

/* Charges n bytes: 0, or -ENOMEM (nothing charged) when that would pass
 * the budget.  b NULL: no budget, always 0. */
int hutch_budget_take(struct hutch_budget *b, size_t n);
/* Gives back what a take charged.  b NULL or n 0: nothing. */
void hutch_budget_give(struct hutch_budget *b, size_t n);

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
