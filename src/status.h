/* status.h — the pools' and the upstreams' status as typed snapshots:
 * plain rows that pool.c and upstream.c fill under their own locks, and
 * that the readers (metrics.c's /metrics and /readyz, job.c's audit,
 * hutch doctor, the CLI's and the bridge's messages, search_tools) read by
 * field.  JSON is made from them only at the edges (/readyz, the audit
 * log), by the renderers below.
 *
 * Not here: taking a snapshot (hutch_pool_snapshot, pool.h;
 * hutch_upstreams_snapshot, upstream.h), or anything that calls up into
 * them: this file calls only cJSON, so that metrics.c, low in the layers,
 * can render what it is handed.  Threads: rows are the caller's; the
 * functions keep no state. */
#ifndef HUTCH_STATUS_H
#define HUTCH_STATUS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps.h"
#include "hutch-executor.h"

/* One warm-pool class (pool.c's struct klass, as it is now). */
struct hutch_pool_status {
    char executor[HUTCH_MAX_EXECUTOR_NAME + 1];
    char language[16];
    uint64_t memory_mb; /* the class's memory limit, in MiB */
    uint32_t pids;      /* its pids limit */
    int size;           /* configured */
    int target;         /* kept warm now: size, and what demand added */
    int idle, starting; /* warm boxes waiting, being started */
    uint64_t hits, misses, failures, recycled;
    bool on_demand; /* added by a miss, not by the configuration */
    bool failing;   /* the last refill failed: last_error says why */
    char last_error[300];
};

/* The state an upstream server is in (the order is upstream_int.h's). */
enum hutch_upstream_state {
    HUTCH_UPSTREAM_STARTING,
    HUTCH_UPSTREAM_READY,
    HUTCH_UPSTREAM_FAILED,
    HUTCH_UPSTREAM_RESTARTING,
    HUTCH_UPSTREAM_DISABLED, /* "disabled": true in the servers file */
    HUTCH_UPSTREAM_SKIPPED,  /* a type hutch does not run, or a broken entry */
    HUTCH_UPSTREAM_STATE_COUNT
};

/* One entry of the servers file. */
struct hutch_upstream_status {
    char server[HUTCH_MAX_SERVER_NAME + 1];
    const char *transport; /* "stdio", "http", or "none" (skipped): static */
    enum hutch_upstream_state state;
    /* Why it is not ready ("" when it is ready, or when no reason is
     * known); a skipped entry's says why it was skipped. */
    char error[HUTCH_ERR_MSG];
    size_t tools; /* tools it lists (0 unless ready) */
};

/* "starting", "ready", "failed", "restarting", "disabled", "skipped". */
const char *hutch_upstream_state_name(enum hutch_upstream_state s);
/* Neither disabled nor skipped: hutch started it (or tries to). */
bool hutch_upstream_started(enum hutch_upstream_state s);

/* The JSON of /readyz and the audit log.  Pools: per class {"executor",
 * "language", "memory_mb", "pids", "size", "idle", "starting", "hits",
 * "misses", "failures", "recycled", "on_demand", "last_error"?}.
 * Upstreams: per entry {"server", "transport", "state", "error"?,
 * "tools"}.  detail 0 leaves out the free-text errors (for a caller that
 * showed no token).  NULL when out of memory; caller frees. */
cJSON *hutch_pool_status_json(const struct hutch_pool_status *rows, size_t n,
                              int detail);
cJSON *hutch_upstream_status_json(const struct hutch_upstream_status *rows, size_t n,
                                  int detail);

#endif
