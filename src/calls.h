/* calls.h — the tool calls of one execution: each `tool_call` the runner
 * sends is answered by a worker thread of the execution's own pool, and the
 * answers go back as `tool_result` messages in completion order.  Used by
 * the run loop in exec.c, from its thread only. */
#ifndef HUTCH_CALLS_H
#define HUTCH_CALLS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "exec.h"

struct hutch_calls;

/* Takes one message for the runner (owned by the callee, freed on failure
 * too); a negative return means the runner is not reading them. */
typedef int (*hutch_calls_send_fn)(void *arg, cJSON *msg);

/* fn answers the calls (NULL: every tool is unknown); send queues the
 * answers for the runner; record is the execution's tool_calls array, where
 * every call's outcome is appended.  NULL when out of memory. */
struct hutch_calls *hutch_calls_new(hutch_tool_fn fn, void *fn_arg,
                                    hutch_calls_send_fn send, void *send_arg,
                                    cJSON *record);

/* Readable when answers are waiting: poll it, then hutch_calls_take. */
int hutch_calls_fd(const struct hutch_calls *q);

/* One tool_call from the runner.  It runs on a worker, bounded by
 * deadline_ms (the execution's), or is answered at once when it cannot
 * (too many calls, no handler, out of memory).  Negative when an answer
 * could not be sent. */
int hutch_calls_submit(struct hutch_calls *q, int64_t id, const char *tool,
                       const cJSON *args, uint64_t deadline_ms);

/* Sends the answers of the calls that finished, in completion order.
 * Negative when one could not be sent; no answers are sent after that. */
int hutch_calls_take(struct hutch_calls *q);

/* The execution ended: records the calls still open as "unfinished", waits
 * for the workers (each call is bounded by the execution's deadline, and
 * fn's argument must outlive them) and frees everything.  NULL is fine. */
void hutch_calls_free(struct hutch_calls *q);

#endif
