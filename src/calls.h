/* calls.h — the tool calls of one execution: each `tool_call` the runner
 * sends is started from the run loop's thread (answered by whoever sees
 * its upstream's answer) or runs on a worker thread of the execution's own
 * pool; either writes the `tool_result` back to the runner's channel
 * itself, in completion order.  Used by the run loop in exec.c, from its
 * thread only. */
#ifndef HUTCH_CALLS_H
#define HUTCH_CALLS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "budget.h"
#include "exec.h"

struct hutch_calls;

/* fn answers the calls (NULL: every tool is unknown); chan_fd is the
 * runner's channel (non-blocking by the time a call comes), where the
 * answers are written; record is the execution's tool_calls log, where
 * every call's outcome is appended.  NULL when out of memory. */
struct hutch_calls *hutch_calls_new(hutch_tool_fn fn, void *fn_arg, int chan_fd,
                                    struct hutch_call_log *record);

/* The tool name hutch_calls_submit takes for a tools.search (the wire's
 * "search" message) and a describe (dir(), help()): answered by the
 * function set here, not by fn, with `tool` NULL for a search and
 * "describe" for a describe.  No tool_call can carry them (the wire refuses
 * control characters).  A describe is no tool call: it is not recorded. */
#define HUTCH_CALLS_SEARCH "\x01search"
#define HUTCH_CALLS_DESCRIBE                                                           \
    "\x01"                                                                             \
    "describe" /* "\x01d…" would be one escape */
void hutch_calls_set_search(struct hutch_calls *q, hutch_tool_fn fn, void *arg);

/* The tool handler's start function (exec.h; its arg is fn's): each
 * tool_call is then started from the loop's thread, and answered by
 * whoever sees its upstream's answer, with no worker in between; only
 * what start_fn hands back goes to a worker.  Before the first call. */
void hutch_calls_set_start(struct hutch_calls *q, hutch_tool_start_fn start_fn);

/* Readable when the loop must look: then call hutch_calls_take. */
int hutch_calls_fd(const struct hutch_calls *q);

/* The execution's memory budget (budget.h), before the first call: each
 * call's arguments count from submit until it is answered, each result
 * until it is encoded, each answer until the runner has read it.  A call
 * that does not fit is answered with the error code "too_large"; answers
 * that do not fit stop the runner as one that does not read them. */
void hutch_calls_set_budget(struct hutch_calls *q, struct hutch_budget *budget);

/* One tool_call from the runner (takes args, which may be NULL).  It runs
 * on a worker, bounded by deadline_ms (the execution's: the call gets at
 * most HUTCH_CALL_SHARE_OF_REMAINING % of the time left, so the program can
 * catch its timeout), or is answered at once when it cannot (too many calls, no
 * handler, over the budget, out of memory).  Negative when the runner does not read its
 * answers: stop it. */
int hutch_calls_submit(struct hutch_calls *q, int64_t id, const char *tool, cJSON *args,
                       uint64_t deadline_ms);

/* After hutch_calls_fd polled readable.  Negative when the runner does not
 * read its answers: stop it. */
int hutch_calls_take(struct hutch_calls *q);

/* Non-zero while answers wait for the channel: poll it for POLLOUT, and
 * call hutch_calls_flush when it is writable (negative: stop the runner). */
int hutch_calls_unsent(struct hutch_calls *q);
int hutch_calls_flush(struct hutch_calls *q);

/* The execution ended: nothing more starts or is written to the channel
 * (call it before the channel is closed), and the calls still open are
 * recorded as "unfinished".  NULL is fine; hutch_calls_free does it too. */
void hutch_calls_end(struct hutch_calls *q);

/* Ends, waits for the workers (each call is bounded by the execution's
 * deadline, and fn's argument must outlive them) and frees everything.
 * NULL is fine. */
void hutch_calls_free(struct hutch_calls *q);

#endif
