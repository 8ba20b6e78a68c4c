/* http_int.h — what the http*.c files of `hutch serve --http` share, and
 * nobody else: the server, session, stream and request structures, and
 * each file's functions the others call.  Not an API (that is http.h).
 *
 *   http.c          /mcp: reading a request, POST and DELETE, its error
 *                   replies; libmicrohttpd's callbacks; starting, sweeping and
 *                   stopping the server, the HUTCH_HTTP_* knobs
 *   http_stream.c   a request's stream: what the core sends for it, queued
 *                   until the connection's thread writes it (JSON or SSE)
 *   http_session.c  the session table: its caps in all and per principal,
 *                   idle expiry, 2026-07-28 requests' own sessions
 *   http_auth.c     who may ask: Host/Origin on loopback, the bearer token,
 *                   the 401 challenge
 *   http_ops.c      /healthz, /readyz, /metrics
 *   http_reply.c    queueing a reply (the bottom of the http files: http.c
 *                   and http_ops.c call it, it calls neither)
 *   http_guard.c    connections that have not authenticated (its own
 *                   header, http_guard.h: it knows nothing of HTTP)
 *
 * Locks: two, each guarding what the structures below mark.
 *   A stream's mu (struct http_stream) guards its queue and its flags
 *   (sse, done, abandoned, dropped, head, tail, queued, off, last_out);
 *   its cv wakes the connection's thread waiting on it.  `refs` is atomic
 *   and needs no lock.
 *   The server's mu (struct http_server) guards the session table
 *   (sessions, nsessions, ntransient), every session's refs, linked,
 *   ready, last_used and pending list, and every stream's sess, pnext,
 *   pprev and pending.
 * The two are never held together (a stream's mu is let go before the
 * server's is taken), and neither is held while calling the MCP server,
 * the guard, the metrics or libmicrohttpd. */
#ifndef HUTCH_HTTP_INT_H
#define HUTCH_HTTP_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "caps.h"
#include "http.h"
#include "mhd_lib.h"

struct hutch_http_guard;
struct hutch_http_conn;

struct http_msg {
    struct http_msg *next;
    char *data; /* malloc'd: handed to MHD as it is for JSON replies */
    size_t len;
};

struct http_session;

/* Everything the core sends for one request, on its way to the client. */
struct http_stream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;      /* atomic: request, core (while pending), SSE response */
    int sse;       /* keep every message framed as SSE; else the final one only */
    int done;      /* the final message arrived, or never will */
    int abandoned; /* the HTTP side is gone: drop whatever arrives */
    unsigned dropped;
    struct http_msg *head, *tail;
    size_t queued;
    size_t off;        /* bytes of head already given to MHD */
    uint64_t last_out; /* last time the SSE reader produced bytes */
    struct http_server *srv;
    struct MHD_Connection *conn;
    /* Under srv->mu: listed on sess while the core owes a final message. */
    struct http_session *sess;
    struct http_stream *pnext, *pprev;
    int pending;
    /* A 2026-07-28 request's own session (see post_modern in http.c),
     * held by the SSE response until it ends: dropping it cancels what
     * still runs.  Dropped through owner_unref, which http.c sets, so
     * that this file, under http_session.c, never calls up into it. */
    struct http_session *owner;
    void (*owner_unref)(struct http_session *hs);
};

struct http_session {
    struct http_session *next;
    struct http_server *srv;
    struct hutch_mcp_session *s;
    const char *id;
    /* Who created it; only they may use it. */
    char principal[HUTCH_MAX_PRINCIPAL_NAME + 1];
    /* One 2026-07-28 request's, never in the table (post_modern): closed
     * without waiting, counted in ntransient until the core is done with
     * it. */
    int transient;
    /* Under srv->mu: */
    int refs;           /* the table while linked, plus each request using it */
    int linked;         /* in the table, counted in its caps */
    int ready;          /* its initialize succeeded: it can be found */
    uint64_t last_used; /* ms: a request began or ended (idle expiry) */
    uint64_t began;     /* srv->began when its latest request began (eviction) */
    struct http_stream *pending;
};

/* The caps an operator may set (hutch_http_check reads them). */
struct http_knobs {
    unsigned max_sessions, per_principal, idle_ms;
    unsigned max_conns, per_address, head_ms;
};

struct http_server {
    struct hutch_mcp *m;
    const char *token;
    size_t token_len;
    int (*principal)(void *arg, const char *token, char *name, size_t len);
    void *principal_arg;
    struct hutch_jobs *jobs;
    struct hutch_upstreams *upstreams;
    int loopback;
    int stopping;        /* atomic */
    uint64_t buffered;   /* atomic: request body bytes reserved */
    char start_msg[256]; /* MHD's last word while starting */
    int started;
    struct http_knobs k;
    struct hutch_http_guard *guard;
    unsigned handed; /* atomic: handed to MHD, not yet started (http.c) */
    pthread_mutex_t mu;
    struct http_session *sessions;
    uint64_t began;      /* requests begun on sessions, counted */
    unsigned nsessions;  /* linked: initialized or being initialized */
    unsigned ntransient; /* 2026 requests the core is not done with */
};

/* One HTTP request: MHD's per-request context. */
struct http_req {
    char principal[HUTCH_MAX_PRINCIPAL_NAME + 1]; /* authenticated caller */
    int post;
    struct hutch_buf body;
    uint64_t reserved;       /* counted in srv->buffered */
    struct http_session *hs; /* from Mcp-Session-Id, holding a ref */
};

static inline int http_stopping(const struct http_server *srv)
{
    return __atomic_load_n(&srv->stopping, __ATOMIC_ACQUIRE);
}

static inline const char *http_header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* http_reply.c */
enum MHD_Result http_reply(struct MHD_Connection *conn, unsigned status,
                           const char *ctype, void *body, size_t len,
                           enum MHD_ResponseMemoryMode mode, const char *const *hdrs);
enum MHD_Result http_reply_text(struct MHD_Connection *conn, unsigned status,
                                const char *msg, const char *const *hdrs);

/* http_stream.c */
struct http_stream *http_stream_new(struct http_server *srv,
                                    struct MHD_Connection *conn, int sse);
void http_stream_unref(struct http_stream *st);
void http_stream_abandon(struct http_stream *st);
void http_stream_finish(struct http_stream *st);
void http_pending_add(struct http_session *hs, struct http_stream *st);
void http_pending_unlink_locked(struct http_stream *st);
void http_pending_release(struct http_stream *st);
void http_on_send(void *arg, void *stream, const char *json, size_t len, int last);
int http_stream_wait_done(struct http_stream *st);
int http_stream_is_done(struct http_stream *st);
char *http_stream_take_all(struct http_stream *st, size_t *len);
enum MHD_Result http_reply_sse_stream(struct MHD_Connection *conn,
                                      struct http_stream *st);

/* http_session.c */
struct http_session *http_session_create(struct http_server *srv, const char *principal,
                                         unsigned *status, const char **why);
struct http_session *http_session_transient(struct http_server *srv,
                                            const char *principal);
struct http_session *http_session_lookup(struct http_server *srv, const char *id);
void http_session_settle(struct http_session *hs, int keep);
void http_session_end(struct http_session *hs);
void http_session_unref(struct http_session *hs);
void http_sessions_sweep(struct http_server *srv, int all);

/* http_auth.c */
int http_secret_equal(const char *want, size_t wn, const char *got, size_t gn);
const char *http_rebinding_check(struct MHD_Connection *conn);
struct hutch_http_conn *http_guard_conn(struct MHD_Connection *conn);
int http_authorized(const struct http_server *srv, struct MHD_Connection *conn,
                    char *who, size_t len, int *given);
const char *const *http_www_authenticate(int given);
const char *http_unauthorized_msg(int given);

/* http_ops.c */
int http_is_ops_path(const char *url);
enum MHD_Result http_on_ops(struct http_server *srv, struct MHD_Connection *conn,
                            const char *url, const char *method);

#endif
