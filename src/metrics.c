/* metrics.c — the counters behind `GET /metrics` and the body of
 * `GET /readyz` (see metrics.h; doc/operating.md, "Health and
 * metrics", lists the names).
 *
 * One mutex guards every counter: an increment is a few instructions next
 * to an execution or an upstream round trip, and a scrape reads a
 * consistent set.  Label values are bounded: executors, servers and tool
 * call outcomes each have a small table (caps.h HUTCH_METRICS_MAX_*);
 * past it, new names count as "other", so nothing a sandbox or an agent
 * sends can grow the exposition.  The sandboxes-alive gauge is one atomic
 * (it is touched from pool threads on every start and destroy).
 *
 * Not here: serving HTTP (http_ops.c), the pools' and upstreams' numbers
 * (read from their status at scrape time: the pools' through the
 * struct hutch_metrics_source the caller passes, never by calling job.c,
 * which calls this file), the audit log (audit.c). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "caps.h"
#include "metrics.h"
#include "upstream.h"
#include "util.h"

/* Seconds: from a warm pool hit to a long computation. */
static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                 1,     2.5,  5,     10,   30,  60,   300};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

static const char *const outcome_names[HUTCH_OUTCOME_COUNT] = {
    "ok",     "error",        "timeout", "oom", "cancelled",
    "denied", "rate_limited", "failed",  "busy"};

/* The codes a tool call can end with (calls.c, bridge.c, govern.c). */
static const char *const call_outcomes[] = {
    "ok",      "denied",    "unknown_tool", "invalid_args", "upstream",
    "timeout", "too_large", "internal",     "unfinished",   "other"};
#define NCALL_OUTCOMES (sizeof(call_outcomes) / sizeof(call_outcomes[0]))

struct exec_series {
    char name[HUTCH_MAX_EXECUTOR_NAME + 1];
    uint64_t count[HUTCH_OUTCOME_COUNT];
    uint64_t bucket[NBUCKETS]; /* not cumulative: summed when rendered */
    uint64_t observed;
    double sum;
};

struct server_series {
    char name[HUTCH_MAX_SERVER_NAME + 1];
    uint64_t count[NCALL_OUTCOMES];
};

/* Egress connections by outcome (the index and name egress.h gives). */
#define EGRESS_OUTCOMES 16
struct egress_series {
    const char *name[EGRESS_OUTCOMES]; /* static strings; NULL: none seen */
    uint64_t count[EGRESS_OUTCOMES];
    uint64_t bytes;
};

static struct {
    pthread_mutex_t mu;
    struct exec_series exec[HUTCH_METRICS_MAX_EXECUTORS];
    size_t nexec;
    struct server_series server[HUTCH_METRICS_MAX_SERVERS];
    size_t nserver;
    uint64_t denials[2][2]; /* [what][rate_limit] */
    struct egress_series egress;
} m = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t sandboxes_alive;
static double start_time;
/* Atomics: fed from the HTTP transport's threads. */
static uint64_t http_events[HUTCH_HTTP_EVENT_COUNT];
/* Tool calls by the thread that handled them: [0] a worker, [1] the loop. */
static uint64_t tool_threads[2];

__attribute__((constructor)) static void metrics_start_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Under m.mu.  The last slot is "other", for every name past the cap. */
static struct exec_series *exec_slot(const char *name)
{
    size_t i;

    if (!name || !*name)
        name = "none";
    for (i = 0; i < m.nexec; i++)
        if (strcmp(m.exec[i].name, name) == 0)
            return &m.exec[i];
    if (m.nexec == HUTCH_METRICS_MAX_EXECUTORS - 1)
        name = "other";
    if (m.nexec == HUTCH_METRICS_MAX_EXECUTORS)
        return &m.exec[m.nexec - 1];
    snprintf(m.exec[m.nexec].name, sizeof(m.exec[0].name), "%s", name);
    return &m.exec[m.nexec++];
}

static struct server_series *server_slot(const char *name)
{
    size_t i;

    if (!name)
        name = "";
    for (i = 0; i < m.nserver; i++)
        if (strcmp(m.server[i].name, name) == 0)
            return &m.server[i];
    if (m.nserver == HUTCH_METRICS_MAX_SERVERS - 1)
        name = "other";
    if (m.nserver == HUTCH_METRICS_MAX_SERVERS)
        return &m.server[m.nserver - 1];
    snprintf(m.server[m.nserver].name, sizeof(m.server[0].name), "%s", name);
    return &m.server[m.nserver++];
}

void hutch_metrics_execution(const char *executor, enum hutch_metrics_outcome outcome,
                             double duration_s)
{
    struct exec_series *e;

    if ((unsigned)outcome >= HUTCH_OUTCOME_COUNT)
        outcome = HUTCH_OUTCOME_FAILED;
    pthread_mutex_lock(&m.mu);
    e = exec_slot(executor);
    e->count[outcome]++;
    if (duration_s >= 0 && isfinite(duration_s)) {
        size_t b = 0;
        while (b < NBUCKETS && duration_s > buckets[b])
            b++;
        if (b < NBUCKETS)
            e->bucket[b]++;
        e->observed++;
        e->sum += duration_s;
    }
    pthread_mutex_unlock(&m.mu);
}

void hutch_metrics_executor(const char *executor)
{
    pthread_mutex_lock(&m.mu);
    exec_slot(executor);
    pthread_mutex_unlock(&m.mu);
}

void hutch_metrics_tool_call(const char *server, const char *outcome)
{
    size_t o = NCALL_OUTCOMES - 1; /* "other" */

    for (size_t i = 0; outcome && i < NCALL_OUTCOMES - 1; i++)
        if (strcmp(outcome, call_outcomes[i]) == 0)
            o = i;
    pthread_mutex_lock(&m.mu);
    server_slot(server)->count[o]++;
    pthread_mutex_unlock(&m.mu);
}

void hutch_metrics_tool_thread(int loop)
{
    __atomic_add_fetch(&tool_threads[loop != 0], 1, __ATOMIC_RELAXED);
}

void hutch_metrics_denial(enum hutch_metrics_denial what, int rate_limit)
{
    pthread_mutex_lock(&m.mu);
    m.denials[what == HUTCH_DENIAL_TOOL_CALL][rate_limit != 0]++;
    pthread_mutex_unlock(&m.mu);
}

void hutch_metrics_egress(unsigned outcome, const char *name, uint64_t bytes)
{
    if (outcome >= EGRESS_OUTCOMES)
        return;
    pthread_mutex_lock(&m.mu);
    m.egress.name[outcome] = name;
    m.egress.count[outcome]++;
    m.egress.bytes += bytes;
    pthread_mutex_unlock(&m.mu);
}

void hutch_metrics_sandbox(int delta)
{
    __atomic_add_fetch(&sandboxes_alive, delta, __ATOMIC_RELAXED);
}

void hutch_metrics_http(enum hutch_metrics_http what, uint64_t n)
{
    if ((unsigned)what < HUTCH_HTTP_EVENT_COUNT)
        __atomic_add_fetch(&http_events[what], n, __ATOMIC_RELAXED);
}

/* --- rendering -------------------------------------------------------------- */

/* A label value as the text format wants it: \\, \" and \n escaped. */
static int label(struct hutch_buf *b, const char *v)
{
    int r = 0;
    for (; *v && r == 0; v++) {
        if (*v == '\\')
            r = hutch_buf_appends(b, "\\\\");
        else if (*v == '"')
            r = hutch_buf_appends(b, "\\\"");
        else if (*v == '\n')
            r = hutch_buf_appends(b, "\\n");
        else
            r = hutch_buf_append(b, v, 1);
    }
    return r;
}

static int family(struct hutch_buf *b, const char *name, const char *type,
                  const char *help)
{
    return hutch_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{k1="v1",k2="v2"} value: labels as NULL-terminated key, value pairs. */
static int sample(struct hutch_buf *b, const char *name, const char *const *kv,
                  double value)
{
    int r = hutch_buf_appends(b, name);

    for (size_t i = 0; r == 0 && kv && kv[i]; i += 2) {
        r = hutch_buf_appendf(b, "%s%s=\"", i ? "," : "{", kv[i]);
        if (r == 0)
            r = label(b, kv[i + 1]);
        if (r == 0)
            r = hutch_buf_appends(b, "\"");
    }
    if (r == 0 && kv && kv[0])
        r = hutch_buf_appends(b, "}");
    if (r < 0)
        return r;
    if (isinf(value))
        return hutch_buf_appends(b, value > 0 ? " +Inf\n" : " -Inf\n");
    if (fabs(value) < 1e15 && value == (double)(int64_t)value)
        return hutch_buf_appendf(b, " %lld\n", (long long)value);
    return hutch_buf_appendf(b, " %.17g\n", value);
}

/* A copy of the counters, so that the scrape formats without the lock. */
struct snapshot {
    struct exec_series exec[HUTCH_METRICS_MAX_EXECUTORS];
    size_t nexec;
    struct server_series server[HUTCH_METRICS_MAX_SERVERS];
    size_t nserver;
    uint64_t denials[2][2];
    struct egress_series egress;
};

static int render_executions(struct hutch_buf *b, const struct snapshot *s)
{
    char le[32];
    int r;

    r = family(b, "hutch_executions_total", "counter",
               "Executions (execute_code, hutch run) by executor and outcome.");
    for (size_t i = 0; r == 0 && i < s->nexec; i++)
        for (size_t o = 0; r == 0 && o < HUTCH_OUTCOME_COUNT; o++) {
            const char *kv[] = {"executor", s->exec[i].name, "outcome",
                                outcome_names[o], NULL};
            r = sample(b, "hutch_executions_total", kv, (double)s->exec[i].count[o]);
        }
    if (r == 0)
        r = family(b, "hutch_execution_duration_seconds", "histogram",
                   "Time from an execution's arrival to its result, by executor.");
    for (size_t i = 0; r == 0 && i < s->nexec; i++) {
        const struct exec_series *e = &s->exec[i];
        uint64_t cum = 0;
        if (strcmp(e->name, "none") == 0)
            continue; /* never observed */
        for (size_t k = 0; r == 0 && k <= NBUCKETS; k++) {
            const char *kv[] = {"executor", e->name, "le", le, NULL};
            if (k < NBUCKETS) {
                cum += e->bucket[k];
                snprintf(le, sizeof(le), "%g", buckets[k]);
            } else {
                cum = e->observed;
                snprintf(le, sizeof(le), "+Inf");
            }
            r = sample(b, "hutch_execution_duration_seconds_bucket", kv, (double)cum);
        }
        {
            const char *kv[] = {"executor", e->name, NULL};
            if (r == 0)
                r = sample(b, "hutch_execution_duration_seconds_sum", kv, e->sum);
            if (r == 0)
                r = sample(b, "hutch_execution_duration_seconds_count", kv,
                           (double)e->observed);
        }
    }
    return r;
}

static int render_calls(struct hutch_buf *b, const struct snapshot *s)
{
    static const char *const what[2] = {"execution", "tool_call"};
    static const char *const why[2] = {"policy", "rate_limit"};
    int r = family(b, "hutch_tool_calls_total", "counter",
                   "Tool calls from sandboxes by upstream server and outcome "
                   "(server \"\": the call named no known tool).");

    for (size_t i = 0; r == 0 && i < s->nserver; i++)
        for (size_t o = 0; r == 0 && o < NCALL_OUTCOMES; o++) {
            const char *kv[] = {"server", s->server[i].name, "outcome",
                                call_outcomes[o], NULL};
            r = sample(b, "hutch_tool_calls_total", kv, (double)s->server[i].count[o]);
        }
    if (r == 0)
        r = family(b, "hutch_tool_call_threads_total", "counter",
                   "Tool calls from sandboxes by the thread that handled them: the "
                   "execution's loop (sent from it, answered by the upstream's reader) "
                   "or a worker (HTTP and 2026-era upstreams, questions to the user, "
                   "servers still starting).");
    for (int t = 0; r == 0 && t < 2; t++) {
        const char *kv[] = {"thread", t ? "loop" : "worker", NULL};
        r = sample(b, "hutch_tool_call_threads_total", kv,
                   (double)__atomic_load_n(&tool_threads[t], __ATOMIC_RELAXED));
    }
    if (r == 0)
        r = family(b, "hutch_policy_denials_total", "counter",
                   "Policy decisions that denied, as audited, by what was asked for "
                   "and why.");
    for (int k = 0; r == 0 && k < 2; k++)
        for (int y = 0; r == 0 && y < 2; y++) {
            const char *kv[] = {"kind", what[k], "reason", why[y], NULL};
            r = sample(b, "hutch_policy_denials_total", kv, (double)s->denials[k][y]);
        }
    if (r == 0)
        r = family(b, "hutch_egress_connections_total", "counter",
                   "Connections programs made through the egress proxy, by outcome "
                   "(ok, or why refused or cut).");
    for (int o = 0; r == 0 && o < EGRESS_OUTCOMES; o++)
        if (s->egress.name[o]) {
            const char *kv[] = {"outcome", s->egress.name[o], NULL};
            r = sample(b, "hutch_egress_connections_total", kv,
                       (double)s->egress.count[o]);
        }
    if (r == 0)
        r = family(b, "hutch_egress_bytes_total", "counter",
                   "Bytes the egress proxy relayed, both directions.");
    if (r == 0)
        r = sample(b, "hutch_egress_bytes_total", NULL, (double)s->egress.bytes);
    return r;
}

/* Pool classes with the same labels (they differ in options or CPUs) are
 * summed: one series each.  v: size, target, idle, starting, hits, misses,
 * failures, in pool_names' order. */
#define POOL_SERIES 7
struct pool_row {
    char executor[HUTCH_MAX_EXECUTOR_NAME + 1], language[16], memory[24], pids[24];
    double v[POOL_SERIES];
};

static const char *const pool_names[POOL_SERIES][3] = {
    {"hutch_pool_size", "gauge", "Warm sandboxes a pool class is configured to keep."},
    {"hutch_pool_target", "gauge",
     "Warm sandboxes a pool class keeps now: its size, and what demand added."},
    {"hutch_pool_idle", "gauge", "Warm sandboxes waiting for a job."},
    {"hutch_pool_starting", "gauge", "Warm sandboxes being started."},
    {"hutch_pool_hits_total", "counter", "Jobs that got a warm sandbox."},
    {"hutch_pool_misses_total", "counter", "Jobs of a pooled class that started cold."},
    {"hutch_pool_failures_total", "counter", "Warm sandboxes that failed to start."},
};

static int render_pools(struct hutch_buf *b, const struct hutch_metrics_source *src)
{
    struct pool_row rows[HUTCH_POOL_MAX_CLASSES];
    struct hutch_pool_status *st = NULL;
    size_t n = 0, nst = 0;
    int r = 0;

    if (src && src->pool_status(src->ctx, &st, &nst) < 0)
        return -ENOMEM;
    for (size_t k = 0; k < nst; k++) {
        const struct hutch_pool_status *c = &st[k];
        struct pool_row row = {.v = {c->size, c->target, c->idle, c->starting,
                                     (double)c->hits, (double)c->misses,
                                     (double)c->failures}};
        size_t i;
        snprintf(row.executor, sizeof(row.executor), "%s", c->executor);
        snprintf(row.language, sizeof(row.language), "%s", c->language);
        snprintf(row.memory, sizeof(row.memory), "%llu",
                 (unsigned long long)c->memory_mb);
        snprintf(row.pids, sizeof(row.pids), "%lu", (unsigned long)c->pids);
        for (i = 0; i < n; i++)
            if (!strcmp(rows[i].executor, row.executor) &&
                !strcmp(rows[i].language, row.language) &&
                !strcmp(rows[i].memory, row.memory) && !strcmp(rows[i].pids, row.pids))
                break;
        if (i < n) {
            for (int f = 0; f < POOL_SERIES; f++)
                rows[i].v[f] += row.v[f];
        } else if (n < HUTCH_POOL_MAX_CLASSES) {
            rows[n++] = row;
        }
    }
    free(st);
    for (int f = 0; r == 0 && f < POOL_SERIES; f++) {
        r = family(b, pool_names[f][0], pool_names[f][1], pool_names[f][2]);
        for (size_t i = 0; r == 0 && i < n; i++) {
            const char *kv[] = {"executor",       rows[i].executor, "language",
                                rows[i].language, "memory_mb",      rows[i].memory,
                                "pids",           rows[i].pids,     NULL};
            r = sample(b, pool_names[f][0], kv, rows[i].v[f]);
        }
    }
    return r;
}

static int render_http(struct hutch_buf *b)
{
    static const struct {
        const char *family, *reason;
    } names[HUTCH_HTTP_EVENT_COUNT] = {
        [HUTCH_HTTP_CONN_HEAD_TIMEOUT] = {"hutch_http_connections_closed_total",
                                          "head_timeout"},
        [HUTCH_HTTP_CONN_ROOM] = {"hutch_http_connections_closed_total", "room"},
        [HUTCH_HTTP_SESSION_IDLE] = {"hutch_http_sessions_ended_total", "idle"},
        [HUTCH_HTTP_SESSION_SHARE] = {"hutch_http_sessions_ended_total", "share"},
        [HUTCH_HTTP_SESSION_FULL] = {"hutch_http_sessions_ended_total", "table_full"},
        [HUTCH_HTTP_SESSION_CLIENT] = {"hutch_http_sessions_ended_total", "client"},
    };
    int r = family(b, "hutch_http_connections_closed_total", "counter",
                   "HTTP connections hutch closed before they authenticated: no "
                   "complete request head in time, or to make room for newer ones.");

    for (int i = 0; r == 0 && i < HUTCH_HTTP_EVENT_COUNT; i++) {
        const char *kv[] = {"reason", names[i].reason, NULL};
        if (i == HUTCH_HTTP_SESSION_IDLE)
            r = family(b, "hutch_http_sessions_ended_total", "counter",
                       "2025-era MCP sessions ended: idle too long, for a newer "
                       "one of the same principal at its share, for another "
                       "principal in a full table, or by their client.");
        if (r == 0)
            r = sample(b, names[i].family, kv,
                       (double)__atomic_load_n(&http_events[i], __ATOMIC_RELAXED));
    }
    return r;
}

static int render_upstreams(struct hutch_buf *b, struct hutch_upstreams *u)
{
    struct hutch_upstream_status *st = NULL;
    size_t n = 0;
    int r;

    if (hutch_upstreams_snapshot(u, &st, &n) < 0)
        return -ENOMEM;
    r = family(b, "hutch_upstream_state", "gauge",
               "1 for the state each upstream MCP server is in, 0 for the others.");
    /* disabled and skipped too: a server the file names but hutch does not
     * run is seen as such, not as one in no state at all. */
    for (size_t i = 0; i < n; i++)
        for (int k = 0; r == 0 && k < HUTCH_UPSTREAM_STATE_COUNT; k++) {
            const char *kv[] = {"server", st[i].server, "state",
                                hutch_upstream_state_name(k), NULL};
            r = sample(b, "hutch_upstream_state", kv, (int)st[i].state == k);
        }
    if (r == 0)
        r = family(b, "hutch_upstream_tools", "gauge",
                   "Tools each upstream MCP server lists.");
    for (size_t i = 0; r == 0 && i < n; i++) {
        const char *kv[] = {"server", st[i].server, NULL};
        r = sample(b, "hutch_upstream_tools", kv, (double)st[i].tools);
    }
    free(st);
    return r;
}

int hutch_metrics_render(const struct hutch_metrics_source *src,
                         struct hutch_upstreams *u, struct hutch_buf *out)
{
    static struct snapshot s; /* large: not on a connection thread's stack */
    static pthread_mutex_t snap_mu = PTHREAD_MUTEX_INITIALIZER;
    const char *version[] = {"version", PACKAGE_VERSION, NULL};
    int r;

    pthread_mutex_lock(&snap_mu);
    pthread_mutex_lock(&m.mu);
    memcpy(s.exec, m.exec, sizeof(s.exec));
    s.nexec = m.nexec;
    memcpy(s.server, m.server, sizeof(s.server));
    s.nserver = m.nserver;
    memcpy(s.denials, m.denials, sizeof(s.denials));
    s.egress = m.egress;
    pthread_mutex_unlock(&m.mu);

    r = family(out, "hutch_build_info", "gauge", "Always 1; the version as a label.");
    if (r == 0)
        r = sample(out, "hutch_build_info", version, 1);
    if (r == 0)
        r = family(out, "hutch_start_time_seconds", "gauge",
                   "When this hutch started, in seconds since the epoch.");
    if (r == 0)
        r = sample(out, "hutch_start_time_seconds", NULL, start_time);
    if (r == 0)
        r = render_executions(out, &s);
    if (r == 0)
        r = render_calls(out, &s);
    pthread_mutex_unlock(&snap_mu);
    if (r == 0)
        r = family(out, "hutch_sandboxes_alive", "gauge",
                   "Sandboxes started and not yet destroyed (warm ones included).");
    if (r == 0)
        r = sample(out, "hutch_sandboxes_alive", NULL,
                   (double)__atomic_load_n(&sandboxes_alive, __ATOMIC_RELAXED));
    if (r == 0)
        r = render_pools(out, src);
    if (r == 0)
        r = render_upstreams(out, u);
    if (r == 0)
        r = render_http(out);
    return r;
}

/* --- readiness ------------------------------------------------------------- */

cJSON *hutch_metrics_ready(const struct hutch_metrics_source *src,
                           struct hutch_upstreams *u, int detail, int *ready)
{
    struct hutch_upstream_status *ups = NULL;
    struct hutch_pool_status *pools = NULL;
    size_t nups = 0, npools = 0;
    cJSON *o = cJSON_CreateObject();
    int ok;

    if (!o)
        return NULL;
    ok = src ? src->ready(src->ctx, o, detail) : 0;
    if (hutch_upstreams_snapshot(u, &ups, &nups) < 0 ||
        (src && src->pool_status(src->ctx, &pools, &npools) < 0) ||
        !cJSON_AddItemToObject(o, "upstreams",
                               hutch_upstream_status_json(ups, nups, detail)) ||
        !cJSON_AddItemToObject(o, "pools",
                               hutch_pool_status_json(pools, npools, detail)) ||
        !cJSON_AddBoolToObject(o, "ready", ok)) {
        cJSON_Delete(o);
        o = NULL;
    }
    free(ups);
    free(pools);
    *ready = ok;
    return o;
}
