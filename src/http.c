/* http.c — MCP's streamable HTTP transport, over libmicrohttpd, and the
 * operator's endpoints beside it.
 *
 * /mcp:
 *   POST    one JSON-RPC message (or batch) from the client.  A request is
 *           answered with text/event-stream when the client's Accept names it
 *           (everything the core sends for that request: progress, then the
 *           response), otherwise with application/json holding the final
 *           response alone.  Clients that send no Accept, or one without
 *           text/event-stream, are served JSON rather than refused: the spec
 *           asks clients for both, but refusing helps nobody.  Notifications
 *           and client responses get 202 with no body.
 *           Each message is parsed and its era decided once, here, before
 *           any session is looked at (mcp_era.h): the body's _meta, with
 *           MCP-Protocol-Version, Mcp-Method and Mcp-Name cross-checked.
 *           2025 messages go to their Mcp-Session-Id's session (initialize
 *           makes one).  A 2026-07-28 request has no session: it gets one of
 *           its own, outside the table and its caps, for as long as it runs,
 *           and closing its stream cancels it; what the revision calls a
 *           protocol error is answered with its HTTP status (400, 404 for an
 *           unknown method) before any of that.
 *   DELETE  ends the session named by Mcp-Session-Id.
 *   GET     405: hutch never speaks outside a request, so it offers no
 *           standalone stream (the spec allows 405).  Messages the core sends
 *           tied to no request (stream == NULL) are therefore dropped.
 * Around that: a bearer token, Host/Origin checks on loopback binds (DNS
 * rebinding; both http_auth.c), body caps, the session table's caps (in
 * all and per principal: a principal at its share gives up its own oldest
 * idle session, a full table is taken from whoever holds the most; caps.h,
 * http_session.c) and idle session expiry, and the connection guard
 * (http_guard.h: a deadline for each request head, shares of the
 * connection limit for connections that have not authenticated).  The caps can be set
 * from the environment (HUTCH_HTTP_*, rows of knobs.def, read by
 * hutch_http_check).
 *
 * Beside it: /healthz, /readyz, /metrics (http_ops.c); how a reply is
 * queued (http_reply.c).  Before any of
 * them, Host/Origin and the bearer token (http_auth.c, which says why
 * /.well-known/ answers 404).
 *
 * Accepting: the listening socket is hutch's.  libmicrohttpd, at its
 * connection limit, accepts a new connection and closes it unread (a
 * client that sent its request sees it reset), and it counts a connection
 * until that connection's thread has ended, after the guard closed it.  So
 * the serving thread accepts, and hands a connection to it
 * (MHD_add_connection) only while it has room; the rest wait in the
 * kernel's listen backlog, in their order, while the guard makes room.
 *
 * Threading: libmicrohttpd runs one thread per connection, so a request may
 * block until its answer is ready; every wait wakes at least every 100 ms to
 * notice shutdown and a client that went away.  (MHD's thread pool with
 * internal polling would need every waiting request suspended and resumed;
 * the guard gives the same protection against slow clients with the
 * threads kept: a connection that sends nothing useful is closed within
 * the head deadline, so it holds a thread a few seconds at most.)  The
 * thread that calls hutch_http_serve accepts, and runs the sweeps: idle
 * sessions, and the guard's deadlines every 10 ms at most.  The core sends from any
 * thread onto the request's stream (http_stream.c): a queue with its own
 * lock, reference counted so that the HTTP side (client gone, server
 * stopping) and the core (final response, session freed) can each finish
 * first.  The locks and their rules: http_int.h.
 *
 * Not here: JSON-RPC and MCP semantics (mcp_server.c); the command line and
 * where the token comes from (the serve command); the rest of this
 * transport, in the http_*.c files http_int.h lists. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"
#include "http.h"
#include "http_guard.h"
#include "http_int.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "log.h"
#include "mcp_era.h"
#include "mcp_server.h"
#include "metrics.h"
#include "mhd_lib.h"
#include "util.h"

#define HTTP_PATH "/mcp"
/* The version the spec tells servers to assume when the header is absent;
 * clients that send it explicitly are treated the same. */
#define HTTP_DEFAULT_VERSION "2025-03-26"

/* ---------------------------------------------------------------------- */
/* Replies */

/* Errors on /mcp are JSON-RPC shaped (id null) so that MCP clients can
 * show them; `msg` is always ours, never an echo of the request. */
static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status,
                                   int code, const char *msg, const char *const *hdrs)
{
    char body[512];
    int n = snprintf(
        body, sizeof(body),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
        code, msg);

    if (n < 0 || (size_t)n >= sizeof(body))
        n = 0;
    hutch_debug("http %u: %s", status, msg);
    return http_reply(conn, status, "application/json", body, (size_t)n,
                      MHD_RESPMEM_MUST_COPY, hdrs);
}

static enum MHD_Result reply_empty(struct MHD_Connection *conn, unsigned status)
{
    return http_reply(conn, status, NULL, NULL, 0, MHD_RESPMEM_PERSISTENT, NULL);
}

/* ---------------------------------------------------------------------- */
/* Reading a request */

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        ++*(int *)cls;
    return MHD_YES;
}

static int is_json_type(const char *ct)
{
    size_t n = strcspn(ct, ";");

    while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n == 16 && strncasecmp(ct, "application/json", 16) == 0;
}

static int accepts_sse(struct MHD_Connection *conn)
{
    const char *a = http_header(conn, MHD_HTTP_HEADER_ACCEPT);

    return a && strcasestr(a, "text/event-stream");
}

static int reserve(struct http_server *srv, struct http_req *rq, uint64_t total)
{
    uint64_t more, now;

    if (total <= rq->reserved)
        return 0;
    more = total - rq->reserved;
    now = __atomic_add_fetch(&srv->buffered, more, __ATOMIC_RELAXED);
    if (now > HUTCH_HTTP_MAX_BUFFERED) {
        __atomic_sub_fetch(&srv->buffered, more, __ATOMIC_RELAXED);
        return -ENOBUFS;
    }
    rq->reserved = total;
    return 0;
}

static void req_free(struct http_server *srv, struct http_req *rq)
{
    if (!rq)
        return;
    hutch_buf_free(&rq->body);
    __atomic_sub_fetch(&srv->buffered, rq->reserved, __ATOMIC_RELAXED);
    if (rq->hs)
        http_session_unref(rq->hs);
    free(rq);
}

/* ---------------------------------------------------------------------- */
/* Handlers */

/* Answer a request whose stream is done, with Mcp-Session-Id when the
 * request created a session. */
static enum MHD_Result reply_done(struct MHD_Connection *conn, struct http_stream *st,
                                  const char *session_id)
{
    const char *hdrs[5] = {NULL};
    size_t len = 0, h = 0;
    char *body = http_stream_take_all(st, &len);

    if (!body) {
        if (http_stopping(st->srv))
            return reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                               HUTCH_RPC_SERVER_ERROR,
                               "Service Unavailable: server shutting down", NULL);
        return reply_error(conn, MHD_HTTP_NOT_FOUND, HUTCH_RPC_SESSION_NOT_FOUND,
                           "Session terminated before the request was answered", NULL);
    }
    if (session_id) {
        hdrs[h++] = "Mcp-Session-Id";
        hdrs[h++] = session_id;
    }
    if (st->sse) {
        hdrs[h++] = MHD_HTTP_HEADER_CACHE_CONTROL;
        hdrs[h++] = "no-cache";
    }
    return http_reply(conn, MHD_HTTP_OK,
                      st->sse ? "text/event-stream" : "application/json", body, len,
                      MHD_RESPMEM_MUST_FREE, hdrs);
}

/* POST of a message that creates a session (initialize, no Mcp-Session-Id).
 * The answer is awaited whatever the Accept header says: whether to hand
 * out the session id depends on it. */
static enum MHD_Result post_initialize(struct http_session *hs, struct http_stream *st,
                                       int request)
{
    struct MHD_Connection *conn = st->conn;
    enum MHD_Result ret;
    int rc = request ? http_stream_wait_done(st) : 0;
    /* No version agreed means initialize failed: forget the session rather
     * than hand out an id nobody can use. */
    int keep = rc == 0 && hutch_mcp_session_protocol(hs->s) != NULL;

    http_session_settle(hs, keep);
    if (keep)
        hutch_info("session %.8s started", hs->id);
    if (rc == -ECONNRESET)
        ret = MHD_NO;
    else if (rc == -ECANCELED)
        ret = reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, HUTCH_RPC_SERVER_ERROR,
                          "Service Unavailable: server shutting down", NULL);
    else if (!request)
        ret = reply_empty(conn, MHD_HTTP_ACCEPTED);
    else
        ret = reply_done(conn, st, keep ? hs->id : NULL);
    http_session_unref(hs);
    return ret;
}

/* A message refused before any session sees it, with the status the
 * revision gives its error (400 for most, 404 for an unknown method). */
static enum MHD_Result reply_refusal(struct MHD_Connection *conn,
                                     struct hutch_mcp_msg *m)
{
    char *text = hutch_mcp_msg_refusal(m);

    if (!text)
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           HUTCH_RPC_INTERNAL_ERROR, "Out of memory", NULL);
    hutch_debug("http %u: %s", m->v.http_status, m->why);
    return http_reply(conn, m->v.http_status ? m->v.http_status : MHD_HTTP_BAD_REQUEST,
                      "application/json", text, strlen(text), MHD_RESPMEM_MUST_FREE,
                      NULL);
}

/* A 2026-07-28 message: no session to find or make.  A request gets a
 * session of its own, outside the table, that lives as long as the request
 * (the way back to the client, its principal, its in-flight execution); a
 * notification has nothing to act on (cancellation is closing the stream)
 * and gets 202. */
static enum MHD_Result post_modern(struct http_server *srv, struct MHD_Connection *conn,
                                   struct http_req *rq, struct hutch_mcp_msg *m)
{
    struct http_session *hs;
    struct http_stream *st;
    enum MHD_Result ret;
    int rc;

    if (!m->answer)
        return reply_empty(conn, MHD_HTTP_ACCEPTED);
    hs = http_session_transient(srv, rq->principal);
    if (!hs)
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           HUTCH_RPC_INTERNAL_ERROR,
                           "Internal error: cannot serve the request", NULL);
    st = http_stream_new(srv, conn, accepts_sse(conn));
    if (!st) {
        http_session_unref(hs);
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           HUTCH_RPC_INTERNAL_ERROR, "Out of memory", NULL);
    }
    http_pending_add(hs, st);
    hutch_mcp_session_deliver(hs->s, m, st);
    if (st->sse && !http_stream_is_done(st)) {
        st->owner = hs; /* sse_free (http_stream.c) drops it */
        st->owner_unref = http_session_unref;
        ret = http_reply_sse_stream(conn, st);
        if (ret == MHD_NO) {
            /* Unless the response was made and sse_free dropped it. */
            hs = hutch_steal(&st->owner);
            http_stream_abandon(st);
            if (hs)
                http_session_unref(hs);
        }
        http_stream_unref(st);
        return ret;
    }
    rc = http_stream_wait_done(st);
    ret = rc == -ECONNRESET ? MHD_NO : reply_done(conn, st, NULL);
    http_stream_abandon(st);
    http_session_unref(hs);
    http_stream_unref(st);
    return ret;
}

static enum MHD_Result on_post(struct http_server *srv, struct MHD_Connection *conn,
                               struct http_req *rq)
{
    struct http_session *hs = hutch_steal(&rq->hs);
    const char *body = rq->body.data ? rq->body.data : "";
    const struct hutch_mcp_headers h = {http_header(conn, "MCP-Protocol-Version"),
                                        http_header(conn, "Mcp-Method"),
                                        http_header(conn, "Mcp-Name")};
    struct hutch_mcp_msg m;
    struct http_stream *st;
    enum MHD_Result ret;
    int init = 0, r;

    /* Parsed and judged once: the era decides whether there is a session.
     * What the revision calls a protocol error gets its HTTP status even on
     * a session; junk on a session is answered in it, as it always was. */
    hutch_mcp_msg_parse(body, rq->body.len, &h, &m);
    if (m.v.era == HUTCH_MCP_MODERN || m.protocol_error || (!hs && m.refused)) {
        if (hs)
            http_session_unref(hs); /* its session id means nothing here */
        ret = m.refused ? reply_refusal(conn, &m) : post_modern(srv, conn, rq, &m);
        hutch_mcp_msg_clear(&m);
        return ret;
    }
    if (!hs) {
        unsigned status = 0;
        const char *why = NULL;

        if (!m.method || strcmp(m.method, "initialize") != 0 || !m.id) {
            hutch_mcp_msg_clear(&m);
            return reply_error(conn, MHD_HTTP_BAD_REQUEST, HUTCH_RPC_SERVER_ERROR,
                               "Bad Request: Mcp-Session-Id header is required", NULL);
        }
        hs = http_session_create(srv, rq->principal, &status, &why);
        if (!hs) {
            hutch_mcp_msg_clear(&m);
            return reply_error(conn, status, HUTCH_RPC_SERVER_ERROR, why, NULL);
        }
        init = 1;
    }

    st = http_stream_new(srv, conn, accepts_sse(conn));
    if (!st) {
        hutch_mcp_msg_clear(&m);
        if (init)
            http_session_settle(hs, 0);
        http_session_unref(hs);
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           HUTCH_RPC_INTERNAL_ERROR, "Out of memory", NULL);
    }
    /* Listed before delivery: the answer may come before it returns. */
    http_pending_add(hs, st);
    r = hutch_mcp_session_deliver(hs->s, &m, st);
    hutch_mcp_msg_clear(&m);
    if (r == 0)
        http_pending_release(st); /* nothing will come for it */

    if (init) {
        ret = post_initialize(hs, st, r);
    } else {
        http_session_unref(hs);
        if (r == 0) {
            ret = reply_empty(conn, MHD_HTTP_ACCEPTED);
        } else if (st->sse && !http_stream_is_done(st)) {
            /* Headers now, events as they come; the response keeps the
             * stream alive from here. */
            ret = http_reply_sse_stream(conn, st);
            http_stream_unref(st);
            return ret;
        } else {
            int rc = http_stream_wait_done(st);
            ret = rc == -ECONNRESET ? MHD_NO : reply_done(conn, st, NULL);
        }
    }
    http_stream_abandon(st);
    http_stream_unref(st);
    return ret;
}

static enum MHD_Result on_delete(struct http_server *srv, struct MHD_Connection *conn,
                                 struct http_req *rq)
{
    struct http_session *hs = hutch_steal(&rq->hs);

    hutch_info("session %.8s ended by the client", hs->id);
    hutch_metrics_http(HUTCH_HTTP_SESSION_CLIENT, 1);
    http_session_end(hs);
    http_session_unref(hs);
    return reply_empty(conn, MHD_HTTP_NO_CONTENT);
}

/* First call for a request: headers only.  Everything that can be refused
 * without the body is refused here, before any of it is read. */
static enum MHD_Result on_headers(struct http_server *srv, struct MHD_Connection *conn,
                                  const char *url, const char *method, void **con_cls)
{
    static const char *const allow[] = {"Allow", "GET, POST, DELETE", NULL};
    const char *why, *sid, *version, *clen, *ctype;
    char who[HUTCH_MAX_PRINCIPAL_NAME + 1];
    int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0, hosts = 0, given = 0;
    uint64_t len = 0;
    struct http_req *rq;

    /* Which one would the Host check look at?  RFC 9112 says refuse. */
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_host, &hosts);
    if (hosts > 1)
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, HUTCH_RPC_SERVER_ERROR,
                           "Bad Request: more than one Host header", NULL);
    if (srv->loopback && (why = http_rebinding_check(conn)) != NULL)
        return reply_error(conn, MHD_HTTP_FORBIDDEN, HUTCH_RPC_SERVER_ERROR, why, NULL);
    /* No OAuth metadata here, for anyone (see the top of http_auth.c). */
    if (strncmp(url, "/.well-known/", 13) == 0)
        return http_reply_text(
            conn, MHD_HTTP_NOT_FOUND,
            "Not found: hutch has no OAuth; send its static token as "
            "Authorization: Bearer <token>\n",
            NULL);
    if (http_is_ops_path(url))
        return http_on_ops(srv, conn, url, method);
    if (!http_authorized(srv, conn, who, sizeof(who), &given))
        return reply_error(conn, MHD_HTTP_UNAUTHORIZED, HUTCH_RPC_SERVER_ERROR,
                           http_unauthorized_msg(given), http_www_authenticate(given));
    if (strcmp(url, HTTP_PATH) != 0)
        return http_reply_text(conn, MHD_HTTP_NOT_FOUND,
                               "Not found: hutch serves MCP at /mcp\n", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        return reply_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, HUTCH_RPC_SERVER_ERROR,
                           "Method Not Allowed: hutch offers no standalone SSE stream",
                           allow);
    if (!post && strcmp(method, MHD_HTTP_METHOD_DELETE) != 0)
        return reply_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, HUTCH_RPC_SERVER_ERROR,
                           "Method Not Allowed", allow);
    if (post) {
        ctype = http_header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (!ctype || !is_json_type(ctype))
            return reply_error(
                conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, HUTCH_RPC_SERVER_ERROR,
                "Unsupported Media Type: Content-Type must be application/json", NULL);
        /* MHD has checked it is a number: failing here means it overflows. */
        clen = http_header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (clen && (hutch_parse_u64(clen, 0, UINT64_MAX, &len) < 0 ||
                     len > HUTCH_HTTP_MAX_BODY)) {
            char msg[96];
            snprintf(msg, sizeof(msg), "Payload Too Large: the limit is %u bytes",
                     HUTCH_HTTP_MAX_BODY);
            return reply_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, HUTCH_RPC_SERVER_ERROR,
                               msg, NULL);
        }
    }
    sid = http_header(conn, "Mcp-Session-Id");
    version = http_header(conn, "MCP-Protocol-Version");
    /* Not on a session-less initialize: the version is still to be agreed;
     * nor on a 2026 one, whose body decides (mcp_era.h). */
    if (sid && version && !hutch_mcp_protocol_supported(version) &&
        !hutch_mcp_version_modern(version) &&
        strcmp(version, HTTP_DEFAULT_VERSION) != 0)
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, HUTCH_RPC_SERVER_ERROR,
                           "Bad Request: unsupported MCP-Protocol-Version", NULL);
    if (!sid && !post)
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, HUTCH_RPC_SERVER_ERROR,
                           "Bad Request: Mcp-Session-Id header is required", NULL);

    rq = calloc(1, sizeof(*rq));
    if (!rq)
        return MHD_NO;
    rq->post = post;
    snprintf(rq->principal, sizeof(rq->principal), "%s", who);
    hutch_buf_init(&rq->body, HUTCH_HTTP_MAX_BODY);
    if (len && reserve(srv, rq, len) < 0) {
        req_free(srv, rq);
        return reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, HUTCH_RPC_SERVER_ERROR,
                           "Service Unavailable: too many uploads at once", NULL);
    }
    if (sid) {
        rq->hs = http_session_lookup(srv, sid);
        /* A session belongs to the principal that opened it: to anyone
         * else it does not exist. */
        if (!rq->hs || strcmp(rq->hs->principal, rq->principal) != 0) {
            req_free(srv, rq);
            return reply_error(conn, MHD_HTTP_NOT_FOUND, HUTCH_RPC_SESSION_NOT_FOUND,
                               "Session not found", NULL);
        }
    }
    *con_cls = rq;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct http_server *srv = cls;
    struct http_req *rq = *con_cls;

    if (!rq) {
        struct hutch_http_conn *c = http_guard_conn(conn);
        if (c)
            hutch_http_guard_head(srv->guard, c);
        return on_headers(srv, conn, url, method, con_cls);
    }
    if (*upload_size) {
        size_t n = *upload_size;

        *upload_size = 0;
        /* Only a chunked upload gets here past the cap (a Content-Length
         * one was refused up front).  MHD cannot answer in the middle of a
         * body, so the connection is closed instead of reading on. */
        if (rq->body.len + n > HUTCH_HTTP_MAX_BODY) {
            hutch_warn("closing a connection whose request body passed %u bytes",
                       HUTCH_HTTP_MAX_BODY);
            return MHD_NO;
        }
        if (reserve(srv, rq, rq->body.len + n) < 0) {
            hutch_warn(
                "closing a connection: request bodies in memory passed %llu bytes",
                (unsigned long long)HUTCH_HTTP_MAX_BUFFERED);
            return MHD_NO;
        }
        return hutch_buf_append(&rq->body, upload, n) == 0 ? MHD_YES : MHD_NO;
    }
    return rq->post ? on_post(srv, conn, rq) : on_delete(srv, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    struct http_server *srv = cls;
    struct hutch_http_conn *c = http_guard_conn(conn);

    req_free(srv, *con_cls);
    *con_cls = NULL;
    /* Waiting for the next head from now (or closing: harmless). */
    if (c)
        hutch_http_guard_idle(srv->guard, c, hutch_now_ms());
}

/* MHD_NotifyConnectionCallback: the guard follows every connection from
 * its start (on MHD's listening thread) to its end (before MHD closes its
 * socket, so the guard never shuts down a reused descriptor). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *srv = cls;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        unsigned n = __atomic_load_n(&srv->handed, __ATOMIC_ACQUIRE);
        while (n && !__atomic_compare_exchange_n(&srv->handed, &n, n - 1, 0,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!fd)
            return;
        *socket_context =
            hutch_http_guard_open(srv->guard, fd->connect_fd,
                                  addr ? addr->client_addr : NULL, hutch_now_ms());
        if (!*socket_context) /* out of memory: not a connection to keep */
            shutdown(fd->connect_fd, SHUT_RDWR);
        return;
    }
    hutch_http_guard_close(srv->guard, *socket_context);
    *socket_context = NULL;
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt,
                                                             va_list ap)
{
    struct http_server *srv = cls;
    char line[512];
    size_t n;

    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (!__atomic_load_n(&srv->started, __ATOMIC_ACQUIRE)) {
        snprintf(srv->start_msg, sizeof(srv->start_msg), "%s", line);
        return;
    }
    hutch_info("libmicrohttpd: %s", line);
}

/* ---------------------------------------------------------------------- */
/* The server */

union sockaddr_any {
    struct sockaddr sa;
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
};

/* `a` gets the address without brackets. */
static int parse_addr(const char *addr, uint16_t port, union sockaddr_any *sa, int *v6,
                      int *loopback, char a[INET6_ADDRSTRLEN], struct hutch_err *err)
{
    size_t n = strlen(addr);

    /* "[::1]" as in URLs, too. */
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n >= INET6_ADDRSTRLEN)
        goto bad;
    memcpy(a, addr, n);
    a[n] = '\0';
    memset(sa, 0, sizeof(*sa));
    if (inet_pton(AF_INET, a, &sa->v4.sin_addr) == 1) {
        sa->v4.sin_family = AF_INET;
        sa->v4.sin_port = htons(port);
        *v6 = 0;
        *loopback = (ntohl(sa->v4.sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (inet_pton(AF_INET6, a, &sa->v6.sin6_addr) == 1) {
        const struct in6_addr *x = &sa->v6.sin6_addr;
        sa->v6.sin6_family = AF_INET6;
        sa->v6.sin6_port = htons(port);
        *v6 = 1;
        *loopback = IN6_IS_ADDR_LOOPBACK(x) ||
                    (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
        return 0;
    }
bad:
    return hutch_err_set(
        err, -EINVAL,
        "--http wants an IP address (127.0.0.1, ::1, 0.0.0.0), not \"%s\"", addr);
}

/* The caps an operator may set, each a row of knobs.def (a value out of
 * range is an error, never silently the default), into their fields. */
static int knobs_read(struct http_knobs *k, struct hutch_err *err)
{
    static const struct {
        enum hutch_knob_id id;
        size_t off;
    } fields[] = {
        {HUTCH_KNOB_HTTP_MAX_SESSIONS, offsetof(struct http_knobs, max_sessions)},
        {HUTCH_KNOB_HTTP_MAX_SESSIONS_PER_PRINCIPAL,
         offsetof(struct http_knobs, per_principal)},
        {HUTCH_KNOB_HTTP_SESSION_IDLE_MS, offsetof(struct http_knobs, idle_ms)},
        {HUTCH_KNOB_HTTP_MAX_CONNECTIONS, offsetof(struct http_knobs, max_conns)},
        {HUTCH_KNOB_HTTP_MAX_CONNECTIONS_PER_ADDRESS,
         offsetof(struct http_knobs, per_address)},
        {HUTCH_KNOB_HTTP_HEAD_TIMEOUT_MS, offsetof(struct http_knobs, head_ms)},
    };
    int per_address_set = 0;

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        uint64_t x;
        int r = hutch_knob_uint(fields[i].id, &x, err);

        if (r < 0)
            return r;
        *(unsigned *)((char *)k + fields[i].off) = (unsigned)x;
        if (fields[i].id == HUTCH_KNOB_HTTP_MAX_CONNECTIONS_PER_ADDRESS)
            per_address_set = r > 0;
    }
    /* Unset: one address may take half the connections; 0: all of them
     * (a reverse proxy in front, every client behind one address). */
    if (!per_address_set)
        k->per_address = k->max_conns / HUTCH_HTTP_CONNECTIONS_PER_ADDRESS_SHARE;
    else if (k->per_address == 0 || k->per_address > k->max_conns)
        k->per_address = k->max_conns;
    return 0;
}

/* Everything hutch_http_serve would refuse before listening.  `a` gets
 * the address, without brackets. */
static int check(const struct hutch_http_opts *opts, union sockaddr_any *sa, int *v6,
                 int *loopback, char a[INET6_ADDRSTRLEN], struct http_knobs *k,
                 struct hutch_err *err)
{
    const char *addr = opts->addr ? opts->addr : "127.0.0.1";
    int rc;

    rc = parse_addr(addr, opts->port, sa, v6, loopback, a, err);
    if (rc < 0)
        return rc;
    if (opts->token && !*opts->token)
        return hutch_err_set(err, -EINVAL, "the bearer token is empty");
    if (!opts->token && !opts->principal && !*loopback)
        return hutch_err_set(
            err, -EPERM,
            "refusing to serve MCP on %s without a token: anyone who can reach "
            "it could run code; set HUTCH_TOKEN or --token-file (or bind "
            "127.0.0.1)",
            addr);
    rc = knobs_read(k, err);
    if (rc < 0)
        return rc;
    return hutch_libmhd_load(err);
}

int hutch_http_check(const struct hutch_http_opts *opts, struct hutch_err *err)
{
    char a[INET6_ADDRSTRLEN];
    union sockaddr_any sa;
    struct http_knobs k;
    int v6, loopback;

    return check(opts, &sa, &v6, &loopback, a, &k, err);
}

/* What the guard closed since `counted`, into the metrics. */
static void guard_count(struct http_server *srv, struct hutch_http_guard_stats *counted)
{
    struct hutch_http_guard_stats now;

    hutch_http_guard_stats(srv->guard, &now);
    hutch_metrics_http(HUTCH_HTTP_CONN_HEAD_TIMEOUT,
                       now.head_timeouts - counted->head_timeouts);
    hutch_metrics_http(HUTCH_HTTP_CONN_ROOM, now.evicted - counted->evicted);
    *counted = now;
}

/* What the guard closed lately, said at once and then at most every
 * HUTCH_HTTP_GUARD_LOG_MS (an attack would otherwise write a line per
 * connection). */
static void guard_report(struct http_server *srv, struct hutch_http_guard_stats *said)
{
    struct hutch_http_guard_stats now;

    hutch_http_guard_stats(srv->guard, &now);
    if (now.head_timeouts == said->head_timeouts && now.evicted == said->evicted)
        return;
    hutch_warn("closed %llu connections that sent no complete request head within "
               "their time (%u ms before authenticating), and %llu that had not "
               "authenticated to make room for newer ones",
               (unsigned long long)(now.head_timeouts - said->head_timeouts),
               srv->k.head_ms, (unsigned long long)(now.evicted - said->evicted));
    *said = now;
}

/* The listening socket (non-blocking, close-on-exec): its descriptor, or
 * -errno. */
static int listen_on(const union sockaddr_any *sa, int v6)
{
    int one = 1, fd, e;
    socklen_t len = v6 ? sizeof(sa->v6) : sizeof(sa->v4);

    fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (v6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, &sa->sa, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Whether MHD has room for one more connection now (see "Accepting" at the
 * top): what it counts, and what was handed to it lately and has not
 * started (a handover it refused never starts: after
 * HUTCH_HTTP_ACCEPT_SETTLE_MS without one, none is counted). */
static int has_room(struct http_server *srv, struct MHD_Daemon *d,
                    uint64_t last_hand_ms, uint64_t now)
{
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    unsigned cur = info ? info->num_connections : 0;
    unsigned handed = __atomic_load_n(&srv->handed, __ATOMIC_ACQUIRE);

    if (handed && now - last_hand_ms >= HUTCH_HTTP_ACCEPT_SETTLE_MS) {
        __atomic_store_n(&srv->handed, 0, __ATOMIC_RELEASE);
        handed = 0;
    }
    return cur + handed < srv->k.max_conns;
}

/* Accepts what waits, while there is room, at most HUTCH_HTTP_ACCEPT_BATCH;
 * *last_hand_ms is when the last was handed to MHD. */
static void accept_some(struct http_server *srv, struct MHD_Daemon *d, int lfd,
                        uint64_t *last_hand_ms)
{
    for (unsigned i = 0; i < HUTCH_HTTP_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        uint64_t now = hutch_now_ms();
        int fd;

        if (!has_room(srv, d, *last_hand_ms, now))
            return;
        fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                hutch_debug("http: accept: %s", strerror(errno));
            return; /* EMFILE and the like: it waits in the backlog */
        }
        __atomic_add_fetch(&srv->handed, 1, __ATOMIC_ACQ_REL);
        *last_hand_ms = now;
        /* Refused (the address's own limit, memory): MHD closed it. */
        (void)MHD_add_connection(d, fd, (struct sockaddr *)&ss, len);
    }
}

int hutch_http_serve(struct hutch_mcp *m, struct hutch_http_opts *opts,
                     volatile sig_atomic_t *stop, struct hutch_err *err)
{
    const char *addr = opts->addr ? opts->addr : "127.0.0.1";
    const struct timespec no_room = {0, HUTCH_HTTP_ACCEPT_WAIT_MS * 1000000L};
    char a[INET6_ADDRSTRLEN];
    struct http_server srv;
    union sockaddr_any sa;
    struct MHD_Daemon *d;
    struct hutch_http_guard_stats said = {0}, counted = {0};
    int v6, loopback, rc, e, lfd;
    uint64_t last_sweep, last_said, last_tick, last_hand = 0, sweep_ms;
    unsigned flags;

    memset(&srv, 0, sizeof(srv));
    rc = check(opts, &sa, &v6, &loopback, a, &srv.k, err);
    if (rc < 0)
        return rc;
    {
        const struct hutch_http_guard_opts go = {
            .max_conns = srv.k.max_conns,
            .max_unauth = srv.k.max_conns / HUTCH_HTTP_UNAUTH_SHARE,
            .per_address = HUTCH_HTTP_UNAUTH_PER_ADDRESS,
            .reserve = srv.k.max_conns / HUTCH_HTTP_ROOM_RESERVE_SHARE,
            .head_ms = srv.k.head_ms,
            .trusted_ms = HUTCH_HTTP_CONN_TIMEOUT_S * 1000u};
        srv.guard = hutch_http_guard_new(&go);
        if (!srv.guard)
            return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    srv.m = m;
    srv.loopback = loopback;
    srv.token = opts->token;
    srv.token_len = opts->token ? strlen(opts->token) : 0;
    srv.principal = opts->principal;
    srv.principal_arg = opts->principal_arg;
    srv.jobs = opts->jobs;
    srv.upstreams = opts->upstreams;
    pthread_mutex_init(&srv.mu, NULL);

    /* Thread per connection: handlers may block until the core answers.
     * poll(), not select(): hutch holds many descriptors (sandboxes,
     * upstreams) and select() breaks past FD_SETSIZE. */
    lfd = listen_on(&sa, v6);
    if (lfd < 0) {
        hutch_http_guard_free(srv.guard);
        pthread_mutex_destroy(&srv.mu);
        return hutch_err_set(err, lfd, "cannot listen on %s port %u: %s", addr,
                             (unsigned)opts->port, strerror(-lfd));
    }
    /* Connections come from accept_some (MHD_USE_ITC: MHD's thread hears
     * of each at once). */
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
            MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET |
            (v6 ? MHD_USE_IPv6 : 0);
    errno = 0;
    d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &srv, MHD_OPTION_CONNECTION_LIMIT,
        srv.k.max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv.k.per_address,
        MHD_OPTION_CONNECTION_TIMEOUT, HUTCH_HTTP_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HUTCH_HTTP_CONN_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &srv, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, &srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, &srv,
        MHD_OPTION_END);
    if (!d) {
        e = errno ? errno : EIO;
        close(lfd);
        hutch_http_guard_free(srv.guard);
        pthread_mutex_destroy(&srv.mu);
        return hutch_err_set(err, -e, "cannot listen on %s port %u: %s", addr,
                             (unsigned)opts->port,
                             srv.start_msg[0] ? srv.start_msg : strerror(e));
    }
    __atomic_store_n(&srv.started, 1, __ATOMIC_RELEASE);
    {
        union sockaddr_any bound;
        socklen_t blen = sizeof(bound);
        opts->bound_port = opts->port;
        if (getsockname(lfd, &bound.sa, &blen) == 0)
            opts->bound_port = ntohs(v6 ? bound.v6.sin6_port : bound.v4.sin_port);
    }
    /* Always said (not a log line): with port 0 it is how a user or a test
     * learns where to connect. */
    {
        char base[INET6_ADDRSTRLEN + 16];
        cJSON *f = cJSON_CreateObject();
        snprintf(base, sizeof(base), "http://%s%s%s:%u", v6 ? "[" : "", a,
                 v6 ? "]" : "", (unsigned)opts->bound_port);
        cJSON_AddStringToObject(f, "mcp", HTTP_PATH);
        cJSON_AddStringToObject(f, "base", base);
        cJSON_AddNumberToObject(f, "port", opts->bound_port);
        hutch_log_say(HUTCH_LOG_INFO, "hutch serve", f,
                      "serving MCP at %s%s (and /healthz, /readyz, /metrics)", base,
                      HTTP_PATH);
        cJSON_Delete(f);
    }

    last_sweep = hutch_now_ms();
    last_said = 0;
    sweep_ms = srv.k.idle_ms / 2 < HUTCH_HTTP_SWEEP_MS ? srv.k.idle_ms / 2
                                                       : HUTCH_HTTP_SWEEP_MS;
    last_tick = 0;
    while (!*stop) {
        uint64_t now = hutch_now_ms();
        /* New connections while there is room (waking for each), else a
         * short wait for some to end; the guard's deadlines in between. */
        if (has_room(&srv, d, last_hand, now)) {
            struct pollfd pfd = {.fd = lfd, .events = POLLIN};
            if (poll(&pfd, 1, 50) > 0 && (pfd.revents & POLLIN))
                accept_some(&srv, d, lfd, &last_hand);
        } else {
            nanosleep(&no_room, NULL);
        }
        now = hutch_now_ms();
        if (now - last_tick < HUTCH_HTTP_ACCEPT_WAIT_MS)
            continue;
        last_tick = now;
        hutch_http_guard_tick(srv.guard, now);
        guard_count(&srv, &counted);
        if (now - last_said >= HUTCH_HTTP_GUARD_LOG_MS &&
            (counted.head_timeouts != said.head_timeouts ||
             counted.evicted != said.evicted)) {
            guard_report(&srv, &said);
            last_said = now;
        }
        if (now - last_sweep >= sweep_ms) {
            http_sessions_sweep(&srv, 0);
            last_sweep = now;
        }
    }

    /* Waiting handlers see this within HUTCH_HTTP_TICK_MS, so that stopping MHD
     * (which joins every connection thread) does not hang. */
    __atomic_store_n(&srv.stopping, 1, __ATOMIC_RELEASE);
    close(lfd); /* what waits in the backlog is refused */
    MHD_stop_daemon(d);
    http_sessions_sweep(&srv, 1);
    /* 2026 requests whose sandboxes are still being torn down (their
     * executions were cancelled when their connections ended). */
    for (;;) {
        unsigned left;
        pthread_mutex_lock(&srv.mu);
        left = srv.nsessions + srv.ntransient;
        pthread_mutex_unlock(&srv.mu);
        if (!left)
            break;
        usleep(10000);
    }
    guard_count(&srv, &counted);
    guard_report(&srv, &said);
    hutch_http_guard_free(srv.guard);
    pthread_mutex_destroy(&srv.mu);
    return 0;
}
