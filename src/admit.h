/* admit.h — how many executions run at once, per principal and in all,
 * and a fair queue for the rest.
 *
 * The rule.  An execution starts at once when its principal runs fewer
 * executions than its own limit, nobody of that principal waits before it,
 * and hutch runs fewer than its total.  Otherwise it waits in its
 * principal's queue, first come first served, while that queue holds fewer
 * than the principal's queue limit and all queues together fewer than
 * HUTCH_ADMIT_MAX_QUEUED; past either it is refused at once (-EBUSY, the
 * message says whose limit and how to change it).  When a slot frees, the
 * principals with a waiting execution take turns (round robin, each in the
 * order it began to wait; one at its own limit is passed over), so one
 * principal's long queue never delays another's next execution by more
 * than one turn.  A waiting execution gives up when it is cancelled, or
 * after HUTCH_ADMIT_WAIT_MS (-ETIMEDOUT).
 *
 * The limits.  The total: the operator's ($HUTCH_MAX_EXECUTIONS), else
 * sized from the machine (hutch_admit_machine_total).  Per principal: the
 * policy's concurrency.executions and concurrency.queued (policy.h), the
 * principal's own entry first; when the policy says nothing, a quarter of
 * the total (HUTCH_ADMIT_PRINCIPAL_SHARE) if it lists principals, the
 * whole total if it does not (one user: nobody to share with), and
 * HUTCH_ADMIT_DEFAULT_QUEUED waiting.  Each execution brings its
 * principal's limits from the policy it started under, so a reload applies
 * to the executions that come after it.
 *
 * Not here: the policy (policy.c), where executions come from (job.c).
 * Thread-safe: one mutex; a waiting thread sleeps on a condition of its
 * own. */
#ifndef HUTCH_ADMIT_H
#define HUTCH_ADMIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_admit;
struct hutch_admit_slot;

/* The total sized from this machine: HUTCH_ADMIT_PER_CPU executions per
 * CPU this process may run on, but no more than one per
 * HUTCH_DEFAULT_MEMORY_MB of the machine's memory (a sandbox's default
 * limit), and at least 2. */
unsigned hutch_admit_machine_total(void);
/* The total in effect: $HUTCH_MAX_EXECUTIONS when set (1 to
 * HUTCH_ADMIT_MAX_TOTAL; another value is -EINVAL with err saying why),
 * else hutch_admit_machine_total().  *from (static) names where it came
 * from, for messages. */
int hutch_admit_total_from(unsigned *out, const char **from, struct hutch_err *err);

/* A gate for `total` executions at once; `from` (static) names where that
 * number came from.  NULL when out of memory. */
struct hutch_admit *hutch_admit_new(unsigned total, const char *from);
void hutch_admit_free(struct hutch_admit *a);
unsigned hutch_admit_total(const struct hutch_admit *a);

/* What one execution brings: its principal's limits (0 for running: the
 * defaults above; queued_set 0: HUTCH_ADMIT_DEFAULT_QUEUED) and whether
 * the policy lists principals.  `tick` (may be NULL) is called about once
 * a second while it waits, with the time waited. */
struct hutch_admit_req {
    const char *principal;
    unsigned running;
    unsigned queued;
    int queued_set;
    int has_principals;
    const atomic_int *cancel;
    void (*tick)(void *arg, uint64_t waited_ms);
    void *tick_arg;
};

/* Waits for a slot (see the rule): 0 with *slot held, else -EBUSY (no
 * room in the queue), -ECANCELED or -ETIMEDOUT, err saying why. */
int hutch_admit_enter(struct hutch_admit *a, const struct hutch_admit_req *req,
                      struct hutch_admit_slot **slot, struct hutch_err *err);
/* Gives the slot back (NULL: nothing); the next waiting execution starts. */
void hutch_admit_leave(struct hutch_admit *a, struct hutch_admit_slot *slot);

/* Executions running and waiting now: in all, or of one principal. */
void hutch_admit_counts(struct hutch_admit *a, const char *principal, unsigned *running,
                        unsigned *queued);

#endif
