/* job.c — one execution, end to end (see job.h for the order of things).
 *
 * What an execution runs with is its plan (struct hutch_plan, govern.h):
 * the executor rule and the limits rule are resolved there, once, from the
 * policy the execution started with and the operator's settings (which
 * this file hands govern.c as a struct hutch_plan_operator).  This file
 * asks the policy nothing itself: it acts on the plan (an executor that
 * cannot be used fails the execution, with the plan's reason, after
 * admission), holds the request's timeout_ms and output_bytes against the
 * plan's ceilings, and passes the policy only to what decides during the
 * run (host paths and tool calls, govern.c).  The pools are set up from
 * the plan of the current policy, with no execution.
 *
 * Threads: struct hutch_jobs is shared by every execution; `mu` guards
 * opening plugins and the plan the pools were configured for. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "admit.h"
#include "audit.h"
#include "bridge.h"
#include "caps.h"
#include "fair.h"
#include "govern.h"
#include "janitor.h"
#include "job.h"
#include "knobs.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"
#include "policy.h"
#include "pool.h"
#include "util.h"
#include "workspace.h"

static const char *const langs[] = {"python", "javascript"};

struct hutch_jobs {
    struct hutch_jobs_opts o;
    char *executor_flag; /* o.executor, owned */
    struct hutch_host host;
    struct hutch_plugins *ps;
    struct hutch_plugin *dflt; /* the default executor, opened */
    struct hutch_pool *pool;   /* NULL: every sandbox cold */
    struct hutch_admit *admit; /* executions at once (admit.h) */
    pthread_mutex_t mu;
    struct hutch_plan configured; /* the pools were set up for its policy */
    /* The last readiness probe (ready_mu): which plugin, when, its answer. */
    pthread_mutex_t ready_mu;
    const struct hutch_plugin *probed;
    uint64_t probed_ms;
    int probe_rc;
    char probe_msg[HUTCH_ERR_MSG];
    /* Each plugin's runtime per language (rt_mu), as ps->v: asked once. */
    pthread_mutex_t rt_mu;
    struct runtime_cache {
        int asked[2];
        char text[2][HUTCH_RUNTIME_MAX];
        /* Python's packages per flavour (base, data): asked once. */
        int pk_asked[2], pk_known[2];
        char packages[2][HUTCH_PACKAGES_MAX];
    } * rt;
};

/* The operator's half of a plan: --pool sizes are for `pool_executor`
 * (NULL: the plan's own executor). */
static struct hutch_plan_operator plan_operator(const struct hutch_jobs *j,
                                                const char *pool_executor)
{
    struct hutch_plan_operator op = {
        .executor = j->executor_flag,
        .executor_from = j->o.executor_from,
        .timeout_ms = j->o.timeout_ms,
        .memory_mb = j->o.memory_mb,
        .output_bytes = j->o.output_bytes,
        .pids = j->o.pids,
        .output_default = j->o.output_default,
        .pool_size = {j->o.pool_size[0], j->o.pool_size[1]},
        .pool_executor = pool_executor,
    };
    return op;
}

/* The plan under the current policy, without an execution. */
static void current_plan(const struct hutch_jobs *j, struct hutch_plan *plan)
{
    struct hutch_plan_operator op = plan_operator(j, NULL);
    hutch_gov_plan(j->o.gov, &op, plan);
}

/* The plan's executor, or its error. */
static int plan_executor(const struct hutch_plan *plan, struct hutch_err *err)
{
    return plan->rc < 0 ? hutch_err_set(err, plan->rc, "%s", plan->error) : 0;
}

/* The plugin named `name`, opened (once, under mu). */
static struct hutch_plugin *open_executor(struct hutch_jobs *j, const char *name,
                                          struct hutch_err *err)
{
    struct hutch_plugin *p = hutch_plugins_find(j->ps, name);
    int r;
    if (!p) {
        hutch_err_set(err, -ENOENT,
                      "no executor named \"%s\" in %s (run 'hutch plugins' to see what "
                      "is there)",
                      name, j->ps->dir);
        return NULL;
    }
    if (!p->usable) {
        hutch_err_set(err, -ENOENT, "executor \"%s\" is not usable: %s", name,
                      p->reason);
        return NULL;
    }
    pthread_mutex_lock(&j->mu);
    r = hutch_plugin_open(p, &j->host, err);
    pthread_mutex_unlock(&j->mu);
    return r < 0 ? NULL : p;
}

/* A request's value against its ceiling: `asked` (0: not asked, `dflt`)
 * or the ceiling when it asked for more, with a note in res. */
static uint64_t ceiling(struct hutch_exec_result *res, const char *what,
                        const char *unit, uint64_t asked, uint64_t dflt, uint64_t max)
{
    size_t n = strlen(res->notes);
    if (!asked)
        return dflt;
    if (asked <= max)
        return asked;
    snprintf(res->notes + n, sizeof(res->notes) - n,
             "%s%s: asked for %llu %s; this server allows %llu", n ? "\n" : "", what,
             (unsigned long long)asked, unit, (unsigned long long)max);
    return max;
}

/* Set the pools up for `plan`, a plan of the current policy without an
 * execution (start-up, reload).  On success the pools keep it (the
 * caller's is emptied; releasing it stays harmless).  Called under mu. */
static int configure(struct hutch_jobs *j, struct hutch_plan *plan,
                     struct hutch_err *err)
{
    struct hutch_plugin *pl;
    int r = plan_executor(plan, err);

    if (r < 0)
        return r;
    hutch_plan_release(&j->configured);
    j->configured = *plan;
    plan->policy = NULL; /* handed over */
    plan = &j->configured;
    if (!j->pool)
        return 0;
    hutch_pool_begin(j->pool);
    pl = hutch_plugins_find(j->ps, plan->executor);
    if (pl && pl->opened && (pl->ex->caps & HUTCH_CAP_PRESTART))
        for (int l = 0; l < 2; l++) {
            struct hutch_sandbox_class cls = plan->cls;
            cls.language = langs[l];
            if (plan->pool_size[l] > 0)
                hutch_pool_want(j->pool, pl, &cls, plan->pool_size[l]);
        }
    hutch_pool_commit(j->pool);
    return 0;
}

/* The operator's executor: opts->executor, else $HUTCH_EXECUTOR. */
static void operator_executor(struct hutch_jobs *j, const struct hutch_jobs_opts *opts)
{
    j->o = *opts;
    if ((!opts->executor || !*opts->executor) && hutch_knob_str(HUTCH_KNOB_EXECUTOR)) {
        j->o.executor = hutch_knob_str(HUTCH_KNOB_EXECUTOR);
        j->o.executor_from = "HUTCH_EXECUTOR";
    }
}

int hutch_jobs_check(const struct hutch_jobs_opts *opts, struct hutch_policy *p,
                     struct hutch_err *err)
{
    struct hutch_jobs j = {0};
    struct hutch_plugin *pl;
    struct hutch_plan_operator op;
    struct hutch_plan plan;
    int r;

    operator_executor(&j, opts);
    /* Borrowed, not owned: j is never given to hutch_jobs_free. */
    j.executor_flag = j.o.executor && *j.o.executor ? (char *)j.o.executor : NULL;
    hutch_host_init(&j.host, hutch_runner_dir());
    op = plan_operator(&j, NULL);
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    r = plan_executor(&plan, err);
    if (r == 0)
        r = hutch_plugins_load(hutch_plugin_dir(opts->plugin_dir), &j.host, &j.ps, err);
    if (r < 0) {
        hutch_plan_release(&plan);
        return r;
    }
    pl = hutch_plugins_find(j.ps, plan.executor);
    if (!pl)
        r = hutch_err_set(err, -ENOENT,
                          "no executor named \"%s\" in %s (run 'hutch plugins' to see "
                          "what is there)",
                          plan.executor, j.ps->dir);
    else if (!pl->usable)
        r = hutch_err_set(err, -ENOENT, "executor \"%s\" is not usable: %s",
                          plan.executor, pl->reason);
    hutch_plugins_free(j.ps);
    hutch_plan_release(&plan);
    return r;
}

int hutch_jobs_new(const struct hutch_jobs_opts *opts, struct hutch_jobs **out,
                   struct hutch_err *err)
{
    struct hutch_jobs *j = calloc(1, sizeof(*j));
    struct hutch_plan plan = {0};
    const char *total_from;
    unsigned total;
    int r;

    if (!j)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->ready_mu, NULL);
    pthread_mutex_init(&j->rt_mu, NULL);
    r = hutch_admit_total_from(&total, &total_from, err);
    if (r < 0)
        goto fail;
    if (!(j->admit = hutch_admit_new(total, total_from))) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    operator_executor(j, opts);
    if (j->o.executor && *j->o.executor &&
        !(j->executor_flag = strdup(j->o.executor))) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    hutch_host_init(&j->host, hutch_runner_dir());
    r = hutch_plugins_load(hutch_plugin_dir(opts->plugin_dir), &j->host, &j->ps, err);
    if (r < 0)
        goto fail;
    j->rt = calloc(j->ps->n ? j->ps->n : 1, sizeof(*j->rt));
    if (!j->rt) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    /* A hutch killed with SIGKILL (a client ending it so) left its
     * sandboxes: any hutch that starts removes them, on every executor. */
    hutch_plugins_sweep(j->ps, &j->host, 0);
    /* And when this one dies so, its janitor removes what it left. */
    {
        struct hutch_err jerr = HUTCH_ERR_INIT;
        if (hutch_janitor_start(hutch_plugin_dir(opts->plugin_dir), &jerr) < 0)
            hutch_warn("%s (the next hutch that starts removes what this one leaves "
                       "if it is killed)",
                       jerr.msg);
    }
    current_plan(j, &plan);
    r = plan_executor(&plan, err);
    if (r < 0)
        goto fail;
    j->dflt = open_executor(j, plan.executor, err);
    if (!j->dflt) {
        r = err->code ? err->code : -ENOENT;
        goto fail;
    }
    hutch_metrics_executor(j->dflt->name);
    if (opts->pools && (j->dflt->ex->caps & HUTCH_CAP_PRESTART)) {
        r = hutch_pool_new(&j->pool, err);
        if (r < 0)
            goto fail;
    }
    pthread_mutex_lock(&j->mu);
    r = configure(j, &plan, err);
    pthread_mutex_unlock(&j->mu);
    if (r < 0)
        goto fail;
    hutch_plan_release(&plan);
    *out = j;
    return 0;
fail:
    hutch_plan_release(&plan);
    hutch_jobs_free(j);
    return r;
}

/* The pools' hits and misses so far, in the audit log (at a reload and
 * at exit). */
static void audit_pools(struct hutch_jobs *j, const char *why)
{
    struct hutch_pool_status *st;
    size_t n;
    cJSON *extra;
    if (!j->pool || hutch_pool_snapshot(j->pool, &st, &n) < 0)
        return;
    extra = cJSON_CreateObject();
    cJSON_AddItemToObject(extra, "classes", hutch_pool_status_json(st, n, 1));
    free(st);
    hutch_audit_log(hutch_gov_audit(j->o.gov), "pool", NULL, NULL, NULL, why, NULL, -1,
                    extra);
    cJSON_Delete(extra);
}

void hutch_jobs_stop(struct hutch_jobs *j)
{
    if (j)
        hutch_pool_stop(j->pool);
}

void hutch_jobs_free(struct hutch_jobs *j)
{
    if (!j)
        return;
    audit_pools(j, "exit");
    hutch_pool_free(j->pool); /* before the plugins it uses close */
    hutch_plugins_free(j->ps);
    hutch_janitor_release(); /* everything is removed: nothing to sweep */
    hutch_plan_release(&j->configured);
    hutch_admit_free(j->admit);
    free(j->executor_flag);
    free(j->rt);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->ready_mu);
    pthread_mutex_destroy(&j->rt_mu);
    free(j);
}

int hutch_jobs_policy_changed(struct hutch_jobs *j, struct hutch_err *err)
{
    struct hutch_plan plan;
    int r;
    audit_pools(j, "reload");
    current_plan(j, &plan);
    pthread_mutex_lock(&j->mu);
    r = configure(j, &plan, err);
    pthread_mutex_unlock(&j->mu);
    hutch_plan_release(&plan);
    return r;
}

int hutch_jobs_pool_status(struct hutch_jobs *j, struct hutch_pool_status **rows,
                           size_t *n)
{
    if (j->pool)
        return hutch_pool_snapshot(j->pool, rows, n);
    *rows = NULL;
    *n = 0;
    return 0;
}

int hutch_jobs_ready(struct hutch_jobs *j, cJSON *out, int detail)
{
    struct hutch_plan plan;
    struct hutch_err err = {0};
    struct hutch_plugin *pl = NULL;
    cJSON *pol = cJSON_AddObjectToObject(out, "policy");
    cJSON *ex = cJSON_AddObjectToObject(out, "executor");
    int ok = 0;

    current_plan(j, &plan);
    /* The file's path is for the operator only (as every free text): a
     * probe without a token learns states, never where things are. */
    if (detail)
        cJSON_AddStringToObject(pol, "source", plan.source);
    {
        struct hutch_gov_reload last;
        hutch_gov_last_reload(j->o.gov, &last);
        if (last.done) {
            cJSON *rl = cJSON_AddObjectToObject(pol, "reload");
            cJSON_AddStringToObject(rl, "state", last.ok ? "loaded" : "failed");
            cJSON_AddStringToObject(rl, "time", last.time);
            if (!last.ok && detail)
                cJSON_AddStringToObject(rl, "error", last.error);
        }
    }
    if (plan.rc < 0) {
        cJSON_AddFalseToObject(pol, "ok");
        if (detail)
            cJSON_AddStringToObject(pol, "error", plan.error);
        goto out;
    }
    cJSON_AddTrueToObject(pol, "ok");
    cJSON_AddStringToObject(ex, "name", plan.executor);
    pl = hutch_plugins_find(j->ps, plan.executor);
    if (!pl || !pl->usable || !pl->ex) {
        snprintf(err.msg, sizeof(err.msg), "%s",
                 pl ? pl->reason : "no such executor plugin");
    } else {
        /* The probe is stateless (the ABI's contract) and cheap, but may
         * ask a daemon: one at a time, and not more often than this. */
        pthread_mutex_lock(&j->ready_mu);
        if (j->probed != pl || hutch_now_ms() - j->probed_ms >= HUTCH_READY_PROBE_MS) {
            struct hutch_err perr = {0};
            j->probe_rc = pl->ex->probe(&j->host, &perr);
            snprintf(j->probe_msg, sizeof(j->probe_msg), "%s",
                     perr.msg[0] ? perr.msg : "its probe failed without a reason");
            j->probed = pl;
            j->probed_ms = hutch_now_ms();
        }
        ok = j->probe_rc == 0;
        if (!ok)
            snprintf(err.msg, sizeof(err.msg), "%s", j->probe_msg);
        pthread_mutex_unlock(&j->ready_mu);
    }
    cJSON_AddBoolToObject(ex, "usable", ok);
    if (!ok && detail)
        cJSON_AddStringToObject(ex, "error", err.msg);
out:
    hutch_plan_release(&plan);
    return ok;
}

static int source_pool_status(void *ctx, struct hutch_pool_status **rows, size_t *n)
{
    return hutch_jobs_pool_status(ctx, rows, n);
}

static int source_ready(void *ctx, cJSON *out, int detail)
{
    return hutch_jobs_ready(ctx, out, detail);
}

struct hutch_metrics_source hutch_jobs_metrics_source(struct hutch_jobs *j)
{
    return (struct hutch_metrics_source){
        .ctx = j, .pool_status = source_pool_status, .ready = source_ready};
}

void hutch_jobs_runtime(struct hutch_jobs *j, char *buf, size_t len)
{
    struct hutch_plan plan;
    struct hutch_err err = {0};
    struct hutch_plugin *pl = NULL;
    struct runtime_cache *c;
    size_t o = 0;
    int d;

    buf[0] = '\0';
    /* The default under the current policy (a reload may name another),
     * opened as its first execution would open it, and the flavour the
     * policy (or --flavour) names for it. */
    current_plan(j, &plan);
    if (plan.rc == 0)
        pl = strcmp(plan.executor, j->dflt->name) == 0
                 ? j->dflt
                 : open_executor(j, plan.executor, &err);
    d = strcmp(plan.flavour, "data") == 0;
    hutch_plan_release(&plan);
    if (!pl)
        return;
    c = &j->rt[pl - j->ps->v];
    pthread_mutex_lock(&j->rt_mu);
    for (int l = 0; l < 2; l++) {
        int n;
        if (!c->asked[l]) {
            struct hutch_err rerr = HUTCH_ERR_INIT;
            c->asked[l] = 1;
            if (!HUTCH_HAS_MEMBER(pl->ex, struct hutch_executor, runtime) ||
                !pl->ex->runtime)
                continue;
            if (pl->ex->runtime(pl->state, langs[l], c->text[l], sizeof(c->text[l]),
                                &rerr) < 0) {
                c->text[l][0] = '\0';
                hutch_warn("executor %s cannot say which %s runtime it runs: %s",
                           pl->name, langs[l], rerr.msg);
            }
            c->text[l][sizeof(c->text[l]) - 1] = '\0';
        }
        if (!c->text[l][0])
            continue;
        n = snprintf(buf + o, len - o, "%s%s", o ? ", " : "", c->text[l]);
        if (n > 0 && (size_t)n < len - o)
            o += (size_t)n;
    }
    {
        /* What Python can import beyond its standard library, under the
         * flavour. */
        if (!c->pk_asked[d]) {
            struct hutch_err perr = HUTCH_ERR_INIT;
            c->pk_asked[d] = 1;
            if (HUTCH_HAS_MEMBER(pl->ex, struct hutch_executor, packages) &&
                pl->ex->packages) {
                if (pl->ex->packages(pl->state, "python", d ? "data" : "base",
                                     c->packages[d], sizeof(c->packages[d]),
                                     &perr) == 0)
                    c->pk_known[d] = 1;
                else
                    hutch_warn("executor %s cannot say which Python packages it "
                               "offers: %s",
                               pl->name, perr.msg);
                c->packages[d][sizeof(c->packages[d]) - 1] = '\0';
            }
        }
        pthread_mutex_unlock(&j->rt_mu);
        snprintf(buf + o, len - o, o ? " (%s executor)" : "the %s executor", pl->name);
        o = strlen(buf);
        if (c->pk_known[d] && c->packages[d][0])
            snprintf(buf + o, len - o, ". Python packages: %s", c->packages[d]);
        else if (c->pk_known[d])
            snprintf(buf + o, len - o, ". Python: the standard library only");
    }
}

/* The pools follow the current policy: a reload nobody set them up for
 * yet (hutch run has no reload thread; serve's may be a moment behind). */
static void follow_policy(struct hutch_jobs *j)
{
    pthread_mutex_lock(&j->mu);
    if (!hutch_gov_plan_current(j->o.gov, &j->configured)) {
        struct hutch_plan cur;
        struct hutch_err cerr = {0};
        current_plan(j, &cur);
        if (configure(j, &cur, &cerr) < 0)
            hutch_error("policy %s: %s", cur.source, cerr.msg);
        hutch_plan_release(&cur);
    }
    pthread_mutex_unlock(&j->mu);
}

/* inputs and output_dir: host paths, only where the policy allows (unless
 * they are the invoking user's own). */
static int host_paths(struct hutch_job_req *job, struct hutch_policy *p,
                      struct hutch_tar **tar, char *out_dir, size_t out_len,
                      struct hutch_err *err)
{
    char resolved[PATH_MAX], dest[PATH_MAX], reason[600];
    int r;

    for (size_t i = 0; i < job->ninputs; i++) {
        const struct hutch_job_input *in = &job->inputs[i];
        const char *src = in->src, *to = in->dest;
        if (!job->host_paths_trusted) {
            if (hutch_gov_input(p, in->src, resolved, sizeof(resolved), dest,
                                sizeof(dest), reason, sizeof(reason)) < 0)
                return hutch_err_set(err, -EPERM, "refused by the policy: %s", reason);
            src = resolved;
            if (!to)
                to = dest;
        }
        if (!to) {
            to = strrchr(src, '/');
            to = to && to[1] ? to + 1 : "input";
        }
        if (!*tar && (r = hutch_tar_new(tar, HUTCH_TAR_IN_MAX_BYTES, err)) < 0)
            return r;
        r = hutch_tar_add_path(*tar, src, to, err);
        if (r < 0) {
            char msg[HUTCH_ERR_MSG];
            snprintf(msg, sizeof(msg), "%s", err->msg);
            return hutch_err_set(err, r, "input %s: %s", in->src, msg);
        }
    }
    if (job->output_dir) {
        struct stat st;
        if (job->host_paths_trusted) {
            snprintf(out_dir, out_len, "%s", job->output_dir);
        } else {
            if (hutch_gov_output(p, job->output_dir, resolved, sizeof(resolved), reason,
                                 sizeof(reason)) < 0)
                return hutch_err_set(err, -EPERM, "refused by the policy: %s", reason);
            snprintf(out_dir, out_len, "%s", resolved);
        }
        if (mkdir(out_dir, 0755) < 0 && errno != EEXIST)
            return hutch_err_set(err, -errno, "output folder %s: %s", out_dir,
                                 strerror(errno));
        if (lstat(out_dir, &st) < 0 || !S_ISDIR(st.st_mode))
            return hutch_err_set(err, -ENOTDIR, "output folder %s is not a directory",
                                 out_dir);
    }
    return 0;
}

void hutch_job_release(struct hutch_jobs *j, struct hutch_job_req *job)
{
    if (job->pooled)
        hutch_pool_discard(j->pool, hutch_steal(&job->spent), job->pool_who);
    else
        hutch_box_destroy(hutch_steal(&job->spent));
    job->pooled = 0;
}

/* The execution's egress proxy, when its plan has egress: only on an
 * executor whose sandboxes can carry connections. */
static int open_egress(const struct hutch_plan *plan, const struct hutch_plugin *pl,
                       struct hutch_gov_exec *gx, struct hutch_egress **out,
                       struct hutch_err *err)
{
    struct hutch_egress_hooks hooks = {.on_record = hutch_gov_egress_record,
                                       .decide = hutch_gov_egress_decide,
                                       .arg = gx};
    int r;

    if (!(pl->ex->caps & HUTCH_CAP_EGRESS))
        return hutch_err_set(err, -ENOTSUP,
                             "the policy gives this execution egress, and the %s "
                             "executor cannot carry a program's connections (see "
                             "hutch-policy(5), egress)",
                             plan->executor);
    r = hutch_egress_new(plan->egress, &hooks, out, err);
    if (r < 0) {
        char msg[HUTCH_ERR_MSG];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        return hutch_err_set(err, r, "egress: %s", msg);
    }
    return 0;
}

/* Opens the workspace the job names and adds its files to the input. */
static int open_workspace(struct hutch_jobs *j, struct hutch_job_req *job,
                          const struct hutch_plan *plan, struct hutch_tar **tar,
                          struct hutch_ws **ws, struct hutch_err *err)
{
    const struct hutch_policy_workspaces *wp = &plan->workspaces;
    char store[PATH_MAX];
    int r;

    if (!wp->allow)
        return hutch_err_set(err, -EPERM,
                             "refused by the policy: it does not allow workspaces "
                             "(workspaces.allow = false)");
    r = hutch_ws_store(j->o.workspaces_dir, 1, store, sizeof(store), err);
    if (r == 0)
        r = hutch_ws_open(store, job->principal ? job->principal : "local",
                          job->workspace, wp, ws, err);
    if (r == 0)
        r = hutch_ws_load(*ws, tar, HUTCH_TAR_IN_MAX_BYTES, err);
    return r;
}

/* hutch's note on the result, after any note already there. */
static void add_note(struct hutch_exec_result *res, const char *msg)
{
    size_t n = strlen(res->message);
    snprintf(res->message + n, sizeof(res->message) - n, "%s%s", n ? "; " : "", msg);
}

/* After the run: the workspace's files leave the result; saved when the
 * program succeeded (a failed, killed or timed-out one keeps the previous
 * content, and says so). */
static void close_workspace(struct hutch_job_req *job, struct hutch_ws *ws,
                            const char *taint, const char *out_dir,
                            struct hutch_exec_result *res)
{
    struct hutch_err werr = HUTCH_ERR_INIT;
    int ok = res->exit_code == 0 && !res->timed_out && !res->oom &&
             !(job->cancel && atomic_load(job->cancel));
    char msg[HUTCH_ERR_MSG + 64];

    if (hutch_ws_split(ws, &res->out_tar, &res->files, ok, taint, out_dir, &werr) < 0) {
        add_note(res, werr.msg);
        if (res->exit_code == 0)
            res->exit_code = HUTCH_EXIT_ERROR;
    } else if (!ok) {
        snprintf(msg, sizeof(msg),
                 "workspace \"%s\" not saved: the program did not succeed, so it "
                 "keeps what it held before",
                 job->workspace);
        add_note(res, msg);
    }
}

static int cancelled(void *arg)
{
    const atomic_int *c = arg;
    return c && atomic_load(c);
}

/* How an execution that ran ended, for the metrics. */
static enum hutch_metrics_outcome ran_outcome(const struct hutch_job_req *job,
                                              const struct hutch_exec_result *res)
{
    if (job->cancel && atomic_load(job->cancel))
        return HUTCH_OUTCOME_CANCELLED;
    if (res->timed_out)
        return HUTCH_OUTCOME_TIMEOUT;
    if (res->oom)
        return HUTCH_OUTCOME_OOM;
    return res->exit_code == 0 ? HUTCH_OUTCOME_OK : HUTCH_OUTCOME_ERROR;
}

static enum hutch_metrics_outcome failed_outcome(const struct hutch_job_req *job, int r)
{
    if (r == -EPERM)
        return HUTCH_OUTCOME_DENIED;
    if (r == -EAGAIN)
        return HUTCH_OUTCOME_RATE_LIMITED;
    if (r == -EBUSY)
        return HUTCH_OUTCOME_BUSY;
    if (r == -ECANCELED || (job->cancel && atomic_load(job->cancel)))
        return HUTCH_OUTCOME_CANCELLED;
    return HUTCH_OUTCOME_FAILED;
}

/* A slot to run in (admit.h), under the limits of the execution's policy
 * for its principal. */
static int admit(struct hutch_jobs *j, struct hutch_job_req *job,
                 struct hutch_gov_exec *gx, struct hutch_admit_slot **slot,
                 struct hutch_err *err)
{
    const struct hutch_policy_concurrency *c = &gx->plan.concurrency;
    struct hutch_admit_req req = {0};

    req.principal = gx->principal;
    req.running = c->executions;
    req.queued = c->queued;
    req.queued_set = c->queued_set;
    req.has_principals = gx->plan.has_principals;
    req.cancel = job->cancel;
    req.tick = job->tick;
    req.tick_arg = job->tick_arg;
    return hutch_admit_enter(j->admit, &req, slot, err);
}

int hutch_job_run(struct hutch_jobs *j, struct hutch_job_req *job,
                  struct hutch_exec_result *res, struct hutch_err *err)
{
    uint64_t t0_us = hutch_now_us();
    struct hutch_plan_operator op = plan_operator(j, j->dflt->name);
    struct hutch_gov_exec gx;
    const struct hutch_plan *plan = &gx.plan;
    struct hutch_sandbox_class cls;
    struct hutch_exec_req req = {0};
    struct hutch_plugin *pl;
    struct hutch_box *box = NULL;
    struct hutch_tar *own = NULL, **tar = job->files ? &job->files : &own;
    struct hutch_ws *ws = NULL;
    struct hutch_admit_slot *slot = NULL;
    struct hutch_budget_share *share = NULL;
    struct hutch_fair_seat *seat = NULL;
    struct hutch_egress *egress = NULL;
    const char *bundle;
    size_t bundle_len = 0;
    int had_files;
    char reason[600], out_dir[PATH_MAX] = "";
    /* TypeScript runs as JavaScript everywhere but in the runner (the run
     * message names it): the policy, the class and the pool see the
     * runtime, so a rule about javascript holds for TypeScript too. */
    const char *runtime = hutch_lang_runtime(job->language);
    int r;

    r = hutch_gov_begin(j->o.gov, &gx, j->o.bridge, job->principal, runtime,
                        strlen(job->code), job->nfiles, job->workspace, &op, reason,
                        sizeof(reason));
    snprintf(job->execution, sizeof(job->execution), "%s", gx.execution);
    gx.ask = job->ask;
    gx.ask_arg = job->ask_arg;
    gx.elicit = job->elicit;
    if (r < 0) {
        hutch_metrics_execution(NULL, failed_outcome(job, r), -1);
        return hutch_err_set(err, r, "refused by the policy: %s", reason);
    }

    r = admit(j, job, &gx, &slot, err);
    if (r < 0)
        goto fail;
    /* The principal's share of hutch's memory, from now to the end. */
    share = hutch_budget_join(gx.principal, plan->nprincipals);
    follow_policy(j);
    /* The executor of the plan (the job's own policy decided it, which
     * may be older than the current). */
    r = plan_executor(plan, err);
    if (r < 0)
        goto fail;
    snprintf(gx.executor, sizeof(gx.executor), "%s", plan->executor);
    pl = strcmp(plan->executor, j->dflt->name) == 0
             ? j->dflt
             : open_executor(j, plan->executor, err);
    if (!pl) {
        r = err->code ? err->code : -ENOENT;
        goto fail;
    }

    if (plan->egress && (r = open_egress(plan, pl, &gx, &egress, err)) < 0)
        goto fail;
    r = host_paths(job, gx.policy, tar, out_dir, sizeof(out_dir), err);
    if (r < 0)
        goto fail;
    if (job->workspace && (r = open_workspace(j, job, plan, tar, &ws, err)) < 0)
        goto fail;
    if (hutch_ws_taint(ws)) {
        /* What the workspace holds came through an untrusted source: so
         * does what this execution reads from it. */
        char src[sizeof(gx.taint)];
        snprintf(src, sizeof(src), "workspace \"%s\" (%s)", job->workspace,
                 hutch_ws_taint(ws));
        hutch_gov_taint(&gx, src);
    }
    had_files = *tar != NULL;
    if ((bundle = hutch_egress_ca_bundle(egress, &bundle_len))) {
        /* The CA the program trusts where hutch adds secrets: hutch's
         * file, not the program's, so not counted in files_bytes (its
         * header and blocks taken off below). */
        if ((!*tar && (r = hutch_tar_new(tar, HUTCH_TAR_IN_MAX_BYTES, err)) < 0) ||
            (r = hutch_tar_add_bytes(*tar, HUTCH_EGRESS_BUNDLE_REL, bundle, bundle_len,
                                     0644, err)) < 0)
            goto fail;
        bundle_len = 512 + ((bundle_len + 511) & ~(size_t)511);
    }
    if (*tar && (r = hutch_tar_finish(*tar, &req.tar, &req.tar_len, err)) < 0)
        goto fail;
    if (had_files && req.tar_len - (bundle ? bundle_len : 0) > plan->files_bytes) {
        r = hutch_err_set(err, -E2BIG,
                          "files of %zu bytes exceed the policy's files_bytes (%llu)",
                          req.tar_len - (bundle ? bundle_len : 0),
                          (unsigned long long)plan->files_bytes);
        goto fail;
    }

    cls = plan->cls;
    cls.language = runtime;
    job->pooled = j->pool && (pl->ex->caps & HUTCH_CAP_PRESTART);
    if (job->pooled) {
        /* Warm boxes are shared between the policy's principals (pool.h). */
        snprintf(job->pool_who, sizeof(job->pool_who), "%s",
                 plan->has_principals ? gx.principal : "");
        box = hutch_pool_take(j->pool, pl, &cls, job->pool_who);
        if (!box) {
            /* A miss: keep this class warm from now on, when the policy
             * pools its language on this executor. */
            int n = plan->pool_size[strcmp(runtime, "python") == 0 ? 0 : 1];
            if (n > 0)
                hutch_pool_want(j->pool, pl, &cls, n);
        }
    }
    if (!box) {
        r = hutch_box_start(pl, &cls, gx.execution, 0, job->cancel ? cancelled : NULL,
                            (void *)job->cancel, &box, err);
        if (r < 0)
            goto fail;
    }
    gx.warm = box->pooled;
    /* Contended CPU is shared between principals, not between sandboxes
     * (fair.h), where the policy lists principals; the box lives until
     * hutch_job_release, past the seat. */
    if (plan->has_principals)
        seat = hutch_fair_join(gx.principal, hutch_box_cpu_weight, box);

    req.language = job->language;
    req.code = job->code;
    /* The plan's ceilings (a default is one too, unless the operator or
     * the policy file raises it): a request above its ceiling gets the
     * ceiling, and the result says so. */
    req.timeout_ms = ceiling(res, "timeout_ms", "ms", job->timeout_ms, plan->timeout_ms,
                             plan->timeout_ms);
    req.output_bytes = ceiling(res, "output_bytes", "bytes", job->output_bytes,
                               plan->output_default, plan->output_max);
    req.files_bytes = plan->files_bytes;
    req.label = gx.execution;
    /* With a workspace, /work/out is split first (close_workspace). */
    req.out_dir = out_dir[0] && !ws ? out_dir : NULL;
    req.skip_files = job->skip_files && !ws;
    req.stream_fd_out = job->stream_fd_out;
    req.stream_fd_err = job->stream_fd_err;
    req.tool = hutch_gov_tool;
    req.tool_arg = &gx;
    req.tool_start = hutch_gov_tool_start;
    req.search = hutch_gov_search;
    req.search_arg = &gx;
    req.cancel = job->cancel;
    req.tick = job->tick;
    req.tick_arg = job->tick_arg;
    req.share = share;
    req.egress = egress;
    r = hutch_exec_run(box, &req, res, err);
    job->spent = hutch_steal(&box);
    hutch_fair_leave(hutch_steal(&seat));
    /* Every connection ends (and is audited) before the execution does. */
    hutch_egress_close(hutch_steal(&egress));
    if (r < 0)
        goto fail;
    if (ws)
        /* A workspace's mark names the first source, not the way through
         * the workspace it came. */
        close_workspace(
            job, ws, hutch_ws_taint(ws) ? hutch_ws_taint(ws) : hutch_gov_tainted(&gx),
            out_dir[0] ? out_dir : NULL, res);
    hutch_ws_close(ws);
    hutch_admit_leave(j->admit, slot);
    hutch_budget_leave(share);
    hutch_gov_end(&gx, res, NULL);
    hutch_metrics_execution(gx.executor, ran_outcome(job, res),
                            (double)(hutch_now_us() - t0_us) / 1e6);
    hutch_tar_free(own);
    return 0;
fail:
    hutch_egress_close(egress);
    hutch_fair_leave(seat);
    if (box) /* a box that never ran (exec_run's was handed over above) */
        job->spent = hutch_steal(&box);
    hutch_metrics_execution(gx.executor, failed_outcome(job, r),
                            gx.executor[0] ? (double)(hutch_now_us() - t0_us) / 1e6
                                           : -1);
    hutch_ws_close(ws);
    hutch_admit_leave(j->admit, slot);
    hutch_budget_leave(share);
    hutch_gov_end(&gx, NULL, err->msg);
    hutch_tar_free(own);
    return r;
}
