/* rate.h — per-principal rate limits ("rate" in the policy): executions
 * and tool calls per minute.
 *
 * Sliding window over one-second counters: a request is allowed when the
 * requests counted in the current second and the 60 seconds before it
 * number fewer than the limit.  So no 60-second window ever holds more
 * than `per_minute` allowed requests (the window looked at covers 60 to
 * 61 s, never less), at the cost of a slot freeing up to one second later
 * than an exact log would free it.  Memory is fixed per principal (two
 * rings of counters), whatever the limit. */
#ifndef HUTCH_RATE_H
#define HUTCH_RATE_H

#include <stdint.h>

#include "caps.h" /* HUTCH_RATE_MAX_PRINCIPALS, HUTCH_MAX_PRINCIPAL_NAME */

struct hutch_rate; /* thread-safe */

/* NULL when out of memory. */
struct hutch_rate *hutch_rate_new(void);
void hutch_rate_free(struct hutch_rate *r);
/* 0: allowed (and counted).  -EAGAIN: `principal` made `per_minute`
 * requests of `kind` in the window; *retry_after_ms (if not NULL) is when
 * the next one would be allowed.  per_minute 0 means unlimited (nothing is
 * counted then, so a limit set by a reload starts from an empty window).
 * kind: "execution" or "tool_call".  A NULL principal is the anonymous
 * one, "" (all unauthenticated callers share it).  now_ms: any clock that
 * does not go backwards (hutch_now_ms(); tests pass their own); a clock
 * that does go back is treated as standing still.  -EINVAL for an unknown
 * kind or a name longer than HUTCH_MAX_PRINCIPAL_NAME, -ENOMEM: callers deny on
 * any error. */
int hutch_rate_take(struct hutch_rate *r, const char *principal, const char *kind,
                    uint32_t per_minute, uint64_t now_ms, uint64_t *retry_after_ms);

#endif
