/* fuzz_egress_head.c — the egress proxy's request head (egress_head.c:
 * hutch_egress_parse_head, hutch_egress_rewrite) and its patterns
 * (egress_rules.c: hutch_egress_rule_parse, hutch_egress_match).
 *
 * Input: any bytes, parsed as what a program sent the proxy.  A parsed head
 * stays inside the input, names a host and a port in range, and rewrites
 * to a head that ends with "Connection: close" and carries no Proxy-* line
 * and one Host line; a refusal always says why, in printable ASCII.  The
 * input's first line is also tried as a pattern: one that parses prints
 * back to a pattern that parses to the same rule.  The input is also parsed
 * as a request inside an intercepted tunnel (hutch_egress_parse_inner): one
 * that parses rewrites with the secret's header exactly once, the program's
 * headers of that name gone, "Connection: close" last. */
#include <strings.h>

#include "buf.h"
#include "egress.h"
#include "fuzz.h"

static struct hutch_egress_rules *rules;
static struct hutch_egress_secret secret = {.host = "api.github.com",
                                            .header = "Authorization",
                                            .value = "Bearer S3CRET",
                                            .value_len = 13};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *const pats[] = {"api.github.com", "*.pypi.org:443",
                                       "127.0.0.1:8080", "[::1]:9000", NULL};
    char msg[200];
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    rules = hutch_egress_rules_new(4);
    for (size_t i = 0; pats[i]; i++) {
        struct hutch_egress_rule *r = &rules->rule[rules->n];
        if (hutch_egress_rule_parse(pats[i], r, msg, sizeof(msg)) == 0)
            rules->n++;
    }
    fuzz_assert(rules->n == 4);
    return 0;
}

static int in_head(const struct hutch_egress_head *h, struct hutch_egress_span s)
{
    return (size_t)s.off + s.len <= h->head_len;
}

static void check_head(const char *d, size_t size, const struct hutch_egress_head *h)
{
    struct hutch_buf out = HUTCH_BUF_INIT(2 * size + 1024);
    const char *o, *line;
    int hosts = 0;

    fuzz_assert(h->head_len >= 4 && h->head_len <= size);
    fuzz_assert(h->host[0] && h->port >= 1 && h->port <= 65535);
    fuzz_assert(h->method[0]);
    fuzz_assert(in_head(h, h->version) && h->version.len == 8);
    fuzz_assert(h->nhdr <= HUTCH_EGRESS_MAX_HEADERS);
    for (size_t i = 0; i < h->nhdr; i++)
        fuzz_assert(in_head(h, h->hdr[i].name) && in_head(h, h->hdr[i].value) &&
                    h->hdr[i].name.len > 0);
    if (h->form == HUTCH_EGRESS_FORM_ABSOLUTE)
        fuzz_assert(in_head(h, h->path));
    (void)hutch_egress_match(rules, h->host, h->port, NULL);
    if (h->form != HUTCH_EGRESS_FORM_ABSOLUTE)
        return;
    fuzz_assert(hutch_egress_rewrite(h, d, &out) == 0);
    o = hutch_buf_str(&out);
    fuzz_assert(out.len >= 21 &&
                !strcmp(o + out.len - 21, "Connection: close\r\n\r\n"));
    fuzz_assert(!strncmp(o, h->method, strlen(h->method)));
    /* Every line after the request line. */
    for (line = strstr(o, "\r\n") + 2; *line; line = strstr(line, "\r\n") + 2) {
        fuzz_assert(strncasecmp(line, "proxy-", 6));
        fuzz_assert(strncasecmp(line, "keep-alive:", 11));
        if (!strncasecmp(line, "host:", 5))
            hosts++;
        if (!strcmp(line, "\r\n"))
            break;
    }
    fuzz_assert(hosts == 1);
    hutch_buf_free(&out);
}

static void check_inner(const char *d, size_t size)
{
    static char out[HUTCH_EGRESS_MAX_INNER_OUT];
    struct hutch_egress_head h;
    size_t n = 0, found = 0;
    int r = hutch_egress_parse_inner(d, size, &h);

    fuzz_assert(r == 1 || r == 0 || r == -EINVAL);
    if (r != 1)
        return;
    fuzz_assert(h.form == HUTCH_EGRESS_FORM_ORIGIN && in_head(&h, h.path));
    fuzz_assert(strcmp(h.method, "CONNECT") && strcmp(h.method, "TRACE"));
    fuzz_assert(hutch_egress_rewrite_inner(&h, d, "api.github.com", 443, &secret, out,
                                           sizeof(out), &n) == 0);
    fuzz_assert(n >= 23 && !memcmp(out + n - 23, "\r\nConnection: close\r\n\r\n", 23));
    for (const char *line = memchr(out, '\n', n) + 1; line < out + n;
         line = memchr(line, '\n', (size_t)(out + n - line)) + 1) {
        if (!strncasecmp(line, "authorization:", 14)) {
            fuzz_assert(!strncmp(line, "Authorization: Bearer S3CRET\r\n", 30));
            found++;
        }
        fuzz_assert(strncasecmp(line, "proxy-", 6));
    }
    fuzz_assert(found == 1);
}

static void check_pattern(const uint8_t *data, size_t size)
{
    char pat[HUTCH_EGRESS_MAX_PATTERN + 2], back[HUTCH_EGRESS_MAX_PATTERN + 16],
        msg[200];
    struct hutch_egress_rule r, r2;
    size_t n = 0;

    while (n < size && n < sizeof(pat) - 1 && data[n] != '\n' && data[n] != '\r')
        n++;
    memcpy(pat, data, n);
    pat[n] = '\0';
    if (hutch_egress_rule_parse(pat, &r, msg, sizeof(msg)) < 0) {
        fuzz_assert(msg[0]);
        return;
    }
    hutch_egress_rule_str(&r, back, sizeof(back));
    fuzz_assert(hutch_egress_rule_parse(back, &r2, msg, sizeof(msg)) == 0);
    fuzz_assert(!strcmp(r.host, r2.host) && r.port == r2.port &&
                r.wildcard == r2.wildcard && r.is_ip_literal == r2.is_ip_literal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_egress_head h, h2;
    const char *d = (const char *)data;
    int r = hutch_egress_parse_head(d, size, &h);

    fuzz_assert(r == 1 || r == 0 || r == -EINVAL);
    fuzz_assert(hutch_egress_parse_head(d, size, &h2) == r);
    if (r == -EINVAL) {
        fuzz_assert(h.why[0]);
        for (const char *c = h.why; *c; c++)
            fuzz_assert(*c >= 0x20 && *c <= 0x7e);
        fuzz_assert(h.refusal == HUTCH_EGRESS_BAD_REQUEST ||
                    h.refusal == HUTCH_EGRESS_REFUSED_METHOD);
    } else if (r == 1) {
        check_head(d, size, &h);
        /* What follows the head does not change it. */
        fuzz_assert(hutch_egress_parse_head(d, h.head_len, &h2) == 1 &&
                    h2.head_len == h.head_len && h2.port == h.port &&
                    !strcmp(h2.host, h.host));
    }
    check_inner(d, size);
    check_pattern(data, size);
    return 0;
}
