/* pool.h — warm pools of single-use sandboxes (doc/operating.md, "Warm pools").
 *
 * For each class in use (executor, language, limits, options) a bounded
 * queue of boxes: sandboxes started ahead of any job whose runner has said
 * "ready".  A job takes one, runs on it, and the sandbox is destroyed
 * afterwards (exec.c): a box is never used twice.  Refill threads keep each
 * class at its target with bounded parallelism: its size, grown by one for
 * each take that found it empty (up to HUTCH_POOL_GROW_FACTOR times the
 * size) and shrunk by one for each $HUTCH_POOL_SHRINK_MS without one.  An
 * idle box that is older than HUTCH_POOL_MAX_IDLE_MS, or whose runner
 * stirred or died while idle, is destroyed and replaced.  A class whose
 * refills fail backs off (the reason is logged once, jobs start cold) and
 * recovers by itself.
 *
 * What does not live here: which classes are wanted and how big (job.c
 * decides from the plan govern.c resolves from the policy and the flags),
 * starting a sandbox (exec.c).
 *
 * Threads: every function is thread-safe.  One mutex guards the classes;
 * sandboxes are started and destroyed outside it. */
#ifndef HUTCH_POOL_H
#define HUTCH_POOL_H

#include "exec.h"
#include "status.h"

struct hutch_pool;

int hutch_pool_new(struct hutch_pool **out, struct hutch_err *err);

/* How many sandboxes the pools start at once at most, unless
 * $HUTCH_POOL_REFILL_MAX says: this machine's CPUs, at least
 * HUTCH_POOL_REFILL_THREADS, at most HUTCH_POOL_REFILL_MAX_THREADS. */
int hutch_pool_default_refill_max(void);
/* Stops the refills: starts under way are cancelled at their next step,
 * and nothing new starts.  The first thing a shutdown does (the idle
 * sandboxes stay until hutch_pool_free; takes still work). */
void hutch_pool_stop(struct hutch_pool *p);
/* Stops the refills (starts under way are cancelled) and destroys every
 * idle sandbox: nothing of the pool is left when it returns. */
void hutch_pool_free(struct hutch_pool *p);

/* A configuration round: hutch_pool_begin, then hutch_pool_want for each
 * class the configuration keeps warm, then hutch_pool_commit, which drains
 * every class not wanted in the round (configured or on demand). */
void hutch_pool_begin(struct hutch_pool *p);
void hutch_pool_commit(struct hutch_pool *p);
/* Keep `size` sandboxes of class `cls` on `pl` warm (0: none).  Outside a
 * round, adds a class on demand (a job missed it); an on-demand class that
 * nobody takes from for HUTCH_POOL_CLASS_IDLE_MS is drained.  At most
 * HUTCH_POOL_MAX_CLASSES classes; past that, on-demand wants are ignored. */
void hutch_pool_want(struct hutch_pool *p, struct hutch_plugin *pl,
                     const struct hutch_sandbox_class *cls, int size);

/* A warm box of exactly this class, or NULL (a miss: start cold).  The
 * caller owns the box, and ends its job with hutch_pool_discard (with the
 * box it ran on, warm or cold, or NULL when it got none): refills wait
 * while jobs run, unless a class ran dry.
 *
 * `who` names the principal the job runs for (NULL: the policy lists
 * none), for the shares: a principal with more jobs under way than
 * another that took within HUTCH_POOL_SHARE_MS leaves that one an idle box
 * of the class, and starts cold instead (a miss, so the class grows). */
struct hutch_box *hutch_pool_take(struct hutch_pool *p, struct hutch_plugin *pl,
                                  const struct hutch_sandbox_class *cls,
                                  const char *who);
/* The job that called take is over: `b` (may be NULL) is destroyed by the
 * pool's threads, off the caller's path.  `who` as given to take. */
void hutch_pool_discard(struct hutch_pool *p, struct hutch_box *b, const char *who);

/* Every class as it is now, one row each (status.h), in *rows (caller
 * frees with free()) and *n.  0, or -ENOMEM. */
int hutch_pool_snapshot(struct hutch_pool *p, struct hutch_pool_status **rows,
                        size_t *n);

#endif
