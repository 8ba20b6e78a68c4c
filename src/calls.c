/* calls.c — the tool calls of one execution, between the run loop and the
 * tool handler (govern.c or bridge.c): a runner's `tool_call` is started
 * from the loop's thread, or becomes a job for a worker thread, and its
 * answer a `tool_result` sent back in completion order.  Every call's
 * outcome is recorded in the execution's tool_calls, calls still open when
 * the execution ends as "unfinished".
 *
 * Started calls.  With a start function (hutch_calls_set_start: govern.c's),
 * the loop decides a call and sends it upstream itself, and whoever sees
 * the upstream's answer (a stdio server's I/O thread) ends it: call_done
 * writes the tool_result as a worker would.  No thread waits for it, so a
 * call costs two thread hops less.  The loop is held meanwhile only by
 * what never blocks: the decision (a policy hook has HUTCH_POLICY_HOOK_MS
 * of CPU at most) and a write the pipe takes at once.  What the start
 * function cannot finish without blocking (a question to the user, an HTTP
 * or 2026-era server, a tool of a server still starting) it hands back,
 * and a worker goes on with it.  A started call has two references, the
 * loop's and call_done's (call_done may come before the start function
 * returns); at most HUTCH_CALL_WORKERS are on their way at once, further
 * ones take a worker, and hutch_calls_free waits until every started call
 * has ended (its answer, its timeout, or its server's end: upstream_stdio.c
 * ends each).
 *
 * Workers.  Calls run on worker threads so that Promise.all and Python
 * threads get concurrent upstream calls, and a slow call never stops the
 * loop from draining output or watching the deadline.  Each execution has
 * its own pool of at most HUTCH_CALL_WORKERS threads, created lazily (one
 * more only when a call arrives and every worker is busy) and kept until the
 * execution ends: 100 sequential calls cost one thread creation, not 100.
 * Calls past the pool's size wait in a FIFO queue and start as workers free
 * up.  Per execution rather than process-wide, because `hutch serve` runs
 * many executions at once and a call may block for up to its timeout (60 s
 * by default, and at most 80% of the execution's remaining time: caps.h
 * HUTCH_CALL_SHARE_OF_REMAINING): in a shared pool, one execution's Promise.all of slow
 * calls would hold every worker and starve the others, and any cap per execution below
 * the pool's size still lets a few such executions do it.  With a pool each, an
 * execution only ever waits for its own calls; the cost is up to HUTCH_CALL_WORKERS
 * threads per running execution, which is small next to the sandbox each of them
 * already has.
 *
 * Answers.  The worker that ran a call writes its tool_result to the
 * runner's channel itself, without waking the loop: one thread hop less per
 * call.  What the channel does not take at once waits in `unsent` (capped)
 * and the loop writes it when the channel is writable; a byte on the pipe
 * tells the loop to look (unsent bytes appeared, or the runner stopped
 * reading).  Answers are written whole, in completion order, under q->mu.
 * After the job's `run` message this file is the channel's only writer: a
 * runner asks for tools only after it has read that message whole.
 * hutch_calls_end stops all writing before the sandbox, and its channel,
 * is destroyed.
 *
 * Threads and locks.  The loop's thread calls every hutch_calls_* function.
 * q->mu guards the queue, the pool's counters, the open list, the record,
 * the unsent bytes, the writes to the channel, the count of started calls
 * and their references; a worker holds it to take a call and to answer it,
 * never while the call runs, and call_done takes it like a worker (with no
 * lock of the upstream's held).  Workers block every
 * signal (hutch's main thread takes them), so a failed write to a closed
 * channel or to an upstream's stdin raises no SIGPIPE in them.
 *
 * Not here: the run loop and the wire protocol (exec.c, wire.c), deciding
 * and forwarding a call (govern.c, bridge.c, upstream.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "calls.h"
#include "caps.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "wire.h"

/* Lua hooks in the policy run on the workers and need room for nested C
 * calls (~500 KiB). */
#define WORKER_STACK (2u << 20)

struct call {
    struct hutch_calls *q;
    int64_t id;
    char *tool;
    cJSON *args;
    uint64_t deadline_ms;
    uint64_t t0; /* µs */
    struct hutch_tool_reply reply;
    struct hutch_budget *budget;
    size_t cost;                        /* args, charged to budget */
    struct hutch_tool_cont cont;        /* a decided call's rest, or none */
    int refs;                           /* under q->mu: the loop's, done's */
    struct call *next;                  /* queued */
    struct call *open_prev, *open_next; /* accepted, not answered */
};

struct hutch_calls {
    pthread_mutex_t mu;
    pthread_cond_t work;               /* a queued call, or stop */
    struct call *queued, *queued_tail; /* waiting for a worker */
    size_t nqueued;
    int nidle;    /* workers waiting for work */
    int nworkers; /* created; changed by the loop only */
    bool stop;    /* the execution ended: nothing starts, nothing is sent */
    pthread_t workers[HUTCH_CALL_WORKERS];
    int pipe[2];        /* a byte: the loop must look */
    atomic_bool nudged; /* a byte may be in the pipe */
    int chan_fd;        /* the runner's channel, non-blocking */
    struct hutch_buf unsent;
    size_t unsent_off;
    size_t unsent_cost;          /* unsent bytes charged to budget */
    struct hutch_budget *budget; /* the execution's; NULL: none */
    bool chan_gone; /* a write failed: the runner is gone, answers dropped */
    bool failed;    /* the runner does not read its answers */
    struct hutch_call_log *record;
    struct call *open_head, *open_tail;
    /* The loop's thread only. */
    hutch_tool_fn fn;
    void *fn_arg;
    hutch_tool_fn search_fn; /* tools.search (HUTCH_CALLS_SEARCH) */
    void *search_arg;
    hutch_tool_start_fn start_fn; /* calls sent from the loop, or NULL */
    uint64_t ncalls;
    /* Under mu: calls started from the loop whose done has not returned;
     * hutch_calls_free waits for none (`idle`). */
    int nstarted;
    pthread_cond_t idle;
};

static void call_free(struct call *c)
{
    if (c->cont.drop)
        c->cont.drop(c->cont.arg); /* decided, never run */
    hutch_budget_give(c->budget, c->cost);
    free(c->tool);
    cJSON_Delete(c->args);
    cJSON_Delete(c->reply.result);
    free(c->reply.message);
    free(c->reply.tool);
    free(c->reply.server);
    free(c);
}

/* Under q->mu. */
static void open_add(struct hutch_calls *q, struct call *c)
{
    c->open_prev = q->open_tail;
    c->open_next = NULL;
    if (q->open_tail)
        q->open_tail->open_next = c;
    else
        q->open_head = c;
    q->open_tail = c;
}

/* Under q->mu. */
static void open_remove(struct hutch_calls *q, struct call *c)
{
    if (c->open_prev)
        c->open_prev->open_next = c->open_next;
    else
        q->open_head = c->open_next;
    if (c->open_next)
        c->open_next->open_prev = c->open_prev;
    else
        q->open_tail = c->open_prev;
    c->open_prev = c->open_next = NULL;
}

/* Appends a call to the record.  Under q->mu.  Out of memory, the call
 * goes unrecorded (the answer still goes to the runner). */
static void record_locked(struct hutch_calls *q, int64_t id, const char *tool,
                          const char *outcome, const char *message, uint64_t us)
{
    if (hutch_call_log_add(q->record, id, tool, outcome, message, (double)us / 1000.0) <
        0)
        hutch_warn("tool call %lld not recorded: out of memory", (long long)id);
}

static void nudge(struct hutch_calls *q)
{
    atomic_store(&q->nudged, true);
    if (write(q->pipe[1], "c", 1) < 0) {
        /* the pipe is full: the loop has enough to wake up for */
    }
}

/* Writes what is unsent, as much as the channel takes.  Under q->mu. */
static void flush_locked(struct hutch_calls *q)
{
    while (q->unsent_off < q->unsent.len && !q->chan_gone) {
        ssize_t n = write(q->chan_fd, q->unsent.data + q->unsent_off,
                          q->unsent.len - q->unsent_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                q->chan_gone = true; /* the runner is gone: drop */
            break;
        }
        q->unsent_off += (size_t)n;
    }
    if (q->unsent_off == q->unsent.len || q->chan_gone) {
        q->unsent.len = q->unsent_off = 0;
        hutch_budget_give(q->budget, q->unsent_cost);
        q->unsent_cost = 0;
    }
}

/* One whole line for the runner: written now unless something waits before
 * it; what the channel does not take is left to the loop.  Under q->mu. */
static void send_locked(struct hutch_calls *q, const char *line, size_t len)
{
    size_t off = 0;

    if (q->chan_gone || q->failed)
        return;
    if (q->unsent_off == q->unsent.len) {
        while (off < len) {
            ssize_t n = write(q->chan_fd, line + off, len - off);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) {
                    q->chan_gone = true;
                    return;
                }
                break;
            }
            off += (size_t)n;
        }
        if (off == len)
            return;
        nudge(q); /* the loop polls the channel for POLLOUT from now on */
    }
    if (hutch_budget_take(q->budget, len - off) < 0 ||
        hutch_buf_append(&q->unsent, line + off, len - off) < 0) {
        q->failed = true;
        nudge(q);
        return;
    }
    q->unsent_cost += len - off;
}

/* Records the call's outcome and sends its tool_result (takes
 * reply->result).  c: the call, when it was accepted (it is on the open
 * list, leaves it here and is freed with its last reference); NULL for an
 * answer given at once. */
static void answer(struct hutch_calls *q, struct call *c, int64_t id, const char *tool,
                   int r, struct hutch_tool_reply *reply, uint64_t t0)
{
    cJSON *msg;
    size_t len = 0, cost = 0;
    char *line, text[1024];
    const char *outcome = "ok", *rec_tool;
    uint64_t us;
    bool quiet = !strcmp(tool, HUTCH_CALLS_DESCRIBE); /* no tool call */
    bool gone = false;

    if (!strcmp(tool, HUTCH_CALLS_SEARCH))
        tool = "search_tools"; /* as the record and the messages name it */
    else if (quiet)
        tool = "describe";

    /* A result held, then encoded: both count until the line is sent. */
    if (r == 0 && reply->result) {
        cost = hutch_json_cost(reply->result);
        int br = hutch_budget_take(q->budget, cost);
        if (br < 0) {
            char big[1024], why[600];
            snprintf(big, sizeof(big),
                     "the result of %.100s takes about %zu MiB of hutch's memory, %s",
                     reply->tool ? reply->tool : tool, (cost + (1u << 20) - 1) >> 20,
                     hutch_budget_why(q->budget, br, why, sizeof(why)));
            cJSON_Delete(reply->result);
            reply->result = NULL;
            free(reply->message);
            reply->message = strdup(big);
            reply->code = "too_large";
            r = -E2BIG;
            cost = 0;
        }
    }
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "t", "tool_result");
    cJSON_AddNumberToObject(msg, "id", (double)id);
    if (r == 0) {
        cJSON_AddTrueToObject(msg, "ok");
        cJSON_AddItemToObject(msg, "result",
                              reply->result ? reply->result : cJSON_CreateNull());
        reply->result = NULL;
    } else {
        cJSON *e = cJSON_AddObjectToObject(msg, "error");
        const char *code = reply->code ? reply->code : "internal";
        if (reply->message)
            snprintf(text, sizeof(text), "%s", reply->message);
        else if (r == -E2BIG)
            snprintf(text, sizeof(text), "more than %d tool calls in one execution",
                     HUTCH_WIRE_MAX_TOOL_CALLS);
        else if (r == -ENOENT)
            snprintf(text, sizeof(text),
                     "unknown tool \"%.256s\": no upstream MCP servers are configured "
                     "(start hutch with --servers FILE)",
                     tool);
        else
            snprintf(text, sizeof(text), "tool call failed: %s", strerror(-r));
        cJSON_AddFalseToObject(msg, "ok");
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", text);
        outcome = code;
    }
    rec_tool = reply->tool ? reply->tool : tool;
    us = hutch_now_us() - t0;
    line = hutch_wire_encode(msg, &len);
    cJSON_Delete(msg);
    hutch_budget_give(q->budget, cost);

    pthread_mutex_lock(&q->mu);
    if (q->stop) {
        /* Too late: hutch_calls_end recorded it as unfinished, and frees it. */
        pthread_mutex_unlock(&q->mu);
        free(line);
        return;
    }
    if (c) {
        open_remove(q, c);
        gone = --c->refs == 0;
    }
    /* Counted where it is recorded: the metrics and the record agree. */
    if (!quiet) {
        hutch_metrics_tool_call(reply->server, outcome);
        record_locked(q, id, rec_tool, outcome, r == 0 ? NULL : text, us);
    }
    if (line) {
        send_locked(q, line, len);
    } else { /* out of memory: the runner would wait for it forever */
        q->failed = true;
        nudge(q);
    }
    pthread_mutex_unlock(&q->mu);
    free(line);
    if (gone)
        call_free(c);
}

/* A call of an upstream's tool: neither a search nor a describe. */
static bool is_tool_call(const char *tool)
{
    return strcmp(tool, HUTCH_CALLS_SEARCH) && strcmp(tool, HUTCH_CALLS_DESCRIBE);
}

/* A call ends well before its execution's deadline: the program gets a
 * `timeout` error it can catch, with time left to go on (the server's own
 * per-call limit may be lower still). */
static int call_timeout(const struct call *c)
{
    uint64_t now = hutch_now_ms();
    int ms = c->deadline_ms > now
                 ? (int)((c->deadline_ms - now) * HUTCH_CALL_SHARE_OF_REMAINING / 100)
                 : 0;
    return ms < 1 ? 1 : ms;
}

static void *worker_main(void *arg)
{
    struct hutch_calls *q = arg;

    pthread_mutex_lock(&q->mu);
    for (;;) {
        struct call *c;
        int timeout_ms, r;

        while (!q->queued && !q->stop) {
            q->nidle++;
            pthread_cond_wait(&q->work, &q->mu);
            q->nidle--;
        }
        if (q->stop)
            break; /* what is still queued never starts */
        c = q->queued;
        q->queued = c->next;
        if (!q->queued)
            q->queued_tail = NULL;
        q->nqueued--;
        c->next = NULL;
        pthread_mutex_unlock(&q->mu);

        timeout_ms = call_timeout(c);
        /* What the call makes hutch hold further down (the request sent
         * upstream) is charged to the execution, on this thread. */
        hutch_budget_set_current(c->budget);
        if (c->cont.run) {
            struct hutch_tool_cont cont = c->cont;
            c->cont = (struct hutch_tool_cont){0}; /* run frees its arg */
            r = cont.run(cont.arg, c->args, timeout_ms, &c->reply);
        } else if (is_tool_call(c->tool))
            r = q->fn(q->fn_arg, c->tool, c->args, timeout_ms, &c->reply);
        else if (q->search_fn)
            r = q->search_fn(q->search_arg,
                             strcmp(c->tool, HUTCH_CALLS_DESCRIBE) ? NULL : "describe",
                             c->args, timeout_ms, &c->reply);
        else
            r = -ENOSYS; /* answered "internal" */
        hutch_budget_set_current(NULL);
        /* The arguments are done with: their memory is the result's now. */
        cJSON_Delete(c->args);
        c->args = NULL;
        hutch_budget_give(c->budget, c->cost);
        c->cost = 0;
        answer(q, c, c->id, c->tool, r, &c->reply, c->t0);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Under q->mu.  0, or -EAGAIN when no worker exists and none can be made. */
static int add_worker_locked(struct hutch_calls *q)
{
    pthread_attr_t attr;
    sigset_t all, old;
    int r;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WORKER_STACK);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r = pthread_create(&q->workers[q->nworkers], &attr, worker_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        hutch_debug("tool calls: cannot create a worker thread: %s", strerror(r));
        return q->nworkers ? 0 : -EAGAIN; /* the others will take it */
    }
    q->nworkers++;
    return 0;
}

/* Puts c in the queue, and on the open list unless it is there.  0, or
 * -EAGAIN (c is in no queue) when there is no worker to run it. */
static int enqueue(struct hutch_calls *q, struct call *c, bool is_open)
{
    int r = 0;

    pthread_mutex_lock(&q->mu);
    if (q->queued_tail)
        q->queued_tail->next = c;
    else
        q->queued = c;
    q->queued_tail = c;
    q->nqueued++;
    if (q->nqueued > (size_t)q->nidle && q->nworkers < HUTCH_CALL_WORKERS)
        r = add_worker_locked(q);
    if (r < 0) {
        /* No worker at all: nobody can have taken c, the only one queued. */
        q->queued = q->queued_tail = NULL;
        q->nqueued = 0;
    } else {
        if (!is_open)
            open_add(q, c);
        if (q->nidle)
            pthread_cond_signal(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* What the loop must hear: the failure, once the pipe is drained (always
 * when it polled readable, `always`; else only when a byte may be in it,
 * which after most calls it is not). */
static int take(struct hutch_calls *q, bool always)
{
    char buf[64];
    bool failed;

    if (atomic_exchange(&q->nudged, false) || always)
        while (read(q->pipe[0], buf, sizeof(buf)) > 0)
            ;
    pthread_mutex_lock(&q->mu);
    failed = q->failed;
    pthread_mutex_unlock(&q->mu);
    return failed ? -EPIPE : 0;
}

/* The end of a call start() sent: on the upstream's reader, or on the
 * loop's thread inside start_fn. */
static void call_done(void *arg, int r, struct hutch_tool_reply *reply)
{
    struct call *c = arg;
    struct hutch_calls *q = c->q;

    (void)reply; /* c->reply */
    answer(q, c, c->id, c->tool, r, &c->reply, c->t0);
    pthread_mutex_lock(&q->mu);
    if (--q->nstarted == 0)
        pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
}

/* Hands c (its only reference, the loop's) to start_fn: sent from here and
 * answered by whoever sees the upstream's answer (call_done), answered at
 * once, or queued for a worker.  false, with c untouched, when as many
 * calls as a pool has workers are on their way already (calls sent from
 * the loop stay within that number, as calls on workers do). */
static bool start(struct hutch_calls *q, struct call *c)
{
    struct hutch_tool_cont cont = {0};
    bool gone;
    int r;

    pthread_mutex_lock(&q->mu);
    if (q->nstarted >= HUTCH_CALL_WORKERS) {
        pthread_mutex_unlock(&q->mu);
        return false;
    }
    open_add(q, c);
    c->refs = 2; /* this function's, and call_done's */
    q->nstarted++;
    pthread_mutex_unlock(&q->mu);
    hutch_budget_set_current(c->budget);
    r = q->start_fn(q->fn_arg, c->tool, c->args, call_timeout(c), &c->reply, call_done,
                    c, &cont);
    hutch_budget_set_current(NULL);
    if (r == HUTCH_TOOL_STARTED) {
        hutch_metrics_tool_thread(1);
        /* The arguments went out with the request; call_done reads
         * neither them nor their cost. */
        cJSON_Delete(c->args);
        c->args = NULL;
        hutch_budget_give(c->budget, c->cost);
        c->cost = 0;
        pthread_mutex_lock(&q->mu);
        gone = --c->refs == 0;
        pthread_mutex_unlock(&q->mu);
        if (gone)
            call_free(c);
        return true;
    }
    /* call_done never comes. */
    pthread_mutex_lock(&q->mu);
    c->refs = 1;
    q->nstarted--;
    pthread_mutex_unlock(&q->mu);
    if (r != HUTCH_TOOL_THREAD) {
        hutch_metrics_tool_thread(1);
        answer(q, c, c->id, c->tool, r, &c->reply, c->t0);
        return true;
    }
    c->cont = cont; /* dropped with c if it never runs */
    if (enqueue(q, c, true) == 0) {
        hutch_metrics_tool_thread(0);
        return true;
    }
    c->reply.code = "internal";
    answer(q, c, c->id, c->tool, -EAGAIN, &c->reply, c->t0);
    return true;
}

struct hutch_calls *hutch_calls_new(hutch_tool_fn fn, void *fn_arg, int chan_fd,
                                    struct hutch_call_log *record)
{
    struct hutch_calls *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    if (pipe2(q->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->idle, NULL);
    hutch_buf_init(&q->unsent, HUTCH_WIRE_MAX_PENDING);
    q->chan_fd = chan_fd;
    q->fn = fn;
    q->fn_arg = fn_arg;
    q->record = record;
    return q;
}

int hutch_calls_fd(const struct hutch_calls *q)
{
    return q->pipe[0];
}

void hutch_calls_set_search(struct hutch_calls *q, hutch_tool_fn fn, void *arg)
{
    q->search_fn = fn;
    q->search_arg = arg;
}

void hutch_calls_set_start(struct hutch_calls *q, hutch_tool_start_fn start_fn)
{
    q->start_fn = start_fn;
}

void hutch_calls_set_budget(struct hutch_calls *q, struct hutch_budget *budget)
{
    q->budget = budget;
}

int hutch_calls_submit(struct hutch_calls *q, int64_t id, const char *tool, cJSON *args,
                       uint64_t deadline_ms)
{
    struct hutch_tool_reply reply = {0};
    uint64_t t0 = hutch_now_us();
    size_t cost = args ? hutch_json_cost(args) : 0;
    struct call *c;
    int r, br;

    if (++q->ncalls > HUTCH_WIRE_MAX_TOOL_CALLS) {
        reply.code = "denied";
        r = -E2BIG;
    } else if (!q->fn) {
        reply.code = "unknown_tool";
        r = -ENOENT;
    } else if ((br = hutch_budget_take(q->budget, cost)) < 0) {
        char text[1024], why[600];
        snprintf(text, sizeof(text),
                 "the arguments of this call take about %zu MiB of hutch's memory, %s "
                 "(calls in flight hold theirs until they return)",
                 (cost + (1u << 20) - 1) >> 20,
                 hutch_budget_why(q->budget, br, why, sizeof(why)));
        reply.message = strdup(text);
        reply.code = "too_large";
        r = -E2BIG;
    } else {
        c = calloc(1, sizeof(*c));
        if (c) {
            c->budget = q->budget;
            c->cost = cost;
        } else {
            hutch_budget_give(q->budget, cost);
        }
        if (!c || !(c->tool = strdup(tool)) ||
            !(c->args = args ? args : cJSON_CreateObject())) {
            if (c)
                call_free(c);
            cJSON_Delete(args);
            reply.code = "internal";
            r = -ENOMEM;
        } else {
            args = NULL; /* the call's now */
            c->q = q;
            c->refs = 1;
            c->id = id;
            c->t0 = t0;
            c->deadline_ms = deadline_ms;
            if (q->start_fn && is_tool_call(tool) && start(q, c))
                return take(q, false);
            r = enqueue(q, c, false);
            if (r == 0) {
                if (is_tool_call(tool))
                    hutch_metrics_tool_thread(0);
                return take(q, false);
            }
            call_free(c);
            reply.code = "internal";
        }
    }
    cJSON_Delete(args);
    answer(q, NULL, id, tool, r, &reply, t0);
    cJSON_Delete(reply.result);
    free(reply.message);
    free(reply.tool);
    free(reply.server);
    return take(q, false);
}

int hutch_calls_take(struct hutch_calls *q)
{
    return take(q, true);
}

int hutch_calls_unsent(struct hutch_calls *q)
{
    int n;
    pthread_mutex_lock(&q->mu);
    n = q->unsent_off < q->unsent.len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int hutch_calls_flush(struct hutch_calls *q)
{
    bool failed;
    pthread_mutex_lock(&q->mu);
    flush_locked(q);
    failed = q->failed;
    pthread_mutex_unlock(&q->mu);
    return failed ? -EPIPE : 0;
}

void hutch_calls_end(struct hutch_calls *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    if (!q->stop) {
        for (struct call *c = q->open_head; c; c = c->open_next) {
            if (!strcmp(c->tool, HUTCH_CALLS_DESCRIBE))
                continue;
            record_locked(q, c->id, c->tool, "unfinished",
                          "the execution ended before the tool call returned",
                          hutch_now_us() - c->t0);
            /* Its reply is still the worker's: no server to name. */
            hutch_metrics_tool_call(NULL, "unfinished");
        }
        q->stop = true;
        pthread_cond_broadcast(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
}

void hutch_calls_free(struct hutch_calls *q)
{
    struct call *c;

    if (!q)
        return;
    hutch_calls_end(q);
    for (int i = 0; i < q->nworkers; i++)
        pthread_join(q->workers[i], NULL);
    /* Each ends by its upstream's answer, its timeout, or its server's
     * end, whichever is first. */
    pthread_mutex_lock(&q->mu);
    while (q->nstarted)
        pthread_cond_wait(&q->idle, &q->mu);
    pthread_mutex_unlock(&q->mu);
    /* Queued, or finished too late: still on the open list. */
    while ((c = q->open_head)) {
        open_remove(q, c);
        call_free(c);
    }
    close(q->pipe[0]);
    close(q->pipe[1]);
    hutch_buf_free(&q->unsent);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->idle);
    free(q);
}
