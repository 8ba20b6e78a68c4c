/* govern.c — applying the policy (see govern.h).
 *
 * The current policy is a pointer swapped under a mutex; each execution
 * takes a reference when it starts and keeps deciding its tool calls with
 * that policy to its end, so a reload never lets a half-loaded policy or a
 * mix of two decide anything.  The plan of an execution (the executor
 * rule and the limits rule, govern.h) is resolved here and nowhere else,
 * from that same policy. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "caps.h"
#include "catalog.h"
#include "discover.h"
#include "egress.h"
#include "govern.h"
#include "log.h"
#include "metrics.h"
#include "path.h"
#include "rate.h"
#include "result.h"
#include "util.h"

struct hutch_gov {
    pthread_mutex_t mu;
    struct hutch_policy *cur;
    char *file;    /* NULL: built-in default */
    char *flavour; /* the operator's --flavour, or NULL */
    struct hutch_audit *audit;
    struct hutch_rate *rate;
    uint64_t seq;
    struct hutch_gov_reload last; /* under mu */
};

int hutch_gov_new(const char *policy_file, const char *audit_file,
                  struct hutch_gov **out, struct hutch_err *err)
{
    struct hutch_gov *g = calloc(1, sizeof(*g));
    int r;
    if (!g)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&g->mu, NULL);
    if (policy_file && !(g->file = strdup(policy_file))) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    r = g->file ? hutch_policy_load(g->file, &g->cur, err)
                : hutch_policy_default(&g->cur, err);
    if (r < 0)
        goto fail;
    r = hutch_audit_open(audit_file, &g->audit, err);
    if (r < 0)
        goto fail;
    g->rate = hutch_rate_new();
    if (!g->rate) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    *out = g;
    return 0;
fail:
    hutch_gov_free(g);
    return r;
}

void hutch_gov_free(struct hutch_gov *g)
{
    if (!g)
        return;
    hutch_policy_unref(g->cur);
    hutch_audit_close(g->audit);
    hutch_rate_free(g->rate);
    free(g->file);
    free(g->flavour);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

int hutch_gov_set_flavour(struct hutch_gov *g, const char *flavour,
                          struct hutch_err *err)
{
    int r;
    if (!flavour)
        return 0;
    r = hutch_policy_apply_flavour(g->cur, flavour, err);
    if (r < 0)
        return r;
    free(g->flavour);
    g->flavour = strdup(flavour);
    return g->flavour ? 0 : hutch_err_set(err, -ENOMEM, "out of memory");
}

/* Under g->mu. */
static void note_reload(struct hutch_gov *g, int ok, const char *why)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    g->last.done = 1;
    g->last.ok = ok;
    strftime(g->last.time, sizeof(g->last.time), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(g->last.error, sizeof(g->last.error), "%s", why ? why : "");
}

int hutch_gov_reload(struct hutch_gov *g, struct hutch_err *err)
{
    struct hutch_policy *p = NULL, *old;
    int r;

    hutch_audit_reopen(g->audit);
    if (!g->file) {
        pthread_mutex_lock(&g->mu);
        note_reload(g, 1, NULL);
        pthread_mutex_unlock(&g->mu);
        hutch_audit_log(g->audit, "policy_reload", NULL, NULL, NULL, "kept",
                        "built-in policy", -1, NULL);
        return 0;
    }
    r = hutch_policy_load(g->file, &p, err);
    if (r == 0 && (r = hutch_policy_apply_flavour(p, g->flavour, err)) < 0) {
        hutch_policy_unref(p);
        p = NULL;
    }
    if (r < 0) {
        pthread_mutex_lock(&g->mu);
        note_reload(g, 0, err->msg);
        pthread_mutex_unlock(&g->mu);
        hutch_audit_log(g->audit, "policy_reload", NULL, NULL, NULL, "failed", err->msg,
                        -1, NULL);
        return r;
    }
    pthread_mutex_lock(&g->mu);
    old = g->cur;
    g->cur = p;
    note_reload(g, 1, NULL);
    pthread_mutex_unlock(&g->mu);
    hutch_policy_unref(old);
    hutch_audit_log(g->audit, "policy_reload", NULL, NULL, NULL, "loaded", g->file, -1,
                    NULL);
    return 0;
}

struct hutch_policy *hutch_gov_policy(struct hutch_gov *g)
{
    struct hutch_policy *p;
    pthread_mutex_lock(&g->mu);
    p = hutch_policy_ref(g->cur);
    pthread_mutex_unlock(&g->mu);
    return p;
}

struct hutch_audit *hutch_gov_audit(struct hutch_gov *g)
{
    return g->audit;
}

void hutch_gov_last_reload(struct hutch_gov *g, struct hutch_gov_reload *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->last;
    pthread_mutex_unlock(&g->mu);
}

static const char *const plan_langs[] = {"python", "javascript"};

/* How well an executor isolates; -1: not known to hutch. */
static int strength(const char *name)
{
    static const char *const order[] = {"local", "docker", "gvisor"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, order[i]) == 0)
            return i;
    return -1;
}

/* The lowest of the ceilings that are set (non-zero), else `dflt`. */
static uint64_t lowest(uint64_t dflt, uint64_t a, uint64_t b)
{
    uint64_t v = 0, in[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (in[i] && (!v || in[i] < v))
            v = in[i];
    return v ? v : dflt;
}

/* The executor rule (govern.h) into plan->executor, or plan->rc and
 * plan->error. */
static void plan_executor(struct hutch_plan *plan, const struct hutch_policy *p,
                          const struct hutch_policy_decision *d,
                          const struct hutch_plan_operator *op)
{
    const char *pol =
        hutch_policy_executor_explicit(p) ? hutch_policy_executor(p) : NULL;
    const char *flag = op->executor && *op->executor ? op->executor : NULL;
    const char *from = op->executor_from ? op->executor_from : "--executor";
    const char *base;

    if (flag && pol && strcmp(flag, pol) != 0) {
        plan->rc = -EINVAL;
        snprintf(plan->error, sizeof(plan->error),
                 "%s asks for executor \"%s\" but the policy %s says executor = "
                 "\"%s\": make them agree (or drop one)",
                 from, flag, hutch_policy_source(p), pol);
        return;
    }
    base = flag ? flag : pol ? pol : "local";
    snprintf(plan->executor, sizeof(plan->executor), "%s", base);
    if (!d || !d->executor_from_hook || strcmp(d->executor, base) == 0)
        return; /* the hook picked nothing of its own */
    /* Only hutch's own executors have a known strength: a pick away from
     * or to any other could be weaker, so it is refused. */
    if (strength(base) < 0 || strength(d->executor) < 0) {
        plan->rc = -EPERM;
        snprintf(plan->error, sizeof(plan->error),
                 "the policy's on_execute picked executor \"%s\" instead of \"%s\" "
                 "(%s), but \"%s\" is not one of hutch's executors (local, docker, "
                 "gvisor), so hutch cannot tell whether it isolates as well; a hook "
                 "may only pick another of hutch's executors that isolates at least "
                 "as well",
                 d->executor, base, flag ? from : "the policy's executor",
                 strength(base) < 0 ? base : d->executor);
    } else if (strength(d->executor) < strength(base)) {
        plan->rc = -EPERM;
        snprintf(plan->error, sizeof(plan->error),
                 "the policy's on_execute picked executor \"%s\", which does not "
                 "isolate as well as \"%s\" (%s); hutch never runs code on a weaker "
                 "executor than it was asked for",
                 d->executor, base, flag ? from : "the policy's executor");
    } else {
        snprintf(plan->executor, sizeof(plan->executor), "%s", d->executor);
        return;
    }
    plan->executor[0] = '\0';
}

void hutch_plan_resolve(struct hutch_policy *p, const struct hutch_policy_decision *d,
                        const char *principal, const struct hutch_plan_operator *op,
                        struct hutch_plan *plan)
{
    const struct hutch_policy_limits *lim = d ? &d->limits : hutch_policy_limits(p);
    int from_file = !hutch_policy_builtin(p);
    int is_default;

    memset(plan, 0, sizeof(*plan));
    plan->policy = hutch_policy_ref(p);
    plan->source = hutch_policy_source(p);
    plan_executor(plan, p, d, op);
    hutch_policy_flavour(p, plan->executor, plan->flavour, sizeof(plan->flavour));

    plan->cls.struct_size = sizeof(plan->cls);
    plan->cls.memory_bytes =
        lowest(HUTCH_DEFAULT_MEMORY_MB, op->memory_mb, from_file ? lim->memory_mb : 0)
        << 20;
    plan->cls.pids_max =
        (uint32_t)lowest(HUTCH_DEFAULT_PIDS, op->pids, from_file ? lim->pids : 0);
    plan->cls.cpu_millis = lim->cpus_milli;
    plan->cls.work_bytes = (uint64_t)HUTCH_DEFAULT_WORK_MB << 20;
    plan->cls.tmp_bytes = (uint64_t)HUTCH_DEFAULT_TMP_MB << 20;
    plan->cls.open_files = HUTCH_DEFAULT_OPEN_FILES;
    plan->cls.options = hutch_policy_executor_options(p, plan->executor);

    /* Warm pools: --pool overrides the policy for the executor it is for,
     * which without either keeps HUTCH_POOL_DEFAULT_SIZE; another executor
     * keeps what the policy says, else none. */
    is_default = !op->pool_executor || strcmp(op->pool_executor, plan->executor) == 0;
    for (int l = 0; l < 2; l++) {
        int n = hutch_policy_pool_size(p, plan->executor, plan_langs[l]);
        if (is_default && op->pool_size[l] >= 0)
            n = op->pool_size[l];
        else if (n < 0)
            n = is_default ? HUTCH_POOL_DEFAULT_SIZE : 0;
        plan->pool_size[l] = plan->rc < 0 ? 0 : n;
    }

    plan->timeout_ms = lowest(HUTCH_DEFAULT_TIMEOUT_MS, op->timeout_ms,
                              from_file ? lim->timeout_ms : 0);
    plan->output_max = lowest(HUTCH_OUTPUT_MAX_BYTES, op->output_bytes,
                              !from_file || lim->output_bytes >= HUTCH_OUTPUT_MAX_BYTES
                                  ? 0
                                  : lim->output_bytes);
    plan->output_default = op->output_default ? op->output_default : plan->output_max;
    if (plan->output_default > plan->output_max)
        plan->output_default = plan->output_max;
    plan->files_bytes = lim->files_bytes;
    plan->workspaces = *hutch_policy_workspaces(p);
    plan->egress = d && d->egress_off
                       ? NULL
                       : hutch_policy_egress_of(p, principal ? principal : "local");

    hutch_policy_concurrency(p, principal ? principal : "local", &plan->concurrency);
    plan->has_principals = hutch_policy_has_principals(p);
    plan->nprincipals = hutch_policy_nprincipals(p);
}

void hutch_plan_release(struct hutch_plan *plan)
{
    hutch_policy_unref(plan->policy);
    plan->policy = NULL;
    plan->source = NULL;
    plan->cls.options = NULL;
}

void hutch_gov_plan(struct hutch_gov *g, const struct hutch_plan_operator *op,
                    struct hutch_plan *plan)
{
    struct hutch_policy *p = hutch_gov_policy(g);
    hutch_plan_resolve(p, NULL, NULL, op, plan);
    hutch_policy_unref(p);
}

int hutch_gov_plan_current(struct hutch_gov *g, const struct hutch_plan *plan)
{
    int cur;
    pthread_mutex_lock(&g->mu);
    cur = plan->policy == g->cur;
    pthread_mutex_unlock(&g->mu);
    return cur;
}

int hutch_gov_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                    struct hutch_bridge *bridge, const char *principal,
                    const char *language, size_t code_bytes, size_t nfiles,
                    const char *workspace, const struct hutch_plan_operator *op,
                    char *reason, size_t reason_len)
{
    struct hutch_policy_exec req = {0};
    struct hutch_policy_decision d;
    uint64_t retry = 0, t0 = hutch_now_us();
    int r;

    memset(x, 0, sizeof(*x));
    x->g = g;
    x->bridge = bridge;
    x->t0_ms = hutch_now_ms();
    snprintf(x->principal, sizeof(x->principal), "%s", principal ? principal : "local");
    snprintf(x->ws, sizeof(x->ws), "%s", workspace ? workspace : "");
    pthread_mutex_lock(&g->mu);
    snprintf(x->execution, sizeof(x->execution), "x%llu-%llu",
             (unsigned long long)(hutch_now_ms() % 100000000ull),
             (unsigned long long)++g->seq);
    x->policy = hutch_policy_ref(g->cur);
    pthread_mutex_unlock(&g->mu);

    r = hutch_rate_take(g->rate, x->principal, "execution",
                        hutch_policy_rate(x->policy)->executions_per_minute,
                        hutch_now_ms(), &retry);
    if (r < 0) {
        snprintf(reason, reason_len,
                 "rate limit: more than %u executions per minute for principal \"%s\"; "
                 "retry in %llu ms",
                 hutch_policy_rate(x->policy)->executions_per_minute, x->principal,
                 (unsigned long long)retry);
        r = -EAGAIN;
        goto deny;
    }
    req.principal = x->principal;
    req.execution = x->execution;
    req.language = language;
    req.code_bytes = code_bytes;
    req.nfiles = nfiles;
    req.workspace = workspace;
    r = hutch_policy_check_execute(x->policy, &req, &d, reason, reason_len);
    if (r < 0) {
        r = -EPERM;
        goto deny;
    }
    hutch_plan_resolve(x->policy, &d, x->principal, op, &x->plan);
    hutch_audit_log(g->audit, "execute_decision", x->principal, x->execution, NULL,
                    "allow", NULL, (double)(hutch_now_us() - t0) / 1000.0, NULL);
    return 0;
deny:
    hutch_audit_log(g->audit, "execute_decision", x->principal, x->execution, NULL,
                    "deny", reason, (double)(hutch_now_us() - t0) / 1000.0, NULL);
    hutch_metrics_denial(HUTCH_DENIAL_EXECUTION, r == -EAGAIN);
    hutch_policy_unref(x->policy);
    x->policy = NULL;
    return r;
}

void hutch_gov_direct_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                            struct hutch_bridge *bridge, const char *principal)
{
    memset(x, 0, sizeof(*x));
    x->g = g;
    x->bridge = bridge;
    x->t0_ms = hutch_now_ms();
    snprintf(x->principal, sizeof(x->principal), "%s", principal ? principal : "local");
    pthread_mutex_lock(&g->mu);
    snprintf(x->execution, sizeof(x->execution), "d%llu-%llu",
             (unsigned long long)(hutch_now_ms() % 100000000ull),
             (unsigned long long)++g->seq);
    x->policy = hutch_policy_ref(g->cur);
    pthread_mutex_unlock(&g->mu);
}

void hutch_gov_direct_end(struct hutch_gov_exec *x)
{
    hutch_plan_release(&x->plan);
    hutch_policy_unref(x->policy);
    x->policy = NULL;
}

void hutch_gov_end(struct hutch_gov_exec *x, const struct hutch_exec_result *res,
                   const char *error)
{
    cJSON *extra = cJSON_CreateObject();
    if (x->executor[0]) {
        cJSON_AddStringToObject(extra, "executor", x->executor);
        cJSON_AddBoolToObject(extra, "warm", x->warm);
    }
    if (x->ws[0])
        cJSON_AddStringToObject(extra, "workspace", x->ws);
    if (hutch_gov_tainted(x))
        cJSON_AddStringToObject(extra, "tainted_by", x->taint);
    if (res) {
        /* The per-call trace, which results carry only when asked. */
        hutch_result_trace_audit(x->g->audit, x->principal, x->execution,
                                 &res->tool_calls);
        cJSON_AddNumberToObject(extra, "exit_code", res->exit_code);
        cJSON_AddBoolToObject(extra, "timed_out", res->timed_out);
        cJSON_AddBoolToObject(extra, "oom", res->oom);
        cJSON_AddNumberToObject(extra, "tool_calls", (double)res->tool_calls.n);
    }
    hutch_audit_log(x->g->audit, "execution", x->principal, x->execution, NULL,
                    error ? "failed" : "done", error,
                    (double)(hutch_now_ms() - x->t0_ms), extra);
    cJSON_Delete(extra);
    hutch_plan_release(&x->plan);
    hutch_policy_unref(x->policy);
    x->policy = NULL;
}

void hutch_gov_egress_record(void *arg, const struct hutch_egress_record *rec)
{
    struct hutch_gov_exec *x = arg;
    char where[HUTCH_EGRESS_MAX_HOST + 16];
    int ok = rec->outcome == HUTCH_EGRESS_OK;
    cJSON *extra = cJSON_CreateObject();

    snprintf(where, sizeof(where), "%s:%u", rec->host[0] ? rec->host : "?", rec->port);
    cJSON_AddStringToObject(extra, "outcome", hutch_egress_outcome_name(rec->outcome));
    cJSON_AddStringToObject(extra, "method", rec->method);
    cJSON_AddStringToObject(extra, "host", rec->host);
    cJSON_AddNumberToObject(extra, "port", rec->port);
    cJSON_AddStringToObject(extra, "address", rec->address);
    cJSON_AddNumberToObject(extra, "bytes_up", (double)rec->bytes_up);
    cJSON_AddNumberToObject(extra, "bytes_down", (double)rec->bytes_down);
    if (rec->secret) /* the header's name: never its value */
        cJSON_AddStringToObject(extra, "secret", rec->secret);
    hutch_audit_log(x->g->audit, "egress", x->principal, x->execution, where,
                    ok ? "allow" : "deny", ok ? NULL : rec->reason, 0, extra);
    cJSON_Delete(extra);
    hutch_metrics_egress((unsigned)rec->outcome,
                         hutch_egress_outcome_name(rec->outcome),
                         rec->bytes_up + rec->bytes_down);
}

void hutch_gov_taint(struct hutch_gov_exec *x, const char *source)
{
    if (atomic_exchange(&x->taint_claim, 1))
        return;
    snprintf(x->taint, sizeof(x->taint), "%s", source);
    atomic_store_explicit(&x->tainted, 1, memory_order_release);
}

const char *hutch_gov_tainted(struct hutch_gov_exec *x)
{
    return atomic_load_explicit(&x->tainted, memory_order_acquire) ? x->taint : NULL;
}

/* The taint rule (policy.h) on a call, with what the audit record says
 * of it. */
static int taint_rule(struct hutch_gov_exec *x, const struct hutch_catalog_entry *e,
                      int source, int r, char *reason, size_t reason_len, cJSON *extra)
{
    const char *src = hutch_gov_tainted(x), *sink = NULL;

    if (source)
        cJSON_AddBoolToObject(extra, "taint_source", 1);
    r = hutch_policy_check_taint(x->policy, e->server, e->tool, src, r, reason,
                                 reason_len, &sink);
    if (sink) {
        cJSON_AddStringToObject(extra, "tainted_by", src);
        cJSON_AddStringToObject(extra, "taint_sink", sink);
    }
    return r;
}

static int secret(const void *arg, const char *key)
{
    return hutch_policy_is_secret(arg, key);
}

/* The policy asked (`reason` holds its question): the user decides through
 * x->ask.  0 approved, -EPERM otherwise with `reason` saying why; the
 * question, the answer and how long it took go into the audit record
 * (`extra`). */
static int ask_user(struct hutch_gov_exec *x, const char *tool, const cJSON *args,
                    int timeout_ms, char *reason, size_t reason_len, cJSON *extra)
{
    static const char *const names[] = {"approve", "decline", "cancel", "timeout"};
    char question[512], why[256] = "";
    unsigned ms = timeout_ms > 0 ? (unsigned)timeout_ms : HUTCH_APPROVAL_DEFAULT_MS;
    uint64_t t0 = hutch_now_ms();
    int a;

    if (ms > HUTCH_APPROVAL_MAX_MS)
        ms = HUTCH_APPROVAL_MAX_MS;
    snprintf(question, sizeof(question), "%s", reason);
    cJSON_AddStringToObject(extra, "question", question);
    if (!x->ask) {
        cJSON_AddStringToObject(extra, "answer", "none");
        snprintf(reason, reason_len,
                 "the policy asks the user before %s (\"%s\"), and nobody can be "
                 "asked: the client does not support elicitation",
                 tool, question);
        return -EPERM;
    }
    a = x->ask(x->ask_arg, tool, question, args, ms, why, sizeof(why));
    cJSON_AddStringToObject(extra, "answer",
                            a >= 0 && a <= HUTCH_ANSWER_TIMEOUT ? names[a] : "none");
    cJSON_AddNumberToObject(extra, "answer_ms", (double)(hutch_now_ms() - t0));
    switch (a) {
    case HUTCH_ANSWER_APPROVE:
        return 0;
    case HUTCH_ANSWER_DECLINE:
        snprintf(reason, reason_len, "the user declined: %s", question);
        break;
    case HUTCH_ANSWER_CANCEL:
        snprintf(reason, reason_len, "the user dismissed the question: %s", question);
        break;
    case HUTCH_ANSWER_TIMEOUT:
        snprintf(reason, reason_len, "no answer from the user within %u s: %s",
                 ms / 1000, question);
        break;
    default:
        snprintf(reason, reason_len, "the policy asks the user before %s (\"%s\"): %s",
                 tool, question, why[0] ? why : "the user cannot be asked");
    }
    return -EPERM;
}

int hutch_gov_egress_decide(void *arg, const char *host, unsigned port, char *why,
                            size_t len)
{
    struct hutch_gov_exec *x = arg;
    char where[HUTCH_EGRESS_MAX_HOST + 16], reason[512];
    const char *src = hutch_gov_tainted(x);
    uint64_t t0 = hutch_now_us();
    int source, sink, ask, r;
    cJSON *extra, *args;

    hutch_policy_taint_egress(x->policy, &source, &sink, &ask);
    snprintf(where, sizeof(where), "%s:%u", host, port);
    r = hutch_policy_check_taint_egress(x->policy, host, port, src, reason,
                                        sizeof(reason));
    if (r != 0) {
        extra = cJSON_CreateObject();
        cJSON_AddStringToObject(extra, "tainted_by", src);
        cJSON_AddStringToObject(extra, "taint_sink", "egress");
        if (r == HUTCH_POLICY_ASK) {
            args = cJSON_CreateObject();
            cJSON_AddStringToObject(args, "host", host);
            cJSON_AddNumberToObject(args, "port", port);
            r = ask_user(x, "egress", args, 0, reason, sizeof(reason), extra);
            cJSON_Delete(args);
        }
        hutch_audit_log(x->g->audit, "egress_decision", x->principal, x->execution,
                        where, r == 0 ? "allow" : "deny", r == 0 ? NULL : reason,
                        (double)(hutch_now_us() - t0) / 1000.0, extra);
        cJSON_Delete(extra);
        if (r < 0) {
            hutch_metrics_denial(HUTCH_DENIAL_TOOL_CALL, 0);
            snprintf(why, len, "%s", reason);
            return -EPERM;
        }
    }
    if (source) {
        char what[sizeof(x->taint)];
        snprintf(what, sizeof(what), "egress to %s", where);
        hutch_gov_taint(x, what);
    }
    return 0;
}

/* A tool the catalog lacks: the bridge says why it is unknown, and the
 * nearest tool the policy offers is named (discover.c). */
static int unknown(struct hutch_gov_exec *x, const char *tool,
                   struct hutch_tool_reply *reply)
{
    int r = hutch_bridge_unknown(x->bridge, tool, reply);

    if (reply->code && !strcmp(reply->code, "unknown_tool") && reply->message) {
        void *ref;
        struct hutch_catalog *cat = hutch_bridge_catalog_get(x->bridge, &ref);
        char hint[HUTCH_MAX_QUALIFIED_NAME + 64], *m;
        hutch_discover_suggest(cat, x->policy, tool, hint, sizeof(hint));
        hutch_bridge_catalog_put(x->bridge, ref);
        size_t n = strlen(reply->message) + strlen(hint) + 1;
        if (hint[0] && (m = malloc(n))) {
            /* Before the parenthesis that says where to look. */
            char *paren = strstr(reply->message, " (use search_tools");
            int head =
                paren ? (int)(paren - reply->message) : (int)strlen(reply->message);
            snprintf(m, n, "%.*s%s%s", head, reply->message, hint,
                     reply->message + head);
            free(reply->message);
            reply->message = m;
        }
    }
    return r;
}

/* A call's decision, between deciding and concluding. */
struct verdict {
    int r;      /* 0 allow, negative deny, HUTCH_POLICY_ASK: ask the user */
    int source; /* the tool is a taint source */
    double dur; /* ms the decision took */
    char reason[512];
    cJSON *extra; /* for the audit record */
};

/* The rate limit, the policy and the taint rule on a call of e.  Never
 * blocks (the question, if any, is conclude's). */
static void decide(struct hutch_gov_exec *x, const struct hutch_catalog_entry *e,
                   const cJSON *args, struct verdict *v)
{
    struct hutch_gov *g = x->g;
    uint64_t t0 = hutch_now_us(), retry = 0;

    v->reason[0] = '\0';
    if (hutch_rate_take(g->rate, x->principal, "tool_call",
                        hutch_policy_rate(x->policy)->tool_calls_per_minute,
                        hutch_now_ms(), &retry) < 0) {
        snprintf(v->reason, sizeof(v->reason),
                 "rate limit: more than %u tool calls per minute for principal \"%s\"; "
                 "retry in %llu ms",
                 hutch_policy_rate(x->policy)->tool_calls_per_minute, x->principal,
                 (unsigned long long)retry);
        v->r = -EAGAIN;
    } else {
        v->r = hutch_policy_check_tool(x->policy, x->principal, x->execution, e->server,
                                       e->tool, args, v->reason, sizeof(v->reason));
    }
    v->extra = cJSON_CreateObject();
    /* Whether the tool is a taint source: asked once, for the audit record
     * and for the mark after the call. */
    v->source = hutch_policy_taint_source(x->policy, e->server, e->tool) != NULL;
    v->r = taint_rule(x, e, v->source, v->r, v->reason, sizeof(v->reason), v->extra);
    v->dur = (double)(hutch_now_us() - t0) / 1000.0;
}

/* Asks the user when the verdict says so, audits the decision (takes
 * v->extra): 0 when the call goes ahead, else -EPERM with reply saying
 * why. */
static int conclude(struct hutch_gov_exec *x, const struct hutch_catalog_entry *e,
                    const cJSON *args, int timeout_ms, struct verdict *v,
                    struct hutch_tool_reply *reply)
{
    struct hutch_gov *g = x->g;
    int r = v->r;

    if (r == HUTCH_POLICY_ASK)
        r = ask_user(x, e->qualified, args, timeout_ms, v->reason, sizeof(v->reason),
                     v->extra);
    cJSON_AddItemToObject(v->extra, "args",
                          hutch_audit_args(g->audit, args, secret, x->policy));
    hutch_audit_log(g->audit, "tool_call", x->principal, x->execution, e->qualified,
                    r == 0 ? "allow" : "deny", r == 0 ? NULL : v->reason, v->dur,
                    v->extra);
    cJSON_Delete(v->extra);
    v->extra = NULL;
    if (r < 0) {
        hutch_metrics_denial(HUTCH_DENIAL_TOOL_CALL, r == -EAGAIN);
        reply->code = "denied";
        reply->message = strdup(v->reason[0] ? v->reason : "denied by the policy");
        reply->tool = strdup(e->qualified);
        reply->server = strdup(e->server);
        return -EPERM;
    }
    return 0;
}

/* An allowed call of e, on this thread. */
static int call(struct hutch_gov_exec *x, const struct hutch_catalog_entry *e,
                int source, const cJSON *args, int timeout_ms,
                struct hutch_tool_reply *reply)
{
    int r;

    /* The upstream may ask the user (2026 input_required): through this
     * execution's client, on this thread, for this call only. */
    hutch_upstreams_set_elicitor(&x->elicit);
    r = hutch_bridge_call(x->bridge, x->principal, e, args, timeout_ms, reply);
    hutch_upstreams_set_elicitor(NULL);
    /* Before the program sees what came back, whatever it was (an error
     * result may carry a third party's text as well). */
    if (source)
        hutch_gov_taint(x, e->qualified);
    return r;
}

int hutch_gov_tool(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                   struct hutch_tool_reply *reply)
{
    struct hutch_gov_exec *x = arg;
    const struct hutch_catalog_entry *e;
    struct verdict v;
    void *ref;
    int r;

    e = hutch_bridge_find(x->bridge, tool, timeout_ms, &ref);
    if (!e) {
        /* Nothing to decide. */
        r = unknown(x, tool, reply);
    } else {
        decide(x, e, args, &v);
        r = conclude(x, e, args, timeout_ms, &v, reply);
        /* The entry the policy decided on is the one called: one lookup. */
        if (r == 0)
            r = call(x, e, v.source, args, timeout_ms, reply);
    }
    hutch_bridge_catalog_put(x->bridge, ref);
    return r;
}

/* A call hutch_gov_tool_start decided: the rest of it, on a worker or on
 * the upstream's reader. */
struct gcall {
    struct hutch_gov_exec *x;
    const struct hutch_catalog_entry *e;
    void *ref; /* the catalog e is in */
    struct verdict v;
    hutch_tool_done_fn done;
    void *done_arg;
};

static void gcall_free(struct gcall *gc)
{
    cJSON_Delete(gc->v.extra);
    hutch_bridge_catalog_put(gc->x->bridge, gc->ref);
    free(gc);
}

static void gcall_drop(void *arg)
{
    gcall_free(arg);
}

/* The question to the user, then the call (a worker's). */
static int gcall_ask(void *arg, const cJSON *args, int timeout_ms,
                     struct hutch_tool_reply *reply)
{
    struct gcall *gc = arg;
    int r = conclude(gc->x, gc->e, args, timeout_ms, &gc->v, reply);

    if (r == 0)
        r = call(gc->x, gc->e, gc->v.source, args, timeout_ms, reply);
    gcall_free(gc);
    return r;
}

/* The call, allowed, on a worker (its server needs a thread). */
static int gcall_call(void *arg, const cJSON *args, int timeout_ms,
                      struct hutch_tool_reply *reply)
{
    struct gcall *gc = arg;
    int r = call(gc->x, gc->e, gc->v.source, args, timeout_ms, reply);

    gcall_free(gc);
    return r;
}

/* The upstream answered: the mark first, as call() makes it. */
static void gcall_done(void *arg, int r, struct hutch_tool_reply *reply)
{
    struct gcall *gc = arg;
    hutch_tool_done_fn done = gc->done;
    void *done_arg = gc->done_arg;

    if (gc->v.source)
        hutch_gov_taint(gc->x, gc->e->qualified);
    gcall_free(gc);
    done(done_arg, r, reply);
}

int hutch_gov_tool_start(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                         struct hutch_tool_reply *reply, hutch_tool_done_fn done,
                         void *done_arg, struct hutch_tool_cont *cont)
{
    struct hutch_gov_exec *x = arg;
    struct hutch_catalog *cat;
    struct gcall *gc = calloc(1, sizeof(*gc));
    int r;

    if (!gc)
        return HUTCH_TOOL_THREAD;
    gc->x = x;
    gc->done = done;
    gc->done_arg = done_arg;
    /* A tool the catalog lacks now may be a server's still starting: its
     * wait, and what is said of it, are hutch_gov_tool's. */
    cat = hutch_bridge_catalog_get(x->bridge, &gc->ref);
    gc->e = cat ? hutch_catalog_find(cat, tool) : NULL;
    if (!gc->e) {
        gcall_free(gc);
        return HUTCH_TOOL_THREAD;
    }
    decide(x, gc->e, args, &gc->v);
    if (gc->v.r == HUTCH_POLICY_ASK) {
        *cont = (struct hutch_tool_cont){gcall_ask, gcall_drop, gc};
        return HUTCH_TOOL_THREAD;
    }
    if ((r = conclude(x, gc->e, args, timeout_ms, &gc->v, reply)) < 0) {
        gcall_free(gc);
        return r;
    }
    r = hutch_bridge_call_start(x->bridge, x->principal, gc->e, args, timeout_ms, reply,
                                gcall_done, gc);
    if (r > 0)
        return HUTCH_TOOL_STARTED; /* gc is gcall_done's */
    if (r == 0) {
        *cont = (struct hutch_tool_cont){gcall_call, gcall_drop, gc};
        return HUTCH_TOOL_THREAD;
    }
    if (gc->v.source)
        hutch_gov_taint(x, gc->e->qualified);
    gcall_free(gc);
    return r;
}

/* A search from a program waits as search_tools does for the servers
 * still starting, but never past the call's own time. */
static void wait_starting(struct hutch_upstreams *u, int timeout_ms)
{
    hutch_upstreams_wait_starting(u, HUTCH_SEARCH_START_WAIT_MS,
                                  hutch_now_ms() + (uint64_t)timeout_ms);
}

/* The servers that are not ready in out's "servers", as search_tools'
 * structuredContent names them. */
static int name_not_ready(struct hutch_upstreams *u, cJSON *out)
{
    struct hutch_upstream_status *st;
    size_t n;
    cJSON *down;

    if (!u)
        return 0;
    if (hutch_upstreams_snapshot(u, &st, &n) < 0)
        return -ENOMEM;
    down = hutch_discover_not_ready(st, n, NULL);
    free(st);
    if (down && !cJSON_AddItemToObject(out, "servers", down)) {
        cJSON_Delete(down);
        return -ENOMEM;
    }
    return 0;
}

static int bad_args(struct hutch_tool_reply *reply, const char *msg)
{
    reply->code = "invalid_args";
    reply->message = strdup(msg);
    return -EINVAL;
}

/* The runner's describe (dir(), help(), .signature): args {}, {"server":
 * S} or {"tool": T} (discover.h says what each gives).  A tool is looked
 * up as a call would be (waiting for its server if it is still starting),
 * and one the policy does not offer is as unknown as one that does not
 * exist. */
static int describe(struct hutch_gov_exec *x, const cJSON *args, int timeout_ms,
                    struct hutch_tool_reply *reply)
{
    struct hutch_upstreams *u = hutch_bridge_upstreams(x->bridge);
    const cJSON *server = cJSON_GetObjectItemCaseSensitive(args, "server");
    const cJSON *tool = cJSON_GetObjectItemCaseSensitive(args, "tool");
    const struct hutch_catalog_entry *e;
    struct hutch_catalog *cat;
    cJSON *out;
    void *ref;
    int r = 0;

    if ((server && !cJSON_IsString(server)) || (tool && !cJSON_IsString(tool)) ||
        (server && tool))
        return bad_args(reply, "describe takes {}, {\"server\": name} or {\"tool\": "
                               "\"server.tool\"}");
    if (tool && !x->bridge) {
        reply->code = "unknown_tool";
        reply->message = strdup("no upstream MCP servers are configured");
        return -ENOENT;
    }
    if (tool) {
        e = hutch_bridge_find(x->bridge, tool->valuestring, timeout_ms, &ref);
        if (e && !hutch_discover_offered(x->policy, e))
            e = NULL;
        if (e && !(reply->result = hutch_catalog_describe(e, HUTCH_DETAIL_SIGNATURES)))
            r = -ENOMEM;
        hutch_bridge_catalog_put(x->bridge, ref);
        return e ? r : unknown(x, tool->valuestring, reply);
    }
    if (u)
        wait_starting(u, timeout_ms);
    cat = x->bridge ? hutch_bridge_catalog_get(x->bridge, &ref) : NULL;
    out = hutch_discover_directory(cat, x->policy, server ? server->valuestring : NULL);
    if (x->bridge)
        hutch_bridge_catalog_put(x->bridge, ref);
    if (!out || name_not_ready(u, out) < 0) {
        cJSON_Delete(out);
        return -ENOMEM;
    }
    reply->result = out;
    return 0;
}

int hutch_gov_search(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                     struct hutch_tool_reply *reply)
{
    struct hutch_gov_exec *x = arg;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_upstreams *u = hutch_bridge_upstreams(x->bridge);
    struct hutch_catalog *cat;
    cJSON *out = NULL, *empty = NULL;
    void *ref;
    int r;

    if (tool && !strcmp(tool, "describe"))
        return describe(x, args, timeout_ms, reply);
    if (!args)
        args = empty = cJSON_CreateObject();
    /* Only a search that will be answered waits. */
    if (u && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "query")))
        wait_starting(u, timeout_ms);
    cat = x->bridge ? hutch_bridge_catalog_get(x->bridge, &ref) : NULL;
    r = hutch_discover_search(cat, x->policy, args, 0, 0, NULL, &out, NULL, &err);
    if (x->bridge)
        hutch_bridge_catalog_put(x->bridge, ref);
    cJSON_Delete(empty);
    reply->tool = strdup("search_tools");
    if (r == 0 && name_not_ready(u, out) < 0) {
        cJSON_Delete(out);
        r = hutch_err_set(&err, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        reply->code = r == -EINVAL ? "invalid_args" : "internal";
        reply->message = strdup(err.msg);
        return r;
    }
    reply->result = out;
    return 0;
}

int hutch_gov_input(struct hutch_policy *p, const char *path, char *resolved,
                    size_t rlen, char *dest, size_t dlen, char *reason,
                    size_t reason_len)
{
    if (!hutch_policy_path_allowed(p, path, "ro", resolved, rlen)) {
        snprintf(reason, reason_len,
                 "input \"%.300s\" is not inside a folder the policy's paths name",
                 path);
        return -EPERM;
    }
    for (size_t i = 0; i < hutch_policy_npaths(p); i++) {
        const struct hutch_policy_path *e = hutch_policy_path_at(p, i);
        const char *sb = e->sandbox, *rest;
        size_t hl = strlen(e->host);
        if (!hutch_path_within(resolved, e->host))
            continue;
        rest = resolved + (strcmp(e->host, "/") ? hl : 0);
        if (!strncmp(sb, "/work/", 6))
            sb += 6;
        else
            sb += sb[0] == '/';
        snprintf(dest, dlen, "%s%s", sb, rest);
        return 0;
    }
    snprintf(reason, reason_len, "input \"%.300s\" matches no paths entry", path);
    return -EPERM;
}

int hutch_gov_output(struct hutch_policy *p, const char *path, char *resolved,
                     size_t rlen, char *reason, size_t reason_len)
{
    if (!hutch_policy_path_allowed(p, path, "rw", resolved, rlen)) {
        snprintf(reason, reason_len,
                 "output_dir \"%.300s\" is not inside a folder the policy's paths name "
                 "with mode \"rw\"",
                 path);
        return -EPERM;
    }
    return 0;
}
