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
 * rebinding), body caps, the session table's caps (in all and per
 * principal: a principal at its share gives up its own oldest idle
 * session, a full table is taken from whoever holds the most; caps.h) and
 * idle session expiry, and the connection guard (http_guard.h: a deadline
 * for each request head, shares of the connection limit for connections
 * that have not authenticated).  The caps can be set from the environment
 * (HUTCH_HTTP_*, read by hutch_http_check).
 *
 * OAuth: hutch takes a static bearer token and has no authorization
 * server.  /.well-known/ paths answer 404 without a token, so that a
 * client probing for OAuth metadata (RFC 9728, RFC 8414) learns there is
 * none, instead of a 401 it would take as "start an OAuth flow".  A 401
 * says invalid_token (RFC 6750) when a bearer token came and was wrong.
 *
 * Beside it, GET (and HEAD) only, other methods 405:
 *   /healthz  200 "ok": the process answers.  No token.
 *   /readyz   200 when hutch can run code now (the policy can be served and
 *             its executor's probe passes), else 503; a JSON body with the
 *             executor, the upstreams' and the pools' states.  No token:
 *             load balancers and orchestrators' probes send none.  Without
 *             a valid token the body leaves out free-text error messages
 *             (they may name paths and hosts); states and names stay.
 *   /metrics  Prometheus text format 0.0.4 (metrics.c).  The same bearer
 *             token as /mcp when one is set (the server's or a principal's):
 *             counts say what agents do, and Prometheus sends a bearer token
 *             from its scrape config.  No separate metrics token: one
 *             secret fewer to manage.
 * The Host/Origin checks apply to all of them, as to /mcp.
 *
 * Threading: libmicrohttpd runs one thread per connection, so a request may
 * block until its answer is ready; every wait wakes at least every 100 ms to
 * notice shutdown and a client that went away.  (MHD's thread pool with
 * internal polling would need every waiting request suspended and resumed;
 * the guard gives the same protection against slow clients with the
 * threads kept: a connection that sends nothing useful is closed within
 * the head deadline, so it holds a thread a few seconds at most.)  The
 * thread that calls hutch_http_serve runs the sweeps: idle sessions, and
 * the guard's deadlines every 50 ms.  The core sends from any
 * thread onto the request's stream: a queue with its own lock, reference
 * counted so that the HTTP side (client gone, server stopping) and the core
 * (final response, session freed) can each finish first.
 *
 * Not here: JSON-RPC and MCP semantics (mcp_server.c); the command line and
 * where the token comes from (the serve command). */
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

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "http.h"
#include "http_guard.h"
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
    /* A 2026-07-28 request's own session (see post_modern), held by the
     * SSE response until it ends: dropping it cancels what still runs. */
    struct http_session *owner;
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
    int refs;   /* the table while linked, plus each request using it */
    int linked; /* in the table, counted in its caps */
    int ready;  /* its initialize succeeded: it can be found */
    uint64_t last_used;
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
    pthread_mutex_t mu;
    struct http_session *sessions;
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

static int stopping(const struct http_server *srv)
{
    return __atomic_load_n(&srv->stopping, __ATOMIC_ACQUIRE);
}

/* ---------------------------------------------------------------------- */
/* Streams */

static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, unsigned ms)
{
    hutch_cond_wait_until(cv, mu, hutch_now_ms() + ms);
}

/* The peer closed its side.  HTTP clients do not half-close while waiting
 * for a response, so this means it is gone and nobody will read what we
 * would send. */
static int client_gone(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p;

    if (!ci)
        return 0;
    p.fd = ci->connect_fd;
    p.events = POLLRDHUP;
    p.revents = 0;
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void msgs_free(struct http_msg *m)
{
    while (m) {
        struct http_msg *next = m->next;
        free(m->data);
        free(m);
        m = next;
    }
}

static struct http_stream *stream_new(struct http_server *srv,
                                      struct MHD_Connection *conn, int sse)
{
    struct http_stream *st = calloc(1, sizeof(*st));

    if (!st)
        return NULL;
    pthread_mutex_init(&st->mu, NULL);
    hutch_cond_init_mono(&st->cv);
    st->refs = 1;
    st->sse = sse;
    st->srv = srv;
    st->conn = conn;
    st->last_out = hutch_now_ms();
    return st;
}

static void stream_ref(struct http_stream *st)
{
    __atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED);
}

static void stream_unref(struct http_stream *st)
{
    if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    msgs_free(st->head);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* The HTTP side will read nothing more: free what waits, drop what comes. */
static void stream_abandon(struct http_stream *st)
{
    struct http_msg *m;

    pthread_mutex_lock(&st->mu);
    st->abandoned = 1;
    m = st->head;
    st->head = st->tail = NULL;
    st->queued = 0;
    st->off = 0;
    pthread_mutex_unlock(&st->mu);
    msgs_free(m);
}

static void stream_finish(struct http_stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->done = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* The core now owes this stream a final message: hold a ref for it. */
static void pending_add(struct http_session *hs, struct http_stream *st)
{
    struct http_server *srv = hs->srv;

    stream_ref(st);
    pthread_mutex_lock(&srv->mu);
    st->sess = hs;
    st->pprev = NULL;
    st->pnext = hs->pending;
    if (hs->pending)
        hs->pending->pprev = st;
    hs->pending = st;
    st->pending = 1;
    pthread_mutex_unlock(&srv->mu);
}

static void pending_unlink_locked(struct http_stream *st)
{
    if (st->pprev)
        st->pprev->pnext = st->pnext;
    else
        st->sess->pending = st->pnext;
    if (st->pnext)
        st->pnext->pprev = st->pprev;
    st->pnext = st->pprev = NULL;
    st->pending = 0;
}

/* The core owes the stream nothing more (final message sent, message needed
 * no answer, or session freed): drop its ref.  Safe to call twice. */
static void pending_release(struct http_stream *st)
{
    struct http_server *srv = st->srv;
    int held = 0;

    pthread_mutex_lock(&srv->mu);
    if (st->pending) {
        pending_unlink_locked(st);
        held = 1;
    }
    pthread_mutex_unlock(&srv->mu);
    if (held) {
        stream_finish(st);
        stream_unref(st);
    }
}

/* One SSE event.  The core sends JSON on one line; should a line break
 * ever appear (JSON whitespace), each line gets its own "data:" field, which
 * the client joins back with "\n". */
static struct http_msg *sse_event(const char *json, size_t len)
{
    static const char head[] = "event: message\ndata: ", brk[] = "\ndata: ";
    struct http_msg *m = calloc(1, sizeof(*m));
    size_t breaks = 0, n = 0;
    char *p;

    if (!m)
        return NULL;
    for (size_t i = 0; i < len; i++)
        breaks += json[i] == '\n' ||
                  (json[i] == '\r' && (i + 1 == len || json[i + 1] != '\n'));
    m->data = malloc(sizeof(head) - 1 + len + breaks * (sizeof(brk) - 1) + 2);
    if (!m->data) {
        free(m);
        return NULL;
    }
    p = m->data;
    memcpy(p, head, sizeof(head) - 1);
    n = sizeof(head) - 1;
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '\r' && i + 1 < len && json[i + 1] == '\n')
            continue;
        if (json[i] == '\r' || json[i] == '\n') {
            memcpy(p + n, brk, sizeof(brk) - 1);
            n += sizeof(brk) - 1;
        } else {
            p[n++] = json[i];
        }
    }
    p[n++] = '\n';
    p[n++] = '\n';
    m->len = n;
    return m;
}

static struct http_msg *raw_msg(const char *json, size_t len)
{
    struct http_msg *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->data = malloc(len ? len : 1);
    if (!m->data) {
        free(m);
        return NULL;
    }
    memcpy(m->data, json, len);
    m->len = len;
    return m;
}

/* hutch_mcp_send_fn: never blocks, so a slow client cannot stall a worker. */
static void on_send(void *arg, void *stream, const char *json, size_t len, int last)
{
    struct http_session *hs = arg;
    struct http_stream *st = stream;

    if (!st) {
        /* No GET stream to carry it (see the top of this file). */
        hutch_debug("session %.8s: dropped a message tied to no request", hs->id);
        return;
    }
    pthread_mutex_lock(&st->mu);
    if (!st->abandoned && !st->done && (last || st->sse)) {
        if (!last && st->queued + len > HUTCH_HTTP_SSE_MAX_QUEUED) {
            if (st->dropped++ == 0)
                hutch_warn(
                    "session %.8s: client reads too slowly; dropping progress messages",
                    hs->id);
        } else {
            struct http_msg *m = st->sse ? sse_event(json, len) : raw_msg(json, len);
            if (m) {
                if (st->tail)
                    st->tail->next = m;
                else
                    st->head = m;
                st->tail = m;
                st->queued += m->len;
            } else {
                hutch_error("session %.8s: out of memory queueing a message", hs->id);
            }
        }
    }
    if (last)
        st->done = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    if (last)
        pending_release(st);
}

/* ---------------------------------------------------------------------- */
/* Sessions */

/* The core sends nothing more for the session: whatever it still owed
 * will never come. */
static void session_forget(struct http_session *hs)
{
    struct http_server *srv = hs->srv;

    for (;;) {
        struct http_stream *st;

        pthread_mutex_lock(&srv->mu);
        st = hs->pending;
        if (st)
            pending_unlink_locked(st);
        pthread_mutex_unlock(&srv->mu);
        if (!st)
            break;
        stream_finish(st);
        stream_unref(st);
    }
}

/* hutch_mcp_session_close's callback for a transient session: on the
 * thread that last used the core's session (maybe its last worker). */
static void transient_gone(void *arg)
{
    struct http_session *hs = arg;
    struct http_server *srv = hs->srv;

    session_forget(hs);
    pthread_mutex_lock(&srv->mu);
    srv->ntransient--;
    pthread_mutex_unlock(&srv->mu);
    free(hs);
}

static void session_destroy(struct http_session *hs)
{
    if (hs->transient) {
        /* Its response went out (or its client left): what remains is
         * tearing its sandbox down, which the client must not wait for. */
        hutch_mcp_session_close(hs->s, transient_gone, hs);
        return;
    }
    /* After this returns the core sends nothing more for the session... */
    hutch_mcp_session_free(hs->s);
    session_forget(hs);
    free(hs);
}

static void session_unref(struct http_session *hs)
{
    struct http_server *srv = hs->srv;
    int left;

    pthread_mutex_lock(&srv->mu);
    hs->last_used = hutch_now_ms();
    left = --hs->refs;
    pthread_mutex_unlock(&srv->mu);
    if (left == 0)
        session_destroy(hs);
}

/* Session ids are what a client without a token proves itself with: compare
 * in constant time. */
static int secret_equal(const char *want, size_t wn, const char *got, size_t gn)
{
    unsigned char d = wn != gn;

    for (size_t i = 0; i < wn; i++)
        d |= (unsigned char)want[i] ^ (unsigned char)(i < gn ? got[i] : 0);
    return d == 0;
}

static struct http_session *session_lookup(struct http_server *srv, const char *id)
{
    struct http_session *hs;
    size_t n = strlen(id);

    pthread_mutex_lock(&srv->mu);
    for (hs = srv->sessions; hs; hs = hs->next) {
        if (hs->ready && secret_equal(hs->id, strlen(hs->id), id, n)) {
            hs->refs++;
            hs->last_used = hutch_now_ms();
            break;
        }
    }
    pthread_mutex_unlock(&srv->mu);
    return hs;
}

/* Under srv->mu: nobody uses it but the table, and it owes nothing. */
static int session_idle(const struct http_session *hs)
{
    return hs->ready && hs->refs == 1 && !hs->pending;
}

/* Under srv->mu: out of the table and its caps.  The references left (0:
 * the caller destroys it, outside the lock). */
static int session_unlink_locked(struct http_server *srv, struct http_session *hs)
{
    struct http_session **pp = &srv->sessions;

    while (*pp != hs)
        pp = &(*pp)->next;
    *pp = hs->next;
    hs->next = NULL;
    hs->linked = 0;
    srv->nsessions--;
    return --hs->refs;
}

/* Under srv->mu: the table is full and `who`, holding `mine`, asks for a
 * session.  The oldest idle session of the principal holding the most,
 * when that is more than `mine` (ties: the oldest idle session of them);
 * NULL when nobody holds more or they are all busy.  A principal's share
 * may be more than the table divided by the principals in use: this is
 * what brings them back to even. */
static struct http_session *fullest_idle_locked(struct http_server *srv, unsigned mine)
{
    struct holder {
        const char *name;
        unsigned n;
        struct http_session *oldest;
    } *h = calloc(srv->nsessions ? srv->nsessions : 1, sizeof(*h)), *best = NULL;
    size_t nh = 0;

    if (!h)
        return NULL;
    for (struct http_session *hs = srv->sessions; hs; hs = hs->next) {
        size_t i;
        for (i = 0; i < nh && strcmp(h[i].name, hs->principal) != 0; i++)
            ;
        if (i == nh) {
            if (nh == srv->nsessions)
                break; /* cannot happen: one holder per session at most */
            h[nh++].name = hs->principal;
        }
        h[i].n++;
        if (session_idle(hs) &&
            (!h[i].oldest || hs->last_used < h[i].oldest->last_used))
            h[i].oldest = hs;
    }
    for (size_t i = 0; i < nh; i++) {
        if (h[i].n <= mine || !h[i].oldest)
            continue;
        if (!best || h[i].n > best->n ||
            (h[i].n == best->n && h[i].oldest->last_used < best->oldest->last_used))
            best = &h[i];
    }
    {
        struct http_session *victim = best ? best->oldest : NULL;
        free(h);
        return victim;
    }
}

/* A new 2025 session for `principal`, in the table but not findable until
 * its initialize succeeded (session_settle).  Makes room as the top of
 * this file says; the session it ended for that is destroyed here.  NULL
 * with the HTTP status and why. */
static struct http_session *session_create(struct http_server *srv,
                                           const char *principal, unsigned *status,
                                           const char **why)
{
    struct http_session *hs, *victim = NULL, *mine_oldest = NULL;
    const char *reason = NULL;
    enum hutch_metrics_http event = HUTCH_HTTP_SESSION_SHARE;
    unsigned mine = 0;
    int left = -1;

    hs = calloc(1, sizeof(*hs));
    if (hs) {
        hs->srv = srv;
        hs->id = "-"; /* for logs, until the core names it */
        snprintf(hs->principal, sizeof(hs->principal), "%s", principal);
        hs->s = hutch_mcp_session_new(srv->m, on_send, hs, principal);
    }
    if (!hs || !hs->s) {
        free(hs);
        *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        *why = "Internal error: cannot create a session";
        return NULL;
    }
    hs->id = hutch_mcp_session_id(hs->s);
    hs->refs = 1;
    hs->last_used = hutch_now_ms();

    pthread_mutex_lock(&srv->mu);
    for (struct http_session *i = srv->sessions; i; i = i->next) {
        if (strcmp(i->principal, principal) != 0)
            continue;
        mine++;
        if (session_idle(i) && (!mine_oldest || i->last_used < mine_oldest->last_used))
            mine_oldest = i;
    }
    if (mine >= srv->k.per_principal) {
        victim = mine_oldest;
        reason = "its principal's share is full";
        if (!victim)
            *why = "Service Unavailable: every session of this principal is busy";
    } else if (srv->nsessions >= srv->k.max_sessions) {
        victim = fullest_idle_locked(srv, mine);
        reason = "the session table is full";
        event = HUTCH_HTTP_SESSION_FULL;
        if (!victim)
            *why = "Service Unavailable: too many sessions";
    }
    if (reason && !victim) {
        pthread_mutex_unlock(&srv->mu);
        hutch_mcp_session_free(hs->s);
        free(hs);
        *status = MHD_HTTP_SERVICE_UNAVAILABLE;
        return NULL;
    }
    if (victim)
        left = session_unlink_locked(srv, victim);
    hs->next = srv->sessions;
    srv->sessions = hs;
    hs->linked = 1;
    hs->refs++; /* the table's */
    srv->nsessions++;
    pthread_mutex_unlock(&srv->mu);
    if (victim) {
        hutch_info("session %.8s of %s ended, idle the longest: %s", victim->id,
                   victim->principal, reason);
        hutch_metrics_http(event, 1);
        if (left == 0)
            session_destroy(victim);
    }
    return hs;
}

/* A 2026-07-28 request's session: outside the table, it holds no slot
 * (what bounds these is the connections, one request each). */
static struct http_session *session_transient(struct http_server *srv,
                                              const char *principal)
{
    struct http_session *hs = calloc(1, sizeof(*hs));

    if (!hs)
        return NULL;
    hs->srv = srv;
    hs->transient = 1;
    snprintf(hs->principal, sizeof(hs->principal), "%s", principal);
    hs->s = hutch_mcp_session_new(srv->m, on_send, hs, principal);
    if (!hs->s) {
        free(hs);
        return NULL;
    }
    hs->id = hutch_mcp_session_id(hs->s);
    hs->refs = 1;
    hs->last_used = hutch_now_ms();
    pthread_mutex_lock(&srv->mu);
    srv->ntransient++;
    pthread_mutex_unlock(&srv->mu);
    return hs;
}

/* After initialize: make the session findable, or take it out of the
 * table. */
static void session_settle(struct http_session *hs, int keep)
{
    struct http_server *srv = hs->srv;
    int left = -1;

    pthread_mutex_lock(&srv->mu);
    if (keep)
        hs->ready = 1;
    else if (hs->linked)
        left = session_unlink_locked(srv, hs);
    pthread_mutex_unlock(&srv->mu);
    if (left == 0)
        session_destroy(hs);
}

/* Take the session out of the table; it is freed when its last user is
 * done with it. */
static void session_end(struct http_session *hs)
{
    struct http_server *srv = hs->srv;
    int left = -1;

    pthread_mutex_lock(&srv->mu);
    if (hs->linked)
        left = session_unlink_locked(srv, hs);
    pthread_mutex_unlock(&srv->mu);
    if (left == 0)
        session_destroy(hs);
}

/* End sessions idle for the idle time (or all of them).  A session with a
 * request in flight is not idle, however long the request runs. */
static void sessions_sweep(struct http_server *srv, int all)
{
    struct http_session *dead = NULL, **pp;
    uint64_t now = hutch_now_ms();

    pthread_mutex_lock(&srv->mu);
    for (pp = &srv->sessions; *pp;) {
        struct http_session *hs = *pp;
        if (all || (session_idle(hs) && now - hs->last_used >= srv->k.idle_ms)) {
            *pp = hs->next;
            hs->linked = 0;
            srv->nsessions--;
            if (--hs->refs == 0) {
                hs->next = dead;
                dead = hs;
            }
            continue;
        }
        pp = &hs->next;
    }
    pthread_mutex_unlock(&srv->mu);
    while (dead) {
        struct http_session *next = dead->next;
        if (!all) {
            hutch_info("session %.8s of %s expired after %u s idle", dead->id,
                       dead->principal, srv->k.idle_ms / 1000u);
            hutch_metrics_http(HUTCH_HTTP_SESSION_IDLE, 1);
        }
        session_destroy(dead);
        dead = next;
    }
}

/* ---------------------------------------------------------------------- */
/* Replies */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status,
                             const char *ctype, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode, const char *const *hdrs)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result ret;

    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (; hdrs && hdrs[0]; hdrs += 2)
        MHD_add_response_header(r, hdrs[0], hdrs[1]);
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

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
    return reply(conn, status, "application/json", body, (size_t)n,
                 MHD_RESPMEM_MUST_COPY, hdrs);
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status,
                                  const char *msg, const char *const *hdrs)
{
    return reply(conn, status, "text/plain; charset=utf-8", (void *)msg, strlen(msg),
                 MHD_RESPMEM_PERSISTENT, hdrs);
}

static enum MHD_Result reply_empty(struct MHD_Connection *conn, unsigned status)
{
    return reply(conn, status, NULL, NULL, 0, MHD_RESPMEM_PERSISTENT, NULL);
}

/* ---------------------------------------------------------------------- */
/* Request checks */

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        ++*(int *)cls;
    return MHD_YES;
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
static const char *rebinding_check(struct MHD_Connection *conn)
{
    const char *host = header(conn, MHD_HTTP_HEADER_HOST);
    const char *origin = header(conn, MHD_HTTP_HEADER_ORIGIN);

    if (!host || !host_is_local(host))
        return "Forbidden: Host must be localhost, 127.0.0.1 or [::1]";
    if (origin && !origin_is_local(origin))
        return "Forbidden: Origin must be http(s)://localhost, 127.0.0.1 or [::1]";
    return NULL;
}

/* The guard's record of the connection (NULL when it has none). */
static struct hutch_http_conn *guard_conn(struct MHD_Connection *conn)
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
static int authorized(const struct http_server *srv, struct MHD_Connection *conn,
                      char *who, size_t len, int *given)
{
    const char *h = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
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
    if (srv->token && secret_equal(srv->token, srv->token_len, h, n)) {
        ok = 1;
    } else if (srv->principal && n < sizeof(tok)) {
        memcpy(tok, h, n);
        tok[n] = '\0';
        ok = srv->principal(srv->principal_arg, tok, who, len) == 1;
    }
out:
    if (ok) {
        struct hutch_http_conn *c = guard_conn(conn);
        if (c)
            hutch_http_guard_trust(srv->guard, c);
    }
    return ok;
}

/* The challenge of a 401 (RFC 6750 §3): a bare one when no token came, so
 * that a client knows to send one; invalid_token when one came and is not
 * valid. */
static const char *const *www_authenticate(int given)
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

static const char *unauthorized_msg(int given)
{
    return given ? "Unauthorized: the bearer token is not valid"
                 : "Unauthorized: send Authorization: Bearer <token>";
}

/* ---------------------------------------------------------------------- */
/* /healthz, /readyz, /metrics */

static enum MHD_Result on_ops(struct http_server *srv, struct MHD_Connection *conn,
                              const char *url, const char *method)
{
    static const char *const allow[] = {"Allow", "GET, HEAD", NULL};
    static const char *const nocache[] = {"Cache-Control", "no-store", NULL};
    char who[HUTCH_MAX_PRINCIPAL_NAME + 1];
    int given = 0, authed = authorized(srv, conn, who, sizeof(who), &given);

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                          "Method Not Allowed: use GET\n", allow);
    if (strcmp(url, "/healthz") == 0)
        return reply_text(conn, MHD_HTTP_OK, "ok\n", nocache);
    if (strcmp(url, "/readyz") == 0) {
        int ready = 0;
        cJSON *o = hutch_metrics_ready(srv->jobs, srv->upstreams, authed, &ready);
        char *body = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        if (!body)
            return MHD_NO;
        return reply(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                     "application/json", body, strlen(body), MHD_RESPMEM_MUST_FREE,
                     nocache);
    }
    /* /metrics */
    if (!authed) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s\n", unauthorized_msg(given));
        return reply(conn, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8", msg,
                     strlen(msg), MHD_RESPMEM_MUST_COPY, www_authenticate(given));
    }
    {
        struct hutch_buf b;
        size_t len = 0;
        char *body;
        hutch_buf_init(&b, HUTCH_METRICS_MAX_BYTES);
        if (hutch_metrics_render(srv->jobs, srv->upstreams, &b) < 0) {
            hutch_buf_free(&b);
            return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "Internal Server Error: the metrics do not fit\n", NULL);
        }
        body = hutch_buf_steal(&b, &len);
        if (!body)
            return MHD_NO;
        return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                     body, len, MHD_RESPMEM_MUST_FREE, nocache);
    }
}

static int is_ops_path(const char *url)
{
    return !strcmp(url, "/healthz") || !strcmp(url, "/readyz") ||
           !strcmp(url, "/metrics");
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
    const char *a = header(conn, MHD_HTTP_HEADER_ACCEPT);

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
        session_unref(rq->hs);
    free(rq);
}

/* ---------------------------------------------------------------------- */
/* Handlers */

/* Wait for the final message.  A long tool call is not an idle connection,
 * so MHD's timeout is off meanwhile (setting it again restarts its clock).
 * Returns 0, -ECANCELED when the server stops, -ECONNRESET when the client
 * left. */
static int stream_wait_done(struct http_stream *st)
{
    int rc = 0;

    MHD_set_connection_option(st->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    pthread_mutex_lock(&st->mu);
    while (!st->done) {
        if (stopping(st->srv)) {
            rc = -ECANCELED;
            break;
        }
        if (client_gone(st->conn)) {
            rc = -ECONNRESET;
            break;
        }
        cond_wait_ms(&st->cv, &st->mu, HUTCH_HTTP_TICK_MS);
    }
    pthread_mutex_unlock(&st->mu);
    MHD_set_connection_option(st->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              HUTCH_HTTP_CONN_TIMEOUT_S);
    return rc;
}

/* MHD_ContentReaderCallback of an SSE response: blocks (this connection
 * has its own thread) until there is something to send. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    static const char keepalive[] = ": keepalive\n\n";
    struct http_stream *st = cls;
    ssize_t n;

    pthread_mutex_lock(&st->mu);
    for (;;) {
        struct http_msg *m = st->head;
        uint64_t now;

        if (m) {
            size_t left = m->len - st->off, k = left < max ? left : max;
            memcpy(buf, m->data + st->off, k);
            st->off += k;
            if (st->off == m->len) {
                st->head = m->next;
                if (!st->head)
                    st->tail = NULL;
                st->queued -= m->len;
                st->off = 0;
                m->next = NULL;
                msgs_free(m);
            }
            n = (ssize_t)k;
            break;
        }
        if (st->done) {
            n = MHD_CONTENT_READER_END_OF_STREAM;
            break;
        }
        if (stopping(st->srv) || client_gone(st->conn)) {
            n = MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        }
        /* Comments keep proxies and clients with read timeouts from
         * giving up on a long execution, and MHD's idle timer fed. */
        now = hutch_now_ms();
        if (now - st->last_out >= HUTCH_HTTP_KEEPALIVE_MS &&
            max >= sizeof(keepalive) - 1) {
            memcpy(buf, keepalive, sizeof(keepalive) - 1);
            n = (ssize_t)(sizeof(keepalive) - 1);
            break;
        }
        cond_wait_ms(&st->cv, &st->mu, HUTCH_HTTP_TICK_MS);
    }
    if (n > 0)
        st->last_out = hutch_now_ms();
    pthread_mutex_unlock(&st->mu);
    return n;
}

static void sse_free(void *cls)
{
    struct http_stream *st = cls;
    struct http_session *owner = hutch_steal(&st->owner);

    stream_abandon(st);
    /* The request's own session ends with its response (session_destroy:
     * what still runs is cancelled). */
    if (owner)
        session_unref(owner);
    stream_unref(st);
}

/* The stream is done: everything it holds in one buffer (the final message
 * for JSON, every event for SSE).  NULL when nothing came. */
static char *stream_take_all(struct http_stream *st, size_t *len)
{
    struct http_msg *m;
    size_t total = 0;
    char *out, *p;

    pthread_mutex_lock(&st->mu);
    m = st->head;
    st->head = st->tail = NULL;
    st->queued = 0;
    pthread_mutex_unlock(&st->mu);
    if (!m)
        return NULL;
    if (!m->next) { /* the usual case: hand the buffer over as it is */
        out = m->data;
        *len = m->len;
        free(m);
        return out;
    }
    for (struct http_msg *i = m; i; i = i->next)
        total += i->len;
    out = malloc(total ? total : 1);
    if (out) {
        p = out;
        for (struct http_msg *i = m; i; i = i->next) {
            memcpy(p, i->data, i->len);
            p += i->len;
        }
        *len = total;
    }
    msgs_free(m);
    return out;
}

/* Answer a request whose stream is done, with Mcp-Session-Id when the
 * request created a session. */
static enum MHD_Result reply_done(struct MHD_Connection *conn, struct http_stream *st,
                                  const char *session_id)
{
    const char *hdrs[5] = {NULL};
    size_t len = 0, h = 0;
    char *body = stream_take_all(st, &len);

    if (!body) {
        if (stopping(st->srv))
            return reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                               "Service Unavailable: server shutting down", NULL);
        return reply_error(conn, MHD_HTTP_NOT_FOUND, -32001,
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
    return reply(conn, MHD_HTTP_OK, st->sse ? "text/event-stream" : "application/json",
                 body, len, MHD_RESPMEM_MUST_FREE, hdrs);
}

static enum MHD_Result reply_sse_stream(struct MHD_Connection *conn,
                                        struct http_stream *st)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    stream_ref(st); /* the response's, dropped by sse_free */
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, sse_read, st,
                                          sse_free);
    if (!r) {
        stream_unref(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static int stream_is_done(struct http_stream *st)
{
    int done;

    pthread_mutex_lock(&st->mu);
    done = st->done;
    pthread_mutex_unlock(&st->mu);
    return done;
}

/* POST of a message that creates a session (initialize, no Mcp-Session-Id).
 * The answer is awaited whatever the Accept header says: whether to hand
 * out the session id depends on it. */
static enum MHD_Result post_initialize(struct http_session *hs, struct http_stream *st,
                                       int request)
{
    struct MHD_Connection *conn = st->conn;
    enum MHD_Result ret;
    int rc = request ? stream_wait_done(st) : 0;
    /* No version agreed means initialize failed: forget the session rather
     * than hand out an id nobody can use. */
    int keep = rc == 0 && hutch_mcp_session_protocol(hs->s) != NULL;

    session_settle(hs, keep);
    if (keep)
        hutch_info("session %.8s started", hs->id);
    if (rc == -ECONNRESET)
        ret = MHD_NO;
    else if (rc == -ECANCELED)
        ret = reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                          "Service Unavailable: server shutting down", NULL);
    else if (!request)
        ret = reply_empty(conn, MHD_HTTP_ACCEPTED);
    else
        ret = reply_done(conn, st, keep ? hs->id : NULL);
    session_unref(hs);
    return ret;
}

/* A message refused before any session sees it, with the status the
 * revision gives its error (400 for most, 404 for an unknown method). */
static enum MHD_Result reply_refusal(struct MHD_Connection *conn,
                                     struct hutch_mcp_msg *m)
{
    char *text = hutch_mcp_msg_refusal(m);

    if (!text)
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                           "Out of memory", NULL);
    hutch_debug("http %u: %s", m->v.http_status, m->why);
    return reply(conn, m->v.http_status ? m->v.http_status : MHD_HTTP_BAD_REQUEST,
                 "application/json", text, strlen(text), MHD_RESPMEM_MUST_FREE, NULL);
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
    hs = session_transient(srv, rq->principal);
    if (!hs)
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                           "Internal error: cannot serve the request", NULL);
    st = stream_new(srv, conn, accepts_sse(conn));
    if (!st) {
        session_unref(hs);
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                           "Out of memory", NULL);
    }
    pending_add(hs, st);
    hutch_mcp_session_deliver(hs->s, m, st);
    if (st->sse && !stream_is_done(st)) {
        st->owner = hs; /* sse_free drops it */
        ret = reply_sse_stream(conn, st);
        if (ret == MHD_NO) {
            /* Unless the response was made and sse_free dropped it. */
            hs = hutch_steal(&st->owner);
            stream_abandon(st);
            if (hs)
                session_unref(hs);
        }
        stream_unref(st);
        return ret;
    }
    rc = stream_wait_done(st);
    ret = rc == -ECONNRESET ? MHD_NO : reply_done(conn, st, NULL);
    stream_abandon(st);
    session_unref(hs);
    stream_unref(st);
    return ret;
}

static enum MHD_Result on_post(struct http_server *srv, struct MHD_Connection *conn,
                               struct http_req *rq)
{
    struct http_session *hs = hutch_steal(&rq->hs);
    const char *body = rq->body.data ? rq->body.data : "";
    const struct hutch_mcp_headers h = {header(conn, "MCP-Protocol-Version"),
                                        header(conn, "Mcp-Method"),
                                        header(conn, "Mcp-Name")};
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
            session_unref(hs); /* its session id means nothing here */
        ret = m.refused ? reply_refusal(conn, &m) : post_modern(srv, conn, rq, &m);
        hutch_mcp_msg_clear(&m);
        return ret;
    }
    if (!hs) {
        unsigned status = 0;
        const char *why = NULL;

        if (!m.method || strcmp(m.method, "initialize") != 0 || !m.id) {
            hutch_mcp_msg_clear(&m);
            return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32000,
                               "Bad Request: Mcp-Session-Id header is required", NULL);
        }
        hs = session_create(srv, rq->principal, &status, &why);
        if (!hs) {
            hutch_mcp_msg_clear(&m);
            return reply_error(conn, status, -32000, why, NULL);
        }
        init = 1;
    }

    st = stream_new(srv, conn, accepts_sse(conn));
    if (!st) {
        hutch_mcp_msg_clear(&m);
        if (init)
            session_settle(hs, 0);
        session_unref(hs);
        return reply_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                           "Out of memory", NULL);
    }
    /* Listed before delivery: the answer may come before it returns. */
    pending_add(hs, st);
    r = hutch_mcp_session_deliver(hs->s, &m, st);
    hutch_mcp_msg_clear(&m);
    if (r == 0)
        pending_release(st); /* nothing will come for it */

    if (init) {
        ret = post_initialize(hs, st, r);
    } else {
        session_unref(hs);
        if (r == 0) {
            ret = reply_empty(conn, MHD_HTTP_ACCEPTED);
        } else if (st->sse && !stream_is_done(st)) {
            /* Headers now, events as they come; the response keeps the
             * stream alive from here. */
            ret = reply_sse_stream(conn, st);
            stream_unref(st);
            return ret;
        } else {
            int rc = stream_wait_done(st);
            ret = rc == -ECONNRESET ? MHD_NO : reply_done(conn, st, NULL);
        }
    }
    stream_abandon(st);
    stream_unref(st);
    return ret;
}

static enum MHD_Result on_delete(struct http_server *srv, struct MHD_Connection *conn,
                                 struct http_req *rq)
{
    struct http_session *hs = hutch_steal(&rq->hs);

    hutch_info("session %.8s ended by the client", hs->id);
    hutch_metrics_http(HUTCH_HTTP_SESSION_CLIENT, 1);
    session_end(hs);
    session_unref(hs);
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
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32000,
                           "Bad Request: more than one Host header", NULL);
    if (srv->loopback && (why = rebinding_check(conn)) != NULL)
        return reply_error(conn, MHD_HTTP_FORBIDDEN, -32000, why, NULL);
    /* No OAuth metadata here, for anyone (see the top of this file). */
    if (strncmp(url, "/.well-known/", 13) == 0)
        return reply_text(conn, MHD_HTTP_NOT_FOUND,
                          "Not found: hutch has no OAuth; send its static token as "
                          "Authorization: Bearer <token>\n",
                          NULL);
    if (is_ops_path(url))
        return on_ops(srv, conn, url, method);
    if (!authorized(srv, conn, who, sizeof(who), &given))
        return reply_error(conn, MHD_HTTP_UNAUTHORIZED, -32000, unauthorized_msg(given),
                           www_authenticate(given));
    if (strcmp(url, HTTP_PATH) != 0)
        return reply_text(conn, MHD_HTTP_NOT_FOUND,
                          "Not found: hutch serves MCP at /mcp\n", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        return reply_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, -32000,
                           "Method Not Allowed: hutch offers no standalone SSE stream",
                           allow);
    if (!post && strcmp(method, MHD_HTTP_METHOD_DELETE) != 0)
        return reply_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, -32000,
                           "Method Not Allowed", allow);
    if (post) {
        ctype = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (!ctype || !is_json_type(ctype))
            return reply_error(
                conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32000,
                "Unsupported Media Type: Content-Type must be application/json", NULL);
        /* MHD has checked it is a number: failing here means it overflows. */
        clen = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (clen && (hutch_parse_u64(clen, 0, UINT64_MAX, &len) < 0 ||
                     len > HUTCH_HTTP_MAX_BODY)) {
            char msg[96];
            snprintf(msg, sizeof(msg), "Payload Too Large: the limit is %u bytes",
                     HUTCH_HTTP_MAX_BODY);
            return reply_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, -32000, msg, NULL);
        }
    }
    sid = header(conn, "Mcp-Session-Id");
    version = header(conn, "MCP-Protocol-Version");
    /* Not on a session-less initialize: the version is still to be agreed;
     * nor on a 2026 one, whose body decides (mcp_era.h). */
    if (sid && version && !hutch_mcp_protocol_supported(version) &&
        !hutch_mcp_version_modern(version) &&
        strcmp(version, HTTP_DEFAULT_VERSION) != 0)
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32000,
                           "Bad Request: unsupported MCP-Protocol-Version", NULL);
    if (!sid && !post)
        return reply_error(conn, MHD_HTTP_BAD_REQUEST, -32000,
                           "Bad Request: Mcp-Session-Id header is required", NULL);

    rq = calloc(1, sizeof(*rq));
    if (!rq)
        return MHD_NO;
    rq->post = post;
    snprintf(rq->principal, sizeof(rq->principal), "%s", who);
    hutch_buf_init(&rq->body, HUTCH_HTTP_MAX_BODY);
    if (len && reserve(srv, rq, len) < 0) {
        req_free(srv, rq);
        return reply_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                           "Service Unavailable: too many uploads at once", NULL);
    }
    if (sid) {
        rq->hs = session_lookup(srv, sid);
        /* A session belongs to the principal that opened it: to anyone
         * else it does not exist. */
        if (!rq->hs || strcmp(rq->hs->principal, rq->principal) != 0) {
            req_free(srv, rq);
            return reply_error(conn, MHD_HTTP_NOT_FOUND, -32001, "Session not found",
                               NULL);
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
        struct hutch_http_conn *c = guard_conn(conn);
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
    struct hutch_http_conn *c = guard_conn(conn);

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

/* The caps an operator may set, each from its environment variable
 * (man/hutch.1): a value out of range is an error, never silently the
 * default.  per_address 0 in the table: half the connection limit. */
static const struct knob {
    const char *env;
    size_t off;
    unsigned dflt, min, max;
} knobs[] = {
    {"HUTCH_HTTP_MAX_SESSIONS", offsetof(struct http_knobs, max_sessions),
     HUTCH_HTTP_MAX_SESSIONS, 1, HUTCH_HTTP_SESSIONS_MAX},
    {"HUTCH_HTTP_MAX_SESSIONS_PER_PRINCIPAL",
     offsetof(struct http_knobs, per_principal), HUTCH_HTTP_MAX_SESSIONS_PER_PRINCIPAL,
     1, HUTCH_HTTP_SESSIONS_MAX},
    {"HUTCH_HTTP_SESSION_IDLE_MS", offsetof(struct http_knobs, idle_ms),
     HUTCH_HTTP_SESSION_IDLE_MS, HUTCH_HTTP_SESSION_IDLE_MIN_MS,
     HUTCH_HTTP_SESSION_IDLE_MAX_MS},
    {"HUTCH_HTTP_MAX_CONNECTIONS", offsetof(struct http_knobs, max_conns),
     HUTCH_HTTP_MAX_CONNECTIONS, HUTCH_HTTP_MAX_CONNECTIONS_MIN,
     HUTCH_HTTP_MAX_CONNECTIONS_MAX},
    {"HUTCH_HTTP_MAX_CONNECTIONS_PER_ADDRESS", offsetof(struct http_knobs, per_address),
     0, 0, HUTCH_HTTP_MAX_CONNECTIONS_MAX},
    {"HUTCH_HTTP_HEAD_TIMEOUT_MS", offsetof(struct http_knobs, head_ms),
     HUTCH_HTTP_HEAD_TIMEOUT_MS, HUTCH_HTTP_HEAD_TIMEOUT_MIN_MS,
     HUTCH_HTTP_HEAD_TIMEOUT_MAX_MS},
};

static int knobs_read(struct http_knobs *k, struct hutch_err *err)
{
    int per_address_set = 0;

    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
        const char *env = getenv(knobs[i].env);
        unsigned *v = (unsigned *)((char *)k + knobs[i].off);
        uint64_t x;

        *v = knobs[i].dflt;
        if (!env || !*env)
            continue;
        if (hutch_parse_u64(env, knobs[i].min, knobs[i].max, &x) < 0)
            return hutch_err_set(err, -EINVAL, "%s=%s: want a number from %u to %u",
                                 knobs[i].env, env, knobs[i].min, knobs[i].max);
        *v = (unsigned)x;
        per_address_set |= knobs[i].off == offsetof(struct http_knobs, per_address);
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

int hutch_http_serve(struct hutch_mcp *m, struct hutch_http_opts *opts,
                     volatile sig_atomic_t *stop, struct hutch_err *err)
{
    const char *addr = opts->addr ? opts->addr : "127.0.0.1";
    const struct timespec tick = {0, 50 * 1000000L};
    char a[INET6_ADDRSTRLEN];
    struct http_server srv;
    union sockaddr_any sa;
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;
    struct hutch_http_guard_stats said = {0}, counted = {0};
    int v6, loopback, rc, e;
    uint64_t last_sweep, last_said, sweep_ms;
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
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
            MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    errno = 0;
    d = MHD_start_daemon(flags, opts->port, NULL, NULL, on_request, &srv,
                         MHD_OPTION_SOCK_ADDR, &sa.sa, MHD_OPTION_CONNECTION_LIMIT,
                         srv.k.max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                         srv.k.per_address, MHD_OPTION_CONNECTION_TIMEOUT,
                         HUTCH_HTTP_CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                         (size_t)HUTCH_HTTP_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, &srv, MHD_OPTION_NOTIFY_CONNECTION,
                         on_connection, &srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
                         &srv, MHD_OPTION_END);
    if (!d) {
        e = errno ? errno : EIO;
        hutch_http_guard_free(srv.guard);
        pthread_mutex_destroy(&srv.mu);
        return hutch_err_set(err, -e, "cannot listen on %s port %u: %s", addr,
                             (unsigned)opts->port,
                             srv.start_msg[0] ? srv.start_msg : strerror(e));
    }
    __atomic_store_n(&srv.started, 1, __ATOMIC_RELEASE);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    opts->bound_port = info && info->port ? info->port : opts->port;
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
    while (!*stop) {
        uint64_t now;
        nanosleep(&tick, NULL);
        now = hutch_now_ms();
        hutch_http_guard_tick(srv.guard, now);
        guard_count(&srv, &counted);
        if (now - last_said >= HUTCH_HTTP_GUARD_LOG_MS &&
            (counted.head_timeouts != said.head_timeouts ||
             counted.evicted != said.evicted)) {
            guard_report(&srv, &said);
            last_said = now;
        }
        if (now - last_sweep >= sweep_ms) {
            sessions_sweep(&srv, 0);
            last_sweep = now;
        }
    }

    /* Waiting handlers see this within HUTCH_HTTP_TICK_MS, so that stopping MHD
     * (which joins every connection thread) does not hang. */
    __atomic_store_n(&srv.stopping, 1, __ATOMIC_RELEASE);
    MHD_stop_daemon(d);
    sessions_sweep(&srv, 1);
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
