/* mcp_exec.c — execute_code's executions behind hutch's MCP server: a
 * worker thread per call (job_main), the 2026-07-28 era's parked
 * questions (an execution that waits in its sandbox for the answer a later
 * request carries), and the tasks extension.  Not here: the tools'
 * definitions and rendering (mcp_tools.c), dispatch (mcp_server.c).
 * Thread and lock rules: see "parked executions" below and mcp_int.h. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "bridge.h"
#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "discover.h"
#include "exec.h"
#include "exec_args.h"
#include "govern.h"
#include "hutch_archive.h"
#include "job.h"
#include "log.h"
#include "mcp_direct.h"
#include "mcp_era.h"
#include "mcp_int.h"
#include "mcp_server.h"
#include "output.h"
#include "plugin.h"
#include "reqstate.h"
#include "resources.h"
#include "result_files.h"
#include "shape.h"
#include "util.h"
#include "wire.h"
#include "workspace.h"

/* --- execute_code -------------------------------------------------------------------
 */

struct job {
    struct hutch_mcp *m;
    /* The request this job answers: its session, stream and id.  A 2026
     * job that asked a question answers none until a request carrying the
     * answer takes it over (parked executions, below): then these change,
     * under m->park_mu. */
    struct hutch_mcp_session *s;
    void *stream;
    cJSON *id;
    cJSON *progress_token;
    cJSON *args;
    struct inflight fl;
    struct hutch_job_req hj; /* released after the response is sent */
    char *direct;            /* a direct tool's name (mcp_direct.c), or NULL */
    int modern;              /* asked in the 2026-07-28 era: stamp the result */
    /* The session's principal, copied: a 2026 job outlives its request. */
    char principal[HUTCH_MAX_PRINCIPAL_NAME + 1];
    /* 2026 questions, under m->park_mu: the request declared the
     * elicitation capability; attached: a request waits for this job's
     * answer (0 while a question is parked); questions asked so far. */
    int can_elicit;
    int structured; /* the client asked for structuredContent */
    int attached;
    uint64_t questions;
    pthread_cond_t attach_cond;
    struct job *next_detached; /* m->detached */
    struct task *task;         /* a task's job (tasks, below), or NULL */
    /* hutch's memory its result holds (budget.h), until it has been sent
     * or put into its task's record. */
    struct hutch_budget held;
};

static void tick(void *arg, uint64_t elapsed_ms)
{
    struct job *j = arg;
    cJSON *msg, *params;
    char text[64];
    if (!j->progress_token)
        return;
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "method", "notifications/progress");
    params = cJSON_AddObjectToObject(msg, "params");
    cJSON_AddItemToObject(params, "progressToken",
                          cJSON_Duplicate(j->progress_token, 1));
    cJSON_AddNumberToObject(params, "progress", (double)(elapsed_ms / 1000));
    snprintf(text, sizeof(text), "running for %llu s",
             (unsigned long long)(elapsed_ms / 1000));
    cJSON_AddStringToObject(params, "message", text);
    if (!j->modern) {
        mcp_send_msg(j->s, j->stream, msg, 0);
        return;
    }
    /* A 2026 job may be between requests: progress only to the one that
     * waits for it (park_mu keeps that request's session alive). */
    pthread_mutex_lock(&j->m->park_mu);
    if (j->attached)
        mcp_send_msg(j->s, j->stream, msg, 0);
    else
        cJSON_Delete(msg);
    pthread_mutex_unlock(&j->m->park_mu);
}

/* hutch_asks_send_fn: a question goes out on the stream of the tools/call
 * it is about (over HTTP, that response's event stream). */
static int job_send(void *arg, cJSON *msg)
{
    struct job *j = arg;
    mcp_send_msg(j->s, j->stream, msg, 0);
    return 0;
}

/* hutch_ask_fn (govern.h) for a 2025 session: elicitation/create. */
static int ask_client(void *arg, const char *tool, const char *question,
                      const cJSON *args, unsigned ms, char *why, size_t why_len)
{
    struct job *j = arg;
    return hutch_asks_approval(j->s->asks, job_send, j, tool, question, args, ms, why,
                               why_len);
}

/* --- parked executions (the 2026-07-28 era) -----------------------------------
 *
 * A 2026 client is asked a question by the result of its request: the
 * execute_code call answers `input_required` (an elicitation/create and a
 * signed requestState, reqstate.h) and ends, while the execution goes on
 * in its sandbox, its tool call waiting.  The client calls execute_code
 * again with inputResponses and that requestState: the request that
 * carries the answer takes the job over, the program continues, and that
 * request gets the result (or the next question).  No answer within the
 * question's time: the call is denied and the program goes on; its result
 * then has no request to go to and is dropped.
 *
 * While no request waits for it, a job is on m->detached (hutch_mcp_free
 * stops those).  A job's request (s, stream, id) changes only under
 * park_mu; a question is a struct parked on its asker's stack, on
 * m->parked until answered or timed out.  One question at a time per job:
 * another waits until a request takes the job over. */
struct parked {
    struct parked *next;
    struct job *j;
    const char *key; /* its inputRequests key: "approve" or "input" */
    uint64_t q;
    int answered; /* 1 with answer, -1: hutch is stopping */
    cJSON *answer;
    pthread_cond_t cond;
};

struct task {
    struct task *next;
    char id[96]; /* <instance>.<32 hex> */
    char principal[HUTCH_MAX_PRINCIPAL_NAME + 1];
    const char *status; /* working, input_required, completed, failed, cancelled */
    char created[32], updated[32];
    uint64_t ended_ms; /* monotonic; 0 while it runs */
    cJSON *result, *error;
    cJSON *input_requests; /* input_required: what it asks */
    struct parked *q;      /* input_required: the question */
    struct job *j;         /* while it runs */
};

static void iso_now(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void task_free(struct task *t)
{
    cJSON_Delete(t->result);
    cJSON_Delete(t->error);
    cJSON_Delete(t->input_requests);
    free(t);
}

/* Off m->detached, off m->parked: under park_mu. */
static void detached_remove_locked(struct hutch_mcp *m, struct job *j)
{
    for (struct job **q = &m->detached; *q; q = &(*q)->next_detached)
        if (*q == j) {
            *q = j->next_detached;
            return;
        }
}

static void parked_remove_locked(struct hutch_mcp *m, struct parked *p)
{
    for (struct parked **q = &m->parked; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            return;
        }
}

/* The job stops answering its request: out of its session (whose last
 * worker it may have been: *destroy then says the session is to be freed)
 * and onto m->detached.  Under park_mu. */
/* Out of the session's in-flight list first (before the question goes out
 * and the request ends: the session's end must not cancel the execution,
 * which outlives it), still counted as its worker. */
static void unlist_locked(struct job *j)
{
    struct hutch_mcp_session *s = j->s;

    pthread_mutex_lock(&s->mu);
    for (struct inflight **f = &s->inflight; *f; f = &(*f)->next)
        if (*f == &j->fl) {
            *f = j->fl.next;
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

static void detach_locked(struct job *j, int *destroy)
{
    struct hutch_mcp_session *s = j->s;

    unlist_locked(j);
    pthread_mutex_lock(&s->mu);
    s->workers--;
    *destroy = s->closing && s->workers == 0;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    j->attached = 0;
    j->next_detached = j->m->detached;
    j->m->detached = j;
}

/* A request takes a detached job over.  Under park_mu.  -EBUSY when its
 * session has too many requests in flight. */
static int attach_locked(struct job *j, struct hutch_mcp_session *s, void *stream,
                         const cJSON *id)
{
    cJSON *nid = cJSON_Duplicate(id, 1);
    char *key = cJSON_PrintUnformatted(id);

    if (!nid || !key) {
        cJSON_Delete(nid);
        free(key);
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    if (s->workers >= HUTCH_MCP_MAX_INFLIGHT) {
        pthread_mutex_unlock(&s->mu);
        cJSON_Delete(nid);
        free(key);
        return -EBUSY;
    }
    s->workers++;
    free(j->fl.key);
    j->fl.key = key;
    j->fl.next = s->inflight;
    s->inflight = &j->fl;
    pthread_mutex_unlock(&s->mu);
    detached_remove_locked(j->m, j);
    cJSON_Delete(j->id);
    j->id = nid;
    j->s = s;
    j->stream = stream;
    j->attached = 1;
    pthread_cond_broadcast(&j->attach_cond);
    return 0;
}

/* A task's question: the task is input_required (tasks/get shows the
 * elicitation) until tasks/update answers, tasks/cancel cancels, or the
 * time runs out.  Takes params. */
static int ask_task(struct job *j, cJSON *params, uint64_t deadline, char *why,
                    size_t why_len)
{
    struct hutch_mcp *m = j->m;
    struct parked p = {.j = j, .key = "approve"};
    struct task *t = j->task;
    cJSON *reqs = cJSON_CreateObject(), *ask = cJSON_AddObjectToObject(reqs, "approve");
    int r;

    cJSON_AddStringToObject(ask, "method", "elicitation/create");
    cJSON_AddItemToObject(ask, "params", params);
    hutch_cond_init_mono(&p.cond);
    pthread_mutex_lock(&m->park_mu);
    if (m->stopping || strcmp(t->status, "working")) {
        pthread_mutex_unlock(&m->park_mu);
        cJSON_Delete(reqs);
        pthread_cond_destroy(&p.cond);
        return HUTCH_ANSWER_CANCEL;
    }
    p.next = m->parked;
    m->parked = &p;
    t->q = &p;
    t->input_requests = reqs;
    t->status = "input_required";
    iso_now(t->updated, sizeof(t->updated));
    while (!p.answered && !m->stopping &&
           hutch_cond_wait_until(&p.cond, &m->park_mu, deadline) != ETIMEDOUT)
        ;
    parked_remove_locked(m, &p);
    t->q = NULL;
    cJSON_Delete(t->input_requests);
    t->input_requests = NULL;
    if (!strcmp(t->status, "input_required"))
        t->status = "working";
    iso_now(t->updated, sizeof(t->updated));
    pthread_mutex_unlock(&m->park_mu);
    pthread_cond_destroy(&p.cond);
    if (p.answered != 1)
        return p.answered < 0 || m->stopping ? HUTCH_ANSWER_CANCEL
                                             : HUTCH_ANSWER_TIMEOUT;
    r = hutch_approval_answer(p.answer, why, why_len);
    cJSON_Delete(p.answer);
    return r;
}

/* Park the job on a question (an elicitation/create with params, taken)
 * asked through its request's result, under `key` in inputRequests: 0 with
 * *answer (the client's answer, caller frees), HUTCH_ANSWER_TIMEOUT or
 * HUTCH_ANSWER_CANCEL, or negative with why. */
static int park_question(struct job *j, const char *key, cJSON *params, unsigned ms,
                         cJSON **answer, char *why, size_t why_len)
{
    struct hutch_mcp *m = j->m;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct parked p = {.j = j, .key = key};
    uint64_t deadline = hutch_now_ms() + ms;
    char token[HUTCH_REQSTATE_MAX];
    cJSON *res, *reqs, *ask;
    struct hutch_mcp_session *s;
    void *stream;
    cJSON *id;
    int destroy = 0, r;

    *answer = NULL;
    pthread_mutex_lock(&m->park_mu);
    while (!j->attached && !m->stopping &&
           hutch_cond_wait_until(&j->attach_cond, &m->park_mu, deadline) != ETIMEDOUT)
        ;
    if (!j->attached || m->stopping) {
        pthread_mutex_unlock(&m->park_mu);
        cJSON_Delete(params);
        return m->stopping ? HUTCH_ANSWER_CANCEL : HUTCH_ANSWER_TIMEOUT;
    }
    p.q = ++j->questions;
    r = hutch_reqstate_make(j->principal, j->hj.execution, p.q, ms, token,
                            sizeof(token), &err);
    res = cJSON_CreateObject();
    reqs = cJSON_AddObjectToObject(res, "inputRequests");
    ask = cJSON_AddObjectToObject(reqs, key);
    if (r < 0 || !ask ||
        !cJSON_AddStringToObject(res, "resultType", "input_required") ||
        !cJSON_AddStringToObject(ask, "method", "elicitation/create") ||
        !cJSON_AddStringToObject(res, "requestState", token)) {
        pthread_mutex_unlock(&m->park_mu);
        cJSON_Delete(params);
        cJSON_Delete(res);
        snprintf(why, why_len, "%s", r < 0 ? err.msg : "out of memory");
        return r < 0 ? r : -ENOMEM;
    }
    cJSON_AddItemToObject(ask, "params", params);
    hutch_cond_init_mono(&p.cond);
    p.next = m->parked;
    m->parked = &p;
    s = j->s;
    stream = j->stream;
    id = cJSON_Duplicate(j->id, 1);
    /* Out of the request's in-flight list, then sent while the job still
     * counts as the session's worker (the session, and the stream it owes
     * an answer, cannot go before), then detached: if the session closed
     * meanwhile, it is this job's to free, as job_main does. */
    unlist_locked(j);
    if (id)
        mcp_send_result(s, stream, id, res);
    else
        cJSON_Delete(res);
    detach_locked(j, &destroy);
    while (!p.answered && !m->stopping &&
           hutch_cond_wait_until(&p.cond, &m->park_mu, deadline) != ETIMEDOUT)
        ;
    if (!p.answered)
        parked_remove_locked(m, &p);
    pthread_mutex_unlock(&m->park_mu);
    cJSON_Delete(id);
    if (destroy)
        mcp_session_destroy(s);
    pthread_cond_destroy(&p.cond);
    if (p.answered != 1)
        return m->stopping ? HUTCH_ANSWER_CANCEL : HUTCH_ANSWER_TIMEOUT;
    *answer = p.answer;
    return 0;
}

/* hutch_ask_fn (govern.h) for a 2026 request: park the execution and ask
 * the policy's question through the request's result. */
static int ask_modern(void *arg, const char *tool, const char *question,
                      const cJSON *args, unsigned ms, char *why, size_t why_len)
{
    struct job *j = arg;
    cJSON *params, *answer = NULL;
    int r;

    if (!j->can_elicit) {
        snprintf(why, why_len,
                 "the client's request declared no elicitation capability (_meta "
                 "io.modelcontextprotocol/clientCapabilities)");
        return -ENOTSUP;
    }
    if (!(params = hutch_approval_params(tool, question, args))) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    if (j->task)
        return ask_task(j, params, hutch_now_ms() + ms, why, why_len);
    r = park_question(j, "approve", params, ms, &answer, why, why_len);
    if (r != 0)
        return r;
    r = hutch_approval_answer(answer, why, why_len);
    cJSON_Delete(answer);
    return r;
}

/* hutch_elicitor (upstream.h): an upstream's own question, passed to this
 * execution's client as it came: during the call in the 2025 era, as an
 * input_required of the request in 2026.  *result is the client's answer
 * as the upstream expects it ({action, content}). */
static int elicit_client(void *arg, const cJSON *params, unsigned ms, cJSON **result,
                         char *why, size_t why_len)
{
    struct job *j = arg;
    struct hutch_err err = HUTCH_ERR_INIT;
    cJSON *p = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
    int r;

    *result = NULL;
    if (!p) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    if (!j->modern) {
        r = hutch_asks_request(j->s->asks, job_send, j, "elicitation/create", p, ms,
                               result, &err);
        if (r < 0)
            snprintf(why, why_len, "%s", err.msg);
        return r;
    }
    if (j->task) {
        cJSON_Delete(p);
        snprintf(why, why_len, "an upstream's questions are not passed on from a task");
        return -ENOTSUP;
    }
    r = park_question(j, "input", p, ms, result, why, why_len);
    if (r == HUTCH_ANSWER_TIMEOUT || r == HUTCH_ANSWER_CANCEL) {
        snprintf(why, why_len, "%s",
                 r == HUTCH_ANSWER_TIMEOUT ? "no answer in time" : "hutch is stopping");
        return -ETIMEDOUT;
    }
    return r;
}

/* execute_code with a requestState: the answer to a parked question.  The
 * request takes the job over (its response is the job's), or is refused
 * with why: a token that does not check out (reqstate.h), a question no
 * longer asked (answered already, or its time ran out), a missing answer. */
void mcp_on_answer(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params)
{
    struct hutch_mcp *m = s->m;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(params, "requestState");
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
    const cJSON *ans;
    struct hutch_err err = HUTCH_ERR_INIT;
    char exe[64];
    uint64_t q = 0;
    struct parked *p;
    int r;

    if (!cJSON_IsString(rs) || hutch_reqstate_check(rs->valuestring, s->principal, exe,
                                                    sizeof(exe), &q, &err) < 0) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS, "execute_code: %s",
                       cJSON_IsString(rs) ? err.msg : "requestState must be a string");
        return;
    }
    pthread_mutex_lock(&m->park_mu);
    for (p = m->parked; p; p = p->next)
        if (p->q == q && !strcmp(p->j->hj.execution, exe))
            break;
    ans = p ? cJSON_GetObjectItemCaseSensitive(responses, p->key) : NULL;
    if (p && !cJSON_IsObject(ans)) {
        char key[16];
        snprintf(key, sizeof(key), "%s", p->key);
        pthread_mutex_unlock(&m->park_mu);
        mcp_send_error(
            s, stream, id, HUTCH_RPC_INVALID_PARAMS,
            "execute_code: inputResponses.%s is missing: answer the "
            "elicitation/create of the input_required result, then call again",
            key);
        return;
    }
    if (!p) {
        pthread_mutex_unlock(&m->park_mu);
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "execute_code: requestState names a question that is no longer "
                       "asked: it was answered already (a requestState is good for one "
                       "answer) or its time ran out (the call was denied)");
        return;
    }
    r = attach_locked(p->j, s, stream, id);
    if (r == 0 && !(p->answer = cJSON_Duplicate(ans, 1)))
        r = -ENOMEM;
    if (r < 0) {
        pthread_mutex_unlock(&m->park_mu);
        mcp_send_error(s, stream, id, HUTCH_RPC_INTERNAL_ERROR, "execute_code: %s",
                       r == -EBUSY ? "too many requests in flight on this session"
                                   : "out of memory");
        return;
    }
    parked_remove_locked(m, p);
    p->answered = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&m->park_mu);
}

/* hutch_mcp_free: the questions are not answered, detached executions are
 * cancelled, and every one is waited for. */
void mcp_park_stop_all(struct hutch_mcp *m)
{
    pthread_mutex_lock(&m->park_mu);
    m->stopping = 1;
    for (struct parked *p = m->parked; p; p = p->next)
        pthread_cond_signal(&p->cond);
    for (struct job *j = m->detached; j; j = j->next_detached) {
        atomic_store(&j->fl.cancel, 1);
        pthread_cond_broadcast(&j->attach_cond);
    }
    while (m->detached)
        pthread_cond_wait(&m->park_cond, &m->park_mu);
    while (m->tasks) {
        struct task *t = m->tasks;
        m->tasks = t->next;
        task_free(t);
    }
    pthread_mutex_unlock(&m->park_mu);
    pthread_mutex_destroy(&m->park_mu);
    pthread_cond_destroy(&m->park_cond);
}

static cJSON *execute_code(struct job *j)
{
    struct hutch_mcp *m = j->m;
    struct hutch_exec_args args;
    struct hutch_job_req *job = &j->hj;
    struct hutch_exec_result res;
    struct hutch_err err = {0};
    char msg[1200];
    cJSON *out = NULL;
    int r;

    /* Errors are tool errors (isError), so the model can correct itself. */
    if (hutch_exec_args_parse(j->args, &args, &err) < 0)
        return mcp_text_result(err.msg, 1);
    *job = args.job; /* args keeps what it allocated: freed below */
    job->principal = j->principal;
    job->stream_fd_out = job->stream_fd_err = -1;
    job->cancel = &j->fl.cancel;
    job->tick = tick;
    job->tick_arg = j;
    /* The policy's questions: a 2025 client that can elicit is asked
     * during this call; otherwise nobody can be asked (a denial). */
    /* An upstream's own questions go to the same client, when it can be
     * asked (2025: declared elicitation at initialize; 2026: in this
     * request's capabilities). */
    if (j->modern ? j->can_elicit : j->s->can_elicit && j->s->asks)
        job->elicit = (struct hutch_elicitor){elicit_client, j};
    if (j->modern) {
        job->ask = ask_modern;
        job->ask_arg = j;
    } else if (j->s->can_elicit && j->s->asks) {
        job->ask = ask_client;
        job->ask_arg = j;
    }

    hutch_exec_result_init(&res);
    r = m->o.jobs ? hutch_job_run(m->o.jobs, job, &res, &err)
                  : hutch_err_set(&err, -ENOSYS, "this server runs no code");
    if (r == -EPERM || r == -EAGAIN) {
        snprintf(msg, sizeof(msg), "execute_code %s", err.msg);
        out = mcp_text_result(msg, 1);
    } else if (r == -EBUSY) {
        snprintf(msg, sizeof(msg), "execute_code not run: %s", err.msg);
        out = mcp_text_result(msg, 1);
    } else if (r < 0) {
        snprintf(msg, sizeof(msg), "hutch could not run the code: %s", err.msg);
        out = mcp_text_result(msg, 1);
    } else {
        out = mcp_exec_result(m, &res, j->principal, args.trace, j->structured);
        hutch_info("execution %s (%s, %s on %s%s): exit %d in %llu ms, %zu tool calls",
                   job->execution, j->principal, job->language, res.executor,
                   res.warm ? ", warm" : "", res.exit_code,
                   (unsigned long long)res.duration_ms, res.tool_calls.n);
    }
    hutch_budget_move(&j->held, &res.budget);
    hutch_exec_result_free(&res);
    hutch_exec_args_free(&args);
    return out;
}

static void job_free(struct job *j)
{
    hutch_budget_give(&j->held, atomic_load(&j->held.used));
    pthread_cond_destroy(&j->attach_cond);
    cJSON_Delete(j->id);
    cJSON_Delete(j->progress_token);
    cJSON_Delete(j->args);
    free(j->fl.key);
    free(j->direct);
    free(j);
}

static void *job_main(void *p)
{
    struct job *j = p;
    struct hutch_mcp *m = j->m;
    struct hutch_mcp_session *s;
    int last, attached = 1;
    cJSON *result =
        j->direct ? hutch_direct_call(&m->direct, j->principal, j->direct, j->args)
                  : execute_code(j);

    /* The request it answers now (a 2026 job may have changed requests, or
     * have none left: its question timed out while parked). */
    pthread_mutex_lock(&m->park_mu);
    s = j->s;
    if (j->task) { /* a task: the result goes into its record */
        struct task *t = j->task;
        detached_remove_locked(m, j);
        pthread_cond_broadcast(&m->park_cond);
        t->j = NULL;
        t->ended_ms = hutch_now_ms();
        iso_now(t->updated, sizeof(t->updated));
        if (!strcmp(t->status, "cancelled")) {
            cJSON_Delete(result);
        } else if (result) {
            hutch_mcp_stamp_result(result, NULL);
            t->result = result;
            t->status = "completed";
        } else {
            t->status = "failed";
            t->error = cJSON_CreateObject();
            cJSON_AddNumberToObject(t->error, "code", HUTCH_RPC_INTERNAL_ERROR);
            cJSON_AddStringToObject(t->error, "message",
                                    "the execution produced no result");
        }
        pthread_mutex_unlock(&m->park_mu);
        if (m->o.jobs)
            hutch_job_release(m->o.jobs, &j->hj);
        job_free(j);
        return NULL;
    }
    if (j->modern && !j->attached) {
        attached = 0;
        detached_remove_locked(m, j);
        pthread_cond_broadcast(&m->park_cond);
    } else {
        pthread_mutex_lock(&s->mu);
        for (struct inflight **f = &s->inflight; *f; f = &(*f)->next)
            if (*f == &j->fl) {
                *f = j->fl.next;
                break;
            }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&m->park_mu);
    if (!attached) { /* nobody waits for this result any more */
        hutch_info("execution %s: its result has no request to go to (a question "
                   "of the policy was not answered in time): dropped",
                   j->hj.execution);
        cJSON_Delete(result);
    } else if (!result) { /* a direct tool that is gone, or the switch turned off */
        mcp_send_error(s, j->stream, j->id, HUTCH_RPC_INVALID_PARAMS,
                       "Unknown tool: %.128s", j->direct);
    } else if (atomic_load(&j->fl.cancel)) {
        /* The client gave up on it; the response only closes the stream. */
        cJSON_Delete(result);
        mcp_send_error(s, j->stream, j->id, HUTCH_RPC_REQUEST_CANCELLED,
                       "request cancelled");
    } else {
        if (j->modern)
            hutch_mcp_stamp_result(result, NULL);
        mcp_send_result(s, j->stream, j->id, result);
    }
    if (m->o.jobs)
        hutch_job_release(m->o.jobs, &j->hj);
    job_free(j);
    if (!attached)
        return NULL;
    pthread_mutex_lock(&s->mu);
    s->workers--;
    last = s->closing && s->workers == 0;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    if (last) /* closed meanwhile: the session is this worker's to free */
        mcp_session_destroy(s);
    return NULL;
}

/* A job for a request (s, stream, id), not yet started; NULL when out of
 * memory (an error was sent). */
static struct job *job_new(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                           const cJSON *params, const cJSON *args, const char *direct,
                           int modern)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    struct job *j = calloc(1, sizeof(*j));

    if (!j) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    j->m = s->m;
    j->s = s;
    j->stream = stream;
    j->modern = modern;
    j->attached = 1;
    hutch_cond_init_mono(&j->attach_cond);
    snprintf(j->principal, sizeof(j->principal), "%s", s->principal);
    /* 2026: the capabilities come with each request. */
    j->can_elicit =
        modern &&
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(meta, HUTCH_MCP_META_CLIENT_CAPS),
            "elicitation"));
    j->structured = mcp_wants_structured(s, params, modern);
    j->id = cJSON_Duplicate(id, 1);
    j->args = args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject();
    j->fl.key = cJSON_PrintUnformatted(id);
    j->direct = direct ? strdup(direct) : NULL;
    if (cJSON_IsString(token) || cJSON_IsNumber(token))
        j->progress_token = cJSON_Duplicate(token, 1);
    if (!j->id || !j->args || !j->fl.key || (direct && !j->direct)) {
        job_free(j);
        mcp_send_error(s, stream, id, HUTCH_RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    return j;
}

static int spawn_job(struct job *j)
{
    pthread_attr_t attr;
    pthread_t th;
    int r;

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    r = pthread_create(&th, &attr, job_main, j);
    pthread_attr_destroy(&attr);
    return r ? -r : 0;
}

void mcp_start_job(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params, const cJSON *args, const char *direct,
                   int modern)
{
    struct job *j = job_new(s, stream, id, params, args, direct, modern);

    if (!j)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->workers >= HUTCH_MCP_MAX_INFLIGHT) {
        pthread_mutex_unlock(&s->mu);
        job_free(j);
        mcp_send_error(s, stream, id, HUTCH_RPC_INTERNAL_ERROR,
                       "more than %d requests in flight on this session; retry later",
                       HUTCH_MCP_MAX_INFLIGHT);
        return;
    }
    s->workers++;
    j->fl.next = s->inflight;
    s->inflight = &j->fl;
    pthread_mutex_unlock(&s->mu);

    if (spawn_job(j) < 0) {
        pthread_mutex_lock(&s->mu);
        s->inflight = j->fl.next;
        s->workers--;
        pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->mu);
        mcp_send_error(s, stream, id, HUTCH_RPC_INTERNAL_ERROR,
                       "cannot start a worker thread");
        job_free(j);
    }
}

/* --- tasks (the 2026-07-28 tasks extension, SEP-2663) --------------------------
 *
 * A 2026 request whose _meta capabilities declare the tasks extension gets
 * execute_code as a task: the call answers at once with the task (flat:
 * resultType "task", taskId, status, times, ttlMs, pollIntervalMs) and the
 * execution runs on, answering no request (a detached job); tasks/get
 * reads its status and, once it ended, its result inline; tasks/cancel
 * cancels it; a question of the policy makes it input_required, answered
 * with tasks/update.  Task records live in this process (m->tasks, under
 * park_mu): the taskId names the process, so another replica says where
 * it waits.  A principal sees only its own tasks. */
/* Drops ended tasks past their ttl, then the oldest ended ones while there
 * are more than `keep`.  Under park_mu. */
static void tasks_sweep_locked(struct hutch_mcp *m, unsigned keep)
{
    uint64_t now = hutch_now_ms();
    unsigned n = 0;

    for (struct task **p = &m->tasks; *p;) {
        struct task *t = *p;
        if (t->ended_ms && now - t->ended_ms >= HUTCH_TASK_TTL_MS) {
            *p = t->next;
            task_free(t);
        } else {
            n++;
            p = &t->next;
        }
    }
    while (n > keep) { /* newest first: the last ended one is the oldest */
        struct task **victim = NULL;
        for (struct task **p = &m->tasks; *p; p = &(*p)->next)
            if ((*p)->ended_ms)
                victim = p;
        if (!victim)
            break;
        struct task *t = *victim;
        *victim = t->next;
        task_free(t);
        n--;
    }
    m->ntasks = n;
}

/* The task as tasks/get shows it (and, flat, as a CreateTaskResult with
 * resultType "task").  Under park_mu. */
static cJSON *task_json(const struct task *t, int created)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "resultType", created ? "task" : "complete");
    cJSON_AddStringToObject(r, "taskId", t->id);
    cJSON_AddStringToObject(r, "status", t->status);
    cJSON_AddStringToObject(r, "createdAt", t->created);
    cJSON_AddStringToObject(r, "lastUpdatedAt", t->updated);
    cJSON_AddNumberToObject(r, "ttlMs", HUTCH_TASK_TTL_MS);
    cJSON_AddNumberToObject(r, "pollIntervalMs", HUTCH_TASK_POLL_MS);
    if (!created && t->result)
        cJSON_AddItemToObject(r, "result", cJSON_Duplicate(t->result, 1));
    if (!created && t->error)
        cJSON_AddItemToObject(r, "error", cJSON_Duplicate(t->error, 1));
    if (!created && t->input_requests)
        cJSON_AddItemToObject(r, "inputRequests",
                              cJSON_Duplicate(t->input_requests, 1));
    return r;
}

/* Whether a 2026 request declared the tasks extension. */
int mcp_wants_tasks(const cJSON *params)
{
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "_meta"), HUTCH_MCP_META_CLIENT_CAPS);
    return cJSON_GetObjectItemCaseSensitive(
               cJSON_GetObjectItemCaseSensitive(caps, "extensions"),
               HUTCH_MCP_EXT_TASKS) != NULL;
}

/* execute_code as a task; 0, or -EAGAIN when no record can be kept (run it
 * as a plain call then). */
int mcp_start_task(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params, const cJSON *args)
{
    struct hutch_mcp *m = s->m;
    struct task *t = calloc(1, sizeof(*t));
    struct job *j;
    char a[17], b[17];
    cJSON *created;

    if (!t)
        return -EAGAIN;
    pthread_mutex_lock(&m->park_mu);
    tasks_sweep_locked(m, HUTCH_TASKS_MAX - 1);
    if (m->ntasks >= HUTCH_TASKS_MAX || m->stopping) {
        pthread_mutex_unlock(&m->park_mu);
        free(t);
        return -EAGAIN;
    }
    pthread_mutex_unlock(&m->park_mu);
    if (!(j = job_new(s, stream, id, params, args, NULL, 1))) {
        free(t);
        return 0; /* an error was sent */
    }
    hutch_random_id(a);
    hutch_random_id(b);
    snprintf(t->id, sizeof(t->id), "%s.%s%s", hutch_instance_id(), a, b);
    snprintf(t->principal, sizeof(t->principal), "%s", s->principal);
    t->status = "working";
    iso_now(t->created, sizeof(t->created));
    memcpy(t->updated, t->created, sizeof(t->updated));
    t->j = j;
    j->task = t;
    pthread_mutex_lock(&m->park_mu);
    j->attached = 0; /* a task answers no request */
    j->next_detached = m->detached;
    m->detached = j;
    t->next = m->tasks;
    m->tasks = t;
    m->ntasks++;
    created = task_json(t, 1);
    pthread_mutex_unlock(&m->park_mu);
    if (spawn_job(j) < 0) {
        pthread_mutex_lock(&m->park_mu);
        detached_remove_locked(m, j);
        t->j = NULL;
        t->status = "failed";
        t->ended_ms = hutch_now_ms();
        t->error = cJSON_CreateObject();
        cJSON_AddNumberToObject(t->error, "code", HUTCH_RPC_INTERNAL_ERROR);
        cJSON_AddStringToObject(t->error, "message", "cannot start a worker thread");
        pthread_mutex_unlock(&m->park_mu);
        job_free(j);
    }
    mcp_send_result(s, stream, id, created);
    return 0;
}

/* The task of `params.taskId` for this principal, under park_mu; NULL with
 * an error sent. */
static struct task *find_task_locked(struct hutch_mcp_session *s, void *stream,
                                     const cJSON *id, const cJSON *params)
{
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
    const char *inst = hutch_instance_id();

    if (!cJSON_IsString(tid)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "params.taskId must be a string");
        return NULL;
    }
    for (struct task *t = s->m->tasks; t; t = t->next)
        if (!strcmp(t->id, tid->valuestring) && !strcmp(t->principal, s->principal))
            return t;
    if (strncmp(tid->valuestring, inst, strlen(inst)) ||
        tid->valuestring[strlen(inst)] != '.')
        mcp_send_error(
            s, stream, id, HUTCH_RPC_INVALID_PARAMS,
            "Unknown task %.120s: tasks live in the hutch process that started "
            "them (this one is %s); send tasks/* to that one (route on Mcp-Name)",
            tid->valuestring, inst);
    else
        mcp_send_error(
            s, stream, id, HUTCH_RPC_INVALID_PARAMS,
            "Unknown task %.120s (never started here, another principal's, or "
            "ended more than %u s ago)",
            tid->valuestring, HUTCH_TASK_TTL_MS / 1000);
    return NULL;
}

void mcp_on_tasks(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                  const char *meth, const cJSON *params)
{
    struct hutch_mcp *m = s->m;
    struct task *t;
    cJSON *r = NULL;

    if (!mcp_wants_tasks(params)) {
        cJSON *data = cJSON_CreateObject();
        cJSON *req = cJSON_AddObjectToObject(data, "requiredCapabilities");
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(req, "extensions"),
                                HUTCH_MCP_EXT_TASKS);
        mcp_send_msg(
            s, stream,
            hutch_mcp_error_response(id, HUTCH_RPC_MISSING_CLIENT_CAP,
                                     "Missing required client capability: the "
                                     "request's clientCapabilities do not declare "
                                     "the " HUTCH_MCP_EXT_TASKS " extension",
                                     data),
            1);
        return;
    }
    pthread_mutex_lock(&m->park_mu);
    tasks_sweep_locked(m, HUTCH_TASKS_MAX);
    if (!(t = find_task_locked(s, stream, id, params))) {
        pthread_mutex_unlock(&m->park_mu);
        return;
    }
    if (!strcmp(meth, "tasks/get")) {
        r = task_json(t, 0);
    } else if (!strcmp(meth, "tasks/cancel")) {
        if (!t->ended_ms && t->j && strcmp(t->status, "cancelled")) {
            atomic_store(&t->j->fl.cancel, 1);
            t->status = "cancelled";
            iso_now(t->updated, sizeof(t->updated));
            if (t->q) { /* its question is not answered */
                t->q->answered = -1;
                pthread_cond_signal(&t->q->cond);
            }
        }
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "resultType", "complete");
    } else { /* tasks/update: the answer to its question */
        const cJSON *ans = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(params, "inputResponses"), "approve");
        if (!t->q || !cJSON_IsObject(ans)) {
            pthread_mutex_unlock(&m->park_mu);
            mcp_send_error(
                s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                t->q ? "tasks/update: inputResponses.approve is missing"
                     : "tasks/update: task %.120s asks nothing now (status %s)",
                t->id, t->status);
            return;
        }
        t->q->answer = cJSON_Duplicate(ans, 1);
        t->q->answered = t->q->answer ? 1 : -1;
        pthread_cond_signal(&t->q->cond);
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "resultType", "complete");
    }
    pthread_mutex_unlock(&m->park_mu);
    mcp_send_result(s, stream, id, r);
}
