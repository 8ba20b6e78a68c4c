/* http_auth.c — who may ask `hutch serve --http`: on loopback binds, the
 * Host and Origin checks against DNS rebinding; the bearer token (the
 * server's, or a policy principal's) and the principal it names; the
 * challenge of a 401; secrets compared in constant time.  A request with a
 * valid token makes its connection authenticated for the connection guard
 * (http_guard.h).
 *
 * OAuth: hutch takes a static bearer token and has no authorization
 * server.  /.well-known/ paths answer 404 without a token (http.c), so
 * that a client probing for OAuth metadata (RFC 9728, RFC 8414) learns
 * there is none, instead of a 401 it would take as "start an OAuth flow".
 * A 401 says invalid_token (RFC 6750) when a bearer token came and was
 * wrong.
 *
 * No state and no lock of its own: called on the connection's thread.
 *
 * Not here: where the token comes from (the serve command); the answers to
 * what is refused (http.c, http_ops.c); the guard itself (http_guard.c). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_guard.h"
#include "http_int.h"

/* Tokens, and session ids (what a client without a token proves itself
 * with): compare in constant time. */
int http_secret_equal(const char *want, size_t wn, const char *got, size_t gn)
{
    unsigned char d = wn != gn;

    for (size_t i = 0; i < wn; i++)
        d |= (unsigned char)want[i] ^ (unsigned char)(i < gn ? got[i] : 0);
    return d == 0;
}

/* localhost, 127.0.0.1 or [::1], with an optional :port. */
static int host_is_local(const char *h)
{
    const char *end;
    size_t n;

    if (*h == '[') {
        end = strchr(h, ']');
        if (!end)
            return 0;
        end++;
    } else {
        end = h + strcspn(h, ":");
    }
    n = (size_t)(end - h);
    if (*end) {
        size_t digits = strspn(end + 1, "0123456789");
        if (*end != ':' || digits == 0 || digits > 5 || end[1 + digits])
            return 0;
    }
    return (n == 9 && strncasecmp(h, "localhost", 9) == 0) ||
           (n == 9 && memcmp(h, "127.0.0.1", 9) == 0) ||
           (n == 5 && memcmp(h, "[::1]", 5) == 0);
}

static int origin_is_local(const char *o)
{
    if (strncasecmp(o, "http://", 7) == 0)
        return host_is_local(o + 7);
    if (strncasecmp(o, "https://", 8) == 0)
        return host_is_local(o + 8);
    return 0; /* includes "null" */
}

/* A page on evil.example whose name was rebound to 127.0.0.1 reaches us
 * with Host: evil.example, and with its own Origin when it is a browser.
 * Only loopback binds need this: elsewhere the token does the job, and a
 * cross-origin browser cannot send it (we answer no CORS preflight). */
const char *http_rebinding_check(struct MHD_Connection *conn)
{
    const char *host = http_header(conn, MHD_HTTP_HEADER_HOST);
    const char *origin = http_header(conn, MHD_HTTP_HEADER_ORIGIN);

    if (!host || !host_is_local(host))
        return "Forbidden: Host must be localhost, 127.0.0.1 or [::1]";
    if (origin && !origin_is_local(origin))
        return "Forbidden: Origin must be http(s)://localhost, 127.0.0.1 or [::1]";
    return NULL;
}

/* The guard's record of the connection (NULL when it has none). */
struct hutch_http_conn *http_guard_conn(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci ? ci->socket_context : NULL;
}

/* Who is asking: the policy's principal whose token this is, or "http" for
 * the server-wide token (or when no token is configured at all).  0 when
 * the request is not authorized; *given then says whether it came with a
 * bearer token (a wrong one) or none.  An authorized request makes its
 * connection authenticated for the guard. */
int http_authorized(const struct http_server *srv, struct MHD_Connection *conn,
                    char *who, size_t len, int *given)
{
    const char *h = http_header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
    char tok[512];
    size_t n;
    int ok = 0;

    snprintf(who, len, "http");
    *given = 0;
    if (!srv->token && !srv->principal) {
        ok = 1;
        goto out;
    }
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    h += strspn(h, " \t");
    n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    *given = n > 0;
    if (srv->token && http_secret_equal(srv->token, srv->token_len, h, n)) {
        ok = 1;
    } else if (srv->principal && n < sizeof(tok)) {
        memcpy(tok, h, n);
        tok[n] = '\0';
        ok = srv->principal(srv->principal_arg, tok, who, len) == 1;
    }
out:
    if (ok) {
        struct hutch_http_conn *c = http_guard_conn(conn);
        if (c)
            hutch_http_guard_trust(srv->guard, c);
    }
    return ok;
}

/* The challenge of a 401 (RFC 6750 §3): a bare one when no token came, so
 * that a client knows to send one; invalid_token when one came and is not
 * valid. */
const char *const *http_www_authenticate(int given)
{
    static const char *const bare[] = {"WWW-Authenticate", "Bearer realm=\"hutch\"",
                                       NULL};
    static const char *const invalid[] = {
        "WWW-Authenticate",
        "Bearer realm=\"hutch\", error=\"invalid_token\", "
        "error_description=\"the bearer token is not valid\"",
        NULL};

    return given ? invalid : bare;
}

const char *http_unauthorized_msg(int given)
{
    return given ? "Unauthorized: the bearer token is not valid"
                 : "Unauthorized: send Authorization: Bearer <token>";
}
