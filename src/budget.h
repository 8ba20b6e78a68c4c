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
 * Principals share that budget (hutch_budget_join).  The rule, with B the
 * process budget, N the principals that are active (running an execution,
 * or holding some of B), and a spare of 1 when the policy lists more
 * principals than are active (one may come), else 0:
 *   - each active principal's floor is F = min(HUTCH_EXEC_MEMORY_BUDGET,
 *     B / (N + spare));
 *   - a principal may always take memory up to its floor, while B has room;
 *   - past its floor, it may take only memory nobody else is owed: after
 *     the take, what stays free must cover the spare floor (F for a
 *     principal that is not active yet) and what each other active
 *     principal lacks of its floor (F less what it holds).
 * So a principal alone may use all of B (all but one floor when the policy
 * lists other principals), and never so much
 * that another principal's request of up to its floor fails for want of
 * room (a take that would fails -EDQUOT, and the message says so): idle
 * capacity is lent, floors are not.  Memory already held is not taken
 * back; a floor can only be short when several principals arrive at once
 * while one holds what was then idle, and the lender gives back as soon as
 * its executions' messages and calls end.
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

struct hutch_budget_share;

struct hutch_budget {
    size_t max;
    atomic_size_t used;
    atomic_size_t peak;
    struct hutch_budget *parent; /* charged too (NULL: none) */
    /* The principal whose share of the parent this charge is (set with a
     * parent that is the process budget; NULL: no shares). */
    struct hutch_budget_share *share;
};

void hutch_budget_init(struct hutch_budget *b, size_t max);

/* hutch's budget for all executions at once (initialised on first use). */
struct hutch_budget *hutch_budget_process(void);

/* A principal's share of the process budget, held by each of its
 * executions while it runs (job.c): the principal counts as active from
 * the first join to the last leave and as long as it holds memory.
 * `listed`: how many principals the policy lists (the spare floor).  NULL
 * when out of memory (then the execution is charged without shares). */
struct hutch_budget_share *hutch_budget_join(const char *principal, unsigned listed);
void hutch_budget_leave(struct hutch_budget_share *s);
/* What `s` holds now (tests, messages). */
size_t hutch_budget_share_used(const struct hutch_budget_share *s);

/* Charges n bytes to b and its parent: 0; -ENOMEM when that would pass b's
 * own budget, -ENOSPC when it would pass its parent's, -EDQUOT when it
 * would take its principal past its share of the parent (the rule above;
 * nothing charged either way).  b NULL: no budget, always 0. */
int hutch_budget_take(struct hutch_budget *b, size_t n);
/* Gives back what a take charged.  b NULL or n 0: nothing. */
void hutch_budget_give(struct hutch_budget *b, size_t n);
/* The heap trimmer's counts (for tests): how often a give woke it, how
 * often it trimmed.  A give to the process budget that leaves it empty
 * asks for a trim HUTCH_MALLOC_TRIM_DELAY_MS later and wakes the trimmer
 * only if no trim was already due. */
void hutch_budget_trim_stats(unsigned long *wakes, unsigned long *trims);

/* What `from` holds becomes `to`'s to give back (same parent and share):
 * a charge that outlives the struct that made it (a result, until it has
 * been sent). */
void hutch_budget_move(struct hutch_budget *to, struct hutch_budget *from);

/* The budget of the tool call this thread runs (calls.c sets it around
 * each call; NULL: none): what the call makes hutch hold further down, the
 * request text sent upstream, is charged to it there. */
void hutch_budget_set_current(struct hutch_budget *b);
struct hutch_budget *hutch_budget_current(void);

/* The end of a message for a take that failed with rc: "more than this
 * execution has left of its N MiB budget", the same of hutch's budget for
 * all executions, or of its principal's share. */
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
