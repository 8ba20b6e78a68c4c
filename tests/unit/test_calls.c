/* test_calls.c — the tool calls of one execution (src/calls.c) with a fake
 * handler: answers and records, the pool's bound and its queue, completion
 * order, calls left open when the execution ends, a runner that stops
 * reading.  No check depends on how fast anything runs. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "caps.h"
#include "tap.h"
#include "util.h"

#define WAIT_MS 20000 /* a guard against hanging, not a measurement */

/* The handler: "echo" answers its arguments, "fail" an error, "gate.N"
 * waits until gate N opens or its timeout passes. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int open_gates[64];
static int running, max_running, started;
static int last_timeout_ms = -1;

static int tool(void *arg, const char *name, const cJSON *args, int timeout_ms,
                struct hutch_tool_reply *reply)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    started++;
    last_timeout_ms = timeout_ms;
    if (++running > max_running)
        max_running = running;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    if (!strncmp(name, "gate.", 5)) {
        int g = atoi(name + 5);
        uint64_t until = hutch_now_ms() + (uint64_t)timeout_ms;
        pthread_mutex_lock(&mu);
        while (!open_gates[g] && hutch_now_ms() < until) {
            pthread_mutex_unlock(&mu);
            usleep(1000);
            pthread_mutex_lock(&mu);
        }
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    running--;
    pthread_mutex_unlock(&mu);
    reply->tool = strdup(name);
    if (!strcmp(name, "fail")) {
        reply->code = "upstream";
        reply->message = strdup("it failed");
        return -EREMOTEIO;
    }
    if (!strcmp(name, "big")) { /* a 2 MiB string */
        char *text = malloc((2u << 20) + 1);
        memset(text, 'x', 2u << 20);
        text[2u << 20] = '\0';
        reply->result = cJSON_CreateString(text);
        free(text);
        return 0;
    }
    reply->result = cJSON_Duplicate(args, 1);
    return 0;
}

static void open_gate(int g)
{
    pthread_mutex_lock(&mu);
    open_gates[g] = 1;
    pthread_mutex_unlock(&mu);
}

static void reset(void)
{
    pthread_mutex_lock(&mu);
    memset(open_gates, 0, sizeof(open_gates));
    running = max_running = started = 0;
    last_timeout_ms = -1;
    pthread_mutex_unlock(&mu);
}

/* Waits (bounded) until `started` reaches n. */
static int wait_started(int n)
{
    uint64_t until = hutch_now_ms() + WAIT_MS;
    int got;
    pthread_mutex_lock(&mu);
    while (started < n && hutch_now_ms() < until) {
        pthread_mutex_unlock(&mu);
        usleep(1000);
        pthread_mutex_lock(&mu);
    }
    got = started;
    pthread_mutex_unlock(&mu);
    return got;
}

/* The runner's side: a pipe as the channel, and every tool_result read
 * from it, in order. */
struct sink {
    int fd[2];
    cJSON *sent;
    char *buf;
    size_t len;
};

static void sink_init(struct sink *k)
{
    k->sent = cJSON_CreateArray();
    k->buf = NULL;
    k->len = 0;
    if (pipe(k->fd) < 0)
        k->fd[0] = k->fd[1] = -1;
    hutch_set_nonblock(k->fd[0]);
    hutch_set_nonblock(k->fd[1]);
}

static void sink_free(struct sink *k)
{
    cJSON_Delete(k->sent);
    free(k->buf);
    if (k->fd[0] >= 0)
        close(k->fd[0]);
    close(k->fd[1]);
}

static void sink_read(struct sink *k)
{
    char chunk[65536];
    ssize_t n;
    while ((n = read(k->fd[0], chunk, sizeof(chunk))) > 0) {
        char *nb = realloc(k->buf, k->len + (size_t)n);
        char *nl;
        if (!nb)
            return;
        k->buf = nb;
        memcpy(k->buf + k->len, chunk, (size_t)n);
        k->len += (size_t)n;
        while ((nl = memchr(k->buf, '\n', k->len))) {
            size_t line = (size_t)(nl - k->buf);
            cJSON_AddItemToArray(k->sent, cJSON_ParseWithLength(k->buf, line));
            memmove(k->buf, nl + 1, k->len - line - 1);
            k->len -= line + 1;
        }
    }
}

/* The loop's side and the runner's: until n answers came (bounded). */
static int take_until(struct hutch_calls *q, struct sink *k, int n)
{
    uint64_t until = hutch_now_ms() + WAIT_MS;
    sink_read(k);
    while (cJSON_GetArraySize(k->sent) < n && hutch_now_ms() < until) {
        struct pollfd p[2] = {{hutch_calls_fd(q), POLLIN, 0}, {k->fd[0], POLLIN, 0}};
        if (poll(p, 2, 100) > 0 && (p[0].revents & POLLIN) && hutch_calls_take(q) < 0)
            return -1;
        if (hutch_calls_unsent(q) && hutch_calls_flush(q) < 0)
            return -1;
        sink_read(k);
    }
    return cJSON_GetArraySize(k->sent);
}

static const char *str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static uint64_t later(void)
{
    return hutch_now_ms() + WAIT_MS;
}

/* --- calls started from the loop (hutch_calls_set_start) ---------------- */

/* The start function: "now.*" answers at once, "sync.*" ends (done) before
 * it returns, "later.N" ends when the test calls finish_later(N) from a
 * thread of its own, "ask.*" hands a decided call to a worker (cont),
 * anything else needs a worker from the start. */
struct later {
    hutch_tool_done_fn done;
    void *done_arg;
    struct hutch_tool_reply *reply;
    cJSON *args;
};
static struct later laters[HUTCH_CALL_WORKERS + 8];
static int nstart, nlater, cont_runs, cont_drops;

static int cont_run(void *arg, const cJSON *args, int timeout_ms,
                    struct hutch_tool_reply *reply)
{
    (void)timeout_ms;
    pthread_mutex_lock(&mu);
    cont_runs++;
    pthread_mutex_unlock(&mu);
    free(arg);
    reply->result = cJSON_Duplicate(args, 1);
    cJSON_AddTrueToObject(reply->result, "asked");
    return 0;
}

static void cont_drop(void *arg)
{
    pthread_mutex_lock(&mu);
    cont_drops++;
    pthread_mutex_unlock(&mu);
    free(arg);
}

static int start_fn(void *arg, const char *name, const cJSON *args, int timeout_ms,
                    struct hutch_tool_reply *reply, hutch_tool_done_fn done,
                    void *done_arg, struct hutch_tool_cont *cont)
{
    (void)arg;
    (void)timeout_ms;
    pthread_mutex_lock(&mu);
    nstart++;
    pthread_mutex_unlock(&mu);
    if (!strncmp(name, "now.", 4)) {
        reply->result = cJSON_Duplicate(args, 1);
        return 0;
    }
    if (!strncmp(name, "sync.", 5)) {
        reply->result = cJSON_Duplicate(args, 1);
        done(done_arg, 0, reply);
        return HUTCH_TOOL_STARTED;
    }
    if (!strncmp(name, "later.", 6)) {
        int n = atoi(name + 6);
        pthread_mutex_lock(&mu);
        laters[n] = (struct later){done, done_arg, reply, cJSON_Duplicate(args, 1)};
        nlater++;
        pthread_mutex_unlock(&mu);
        return HUTCH_TOOL_STARTED;
    }
    if (!strncmp(name, "ask.", 4)) {
        *cont = (struct hutch_tool_cont){cont_run, cont_drop, malloc(16)};
        return HUTCH_TOOL_THREAD;
    }
    return HUTCH_TOOL_THREAD;
}

static void *finish_main(void *arg)
{
    struct later l = *(struct later *)arg;
    l.reply->result = l.args ? l.args : cJSON_CreateObject();
    l.done(l.done_arg, 0, l.reply);
    return NULL;
}

/* Ends later.n from a thread of its own, as an upstream's reader would. */
static void finish_later(int n)
{
    pthread_t th;
    pthread_create(&th, NULL, finish_main, &laters[n]);
    pthread_join(th, NULL);
}

static void reset_start(void)
{
    reset();
    pthread_mutex_lock(&mu);
    memset(laters, 0, sizeof(laters));
    nstart = nlater = cont_runs = cont_drops = 0;
    pthread_mutex_unlock(&mu);
}

static struct hutch_calls *new_started(struct sink *k, struct hutch_call_log *rec)
{
    struct hutch_calls *q;
    sink_init(k);
    q = hutch_calls_new(tool, NULL, k->fd[1], rec);
    if (q)
        hutch_calls_set_start(q, start_fn);
    return q;
}

static void test_started(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *args = cJSON_Parse("{\"message\":\"x\"}"), *m;
    struct hutch_calls *q = new_started(&k, &rec);
    int good = 1;

    reset_start();
    for (int i = 1; i <= 100; i++) {
        hutch_calls_submit(q, i, "sync.echo", cJSON_Duplicate(args, 1), later());
        if (take_until(q, &k, i) != i)
            good = 0;
    }
    ok(good && started == 0 && nstart == 100,
       "started: 100 calls ended inside their start, none on a worker (%d)", started);
    m = cJSON_GetArrayItem(k.sent, 99);
    ok(m && num(m, "id") == 100 && cJSON_IsTrue(cJSON_GetObjectItem(m, "ok")) &&
           !strcmp(str(cJSON_GetObjectItem(m, "result"), "message"), "x"),
       "started: the answer carries the id and the result");

    /* Ended later by other threads, in another order than they started. */
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof(name), "later.%d", i);
        hutch_calls_submit(q, 101 + i, name, cJSON_Duplicate(args, 1), later());
    }
    sink_read(&k);
    ok(cJSON_GetArraySize(k.sent) == 100 && nlater == 3,
       "started: three calls on their way, none answered yet");
    finish_later(2);
    finish_later(0);
    finish_later(1);
    ok(take_until(q, &k, 103) == 103 &&
           num(cJSON_GetArrayItem(k.sent, 100), "id") == 103 &&
           num(cJSON_GetArrayItem(k.sent, 101), "id") == 101 &&
           num(cJSON_GetArrayItem(k.sent, 102), "id") == 102,
       "started: answered in the order they ended");

    hutch_calls_submit(q, 104, "now.echo", cJSON_Duplicate(args, 1), later());
    hutch_calls_submit(q, 105, "ask.echo", cJSON_Duplicate(args, 1), later());
    hutch_calls_submit(q, 106, "plain", cJSON_Duplicate(args, 1), later());
    take_until(q, &k, 106);
    {
        const cJSON *asked = NULL, *plain = NULL, *now = NULL;
        cJSON_ArrayForEach(m, k.sent)
        {
            if (num(m, "id") == 104)
                now = m;
            if (num(m, "id") == 105)
                asked = m;
            if (num(m, "id") == 106)
                plain = m;
        }
        ok(now && cJSON_IsTrue(cJSON_GetObjectItem(now, "ok")),
           "started: a call answered at once comes back");
        ok(asked &&
               cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(asked, "result"),
                                                "asked")) &&
               cont_runs == 1,
           "started: a decided call goes on on a worker (its cont)");
        ok(plain && cJSON_IsTrue(cJSON_GetObjectItem(plain, "ok")) && started == 1,
           "started: one it cannot start runs on a worker from the start");
    }
    hutch_calls_free(q);
    ok((int)rec.n == 106, "started: every call recorded (%d)", (int)rec.n);
    cJSON_Delete(args);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

/* The execution ends with calls on their way: nothing more is sent, they
 * are recorded as unfinished, free waits for their end, and a decided call
 * a worker never ran is dropped. */
static void *finish_soon(void *arg)
{
    (void)arg;
    usleep(200 * 1000);
    finish_later(0);
    return NULL;
}

static void test_started_end(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    struct hutch_calls *q = new_started(&k, &rec);
    pthread_t th;
    int id = 1;

    reset_start();
    hutch_calls_submit(q, id++, "later.0", NULL, later());
    /* Every worker busy: the decided call waits in the queue. */
    for (int i = 0; i < HUTCH_CALL_WORKERS; i++)
        hutch_calls_submit(q, id++, "gate.5", NULL, hutch_now_ms() + 3000);
    wait_started(HUTCH_CALL_WORKERS);
    hutch_calls_submit(q, id++, "ask.echo", NULL, later());
    hutch_calls_end(q);
    pthread_create(&th, NULL, finish_soon, NULL);
    hutch_calls_free(q); /* waits for later.0 */
    pthread_join(th, NULL);
    sink_read(&k);
    ok(cJSON_GetArraySize(k.sent) == 0, "started, ended: nothing sent after the end");
    ok((int)rec.n == id - 1 && !strcmp(rec.v[0].outcome, "unfinished"),
       "started, ended: the call on its way is recorded as unfinished (%d)",
       (int)rec.n);
    ok(cont_runs == 0 && cont_drops == 1,
       "started, ended: the decided call never ran and was dropped");
    hutch_call_log_free(&rec);
    sink_free(&k);
}

/* No more calls on their way than a pool has workers: past them, calls go
 * to a worker from the start. */
static void test_started_bound(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    struct hutch_calls *q = new_started(&k, &rec);
    const int n = HUTCH_CALL_WORKERS;

    reset_start();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "later.%d", i);
        hutch_calls_submit(q, i + 1, name, NULL, later());
    }
    hutch_calls_submit(q, n + 1, "later.99", NULL, later());
    ok(take_until(q, &k, 1) == 1 && num(cJSON_GetArrayItem(k.sent, 0), "id") == n + 1 &&
           nlater == n && started == 1,
       "bound: %d calls on their way, the next on a worker", n);
    for (int i = 0; i < n; i++)
        finish_later(i);
    ok(take_until(q, &k, n + 1) == n + 1, "bound: all answered");
    hutch_calls_free(q);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

static void test_no_handler(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *m;
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(NULL, NULL, k.fd[1], &rec));

    ok(q != NULL, "no handler: created");
    ok(hutch_calls_submit(q, 1, "a.b", NULL, later()) == 0, "no handler: submitted");
    sink_read(&k);
    m = cJSON_GetArrayItem(k.sent, 0);
    ok(m && cJSON_IsFalse(cJSON_GetObjectItem(m, "ok")) &&
           !strcmp(str(cJSON_GetObjectItem(m, "error"), "code"), "unknown_tool") &&
           strstr(str(cJSON_GetObjectItem(m, "error"), "message"), "--servers"),
       "no handler: answered at once, unknown_tool");
    hutch_calls_free(q);
    ok(rec.n == 1 && !strcmp(rec.v[0].outcome, "unknown_tool"), "no handler: recorded");
    hutch_call_log_free(&rec);
    sink_free(&k);
}

static void test_answers(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *args = cJSON_Parse("{\"message\":\"x\"}"), *m;
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    int good = 1;

    reset();
    for (int i = 1; i <= 100; i++) {
        hutch_calls_submit(q, i, "echo", cJSON_Duplicate(args, 1), later());
        if (take_until(q, &k, i) != i)
            good = 0;
    }
    ok(good, "sequential: 100 calls, 100 answers");
    m = cJSON_GetArrayItem(k.sent, 99);
    ok(m && !strcmp(str(m, "t"), "tool_result") && num(m, "id") == 100 &&
           cJSON_IsTrue(cJSON_GetObjectItem(m, "ok")) &&
           !strcmp(str(cJSON_GetObjectItem(m, "result"), "message"), "x"),
       "sequential: the answer carries the id and the result");
    ok(last_timeout_ms > 0 &&
           last_timeout_ms <= WAIT_MS * HUTCH_CALL_SHARE_OF_REMAINING / 100,
       "sequential: the handler's timeout is %d%% of the time left at most (%d), "
       "so the program can catch it",
       HUTCH_CALL_SHARE_OF_REMAINING, last_timeout_ms);
    hutch_calls_submit(q, 101, "fail", cJSON_Duplicate(args, 1), later());
    take_until(q, &k, 101);
    m = cJSON_GetArrayItem(k.sent, 100);
    ok(m && cJSON_IsFalse(cJSON_GetObjectItem(m, "ok")) &&
           !strcmp(str(cJSON_GetObjectItem(m, "error"), "code"), "upstream") &&
           !strcmp(str(cJSON_GetObjectItem(m, "error"), "message"), "it failed"),
       "an error comes back with its code and message");
    hutch_calls_submit(q, 102, "echo", cJSON_Duplicate(args, 1), hutch_now_ms() - 5);
    take_until(q, &k, 102);
    ok(last_timeout_ms == 1, "a call past the deadline gets 1 ms (%d)",
       last_timeout_ms);
    hutch_calls_free(q);
    ok((int)rec.n == 102, "every call recorded (%d)", (int)rec.n);
    ok(!strcmp(rec.v[100].tool, "fail") && !strcmp(rec.v[100].outcome, "upstream") &&
           !strcmp(rec.v[100].error, "it failed") && rec.v[100].duration_ms >= 0,
       "the record has the tool, outcome, error and duration");
    cJSON_Delete(args);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

static void test_pool(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *m;
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    const int n = HUTCH_CALL_WORKERS + 20;
    char seen[HUTCH_CALL_WORKERS + 21] = {0};
    int good = 1;

    reset();
    for (int i = 1; i <= n; i++)
        hutch_calls_submit(q, i, "gate.1", NULL, later());
    ok(wait_started(HUTCH_CALL_WORKERS) == HUTCH_CALL_WORKERS,
       "pool: %d calls run at once", HUTCH_CALL_WORKERS);
    sink_read(&k);
    ok(cJSON_GetArraySize(k.sent) == 0, "pool: nothing answered while they wait");
    open_gate(1);
    ok(take_until(q, &k, n) == n, "pool: all %d answered once the gate opens", n);
    cJSON_ArrayForEach(m, k.sent)
    {
        int id = (int)num(m, "id");
        if (id < 1 || id > n || seen[id]++ ||
            !cJSON_IsTrue(cJSON_GetObjectItem(m, "ok")))
            good = 0;
    }
    ok(good, "pool: each id answered exactly once");
    ok(max_running <= HUTCH_CALL_WORKERS, "pool: never more than %d at once (%d)",
       HUTCH_CALL_WORKERS, max_running);
    ok(max_running > 1, "pool: calls of one execution run concurrently (%d)",
       max_running);
    hutch_calls_free(q);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

static void test_completion_order(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));

    reset();
    hutch_calls_submit(q, 1, "gate.2", NULL, later());
    hutch_calls_submit(q, 2, "gate.3", NULL, later());
    wait_started(2);
    open_gate(3);
    take_until(q, &k, 1);
    open_gate(2);
    take_until(q, &k, 2);
    ok(num(cJSON_GetArrayItem(k.sent, 0), "id") == 2 &&
           num(cJSON_GetArrayItem(k.sent, 1), "id") == 1,
       "answers go back in completion order");
    hutch_calls_free(q);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

static void test_unfinished(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    const int n = HUTCH_CALL_WORKERS + 5;
    int good = 1;

    reset();
    hutch_calls_submit(q, 1, "echo", NULL, later());
    take_until(q, &k, 1);
    /* They wait for a gate that never opens, until their deadline. */
    for (int i = 2; i <= n + 1; i++)
        hutch_calls_submit(q, i, "gate.4", NULL, hutch_now_ms() + 3000);
    wait_started(1 + HUTCH_CALL_WORKERS);
    hutch_calls_free(q); /* waits for the workers */
    ok(cJSON_GetArraySize(k.sent) == 1, "unfinished: no answer sent after the end");
    ok((int)rec.n == n + 1, "unfinished: every call recorded (%d)", (int)rec.n);
    for (int i = 1; i <= n; i++) {
        if ((size_t)i >= rec.n || strcmp(rec.v[i].outcome, "unfinished") ||
            rec.v[i].id != i + 1 || !rec.v[i].error)
            good = 0;
    }
    ok(good, "unfinished: the open calls are recorded as unfinished, in order");
    ok(started == 1 + HUTCH_CALL_WORKERS,
       "unfinished: queued calls never start once the execution ended (%d)", started);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

/* A runner that never reads: answers pile up to the cap, then it is
 * reported; one that is gone: answers are dropped, nothing breaks. */
static void test_stuck_runner(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *args = cJSON_CreateObject();
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    char *pad = malloc((1u << 20) + 1);
    int r = 0, i;

    reset();
    memset(pad, 'x', 1u << 20);
    pad[1u << 20] = '\0';
    cJSON_AddStringToObject(args, "pad", pad);
    for (i = 1; i <= 80 && r == 0; i++) {
        r = hutch_calls_submit(q, i, "echo", cJSON_Duplicate(args, 1), later());
        while (r == 0 && (int)rec.n < i)
            usleep(1000);
        if (r == 0)
            r = hutch_calls_take(q);
    }
    ok(r < 0, "stuck runner: reported after %d answers of 1 MiB nobody reads", i - 1);
    ok(hutch_calls_unsent(q), "stuck runner: the answers wait for the channel");
    hutch_calls_free(q);
    ok((int)rec.n == i - 1, "stuck runner: every call recorded (%d)", (int)rec.n);
    sink_free(&k);
    hutch_call_log_free(&rec);

    q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    close(k.fd[0]);
    k.fd[0] = -1;
    r = 0;
    for (i = 1; i <= 3; i++) {
        r |= hutch_calls_submit(q, i, "echo", cJSON_Duplicate(args, 1), later());
        while ((int)rec.n < i)
            usleep(1000);
        r |= hutch_calls_take(q);
    }
    ok(r == 0 && !hutch_calls_unsent(q), "runner gone: answers are dropped");
    hutch_calls_free(q);
    ok((int)rec.n == 3, "runner gone: calls still recorded");
    sink_free(&k);
    hutch_call_log_free(&rec);
    cJSON_Delete(args);
    free(pad);
}

static void test_max_calls(void)
{
    struct sink k;
    struct hutch_call_log rec = {0};
    cJSON *m;
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(NULL, NULL, k.fd[1], &rec));

    for (int i = 1; i <= HUTCH_WIRE_MAX_TOOL_CALLS + 1; i++) {
        hutch_calls_submit(q, i, "a.b", NULL, later());
        sink_read(&k);
    }
    m = cJSON_GetArrayItem(k.sent, HUTCH_WIRE_MAX_TOOL_CALLS);
    ok(m && !strcmp(str(cJSON_GetObjectItem(m, "error"), "code"), "denied") &&
           strstr(str(cJSON_GetObjectItem(m, "error"), "message"), "tool calls"),
       "call %d is denied", HUTCH_WIRE_MAX_TOOL_CALLS + 1);
    hutch_calls_free(q);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

/* The execution's memory budget: arguments count while their calls are in
 * flight, a result that does not fit is an error, and everything is given
 * back in the end. */
static void test_budget(void)
{
    struct sink k;
    struct hutch_budget b;
    struct hutch_call_log rec = {0};
    cJSON *args = cJSON_CreateObject(), *m;
    struct hutch_calls *q = (sink_init(&k), hutch_calls_new(tool, NULL, k.fd[1], &rec));
    char *text = malloc(300001);
    int n;

    memset(text, 'a', 300000);
    text[300000] = '\0';
    cJSON_AddStringToObject(args, "text", text);
    free(text);
    hutch_budget_init(&b, 1u << 20);
    hutch_calls_set_budget(q, &b);
    reset();
    for (int i = 1; i <= 3; i++)
        hutch_calls_submit(q, i, "gate.7", cJSON_Duplicate(args, 1), later());
    ok(wait_started(3) == 3, "budget: three calls of 300 KB in flight");
    hutch_calls_submit(q, 4, "gate.7", cJSON_Duplicate(args, 1), later());
    n = take_until(q, &k, 1);
    m = cJSON_GetArrayItem(k.sent, 0);
    ok(n == 1 && num(m, "id") == 4 &&
           !strcmp(str(cJSON_GetObjectItem(m, "error"), "code"), "too_large") &&
           strstr(str(cJSON_GetObjectItem(m, "error"), "message"), "budget"),
       "budget: the fourth is answered at once with too_large");
    open_gate(7);
    n = take_until(q, &k, 4);
    ok(n == 4 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(k.sent, 3), "ok")),
       "budget: the three in flight return their results (%d answers)", n);
    hutch_calls_submit(q, 5, "big", NULL, later());
    n = take_until(q, &k, 5);
    m = cJSON_GetArrayItem(k.sent, 4);
    ok(n == 5 && !strcmp(str(cJSON_GetObjectItem(m, "error"), "code"), "too_large") &&
           strstr(str(cJSON_GetObjectItem(m, "error"), "message"), "result of big"),
       "budget: a result larger than the budget becomes a too_large error");
    hutch_calls_submit(q, 6, "echo", cJSON_Duplicate(args, 1), later());
    n = take_until(q, &k, 6);
    ok(n == 6 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(k.sent, 5), "ok")),
       "budget: calls that fit work afterwards");
    hutch_calls_free(q);
    ok(atomic_load(&b.used) == 0 && atomic_load(&b.peak) <= b.max,
       "budget: everything given back (used %zu, peak %zu of %zu)",
       (size_t)atomic_load(&b.used), (size_t)atomic_load(&b.peak), b.max);
    cJSON_Delete(args);
    hutch_call_log_free(&rec);
    sink_free(&k);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as hutch does: the runner may be gone */
    hutch_calls_free(NULL);
    test_no_handler();
    test_answers();
    test_pool();
    test_completion_order();
    test_unfinished();
    test_stuck_runner();
    test_max_calls();
    test_budget();
    test_started();
    test_started_end();
    test_started_bound();
    return tap_done();
}
