/* egress.h — the egress proxy of one execution: the policy's `egress`
 * rules (hutch-policy(5)), matching a host:port against them, and an HTTP
 * forward proxy that serves connected streams handed to it (each one a
 * connection a program opened through HTTP_PROXY / HTTPS_PROXY).
 *
 * Two kinds of request, nothing else: `CONNECT host:port` (a tunnel, for
 * HTTPS) and plain HTTP in absolute form (`GET http://host[:port]/path`),
 * forwarded in origin form with `Connection: close`.  hutch resolves the
 * name itself and connects to the address it resolved.  Every refusal is
 * an HTTP answer whose body is one line a program can print.
 *
 * What a name may resolve to: an address that is loopback, unspecified,
 * private (RFC 1918, 100.64/10, fc00::/7), link-local (169.254/16, with the
 * cloud metadata address, fe80::/10), multicast, broadcast or reserved, or
 * an IPv6 address carrying one of those (IPv4-mapped, -compatible, NAT64,
 * 6to4), is refused (DNS rebinding) unless an IP-literal rule of
 * egress.allow names that very address at that port: the operator allowed
 * that address:port already, so reaching it by a name gives nothing more.
 * A request for an IP literal matches IP-literal rules only, compared as
 * addresses (an IPv4-mapped IPv6 address as its IPv4 address), and its
 * address is not judged: the rule named it on purpose.
 *
 * HUTCH_TEST_RESOLVE (for tests only; a row of knobs.def):
 * "name=addr,name=addr", read from hutch's environment when an engine is
 * made; a name listed there resolves to its addresses (a name may be
 * listed more than once) without getaddrinfo.  Acceptable because hutch's environment
 * is the operator's: a sandbox cannot set it (its environment is built by the executor,
 * and the proxy runs in hutch, not in the sandbox), and the addresses it gives are
 * judged like getaddrinfo's, so it cannot open what the rules refuse.
 *
 * Secrets (egress.secrets, hutch-policy(5)): a CONNECT to a host:port
 * with a secret is not tunnelled but intercepted.  After "200 Connection
 * established" hutch speaks TLS to the program with a certificate for the
 * requested name that the deployment's CA signs (egress_tls.c; the sandbox
 * trusts that CA through the bundle hutch_egress_ca_bundle gives), reads
 * one HTTP/1.1 request in origin form (hutch_egress_parse_inner, the same
 * rules as the proxy's own head), drops any header of the secret's name,
 * adds the secret's header, and sends it with "Connection: close" over TLS
 * to the address it resolved and judged, verifying the origin's
 * certificate against the requested name (the system's trust store and
 * HUTCH_EGRESS_TRUST_FILE); then it relays the response until the origin
 * closes, and closes.  One request per connection.  A secret goes over TLS
 * only: a plain-HTTP request to the same host is forwarded without it.
 * What an origin sends back is relayed as it is: an origin that reflects
 * request headers shows the secret to the program (hutch-policy(5)).
 *
 * Not here: the forwarder inside a sandbox and the wiring that hands
 * streams over, taint, the audit log and metrics (a caller's on_record
 * hook feeds them), the CA and TLS contexts (egress_tls.c). */
#ifndef HUTCH_EGRESS_H
#define HUTCH_EGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "caps.h"
#include "hutch-executor.h"

/* One pattern of egress.allow, "host[:port]".  host: a DNS name
 * (lower-cased, without a trailing dot), "*.name" (one label, any, before
 * name), an IPv4 literal or a bracketed IPv6 literal.  No port: ports 80
 * and 443 only (plain HTTP and HTTPS: a rule without a port is the common
 * case, a web API, and should not open a mail or database port of the same
 * host). */
struct hutch_egress_rule {
    char host[HUTCH_EGRESS_MAX_HOST + 1]; /* a wildcard's: after "*." */
    int wildcard;
    uint16_t port; /* 0: 80 and 443 */
    int is_ip_literal;
    int family;             /* AF_INET or AF_INET6 when is_ip_literal */
    unsigned char addr[16]; /* network order; IPv4 in the first 4 */
};

/* One entry of egress.secrets: a header hutch adds to every request it
 * carries to host[:port] over TLS.  host: a name or an IP literal as a
 * rule holds it (no wildcard: a secret goes to one host). */
struct hutch_egress_secret {
    char host[HUTCH_EGRESS_MAX_HOST + 1];
    int is_ip_literal;
    int family;
    unsigned char addr[16];
    uint16_t port;                                 /* 0: any port allowed */
    char header[HUTCH_EGRESS_MAX_HEADER_NAME + 1]; /* as written */
    char *value; /* NUL-terminated; zeroed (explicit_bzero) when freed */
    size_t value_len;
};

struct hutch_egress_rules {
    struct hutch_egress_rule *rule;
    size_t n;
    struct hutch_egress_secret *secret; /* nsecrets of them, or NULL */
    size_t nsecrets;
    uint64_t max_bytes;       /* both directions, the whole execution */
    uint32_t max_connections; /* over the execution's life */
};

/* Parse one pattern into *out.  0, or -EINVAL with msg saying what is
 * wrong (without the pattern's place: the caller adds it). */
int hutch_egress_rule_parse(const char *pattern, struct hutch_egress_rule *out,
                            char *msg, size_t len);
/* Rules with n zeroed rules and the default caps; NULL when out of memory. */
struct hutch_egress_rules *hutch_egress_rules_new(size_t n);
/* Frees r, its secrets' values zeroed first.  NULL is fine. */
void hutch_egress_rules_free(struct hutch_egress_rules *r);

/* Add one secret to r (r->secret grown by one): `key` "host[:port]" (a
 * name or an IP literal, no wildcard), `header` a header name (a token;
 * not one hutch sets or drops itself: Host, Connection, Content-Length,
 * Transfer-Encoding, the hop-by-hop ones, Proxy-*), and exactly one of
 * `value` (its "${NAME}"s expanded from hutch's environment: a variable
 * unset or empty is an error naming it) or `file` (an absolute path, read
 * now, its trailing newline dropped).  The value: 1 to
 * HUTCH_EGRESS_MAX_SECRET bytes without control characters.  A key no
 * rule of r admits (at its port, or at 443 without one) and a key given
 * twice are errors.  0, or -EINVAL/-ENOMEM with msg, which never holds
 * the value. */
int hutch_egress_secret_add(struct hutch_egress_rules *r, const char *key,
                            const char *header, const char *value, const char *file,
                            char *msg, size_t len);
/* The secret for a request to host:port (host as the head parser gives
 * it), or NULL. */
const struct hutch_egress_secret *
hutch_egress_secret_find(const struct hutch_egress_rules *r, const char *host,
                         unsigned port);
/* A rule as the policy would write it ("*.pypi.org:443"). */
const char *hutch_egress_rule_str(const struct hutch_egress_rule *r, char *buf,
                                  size_t len);

enum hutch_egress_outcome {
    HUTCH_EGRESS_OK,
    HUTCH_EGRESS_REFUSED_NAME,    /* no rule names the host: 403 */
    HUTCH_EGRESS_REFUSED_PORT,    /* a rule names the host, at another port: 403 */
    HUTCH_EGRESS_REFUSED_ADDRESS, /* the name resolves to a refused address: 403 */
    HUTCH_EGRESS_REFUSED_METHOD,  /* TRACE, TRACK, PRI: 405 */
    HUTCH_EGRESS_CAP_BYTES,       /* max_bytes crossed: cut */
    HUTCH_EGRESS_CAP_CONNECTIONS, /* max_connections, or too many at once: 403 */
    HUTCH_EGRESS_CONNECT_FAILED,  /* no address resolved or answered: 502 */
    HUTCH_EGRESS_BAD_REQUEST,     /* not one of the two forms, or too big: 400 */
    HUTCH_EGRESS_TIMEOUT,         /* head not in time: 408; connect: 504 */
    HUTCH_EGRESS_REFUSED_POLICY,  /* the decide hook said no (taint): 403 */
};
/* "ok", "refused_name", ... (the names above, lower-case). */
const char *hutch_egress_outcome_name(enum hutch_egress_outcome o);

/* Whether host:port is allowed by name: HUTCH_EGRESS_OK (*rule, when not
 * NULL, set to the first rule that matches), REFUSED_NAME or
 * REFUSED_PORT.  host: a name (any case, a trailing dot ignored) or an IP
 * literal (an IPv6 one with or without brackets).  A wildcard matches
 * exactly one label: "*.pypi.org" matches "a.pypi.org", not "pypi.org" nor
 * "a.b.pypi.org". */
enum hutch_egress_outcome hutch_egress_match(const struct hutch_egress_rules *rules,
                                             const char *host, unsigned port,
                                             const struct hutch_egress_rule **rule);

/* What kind of address family/addr (4 or 16 bytes, network order) is when
 * a name resolving to it is refused ("loopback", "private", "link-local",
 * ...), NULL for an ordinary public address. */
const char *hutch_egress_addr_class(int family, const void *addr);

/* --- the request head: a pure parser over bytes (fuzzed) --- */

enum hutch_egress_form {
    HUTCH_EGRESS_FORM_CONNECT,  /* CONNECT host:port */
    HUTCH_EGRESS_FORM_ABSOLUTE, /* METHOD http://host[:port]/path */
    HUTCH_EGRESS_FORM_ORIGIN,   /* METHOD /path: inside an intercepted tunnel */
};
struct hutch_egress_span {
    uint32_t off, len; /* into the bytes parsed */
};
struct hutch_egress_head {
    size_t head_len; /* the head's bytes, blank line included */
    enum hutch_egress_form form;
    char method[HUTCH_EGRESS_MAX_METHOD + 1];
    char host[HUTCH_EGRESS_MAX_HOST +
              1]; /* lower-cased; no brackets, no dot at the end */
    int host_is_ip;
    unsigned port;                    /* 1..65535 (absolute form: 80 unless given) */
    struct hutch_egress_span path;    /* absolute form: "/..." ("" for "/") */
    struct hutch_egress_span version; /* "HTTP/1.1" or "HTTP/1.0" */
    struct {
        struct hutch_egress_span name, value; /* value trimmed */
    } hdr[HUTCH_EGRESS_MAX_HEADERS];
    size_t nhdr;
    enum hutch_egress_outcome refusal; /* with -EINVAL: BAD_REQUEST or REFUSED_METHOD */
    char why[160];                     /* with -EINVAL: printable ASCII */
};
/* Parse the head at the start of data[0..len).  1: complete and well
 * formed (*h filled); 0: no blank line yet (more bytes may complete it:
 * the caller bounds them); -EINVAL: not a request hutch forwards
 * (h->refusal and h->why say why).  Lines end in CRLF or LF. */
int hutch_egress_parse_head(const char *data, size_t len, struct hutch_egress_head *h);
/* The head to send to the origin for an absolute-form request: the request
 * line in origin form, Host set from the URL (the client's Host is
 * dropped: the origin must not route by a host the policy did not judge),
 * Proxy-*, Connection, Keep-Alive, TE, Trailer and Upgrade dropped, and
 * "Connection: close".  Appended to out; 0 or its -E2BIG/-ENOMEM. */
int hutch_egress_rewrite(const struct hutch_egress_head *h, const char *data,
                         struct hutch_buf *out);
/* The same parser for a request inside an intercepted tunnel: origin form
 * only ("GET /path HTTP/1.1"; CONNECT and absolute URLs refused), h->host
 * left empty. */
int hutch_egress_parse_inner(const char *data, size_t len, struct hutch_egress_head *h);
/* The head to send to the origin for an origin-form request through a
 * tunnel to host:port (port 443 is left out of Host): the request line as
 * it came, Host set to host, what hutch_egress_rewrite drops dropped, every
 * header named `secret->header` (any case) dropped, then the secret's
 * header and "Connection: close".  Written into out[0..cap) (the caller
 * zeroes it after use: it holds the secret), *n its length; 0 or -E2BIG. */
int hutch_egress_rewrite_inner(const struct hutch_egress_head *h, const char *data,
                               const char *host, unsigned port,
                               const struct hutch_egress_secret *secret, char *out,
                               size_t cap, size_t *n);

/* --- the proxy of one execution --- */

struct hutch_egress_record {
    enum hutch_egress_outcome outcome;
    const char *method;  /* "CONNECT", "GET", ...; "" before the head parsed */
    const char *host;    /* as requested; "" before the head parsed */
    unsigned port;       /* 0 before the head parsed */
    const char *address; /* connected to (or refused), numeric; "" when none */
    uint64_t bytes_up;   /* to the origin, the rewritten head included */
    uint64_t bytes_down; /* to the program, hutch's own answers excluded */
    const char *reason;  /* a short line: why, or "" for ok */
    const char *secret;  /* intercepted: the name of the header hutch added
                            (never its value); else NULL */
};

struct hutch_egress_hooks {
    /* One call per connection when it ends (refused ones included), on the
     * connection's thread or on the caller of hutch_egress_accept: calls
     * may come from several threads at once.  The record's strings live
     * for the call.  May be NULL. */
    void (*on_record)(void *arg, const struct hutch_egress_record *rec);
    void *arg;
    /* Asked once per connection the rules allow, before hutch resolves or
     * connects, on the connection's thread (it may block there: a question
     * to the user): 0 goes ahead; negative refuses it (403,
     * refused_policy) with `why` as the answer's line.  May be NULL. */
    int (*decide)(void *arg, const char *host, unsigned port, char *why, size_t len);
    /* 0: HUTCH_EGRESS_HEAD_MS, HUTCH_EGRESS_CONNECT_MS.  For tests. */
    unsigned head_ms;
    unsigned connect_ms;
};

struct hutch_egress;

struct hutch_egress_stats {
    uint64_t connections; /* handed to hutch_egress_accept */
    uint64_t refused;     /* of them, refused or cut */
    uint64_t bytes;       /* relayed, both directions */
};

/* An engine for one execution, over a copy of `rules` (not NULL; its
 * secrets copied too, and zeroed at hutch_egress_close).  With secrets it
 * also loads (or makes, the first time) the deployment's CA
 * (egress_tls.h): a CA that cannot be had fails here.  0 or negative with
 * err. */
int hutch_egress_new(const struct hutch_egress_rules *rules,
                     const struct hutch_egress_hooks *hooks, struct hutch_egress **out,
                     struct hutch_err *err);
/* Where the program finds that bundle (job.c puts it in the job's files,
 * relative to /work; exec.c names it in SSL_CERT_FILE and the others):
 * outside /work/out, so it never comes back as a result file. */
#define HUTCH_EGRESS_BUNDLE_REL  ".hutch/ca-bundle.pem"
#define HUTCH_EGRESS_BUNDLE_PATH "/work/" HUTCH_EGRESS_BUNDLE_REL
/* When the engine intercepts (its rules have secrets): the PEM bundle the
 * program must trust (the system's CAs and the deployment's CA), *len its
 * bytes, valid while the engine lives; else NULL. */
const char *hutch_egress_ca_bundle(const struct hutch_egress *eg, size_t *len);
/* Take `fd` (a connected stream socket; closed by the engine whatever
 * happens) and serve it on a thread of its own.  0: served, or refused
 * with an answer (max_connections, too many at once) and a record;
 * -ESHUTDOWN after hutch_egress_close began; -EAGAIN/-ENOMEM when no
 * thread could be started (fd closed, a record made). */
int hutch_egress_accept(struct hutch_egress *eg, int fd, struct hutch_err *err);
void hutch_egress_stats(struct hutch_egress *eg, struct hutch_egress_stats *out);
/* Shut every connection down (both sides, both directions), join every
 * thread, free.  No thread of the engine runs after it returns.  A thread
 * inside getaddrinfo finishes its lookup first (the resolver's own
 * timeouts bound it).  NULL is fine. */
void hutch_egress_close(struct hutch_egress *eg);

#endif
