/* calls.c — the tool calls of one execution, between the run loop and the
 * tool handler (govern.c or bridge.c): a runner's `tool_call` becomes a job
 * for a worker thread, and the worker's answer a `tool_result` sent back in
 * completion order.  Every call's outcome is recorded in the execution's
 * tool_calls, calls still open when the execution ends as "unfinished".
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
 * by default): in a shared pool, one execution's Promise.all of slow calls
 * would hold every worker and starve the others, and any cap per execution
 * below the pool's size still lets a few such executions do it.  With a pool
 * each, an execution only ever waits for its own calls; the cost is up to
 * HUTCH_CALL_WORKERS threads per running execution, which is small next to
 * the sandbox each of them already has.
 *
 * Threads and locks.  The loop's thread calls every hutch_calls_* function;
 * the open list, the record and the sending are its alone.  q->mu guards the
 * queue, the finished list and the pool's counters; workers hold it only to
 * take a call and to hand its answer back.  A finished call is appended to
 * `done`, and a byte on the pipe announces that `done` became non-empty: one
 * wake-up of the loop per batch.  Workers block every signal (hutch's main
 * thread takes them), so a write to an upstream's stdin that fails raises
 * no SIGPIPE in them.
 *
 * Not here: the run loop and the wire protocol (exec.c, wire.c), deciding
 * and forwarding a call (govern.c, bridge.c, upstream.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "caps.h"
#include "log.h"
#include "util.h"

/* Lua hooks in the policy run on the workers and need room for nested C
 * calls (~500 KiB). */
#define WORKER_STACK (2u << 20)

struct call {
    int64_t id;
    char *tool;
    cJSON *args;
    uint64_t deadline_ms;
    uint64_t t0; /* µs */
    int r;
    struct hutch_tool_reply reply;
    struct call *next;                  /* queued or done, under q->mu */
    struct call *open_prev, *open_next; /* the loop's thread only */
};

struct hutch_calls {
    pthread_mutex_t mu;
    pthread_cond_t work;               /* a queued call, or stop */
    struct call *queued, *queued_tail; /* waiting for a worker */
    struct call *done, *done_tail;     /* answered, for the loop */
    size_t nqueued;
    int nidle;    /* workers waiting for work */
    int nworkers; /* created; changed by the loop only */
    bool stop;
    pthread_t workers[HUTCH_CALL_WORKERS];
    int pipe[2];
    /* The loop's thread only. */
    hutch_tool_fn fn;
    void *fn_arg;
    hutch_calls_send_fn send;
    void *send_arg;
    cJSON *record;
    struct call *open_head, *open_tail; /* accepted, not yet answered */
    uint64_t ncalls;
    bool failed; /* an answer could not be sent */
};

static void call_free(struct call *c)
{
    free(c->tool);
    cJSON_Delete(c->args);
    cJSON_Delete(c->reply.result);
    free(c->reply.message);
    free(c->reply.tool);
    free(c);
}

static void *worker_main(void *arg)
{
    struct hutch_calls *q = arg;

    pthread_mutex_lock(&q->mu);
    for (;;) {
        struct call *c;
        uint64_t now;
        int timeout_ms;
        bool wake;

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

        /* A call never outlives its execution's deadline. */
        now = hutch_now_ms();
        timeout_ms = c->deadline_ms > now ? (int)(c->deadline_ms - now) : 1;
        c->r = q->fn(q->fn_arg, c->tool, c->args, timeout_ms, &c->reply);

        pthread_mutex_lock(&q->mu);
        wake = !q->done;
        if (q->done_tail)
            q->done_tail->next = c;
        else
            q->done = c;
        q->done_tail = c;
        if (wake && write(q->pipe[1], "c", 1) < 0) {
            /* a byte per empty-to-non-empty change: the pipe cannot fill */
        }
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

static int enqueue(struct hutch_calls *q, struct call *c)
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
    } else if (q->nidle) {
        pthread_cond_signal(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

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

static void record(struct hutch_calls *q, int64_t id, const char *tool, int ok,
                   const char *code, const char *message, uint64_t us)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "id", (double)id);
    cJSON_AddStringToObject(c, "tool", tool);
    cJSON_AddStringToObject(c, "outcome", ok ? "ok" : code);
    if (!ok && message)
        cJSON_AddStringToObject(c, "error", message);
    cJSON_AddNumberToObject(c, "duration_ms", (double)us / 1000.0);
    cJSON_AddItemToArray(q->record, c);
}

/* Records the call's outcome and sends its tool_result (takes
 * reply->result).  Negative when it could not be sent. */
static int answer(struct hutch_calls *q, int64_t id, const char *tool, int r,
                  struct hutch_tool_reply *reply, uint64_t t0)
{
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "t", "tool_result");
    cJSON_AddNumberToObject(msg, "id", (double)id);
    if (r == 0) {
        cJSON_AddTrueToObject(msg, "ok");
        cJSON_AddItemToObject(msg, "result",
                              reply->result ? reply->result : cJSON_CreateNull());
        reply->result = NULL;
        record(q, id, reply->tool ? reply->tool : tool, 1, NULL, NULL,
               hutch_now_us() - t0);
    } else {
        char text[1024];
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
        record(q, id, reply->tool ? reply->tool : tool, 0, code, text,
               hutch_now_us() - t0);
    }
    if (q->failed) {
        cJSON_Delete(msg);
        return -EPIPE;
    }
    if (q->send(q->send_arg, msg) < 0) {
        q->failed = true;
        return -EPIPE;
    }
    return 0;
}

struct hutch_calls *hutch_calls_new(hutch_tool_fn fn, void *fn_arg,
                                    hutch_calls_send_fn send, void *send_arg,
                                    cJSON *record)
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
    q->fn = fn;
    q->fn_arg = fn_arg;
    q->send = send;
    q->send_arg = send_arg;
    q->record = record;
    return q;
}

int hutch_calls_fd(const struct hutch_calls *q)
{
    return q->pipe[0];
}

int hutch_calls_submit(struct hutch_calls *q, int64_t id, const char *tool,
                       const cJSON *args, uint64_t deadline_ms)
{
    struct hutch_tool_reply reply = {0};
    uint64_t t0 = hutch_now_us();
    struct call *c;
    int r;

    if (++q->ncalls > HUTCH_WIRE_MAX_TOOL_CALLS) {
        reply.code = "denied";
        r = -E2BIG;
    } else if (!q->fn) {
        reply.code = "unknown_tool";
        r = -ENOENT;
    } else {
        c = calloc(1, sizeof(*c));
        if (!c || !(c->tool = strdup(tool)) ||
            !(c->args = args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject())) {
            if (c)
                call_free(c);
            reply.code = "internal";
            r = -ENOMEM;
        } else {
            c->id = id;
            c->t0 = t0;
            c->deadline_ms = deadline_ms;
            r = enqueue(q, c);
            if (r == 0) {
                open_add(q, c);
                return 0;
            }
            call_free(c);
            reply.code = "internal";
        }
    }
    r = answer(q, id, tool, r, &reply, t0);
    cJSON_Delete(reply.result);
    free(reply.message);
    free(reply.tool);
    return r;
}

int hutch_calls_take(struct hutch_calls *q)
{
    struct call *list, *c;
    char buf[64];
    int ret = 0;

    /* Drain first, then take: a call finished in between leaves a byte. */
    while (read(q->pipe[0], buf, sizeof(buf)) > 0)
        ;
    pthread_mutex_lock(&q->mu);
    list = q->done;
    q->done = q->done_tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while ((c = list)) {
        list = c->next;
        open_remove(q, c);
        if (answer(q, c->id, c->tool, c->r, &c->reply, c->t0) < 0)
            ret = -EPIPE;
        call_free(c);
    }
    return ret;
}

void hutch_calls_free(struct hutch_calls *q)
{
    struct call *c;

    if (!q)
        return;
    for (c = q->open_head; c; c = c->open_next)
        record(q, c->id, c->tool, 0, "unfinished",
               "the execution ended before the tool call returned",
               hutch_now_us() - c->t0);
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->nworkers; i++)
        pthread_join(q->workers[i], NULL);
    /* Queued, finished or not taken: every call is still on the open list. */
    while ((c = q->open_head)) {
        open_remove(q, c);
        call_free(c);
    }
    close(q->pipe[0]);
    close(q->pipe[1]);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    free(q);
}
