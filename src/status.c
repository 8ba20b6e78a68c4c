/* status.c — the names of the upstream states, and the JSON of the pools'
 * and upstreams' snapshots for the edges (see status.h).
 *
 * Not here: taking the snapshots (pool.c, upstream.c), /metrics (metrics.c
 * reads the rows by field). */
#include "status.h"

static const char *const state_names[HUTCH_UPSTREAM_STATE_COUNT] = {
    [HUTCH_UPSTREAM_STARTING] = "starting", [HUTCH_UPSTREAM_READY] = "ready",
    [HUTCH_UPSTREAM_FAILED] = "failed",     [HUTCH_UPSTREAM_RESTARTING] = "restarting",
    [HUTCH_UPSTREAM_DISABLED] = "disabled", [HUTCH_UPSTREAM_SKIPPED] = "skipped",
};

const char *hutch_upstream_state_name(enum hutch_upstream_state s)
{
    return (unsigned)s < HUTCH_UPSTREAM_STATE_COUNT ? state_names[s] : "unknown";
}

bool hutch_upstream_started(enum hutch_upstream_state s)
{
    return s != HUTCH_UPSTREAM_DISABLED && s != HUTCH_UPSTREAM_SKIPPED;
}

cJSON *hutch_pool_status_json(const struct hutch_pool_status *rows, size_t n,
                              int detail)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a && i < n; i++) {
        const struct hutch_pool_status *k = &rows[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
        if (!cJSON_AddStringToObject(o, "executor", k->executor) ||
            !cJSON_AddStringToObject(o, "language", k->language) ||
            !cJSON_AddNumberToObject(o, "memory_mb", (double)k->memory_mb) ||
            !cJSON_AddNumberToObject(o, "pids", k->pids) ||
            !cJSON_AddNumberToObject(o, "size", k->size) ||
            !cJSON_AddNumberToObject(o, "target", k->target) ||
            !cJSON_AddNumberToObject(o, "idle", k->idle) ||
            !cJSON_AddNumberToObject(o, "starting", k->starting) ||
            !cJSON_AddNumberToObject(o, "hits", (double)k->hits) ||
            !cJSON_AddNumberToObject(o, "misses", (double)k->misses) ||
            !cJSON_AddNumberToObject(o, "failures", (double)k->failures) ||
            !cJSON_AddNumberToObject(o, "recycled", (double)k->recycled) ||
            !cJSON_AddBoolToObject(o, "on_demand", k->on_demand) ||
            (detail && k->failing &&
             !cJSON_AddStringToObject(o, "last_error", k->last_error))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

cJSON *hutch_upstream_status_json(const struct hutch_upstream_status *rows, size_t n,
                                  int detail)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a && i < n; i++) {
        const struct hutch_upstream_status *s = &rows[i];
        bool ready = s->state == HUTCH_UPSTREAM_READY;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
        if (!cJSON_AddStringToObject(o, "server", s->server) ||
            !cJSON_AddStringToObject(o, "transport", s->transport) ||
            !cJSON_AddStringToObject(o, "state", hutch_upstream_state_name(s->state)) ||
            (detail && !ready && s->error[0] &&
             !cJSON_AddStringToObject(o, "error", s->error)) ||
            !cJSON_AddNumberToObject(o, "tools", (double)s->tools)) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}
