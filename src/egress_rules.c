/* egress_rules.c — what the policy's `egress` says and how a host is judged
 * by it (egress.h): the host and pattern parsers, the rules' life and their
 * text, matching a host:port against the rules, the policy's secrets
 * (checked, their ${NAME}s expanded or their file read, found for a host,
 * zeroed when freed), the judge of resolved addresses, and the outcomes'
 * names.
 *
 * The bottom of the egress*.c files (egress_int.h): egress_head.c and the
 * engine (egress.c) call it, and it calls neither.  Not here: reading the
 * policy (policy_table.c calls hutch_egress_rule_parse and
 * hutch_egress_secret_add), the request head (egress_head.c), resolving,
 * connecting and adding a secret to a request (egress.c).
 *
 * No state and no lock: every call works on what its caller hands it (a
 * policy's rules are filled on the thread that loads the policy, before
 * anyone else sees them; an engine reads its own copy). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caps.h"
#include "egress.h"
#include "egress_int.h"

/* --- hosts, patterns, matching --- */

static int lower_c(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int name_char(int c)
{
    c = lower_c(c);
    return (c >= 'a' && c <= 'z') || egress_is_digit(c) || c == '-' || c == '_';
}

/* An IPv4-mapped IPv6 address as its IPv4 address, others as they are. */
void egress_norm_addr(int *family, unsigned char addr[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (*family == AF_INET6 && !memcmp(addr, mapped, 12)) {
        memmove(addr, addr + 12, 4);
        memset(addr + 4, 0, 12);
        *family = AF_INET;
    }
}

int egress_same_addr(int fa, const unsigned char *a, int fb, const unsigned char *b)
{
    unsigned char x[16], y[16];
    memcpy(x, a, 16);
    memcpy(y, b, 16);
    egress_norm_addr(&fa, x);
    egress_norm_addr(&fb, y);
    return fa == fb && !memcmp(x, y, fa == AF_INET ? 4 : 16);
}

/* s[0..n): a DNS name ("*." first when wild_ok), an IPv4 literal, or an
 * IPv6 literal in brackets (bare too when bare_v6).  0, or -EINVAL with
 * msg. */
int egress_parse_host(const char *s, size_t n, int wild_ok, int bare_v6,
                      struct egress_host *h, char *msg, size_t len)
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
        if (!egress_is_digit(c))
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
        if (!egress_is_digit((unsigned char)s[i]))
            return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

/* Split "host[:port]" (the host bracketed when IPv6): *hn the host's
 * length, *port 0 when none is written, or -EINVAL with msg. */
int egress_split_authority(const char *s, size_t n, size_t *hn, unsigned *port,
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
    struct egress_host h;

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
    if (egress_split_authority(pattern, n, &hn, &port, &has_port, msg, len) < 0)
        return -EINVAL;
    if (has_port && !port) {
        snprintf(msg, len, "the port is a number from 1 to 65535");
        return -EINVAL;
    }
    if (egress_parse_host(pattern, hn, 1, 0, &h, msg, len) < 0)
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

void egress_secrets_free(struct hutch_egress_secret *sec, size_t n)
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
    egress_secrets_free(r->secret, r->nsecrets);
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

int egress_port_ok(const struct hutch_egress_rule *r, unsigned port)
{
    return r->port ? r->port == port : (port == 80 || port == 443);
}

static int rule_names(const struct hutch_egress_rule *r, const struct egress_host *h)
{
    size_t hl, rl;
    if (h->is_ip || r->is_ip_literal)
        return h->is_ip && r->is_ip_literal &&
               egress_same_addr(h->family, h->addr, r->family, r->addr);
    if (!r->wildcard)
        return !strcmp(r->host, h->name);
    /* One label, any, then "." and the rule's name. */
    hl = strlen(h->name);
    rl = strlen(r->host);
    return hl > rl + 1 && h->name[hl - rl - 1] == '.' &&
           !strcmp(h->name + hl - rl, r->host) && !memchr(h->name, '.', hl - rl - 1);
}

enum hutch_egress_outcome egress_match_host(const struct hutch_egress_rules *rules,
                                            const struct egress_host *h, unsigned port,
                                            const struct hutch_egress_rule **rule)
{
    const struct hutch_egress_rule *named = NULL;
    for (size_t i = 0; rules && i < rules->n; i++) {
        const struct hutch_egress_rule *r = &rules->rule[i];
        if (!rule_names(r, h))
            continue;
        if (egress_port_ok(r, port)) {
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
    struct egress_host h;
    char msg[160];
    if (rule)
        *rule = NULL;
    if (!host ||
        egress_parse_host(host, strlen(host), 0, 1, &h, msg, sizeof(msg)) < 0 ||
        port < 1 || port > 65535)
        return HUTCH_EGRESS_REFUSED_NAME;
    return egress_match_host(rules, &h, port, rule);
}

/* --- the policy's secrets --- */

/* Append s[0..n) to out[0..cap) at *o: 0, or -E2BIG (the caller zeroes
 * what it wrote). */
int egress_put(char *out, size_t cap, size_t *o, const char *s, size_t n)
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
            if (egress_put(out, HUTCH_EGRESS_MAX_SECRET, &o, p, 1) < 0)
                goto big;
            p++;
            continue;
        }
        end = strchr(p + 2, '}');
        nl = end ? (size_t)(end - p - 2) : 0;
        if (!end || nl == 0 || nl >= sizeof(name) ||
            egress_is_digit((unsigned char)p[2])) {
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
        if (egress_put(out, HUTCH_EGRESS_MAX_SECRET, &o, v, strlen(v)) < 0)
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
            (k.is_ip_literal ? egress_same_addr(o->family, o->addr, k.family, k.addr)
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
        if (!egress_tchar((unsigned char)header[i])) {
            snprintf(msg, len,
                     "header: \"%s\" is not a header name (a token: letters, "
                     "digits and !#$%%&'*+-.^_`|~)",
                     header);
            return -EINVAL;
        }
    if (egress_reserved_header(header, hl)) {
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
    struct egress_host h;
    char msg[160];
    if (!r || !r->nsecrets ||
        egress_parse_host(host, strlen(host), 0, 1, &h, msg, sizeof(msg)) < 0)
        return NULL;
    for (size_t i = 0; i < r->nsecrets; i++) {
        const struct hutch_egress_secret *sec = &r->secret[i];
        if (sec->port && sec->port != port)
            continue;
        if (sec->is_ip_literal
                ? h.is_ip && egress_same_addr(h.family, h.addr, sec->family, sec->addr)
                : !h.is_ip && !strcmp(h.name, sec->host))
            return sec;
    }
    return NULL;
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
