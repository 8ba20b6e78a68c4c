/* test_egress.c — the egress proxy: patterns and matching, the judge of
 * addresses (egress_rules.c), the head's parser and rewriter
 * (egress_head.c), and the engine (egress.c) end to end over socketpairs
 * (the test plays the sandbox) against servers of its own on loopback:
 * an HTTP server that answers with the head it received (or a large body
 * for /big), and a TCP echo server for CONNECT.  Nothing leaves 127.0.0.1
 * and ::1; names resolve through HUTCH_TEST_RESOLVE.
 *
 * No timing is asserted: the slow-head case sets a short head time through
 * the hooks and only checks the outcome. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "egress.h"
#include "log.h"
#include "tap.h"

#define BIG_BYTES (256u << 10)

/* --- records the engine makes --- */

struct rec {
    enum hutch_egress_outcome outcome;
    char method[40], host[260], address[64], reason[400];
    unsigned port;
    uint64_t up, down;
};
static struct rec recs[256];
static int nrecs;
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rec_cv = PTHREAD_COND_INITIALIZER;

static void on_record(void *arg, const struct hutch_egress_record *r)
{
    (void)arg;
    pthread_mutex_lock(&rec_mu);
    if (nrecs < (int)(sizeof(recs) / sizeof(recs[0]))) {
        struct rec *x = &recs[nrecs];
        x->outcome = r->outcome;
        snprintf(x->method, sizeof(x->method), "%s", r->method);
        snprintf(x->host, sizeof(x->host), "%s", r->host);
        snprintf(x->address, sizeof(x->address), "%s", r->address);
        snprintf(x->reason, sizeof(x->reason), "%s", r->reason);
        x->port = r->port;
        x->up = r->bytes_up;
        x->down = r->bytes_down;
    }
    nrecs++;
    pthread_cond_broadcast(&rec_cv);
    pthread_mutex_unlock(&rec_mu);
}

/* The n-th record (counted from 1), waited for up to 20 s; NULL if none. */
static struct rec *rec_wait(int n)
{
    struct timespec ts;
    struct rec *r = NULL;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    pthread_mutex_lock(&rec_mu);
    while (nrecs < n && pthread_cond_timedwait(&rec_cv, &rec_mu, &ts) == 0)
        ;
    if (nrecs >= n)
        r = &recs[n - 1];
    pthread_mutex_unlock(&rec_mu);
    return r;
}

static int rec_count(void)
{
    int n;
    pthread_mutex_lock(&rec_mu);
    n = nrecs;
    pthread_mutex_unlock(&rec_mu);
    return n;
}

/* --- servers on loopback --- */

static int listen_on(int family, unsigned *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        sl = sizeof(*in6);
    }
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *http_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char head[65536];
    size_t n = 0;
    while (n < sizeof(head) - 1) {
        ssize_t r = recv(fd, head + n, sizeof(head) - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        head[n] = '\0';
        if (strstr(head, "\r\n\r\n"))
            break;
    }
    head[n] = '\0';
    if (strstr(head, " /big ")) {
        char *body = malloc(BIG_BYTES);
        char h[128];
        int hn = snprintf(h, sizeof(h),
                          "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n"
                          "Connection: close\r\n\r\n",
                          BIG_BYTES);
        memset(body, 'x', BIG_BYTES);
        if (write_all(fd, h, (size_t)hn) == 0)
            write_all(fd, body, BIG_BYTES);
        free(body);
    } else {
        char h[128];
        int hn = snprintf(h, sizeof(h),
                          "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          n);
        if (write_all(fd, h, (size_t)hn) == 0)
            write_all(fd, head, n);
    }
    close(fd);
    return NULL;
}

static void *echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r <= 0 || write_all(fd, buf, (size_t)r) < 0)
            break;
    }
    shutdown(fd, SHUT_WR);
    close(fd);
    return NULL;
}

struct server {
    int fd;
    void *(*conn)(void *);
};

static void *server_main(void *arg)
{
    struct server *s = arg;
    for (;;) {
        pthread_t t;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        if (pthread_create(&t, NULL, s->conn, (void *)(intptr_t)c) != 0)
            close(c);
        else
            pthread_detach(t);
    }
}

/* A server on loopback of `family`: its port, or 0 when it cannot listen. */
static unsigned serve(int family, void *(*conn)(void *))
{
    static struct server servers[8];
    static int n;
    unsigned port = 0;
    pthread_t t;
    int fd = listen_on(family, &port);
    if (fd < 0)
        return 0;
    servers[n].fd = fd;
    servers[n].conn = conn;
    if (pthread_create(&t, NULL, server_main, &servers[n]) != 0) {
        printf("# cannot start a server thread\n");
        exit(2);
    }
    pthread_detach(t);
    n++;
    return port;
}

/* --- the sandbox side --- */

static unsigned http_port, echo_port, echo6_port, closed_port;

static struct hutch_egress *make(const char *const *patterns, uint64_t max_bytes,
                                 uint32_t max_conn, unsigned head_ms)
{
    size_t n = 0;
    struct hutch_egress_rules *r;
    struct hutch_egress *eg = NULL;
    struct hutch_egress_hooks hooks = {.on_record = on_record, .head_ms = head_ms};
    struct hutch_err err = {0};
    char msg[200];

    while (patterns[n])
        n++;
    r = hutch_egress_rules_new(n);
    for (size_t i = 0; i < n; i++) {
        if (hutch_egress_rule_parse(patterns[i], &r->rule[i], msg, sizeof(msg)) < 0) {
            printf("# bad test pattern %s: %s\n", patterns[i], msg);
            exit(2);
        }
        r->n++;
    }
    if (max_bytes)
        r->max_bytes = max_bytes;
    if (max_conn)
        r->max_connections = max_conn;
    if (hutch_egress_new(r, &hooks, &eg, &err) < 0) {
        printf("# hutch_egress_new: %s\n", err.msg);
        exit(2);
    }
    hutch_egress_rules_free(r); /* the engine keeps a copy */
    return eg;
}

/* A new connection to the proxy: the sandbox's end. */
static int dial(struct hutch_egress *eg)
{
    int sv[2];
    struct hutch_err err = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        printf("# socketpair: %s\n", strerror(errno));
        exit(2);
    }
    if (hutch_egress_accept(eg, sv[1], &err) < 0)
        printf("# hutch_egress_accept: %s\n", err.msg);
    return sv[0];
}

/* Read until end of file (at most cap - 1 bytes, 20 s): the count. */
static size_t read_all(int fd, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char sink[4096];
        ssize_t r;
        if (poll(&p, 1, 20000) <= 0)
            break;
        if (n < cap - 1)
            r = recv(fd, out + n, cap - 1 - n, 0);
        else
            r = recv(fd, sink, sizeof(sink), 0); /* counted, not kept */
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* Read until `want` appears or 20 s: 1 when it did. */
static int read_until(int fd, char *out, size_t cap, const char *want)
{
    size_t n = 0;
    out[0] = '\0';
    while (n < cap - 1 && !strstr(out, want)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        if (poll(&p, 1, 20000) <= 0)
            return 0;
        r = recv(fd, out + n, cap - 1 - n, 0);
        if (r <= 0)
            return 0;
        n += (size_t)r;
        out[n] = '\0';
    }
    return strstr(out, want) != NULL;
}

/* One request through a fresh connection; the whole answer in out; the
 * connection's record. */
static struct rec *ask(struct hutch_egress *eg, const char *req, char *out, size_t cap)
{
    int want = rec_count() + 1;
    int fd = dial(eg);
    if (req)
        write_all(fd, req, strlen(req));
    read_all(fd, out, cap);
    close(fd);
    return rec_wait(want);
}

static const char *body_of(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    return b ? b + 4 : "";
}

/* --- patterns and matching --- */

static struct hutch_egress_rules *rules_of(const char *const *patterns)
{
    size_t n = 0;
    struct hutch_egress_rules *r;
    char msg[200];
    while (patterns[n])
        n++;
    r = hutch_egress_rules_new(n);
    for (size_t i = 0; i < n; i++)
        if (hutch_egress_rule_parse(patterns[i], &r->rule[r->n], msg, sizeof(msg)) == 0)
            r->n++;
    return r;
}

static void test_match(void)
{
    static const char *const p[] = {"api.github.com",  "*.pypi.org:443",
                                    "127.0.0.1:8080",  "[::1]:9000",
                                    "Mixed.Case.ORG.", NULL};
    struct hutch_egress_rules *r = rules_of(p);
    const struct hutch_egress_rule *rule = NULL;

    ok(r->n == 5, "five patterns parse");
    ok(hutch_egress_match(r, "api.github.com", 443, &rule) == HUTCH_EGRESS_OK &&
           rule == &r->rule[0],
       "a name on 443, its rule");
    ok(hutch_egress_match(r, "api.github.com", 80, NULL) == HUTCH_EGRESS_OK,
       "no port in the rule: 80 too");
    ok(hutch_egress_match(r, "api.github.com", 22, &rule) ==
               HUTCH_EGRESS_REFUSED_PORT &&
           rule == &r->rule[0],
       "no port in the rule: not 22 (refused_port, the rule named)");
    ok(hutch_egress_match(r, "API.GitHub.COM.", 443, NULL) == HUTCH_EGRESS_OK,
       "any case, a trailing dot");
    ok(hutch_egress_match(r, "mixed.case.org", 80, NULL) == HUTCH_EGRESS_OK,
       "the rule's own case and dot normalised");
    ok(hutch_egress_match(r, "github.com", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "a parent of a name: refused");
    ok(hutch_egress_match(r, "x.api.github.com", 443, NULL) ==
           HUTCH_EGRESS_REFUSED_NAME,
       "a child of a name: refused");
    ok(hutch_egress_match(r, "files.pypi.org", 443, NULL) == HUTCH_EGRESS_OK,
       "wildcard: one label");
    ok(hutch_egress_match(r, "a.b.pypi.org", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "wildcard: not two labels");
    ok(hutch_egress_match(r, "pypi.org", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "wildcard: not zero labels");
    ok(hutch_egress_match(r, "xpypi.org", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "wildcard: a label boundary");
    ok(hutch_egress_match(r, "files.pypi.org", 80, NULL) == HUTCH_EGRESS_REFUSED_PORT,
       "wildcard: its port only");
    ok(hutch_egress_match(r, "127.0.0.1", 8080, NULL) == HUTCH_EGRESS_OK,
       "an IPv4 literal");
    ok(hutch_egress_match(r, "::ffff:127.0.0.1", 8080, NULL) == HUTCH_EGRESS_OK &&
           hutch_egress_match(r, "[::ffff:7f00:1]", 8080, NULL) == HUTCH_EGRESS_OK,
       "an IPv4-mapped IPv6 literal is that IPv4 address");
    ok(hutch_egress_match(r, "127.0.0.2", 8080, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "another IPv4 address");
    ok(hutch_egress_match(r, "[0:0:0:0:0:0:0:1]", 9000, NULL) == HUTCH_EGRESS_OK &&
           hutch_egress_match(r, "::1", 9000, NULL) == HUTCH_EGRESS_OK,
       "IPv6 compared as addresses");
    ok(hutch_egress_match(r, "localhost", 8080, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "a name never matches an IP rule");
    ok(hutch_egress_match(r, "2130706433", 8080, NULL) == HUTCH_EGRESS_REFUSED_NAME &&
           hutch_egress_match(r, "0x7f.0.0.1", 8080, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "other spellings of 127.0.0.1 match nothing");
    ok(hutch_egress_match(r, "", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME &&
           hutch_egress_match(r, "api.github.com", 0, NULL) ==
               HUTCH_EGRESS_REFUSED_NAME &&
           hutch_egress_match(NULL, "api.github.com", 443, NULL) ==
               HUTCH_EGRESS_REFUSED_NAME,
       "nothing, port 0, no rules: refused");
    hutch_egress_rules_free(r);
}

static const char *cls(const char *text)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, text, a) == 1)
        return hutch_egress_addr_class(AF_INET, a);
    if (inet_pton(AF_INET6, text, a) == 1)
        return hutch_egress_addr_class(AF_INET6, a);
    return "bad test address";
}

static void test_addr_class(void)
{
    static const char *const refused[] = {"127.0.0.1",
                                          "127.255.0.9",
                                          "0.0.0.0",
                                          "10.1.2.3",
                                          "172.16.0.1",
                                          "172.31.255.255",
                                          "192.168.1.1",
                                          "100.64.0.1",
                                          "169.254.169.254",
                                          "169.254.1.1",
                                          "224.0.0.1",
                                          "255.255.255.255",
                                          "240.0.0.1",
                                          "::",
                                          "::1",
                                          "::ffff:127.0.0.1",
                                          "::ffff:10.0.0.1",
                                          "::127.0.0.1",
                                          "64:ff9b::a9fe:a9fe",
                                          "2002:7f00:1::1",
                                          "fc00::1",
                                          "fd12::1",
                                          "fe80::1",
                                          "ff02::1",
                                          NULL};
    static const char *const public[] = {"8.8.8.8", "172.32.0.1",      "100.128.0.1",
                                         "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8",
                                         NULL};
    int all = 1;
    for (const char *const *a = refused; *a; a++)
        if (!cls(*a)) {
            printf("# %s judged public\n", *a);
            all = 0;
        }
    ok(all, "loopback, private, link-local, multicast, broadcast, mapped: refused");
    all = 1;
    for (const char *const *a = public; *a; a++)
        if (cls(*a)) {
            printf("# %s judged %s\n", *a, cls(*a));
            all = 0;
        }
    ok(all, "public addresses pass");
    ok(!strcmp(cls("169.254.169.254"), "link-local, the metadata address"),
       "the metadata address is named");
}

/* --- the head --- */

static void test_head(void)
{
    struct hutch_egress_head h;
    struct hutch_buf out = HUTCH_BUF_INIT(HUTCH_EGRESS_MAX_HEAD * 2);
    const char *req;

    req = "CONNECT Example.COM:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nextra";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == 1 &&
           h.form == HUTCH_EGRESS_FORM_CONNECT && !strcmp(h.host, "example.com") &&
           h.port == 443 && h.head_len == strlen(req) - 5 && h.nhdr == 1,
       "CONNECT host:port, the head's length");
    req = "CONNECT [::1]:8080 HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == 1 && h.host_is_ip &&
           !strcmp(h.host, "::1") && h.port == 8080,
       "CONNECT [::1]:8080");
    req = "CONNECT example.com HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL &&
           h.refusal == HUTCH_EGRESS_BAD_REQUEST,
       "CONNECT without a port: bad");
    req = "POST http://example.com:8080/a/b?c=d#frag HTTP/1.0\nX: 1\n\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == 1 &&
           h.form == HUTCH_EGRESS_FORM_ABSOLUTE && !strcmp(h.method, "POST") &&
           h.port == 8080 && h.path.len == 8 &&
           !memcmp(req + h.path.off, "/a/b?c=d", 8),
       "absolute form with a port, a query, a fragment dropped; LF lines");
    req = "GET http://example.com HTTP/1.1\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == 0, "no blank line yet: more");
    ok(hutch_egress_parse_head("GE", 2, &h) == 0, "half a method: more");
    ok(hutch_egress_parse_head("\x16\x03\x01\x02", 4, &h) == -EINVAL,
       "TLS at the proxy: bad at once");
    req = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL &&
           strstr(h.why, "not a proxy request"),
       "origin form: not a proxy request");
    req = "GET https://example.com/ HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL &&
           strstr(h.why, "CONNECT"),
       "https:// in absolute form: use CONNECT");
    req = "TRACE http://example.com/ HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL &&
           h.refusal == HUTCH_EGRESS_REFUSED_METHOD,
       "TRACE: refused_method");
    req = "GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL &&
           strstr(h.why, "credentials"),
       "userinfo in the URL: bad");
    req = "GET http://example.com/ HTTP/1.1\r\nX: a\r\n  folded\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL,
       "a folded header: bad");
    req = "GET http://example.com/ HTTP/2.0\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL, "HTTP/2.0: bad");
    req = "GET http://exa mple.com/ HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == -EINVAL, "a space in the URL");
    ok(hutch_egress_parse_head("GET http://a.b/ HTTP/1.1\r\nX\0: 1\r\n\r\n", 34, &h) ==
           -EINVAL,
       "a NUL in the head");

    req = "GET http://Example.com:8080?q=1 HTTP/1.1\r\nHost: evil.example\r\n"
          "Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n"
          "Connection: keep-alive, Upgrade\r\nKeep-Alive: 300\r\nUpgrade: h2c\r\n"
          "Accept: */*\r\n\r\n";
    ok(hutch_egress_parse_head(req, strlen(req), &h) == 1 &&
           hutch_egress_rewrite(&h, req, &out) == 0 &&
           !strcmp(hutch_buf_str(&out),
                   "GET /?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n"
                   "Accept: */*\r\nConnection: close\r\n\r\n"),
       "rewrite: origin form, Host from the URL, hop-by-hop and Proxy-* dropped "
       "(got %s)",
       hutch_buf_str(&out));
    hutch_buf_free(&out);
}

/* Secrets: the key, the header, ${NAME}, a file; the head inside a tunnel
 * and its rewrite. */
static void test_secrets(void)
{
    struct hutch_egress_rules *r = hutch_egress_rules_new(3);
    const struct hutch_egress_secret *sec;
    struct hutch_egress_head h;
    char msg[300], out[1024], path[] = "/tmp/test_egress_secret.XXXXXX";
    const char *req;
    size_t n = 0;
    int fd;

    for (int i = 0; i < 3; i++)
        hutch_egress_rule_parse(i == 0   ? "api.test"
                                : i == 1 ? "127.0.0.1:8443"
                                         : "*.w.test",
                                &r->rule[r->n++], msg, sizeof(msg));
    setenv("TEST_EGRESS_TOKEN", "tok-123", 1);
    unsetenv("TEST_EGRESS_UNSET");
    setenv("TEST_EGRESS_EMPTY", "", 1);
    ok(hutch_egress_secret_add(r, "api.test", "Authorization",
                               "Bearer ${TEST_EGRESS_TOKEN}!", NULL, msg,
                               sizeof(msg)) == 0 &&
           !strcmp(r->secret[0].value, "Bearer tok-123!") &&
           r->secret[0].value_len == 15,
       "${NAME} expands from the environment (%s)", msg);
    ok(hutch_egress_secret_add(r, "api.test:443", "X", "${TEST_EGRESS_UNSET}", NULL,
                               msg, sizeof(msg)) == -EINVAL &&
           strstr(msg, "${TEST_EGRESS_UNSET} is not set"),
       "an unset variable names itself (%s)", msg);
    ok(hutch_egress_secret_add(r, "api.test:443", "X", "a${TEST_EGRESS_EMPTY}", NULL,
                               msg, sizeof(msg)) == -EINVAL &&
           strstr(msg, "is empty"),
       "an empty variable too");
    ok(hutch_egress_secret_add(r, "api.test:443", "X", "${1A}", NULL, msg,
                               sizeof(msg)) == -EINVAL &&
           hutch_egress_secret_add(r, "api.test:443", "X", "${A", NULL, msg,
                                   sizeof(msg)) == -EINVAL,
       "a bad ${...}");
    ok(hutch_egress_secret_add(r, "api.test", "X", "v", NULL, msg, sizeof(msg)) ==
               -EINVAL &&
           strstr(msg, "second secret"),
       "a host given twice (%s)", msg);
    ok(hutch_egress_secret_add(r, "other.test", "X", "v", NULL, msg, sizeof(msg)) ==
               -EINVAL &&
           strstr(msg, "no rule of egress.allow admits other.test"),
       "a host no rule admits (%s)", msg);
    ok(hutch_egress_secret_add(r, "api.test:8080", "X", "v", NULL, msg, sizeof(msg)) ==
           -EINVAL,
       "nor at a port no rule admits");
    ok(hutch_egress_secret_add(r, "*.w.test", "X", "v", NULL, msg, sizeof(msg)) ==
               -EINVAL &&
           strstr(msg, "one host"),
       "a wildcard key");
    ok(hutch_egress_secret_add(r, "a.w.test", "X Y", "v", NULL, msg, sizeof(msg)) ==
               -EINVAL &&
           hutch_egress_secret_add(r, "a.w.test", "Transfer-Encoding", "v", NULL, msg,
                                   sizeof(msg)) == -EINVAL &&
           hutch_egress_secret_add(r, "a.w.test", "proxy-authorization", "v", NULL, msg,
                                   sizeof(msg)) == -EINVAL,
       "a header that is no token, or one hutch sets or drops");
    ok(hutch_egress_secret_add(r, "a.w.test", "X", "v\r\nY: z", NULL, msg,
                               sizeof(msg)) == -EINVAL &&
           !strstr(msg, "Y: z"),
       "a value with CR LF: refused, not shown (%s)", msg);
    ok(hutch_egress_secret_add(r, "a.w.test", "X", "v", "/etc/hostname", msg,
                               sizeof(msg)) == -EINVAL &&
           hutch_egress_secret_add(r, "a.w.test", "X", NULL, NULL, msg, sizeof(msg)) ==
               -EINVAL,
       "value and file: exactly one");
    fd = mkstemp(path);
    ok(fd >= 0 && write(fd, "from-file\r\n", 11) == 11, "a secret file");
    close(fd);
    ok(hutch_egress_secret_add(r, "127.0.0.1:8443", "X-Key", NULL, path, msg,
                               sizeof(msg)) == 0 &&
           !strcmp(r->secret[1].value, "from-file"),
       "file: read at once, its line end dropped (%s)", msg);
    unlink(path);
    ok(hutch_egress_secret_add(r, "a.w.test", "X", NULL, "relative", msg,
                               sizeof(msg)) == -EINVAL,
       "file: an absolute path");
    ok(r->nsecrets == 2, "refusals add nothing");

    sec = hutch_egress_secret_find(r, "API.test.", 443);
    ok(sec && !strcmp(sec->header, "Authorization"),
       "find: by name, any case, any port");
    ok(hutch_egress_secret_find(r, "::ffff:127.0.0.1", 8443) &&
           !hutch_egress_secret_find(r, "127.0.0.1", 443) &&
           !hutch_egress_secret_find(r, "x.api.test", 443),
       "find: an address at its port; no other host");

    req = "POST /v1/x?y=1 HTTP/1.1\r\nHost: evil.test\r\nauthorization: mine\r\n"
          "AUTHORIZATION: again\r\nContent-Length: 2\r\nConnection: keep-alive\r\n"
          "Proxy-Authorization: p\r\n\r\nhi";
    ok(hutch_egress_parse_inner(req, strlen(req), &h) == 1 &&
           h.form == HUTCH_EGRESS_FORM_ORIGIN && h.head_len == strlen(req) - 2,
       "inner: origin form");
    ok(hutch_egress_rewrite_inner(&h, req, "api.test", 443, sec, out, sizeof(out),
                                  &n) == 0 &&
           n == strlen("POST /v1/x?y=1 HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                       "2\r\nAuthorization: Bearer tok-123!\r\nConnection: "
                       "close\r\n\r\n") &&
           !memcmp(out,
                   "POST /v1/x?y=1 HTTP/1.1\r\nHost: api.test\r\nContent-Length: "
                   "2\r\nAuthorization: Bearer tok-123!\r\nConnection: close\r\n\r\n",
                   n),
       "rewrite: Host the tunnel's, the program's headers of that name dropped, the "
       "secret's added once (got %.*s)",
       (int)n, out);
    ok(hutch_egress_rewrite_inner(&h, req, "::1", 8443, sec, out, sizeof(out), &n) ==
               0 &&
           strstr(out, "Host: [::1]:8443\r\n"),
       "rewrite: another port, an IPv6 host");
    ok(hutch_egress_rewrite_inner(&h, req, "api.test", 443, sec, out, 40, &n) == -E2BIG,
       "rewrite: too small a buffer");
    req = "GET http://api.test/ HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_inner(req, strlen(req), &h) == -EINVAL,
       "inner: no absolute form");
    req = "CONNECT api.test:443 HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_inner(req, strlen(req), &h) == -EINVAL, "inner: no CONNECT");
    req = "TRACE / HTTP/1.1\r\n\r\n";
    ok(hutch_egress_parse_inner(req, strlen(req), &h) == -EINVAL &&
           h.refusal == HUTCH_EGRESS_REFUSED_METHOD,
       "inner: TRACE refused (it would send the secret back)");
    hutch_egress_rules_free(r);
}

/* --- the engine --- */

static void test_connect_tunnel(void)
{
    char pat[64], req[128], buf[4096], got[64];
    const char *pats[] = {pat, NULL};
    struct hutch_egress *eg;
    struct hutch_egress_stats st;
    struct rec *r;
    int fd, want;

    snprintf(pat, sizeof(pat), "127.0.0.1:%u", echo_port);
    eg = make(pats, 0, 0, 0);
    want = rec_count() + 1;
    fd = dial(eg);
    snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: x\r\n\r\nhel",
             echo_port);
    write_all(fd, req, strlen(req));
    ok(read_until(fd, buf, sizeof(buf), "\r\n\r\n") &&
           !strncmp(buf, "HTTP/1.1 200 Connection established\r\n\r\n", 39),
       "CONNECT to an IP-literal rule: 200");
    /* The echo of "hel" may come in the same read as the answer. */
    {
        const char *end = strstr(buf, "\r\n\r\n");
        snprintf(got, sizeof(got), "%s", end ? end + 4 : "");
    }
    write_all(fd, "lo", 2);
    shutdown(fd, SHUT_WR); /* half-close: the echo still answers */
    read_all(fd, buf, sizeof(buf));
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s", buf);
    ok(!strcmp(got, "hello"),
       "the tunnel carries bytes both ways, through a half-close "
       "(got \"%s\")",
       got);
    close(fd);
    r = rec_wait(want);
    ok(r && r->outcome == HUTCH_EGRESS_OK && !strcmp(r->method, "CONNECT") &&
           !strcmp(r->address, "127.0.0.1") && r->port == echo_port && r->up == 5 &&
           r->down == 5,
       "record: ok, CONNECT, 127.0.0.1, 5 bytes each way");
    hutch_egress_stats(eg, &st);
    ok(st.connections == 1 && st.bytes == 10 && st.refused == 0, "stats: 1, 10 bytes");
    hutch_egress_close(eg);

    if (echo6_port) {
        snprintf(pat, sizeof(pat), "[::1]:%u", echo6_port);
        eg = make(pats, 0, 0, 0);
        want = rec_count() + 1;
        fd = dial(eg);
        snprintf(req, sizeof(req), "CONNECT [::1]:%u HTTP/1.1\r\n\r\nsix", echo6_port);
        write_all(fd, req, strlen(req));
        shutdown(fd, SHUT_WR);
        read_all(fd, buf, sizeof(buf));
        ok(strstr(buf, " 200 ") && !strcmp(body_of(buf), "six"),
           "CONNECT to an IPv6 literal rule");
        close(fd);
        r = rec_wait(want);
        ok(r && r->outcome == HUTCH_EGRESS_OK && !strcmp(r->address, "::1"),
           "record: ::1");
        hutch_egress_close(eg);
    } else {
        printf("ok %d - CONNECT to an IPv6 literal rule # SKIP no ::1\n", ++tap_n);
    }
}

static void test_plain_http(void)
{
    char pat[64], req[512], buf[8192];
    const char *pats[] = {pat, NULL};
    struct hutch_egress *eg;
    struct rec *r;
    const char *b;

    snprintf(pat, sizeof(pat), "127.0.0.1:%u", http_port);
    eg = make(pats, 0, 0, 0);
    snprintf(req, sizeof(req),
             "GET http://127.0.0.1:%u/path?q=1 HTTP/1.1\r\nHost: evil.example\r\n"
             "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
             "Connection: keep-alive\r\nKeep-Alive: 300\r\nX-Test: 1\r\n\r\n",
             http_port);
    r = ask(eg, req, buf, sizeof(buf));
    b = body_of(buf);
    ok(!strncmp(buf, "HTTP/1.1 200 OK", 15) &&
           !strncmp(b, "GET /path?q=1 HTTP/1.1\r\n", 24),
       "plain HTTP: the origin sees the origin form");
    snprintf(req, sizeof(req), "Host: 127.0.0.1:%u\r\n", http_port);
    ok(strstr(b, req) && !strstr(b, "evil.example"), "plain HTTP: Host from the URL");
    ok(strstr(b, "\r\nConnection: close\r\n") && !strstr(b, "keep-alive") &&
           !strstr(b, "Keep-Alive") && strstr(b, "X-Test: 1\r\n"),
       "plain HTTP: Connection: close, hop-by-hop dropped, the rest kept");
    ok(!strstr(b, "Proxy-") && !strstr(b, "c2VjcmV0"),
       "plain HTTP: no Proxy-Authorization or Proxy-Connection reaches the origin");
    ok(r && r->outcome == HUTCH_EGRESS_OK && !strcmp(r->method, "GET") && r->up > 0 &&
           r->down == strlen(buf),
       "record: ok, GET, bytes down as the program got them");
    hutch_egress_close(eg);
}

static void test_refusals(void)
{
    char pat[4][64], req[256], buf[4096];
    const char *pats[] = {pat[0], pat[1], pat[2], pat[3], NULL};
    struct hutch_egress *eg;
    struct rec *r;

    snprintf(pat[0], sizeof(pat[0]), "evil.test:%u", echo_port);
    snprintf(pat[1], sizeof(pat[1]), "meta.test");
    snprintf(pat[2], sizeof(pat[2]), "127.0.0.1:%u", http_port);
    snprintf(pat[3], sizeof(pat[3]), "mapped.test");
    eg = make(pats, 0, 0, 0);

    r = ask(eg, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(!strncmp(buf, "HTTP/1.1 403 ", 13) &&
           !strcmp(body_of(buf), "hutch egress: evil.example:443 is not allowed by the "
                                 "policy (egress.allow)\n"),
       "a name no rule names: 403, one line");
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_NAME &&
           !strcmp(r->host, "evil.example") && r->port == 443,
       "record: refused_name, the host and port");

    snprintf(req, sizeof(req), "CONNECT evil.test:%u HTTP/1.1\r\n\r\n", echo_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(strstr(buf, " 403 ") &&
           strstr(body_of(buf), "evil.test resolves to 127.0.0.1 (loopback)"),
       "a name rule resolving to loopback: refused (rebinding)");
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_ADDRESS &&
           !strcmp(r->address, "127.0.0.1"),
       "record: refused_address, the address");

    r = ask(eg, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n", buf,
            sizeof(buf));
    ok(strstr(buf, " 403 ") && strstr(body_of(buf), "the metadata address"),
       "a name resolving to 169.254.169.254: refused");
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_ADDRESS, "record: refused_address");

    r = ask(eg, "CONNECT mapped.test:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_ADDRESS && strstr(r->reason, "loopback"),
       "a name resolving to ::ffff:127.0.0.1: refused as loopback");

    r = ask(eg, "CONNECT meta.test:25 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(strstr(buf, " 403 ") && strstr(body_of(buf), "port 25 of meta.test") &&
           strstr(body_of(buf), "ports 80 and 443"),
       "CONNECT to a port the rule does not allow: 403 naming the ports");
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_PORT, "record: refused_port");

    snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", echo_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_PORT && strstr(buf, " 403 "),
       "an IP rule's address at another port: refused_port");

    r = ask(eg, "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", buf, sizeof(buf));
    ok(!strncmp(buf, "HTTP/1.1 400 ", 13) && r &&
           r->outcome == HUTCH_EGRESS_BAD_REQUEST,
       "garbage (TLS at the proxy): 400, bad_request");
    r = ask(eg, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", buf, sizeof(buf));
    ok(strstr(buf, " 400 ") && strstr(body_of(buf), "not a proxy request") && r &&
           r->outcome == HUTCH_EGRESS_BAD_REQUEST,
       "origin form: 400 saying why");
    r = ask(eg, "GET https://meta.test/ HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(strstr(buf, " 400 ") && strstr(body_of(buf), "CONNECT") && r &&
           r->outcome == HUTCH_EGRESS_BAD_REQUEST,
       "https:// in absolute form: 400, use CONNECT");
    snprintf(req, sizeof(req), "TRACE http://127.0.0.1:%u/ HTTP/1.1\r\n\r\n",
             http_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(strstr(buf, " 405 ") && r && r->outcome == HUTCH_EGRESS_REFUSED_METHOD,
       "TRACE: 405, refused_method");
    {
        struct hutch_buf big = HUTCH_BUF_INIT(HUTCH_EGRESS_MAX_HEAD * 2);
        hutch_buf_appends(&big, "GET http://meta.test/ HTTP/1.1\r\n");
        while (big.len < HUTCH_EGRESS_MAX_HEAD + 100)
            hutch_buf_appendf(&big, "X-Filler: %0200d\r\n", 0);
        r = ask(eg, hutch_buf_str(&big), buf, sizeof(buf));
        ok(strstr(buf, " 400 ") && strstr(body_of(buf), "over 16384 bytes") && r &&
               r->outcome == HUTCH_EGRESS_BAD_REQUEST,
           "a head over the cap: 400");
        hutch_buf_free(&big);
    }
    {
        int want = rec_count() + 1, fd = dial(eg);
        write_all(fd, "GET http://meta.test/ HTTP/1.1\r\n", 32);
        shutdown(fd, SHUT_WR);
        read_all(fd, buf, sizeof(buf));
        close(fd);
        r = rec_wait(want);
    }
    ok(r && r->outcome == HUTCH_EGRESS_BAD_REQUEST && strstr(body_of(buf), "ended"),
       "a head cut short by the end of the stream: 400");
    hutch_egress_close(eg);

    /* A closed port: nothing listens. */
    snprintf(pat[0], sizeof(pat[0]), "127.0.0.1:%u", closed_port);
    pats[1] = NULL;
    eg = make(pats, 0, 0, 0);
    snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", closed_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(strstr(buf, " 502 ") && r && r->outcome == HUTCH_EGRESS_CONNECT_FAILED &&
           strstr(r->reason, "cannot connect"),
       "nothing listening: 502, connect_failed");
    hutch_egress_close(eg);
}

static void test_slow_head(void)
{
    const char *pats[] = {"example.com", NULL};
    struct hutch_egress *eg = make(pats, 0, 0, 100);
    char buf[1024];
    struct rec *r;
    int want = rec_count() + 1, fd = dial(eg);

    write_all(fd, "CONNECT exam", 12); /* and nothing more */
    read_all(fd, buf, sizeof(buf));
    r = rec_wait(want);
    ok(strstr(buf, " 408 ") && r && r->outcome == HUTCH_EGRESS_TIMEOUT,
       "a head that does not come: 408, timeout");
    close(fd);
    hutch_egress_close(eg);
}

static void test_wildcard_and_literal(void)
{
    char pat[2][64], req[256], buf[4096];
    const char *pats[] = {pat[0], pat[1], NULL};
    struct hutch_egress *eg;
    struct rec *r;

    /* Names that resolve to 127.0.0.1, reachable because an IP-literal rule
     * names that address at that port. */
    snprintf(pat[0], sizeof(pat[0]), "*.pypi.test:%u", echo_port);
    snprintf(pat[1], sizeof(pat[1]), "127.0.0.1:%u", echo_port);
    eg = make(pats, 0, 0, 0);
    snprintf(req, sizeof(req), "CONNECT a.pypi.test:%u HTTP/1.1\r\n\r\nping",
             echo_port);
    {
        int want = rec_count() + 1, fd = dial(eg);
        write_all(fd, req, strlen(req));
        shutdown(fd, SHUT_WR);
        read_all(fd, buf, sizeof(buf));
        close(fd);
        r = rec_wait(want);
    }
    ok(strstr(buf, " 200 ") && !strcmp(body_of(buf), "ping") && r &&
           r->outcome == HUTCH_EGRESS_OK,
       "wildcard, one label, to loopback named by an IP rule: through");
    snprintf(req, sizeof(req), "CONNECT a.b.pypi.test:%u HTTP/1.1\r\n\r\n", echo_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_NAME, "wildcard: two labels refused");
    snprintf(req, sizeof(req), "CONNECT pypi.test:%u HTTP/1.1\r\n\r\n", echo_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_NAME, "wildcard: the bare name refused");
    hutch_egress_close(eg);

    /* The IP rule names another port: the name's loopback stays refused. */
    snprintf(pat[1], sizeof(pat[1]), "127.0.0.1:%u", http_port);
    eg = make(pats, 0, 0, 0);
    snprintf(req, sizeof(req), "CONNECT a.pypi.test:%u HTTP/1.1\r\n\r\n", echo_port);
    r = ask(eg, req, buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_ADDRESS,
       "an IP rule at another port does not open the address");
    hutch_egress_close(eg);
}

static void test_caps(void)
{
    char pat[64], req[256], buf[8192];
    const char *pats[] = {pat, NULL};
    struct hutch_egress *eg;
    struct rec *r;
    size_t n;
    int want, fd;

    snprintf(pat, sizeof(pat), "127.0.0.1:%u", http_port);
    eg = make(pats, 4096, 0, 0);
    snprintf(req, sizeof(req), "GET http://127.0.0.1:%u/big HTTP/1.1\r\n\r\n",
             http_port);
    want = rec_count() + 1;
    fd = dial(eg);
    write_all(fd, req, strlen(req));
    n = read_all(fd, buf, sizeof(buf));
    close(fd);
    r = rec_wait(want);
    ok(r && r->outcome == HUTCH_EGRESS_CAP_BYTES && n <= 4096 &&
           r->up + r->down <= 4096,
       "max_bytes: the connection is cut, cap_bytes (%zu bytes reached the program)",
       n);
    r = ask(eg, req, buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_CAP_BYTES,
       "max_bytes is the execution's: the next connection is cut too");
    hutch_egress_close(eg);

    eg = make(pats, 0, 2, 0);
    r = ask(eg, "CONNECT a.example:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    r = ask(eg, "CONNECT b.example:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(r && r->outcome == HUTCH_EGRESS_REFUSED_NAME, "two connections made");
    r = ask(eg, "CONNECT c.example:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf));
    ok(strstr(buf, " 403 ") && strstr(body_of(buf), "egress.max_connections") && r &&
           r->outcome == HUTCH_EGRESS_CAP_CONNECTIONS,
       "the third past max_connections = 2: 403, cap_connections");
    hutch_egress_close(eg);
}

static void test_close_in_flight(void)
{
    char pat[64], req[128], buf[256];
    const char *pats[] = {pat, NULL};
    struct hutch_egress *eg;
    int fds[6], base = rec_count(), alive = 1, eof = 1;

    snprintf(pat, sizeof(pat), "127.0.0.1:%u", echo_port);
    eg = make(pats, 0, 0, 0);
    snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", echo_port);
    for (int i = 0; i < 4; i++) {
        fds[i] = dial(eg);
        write_all(fds[i], req, strlen(req));
        alive &= read_until(fds[i], buf, sizeof(buf), "\r\n\r\n");
        write_all(fds[i], "ping", 4);
        alive &= read_until(fds[i], buf, sizeof(buf), "ping");
    }
    ok(alive, "four tunnels open and echoing");
    fds[4] = dial(eg); /* says nothing: waits for its head */
    fds[5] = dial(eg);
    write_all(fds[5], "CONNECT 127.0.0.1:", 18); /* half a head */
    hutch_egress_close(eg);
    ok(rec_count() == base + 6,
       "close: every connection recorded before it returns (%d)", rec_count() - base);
    for (int i = 0; i < 6; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char sink[512];
        ssize_t r = 1;
        while (r > 0 && poll(&p, 1, 0) == 1)
            r = recv(fds[i], sink, sizeof(sink), MSG_DONTWAIT);
        /* A reset is an end too: hutch closed with bytes it had not read. */
        if (r != 0 && !(r < 0 && errno == ECONNRESET)) {
            printf("# fd %d: recv %zd (%s)\n", i, r, r < 0 ? strerror(errno) : "");
            eof = 0;
        }
        close(fds[i]);
    }
    ok(eof, "close: every sandbox end reads end of file (or a reset)");

    eg = make(pats, 0, 0, 0);
    hutch_egress_close(eg);
    hutch_egress_close(NULL);
    ok(1, "close with nothing in flight; close(NULL)");
}

int main(void)
{
    hutch_log_set_level(getenv("TEST_VERBOSE") ? HUTCH_LOG_DEBUG : HUTCH_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    alarm(300); /* a hang fails the test rather than the suite */
    setenv("HUTCH_TEST_RESOLVE",
           "evil.test=127.0.0.1,meta.test=169.254.169.254,a.pypi.test=127.0.0.1,"
           "a.b.pypi.test=127.0.0.1,pypi.test=127.0.0.1,mapped.test=::ffff:127.0.0.1",
           1);
    http_port = serve(AF_INET, http_conn);
    echo_port = serve(AF_INET, echo_conn);
    echo6_port = serve(AF_INET6, echo_conn);
    {
        int fd = listen_on(AF_INET, &closed_port);
        close(fd);
    }
    if (!http_port || !echo_port) {
        printf("1..0 # SKIP cannot listen on 127.0.0.1\n");
        return 77;
    }
    test_match();
    test_addr_class();
    test_head();
    test_secrets();
    test_connect_tunnel();
    test_plain_http();
    test_refusals();
    test_slow_head();
    test_wildcard_and_literal();
    test_caps();
    test_close_in_flight();
    return tap_done();
}
