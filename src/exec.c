/* exec.c — the core's side of one sandbox (see exec.h).
 *
 * Two steps.  hutch_box_start: start() a sandbox and wait for its runner's
 * "ready" (a pool does this long before a job; a cold job just before it).
 * hutch_exec_run: one job on a ready box — a single poll loop over the
 * runner's wire channel, the program's stdout and stderr, and the plugin's
 * exit event, bounded by a deadline — then /work/out and destroy.
 * Everything read from a sandbox is untrusted and capped.
 *
 * Threads: a box belongs to one thread at a time (the pool's, then the
 * job's); tool calls run on worker threads of calls.c, which answers them
 * on the channel itself. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "budget.h"
#include "calls.h"
#include "caps.h"
#include "exec.h"
#include "hutch_archive.h"
#include "log.h"
#include "metrics.h"
#include "output.h"
#include "result.h"
#include "util.h"
#include "wire.h"

#define READ_CHUNK 65536

enum phase { RUNNING, DONE };

struct run {
    const struct hutch_exec_req *req;
    struct hutch_exec_result *res;
    const struct hutch_executor *ex;
    void *state;
    struct hutch_sandbox *sb;
    struct hutch_box *box;
    struct hutch_wire_reader *rd;
    struct hutch_buf pending; /* bytes queued for the runner */
    size_t pending_off;
    enum phase phase;
    int got_done, exited, chan_eof, out_eof, err_eof;
    int done_status; /* from done; -1 when it did not say */
    int done_files;  /* from done: /work/out holds something (1, 0, -1) */
    int fail;        /* protocol error or hutch error: kill */
    struct hutch_output oout, oerr; /* head and tail of stdout, stderr */
    uint64_t ntool;
    uint64_t deadline; /* ms, once the job runs */
    struct hutch_calls *calls;
    struct hutch_budget *budget; /* hutch's memory it holds: res->budget */
    struct hutch_exit exit;
    uint64_t t_done; /* µs, for the debug log */
};

void hutch_exec_result_init(struct hutch_exec_result *res)
{
    memset(res, 0, sizeof(*res));
    hutch_buf_init(&res->out, HUTCH_OUTPUT_MAX_BYTES);
    hutch_buf_init(&res->err, HUTCH_OUTPUT_MAX_BYTES);
    hutch_buf_init(&res->out_tar, HUTCH_TAR_MAX_STREAM);
    hutch_budget_init(&res->budget, HUTCH_EXEC_MEMORY_BUDGET);
}

void hutch_exec_result_free(struct hutch_exec_result *res)
{
    /* What stayed charged with the result (its value) goes with it. */
    hutch_budget_give(&res->budget, atomic_load(&res->budget.used));
    hutch_buf_free(&res->out);
    hutch_buf_free(&res->err);
    hutch_buf_free(&res->out_tar);
    cJSON_Delete(res->result);
    hutch_result_error_free(&res->error);
    hutch_file_list_clear(&res->files);
    hutch_call_log_free(&res->tool_calls);
    memset(res, 0, sizeof(*res));
}

static int queue(struct run *rn, cJSON *msg)
{
    size_t len;
    char *s = hutch_wire_encode(msg, &len);
    int r;
    cJSON_Delete(msg);
    if (!s)
        return -ENOMEM;
    if (rn->pending_off == rn->pending.len) {
        rn->pending.len = 0;
        rn->pending_off = 0;
    }
    r = hutch_buf_append(&rn->pending, s, len);
    free(s);
    return r;
}

static void flush_pending(struct run *rn)
{
    while (rn->pending_off < rn->pending.len) {
        ssize_t n = write(rn->sb->chan_fd, rn->pending.data + rn->pending_off,
                          rn->pending.len - rn->pending_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                rn->pending_off = rn->pending.len; /* runner gone: drop */
            return;
        }
        rn->pending_off += (size_t)n;
    }
}

/* The runner said done with its exit status and closed stdout and stderr
 * (PROTOCOL.md): the outcome is done's, whether or not it has exited. */
static bool said_done(const struct run *rn)
{
    return rn->got_done && rn->done_status >= 0 && rn->out_eof && rn->err_eof;
}

static void note(struct run *rn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct run *rn, const char *fmt, ...)
{
    va_list ap;
    if (rn->res->message[0])
        return; /* the first cause is the one worth telling */
    va_start(ap, fmt);
    vsnprintf(rn->res->message, sizeof(rn->res->message), fmt, ap);
    va_end(ap);
}

static void take_output(int fd, struct hutch_output *keep, int stream_fd, int *eof)
{
    char buf[READ_CHUNK];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        long head;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                *eof = 1;
            return;
        }
        if (n == 0) {
            *eof = 1;
            return;
        }
        /* The head goes to the live copy now; the tail is known at the
         * end (finish_output). */
        head = hutch_output_feed(keep, buf, (size_t)n);
        if (stream_fd >= 0 && head > 0)
            hutch_write_all(stream_fd, buf, (size_t)head);
        /* A chunk at a time: the loop must also see the deadline. */
        if ((size_t)n < sizeof(buf))
            return;
    }
}

/* What was kept of a stream into the result; the live copy gets the tail,
 * after a note of what was left out (on stderr, hutch's own). */
static void finish_output(struct hutch_output *o, struct hutch_buf *to, size_t *head,
                          uint64_t *total, uint64_t *omitted, int stream_fd,
                          const char *name)
{
    if (hutch_output_finish(o, to, head, omitted) < 0)
        *omitted = o->total - to->len;
    *total = o->total;
    if (stream_fd < 0 || to->len <= *head)
        return;
    if (*omitted)
        dprintf(STDERR_FILENO,
                "\nhutch: %llu bytes of %s left out; its last %zu follow\n",
                (unsigned long long)*omitted, name, to->len - *head);
    hutch_write_all(stream_fd, to->data + *head, to->len - *head);
}

/* Tool calls run in calls.c, which writes their answers to the channel. */
static void answers_stuck(struct run *rn)
{
    note(rn, "the runner does not read its tool results; stopping it");
    rn->fail = 1;
}

/* The program's new connections to the egress proxy: each handed to the
 * execution's engine, which answers refusals itself.  A listener that
 * fails (the sandbox's side went away) is closed: later connections are
 * refused. */
static void take_connections(struct run *rn)
{
    for (int n = 0; n < HUTCH_EGRESS_ACCEPT_BATCH; n++) {
        struct hutch_err e = HUTCH_ERR_INIT;
        int fd = accept4(rn->box->egress_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                errno == ECONNABORTED)
                return;
            hutch_debug("egress: the listener of %s failed (%s): closed",
                        rn->req->label ? rn->req->label : "a sandbox", strerror(errno));
            close(rn->box->egress_fd);
            rn->box->egress_fd = -1;
            return;
        }
        if (hutch_egress_accept(rn->req->egress, fd, &e) < 0)
            hutch_debug("egress: %s", e.msg);
    }
}

static int start_job(struct run *rn, struct hutch_err *err)
{
    struct hutch_job job = {.struct_size = sizeof(job),
                            .label = rn->req->label ? rn->req->label : "run",
                            .deadline_ms = rn->deadline,
                            .egress = rn->req->egress != NULL};
    cJSON *msg;
    int r = rn->ex->assign(rn->state, rn->sb, &job, err);
    if (r < 0)
        return r;
    if (rn->req->tar && rn->req->tar_len) {
        r = rn->ex->put_archive(rn->state, rn->sb, rn->req->tar, rn->req->tar_len, err);
        if (r < 0)
            return r;
    }
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "t", "run");
    cJSON_AddStringToObject(msg, "lang", rn->req->language);
    cJSON_AddStringToObject(msg, "code", rn->req->code);
    cJSON_AddStringToObject(msg, "cwd", "/work");
    if (rn->req->egress) {
        /* What Python's urllib and requests, curl, pip and most tools read;
         * lower case too (curl reads only http_proxy in lower case). */
        static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                            "https_proxy"};
        /* Where hutch adds secrets it shows certificates of its own CA:
         * the bundle job.c put in the files trusts it and the system's
         * CAs, for OpenSSL (Python's ssl, curl), requests, curl, pip and
         * Node. */
        static const char *const ca_names[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                               "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                               "PIP_CERT"};
        size_t blen;
        char url[64];
        cJSON *env = cJSON_AddObjectToObject(msg, "env");
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", HUTCH_EGRESS_PORT);
        for (size_t i = 0; env && i < sizeof(names) / sizeof(names[0]); i++)
            cJSON_AddStringToObject(env, names[i], url);
        for (size_t i = 0; env && hutch_egress_ca_bundle(rn->req->egress, &blen) &&
                           i < sizeof(ca_names) / sizeof(ca_names[0]);
             i++)
            cJSON_AddStringToObject(env, ca_names[i], HUTCH_EGRESS_BUNDLE_PATH);
    }
    r = queue(rn, msg);
    if (r < 0)
        return hutch_err_set(err, r, "queueing the job: %s", strerror(-r));
    flush_pending(rn);
    rn->phase = RUNNING;
    return 0;
}

static void on_line(struct run *rn, const char *line, size_t len)
{
    struct hutch_msg m;
    struct hutch_err perr = {0};
    /* What parsing it holds, until the message is freed (a done message's
     * result stays with the execution: its charge too). */
    size_t cost = hutch_json_text_cost(line, len);

    int br = hutch_budget_take(rn->budget, cost);
    if (br < 0) {
        char why[600];
        note(rn,
             "the sandbox sent a %zu-byte message (a result, or a tool call's "
             "arguments) that would take about %zu MiB of hutch's memory to hold, %s: "
             "return or pass less (large data belongs in files under /work/out); "
             "execution stopped",
             len, (cost + (1u << 20) - 1) >> 20,
             hutch_budget_why(rn->budget, br, why, sizeof(why)));
        rn->fail = 1;
        return;
    }
    if (hutch_wire_parse(line, len, &m, &perr) < 0) {
        hutch_budget_give(rn->budget, cost);
        note(rn, "the sandbox sent an invalid protocol message (%s); execution stopped",
             perr.msg);
        rn->fail = 1;
        return;
    }
    switch (m.type) {
    case HUTCH_MSG_READY:
        note(rn, "the sandbox sent a second ready message; execution stopped");
        rn->fail = 1;
        break;
    case HUTCH_MSG_TOOL_CALL:
    case HUTCH_MSG_SEARCH:
    case HUTCH_MSG_DESCRIBE:
        if (rn->phase != RUNNING) {
            note(rn, "the sandbox sent a tool call outside a job; execution stopped");
            rn->fail = 1;
        } else {
            /* The arguments move to the call, which charges them itself. */
            cJSON *args = m.args ? cJSON_DetachItemViaPointer(m.root, m.args) : NULL;
            m.args = NULL;
            hutch_budget_give(rn->budget, cost);
            cost = 0;
            /* tools.search and describe run as a call does, answered by
             * req->search. */
            if (hutch_calls_submit(rn->calls, m.id,
                                   m.tool                         ? m.tool
                                   : m.type == HUTCH_MSG_DESCRIBE ? HUTCH_CALLS_DESCRIBE
                                                                  : HUTCH_CALLS_SEARCH,
                                   args, rn->deadline) < 0)
                answers_stuck(rn);
        }
        break;
    case HUTCH_MSG_DONE:
        if (rn->phase != RUNNING) {
            note(rn, "the sandbox sent done outside a job; execution stopped");
            rn->fail = 1;
            break;
        }
        rn->got_done = 1;
        rn->done_status = m.status;
        rn->done_files = m.files;
        rn->t_done = hutch_now_us();
        rn->phase = DONE;
        rn->res->ok = m.ok;
        cJSON_Delete(rn->res->result);
        rn->res->result =
            m.result ? cJSON_DetachItemViaPointer(m.root, m.result) : NULL;
        if (!m.ok && m.error && hutch_result_error_set(&rn->res->error, m.error) < 0)
            note(rn, "the program's error not kept: out of memory");
        cost = 0; /* held with the result */
        break;
    }
    hutch_msg_free(&m);
    hutch_budget_give(rn->budget, cost);
}

/* One read of the channel, and the whole messages it completes: the bytes
 * read, 0 when nothing was there (or at end of file). */
static ssize_t read_chan(struct run *rn)
{
    char buf[READ_CHUNK];
    ssize_t n = read(rn->sb->chan_fd, buf, sizeof(buf));
    const char *line;
    size_t len;

    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)
            rn->chan_eof = 1;
        return 0;
    }
    if (n == 0) {
        rn->chan_eof = 1;
        return 0;
    }
    if (hutch_wire_feed(rn->rd, buf, (size_t)n) < 0) {
        note(rn, "the sandbox sent a protocol message over %u bytes; execution stopped",
             HUTCH_WIRE_MAX_LINE);
        rn->fail = 1;
        return 0;
    }
    while (!rn->fail && hutch_wire_next(rn->rd, &line, &len) == 1)
        on_line(rn, line, len);
    return n;
}

static int list_file(void *arg, const char *path, int is_dir, uint64_t size)
{
    if (is_dir)
        return 0;
    return hutch_file_list_add(arg, path, size);
}

/* Lists the regular files of an untrusted tar as the judge in archive.c
 * takes them, so that a listing never names what extract refuses. */
static int list_files(const struct hutch_buf *tar, struct hutch_file_list *files,
                      struct hutch_err *err)
{
    struct hutch_archive_limits lim;

    if (tar->len == 0)
        return 0;
    hutch_archive_limits_out(&lim);
    return hutch_archive_list(tar->data, tar->len, &lim, list_file, files, err);
}

static void finish_files(struct run *rn)
{
    struct hutch_exec_result *res = rn->res;
    struct hutch_err ferr = {0};
    int r;

    r = rn->ex->get_archive(rn->state, rn->sb, hutch_buf_write, &res->out_tar,
                            rn->req->files_bytes &&
                                    rn->req->files_bytes < HUTCH_TAR_OUT_MAX_BYTES
                                ? rn->req->files_bytes
                                : HUTCH_TAR_OUT_MAX_BYTES,
                            &ferr);
    if (r == 0)
        r = list_files(&res->out_tar, &res->files, &ferr);
    if (r == 0 && rn->req->out_dir && res->out_tar.len) {
        struct hutch_archive_limits lim;
        hutch_archive_limits_out(&lim);
        r = hutch_archive_extract(res->out_tar.data, res->out_tar.len, rn->req->out_dir,
                                  &lim, &ferr);
    }
    if (r < 0) {
        note(rn, "result files rejected: %s", ferr.msg);
        hutch_file_list_clear(&res->files);
        res->out_tar.len = 0;
        res->exit_code = HUTCH_EXIT_ERROR;
    }
}

/* --- boxes: a sandbox until its runner is ready ------------------------------ */

int hutch_class_equal(const struct hutch_sandbox_class *a,
                      const struct hutch_sandbox_class *b)
{
    return strcmp(a->language, b->language) == 0 &&
           a->memory_bytes == b->memory_bytes && a->work_bytes == b->work_bytes &&
           a->tmp_bytes == b->tmp_bytes && a->pids_max == b->pids_max &&
           a->cpu_millis == b->cpu_millis && a->open_files == b->open_files &&
           strcmp(a->options ? a->options : "", b->options ? b->options : "") == 0;
}

static void box_free(struct hutch_box *b)
{
    if (b->egress_fd >= 0)
        close(b->egress_fd);
    hutch_wire_reader_free(&b->rd);
    free(b->options);
    free(b);
}

int hutch_box_egress(const struct hutch_box *b)
{
    return b && b->egress_fd >= 0;
}

void hutch_box_destroy(struct hutch_box *b)
{
    if (!b)
        return;
    b->plugin->ex->destroy(b->plugin->state, b->sb);
    hutch_metrics_sandbox(-1);
    box_free(b);
}

/* Reads what is there without blocking, keeping up to keep_max bytes:
 * the bytes read, 0 at end of file or when nothing is there. */
static ssize_t drain_some(int fd, char *keep, size_t keep_max, size_t *kept)
{
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0 && keep && *kept < keep_max) {
        size_t take = (size_t)n < keep_max - *kept ? (size_t)n : keep_max - *kept;
        memcpy(keep + *kept, buf, take);
        *kept += take;
    }
    return n > 0 ? n : 0;
}

/* Why a runner that was starting went away (its channel closed, or its
 * sandbox said it ended): the state of its sandbox, as its executor's reap
 * tells it — the runner's exit status, or why the sandbox itself ended (a
 * plugin adds what its runtime said) — waited for a little, since the end
 * of the channel may come before the exit report. */
static void gone_why(struct hutch_box *b, char *out, size_t len)
{
    const struct hutch_executor *ex = b->plugin->ex;
    uint64_t deadline = hutch_now_ms() + HUTCH_WIRE_GONE_MS;
    struct hutch_exit st = {.struct_size = sizeof(st)};
    struct hutch_err rerr = {0};
    int r;

    for (;;) {
        struct pollfd pfd = {b->sb->event_fd, POLLIN, 0};
        rerr = (struct hutch_err){0};
        r = ex->reap(b->plugin->state, b->sb, &st, &rerr);
        if (r != -EAGAIN || hutch_now_ms() >= deadline)
            break;
        if (poll(&pfd, 1, 50) < 0 && errno != EINTR)
            break;
    }
    if (r == 0 && st.signal)
        snprintf(out, len, "the runner was killed by signal %d%s", st.signal,
                 st.oom ? ", out of memory" : "");
    else if (r == 0)
        snprintf(out, len, "the runner exited with status %d", st.exit_code);
    else if (r == -EAGAIN)
        snprintf(out, len, "its channel closed while its sandbox still ran");
    else
        snprintf(out, len, "%s", rerr.msg[0] ? rerr.msg : strerror(-r));
}

int hutch_box_start(struct hutch_plugin *p, const struct hutch_sandbox_class *cls,
                    const char *label, int pooled, int (*cancelled)(void *), void *arg,
                    struct hutch_box **out, struct hutch_err *err)
{
    const struct hutch_executor *ex = p->ex;
    struct hutch_box *b = calloc(1, sizeof(*b));
    struct hutch_start how = {.struct_size = sizeof(how),
                              .pooled = (uint32_t)pooled,
                              .label = label,
                              .cancelled = cancelled,
                              .cancel_arg = arg};
    char errtext[601];
    size_t errlen = 0;
    uint64_t deadline;
    int r, ready = 0, gone = 0, ready_ms;

    if (!b)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    b->plugin = p;
    b->pooled = pooled;
    b->egress_fd = -1;
    b->cls = *cls;
    if (cls->options && !(b->options = strdup(cls->options))) {
        free(b);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    b->cls.options = b->options;
    hutch_wire_reader_init(&b->rd, HUTCH_WIRE_MAX_LINE);
    b->t_begin_us = hutch_now_us();
    b->cls.struct_size = sizeof(b->cls);
    r = ex->start(p->state, &b->cls, &how, &b->sb, err);
    if (r < 0) {
        box_free(b);
        return r;
    }
    hutch_metrics_sandbox(1);
    /* The listener is the core's from here on (hutch-executor.h). */
    if ((ex->caps & HUTCH_CAP_EGRESS) &&
        HUTCH_HAS_MEMBER(b->sb, struct hutch_sandbox, egress_fd) &&
        b->sb->egress_fd >= 0) {
        b->egress_fd = b->sb->egress_fd;
        hutch_set_nonblock(b->egress_fd);
    }
    b->t_started_us = hutch_now_us();
    hutch_set_nonblock(b->sb->chan_fd);
    hutch_set_nonblock(b->sb->stdout_fd);
    hutch_set_nonblock(b->sb->stderr_fd);

    /* Until "ready": the channel, stderr (kept for the message when the
     * runner fails), stdout (drained), the exit event, the deadline. */
    ready_ms = pooled ? HUTCH_WIRE_READY_POOL_MS : HUTCH_WIRE_READY_MS;
    deadline = hutch_now_ms() + (uint64_t)ready_ms;
    while (!ready && !gone) {
        struct pollfd fds[4] = {
            {b->sb->chan_fd, POLLIN, 0},
            {b->sb->stderr_fd, POLLIN, 0},
            {b->sb->stdout_fd, POLLIN, 0},
            {b->sb->event_fd, POLLIN, 0},
        };
        uint64_t now = hutch_now_ms();
        int timeout;
        if (now >= deadline) {
            r = hutch_err_set(err, -ETIMEDOUT,
                              "the %s runner did not start within %d ms", cls->language,
                              ready_ms);
            goto fail;
        }
        if (cancelled && cancelled(arg)) {
            r = hutch_err_set(err, -ECANCELED, "cancelled while the sandbox started");
            goto fail;
        }
        timeout = (int)(deadline - now);
        if (cancelled && timeout > 50)
            timeout = 50;
        if (poll(fds, 4, timeout) < 0) {
            if (errno == EINTR)
                continue;
            r = hutch_err_set(err, -errno, "poll: %s", strerror(errno));
            goto fail;
        }
        if (fds[1].revents)
            drain_some(b->sb->stderr_fd, errtext, sizeof(errtext) - 1, &errlen);
        if (fds[2].revents)
            drain_some(b->sb->stdout_fd, NULL, 0, NULL);
        if (fds[0].revents) {
            char buf[4096];
            ssize_t n = read(b->sb->chan_fd, buf, sizeof(buf));
            const char *line;
            size_t len;
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                gone = 1;
            } else if (n > 0) {
                struct hutch_msg m;
                struct hutch_err perr = {0};
                if (hutch_wire_feed(&b->rd, buf, (size_t)n) < 0) {
                    r = hutch_err_set(err, -EPROTO,
                                      "the %s runner sent an over-long first message",
                                      cls->language);
                    goto fail;
                }
                if (hutch_wire_next(&b->rd, &line, &len) == 1) {
                    if (hutch_wire_parse(line, len, &m, &perr) < 0 ||
                        m.type != HUTCH_MSG_READY) {
                        if (perr.msg[0] == '\0')
                            hutch_msg_free(&m);
                        r = hutch_err_set(err, -EPROTO,
                                          "the %s runner's first message is not "
                                          "\"ready\"%s%s",
                                          cls->language, perr.msg[0] ? ": " : "",
                                          perr.msg);
                        goto fail;
                    }
                    hutch_msg_free(&m);
                    ready = 1;
                }
            }
        }
        if (!ready && (fds[3].revents & (POLLIN | POLLHUP | POLLERR)))
            gone = 1;
    }
    if (!ready) {
        /* What it printed on its way out says why (bounded: a runner
         * that keeps printing is cut at the keep buffer). */
        while (errlen < sizeof(errtext) - 1 &&
               drain_some(b->sb->stderr_fd, errtext, sizeof(errtext) - 1, &errlen) > 0)
            ;
        {
            char why[400];
            gone_why(b, why, sizeof(why));
            r = hutch_err_set(err, -EIO, "the %s runner failed to start%s%.*s (%s)",
                              cls->language, errlen ? ": " : " with no output",
                              (int)errlen, errtext, why);
        }
        goto fail;
    }
    b->t_ready_us = hutch_now_us();
    hutch_debug("%s sandbox for %s ready (ms): start %.2f, runner %.2f%s", p->name,
                cls->language, (b->t_started_us - b->t_begin_us) / 1000.0,
                (b->t_ready_us - b->t_started_us) / 1000.0, pooled ? " (pooled)" : "");
    *out = b;
    return 0;
fail:
    hutch_box_destroy(b);
    return r;
}

void hutch_box_cpu_weight(void *box, uint32_t weight)
{
    struct hutch_box *b = box;
    const struct hutch_executor *ex = b->plugin->ex;
    struct hutch_err err = {0};

    if (!HUTCH_HAS_MEMBER(ex, struct hutch_executor, cpu_weight) || !ex->cpu_weight)
        return;
    if (ex->cpu_weight(b->plugin->state, b->sb, weight, &err) < 0)
        hutch_log(HUTCH_LOG_WARN, "exec", "%s: setting the CPU weight to %u: %s",
                  b->plugin->name, weight, err.msg);
}

int hutch_box_idle_ok(struct hutch_box *b)
{
    struct pollfd fds[4] = {
        {b->sb->chan_fd, POLLIN, 0},
        {b->sb->stderr_fd, POLLIN, 0},
        {b->sb->stdout_fd, POLLIN, 0},
        {b->sb->event_fd, POLLIN, 0},
    };
    return poll(fds, 4, 0) == 0;
}

/* --- one job on a ready box ------------------------------------------------------ */

int hutch_exec_run(struct hutch_box *b, const struct hutch_exec_req *req,
                   struct hutch_exec_result *res, struct hutch_err *err)
{
    struct run rn;
    uint64_t t0 = hutch_now_ms(), next_tick = 0, timeout_ms;
    int r;

    memset(&rn, 0, sizeof(rn));
    rn.req = req;
    rn.res = res;
    rn.box = b;
    rn.ex = b->plugin->ex;
    rn.state = b->plugin->state;
    rn.sb = b->sb;
    rn.rd = &b->rd;
    rn.done_status = -1;
    rn.exit.struct_size = sizeof(rn.exit);
    snprintf(res->executor, sizeof(res->executor), "%s", b->plugin->name);
    res->warm = b->pooled;
    res->memory_mb = b->cls.memory_bytes >> 20;
    timeout_ms = req->timeout_ms ? req->timeout_ms : HUTCH_DEFAULT_TIMEOUT_MS;
    hutch_buf_init(&rn.pending, HUTCH_WIRE_MAX_PENDING);
    if (strlen(req->code) > HUTCH_MAX_CODE_BYTES) {
        r = hutch_err_set(err, -E2BIG, "code is larger than %u bytes",
                          HUTCH_MAX_CODE_BYTES);
        goto out;
    }
    if (req->egress && b->egress_fd < 0) {
        r = hutch_err_set(
            err, -ENOTSUP,
            "egress: this sandbox of the %s executor cannot carry a program's "
            "connections (on docker: an engine on another host; hutch's log says "
            "why)",
            b->plugin->name);
        goto out;
    }
    if (!req->egress && b->egress_fd >= 0) {
        /* No egress: nobody accepts, so nothing may queue there either. */
        close(b->egress_fd);
        b->egress_fd = -1;
    }
    {
        size_t limit = req->output_bytes && req->output_bytes < HUTCH_OUTPUT_MAX_BYTES
                           ? (size_t)req->output_bytes
                           : HUTCH_OUTPUT_MAX_BYTES;
        hutch_output_init(&rn.oout, limit);
        hutch_output_init(&rn.oerr, limit);
    }
    rn.budget = &res->budget;
    rn.budget->parent = hutch_budget_process();
    rn.budget->share = req->share;
    rn.calls =
        hutch_calls_new(req->tool, req->tool_arg, rn.sb->chan_fd, &res->tool_calls);
    if (!rn.calls) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    hutch_calls_set_search(rn.calls, req->search, req->search_arg);
    hutch_calls_set_start(rn.calls, req->tool_start);
    hutch_calls_set_budget(rn.calls, rn.budget);
    rn.deadline = hutch_now_ms() + timeout_ms;
    r = start_job(&rn, err);
    if (r < 0)
        goto out;

    /* The outcome is complete when the runner exited, or said_done: then
     * nobody waits for a process to exit. */
    while (!rn.exited && !said_done(&rn)) {
        struct pollfd fds[6];
        int nfds = 0, ichan = -1, iout = -1, ierr = -1, iev = -1, icalls = -1,
            iegress = -1;
        int timeout;
        uint64_t now = hutch_now_ms();

        if (rn.fail)
            break;
        if (req->cancel && atomic_load(req->cancel)) {
            note(&rn, "execution cancelled");
            rn.fail = 3;
            break;
        }
        if (now >= rn.deadline) {
            res->timed_out = 1;
            note(&rn,
                 "timed out after %llu ms; every process of the sandbox was killed",
                 (unsigned long long)timeout_ms);
            break;
        }
        if (req->tick && now >= next_tick) {
            if (next_tick)
                req->tick(req->tick_arg, now - t0);
            next_tick = now + 1000;
        }
        timeout = (int)(rn.deadline - now);
        if ((req->cancel || req->tick) && timeout > 50)
            timeout = 50;
        if (!rn.chan_eof) {
            ichan = nfds;
            fds[nfds++] =
                (struct pollfd){rn.sb->chan_fd,
                                (short)(POLLIN | (rn.pending_off < rn.pending.len ||
                                                          hutch_calls_unsent(rn.calls)
                                                      ? POLLOUT
                                                      : 0)),
                                0};
        }
        if (!rn.out_eof) {
            iout = nfds;
            fds[nfds++] = (struct pollfd){rn.sb->stdout_fd, POLLIN, 0};
        }
        if (!rn.err_eof) {
            ierr = nfds;
            fds[nfds++] = (struct pollfd){rn.sb->stderr_fd, POLLIN, 0};
        }
        iev = nfds;
        fds[nfds++] = (struct pollfd){rn.sb->event_fd, POLLIN, 0};
        icalls = nfds;
        fds[nfds++] = (struct pollfd){hutch_calls_fd(rn.calls), POLLIN, 0};
        if (req->egress && b->egress_fd >= 0) {
            iegress = nfds;
            fds[nfds++] = (struct pollfd){b->egress_fd, POLLIN, 0};
        }
        if (poll(fds, (nfds_t)nfds, timeout) < 0) {
            if (errno == EINTR)
                continue;
            r = hutch_err_set(err, -errno, "poll: %s", strerror(errno));
            rn.fail = 2;
            break;
        }
        if (ichan >= 0 && (fds[ichan].revents & POLLOUT)) {
            flush_pending(&rn);
            if (rn.pending_off == rn.pending.len && hutch_calls_flush(rn.calls) < 0)
                answers_stuck(&rn);
        }
        if (ichan >= 0 && (fds[ichan].revents & (POLLIN | POLLHUP | POLLERR)))
            read_chan(&rn);
        if (iout >= 0 && (fds[iout].revents & (POLLIN | POLLHUP | POLLERR)))
            take_output(rn.sb->stdout_fd, &rn.oout, req->stream_fd_out, &rn.out_eof);
        if (ierr >= 0 && (fds[ierr].revents & (POLLIN | POLLHUP | POLLERR)))
            take_output(rn.sb->stderr_fd, &rn.oerr, req->stream_fd_err, &rn.err_eof);
        if (icalls >= 0 && (fds[icalls].revents & POLLIN)) {
            if (hutch_calls_take(rn.calls) < 0)
                answers_stuck(&rn);
        }
        if (iegress >= 0 && (fds[iegress].revents & (POLLIN | POLLHUP | POLLERR)))
            take_connections(&rn);
        /* The runner's end is often readable together with its done and
         * its output's end: then the outcome is done's.  Reaped first, it
         * took the exited path, which fetched /work/out whatever done said
         * (a warm docker run paid 50-80 ms for it, one run in three). */
        if ((fds[iev].revents & (POLLIN | POLLHUP | POLLERR)) && !said_done(&rn)) {
            struct hutch_err rerr = {0};
            int rr = rn.ex->reap(rn.state, rn.sb, &rn.exit, &rerr);
            if (rr == 0) {
                rn.exited = 1;
            } else if (rr != -EAGAIN) {
                /* The sandbox is gone in a way the executor cannot explain
                 * as the program's exit (its daemon restarted under it):
                 * hutch's failure, and the event would stay readable. */
                r = hutch_err_set(err, rr, "%s",
                                  rerr.msg[0] ? rerr.msg
                                              : "the sandbox ended abruptly");
                rn.fail = 2;
                break;
            }
        }
    }

    if (rn.exited) {
        /* What the program wrote before it ended is in the pipes; whatever
         * it left running is not waited for. */
        int spin = 0;
        while ((!rn.out_eof || !rn.err_eof) && spin++ < 64) {
            uint64_t before = rn.oout.total + rn.oerr.total;
            if (!rn.out_eof)
                take_output(rn.sb->stdout_fd, &rn.oout, req->stream_fd_out,
                            &rn.out_eof);
            if (!rn.err_eof)
                take_output(rn.sb->stderr_fd, &rn.oerr, req->stream_fd_err,
                            &rn.err_eof);
            if (rn.oout.total + rn.oerr.total == before)
                break;
        }
        /* The runner may have sent done just before it exited: what the
         * channel still holds of it (a large result can be most of a
         * socket buffer) is read whole, in as many reads as a message of
         * the largest size takes, and no more (a process the program left
         * behind may hold the channel and keep writing). */
        for (size_t reads = HUTCH_WIRE_MAX_LINE / READ_CHUNK + 2;
             reads-- && !rn.chan_eof && !rn.got_done && !rn.fail && read_chan(&rn) > 0;)
            ;
    }
    hutch_calls_end(rn.calls);

    if (rn.fail == 2)
        goto out;
    if (!rn.exited && !rn.fail && !res->timed_out &&
        !(req->cancel && atomic_load(req->cancel))) {
        /* Done, output closed: the exit status is the one done gave. */
        res->exit_code = rn.done_status;
        if (!req->skip_files && rn.done_files != 0)
            finish_files(&rn);
        r = 0;
        goto out;
    }
    if (!rn.exited || rn.fail)
        rn.ex->kill(rn.state, rn.sb);
    if (res->timed_out) {
        res->exit_code = HUTCH_EXIT_TIMEOUT;
    } else if (rn.fail) {
        res->exit_code = HUTCH_EXIT_ERROR;
    } else {
        res->exit_code = rn.exit.exit_code;
        res->oom = rn.exit.oom;
        if (rn.exit.oom) {
            res->exit_code = HUTCH_EXIT_OOM;
            note(&rn, "killed: the program exceeded its memory limit of %llu MB",
                 (unsigned long long)res->memory_mb);
        } else if (rn.exit.signal) {
            note(&rn, "the program was killed by signal %d (%s)", rn.exit.signal,
                 strsignal(rn.exit.signal));
        } else if (!rn.got_done) {
            note(&rn, "the runner ended without reporting a result");
        }
        if (!req->skip_files)
            finish_files(&rn);
    }
    r = 0;
out:
    finish_output(&rn.oout, &res->out, &res->out_head, &res->out_total,
                  &res->out_omitted, req->stream_fd_out, "stdout");
    finish_output(&rn.oerr, &res->err, &res->err_head, &res->err_total,
                  &res->err_omitted, req->stream_fd_err, "stderr");
    hutch_output_free(&rn.oout);
    hutch_output_free(&rn.oerr);
    res->duration_ms = hutch_now_ms() - t0;
    hutch_debug("timing (ms): %s job done %.2f, collected %.2f",
                b->pooled ? "warm" : "cold",
                rn.t_done ? (rn.t_done - t0 * 1000) / 1000.0 : -1.0,
                (hutch_now_us() - t0 * 1000) / 1000.0);
    if (!res->result)
        res->result = cJSON_CreateNull();
    hutch_calls_free(rn.calls);
    hutch_buf_free(&rn.pending);
    return r;
}
