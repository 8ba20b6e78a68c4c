/* egress.c — the egress proxy of one execution (see egress.h for what it
 * allows and refuses): the rules' patterns, matching, the judge of
 * resolved addresses, the request head's parser and rewriter (pure
 * functions over bytes, fuzzed), the policy's secrets (checked, expanded,
 * zeroed when freed), and the engine that serves each stream handed to it:
 * tunnels, plain HTTP, and the tunnels it intercepts to add a secret.
 *
 * Not here: where the streams come from (the sandbox's forwarder and its
 * wiring), what the records become (audit, metrics: the caller's hook),
 * reading the policy (policy_table.c calls hutch_egress_rule_parse and
 * hutch_egress_secret_add), the CA, certificates and TLS contexts
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
#include <fcntl.h>
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
#include "egress_tls.h"
#include "knobs.h"
#include "log.h"
#include "util.h"

/* --- hosts, patterns, matching --- */

static int lower_c(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int name_char(int c)
{
    c = lower_c(c);
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_';
}

/* A host: what parse_host found. */
struct host {
    char name[HUTCH_EGRESS_MAX_HOST + 1]; /* lower-case; an IP in canonical text */
    int wildcard;
    int is_ip;
    int family;
    unsigned char addr[16];
};

/* An IPv4-mapped IPv6 address as its IPv4 address, others as they are. */
static void norm_addr(int *family, unsigned char addr[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (*family == AF_INET6 && !memcmp(addr, mapped, 12)) {
        memmove(addr, addr + 12, 4);
        memset(addr + 4, 0, 12);
        *family = AF_INET;
    }
}

static int same_addr(int fa, const unsigned char *a, int fb, const unsigned char *b)
{
    unsigned char x[16], y[16];
    memcpy(x, a, 16);
    memcpy(y, b, 16);
    norm_addr(&fa, x);
    norm_addr(&fb, y);
    return fa == fb && !memcmp(x, y, fa == AF_INET ? 4 : 16);
}

/* s[0..n): a DNS name ("*." first when wild_ok), an IPv4 literal, or an
 * IPv6 literal in brackets (bare too when bare_v6).  0, or -EINVAL with
 * msg. */
static int parse_host(const char *s, size_t n, int wild_ok, int bare_v6, struct host *h,
                      char *msg, size_t len)
{
    char tmp[HUTCH_EGRESS_MAX_HOST + 2];
    size_t label = 0;
    int all_digits = 1;

    memset(h, 0, sizeof(*h));
    if (n == 0) {
        snprintf(msg, len, "the host is empty");
        return -EINVAL;
    }
    if (s[0] == '[' || (bare_v6 && memchr(s, ':', n))) {
        const char *in = s;
        size_t inl = n;
        if (s[0] == '[') {
            if (n < 3 || s[n - 1] != ']') {
                snprintf(msg, len, "an IPv6 address in brackets lacks its \"]\"");
                return -EINVAL;
            }
            in = s + 1;
            inl = n - 2;
        }
        if (inl >= INET6_ADDRSTRLEN || memchr(in, '%', inl)) {
            snprintf(msg, len, "not an IPv6 address (no zone, at most %d characters)",
                     INET6_ADDRSTRLEN - 1);
            return -EINVAL;
        }
        memcpy(tmp, in, inl);
        tmp[inl] = '\0';
        if (inet_pton(AF_INET6, tmp, h->addr) != 1) {
            snprintf(msg, len, "not an IPv6 address");
            return -EINVAL;
        }
        h->is_ip = 1;
        h->family = AF_INET6;
        inet_ntop(AF_INET6, h->addr, h->name, sizeof(h->name));
        return 0;
    }
    if (memchr(s, ':', n)) {
        snprintf(msg, len, "an IPv6 address goes in brackets, like [::1]:8080");
        return -EINVAL;
    }
    if (n > HUTCH_EGRESS_MAX_HOST + 1) {
        snprintf(msg, len, "a host name is at most %d characters",
                 HUTCH_EGRESS_MAX_HOST);
        return -EINVAL;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (inet_pton(AF_INET, tmp, h->addr) == 1) {
        h->is_ip = 1;
        h->family = AF_INET;
        inet_ntop(AF_INET, h->addr, h->name, sizeof(h->name));
        return 0;
    }
    if (n > 1 && tmp[n - 1] == '.')
        tmp[--n] = '\0';
    if (wild_ok && n >= 2 && tmp[0] == '*' && tmp[1] == '.') {
        h->wildcard = 1;
        memmove(tmp, tmp + 2, n - 1);
        n -= 2;
    }
    if (n == 0 || n > HUTCH_EGRESS_MAX_HOST) {
        snprintf(msg, len, "a host name is 1 to %d characters", HUTCH_EGRESS_MAX_HOST);
        return -EINVAL;
    }
    for (size_t i = 0; i <= n; i++) {
        int c = (unsigned char)tmp[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63) {
                snprintf(msg, len,
                         "\"%s\" has an empty label or one over 63 characters", tmp);
                return -EINVAL;
            }
            if (c == '.') {
                label = 0;
                all_digits = 1;
                h->name[i] = '.';
            }
            continue;
        }
        if (c == '*') {
            snprintf(msg, len,
                     "* may only be the whole leftmost label, as in *.example.org");
            return -EINVAL;
        }
        if (!name_char(c)) {
            snprintf(msg, len,
                     "a host name holds letters, digits, \"-\", \"_\" and dots (found "
                     "%s%c)",
                     c < 0x21 || c > 0x7e ? "a control or non-ASCII byte" : "",
                     c < 0x21 || c > 0x7e ? ' ' : c);
            return -EINVAL;
        }
        if (!is_digit(c))
            all_digits = 0;
        label++;
        h->name[i] = (char)lower_c(c);
    }
    if (all_digits) {
        /* "10.1" or "2130706433": getaddrinfo would read a number. */
        snprintf(msg, len,
                 "\"%s\" is neither a host name (its last label is a number) "
                 "nor a dotted IPv4 address",
                 tmp);
        return -EINVAL;
    }
    h->name[n] = '\0';
    return 0;
}

/* "65535" → 65535; 0 for anything but 1..65535 in decimal. */
static unsigned parse_port(const char *s, size_t n)
{
    unsigned v = 0;
    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i]))
            return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* Split "host[:port]" (the host bracketed when IPv6): *hn the host's
 * length, *port 0 when none is written, or -EINVAL with msg. */
static int split_authority(const char *s, size_t n, size_t *hn, unsigned *port,
                           int *has_port, char *msg, size_t len)
{
    const char *colon = NULL;
    *port = 0;
    *has_port = 0;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb) {
            snprintf(msg, len, "an IPv6 address in brackets lacks its \"]\"");
            return -EINVAL;
        }
        if ((size_t)(rb + 1 - s) < n) {
            if (rb[1] != ':') {
                snprintf(msg, len, "after \"]\" comes \":PORT\" or nothing");
                return -EINVAL;
            }
            colon = rb + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s))) {
            snprintf(msg, len, "an IPv6 address goes in brackets, like [::1]:8080");
            return -EINVAL;
        }
    }
    *hn = colon ? (size_t)(colon - s) : n;
    if (colon) {
        size_t pl = n - *hn - 1;
        *has_port = 1;
        if (pl && !(*port = parse_port(colon + 1, pl))) {
            snprintf(msg, len, "the port is a number from 1 to 65535");
            return -EINVAL;
        }
    }
    return 0;
}

int hutch_egress_rule_parse(const char *pattern, struct hutch_egress_rule *out,
                            char *msg, size_t len)
{
    size_t n = strlen(pattern), hn;
    unsigned port;
    int has_port;
    struct host h;

    memset(out, 0, sizeof(*out));
    if (n == 0 || n > HUTCH_EGRESS_MAX_PATTERN) {
        snprintf(msg, len, "a pattern is 1 to %d bytes", HUTCH_EGRESS_MAX_PATTERN);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)pattern[i] <= 0x20 || (unsigned char)pattern[i] >= 0x7f) {
            snprintf(msg, len,
                     "a pattern is host[:port], without spaces or control "
                     "characters");
            return -EINVAL;
        }
    if (memchr(pattern, '/', n) || memchr(pattern, '@', n)) {
        snprintf(msg, len, "a pattern is host[:port], not a URL");
        return -EINVAL;
    }
    if (split_authority(pattern, n, &hn, &port, &has_port, msg, len) < 0)
        return -EINVAL;
    if (has_port && !port) {
        snprintf(msg, len, "the port is a number from 1 to 65535");
        return -EINVAL;
    }
    if (parse_host(pattern, hn, 1, 0, &h, msg, len) < 0)
        return -EINVAL;
    snprintf(out->host, sizeof(out->host), "%s", h.name);
    out->wildcard = h.wildcard;
    out->port = (uint16_t)port;
    out->is_ip_literal = h.is_ip;
    out->family = h.family;
    memcpy(out->addr, h.addr, sizeof(out->addr));
    return 0;
}

struct hutch_egress_rules *hutch_egress_rules_new(size_t n)
{
    struct hutch_egress_rules *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->rule = calloc(n ? n : 1, sizeof(*r->rule));
    if (!r->rule) {
        free(r);
        return NULL;
    }
    r->max_bytes = HUTCH_EGRESS_DEFAULT_MAX_BYTES;
    r->max_connections = HUTCH_EGRESS_DEFAULT_MAX_CONNECTIONS;
    return r;
}

static void secrets_free(struct hutch_egress_secret *sec, size_t n)
{
    for (size_t i = 0; sec && i < n; i++)
        if (sec[i].value) {
            explicit_bzero(sec[i].value, sec[i].value_len);
            free(sec[i].value);
        }
    free(sec);
}

void hutch_egress_rules_free(struct hutch_egress_rules *r)
{
    if (!r)
        return;
    secrets_free(r->secret, r->nsecrets);
    free(r->rule);
    free(r);
}

const char *hutch_egress_rule_str(const struct hutch_egress_rule *r, char *buf,
                                  size_t len)
{
    char port[8] = "";
    int v6 = r->is_ip_literal && r->family == AF_INET6;
    if (r->port)
        snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
    snprintf(buf, len, "%s%s%s%s%s", r->wildcard ? "*." : "", v6 ? "[" : "", r->host,
             v6 ? "]" : "", port);
    return buf;
}

static int tchar(int c);
static int reserved_header(const char *name, size_t n);

/* Append s[0..n) to out[0..cap) at *o: 0, or -E2BIG (the caller zeroes
 * what it wrote). */
static int put(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    if (n > cap - *o)
        return -E2BIG;
    memcpy(out + *o, s, n);
    *o += n;
    return 0;
}

/* `value` with each ${NAME} replaced by hutch's environment, into out
 * (HUTCH_EGRESS_MAX_SECRET + 1 bytes): its length, or -EINVAL with msg. */
static int expand(const char *value, char *out, char *msg, size_t len)
{
    size_t o = 0;
    for (const char *p = value; *p;) {
        const char *end, *v;
        char name[128];
        size_t nl;
        if (p[0] != '$' || p[1] != '{') {
            if (put(out, HUTCH_EGRESS_MAX_SECRET, &o, p, 1) < 0)
                goto big;
            p++;
            continue;
        }
        end = strchr(p + 2, '}');
        nl = end ? (size_t)(end - p - 2) : 0;
        if (!end || nl == 0 || nl >= sizeof(name) || is_digit((unsigned char)p[2])) {
            snprintf(msg, len,
                     "\"${\" starts a variable: ${NAME}, NAME of letters, "
                     "digits and \"_\"");
            return -EINVAL;
        }
        memcpy(name, p + 2, nl);
        name[nl] = '\0';
        for (size_t i = 0; i < nl; i++)
            if (!name_char((unsigned char)name[i]) || name[i] == '-') {
                snprintf(msg, len,
                         "${%s}: a variable's name is letters, digits and \"_\"", name);
                return -EINVAL;
            }
        v = getenv(name);
        if (!v || !*v) {
            snprintf(msg, len, "${%s} is %s in hutch's environment", name,
                     v ? "empty" : "not set");
            return -EINVAL;
        }
        if (put(out, HUTCH_EGRESS_MAX_SECRET, &o, v, strlen(v)) < 0)
            goto big;
        p = end + 1;
    }
    return (int)o;
big:
    snprintf(msg, len, "the value is over %d bytes", HUTCH_EGRESS_MAX_SECRET);
    return -EINVAL;
}

/* The file's bytes into out (HUTCH_EGRESS_MAX_SECRET + 3 bytes), its
 * trailing newline dropped: the length, or -EINVAL with msg. */
static int read_secret_file(const char *path, char *out, char *msg, size_t len)
{
    size_t o = 0;
    int fd;
    if (path[0] != '/') {
        snprintf(msg, len, "file: \"%s\" is not an absolute path", path);
        return -EINVAL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(msg, len, "file: cannot read %s: %s", path, strerror(errno));
        return -EINVAL;
    }
    for (;;) {
        ssize_t r = read(fd, out + o, HUTCH_EGRESS_MAX_SECRET + 2 - o);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(msg, len, "file: cannot read %s: %s", path, strerror(errno));
            close(fd);
            return -EINVAL;
        }
        if (r == 0)
            break;
        o += (size_t)r;
        if (o == HUTCH_EGRESS_MAX_SECRET + 2)
            break;
    }
    close(fd);
    if (o && out[o - 1] == '\n')
        o--;
    if (o && out[o - 1] == '\r')
        o--;
    if (o > HUTCH_EGRESS_MAX_SECRET) {
        snprintf(msg, len, "file: %s holds over %d bytes", path,
                 HUTCH_EGRESS_MAX_SECRET);
        return -EINVAL;
    }
    return (int)o;
}

int hutch_egress_secret_add(struct hutch_egress_rules *r, const char *key,
                            const char *header, const char *value, const char *file,
                            char *msg, size_t len)
{
    struct hutch_egress_rule k;
    struct hutch_egress_secret *sec, *grown;
    char *v;
    size_t hl = strlen(header);
    int vn;

    if (hutch_egress_rule_parse(key, &k, msg, len) < 0)
        return -EINVAL;
    if (k.wildcard) {
        snprintf(msg, len,
                 "a secret goes to one host: a wildcard would send it to every name "
                 "under %s",
                 k.host);
        return -EINVAL;
    }
    for (size_t i = 0; i < r->nsecrets; i++) {
        const struct hutch_egress_secret *o = &r->secret[i];
        if (o->is_ip_literal == k.is_ip_literal && o->port == k.port &&
            (k.is_ip_literal ? same_addr(o->family, o->addr, k.family, k.addr)
                             : !strcmp(o->host, k.host))) {
            snprintf(msg, len, "a second secret for the same host and port");
            return -EINVAL;
        }
    }
    {
        char host[HUTCH_EGRESS_MAX_HOST + 3];
        snprintf(host, sizeof(host), "%s%s%s",
                 k.is_ip_literal && k.family == AF_INET6 ? "[" : "", k.host,
                 k.is_ip_literal && k.family == AF_INET6 ? "]" : "");
        if (hutch_egress_match(r, host, k.port ? k.port : 443, NULL) !=
            HUTCH_EGRESS_OK) {
            snprintf(msg, len,
                     "no rule of egress.allow admits %s at port %u: a secret is for a "
                     "host the program may reach",
                     host, k.port ? k.port : 443u);
            return -EINVAL;
        }
    }
    if (hl == 0 || hl > HUTCH_EGRESS_MAX_HEADER_NAME) {
        snprintf(msg, len, "header: a name of 1 to %d characters",
                 HUTCH_EGRESS_MAX_HEADER_NAME);
        return -EINVAL;
    }
    for (size_t i = 0; i < hl; i++)
        if (!tchar((unsigned char)header[i])) {
            snprintf(msg, len,
                     "header: \"%s\" is not a header name (a token: letters, "
                     "digits and !#$%%&'*+-.^_`|~)",
                     header);
            return -EINVAL;
        }
    if (reserved_header(header, hl)) {
        snprintf(msg, len,
                 "header: hutch sets or drops %s itself; a secret cannot be it",
                 header);
        return -EINVAL;
    }
    if (!value == !file) {
        snprintf(msg, len, "give value or file, one of them");
        return -EINVAL;
    }
    if (!(v = malloc(HUTCH_EGRESS_MAX_SECRET + 3))) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    vn = value ? expand(value, v, msg, len) : read_secret_file(file, v, msg, len);
    if (vn == 0) {
        snprintf(msg, len, "the value is empty");
        vn = -EINVAL;
    }
    for (int i = 0; vn > 0 && i < vn; i++)
        if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f) {
            /* Not the byte, nor where: the value is not to be shown. */
            snprintf(msg, len, "the value holds a control character (a newline?)");
            vn = -EINVAL;
        }
    if (vn < 0 || !(grown = realloc(r->secret, (r->nsecrets + 1) * sizeof(*sec)))) {
        explicit_bzero(v, HUTCH_EGRESS_MAX_SECRET + 3);
        free(v);
        if (vn >= 0)
            snprintf(msg, len, "out of memory");
        return vn < 0 ? vn : -ENOMEM;
    }
    v[vn] = '\0';
    r->secret = grown;
    sec = &r->secret[r->nsecrets++];
    memset(sec, 0, sizeof(*sec));
    snprintf(sec->host, sizeof(sec->host), "%s", k.host);
    sec->is_ip_literal = k.is_ip_literal;
    sec->family = k.family;
    memcpy(sec->addr, k.addr, sizeof(sec->addr));
    sec->port = k.port;
    memcpy(sec->header, header, hl + 1);
    sec->value = v;
    sec->value_len = (size_t)vn;
    return 0;
}

const struct hutch_egress_secret *
hutch_egress_secret_find(const struct hutch_egress_rules *r, const char *host,
                         unsigned port)
{
    struct host h;
    char msg[160];
    if (!r || !r->nsecrets ||
        parse_host(host, strlen(host), 0, 1, &h, msg, sizeof(msg)) < 0)
        return NULL;
    for (size_t i = 0; i < r->nsecrets; i++) {
        const struct hutch_egress_secret *sec = &r->secret[i];
        if (sec->port && sec->port != port)
            continue;
        if (sec->is_ip_literal
                ? h.is_ip && same_addr(h.family, h.addr, sec->family, sec->addr)
                : !h.is_ip && !strcmp(h.name, sec->host))
            return sec;
    }
    return NULL;
}

static int port_ok(const struct hutch_egress_rule *r, unsigned port)
{
    return r->port ? r->port == port : (port == 80 || port == 443);
}

static int rule_names(const struct hutch_egress_rule *r, const struct host *h)
{
    size_t hl, rl;
    if (h->is_ip || r->is_ip_literal)
        return h->is_ip && r->is_ip_literal &&
               same_addr(h->family, h->addr, r->family, r->addr);
    if (!r->wildcard)
        return !strcmp(r->host, h->name);
    /* One label, any, then "." and the rule's name. */
    hl = strlen(h->name);
    rl = strlen(r->host);
    return hl > rl + 1 && h->name[hl - rl - 1] == '.' &&
           !strcmp(h->name + hl - rl, r->host) && !memchr(h->name, '.', hl - rl - 1);
}

static enum hutch_egress_outcome match_host(const struct hutch_egress_rules *rules,
                                            const struct host *h, unsigned port,
                                            const struct hutch_egress_rule **rule)
{
    const struct hutch_egress_rule *named = NULL;
    for (size_t i = 0; rules && i < rules->n; i++) {
        const struct hutch_egress_rule *r = &rules->rule[i];
        if (!rule_names(r, h))
            continue;
        if (port_ok(r, port)) {
            if (rule)
                *rule = r;
            return HUTCH_EGRESS_OK;
        }
        if (!named)
            named = r;
    }
    if (rule)
        *rule = named;
    return named ? HUTCH_EGRESS_REFUSED_PORT : HUTCH_EGRESS_REFUSED_NAME;
}

enum hutch_egress_outcome hutch_egress_match(const struct hutch_egress_rules *rules,
                                             const char *host, unsigned port,
                                             const struct hutch_egress_rule **rule)
{
    struct host h;
    char msg[160];
    if (rule)
        *rule = NULL;
    if (!host || parse_host(host, strlen(host), 0, 1, &h, msg, sizeof(msg)) < 0 ||
        port < 1 || port > 65535)
        return HUTCH_EGRESS_REFUSED_NAME;
    return match_host(rules, &h, port, rule);
}

/* --- addresses a name may not resolve to --- */

static const char *v4_class(const unsigned char *a)
{
    if (a[0] == 0)
        return "unspecified";
    if (a[0] == 127)
        return "loopback";
    if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
        (a[0] == 192 && a[1] == 168))
        return "private";
    if (a[0] == 100 && (a[1] & 0xc0) == 64)
        return "private (shared address space)";
    if (a[0] == 169 && a[1] == 254)
        return a[2] == 169 && a[3] == 254 ? "link-local, the metadata address"
                                          : "link-local";
    if (a[0] >= 224 && a[0] <= 239)
        return "multicast";
    if (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255)
        return "broadcast";
    if (a[0] >= 240)
        return "reserved";
    /* 192.0.0/24 (protocol assignments), 198.18/15 (benchmarks), the three
     * documentation networks. */
    if ((a[0] == 192 && a[1] == 0 && (a[2] == 0 || a[2] == 2)) ||
        (a[0] == 198 && (a[1] & 0xfe) == 18) ||
        (a[0] == 198 && a[1] == 51 && a[2] == 100) ||
        (a[0] == 203 && a[1] == 0 && a[2] == 113))
        return "reserved";
    return NULL;
}

const char *hutch_egress_addr_class(int family, const void *addr)
{
    const unsigned char *a = addr;
    static const unsigned char zero[16];
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (family == AF_INET)
        return v4_class(a);
    if (family != AF_INET6)
        return "not an IP address";
    if (!memcmp(a, zero, 16))
        return "unspecified";
    if (!memcmp(a, zero, 15) && a[15] == 1)
        return "loopback";
    /* IPv4-mapped (::ffff:0:0/96), -compatible (::/96), NAT64 (64:ff9b::/96)
     * and 6to4 (2002::/16) carry an IPv4 address: judged as that one. */
    if ((!memcmp(a, zero, 10) && a[10] == 0xff && a[11] == 0xff) ||
        !memcmp(a, zero, 12) || !memcmp(a, nat64, 12))
        return v4_class(a + 12);
    if (a[0] == 0x20 && a[1] == 0x02)
        return v4_class(a + 2);
    if ((a[0] & 0xfe) == 0xfc)
        return "private (unique local)";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return "link-local";
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
        return "private (site-local)";
    if (a[0] == 0xff)
        return "multicast";
    if ((a[0] == 0x01 && !memcmp(a + 1, zero, 7)) ||
        (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8))
        return "reserved";
    return NULL;
}

/* --- the request head --- */

static int tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

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
    struct host ho;

    if (memchr(s, '@', n))
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST,
                        "credentials in the URL are not forwarded");
    if (split_authority(s, n, &hn, &port, &has_port, msg, sizeof(msg)) < 0)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "bad host:port: %s", msg);
    if (need_port && !port)
        return head_bad(h, HUTCH_EGRESS_BAD_REQUEST, "CONNECT needs host:port");
    if (parse_host(s, hn, 0, 0, &ho, msg, sizeof(msg)) < 0)
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
        if (!tchar((unsigned char)d[i]))
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
        if (!tchar((unsigned char)*c))
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
                if (!tchar((unsigned char)*c) || c - p >= HUTCH_EGRESS_MAX_METHOD)
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

/* 1 when the n bytes of name are one of `list` (NULL-ended), any case. */
static int named(const char *name, size_t n, const char *const *list)
{
    for (const char *const *d = list; *d; d++)
        if (strlen(*d) == n && !strncasecmp(name, *d, n))
            return 1;
    return 0;
}

static int hop_by_hop(const char *name, size_t n)
{
    static const char *const drop[] = {"host",    "connection", "keep-alive", "te",
                                       "trailer", "upgrade",    NULL};
    return (n >= 6 && !strncasecmp(name, "proxy-", 6)) || named(name, n, drop);
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
        if (hop_by_hop(name, h->hdr[i].name.len))
            continue;
        r = hutch_buf_appendf(out, "%.*s: %.*s\r\n", (int)h->hdr[i].name.len, name,
                              (int)h->hdr[i].value.len, data + h->hdr[i].value.off);
    }
    if (r == 0)
        r = hutch_buf_appends(out, "Connection: close\r\n\r\n");
    return r;
}

static int reserved_header(const char *name, size_t n)
{
    static const char *const framing[] = {"content-length", "transfer-encoding",
                                          "expect", NULL};
    return hop_by_hop(name, n) || named(name, n, framing);
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
    if (put(out, cap, &o, line, (size_t)k) < 0 ||
        put(out, cap, &o, data + h->path.off, h->path.len) < 0 ||
        put(out, cap, &o, " ", 1) < 0 ||
        put(out, cap, &o, data + h->version.off, h->version.len) < 0)
        return -E2BIG;
    if (port != 443)
        k = snprintf(line, sizeof(line), "\r\nHost: %s%s%s:%u\r\n", v6 ? "[" : "", host,
                     v6 ? "]" : "", port);
    else
        k = snprintf(line, sizeof(line), "\r\nHost: %s%s%s\r\n", v6 ? "[" : "", host,
                     v6 ? "]" : "");
    if (k < 0 || (size_t)k >= sizeof(line) || put(out, cap, &o, line, (size_t)k) < 0)
        return -E2BIG;
    for (size_t i = 0; i < h->nhdr; i++) {
        const char *name = data + h->hdr[i].name.off;
        size_t nl = h->hdr[i].name.len;
        if (hop_by_hop(name, nl) ||
            (nl == sl && !strncasecmp(name, secret->header, sl)))
            continue;
        if (put(out, cap, &o, name, nl) < 0 || put(out, cap, &o, ": ", 2) < 0 ||
            put(out, cap, &o, data + h->hdr[i].value.off, h->hdr[i].value.len) < 0 ||
            put(out, cap, &o, "\r\n", 2) < 0)
            return -E2BIG;
    }
    if (put(out, cap, &o, secret->header, sl) < 0 || put(out, cap, &o, ": ", 2) < 0 ||
        put(out, cap, &o, secret->value, secret->value_len) < 0 ||
        put(out, cap, &o, "\r\nConnection: close\r\n\r\n", 23) < 0)
        return -E2BIG;
    *n = o;
    return 0;
}

const char *hutch_egress_outcome_name(enum hutch_egress_outcome o)
{
    static const char *const names[] = {"ok",
                                        "refused_name",
                                        "refused_port",
                                        "refused_address",
                                        "refused_method",
                                        "cap_bytes",
                                        "cap_connections",
                                        "connect_failed",
                                        "bad_request",
                                        "timeout",
                                        "refused_policy"};
    return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "unknown";
}

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
        if (r->is_ip_literal && port_ok(r, port) &&
            same_addr(family, a, r->family, r->addr))
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
        struct host ho;
        char msg[64];
        /* Named by an IP-literal rule (matching said so): not judged. */
        parse_host(h->host, strlen(h->host), 0, 1, &ho, msg, sizeof(msg));
        norm_addr(&ho.family, ho.addr);
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
    struct host ho;
    struct addrs a = {0};
    struct hutch_buf pre = HUTCH_BUF_INIT(2 * HUTCH_EGRESS_MAX_HEAD);
    char msg[64], rs[HUTCH_EGRESS_MAX_PATTERN + 8];
    enum hutch_egress_outcome o;
    const char *rest;
    size_t nrest;

    if (!read_head(s))
        goto refuse;
    parse_host(h->host, strlen(h->host), 0, 1, &ho, msg, sizeof(msg));
    o = match_host(&eg->rules, &ho, h->port, &rule);
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
            secrets_free(d, i);
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
    secrets_free(eg->rules.secret, eg->rules.nsecrets);
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
    secrets_free(eg->rules.secret, eg->rules.nsecrets);
    free(eg->rules.rule);
    free(eg->test_resolve);
    free(eg);
}
