/* egress_int.h — what the egress*.c files of the proxy share, and nobody
 * else: a parsed host, the host and authority parsers, address
 * comparison, matching a parsed host, the secrets' freeing, a bounded
 * append, and the character and header-name classes.  Internal to
 * egress_rules.c, egress_head.c and egress.c; not an API (that is
 * egress.h), and not installed.
 *
 *   egress_rules.c  hosts, patterns and matching; the policy's secrets
 *                   (checked, expanded, zeroed when freed); the judge of
 *                   resolved addresses; the outcomes' names
 *   egress_head.c   the request head's parser and rewriter: pure
 *                   functions over bytes (fuzzed by fuzz_egress_head)
 *   egress.c        the engine: sessions, resolving, connecting, relaying,
 *                   the intercepted tunnel, accept, stats and close
 *
 * The arrows run one way: egress.c calls the other two, egress_head.c
 * calls egress_rules.c, and egress_rules.c calls neither.  The header-name
 * classes below are here, not in egress_head.c, because the secrets'
 * judge (egress_rules.c) needs them too.  Only egress.c has threads and a
 * lock (its top comment); the other two work on what their caller hands
 * them. */
#ifndef HUTCH_EGRESS_INT_H
#define HUTCH_EGRESS_INT_H

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "caps.h"
#include "egress.h"

/* A host: what egress_parse_host found. */
struct egress_host {
    char name[HUTCH_EGRESS_MAX_HOST + 1]; /* lower-case; an IP in canonical text */
    int wildcard;
    int is_ip;
    int family;
    unsigned char addr[16];
};

/* --- egress_rules.c --- */

/* Addresses: an IPv4-mapped IPv6 one made IPv4; two compared so. */
void egress_norm_addr(int *family, unsigned char addr[16]);
int egress_same_addr(int fa, const unsigned char *a, int fb, const unsigned char *b);
/* A host name or IP literal into *h: 0, or -EINVAL with msg. */
int egress_parse_host(const char *s, size_t n, int wild_ok, int bare_v6,
                      struct egress_host *h, char *msg, size_t len);
/* "host[:port]" split: 0, or -EINVAL with msg. */
int egress_split_authority(const char *s, size_t n, size_t *hn, unsigned *port,
                           int *has_port, char *msg, size_t len);
/* Rule r admits port: its own, or 80 and 443 when it has none. */
int egress_port_ok(const struct hutch_egress_rule *r, unsigned port);
/* hutch_egress_match for a host already parsed. */
enum hutch_egress_outcome egress_match_host(const struct hutch_egress_rules *rules,
                                            const struct egress_host *h, unsigned port,
                                            const struct hutch_egress_rule **rule);
/* Free n secrets, each value zeroed first.  NULL is fine. */
void egress_secrets_free(struct hutch_egress_secret *sec, size_t n);
/* A bounded append: 0, or -E2BIG. */
int egress_put(char *out, size_t cap, size_t *o, const char *s, size_t n);

/* --- characters and header names --- */

static inline int egress_is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* A character of an HTTP token (a method, a header name). */
static inline int egress_tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || egress_is_digit(c) ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* 1 when the n bytes of name are one of `list` (NULL-ended), any case. */
static inline int egress_named(const char *name, size_t n, const char *const *list)
{
    for (const char *const *d = list; *d; d++)
        if (strlen(*d) == n && !strncasecmp(name, *d, n))
            return 1;
    return 0;
}

/* A header the rewriters drop (Host is set anew). */
static inline int egress_hop_by_hop(const char *name, size_t n)
{
    static const char *const drop[] = {"host",    "connection", "keep-alive", "te",
                                       "trailer", "upgrade",    NULL};
    return (n >= 6 && !strncasecmp(name, "proxy-", 6)) || egress_named(name, n, drop);
}

/* A header hutch sets or drops itself: no secret may be it. */
static inline int egress_reserved_header(const char *name, size_t n)
{
    static const char *const framing[] = {"content-length", "transfer-encoding",
                                          "expect", NULL};
    return egress_hop_by_hop(name, n) || egress_named(name, n, framing);
}

#endif
