/* exec.c — one execution, end to end.
 *
 * The core's side of a sandbox: a single poll loop over the runner's wire
 * channel, the program's stdout and stderr, and the plugin's exit event,
 * bounded by a deadline.  Everything read here is untrusted and capped.
 * The runner's tool calls are run and answered by calls.c. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive_lib.h"
#include "calls.h"
#include "caps.h"
#include "exec.h"
#include "log.h"
#include "util.h"
#include "wire.h"

#define READ_CHUNK  65536
#define PENDING_MAX (64u << 20) /* unsent tool results before we give up */

enum phase { WAIT_READY, RUNNING, DONE };

struct run {
    const struct hutch_exec_req *req;
    struct hutch_exec_result *res;
    const struct hutch_executor *ex;
    void *state;
    struct hutch_sandbox *sb;
    struct hutch_wire_reader rd;
    struct hutch_buf pending; /* bytes queued for the runner */
    size_t pending_off;
    enum phase phase;
    int got_done, exited, chan_eof, out_eof, err_eof;
    int fail; /* protocol error or hutch error: kill */
    int out_cut_noted, err_cut_noted;
    uint64_t ntool;
    uint64_t deadline; /* ms, once the job runs */
    struct hutch_calls *calls;
    struct hutch_exit exit;
    uint64_t t_started, t_ready, t_done; /* µs, for the debug log */
};

void hutch_exec_result_init(struct hutch_exec_result *res)
{
    memset(res, 0, sizeof(*res));
    hutch_buf_init(&res->out, HUTCH_OUTPUT_MAX_BYTES);
    hutch_buf_init(&res->err, HUTCH_OUTPUT_MAX_BYTES);
    hutch_buf_init(&res->out_tar, HUTCH_TAR_MAX_STREAM);
    res->tool_calls = cJSON_CreateArray();
    res->files = cJSON_CreateArray();
}

void hutch_exec_result_free(struct hutch_exec_result *res)
{
    hutch_buf_free(&res->out);
    hutch_buf_free(&res->err);
    hutch_buf_free(&res->out_tar);
    cJSON_Delete(res->result);
    cJSON_Delete(res->error);
    cJSON_Delete(res->files);
    cJSON_Delete(res->tool_calls);
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

static void take_output(struct run *rn, int fd, struct hutch_buf *keep, uint64_t *total,
                        int stream_fd, int *cut_noted, int *eof, const char *name)
{
    char buf[READ_CHUNK];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        size_t room, take;
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
        *total += (uint64_t)n;
        room = keep->max - keep->len;
        take = (size_t)n < room ? (size_t)n : room;
        if (take)
            hutch_buf_append(keep, buf, take);
        if (stream_fd >= 0 && take)
            hutch_write_all(stream_fd, buf, take);
        if (take < (size_t)n && !*cut_noted) {
            *cut_noted = 1;
            if (stream_fd >= 0)
                dprintf(STDERR_FILENO, "\nhutch: %s truncated after %zu bytes\n", name,
                        keep->max);
        }
        /* A chunk at a time: the loop must also see the deadline. */
        if ((size_t)n < sizeof(buf))
            return;
    }
}

/* Tool calls run in calls.c, which writes their answers to the channel. */
static void answers_stuck(struct run *rn)
{
    note(rn, "the runner does not read its tool results; stopping it");
    rn->fail = 1;
}

static int start_job(struct run *rn, struct hutch_err *err)
{
    cJSON *msg;
    int r;
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
    r = queue(rn, msg);
    if (r < 0)
        return hutch_err_set(err, r, "queueing the job: %s", strerror(-r));
    flush_pending(rn);
    rn->phase = RUNNING;
    return 0;
}

static void on_line(struct run *rn, const char *line, size_t len, struct hutch_err *err)
{
    struct hutch_msg m;
    struct hutch_err perr = {0};

    if (hutch_wire_parse(line, len, &m, &perr) < 0) {
        note(rn, "the sandbox sent an invalid protocol message (%s); execution stopped",
             perr.msg);
        rn->fail = 1;
        return;
    }
    switch (m.type) {
    case HUTCH_MSG_READY:
        if (rn->phase != WAIT_READY) {
            note(rn, "the sandbox sent a second ready message; execution stopped");
            rn->fail = 1;
        } else if ((rn->t_ready = hutch_now_us()), start_job(rn, err) < 0) {
            rn->fail = 2;
        }
        break;
    case HUTCH_MSG_TOOL_CALL:
        if (rn->phase != RUNNING) {
            note(rn, "the sandbox sent a tool call outside a job; execution stopped");
            rn->fail = 1;
        } else if (hutch_calls_submit(rn->calls, m.id, m.tool, m.args, rn->deadline) <
                   0) {
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
        rn->t_done = hutch_now_us();
        rn->phase = DONE;
        rn->res->ok = m.ok;
        cJSON_Delete(rn->res->result);
        rn->res->result =
            m.result ? cJSON_DetachItemViaPointer(m.root, m.result) : NULL;
        if (!m.ok && m.error)
            rn->res->error = cJSON_DetachItemViaPointer(m.root, m.error);
        break;
    }
    hutch_msg_free(&m);
}

static void read_chan(struct run *rn, struct hutch_err *err)
{
    char buf[READ_CHUNK];
    ssize_t n = read(rn->sb->chan_fd, buf, sizeof(buf));
    const char *line;
    size_t len;

    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)
            rn->chan_eof = 1;
        return;
    }
    if (n == 0) {
        rn->chan_eof = 1;
        return;
    }
    if (hutch_wire_feed(&rn->rd, buf, (size_t)n) < 0) {
        note(rn, "the sandbox sent a protocol message over %u bytes; execution stopped",
             HUTCH_WIRE_MAX_LINE);
        rn->fail = 1;
        return;
    }
    while (!rn->fail && hutch_wire_next(&rn->rd, &line, &len) == 1)
        on_line(rn, line, len, err);
}

/* Lists the regular files of an untrusted tar, checking every entry the way
 * the unpacker does, so that a listing never names what extract refuses. */
static int list_files(const struct hutch_buf *tar, cJSON *files, struct hutch_err *err)
{
    struct hutch_archive_limits lim;
    struct archive *a;
    struct archive_entry *e;
    uint32_t count = 0;
    int r = 0, ar;

    if (tar->len == 0)
        return 0;
    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    hutch_archive_limits_out(&lim);
    a = archive_read_new();
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, tar->data, tar->len) != ARCHIVE_OK) {
        r = hutch_err_set(err, -EBADMSG, "result files: %s", archive_error_string(a));
        goto out;
    }
    while ((ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *path = archive_entry_pathname(e);
        mode_t type = archive_entry_filetype(e);
        if (++count > lim.max_entries) {
            r = hutch_err_set(err, -E2BIG, "result files: more than %u entries",
                              lim.max_entries);
            goto out;
        }
        char clean[HUTCH_TAR_MAX_PATH + 2];
        size_t plen = path ? strlen(path) : 0;
        if (!path || plen > HUTCH_TAR_MAX_PATH) {
            r = hutch_err_set(err, -EINVAL,
                              "result files: an entry has no or a too long path");
            goto out;
        }
        /* Directories may carry one trailing slash, and names a "./". */
        memcpy(clean, path, plen + 1);
        if (type == AE_IFDIR && plen > 1 && clean[plen - 1] == '/')
            clean[--plen] = '\0';
        path = clean[0] == '.' && clean[1] == '/' ? clean + 2 : clean;
        if (hutch_archive_check_relpath(path, &lim, err) < 0) {
            r = -EINVAL;
            goto out;
        }
        if (type == AE_IFREG) {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "path", path);
            cJSON_AddNumberToObject(f, "size", (double)archive_entry_size(e));
            cJSON_AddItemToArray(files, f);
        } else if (type != AE_IFDIR) {
            r = hutch_err_set(err, -EINVAL,
                              "result files: \"%s\" is not a regular file", path);
            goto out;
        }
    }
    if (ar != ARCHIVE_EOF) {
        r = hutch_err_set(err, -EBADMSG, "result files: %s", archive_error_string(a));
        goto out;
    }
out:
    archive_read_free(a);
    return r;
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
        r = list_files(&res->out_tar, res->files, &ferr);
    if (r == 0 && rn->req->out_dir && res->out_tar.len) {
        struct hutch_archive_limits lim;
        hutch_archive_limits_out(&lim);
        r = hutch_archive_extract(res->out_tar.data, res->out_tar.len, rn->req->out_dir,
                                  &lim, &ferr);
    }
    if (r < 0) {
        note(rn, "result files rejected: %s", ferr.msg);
        cJSON_Delete(res->files);
        res->files = cJSON_CreateArray();
        res->out_tar.len = 0;
        res->exit_code = HUTCH_EXIT_ERROR;
    }
}

int hutch_exec_run(struct hutch_plugin *plugin, const struct hutch_exec_req *req,
                   struct hutch_exec_result *res, struct hutch_err *err)
{
    struct hutch_sandbox_spec spec = {0};
    struct run rn;
    uint64_t t0 = hutch_now_ms(), ready_deadline, t_destroy, next_tick = 0;
    int r;

    memset(&rn, 0, sizeof(rn));
    rn.req = req;
    rn.res = res;
    rn.ex = plugin->ex;
    rn.state = plugin->state;
    if (!res->files || !res->tool_calls)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    if (strlen(req->code) > HUTCH_MAX_CODE_BYTES)
        return hutch_err_set(err, -E2BIG, "code is larger than %u bytes",
                             HUTCH_MAX_CODE_BYTES);

    spec.struct_size = sizeof(spec);
    spec.language = req->language;
    spec.label = req->label ? req->label : "run";
    spec.memory_bytes = (req->memory_mb ? req->memory_mb : HUTCH_DEFAULT_MEMORY_MB)
                        << 20;
    spec.pids_max = req->pids ? req->pids : HUTCH_DEFAULT_PIDS;
    spec.cpu_millis = req->cpu_millis;
    if (req->output_bytes && req->output_bytes < res->out.max) {
        res->out.max = (size_t)req->output_bytes;
        res->err.max = (size_t)req->output_bytes;
    }
    spec.work_bytes = (uint64_t)HUTCH_DEFAULT_WORK_MB << 20;
    spec.tmp_bytes = (uint64_t)HUTCH_DEFAULT_TMP_MB << 20;
    spec.open_files = HUTCH_DEFAULT_OPEN_FILES;
    spec.options = req->executor_options;

    r = rn.ex->start(rn.state, &spec, &rn.sb, err);
    if (r < 0)
        return r;
    rn.t_started = hutch_now_us();
    rn.calls =
        hutch_calls_new(req->tool, req->tool_arg, rn.sb->chan_fd, res->tool_calls);
    if (!rn.calls) {
        rn.ex->destroy(rn.state, rn.sb);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    hutch_wire_reader_init(&rn.rd, HUTCH_WIRE_MAX_LINE);
    hutch_buf_init(&rn.pending, PENDING_MAX);
    hutch_set_nonblock(rn.sb->chan_fd);
    hutch_set_nonblock(rn.sb->stdout_fd);
    hutch_set_nonblock(rn.sb->stderr_fd);
    ready_deadline = hutch_now_ms() + HUTCH_WIRE_READY_MS;

    while (!rn.exited) {
        struct pollfd fds[5];
        int nfds = 0, ichan = -1, iout = -1, ierr = -1, iev = -1, icalls = -1, timeout;
        uint64_t now = hutch_now_ms(), until;

        if (rn.fail)
            break;
        if (req->cancel && *req->cancel) {
            note(&rn, "execution cancelled");
            rn.fail = 3;
            break;
        }
        if (rn.phase != WAIT_READY && !rn.deadline)
            rn.deadline =
                now + (req->timeout_ms ? req->timeout_ms : HUTCH_DEFAULT_TIMEOUT_MS);
        until = rn.phase == WAIT_READY ? ready_deadline : rn.deadline;
        if (now >= until) {
            if (rn.phase == WAIT_READY) {
                r = hutch_err_set(err, -ETIMEDOUT,
                                  "the %s runner did not start within %d ms",
                                  req->language, HUTCH_WIRE_READY_MS);
                rn.fail = 2;
            } else {
                res->timed_out = 1;
                note(&rn,
                     "timed out after %llu ms; every process of the sandbox was killed",
                     (unsigned long long)(req->timeout_ms ? req->timeout_ms
                                                          : HUTCH_DEFAULT_TIMEOUT_MS));
            }
            break;
        }
        if (req->tick && rn.phase != WAIT_READY && now >= next_tick) {
            if (next_tick)
                req->tick(req->tick_arg, now - t0);
            next_tick = now + 1000;
        }
        timeout = (int)(until - now);
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
            read_chan(&rn, err);
        if (rn.fail == 2) {
            r = err->code ? err->code : -EIO;
            break;
        }
        if (iout >= 0 && (fds[iout].revents & (POLLIN | POLLHUP | POLLERR)))
            take_output(&rn, rn.sb->stdout_fd, &res->out, &res->out_total,
                        req->stream_fd_out, &rn.out_cut_noted, &rn.out_eof, "stdout");
        if (ierr >= 0 && (fds[ierr].revents & (POLLIN | POLLHUP | POLLERR)))
            take_output(&rn, rn.sb->stderr_fd, &res->err, &res->err_total,
                        req->stream_fd_err, &rn.err_cut_noted, &rn.err_eof, "stderr");
        if (icalls >= 0 && (fds[icalls].revents & POLLIN)) {
            if (hutch_calls_take(rn.calls) < 0)
                answers_stuck(&rn);
        }
        if (fds[iev].revents & (POLLIN | POLLHUP | POLLERR)) {
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
            int before = (int)(res->out_total + res->err_total);
            if (!rn.out_eof)
                take_output(&rn, rn.sb->stdout_fd, &res->out, &res->out_total,
                            req->stream_fd_out, &rn.out_cut_noted, &rn.out_eof,
                            "stdout");
            if (!rn.err_eof)
                take_output(&rn, rn.sb->stderr_fd, &res->err, &res->err_total,
                            req->stream_fd_err, &rn.err_cut_noted, &rn.err_eof,
                            "stderr");
            if ((int)(res->out_total + res->err_total) == before)
                break;
        }
        /* The runner may have sent done just before it exited. */
        if (!rn.chan_eof && !rn.got_done)
            read_chan(&rn, err);
    }
    hutch_calls_end(rn.calls);

    if (rn.fail == 2 || (rn.phase == WAIT_READY && !rn.fail && !res->timed_out)) {
        /* The runner never took the job: that is hutch's failure. */
        if (!err->msg[0] || rn.fail != 2) {
            size_t n = res->err.len > 600 ? 600 : res->err.len;
            r = hutch_err_set(err, -EIO, "the %s runner failed to start%s%.*s",
                              req->language, n ? ": " : " (no output)", (int)n,
                              res->err.data ? res->err.data : "");
        }
        rn.ex->kill(rn.state, rn.sb);
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
                 (unsigned long long)(spec.memory_bytes >> 20));
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
    res->duration_ms = hutch_now_ms() - t0;
    {
        uint64_t t_end = hutch_now_us(), t_begin = t0 * 1000;
        hutch_debug(
            "timing (ms): sandbox start %.2f, runner ready %.2f, job done %.2f, "
            "collected %.2f",
            (rn.t_started - t_begin) / 1000.0,
            rn.t_ready ? (rn.t_ready - t_begin) / 1000.0 : -1.0,
            rn.t_done ? (rn.t_done - t_begin) / 1000.0 : -1.0,
            (t_end - t_begin) / 1000.0);
    }
    if (!res->result)
        res->result = cJSON_CreateNull();
    t_destroy = hutch_now_us();
    rn.ex->destroy(rn.state, rn.sb);
    hutch_debug("timing (ms): destroy %.2f", (hutch_now_us() - t_destroy) / 1000.0);
    hutch_calls_free(rn.calls);
    hutch_wire_reader_free(&rn.rd);
    hutch_buf_free(&rn.pending);
    return r;
}

/* JSON strings must be UTF-8: invalid bytes become U+FFFD. */
static cJSON *text_json(const struct hutch_buf *b)
{
    const unsigned char *p = (const unsigned char *)(b->data ? b->data : "");
    size_t n = b->len, i = 0, o = 0;
    char *s = malloc(n * 3 + 1);
    cJSON *j;
    if (!s)
        return cJSON_CreateString("");
    while (i < n) {
        size_t len = 1;
        unsigned c = p[i];
        if (c >= 0xc2 && c <= 0xdf)
            len = 2;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4;
        if (c == 0) {
            s[o++] = ' ';
            i++;
        } else if (c < 0x80) {
            s[o++] = (char)c;
            i++;
        } else if (i + len <= n && len > 1 &&
                   hutch_utf8_valid((const char *)p + i, len)) {
            memcpy(s + o, p + i, len);
            o += len;
            i += len;
        } else {
            memcpy(s + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    s[o] = '\0';
    j = cJSON_CreateString(s);
    free(s);
    return j;
}

cJSON *hutch_exec_result_json(const struct hutch_exec_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "exit_code", res->exit_code);
    cJSON_AddItemToObject(o, "stdout", text_json(&res->out));
    cJSON_AddItemToObject(o, "stderr", text_json(&res->err));
    cJSON_AddItemToObject(o, "result",
                          res->result ? cJSON_Duplicate(res->result, 1)
                                      : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "files", cJSON_Duplicate(res->files, 1));
    cJSON_AddNumberToObject(o, "duration_ms", (double)res->duration_ms);
    cJSON_AddBoolToObject(o, "timed_out", res->timed_out);
    cJSON_AddBoolToObject(o, "oom", res->oom);
    cJSON_AddItemToObject(o, "tool_calls", cJSON_Duplicate(res->tool_calls, 1));
    cJSON_AddBoolToObject(o, "stdout_truncated", res->out_total > res->out.len);
    cJSON_AddBoolToObject(o, "stderr_truncated", res->err_total > res->err.len);
    if (res->error)
        cJSON_AddItemToObject(o, "error", cJSON_Duplicate(res->error, 1));
    if (res->message[0])
        cJSON_AddStringToObject(o, "message", res->message);
    return o;
}
