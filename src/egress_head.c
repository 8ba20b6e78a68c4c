/* egress_head.c — the egress proxy's request head: the parser of what a
 * program sends the proxy (CONNECT host:port, or an absolute http:// URL)
 * and of the one request inside an intercepted tunnel (origin form), and
 * the rewriters of both into the head sent to the origin (hop-by-hop
 * headers dropped, Host set, a secret's header added).  Pure functions
 * over bytes, fuzzed (tests/fuzz/fuzz_egress_head.c).
 *
 * Not here: parsing a host or an authority (egress_rules.c's parsers,
 * which this calls) and whether the host is allowed (egress_rules.c);
 * which header names the rewriters drop (egress_int.h: the secrets' judge
 * refuses them too); reading the bytes off a socket, sending the result,
 * and the tunnel's TLS (egress.c, egress_tls.c).
 *
 * No state and no lock: every call works on the bytes it is handed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "caps.h"
#include "egress.h"
#include "egress_int.h"

__attribute__((format(printf, 3, 4))) static int
head_bad(struct hutch_egress_head *h, enum hutch_egress_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, sizeof(h->why), fmt, ap);
    va_end(ap);
    for (char *c = h->why; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    h->refusal = o;
    return -EINVAL;
}

static struct hutch_egress_span span(const char *base, const char *p, size_t n)
{
    struct hutch_egress_span s = {(uint32_t)(p - base), (uint32_t)n};
    return s;
}

/* The authority of a request: host and port into h. */
static int head_authority(struct hutch_egress_head *h, const char *s, size_t n,
                          int need_port)
{
    char msg[160];
    size_t hn;
    unsigned port;
    int has_port;
    struct egress_host ho;

    if (memchr(s, '@', n))
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                        "credentials in the URL are not forwarded");
    if (egress_split_authority(s, n, &hn, &port, &has_port, msg, sizeof(msg)) < 0)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "bad host:port: %s", msg);
    if (need_port && !port)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "CONNECT needs host:port");
    if (egress_parse_host(s, hn, 0, 0, &ho, msg, sizeof(msg)) < 0)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "bad host: %s", msg);
    snprintf(h->host, sizeof(h->host), "%s", ho.name);
    h->host_is_ip = ho.is_ip;
    h->port = port ? port : 80;
    return 0;
}

/* The request line d[0..n) (without its end of line); inner: inside an
 * intercepted tunnel, origin form only. */
static int head_request_line(struct hutch_egress_head *h, const char *base,
                             const char *d, size_t n, int inner)
{
    const char *sp1 = memchr(d, ' ', n), *sp2, *t, *e;
    size_t ml, tl, vl;

    if (!sp1)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "not an HTTP request line");
    ml = (size_t)(sp1 - d);
    if (ml == 0 || ml > HUTCH_EGRESS_MAX_METHOD)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "not an HTTP method");
    for (size_t i = 0; i < ml; i++)
        if (!egress_tchar((unsigned char)d[i]))
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "not an HTTP request");
    memcpy(h->method, d, ml);
    h->method[ml] = '\0';
    t = sp1 + 1;
    sp2 = memchr(t, ' ', n - ml - 1);
    if (!sp2)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "not an HTTP request line");
    tl = (size_t)(sp2 - t);
    vl = n - ml - 1 - tl - 1;
    if (!((vl == 8 &&
           (!memcmp(sp2 + 1, "HTTP/1.1", 8) || !memcmp(sp2 + 1, "HTTP/1.0", 8)))))
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                        "only HTTP/1.1 and HTTP/1.0 requests are forwarded");
    h->version = span(base, sp2 + 1, 8);
    if (tl == 0)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "the request has no target");
    for (size_t i = 0; i < tl; i++)
        if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e)
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                            "the target holds a control character or a non-ASCII byte");
    /* TRACE and TRACK send the request back: headers hutch adds would be
     * shown to the program.  PRI is HTTP/2's preface. */
    if (!strcmp(h->method, "TRACE") || !strcmp(h->method, "TRACK") ||
        !strcmp(h->method, "PRI"))
        return head_bad(h, HUTCH_EGRESS_REFUSED_METHOD,
                        "the method %s is not forwarded", h->method);
    if (inner) {
        const char *hash;
        if (!strcmp(h->method, "CONNECT") || t[0] != '/')
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                            "inside a tunnel hutch reads requests in origin form "
                            "(GET /path HTTP/1.1)");
        h->form = HUTCH_EGRESS_FORM_ORIGIN;
        hash = memchr(t, '#', tl);
        h->path = span(base, t, (size_t)((hash ? hash : t + tl) - t));
        return 0;
    }
    if (!strcmp(h->method, "CONNECT")) {
        h->form = HUTCH_EGRESS_FORM_CONNECT;
        return head_authority(h, t, tl, 1);
    }
    h->form = HUTCH_EGRESS_FORM_ABSOLUTE;
    if (tl >= 8 && !strncasecmp(t, "https://", 8))
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                        "an https:// URL goes through CONNECT (set HTTPS_PROXY)");
    if (tl < 7 || strncasecmp(t, "http://", 7))
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                        "not a proxy request: hutch forwards CONNECT host:port and "
                        "absolute http:// URLs");
    t += 7;
    tl -= 7;
    for (e = t; e < t + tl && *e != '/' && *e != '?' && *e != '#'; e++)
        ;
    if (head_authority(h, t, (size_t)(e - t), 0) < 0)
        return -EINVAL;
    {
        const char *hash = memchr(e, '#', (size_t)(t + tl - e));
        h->path = span(base, e, (size_t)((hash ? hash : t + tl) - e));
    }
    return 0;
}

/* One header line d[0..n) into h->hdr. */
static int head_header(struct hutch_egress_head *h, const char *base, const char *d,
                       size_t n)
{
    const char *colon = memchr(d, ':', n), *v, *ve;
    if (d[0] == ' ' || d[0] == '\t')
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "a folded header line");
    if (!colon || colon == d)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "a header line without a name");
    for (const char *c = d; c < colon; c++)
        if (!egress_tchar((unsigned char)*c))
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "a bad header name");
    if (h->nhdr == HUTCH_EGRESS_MAX_HEADERS)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "more than %d header lines",
                        HUTCH_EGRESS_MAX_HEADERS);
    v = colon + 1;
    ve = d + n;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    for (const char *c = v; c < ve; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                            "a header value holds a control character");
    h->hdr[h->nhdr].name = span(base, d, (size_t)(colon - d));
    h->hdr[h->nhdr].value = span(base, v, (size_t)(ve - v));
    h->nhdr++;
    return 0;
}

static int parse_head(const char *data, size_t len, struct hutch_egress_head *h,
                      int inner)
{
    const char *p = data, *end = data + len;
    int line = 0;

    memset(h, 0, sizeof(*h));
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;
        if (!nl) {
            /* An unfinished first line already not a method: say so now
             * rather than wait for the rest (a client speaking TLS to the
             * proxy, say). */
            for (const char *c = p; line == 0 && c < end && *c != ' '; c++)
                if (!egress_tchar((unsigned char)*c) ||
                    c - p >= HUTCH_EGRESS_MAX_METHOD)
                    return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "not an HTTP request");
            return 0;
        }
        n = (size_t)(nl - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (memchr(p, '\0', n) || memchr(p, '\r', n))
            return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                            "a NUL or a lone CR in the head");
        if (line == 0) {
            if (head_request_line(h, data, p, n, inner) < 0)
                return -EINVAL;
        } else if (n == 0) {
            h->head_len = (size_t)(nl + 1 - data);
            return 1;
        } else if (head_header(h, data, p, n) < 0) {
            return -EINVAL;
        }
        line++;
        p = nl + 1;
    }
    return 0;
}

int hutch_egress_parse_head(const char *data, size_t len, struct hutch_egress_head *h)
{
    return parse_head(data, len, h, 0);
}

int hutch_egress_parse_inner(const char *data, size_t len, struct hutch_egress_head *h)
{
    return parse_head(data, len, h, 1);
}

int hutch_egress_rewrite(const struct hutch_egress_head *h, const char *data,
                         struct hutch_buf *out)
{
    const char *path = data + h->path.off;
    int v6 = h->host_is_ip && strchr(h->host, ':');
    char port[8] = "";
    int r;

    if (h->port != 80)
        snprintf(port, sizeof(port), ":%u", h->port);
    r = hutch_buf_appendf(out, "%s %s%.*s %.*s\r\nHost: %s%s%s%s\r\n", h->method,
                          h->path.len && path[0] == '/' ? "" : "/", (int)h->path.len,
                          path, (int)h->version.len, data + h->version.off,
                          v6 ? "[" : "", h->host, v6 ? "]" : "", port);
    for (size_t i = 0; r == 0 && i < h->nhdr; i++) {
        const char *name = data + h->hdr[i].name.off;
        if (egress_hop_by_hop(name, h->hdr[i].name.len))
            continue;
        r = hutch_buf_appendf(out, "%.*s: %.*s\r\n", (int)h->hdr[i].name.len, name,
                              (int)h->hdr[i].value.len, data + h->hdr[i].value.off);
    }
    if (r == 0)
        r = hutch_buf_appends(out, "Connection: close\r\n\r\n");
    return r;
}

int hutch_egress_rewrite_inner(const struct hutch_egress_head *h, const char *data,
                               const char *host, unsigned port,
                               const struct hutch_egress_secret *secret, char *out,
                               size_t cap, size_t *n)
{
    size_t o = 0, sl = strlen(secret->header);
    char line[HUTCH_EGRESS_MAX_HOST + 64];
    int v6 = strchr(host, ':') != NULL, k;

    *n = 0;
    k = snprintf(line, sizeof(line), "%s ", h->method);
    if (egress_put(out, cap, &o, line, (size_t)k) < 0 ||
        egress_put(out, cap, &o, data + h->path.off, h->path.len) < 0 ||
        egress_put(out, cap, &o, " ", 1) < 0 ||
        egress_put(out, cap, &o, data + h->version.off, h->version.len) < 0)
        return -E2BIG;
    if (port != 443)
        k = snprintf(line, sizeof(line), "\r\nHost: %s%s%s:%u\r\n", v6 ? "[" : "", host,
                     v6 ? "]" : "", port);
    else
        k = snprintf(line, sizeof(line), "\r\nHost: %s%s%s\r\n", v6 ? "[" : "", host,
                     v6 ? "]" : "");
    if (k < 0 || (size_t)k >= sizeof(line) ||
        egress_put(out, cap, &o, line, (size_t)k) < 0)
        return -E2BIG;
    for (size_t i = 0; i < h->nhdr; i++) {
        const char *name = data + h->hdr[i].name.off;
        size_t nl = h->hdr[i].name.len;
        if (egress_hop_by_hop(name, nl) ||
            (nl == sl && !strncasecmp(name, secret->header, sl)))
            continue;
        if (egress_put(out, cap, &o, name, nl) < 0 ||
            egress_put(out, cap, &o, ": ", 2) < 0 ||
            egress_put(out, cap, &o, data + h->hdr[i].value.off, h->hdr[i].value.len) <
                0 ||
            egress_put(out, cap, &o, "\r\n", 2) < 0)
            return -E2BIG;
    }
    if (egress_put(out, cap, &o, secret->header, sl) < 0 ||
        egress_put(out, cap, &o, ": ", 2) < 0 ||
        egress_put(out, cap, &o, secret->value, secret->value_len) < 0 ||
        egress_put(out, cap, &o, "\r\nConnection: close\r\n\r\n", 23) < 0)
        return -E2BIG;
    *n = o;
    return 0;
}
