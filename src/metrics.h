/* metrics.h — hutch's counters for `GET /metrics` (Prometheus text format
 * 0.0.4) and the body of `GET /readyz`.  One home for every counter: the
 * parts that know an outcome feed it (job.c executions, calls.c tool
 * calls, govern.c policy denials, exec.c sandboxes), the HTTP transport
 * reads it.  Pools and upstreams are not counted here: their own status is
 * read at scrape time, the pools' through a struct hutch_metrics_source the
 * execution layer hands in (job.h), so that this file, which job.c and the
 * files under it call, calls nothing above it. */
#ifndef HUTCH_METRICS_H
#define HUTCH_METRICS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "buf.h"
#include "status.h"

struct hutch_upstreams;

/* How one execution ended (hutch_executions_total's "outcome"). */
enum hutch_metrics_outcome {
    HUTCH_OUTCOME_OK,           /* the program ran and exited 0 */
    HUTCH_OUTCOME_ERROR,        /* it ran and failed (non-zero exit, exception) */
    HUTCH_OUTCOME_TIMEOUT,      /* it ran over its time */
    HUTCH_OUTCOME_OOM,          /* it ran out of memory */
    HUTCH_OUTCOME_CANCELLED,    /* the client cancelled it */
    HUTCH_OUTCOME_DENIED,       /* the policy refused it */
    HUTCH_OUTCOME_RATE_LIMITED, /* the policy's rate limit refused it */
    HUTCH_OUTCOME_FAILED,       /* hutch could not run it (sandbox, files …) */
    HUTCH_OUTCOME_BUSY,         /* no room to run it or to wait (admit.h) */
    HUTCH_OUTCOME_COUNT
};

/* What a policy denial was about, and why (hutch_policy_denials_total). */
enum hutch_metrics_denial { HUTCH_DENIAL_EXECUTION, HUTCH_DENIAL_TOOL_CALL };

/* One execution ended.  executor NULL or "": refused before one was
 * chosen ("none").  duration_s < 0: not observed in the histogram (the
 * execution never reached an executor). */
void hutch_metrics_execution(const char *executor, enum hutch_metrics_outcome outcome,
                             double duration_s);
/* One tool call's recorded outcome ("ok", or the error code a program
 * sees: "denied", "upstream", "timeout" …).  server NULL: the call named
 * no tool of a known server. */
void hutch_metrics_tool_call(const char *server, const char *outcome);
/* One tool call handled on the execution's loop (loop non-zero: sent
 * from it or answered at once there) or on a worker thread. */
void hutch_metrics_tool_thread(int loop);
/* One "deny" decision of the policy, as audited; rate_limit: the rate
 * limit refused it rather than the rules. */
void hutch_metrics_denial(enum hutch_metrics_denial what, int rate_limit);
/* The executor serve runs on: its series show (at 0) before any run. */
void hutch_metrics_executor(const char *executor);
/* A sandbox was started (+1) or destroyed (-1). */
void hutch_metrics_sandbox(int delta);
/* One connection through the egress proxy ended: its outcome (egress.h's
 * enum, below 16) and that outcome's name (a static string), the bytes it
 * moved. */
void hutch_metrics_egress(unsigned outcome, const char *name, uint64_t bytes);

/* What `hutch serve --http` ended on its own, or a client ended
 * (hutch_http_connections_closed_total, hutch_http_sessions_ended_total):
 * connections that sent no complete request head in time, and
 * unauthenticated ones closed to make room (http_guard.h); 2025 sessions
 * that expired idle, gave way to a newer one of their principal at its
 * share, or to another principal's in a full table, or that their client
 * ended (DELETE). */
enum hutch_metrics_http {
    HUTCH_HTTP_CONN_HEAD_TIMEOUT,
    HUTCH_HTTP_CONN_ROOM,
    HUTCH_HTTP_SESSION_IDLE,
    HUTCH_HTTP_SESSION_SHARE,
    HUTCH_HTTP_SESSION_FULL,
    HUTCH_HTTP_SESSION_CLIENT,
    HUTCH_HTTP_EVENT_COUNT
};
void hutch_metrics_http(enum hutch_metrics_http what, uint64_t n);

/* What a scrape and /readyz read of the execution layer, which this file
 * does not include: hutch_jobs_metrics_source (job.h) fills it with job.c's
 * functions.  Called on the scraping thread, with no lock of metrics.c
 * held. */
struct hutch_metrics_source {
    void *ctx;
    /* The pools' state, one row per class in *rows (caller frees with
     * free()) and *n (hutch_pool_snapshot, pool.h); 0, or -ENOMEM. */
    int (*pool_status)(void *ctx, struct hutch_pool_status **rows, size_t *n);
    /* Adds "policy" and "executor" to `out` (hutch_jobs_ready, job.h);
     * 1 when hutch can run code now, else 0. */
    int (*ready)(void *ctx, cJSON *out, int detail);
};

/* The whole exposition: the counters above, then the pools of `src` and
 * the upstreams of `u` (either may be NULL) as they are now.  0, or -E2BIG /
 * -ENOMEM (out is then incomplete). */
int hutch_metrics_render(const struct hutch_metrics_source *src,
                         struct hutch_upstreams *u, struct hutch_buf *out);

/* The body of /readyz: {"ready", "executor": {...}, "upstreams": [...],
 * "pools": [...]}; *ready set.  detail 0 leaves out free-text errors (for
 * a caller that showed no token).  Caller frees; NULL when out of memory. */
cJSON *hutch_metrics_ready(const struct hutch_metrics_source *src,
                           struct hutch_upstreams *u, int detail, int *ready);

#endif
