/* upstream_stdio.c — stdio upstreams: spawning a child (its environment
 * from an allowlist, doc/executors.md, "Environments"), the I/O
 * thread that is the only reader of its stdout and stderr, requests
 * written from the caller's thread (waited for there, or ended by the I/O
 * thread: up_stdio_start), and a child's teardown.  The thread
 * and lock rules are at the top of upstream.c; the lifecycle that drives
 * a child lives there too. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "curl_lib.h"
#include "log.h"
#include "upstream.h"
#include "upstream_int.h"
#include "upstream_parse.h"
#include "util.h"

extern char **environ;

/* --- stdio: children ---------------------------------------------------- */

/* writev(2) that raises no SIGPIPE in the calling thread, whatever its
 * signal mask: callers' threads write to a child's stdin too. */
static ssize_t writev_quiet(int fd, const struct iovec *iov, int n)
{
    sigset_t pipe_set, old;
    ssize_t w;
    int e;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    w = writev(fd, iov, n);
    e = errno;
    if (w < 0 && e == EPIPE && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero); /* the one this write raised */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

/* Send one line to the child, under c->wlock.  The caller's thread writes
 * it when nothing is queued before it, as much as the pipe takes without
 * blocking; the rest is queued for the I/O thread, so a child that stops
 * reading its stdin never blocks a caller.  0, -ENOBUFS when the queue is
 * full, -ECONNRESET when stdin is closed or broken (the I/O thread reports
 * why and fails the pending calls). */
static int send_wlocked(struct child *c, const char *text, size_t len)
{
    size_t done = 0, rest;
    struct outmsg *m;

    if (c->in_fd < 0 || c->in_failed)
        return -ECONNRESET;
    if (c->q_bytes + len + 1 > HUTCH_UPSTREAM_MAX_OUTQ)
        return -ENOBUFS;
    if (!c->q_head) {
        struct iovec iov[2] = {{(void *)text, len}, {"\n", 1}};
        for (;;) {
            ssize_t w = writev_quiet(c->in_fd, iov, 2);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno != EAGAIN) {
                c->in_failed = true;
                up_child_poke(c);
                return -ECONNRESET;
            }
            done = w < 0 ? 0 : (size_t)w;
            break;
        }
        if (done == len + 1)
            return 0;
    }
    rest = len + 1 - done;
    m = malloc(sizeof(*m) + rest);
    if (!m)
        return -ENOMEM;
    if (done < len) {
        memcpy(m->buf, text + done, len - done);
        m->buf[len - done] = '\n';
    } else {
        m->buf[0] = '\n';
    }
    m->len = rest;
    m->off = 0;
    m->next = NULL;
    if (c->q_tail)
        c->q_tail->next = m;
    else
        c->q_head = m;
    c->q_tail = m;
    c->q_bytes += m->len;
    up_child_poke(c);
    return 0;
}

/* Under the server's lock, with c its child: takes c->wlock inside it. */
static int send_msg_locked(struct child *c, const cJSON *msg)
{
    char *text = cJSON_PrintUnformatted(msg);
    int r;

    if (!text)
        return -ENOMEM;
    pthread_mutex_lock(&c->wlock);
    r = send_wlocked(c, text, strlen(text));
    pthread_mutex_unlock(&c->wlock);
    free(text);
    return r;
}

/* The child is gone or must go: out of "ready" at once, so that no caller
 * sees "ready" while the supervisor has yet to notice.  Under the lock;
 * true when the generation must be bumped. */
static bool leave_ready_locked(struct server *s, const char *why)
{
    if (s->state != ST_READY)
        return false;
    s->state = ST_RESTARTING;
    snprintf(s->error, sizeof(s->error), "%s; restarting", why);
    cJSON_Delete(s->tools);
    s->tools = NULL;
    return true;
}

static void mark_dead(struct server *s, struct child *c)
{
    const char *why = "closed its stdout (it exited or crashed)";
    bool bump;

    pthread_mutex_lock(&s->lock);
    c->dead = true;
    up_fail_pending_locked(s, -ECONNRESET, why);
    bump = leave_ready_locked(s, why);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (bump)
        gen_bump(s->u);
}

/* Under the lock; true when the generation must be bumped. */
static bool mark_broken_locked(struct server *s, struct child *c, int code,
                               const char *why)
{
    bool bump = false;

    if (!c->broken) {
        c->broken = code;
        snprintf(c->broken_why, sizeof(c->broken_why), "%s", why);
        up_fail_pending_locked(s, code, why);
        bump = leave_ready_locked(s, why);
        pthread_cond_broadcast(&s->cond);
    }
    return bump;
}

static void mark_broken(struct server *s, struct child *c, int code, const char *why)
{
    bool bump;

    pthread_mutex_lock(&s->lock);
    bump = mark_broken_locked(s, c, code, why);
    pthread_mutex_unlock(&s->lock);
    if (bump)
        gen_bump(s->u);
}

/* line may be NULL. */
static void count_garbage(struct server *s, struct child *c, const char *what,
                          const char *line, size_t len)
{
    const char *more = " (further ones are only counted)";
    char shown[120];
    uint64_t n;

    pthread_mutex_lock(&s->lock);
    n = ++c->garbage;
    pthread_mutex_unlock(&s->lock);
    if (n > HUTCH_UPSTREAM_GARBAGE_LOGGED)
        return;
    if (!line) {
        hutch_log(HUTCH_LOG_WARN, s->who, "ignoring %s%s", what,
                  n == HUTCH_UPSTREAM_GARBAGE_LOGGED ? more : "");
        return;
    }
    up_clean_text(shown, sizeof(shown), line, len);
    hutch_log(HUTCH_LOG_WARN, s->who, "ignoring %s (%zu bytes): %s%s", what, len, shown,
              n == HUTCH_UPSTREAM_GARBAGE_LOGGED ? more : "");
}

/* Under the server's lock, c its child: the request `id` timed out. */
static void send_cancel_locked(struct child *c, int64_t id)
{
    cJSON *cm = up_rpc_new(0, "notifications/cancelled", NULL);
    cJSON *cp = cm ? cJSON_AddObjectToObject(cm, "params") : NULL;
    if (cp && cJSON_AddNumberToObject(cp, "requestId", (double)id) &&
        cJSON_AddStringToObject(cp, "reason", "timed out"))
        send_msg_locked(c, cm);
    cJSON_Delete(cm);
}

/* A request's timeout, said with the garbage the child sent meanwhile. */
static int timeout_err(struct server *s, uint64_t garbage, const char *what,
                       unsigned budget, struct hutch_err *err)
{
    if (garbage)
        return hutch_err_set(err, -EPROTO,
                             "upstream %s sent %llu lines that are not JSON-RPC and no "
                             "answer to %s within %u ms",
                             s->name, (unsigned long long)garbage, what, budget);
    return hutch_err_set(err, -ETIMEDOUT, "upstream %s did not answer %s within %u ms",
                         s->name, what, budget);
}

/* --- stdio: asynchronous requests --------------------------------------- */

/* Tells p's owner how it ended and frees it.  p is off the pending list;
 * no lock is held. */
static void async_finish(struct server *s, struct pending *p)
{
    struct hutch_err err = {0};
    cJSON *reply = p->reply;
    int r = p->code;

    if (r == -ETIMEDOUT)
        r = timeout_err(s, p->garbage, p->what, p->budget, &err);
    else if (r < 0)
        r = hutch_err_set(&err, r, "upstream %s %s during %s", s->name, p->why,
                          p->what);
    if (r < 0) {
        cJSON_Delete(reply);
        reply = NULL;
    }
    p->done_fn(p->done_arg, r, reply, &err);
    free(p);
}

/* Under the server's lock, on c's I/O thread: takes off the pending list
 * c's asynchronous requests that ended (all of them when `all`: the thread
 * is ending) or ran out of time, onto *out; sends the server a
 * cancellation for those that timed out.  Returns when the thread must
 * wake next for a deadline (0: none), and arms c->io_wake for it. */
static uint64_t async_collect_locked(struct server *s, struct child *c, bool all,
                                     struct pending **out)
{
    uint64_t now = hutch_now_ms(), next = 0;

    for (struct pending **pp = &s->pending; *pp;) {
        struct pending *p = *pp;
        if (!p->done_fn || p->child != c || p->starting) {
            pp = &p->next;
            continue;
        }
        if (!p->done && (all || now >= p->deadline)) {
            p->done = true;
            p->code = all ? -ECONNRESET : -ETIMEDOUT;
            snprintf(p->why, sizeof(p->why), "stopped");
            p->garbage = c->garbage - p->garbage0;
            if (!all && s->child == c && !c->dead && !c->broken)
                send_cancel_locked(c, p->id);
        }
        if (p->done) {
            *pp = p->next;
            p->next = *out;
            *out = p;
            continue;
        }
        if (!next || p->deadline < next)
            next = p->deadline;
        pp = &p->next;
    }
    /* With nothing left to time, the thread still wakes at the time it was
     * armed for: a request started meanwhile with a later deadline then
     * needs no wake-up of its own (calls in a row mostly have). */
    if (!next && c->io_wake > now)
        next = c->io_wake;
    c->io_wake = next;
    return next;
}

static void async_finish_all(struct server *s, struct pending *list)
{
    while (list) {
        struct pending *p = list;
        list = p->next;
        async_finish(s, p);
    }
}

/* One message from a child; takes msg. */
static void stdio_message(struct server *s, struct child *c, cJSON *msg)
{
    const cJSON *method = get(msg, "method"), *id = get(msg, "id");
    int64_t rid;

    if (cJSON_IsString(method)) {
        if (id && !cJSON_IsNull(id)) {
            cJSON *ans = up_answer_request(s, method->valuestring, id);
            pthread_mutex_lock(&s->lock);
            if (ans && !c->dead && !c->broken)
                send_msg_locked(c, ans);
            pthread_mutex_unlock(&s->lock);
            cJSON_Delete(ans);
        } else {
            up_on_notification(s, method->valuestring, get(msg, "params"));
        }
    } else if (get(msg, "result") || get(msg, "error")) {
        if (up_rpc_id(id, &rid)) {
            struct pending *mine = NULL;
            pthread_mutex_lock(&s->lock);
            for (struct pending **pp = &s->pending; *pp; pp = &(*pp)->next) {
                struct pending *p = *pp;
                if (p->id == rid && !p->done) {
                    p->reply = msg;
                    msg = NULL;
                    p->done = true;
                    if (!p->done_fn) {
                        pthread_cond_signal(&p->cond);
                    } else if (!p->starting) {
                        *pp = p->next; /* this thread tells its owner */
                        mine = p;
                    }
                    break;
                }
            }
            pthread_mutex_unlock(&s->lock);
            if (mine)
                async_finish(s, mine);
            if (msg)
                hutch_log(HUTCH_LOG_DEBUG, s->who,
                          "ignoring a response to unknown id %lld", (long long)rid);
        } else {
            const cJSON *e = get(msg, "error"), *em = get(e, "message");
            char shown[200] = "";
            if (cJSON_IsString(em))
                up_clean_text(shown, sizeof(shown), em->valuestring,
                              strlen(em->valuestring));
            hutch_log(HUTCH_LOG_WARN, s->who,
                      "ignoring a response without a valid id%s%s",
                      shown[0] ? ": " : "", shown);
        }
    } else {
        count_garbage(s, c, "a JSON value that is not JSON-RPC", NULL, 0);
    }
    cJSON_Delete(msg);
}

static void stdio_line(struct server *s, struct child *c, const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *msg;

    while (len && is_space(line[len - 1]))
        len--;
    if (!len)
        return;
    if (hutch_json_text_cost(line, len) > HUTCH_JSON_MAX_TREE) {
        count_garbage(s, c, "a message that would take too much memory to parse", NULL,
                      0);
        return;
    }
    msg = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!msg || end != line + len || (!cJSON_IsObject(msg) && !cJSON_IsArray(msg))) {
        cJSON_Delete(msg);
        count_garbage(s, c, "a line that is not JSON-RPC", line, len);
        return;
    }
    if (cJSON_IsArray(msg)) { /* a batch (2025-03-26) */
        cJSON *m;
        while ((m = msg->child)) {
            cJSON_DetachItemViaPointer(msg, m);
            if (cJSON_IsObject(m))
                stdio_message(s, c, m);
            else {
                cJSON_Delete(m);
                count_garbage(s, c, "a batch entry that is not an object", NULL, 0);
            }
        }
        cJSON_Delete(msg);
        return;
    }
    stdio_message(s, c, msg);
}

struct linebuf {
    struct hutch_buf b;
    size_t scanned; /* bytes of b already searched for a newline */
};
/* Room for the longest message, its newline, and one read beyond it. */
#define LINEBUF_INIT                                                                   \
    {                                                                                  \
        .b = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 1 + READ_CHUNK }                     \
    }

/* Read stdout once.  1: more to come, 0: EOF, -EPROTO: a message over the
 * cap, other negative: read error. */
static int io_read_out(struct server *s, struct child *c, struct linebuf *lb)
{
    size_t start = 0;
    ssize_t n;

    n = hutch_buf_read(&lb->b, c->out_fd, READ_CHUNK);
    if (n < 0)
        return n == -EAGAIN || n == -EINTR ? 1 : (int)n;
    if (n == 0)
        return 0;
    for (;;) {
        char *buf = lb->b.data;
        char *nl = memchr(buf + lb->scanned, '\n', lb->b.len - lb->scanned);
        if (!nl)
            break;
        if ((size_t)(nl - (buf + start)) > HUTCH_UPSTREAM_MAX_MESSAGE)
            return -EPROTO;
        stdio_line(s, c, buf + start, (size_t)(nl - (buf + start)));
        start = (size_t)(nl - buf) + 1;
        lb->scanned = start;
    }
    hutch_buf_consume(&lb->b, start);
    lb->scanned = lb->b.len;
    if (lb->b.len > HUTCH_UPSTREAM_MAX_MESSAGE)
        return -EPROTO;
    if (!lb->b.len && lb->b.cap > 4 * READ_CHUNK) /* after a big message */
        hutch_buf_free(&lb->b);
    return 1;
}

static void err_line(struct server *s, struct child *c, const char *line, size_t len,
                     bool truncated)
{
    char shown[HUTCH_UPSTREAM_STDERR_LINE + 1];

    while (len && is_space(line[len - 1]))
        len--;
    if (!len)
        return;
    up_clean_text(shown, sizeof(shown), line, len);
    hutch_log(HUTCH_LOG_INFO, s->who, "%s%s", shown, truncated ? " [truncated]" : "");
    pthread_mutex_lock(&s->lock);
    up_clean_text(c->last_err, sizeof(c->last_err), line, len);
    pthread_mutex_unlock(&s->lock);
}

struct errbuf {
    char line[HUTCH_UPSTREAM_STDERR_LINE];
    size_t len;
    bool skip; /* the rest of a line that was too long */
};

/* Read stderr once and log whole lines.  1: more to come, 0: EOF. */
static int io_read_err(struct server *s, struct child *c, struct errbuf *eb)
{
    char buf[4096];
    ssize_t n = read(c->err_fd, buf, sizeof(buf));

    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 1 : 0;
    if (n == 0) {
        if (eb->len && !eb->skip)
            err_line(s, c, eb->line, eb->len, false);
        return 0;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            if (!eb->skip)
                err_line(s, c, eb->line, eb->len, false);
            eb->len = 0;
            eb->skip = false;
        } else if (!eb->skip) {
            if (eb->len == sizeof(eb->line)) {
                err_line(s, c, eb->line, eb->len, true);
                eb->len = 0;
                eb->skip = true;
            } else {
                eb->line[eb->len++] = buf[i];
            }
        }
    }
    return 1;
}

/* Write queued lines until the pipe is full.  Closes stdin when a write
 * fails.  0 or -errno. */
static int io_flush(struct child *c)
{
    int r = 0;

    pthread_mutex_lock(&c->wlock);
    while (c->q_head && c->in_fd >= 0) {
        struct outmsg *m = c->q_head;
        ssize_t n = write(c->in_fd, m->buf + m->off, m->len - m->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN) {
                r = -errno;
                close(c->in_fd);
                c->in_fd = -1;
            }
            break;
        }
        m->off += (size_t)n;
        if (m->off < m->len)
            continue;
        c->q_head = m->next;
        if (!c->q_head)
            c->q_tail = NULL;
        c->q_bytes -= m->len;
        free(m);
    }
    pthread_mutex_unlock(&c->wlock);
    return r;
}

/* The I/O thread of one child: the only reader and writer of its pipes. */
static void *stdio_io_main(void *arg)
{
    struct child *c = arg;
    struct server *s = c->s;
    struct linebuf lb = LINEBUF_INIT;
    struct errbuf *eb = calloc(1, sizeof(*eb));
    uint64_t drain_until = 0;
    char why[160];

    if (!eb) {
        mark_broken(s, c, -ENOMEM, "out of memory");
        return NULL;
    }
    for (;;) {
        struct pollfd pfd[4];
        struct pending *ended = NULL;
        int n = 0, io = -1, ie = -1, iw = -1, timeout = -1, r;
        uint64_t quit_at, wake, now = hutch_now_ms();
        bool want_write, close_in, in_failed;

        pthread_mutex_lock(&s->lock);
        close_in = c->close_in;
        quit_at = c->quit_at;
        wake = async_collect_locked(s, c, false, &ended);
        pthread_mutex_unlock(&s->lock);
        async_finish_all(s, ended);
        pthread_mutex_lock(&c->wlock);
        in_failed = c->in_failed && c->in_fd >= 0;
        if ((close_in || in_failed) && c->in_fd >= 0) {
            close(c->in_fd);
            c->in_fd = -1;
        }
        want_write = c->q_head && c->in_fd >= 0;
        pthread_mutex_unlock(&c->wlock);
        if (in_failed)
            mark_broken(s, c, -ECONNRESET, "closed its stdin");
        if (quit_at && now >= quit_at)
            break;
        if (c->out_fd < 0 && (c->err_fd < 0 || now >= drain_until))
            break;
        if (quit_at)
            timeout = (int)(quit_at - now);
        if (c->out_fd < 0 && (timeout < 0 || drain_until - now < (uint64_t)timeout))
            timeout = (int)(drain_until - now);
        if (wake) {
            uint64_t ms = wake > now ? wake - now : 0;
            if (ms > INT_MAX)
                ms = INT_MAX;
            if (timeout < 0 || ms < (uint64_t)timeout)
                timeout = (int)ms;
        }

        pfd[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
        if (c->out_fd >= 0) {
            io = n;
            pfd[n++] = (struct pollfd){.fd = c->out_fd, .events = POLLIN};
        }
        if (c->err_fd >= 0) {
            ie = n;
            pfd[n++] = (struct pollfd){.fd = c->err_fd, .events = POLLIN};
        }
        if (want_write) {
            iw = n;
            pfd[n++] = (struct pollfd){.fd = c->in_fd, .events = POLLOUT};
        }
        if (poll(pfd, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            snprintf(why, sizeof(why), "poll: %s", strerror(errno));
            mark_broken(s, c, -EIO, why);
            break;
        }
        if (pfd[0].revents) {
            uint64_t v;
            if (read(c->wake_fd, &v, sizeof(v)) < 0)
                v = 0; /* EAGAIN: someone else's wake-up was already counted */
        }
        if (iw >= 0 && pfd[iw].revents && io_flush(c) < 0)
            mark_broken(s, c, -ECONNRESET, "closed its stdin");
        if (io >= 0 && pfd[io].revents) {
            r = io_read_out(s, c, &lb);
            if (r <= 0) {
                close(c->out_fd);
                c->out_fd = -1;
                drain_until = hutch_now_ms() + HUTCH_UPSTREAM_DRAIN_MS;
                if (r == -EPROTO) {
                    snprintf(why, sizeof(why), "sent a message over %u bytes",
                             HUTCH_UPSTREAM_MAX_MESSAGE);
                    mark_broken(s, c, -EPROTO, why);
                } else if (r < 0 && r != -EIO) {
                    snprintf(why, sizeof(why), "reading its stdout: %s", strerror(-r));
                    mark_broken(s, c, r, why);
                } else {
                    mark_dead(s, c);
                }
            }
        }
        if (ie >= 0 && pfd[ie].revents && io_read_err(s, c, eb) == 0) {
            close(c->err_fd);
            c->err_fd = -1;
        }
    }
    /* Whoever ends this thread failed every request first (a teardown,
     * the end of stdout, a broken pipe), and none can start on a child
     * that is dead, broken or no longer the server's. */
    {
        struct pending *ended = NULL;
        pthread_mutex_lock(&s->lock);
        async_collect_locked(s, c, true, &ended);
        pthread_mutex_unlock(&s->lock);
        async_finish_all(s, ended);
    }
    hutch_buf_free(&lb.b);
    free(eb);
    return NULL;
}

/* Look `cmd` up in PATH like execvp.  *out is malloc'ed. */
static int resolve_command(const char *cmd, const char *path, char **out)
{
    int r = -ENOENT;

    if (strchr(cmd, '/'))
        return (*out = strdup(cmd)) ? 0 : -ENOMEM;
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        char *cand = NULL;
        struct stat st;

        if (asprintf(&cand, "%.*s%s%s", (int)dlen, dlen ? path : ".", dlen ? "/" : "",
                     cmd) < 0)
            return -ENOMEM;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) {
                *out = cand;
                return 0;
            }
            r = -EACCES;
        }
        free(cand);
        path += dlen;
        if (*path == ':')
            path++;
    }
    return r;
}

/* What a stdio child inherits of hutch's environment: the names the MCP
 * reference SDK passes on POSIX (getDefaultEnvironment), nothing else.
 * hutch's own settings (HUTCH_TOKEN, the principals' tokens a wrapper put
 * in the environment, cloud credentials…) never reach an upstream, which
 * a program can ask to print its environment.  doc/executors.md, "Environments". */
static const char *const inherited_env[] = {"HOME",  "LOGNAME", "PATH",
                                            "SHELL", "TERM",    "USER"};

/* The inherited names present in hutch's environment, then the entry's
 * "env" (which wins).  The strings are borrowed. */
static char **build_env(struct server *s)
{
    size_t n = sizeof(inherited_env) / sizeof(inherited_env[0]), k = 0;
    char **envp;

    for (char **e = s->cfg.env; *e; e++)
        n++;
    envp = calloc(n + 1, sizeof(char *));
    if (!envp)
        return NULL;
    for (size_t i = 0; i < sizeof(inherited_env) / sizeof(inherited_env[0]); i++) {
        const char *name = inherited_env[i];
        size_t klen = strlen(name);
        bool overridden = false;
        char **e;

        for (char **o = s->cfg.env; *o && !overridden; o++)
            overridden = !strncmp(*o, name, klen) && (*o)[klen] == '=';
        for (e = environ; e && *e; e++)
            if (!strncmp(*e, name, klen) && (*e)[klen] == '=')
                break;
        /* A value starting "()" is an exported shell function, as the SDK
         * says: not a setting, and a known attack surface. */
        if (!overridden && e && *e && strncmp(*e + klen + 1, "()", 2))
            envp[k++] = *e;
    }
    for (char **e = s->cfg.env; *e; e++)
        envp[k++] = *e;
    return envp;
}

static const char *env_get(char **envp, const char *key)
{
    size_t klen = strlen(key);
    for (; *envp; envp++)
        if (!strncmp(*envp, key, klen) && (*envp)[klen] == '=')
            return *envp + klen + 1;
    return NULL;
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

enum { STAGE_CHDIR, STAGE_EXEC, STAGE_SETUP };

/* In the child after fork: async-signal-safe calls only. */
__attribute__((noreturn)) static void child_exec(const char *path, char *const argv[],
                                                 char *const envp[], const char *cwd,
                                                 const int fds[3], int ep, pid_t parent)
{
    struct sigaction sa;
    sigset_t none;
    int info[2] = {STAGE_SETUP, 0}, d[3];

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Its own process group, so stopping it reaches what it spawned. */
    if (setpgid(0, 0) < 0)
        goto fail;
    /* Dies with the thread that started it (the supervisor lives as long
     * as the server).  */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
        goto fail;
    for (int i = 0; i < 3; i++)
        if ((d[i] = fcntl(fds[i], F_DUPFD, 3)) < 0)
            goto fail;
    for (int i = 0; i < 3; i++)
        if (dup2(d[i], i) < 0)
            goto fail;
    for (int i = 0; i < 3; i++)
        close(d[i]);
#ifdef SYS_close_range
    syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
#endif
    info[0] = STAGE_CHDIR;
    if (cwd && chdir(cwd) < 0)
        goto fail;
    info[0] = STAGE_EXEC;
    execve(path, argv, envp);
fail:
    info[1] = errno;
    if (write(ep, info, sizeof(info)) < 0)
        _exit(127);
    _exit(127);
}

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0) {
            close(p[i]);
            p[i] = -1;
        }
}

static void child_free(struct child *c)
{
    struct outmsg *m;

    if (!c)
        return;
    while ((m = c->q_head)) {
        c->q_head = m->next;
        free(m);
    }
    if (c->in_fd >= 0)
        close(c->in_fd);
    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->err_fd >= 0)
        close(c->err_fd);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    pthread_mutex_destroy(&c->wlock);
    free(c);
}

int up_stdio_spawn(struct server *s, struct child **out, struct hutch_err *err)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, ep[2] = {-1, -1};
    char **envp = NULL, *path = NULL;
    struct child *c = NULL;
    pid_t parent = getpid(), pid;
    int info[2], r;
    ssize_t n;

    envp = build_env(s);
    if (!envp) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = resolve_command(s->cfg.command, env_get(envp, "PATH"), &path);
    if (r == -ENOENT) {
        r = hutch_err_set(err, r, "command not found: %s", s->cfg.command);
        goto out;
    } else if (r < 0) {
        r = hutch_err_set(err, r, "cannot run %s: %s", s->cfg.command, strerror(-r));
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    c->s = s;
    c->pid = -1;
    pthread_mutex_init(&c->wlock, NULL);
    c->in_fd = c->out_fd = c->err_fd = -1;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0 || pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
        pipe2(perr, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
        r = hutch_err_set(err, -errno, "cannot create pipes: %s", strerror(errno));
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        r = hutch_err_set(err, -errno, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int fds[3] = {pin[0], pout[1], perr[1]};
        child_exec(path, s->cfg.argv, envp, s->cfg.cwd, fds, ep[1], parent);
    }
    c->pid = pid;
    setpgid(pid, pid); /* the child does it too: whoever is first wins */
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    close(ep[1]);
    pin[0] = pout[1] = perr[1] = ep[1] = -1;
    /* The error pipe closes at a successful exec. */
    do
        n = read(ep[0], info, sizeof(info));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(info)) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        c->pid = -1;
        if (info[0] == STAGE_CHDIR)
            r = hutch_err_set(err, -info[1], "cannot change to directory %s: %s",
                              s->cfg.cwd, strerror(info[1]));
        else if (info[0] == STAGE_EXEC)
            r = hutch_err_set(err, -info[1], "cannot execute %s: %s", path,
                              strerror(info[1]));
        else
            r = hutch_err_set(err, -info[1], "cannot set up the child for %s: %s", path,
                              strerror(info[1]));
        goto out;
    }
    c->in_fd = pin[1];
    c->out_fd = pout[0];
    c->err_fd = perr[0];
    pin[1] = pout[0] = perr[0] = -1;
    if (hutch_set_nonblock(c->in_fd) < 0 || hutch_set_nonblock(c->out_fd) < 0 ||
        hutch_set_nonblock(c->err_fd) < 0) {
        r = hutch_err_set(err, -errno, "fcntl: %s", strerror(errno));
        goto out;
    }
    r = -pthread_create(&c->io, NULL, stdio_io_main, c);
    if (r < 0) {
        r = hutch_err_set(err, r, "cannot create a thread: %s", strerror(-r));
        goto out;
    }
    c->io_started = true;
    hutch_log(HUTCH_LOG_DEBUG, s->who, "started %s (pid %d)", path, (int)pid);
    *out = c;
    c = NULL;
out:
    if (c && c->pid > 0) {
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    child_free(c);
    close_pair(pin);
    close_pair(pout);
    close_pair(perr);
    close_pair(ep);
    free(envp);
    free(path);
    return r;
}

/* true once pid exited (not reaped: its process group stays ours). */
static bool wait_exit(struct child *c, unsigned ms)
{
    uint64_t deadline = hutch_now_ms() + ms;

    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            c->reaped = true; /* ECHILD: someone reaped it (SIGCHLD ignored?) */
            return true;
        }
        if (si.si_pid == c->pid)
            return true;
        if (hutch_now_ms() >= deadline)
            return false;
        hutch_sleep_ms(5);
    }
}

static void signal_child(struct child *c, int sig)
{
    if (c->reaped)
        return;
    if (kill(-c->pid, sig) < 0)
        kill(c->pid, sig);
}

/* Stop a child and free it: fail its calls, close its stdin, wait `grace`,
 * SIGTERM, wait, SIGKILL, reap, collect its I/O thread. */
void up_child_teardown(struct server *s, struct child *c, unsigned grace, int code,
                       const char *why, struct exit_info *x)
{
    int status = 0;

    pthread_mutex_lock(&s->lock);
    if (s->child == c)
        s->child = NULL;
    up_fail_pending_locked(s, code, why);
    c->close_in = true;
    pthread_mutex_unlock(&s->lock);
    up_child_poke(c);

    x->alone = wait_exit(c, grace);
    if (!x->alone) {
        signal_child(c, SIGTERM);
        if (!wait_exit(c, HUTCH_UPSTREAM_TERM_GRACE_MS)) {
            hutch_log(HUTCH_LOG_DEBUG, s->who, "pid %d ignored SIGTERM, killing it",
                      (int)c->pid);
            signal_child(c, SIGKILL);
        }
    }
    /* What it left behind in its process group goes too, while the group
     * id is still held by the unreaped leader. */
    signal_child(c, SIGKILL);
    if (!c->reaped) {
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->reaped = true;
    }
    if (WIFEXITED(status))
        snprintf(x->text, sizeof(x->text), "exited with status %d",
                 WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(x->text, sizeof(x->text), "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(x->text, sizeof(x->text), "exited");

    pthread_mutex_lock(&s->lock);
    c->quit_at = hutch_now_ms() + HUTCH_UPSTREAM_DRAIN_MS;
    pthread_mutex_unlock(&s->lock);
    up_child_poke(c);
    if (c->io_started)
        pthread_join(c->io, NULL);
    /* A caller that took c->wlock before s->child changed may still hold
     * it: no one can take it after. */
    pthread_mutex_lock(&c->wlock);
    pthread_mutex_unlock(&c->wlock);
    snprintf(x->last_err, sizeof(x->last_err), "%s", c->last_err);
    child_free(c);
}

/* --- stdio: requests ---------------------------------------------------- */

/* A request's text: its id taken, printed, charged to this thread's
 * budget (give *charged back once the text is freed) and within the cap.
 * 0, or negative with err. */
static int request_text(struct server *s, const char *method, const cJSON *params,
                        const char *what, int64_t *id, char **text, size_t *charged,
                        struct hutch_err *err)
{
    cJSON *m;
    int r;

    pthread_mutex_lock(&s->lock);
    *id = ++s->next_id;
    pthread_mutex_unlock(&s->lock);
    m = up_request_msg(s, *id, method, params);
    *text = m ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(m); /* printed: only the text is held from here on */
    if (!*text)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    if ((r = up_charge_text(s, what, *text, charged, err)) < 0)
        return r;
    if (strlen(*text) > HUTCH_UPSTREAM_MAX_MESSAGE)
        return hutch_err_set(err, -E2BIG, "%s for upstream %s is larger than %u bytes",
                             what, s->name, HUTCH_UPSTREAM_MAX_MESSAGE);
    return 0;
}

static void unlink_pending_locked(struct server *s, struct pending *p)
{
    for (struct pending **pp = &s->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
}

/* Puts p on s's pending list and writes text to the current child from
 * this thread.  0 with s->lock held and p->child set; or negative with
 * err, p off the list and no lock held. */
static int send_pending(struct server *s, struct pending *p, const char *text,
                        const char *what, struct hutch_err *err)
{
    struct child *c;
    size_t queued;
    bool bump = false;
    int r;

    pthread_mutex_lock(&s->lock);
    c = s->child;
    if (!c || c->dead || c->broken) {
        pthread_mutex_unlock(&s->lock);
        return hutch_err_set(err, -ECONNRESET, "upstream %s is not running", s->name);
    }
    /* Pending before it is written: the answer may come back at once. */
    p->child = c;
    p->garbage0 = c->garbage;
    p->next = s->pending;
    s->pending = p;
    /* This thread writes the request itself.  c->wlock is taken before the
     * server's lock is left, so a teardown waits for the write to end. */
    pthread_mutex_lock(&c->wlock);
    pthread_mutex_unlock(&s->lock);
    r = send_wlocked(c, text, strlen(text));
    queued = c->q_bytes;
    pthread_mutex_unlock(&c->wlock);
    pthread_mutex_lock(&s->lock);
    if (r == 0)
        return 0;
    unlink_pending_locked(s, p);
    /* Its stdin is gone: out of "ready" now, not when the I/O thread gets
     * to it.  A teardown would have failed p. */
    if (r == -ECONNRESET && !p->done)
        bump = mark_broken_locked(s, c, r, "closed its stdin");
    pthread_mutex_unlock(&s->lock);
    if (bump)
        gen_bump(s->u);
    if (p->done && p->code < 0) /* the child broke meanwhile: say why */
        return hutch_err_set(err, p->code, "upstream %s %s during %s", s->name, p->why,
                             what);
    if (r == -ECONNRESET)
        return hutch_err_set(err, r, "upstream %s closed its stdin", s->name);
    if (r == -ENOBUFS)
        return hutch_err_set(err, r,
                             "upstream %s is not reading its input (%zu bytes queued)",
                             s->name, queued);
    return hutch_err_set(err, r, "sending %s to upstream %s: %s", what, s->name,
                         strerror(-r));
}

int up_stdio_request(struct server *s, const char *method, const cJSON *params,
                     uint64_t deadline, unsigned budget, const char *what,
                     cJSON **reply, struct hutch_err *err)
{
    struct pending p = {0};
    char *text = NULL;
    size_t charged = 0;
    int r;

    hutch_cond_init_mono(&p.cond);
    if ((r = request_text(s, method, params, what, &p.id, &text, &charged, err)) < 0 ||
        (r = send_pending(s, &p, text, what, err)) < 0)
        goto out;
    while (!p.done)
        if (hutch_cond_wait_until(&p.cond, &s->lock, deadline) == ETIMEDOUT)
            break;
    unlink_pending_locked(s, &p);
    if (!p.done) {
        /* No answer.  The child is still s->child: a teardown would have
         * failed this call. */
        struct child *c = p.child;
        uint64_t garbage = s->child == c ? c->garbage - p.garbage0 : 0;
        if (s->child == c && strcmp(method, "initialize"))
            send_cancel_locked(c, p.id);
        pthread_mutex_unlock(&s->lock);
        r = timeout_err(s, garbage, what, budget, err);
        goto out;
    }
    pthread_mutex_unlock(&s->lock);
    if (p.code < 0) {
        r = hutch_err_set(err, p.code, "upstream %s %s during %s", s->name, p.why,
                          what);
        goto out;
    }
    *reply = p.reply;
    p.reply = NULL;
out:
    cJSON_Delete(p.reply);
    pthread_cond_destroy(&p.cond);
    free(text);
    hutch_budget_give(hutch_budget_current(), charged);
    return r;
}

int up_stdio_start(struct server *s, const char *method, const cJSON *params,
                   uint64_t deadline, unsigned budget, const char *what,
                   up_done_fn done, void *arg, struct hutch_err *err)
{
    struct pending *p = calloc(1, sizeof(*p));
    char *text = NULL;
    size_t charged = 0;
    int r;

    if (!p)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    p->done_fn = done;
    p->done_arg = arg;
    p->deadline = deadline;
    p->budget = budget;
    /* While `starting`, an answer or a failure is only noted on it. */
    p->starting = true;
    snprintf(p->what, sizeof(p->what), "%s", what);
    r = request_text(s, method, params, what, &p->id, &text, &charged, err);
    if (r == 0)
        r = send_pending(s, p, text, what, err);
    free(text);
    hutch_budget_give(hutch_budget_current(), charged);
    if (r < 0) {
        cJSON_Delete(p->reply);
        free(p);
        return r;
    }
    p->starting = false;
    if (p->done) {
        /* Answered (or failed) before this thread let go of it. */
        unlink_pending_locked(s, p);
        pthread_mutex_unlock(&s->lock);
        async_finish(s, p);
        return 0;
    }
    /* The I/O thread watches the deadline; it needs waking only when it
     * would sleep past it. */
    if (!p->child->io_wake || deadline < p->child->io_wake) {
        p->child->io_wake = deadline;
        up_child_poke(p->child);
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int up_stdio_notify(struct server *s, const char *method, struct hutch_err *err)
{
    cJSON *m = up_rpc_new(0, method, NULL);
    int r = 0;

    if (!m)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&s->lock);
    if (!s->child || s->child->dead || s->child->broken)
        r = hutch_err_set(err, -ECONNRESET, "upstream %s is not running", s->name);
    else if ((r = send_msg_locked(s->child, m)) < 0)
        r = hutch_err_set(err, r, "cannot send %s: %s", method, strerror(-r));
    pthread_mutex_unlock(&s->lock);
    cJSON_Delete(m);
    return r;
}
