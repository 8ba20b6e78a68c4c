/* egress.c — the engine of one execution's egress proxy (see egress.h for
 * what it allows and refuses): it serves each stream handed to it, reading
 * the request head, judging its host, resolving, connecting and relaying:
 * tunnels, plain HTTP, and the tunnels it intercepts to add a secret.
 *
 * Not here: the rules' patterns, matching, the judge of resolved
 * addresses and the policy's secrets (egress_rules.c); the request head's
 * parser and rewriter (egress_head.c); where the streams come from (the
 * sandbox's forwarder and its wiring), what the records become (audit,
 * metrics: the caller's hook), the CA, certificates and TLS contexts
 * (egress_tls.c).  A plain tunnel carries bytes hutch does not read.
 *
 * Threads.  One thread per connection, started by hutch_egress_accept (at
 * most HUTCH_EGRESS_MAX_CONCURRENT at once, every signal blocked): it reads
 * the head (poll, bounded in bytes and time), resolves with getaddrinfo on
 * itself, connects, and relays both ways until both sides are done.  A
 * finished thread is joined by the next accept or by hutch_egress_close,
 * which joins them all: none outlives the engine.
 *
 * Locks.  eg->mu (a leaf) guards the slots (which thread runs, its two
 * descriptors, whether it is done) and `closing`; a connection thread
 * takes it to publish or close a descriptor, hutch_egress_close to shut
 * them all down: a descriptor is never shut down after it was closed (its
 * number may be another's by then).  The counters are atomics.  Every poll
 * also watches eg->wake, an eventfd that hutch_egress_close makes readable
 * for good: a connect in progress or a silent peer wakes up at once. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"
#include "egress.h"
#include "egress_int.h"
#include "egress_tls.h"
#include "knobs.h"
#include "log.h"
#include "util.h"

/* --- the engine --- */

struct conn {
    struct hutch_egress *eg;
    pthread_t tid;
    int used; /* a thread was started in this slot and not joined yet */
    int done; /* it has finished: join it */
    int in;   /* the program's stream, -1 once closed */
    int out;  /* the origin's, -1 when none */
};

struct hutch_egress {
    struct hutch_egress_rules rules; /* a copy; rules.rule is ours */
    struct hutch_egress_hooks hooks;
    char *test_resolve; /* HUTCH_TEST_RESOLVE when the engine was made */
    int wake;           /* eventfd, readable once closing */
    pthread_mutex_t mu;
    int closing;
    struct conn slot[HUTCH_EGRESS_MAX_CONCURRENT];
    _Atomic uint64_t connections, refused, bytes;
    struct hutch_egress_ca *ca; /* with secrets: the deployment's CA */
};

static void emit(struct hutch_egress *eg, const struct hutch_egress_record *rec)
{
    if (rec->outcome != HUTCH_EGRESS_OK)
        atomic_fetch_add(&eg->refused, 1);
    if (eg->hooks.on_record)
        eg->hooks.on_record(eg->hooks.arg, rec);
}

/* Count n more bytes against max_bytes: 0, or -1 (nothing counted) when
 * they would cross it. */
static int take_bytes(struct hutch_egress *eg, size_t n)
{
    uint64_t cur = atomic_load(&eg->bytes);
    do {
        if (cur + n > eg->rules.max_bytes)
            return -1;
    } while (!atomic_compare_exchange_weak(&eg->bytes, &cur, cur + n));
    return 0;
}

/* What one connection thread knows, and its record's strings. */
struct session {
    struct conn *c;
    struct hutch_egress_record rec;
    struct hutch_egress_head head;
    struct hutch_buf in; /* the head, and what followed it */
    char address[INET6_ADDRSTRLEN];
    char reason[320];
};

__attribute__((format(printf, 3, 4))) static void
set_reason(struct session *s, enum hutch_egress_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
    va_end(ap);
    s->rec.outcome = o;
}

/* Wait up to ms for fd (and the wake fd): 1 ready, 0 timed out, -1 closing. */
static int wait_fd(struct hutch_egress *eg, int fd, short events, uint64_t deadline_ms)
{
    return hutch_wait_fd(fd, events, eg->wake, deadline_ms);
}

/* Write all of p to a non-blocking socket within deadline_ms: 0 or -1. */
static int send_all(struct hutch_egress *eg, int fd, const char *p, size_t n,
                    uint64_t deadline_ms)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(eg, fd, POLLOUT, deadline_ms) != 1)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 502:
        return "Bad Gateway";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}

/* hutch's own answer: the status and s->reason as the one-line body. */
static void answer(struct hutch_egress *eg, int fd, int status, const char *reason)
{
    char text[512], head[256];
    int tn = snprintf(text, sizeof(text), "hutch egress: %s\n", reason);
    int hn;
    if (tn < 0)
        return;
    if ((size_t)tn >= sizeof(text))
        tn = (int)sizeof(text) - 1;
    hn = snprintf(head, sizeof(head),
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %d\r\nConnection: close\r\n\r\n",
                  status, status_text(status), tn);
    uint64_t deadline = hutch_now_ms() + HUTCH_EGRESS_REPLY_MS;
    if (send_all(eg, fd, head, (size_t)hn, deadline) == 0)
        send_all(eg, fd, text, (size_t)tn, deadline);
    shutdown(fd, SHUT_WR);
}

static int status_of(enum hutch_egress_outcome o, int connecting)
{
    switch (o) {
    case HUTCH_EGRESS_REFUSED_METHOD:
        return 405;
    case HUTCH_EGRESS_BAD_REQUEST:
        return 400;
    case HUTCH_EGRESS_CONNECT_FAILED:
        return 502;
    case HUTCH_EGRESS_TIMEOUT:
        return connecting ? 504 : 408;
    default:
        return 403;
    }
}

/* Read the head into s->in within the head's time: 1 parsed, 0 refused (the
 * answer sent, s->rec filled). */
static int read_head(struct session *s)
{
    struct hutch_egress *eg = s->c->eg;
    uint64_t deadline =
        hutch_now_ms() + (eg->hooks.head_ms ? eg->hooks.head_ms : HUTCH_EGRESS_HEAD_MS);
    for (;;) {
        int r = hutch_egress_parse_head(hutch_buf_str(&s->in), s->in.len, &s->head);
        ssize_t n;
        if (r == 1)
            return 1;
        if (r < 0) {
            set_reason(s, s->head.refusal, "%s", s->head.why);
            return 0;
        }
        if (s->in.len == s->in.max) {
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST, "the request head is over %u bytes",
                       HUTCH_EGRESS_MAX_HEAD);
            return 0;
        }
        r = wait_fd(eg, s->c->in, POLLIN, deadline);
        if (r == 0) {
            set_reason(s, HUTCH_EGRESS_TIMEOUT, "no complete request head within %u ms",
                       eg->hooks.head_ms ? eg->hooks.head_ms : HUTCH_EGRESS_HEAD_MS);
            return 0;
        }
        if (r < 0) {
            set_reason(s, HUTCH_EGRESS_TIMEOUT, "the execution ended before the head");
            return 0;
        }
        n = hutch_buf_read(&s->in, s->c->in, s->in.max - s->in.len);
        if (n == -EAGAIN || n == -EINTR)
            continue;
        if (n <= 0) {
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST,
                       "the connection ended before the request head did");
            return 0;
        }
    }
}

struct addrs {
    struct sockaddr_storage sa[HUTCH_EGRESS_MAX_ADDRS];
    socklen_t len[HUTCH_EGRESS_MAX_ADDRS];
    size_t n;
};

static void add_addr(struct addrs *a, int family, const void *addr, unsigned port)
{
    struct sockaddr_storage *ss = &a->sa[a->n];
    if (a->n == HUTCH_EGRESS_MAX_ADDRS)
        return;
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        memcpy(&in->sin_addr, addr, 4);
        a->len[a->n++] = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        memcpy(&in6->sin6_addr, addr, 16);
        a->len[a->n++] = sizeof(*in6);
    }
}

static const void *sa_addr(const struct sockaddr_storage *ss, int *family)
{
    *family = ss->ss_family;
    if (ss->ss_family == AF_INET)
        return &((const struct sockaddr_in *)ss)->sin_addr;
    return &((const struct sockaddr_in6 *)ss)->sin6_addr;
}

/* HUTCH_TEST_RESOLVE's addresses of `name`: how many were added. */
static size_t test_resolve(const char *spec, const char *name, unsigned port,
                           struct addrs *out)
{
    size_t found = 0, nl = strlen(name);
    const char *p = spec;
    while (p && *p) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (eq) {
            size_t kl = (size_t)(eq - p);
            char addr[INET6_ADDRSTRLEN];
            unsigned char bin[16];
            size_t al = (size_t)(end - eq - 1);
            if (kl && p[kl - 1] == '.')
                kl--;
            if (kl == nl && !strncasecmp(p, name, nl) && al < sizeof(addr)) {
                memcpy(addr, eq + 1, al);
                addr[al] = '\0';
                if (inet_pton(AF_INET, addr, bin) == 1) {
                    add_addr(out, AF_INET, bin, port);
                    found++;
                } else if (inet_pton(AF_INET6, addr, bin) == 1) {
                    add_addr(out, AF_INET6, bin, port);
                    found++;
                }
            }
        }
        p = comma ? comma + 1 : NULL;
    }
    return found;
}

/* An IP-literal rule names this address at this port. */
static int literal_allows(const struct hutch_egress *eg, int family, const void *addr,
                          unsigned port)
{
    unsigned char a[16] = {0};
    memcpy(a, addr, family == AF_INET ? 4 : 16);
    for (size_t i = 0; i < eg->rules.n; i++) {
        const struct hutch_egress_rule *r = &eg->rules.rule[i];
        if (r->is_ip_literal && egress_port_ok(r, port) &&
            egress_same_addr(family, a, r->family, r->addr))
            return 1;
    }
    return 0;
}

/* The addresses to try for the request: 0, or refused (s->rec filled). */
static int resolve(struct session *s, struct addrs *ok)
{
    struct hutch_egress *eg = s->c->eg;
    struct hutch_egress_head *h = &s->head;
    struct addrs all = {0};
    const char *refused_class = NULL;
    char refused[INET6_ADDRSTRLEN] = "";

    if (h->host_is_ip) {
        struct egress_host ho;
        char msg[64];
        /* Named by an IP-literal rule (matching said so): not judged. */
        egress_parse_host(h->host, strlen(h->host), 0, 1, &ho, msg, sizeof(msg));
        egress_norm_addr(&ho.family, ho.addr);
        add_addr(ok, ho.family, ho.addr, h->port);
        return 0;
    }
    if (!eg->test_resolve || !test_resolve(eg->test_resolve, h->host, h->port, &all)) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int r = getaddrinfo(h->host, NULL, &hints, &res);
        if (r != 0) {
            set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "cannot resolve %s: %s", h->host,
                       gai_strerror(r));
            return -1;
        }
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fam;
            const void *a;
            if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
                continue;
            a = sa_addr((const struct sockaddr_storage *)ai->ai_addr, &fam);
            add_addr(&all, fam, a, h->port);
        }
        freeaddrinfo(res);
    }
    for (size_t i = 0; i < all.n; i++) {
        int fam;
        const void *a = sa_addr(&all.sa[i], &fam);
        const char *cls = hutch_egress_addr_class(fam, a);
        if (cls && !literal_allows(eg, fam, a, h->port)) {
            if (!refused_class) {
                refused_class = cls;
                inet_ntop(fam, a, refused, sizeof(refused));
            }
            continue;
        }
        ok->sa[ok->n] = all.sa[i];
        ok->len[ok->n++] = all.len[i];
    }
    if (ok->n)
        return 0;
    if (refused_class) {
        snprintf(s->address, sizeof(s->address), "%s", refused);
        set_reason(s, HUTCH_EGRESS_REFUSED_ADDRESS,
                   "%s resolves to %s (%s), which the policy does not allow "
                   "(egress.allow names no such address)",
                   h->host, refused, refused_class);
    } else {
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "%s has no IP address", h->host);
    }
    return -1;
}

static void set_out(struct conn *c, int fd)
{
    pthread_mutex_lock(&c->eg->mu);
    c->out = fd;
    pthread_mutex_unlock(&c->eg->mu);
}

static void close_out(struct conn *c)
{
    pthread_mutex_lock(&c->eg->mu);
    if (c->out >= 0)
        close(c->out);
    c->out = -1;
    pthread_mutex_unlock(&c->eg->mu);
}

/* Connect to the first address that answers: 0 (c->out connected), or
 * -1 with s->rec filled. */
static int connect_any(struct session *s, const struct addrs *a)
{
    struct hutch_egress *eg = s->c->eg;
    unsigned ms = eg->hooks.connect_ms ? eg->hooks.connect_ms : HUTCH_EGRESS_CONNECT_MS;
    int timed_out = 0, err = 0;

    for (size_t i = 0; i < a->n; i++) {
        int fam, fd, r;
        const void *addr = sa_addr(&a->sa[i], &fam);
        socklen_t sl = sizeof(err);

        inet_ntop(fam, addr, s->address, sizeof(s->address));
        fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        set_out(s->c, fd);
        if (connect(fd, (const struct sockaddr *)&a->sa[i], a->len[i]) == 0)
            return 0;
        err = errno;
        if (err == EINPROGRESS) {
            r = wait_fd(eg, fd, POLLOUT, hutch_now_ms() + ms);
            if (r < 0) {
                close_out(s->c);
                set_reason(s, HUTCH_EGRESS_TIMEOUT,
                           "the execution ended while "
                           "connecting");
                return -1;
            }
            if (r == 0) {
                timed_out = 1;
                err = ETIMEDOUT;
            } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && !err) {
                return 0;
            }
        }
        close_out(s->c);
    }
    if (timed_out && err == ETIMEDOUT)
        set_reason(s, HUTCH_EGRESS_TIMEOUT, "%s:%u (%s) did not answer within %u ms",
                   s->head.host, s->head.port, s->address, ms);
    else
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "cannot connect to %s:%u (%s): %s",
                   s->head.host, s->head.port, s->address, strerror(err));
    return -1;
}

/* One direction of the relay: bytes read from `from`, not yet written. */
struct pipe_dir {
    const char *p; /* pending bytes */
    size_t n;
    char *buf;
    int eof; /* `from` ended; `to` shut for writing */
    uint64_t *count;
};

/* Relay until both directions ended, max_bytes is crossed, a side fails
 * or the engine closes.  `pre` goes to the origin first. */
static void relay(struct session *s, const char *pre, size_t npre)
{
    struct hutch_egress *eg = s->c->eg;
    int fd[2] = {s->c->in, s->c->out}; /* [0] the program, [1] the origin */
    struct pipe_dir d[2] = {{.count = &s->rec.bytes_up}, {.count = &s->rec.bytes_down}};
    char *bufs = malloc(2 * (size_t)HUTCH_EGRESS_RELAY_BUF);

    if (!bufs) {
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "out of memory");
        return;
    }
    d[0].buf = bufs;
    d[1].buf = bufs + HUTCH_EGRESS_RELAY_BUF;
    if (npre && take_bytes(eg, npre) < 0) {
        set_reason(s, HUTCH_EGRESS_CAP_BYTES, "egress.max_bytes (%llu) crossed",
                   (unsigned long long)eg->rules.max_bytes);
        free(bufs);
        return;
    }
    d[0].p = pre;
    d[0].n = npre;
    while (!(d[0].eof && d[1].eof && !d[0].n && !d[1].n)) {
        struct pollfd p[3] = {
            {.fd = -1}, {.fd = -1}, {.fd = eg->wake, .events = POLLIN}};
        /* Direction k reads fd[k] and writes fd[1 - k]. */
        for (int k = 0; k < 2; k++) {
            if (!d[k].eof && !d[k].n)
                p[k].events |= POLLIN;
            if (d[k].n)
                p[1 - k].events |= POLLOUT;
        }
        for (int k = 0; k < 2; k++)
            p[k].fd = p[k].events ? fd[k] : -1; /* else a hang-up would spin */
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            set_reason(s, HUTCH_EGRESS_OK, "poll: %s", strerror(errno));
            break;
        }
        if (p[2].revents) {
            set_reason(s, HUTCH_EGRESS_OK, "cut: the execution ended");
            break;
        }
        for (int k = 0; k < 2; k++) {
            struct pipe_dir *x = &d[k];
            if ((p[k].events & POLLIN) &&
                (p[k].revents & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t r = recv(fd[k], x->buf, HUTCH_EGRESS_RELAY_BUF, 0);
                if (r > 0) {
                    if (take_bytes(eg, (size_t)r) < 0) {
                        set_reason(s, HUTCH_EGRESS_CAP_BYTES,
                                   "egress.max_bytes (%llu) crossed: the connection "
                                   "was cut",
                                   (unsigned long long)eg->rules.max_bytes);
                        goto out;
                    }
                    x->p = x->buf;
                    x->n = (size_t)r;
                } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    /* End of one direction: pass it on, keep the other. */
                    x->eof = 1;
                    shutdown(fd[1 - k], SHUT_WR);
                }
            }
            if ((p[1 - k].events & POLLOUT) && x->n &&
                (p[1 - k].revents & (POLLOUT | POLLHUP | POLLERR))) {
                ssize_t w = send(fd[1 - k], x->p, x->n, MSG_NOSIGNAL);
                if (w > 0) {
                    x->p += w;
                    x->n -= (size_t)w;
                    *x->count += (uint64_t)w;
                } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    goto out; /* that side is gone: so is the connection */
                }
            }
        }
    }
out:
    free(bufs);
}

/* --- an intercepted tunnel: TLS both ways, one request, a secret added --- */

/* hutch's own answer inside the program's TLS. */
static void tls_answer(struct session *s, SSL *ps, int status)
{
    char text[512], head[256];
    int tn = snprintf(text, sizeof(text), "hutch egress: %s\n", s->reason), hn;
    uint64_t deadline = hutch_now_ms() + HUTCH_EGRESS_REPLY_MS;
    if (tn < 0)
        return;
    if ((size_t)tn >= sizeof(text))
        tn = (int)sizeof(text) - 1;
    hn = snprintf(head, sizeof(head),
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: %d\r\nConnection: close\r\n\r\n",
                  status, status_text(status), tn);
    if (hutch_egress_tls_write_all(ps, s->c->in, head, (size_t)hn, s->c->eg->wake,
                                   deadline) == 0 &&
        hutch_egress_tls_write_all(ps, s->c->in, text, (size_t)tn, s->c->eg->wake,
                                   deadline) == 0)
        SSL_shutdown(ps);
}

/* Read the request head from the program's TLS into `in`: 1 parsed, 0
 * refused (s->rec filled), -1 no answer possible. */
static int read_inner_head(struct session *s, SSL *ps, struct hutch_buf *in)
{
    struct hutch_egress *eg = s->c->eg;
    unsigned ms = eg->hooks.head_ms ? eg->hooks.head_ms : HUTCH_EGRESS_HEAD_MS;
    uint64_t deadline = hutch_now_ms() + ms;
    char buf[4096], msg[300];
    for (;;) {
        int r = hutch_egress_parse_inner(hutch_buf_str(in), in->len, &s->head), ww, k;
        ssize_t n;
        if (r == 1)
            return 1;
        if (r < 0) {
            set_reason(s, s->head.refusal, "%s", s->head.why);
            return 0;
        }
        if (in->len == in->max) {
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST, "the request head is over %u bytes",
                       HUTCH_EGRESS_MAX_HEAD);
            return 0;
        }
        n = hutch_egress_tls_read(
            ps, buf, in->max - in->len < sizeof(buf) ? in->max - in->len : sizeof(buf),
            &ww, msg, sizeof(msg));
        if (n > 0) {
            hutch_buf_append(in, buf, (size_t)n);
            continue;
        }
        if (n != -EAGAIN) {
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST,
                       "the connection ended before the request head did%s%s",
                       n < 0 ? ": " : "", n < 0 ? msg : "");
            return -1;
        }
        k = wait_fd(eg, s->c->in, ww ? POLLOUT : POLLIN, deadline);
        if (k == 0) {
            set_reason(s, HUTCH_EGRESS_TIMEOUT,
                       "no complete request head in the tunnel within %u ms", ms);
            return 0;
        }
        if (k < 0) {
            set_reason(s, HUTCH_EGRESS_TIMEOUT, "the execution ended before the head");
            return -1;
        }
    }
}

/* Relay the origin's answer to the program and what more the program
 * sends (a body) to the origin, until the origin ends. */
static void tls_relay(struct session *s, SSL *ps, SSL *os)
{
    struct hutch_egress *eg = s->c->eg;
    int fd[2] = {s->c->in, s->c->out}, up_eof = 0;
    SSL *ssl[2] = {ps, os};
    uint64_t *count[2] = {&s->rec.bytes_up, &s->rec.bytes_down};
    const uint64_t forever = UINT64_MAX / 2;
    char *buf = malloc(HUTCH_EGRESS_RELAY_BUF), msg[300];

    if (!buf) {
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "out of memory");
        return;
    }
    for (;;) {
        int want[2] = {0, 0}, progress = 0;
        struct pollfd p[3] = {
            {.fd = -1}, {.fd = -1}, {.fd = eg->wake, .events = POLLIN}};
        /* k = 1: the origin to the program; k = 0: the program to the origin. */
        for (int k = 1; k >= 0; k--) {
            ssize_t n;
            if (k == 0 && up_eof)
                continue;
            n = hutch_egress_tls_read(ssl[k], buf, HUTCH_EGRESS_RELAY_BUF, &want[k],
                                      msg, sizeof(msg));
            if (n == -EAGAIN)
                continue;
            if (n <= 0 && k == 0) {
                up_eof = 1; /* the answer may still come */
                continue;
            }
            if (n <= 0) {
                if (n < 0)
                    set_reason(s, HUTCH_EGRESS_OK, "the origin's %s", msg);
                goto out;
            }
            if (take_bytes(eg, (size_t)n) < 0) {
                set_reason(s, HUTCH_EGRESS_CAP_BYTES,
                           "egress.max_bytes (%llu) crossed: the connection was cut",
                           (unsigned long long)eg->rules.max_bytes);
                goto out;
            }
            if (hutch_egress_tls_write_all(ssl[1 - k], fd[1 - k], buf, (size_t)n,
                                           eg->wake, forever) < 0)
                goto out;
            *count[k] += (uint64_t)n;
            progress = 1;
        }
        if (progress)
            continue;
        /* After the program's end of stream, its side is watched for a
         * hang-up only: a program gone does not wait for the answer. */
        p[0] = (struct pollfd){fd[0], up_eof ? 0 : want[0] ? POLLOUT : POLLIN, 0};
        p[1] = (struct pollfd){fd[1], want[1] ? POLLOUT : POLLIN, 0};
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            break;
        if (p[2].revents) {
            set_reason(s, HUTCH_EGRESS_OK, "cut: the execution ended");
            break;
        }
        if (up_eof && (p[0].revents & (POLLHUP | POLLERR)))
            break;
    }
out:
    SSL_shutdown(ps);
    free(buf);
}

static void intercept(struct session *s, const struct hutch_egress_secret *sec)
{
    struct hutch_egress *eg = s->c->eg;
    struct hutch_egress_head *h = &s->head;
    struct hutch_buf in = HUTCH_BUF_INIT(HUTCH_EGRESS_MAX_HEAD);
    char host[HUTCH_EGRESS_MAX_HOST + 1], msg[300], *head = NULL;
    unsigned port = h->port, ms;
    int is_ip = h->host_is_ip, r;
    size_t hn = 0;
    SSL *ps, *os = NULL;

    snprintf(host, sizeof(host), "%s", h->host);
    ps = hutch_egress_tls_server(eg->ca, host, is_ip, s->c->in, msg, sizeof(msg));
    if (!ps) {
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED, "%s", msg);
        return;
    }
    ms = eg->hooks.head_ms ? eg->hooks.head_ms : HUTCH_EGRESS_HEAD_MS;
    if (hutch_egress_tls_handshake(ps, s->c->in, eg->wake, hutch_now_ms() + ms, msg,
                                   sizeof(msg)) < 0) {
        /* Most likely a program that does not trust hutch's CA. */
        set_reason(s, HUTCH_EGRESS_BAD_REQUEST,
                   "the program's TLS to %s:%u (intercepted to add a secret): %s", host,
                   port, msg);
        goto out;
    }
    r = read_inner_head(s, ps, &in);
    /* The record names the tunnel, not the request inside it. */
    snprintf(h->host, sizeof(h->host), "%s", host);
    h->port = port;
    if (r <= 0) {
        if (r == 0)
            tls_answer(s, ps, status_of(s->rec.outcome, 0));
        goto out;
    }
    os = hutch_egress_tls_client(eg->ca, host, is_ip, s->c->out, msg, sizeof(msg));
    ms = eg->hooks.connect_ms ? eg->hooks.connect_ms : HUTCH_EGRESS_CONNECT_MS;
    if (!os ||
        (r = hutch_egress_tls_handshake(os, s->c->out, eg->wake, hutch_now_ms() + ms,
                                        msg, sizeof(msg))) < 0) {
        set_reason(s,
                   r == -ETIMEDOUT ? HUTCH_EGRESS_TIMEOUT : HUTCH_EGRESS_CONNECT_FAILED,
                   "TLS to %s:%u (%s): %s", host, port, s->address, msg);
        tls_answer(s, ps, r == -ETIMEDOUT ? 504 : 502);
        goto out;
    }
    if (!(head = malloc(HUTCH_EGRESS_MAX_INNER_OUT)) ||
        hutch_egress_rewrite_inner(h, hutch_buf_str(&in), host, port, sec, head,
                                   HUTCH_EGRESS_MAX_INNER_OUT, &hn) < 0) {
        set_reason(s, HUTCH_EGRESS_BAD_REQUEST, "the rewritten head is too big");
        tls_answer(s, ps, 400);
        goto out;
    }
    if (take_bytes(eg, hn + in.len - h->head_len) < 0) {
        set_reason(s, HUTCH_EGRESS_CAP_BYTES, "egress.max_bytes (%llu) crossed",
                   (unsigned long long)eg->rules.max_bytes);
        tls_answer(s, ps, 403);
        goto out;
    }
    if (hutch_egress_tls_write_all(os, s->c->out, head, hn, eg->wake,
                                   hutch_now_ms() + ms) < 0 ||
        hutch_egress_tls_write_all(os, s->c->out, hutch_buf_str(&in) + h->head_len,
                                   in.len - h->head_len, eg->wake,
                                   hutch_now_ms() + ms) < 0) {
        set_reason(s, HUTCH_EGRESS_CONNECT_FAILED,
                   "%s:%u (%s) did not take the request", host, port, s->address);
        tls_answer(s, ps, 502);
        goto out;
    }
    s->rec.secret = sec->header;
    s->rec.bytes_up += hn + in.len - h->head_len;
    explicit_bzero(head, hn);
    tls_relay(s, ps, os);
out:
    if (head) {
        explicit_bzero(head, HUTCH_EGRESS_MAX_INNER_OUT);
        free(head);
    }
    SSL_free(os);
    SSL_free(ps);
    hutch_buf_free(&in);
}

static void serve(struct session *s)
{
    struct hutch_egress *eg = s->c->eg;
    struct hutch_egress_head *h = &s->head;
    const struct hutch_egress_rule *rule = NULL;
    struct egress_host ho;
    struct addrs a = {0};
    struct hutch_buf pre = HUTCH_BUF_INIT(2 * HUTCH_EGRESS_MAX_HEAD);
    char msg[64], rs[HUTCH_EGRESS_MAX_PATTERN + 8];
    enum hutch_egress_outcome o;
    const char *rest;
    size_t nrest;

    if (!read_head(s))
        goto refuse;
    egress_parse_host(h->host, strlen(h->host), 0, 1, &ho, msg, sizeof(msg));
    o = egress_match_host(&eg->rules, &ho, h->port, &rule);
    if (o == HUTCH_EGRESS_REFUSED_NAME) {
        set_reason(s, o, "%s%s%s:%u is not allowed by the policy (egress.allow)",
                   ho.family == AF_INET6 ? "[" : "", h->host,
                   ho.family == AF_INET6 ? "]" : "", h->port);
        goto refuse;
    }
    if (o == HUTCH_EGRESS_REFUSED_PORT) {
        set_reason(s, o,
                   "port %u of %s is not allowed by the policy (egress.allow has %s%s)",
                   h->port, h->host, hutch_egress_rule_str(rule, rs, sizeof(rs)),
                   rule->port ? "" : ", for ports 80 and 443");
        goto refuse;
    }
    if (eg->hooks.decide) {
        char why[sizeof(s->reason)] = "";
        if (eg->hooks.decide(eg->hooks.arg, h->host, h->port, why, sizeof(why)) < 0) {
            set_reason(s, HUTCH_EGRESS_REFUSED_POLICY, "%s",
                       why[0] ? why : "refused by the policy");
            goto refuse;
        }
    }
    if (resolve(s, &a) < 0 || connect_any(s, &a) < 0)
        goto refuse;
    rest = hutch_buf_str(&s->in) + h->head_len;
    nrest = s->in.len - h->head_len;
    if (h->form == HUTCH_EGRESS_FORM_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        const struct hutch_egress_secret *sec =
            hutch_egress_secret_find(&eg->rules, h->host, h->port);
        if (sec && nrest) {
            /* The TLS hutch reads starts after its answer. */
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST,
                       "bytes came after CONNECT before its answer: hutch adds a "
                       "secret to %s:%u and reads the tunnel itself",
                       h->host, h->port);
            goto refuse;
        }
        if (send_all(eg, s->c->in, ok, sizeof(ok) - 1,
                     hutch_now_ms() + HUTCH_EGRESS_REPLY_MS) < 0) {
            set_reason(s, HUTCH_EGRESS_OK, "the program did not read the answer");
            goto out;
        }
        if (sec)
            intercept(s, sec);
        else
            relay(s, rest, nrest);
    } else {
        if (hutch_egress_rewrite(h, hutch_buf_str(&s->in), &pre) < 0 ||
            hutch_buf_append(&pre, rest, nrest) < 0) {
            set_reason(s, HUTCH_EGRESS_BAD_REQUEST, "the rewritten head is too big");
            goto refuse;
        }
        relay(s, hutch_buf_str(&pre), pre.len);
    }
    goto out;
refuse:
    answer(eg, s->c->in, status_of(s->rec.outcome, s->address[0] != '\0'), s->reason);
out:
    hutch_buf_free(&pre);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct hutch_egress *eg = c->eg;
    struct session *s = calloc(1, sizeof(*s));

    if (s) {
        s->c = c;
        hutch_buf_init(&s->in, HUTCH_EGRESS_MAX_HEAD);
        serve(s);
        s->rec.method = s->head.method;
        s->rec.host = s->head.host;
        s->rec.port = s->head.port;
        s->rec.address = s->address;
        s->rec.reason = s->reason;
    }
    pthread_mutex_lock(&eg->mu);
    if (c->out >= 0)
        close(c->out);
    close(c->in);
    c->in = c->out = -1;
    pthread_mutex_unlock(&eg->mu);
    if (s) {
        emit(eg, &s->rec);
        hutch_buf_free(&s->in);
        free(s);
    } else {
        struct hutch_egress_record rec = {.outcome = HUTCH_EGRESS_CONNECT_FAILED,
                                          .method = "",
                                          .host = "",
                                          .address = "",
                                          .reason = "out of memory"};
        emit(eg, &rec);
    }
    pthread_mutex_lock(&eg->mu);
    c->done = 1;
    pthread_mutex_unlock(&eg->mu);
    return NULL;
}

/* A copy of n secrets, values included: NULL when out of memory. */
static struct hutch_egress_secret *secrets_dup(const struct hutch_egress_secret *src,
                                               size_t n)
{
    struct hutch_egress_secret *d = calloc(n ? n : 1, sizeof(*d));
    for (size_t i = 0; d && i < n; i++) {
        d[i] = src[i];
        d[i].value = malloc(src[i].value_len + 1);
        if (!d[i].value) {
            egress_secrets_free(d, i);
            return NULL;
        }
        memcpy(d[i].value, src[i].value, src[i].value_len + 1);
    }
    return d;
}

int hutch_egress_new(const struct hutch_egress_rules *rules,
                     const struct hutch_egress_hooks *hooks, struct hutch_egress **out,
                     struct hutch_err *err)
{
    struct hutch_egress *eg = calloc(1, sizeof(*eg));
    const char *tr = hutch_knob_str(HUTCH_KNOB_TEST_RESOLVE);
    int r;

    *out = NULL;
    if (!eg)
        return hutch_err_set(err, -ENOMEM, "egress: out of memory");
    eg->rules = *rules;
    eg->rules.rule = calloc(rules->n ? rules->n : 1, sizeof(*rules->rule));
    eg->rules.secret = NULL;
    eg->rules.nsecrets = 0;
    if (rules->nsecrets &&
        (eg->rules.secret = secrets_dup(rules->secret, rules->nsecrets)))
        eg->rules.nsecrets = rules->nsecrets;
    eg->test_resolve = tr && *tr ? strdup(tr) : NULL;
    eg->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!eg->rules.rule || (tr && *tr && !eg->test_resolve) || eg->wake < 0 ||
        eg->rules.nsecrets != rules->nsecrets) {
        int e = eg->wake < 0 ? -errno : -ENOMEM;
        r = hutch_err_set(err, e, "egress: %s", strerror(-e));
        goto fail;
    }
    /* Secrets: the CA now, so that an execution that cannot have it fails
     * before its program runs. */
    if (rules->nsecrets && (r = hutch_egress_ca_get(&eg->ca, err)) < 0)
        goto fail;
    if (rules->n)
        memcpy(eg->rules.rule, rules->rule, rules->n * sizeof(*rules->rule));
    if (hooks)
        eg->hooks = *hooks;
    pthread_mutex_init(&eg->mu, NULL);
    for (size_t i = 0; i < HUTCH_EGRESS_MAX_CONCURRENT; i++) {
        eg->slot[i].eg = eg;
        eg->slot[i].in = eg->slot[i].out = -1;
    }
    *out = eg;
    return 0;
fail:
    if (eg->wake >= 0)
        close(eg->wake);
    egress_secrets_free(eg->rules.secret, eg->rules.nsecrets);
    free(eg->rules.rule);
    free(eg->test_resolve);
    free(eg);
    return r;
}

const char *hutch_egress_ca_bundle(const struct hutch_egress *eg, size_t *len)
{
    *len = 0;
    return eg && eg->ca ? hutch_egress_ca_bundle_pem(eg->ca, len) : NULL;
}

/* Refuse fd without a thread: one try at the answer, a record. */
static void refuse_now(struct hutch_egress *eg, int fd, enum hutch_egress_outcome o,
                       const char *reason)
{
    char body[256], text[512];
    int bn = snprintf(body, sizeof(body), "hutch egress: %s\n", reason);
    int n =
        snprintf(text, sizeof(text),
                 "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; "
                 "charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                 bn, body);
    struct hutch_egress_record rec = {
        .outcome = o, .method = "", .host = "", .address = "", .reason = reason};
    if (bn > 0 && (size_t)bn < sizeof(body) && n > 0 && (size_t)n < sizeof(text) &&
        send(fd, text, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
        shutdown(fd, SHUT_WR);
    close(fd);
    emit(eg, &rec);
}

int hutch_egress_accept(struct hutch_egress *eg, int fd, struct hutch_err *err)
{
    struct conn *c = NULL;
    uint64_t nth = atomic_fetch_add(&eg->connections, 1) + 1;
    char reason[160];
    sigset_t all, old;
    int r;

    hutch_set_nonblock(fd);
    hutch_set_cloexec(fd);
    pthread_mutex_lock(&eg->mu);
    if (eg->closing) {
        pthread_mutex_unlock(&eg->mu);
        close(fd);
        return hutch_err_set(err, -ESHUTDOWN, "egress: the execution is ending");
    }
    for (size_t i = 0; i < HUTCH_EGRESS_MAX_CONCURRENT; i++) {
        struct conn *x = &eg->slot[i];
        if (x->used && x->done) {
            pthread_join(x->tid, NULL); /* it is past its last lock */
            x->used = x->done = 0;
        }
        if (!x->used && !c)
            c = x;
    }
    if (nth > eg->rules.max_connections || !c) {
        pthread_mutex_unlock(&eg->mu);
        if (!c)
            snprintf(reason, sizeof(reason),
                     "%d connections are open already, the most at once",
                     HUTCH_EGRESS_MAX_CONCURRENT);
        else
            snprintf(reason, sizeof(reason),
                     "this execution has made its %u connections "
                     "(egress.max_connections)",
                     eg->rules.max_connections);
        refuse_now(eg, fd, HUTCH_EGRESS_CAP_CONNECTIONS, reason);
        return 0;
    }
    c->in = fd;
    c->out = -1;
    c->done = 0;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r = pthread_create(&c->tid, NULL, conn_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        c->in = -1;
        pthread_mutex_unlock(&eg->mu);
        refuse_now(eg, fd, HUTCH_EGRESS_CAP_CONNECTIONS,
                   "no thread for the connection");
        return hutch_err_set(err, -r, "egress: cannot start a thread: %s", strerror(r));
    }
    c->used = 1;
    pthread_mutex_unlock(&eg->mu);
    return 0;
}

void hutch_egress_stats(struct hutch_egress *eg, struct hutch_egress_stats *out)
{
    out->connections = atomic_load(&eg->connections);
    out->refused = atomic_load(&eg->refused);
    out->bytes = atomic_load(&eg->bytes);
}

void hutch_egress_close(struct hutch_egress *eg)
{
    uint64_t one = 1;
    if (!eg)
        return;
    pthread_mutex_lock(&eg->mu);
    eg->closing = 1;
    if (write(eg->wake, &one, sizeof(one)) < 0)
        hutch_debug("egress: waking the connections: %s", strerror(errno));
    for (size_t i = 0; i < HUTCH_EGRESS_MAX_CONCURRENT; i++) {
        struct conn *c = &eg->slot[i];
        if (c->in >= 0)
            shutdown(c->in, SHUT_RDWR);
        if (c->out >= 0)
            shutdown(c->out, SHUT_RDWR);
    }
    pthread_mutex_unlock(&eg->mu);
    /* No new slot is taken once closing: `used` changes no more. */
    for (size_t i = 0; i < HUTCH_EGRESS_MAX_CONCURRENT; i++)
        if (eg->slot[i].used)
            pthread_join(eg->slot[i].tid, NULL);
    close(eg->wake);
    pthread_mutex_destroy(&eg->mu);
    egress_secrets_free(eg->rules.secret, eg->rules.nsecrets);
    free(eg->rules.rule);
    free(eg->test_resolve);
    free(eg);
}
