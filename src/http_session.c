/* http_session.c — the session table of `hutch serve --http`: the 2025
 * sessions, found by their Mcp-Session-Id, each usable by the principal
 * that made it alone; and the 2026-07-28 requests' own sessions beside it.
 *
 * The table's caps, in all and per principal (caps.h; the HUTCH_HTTP_*
 * knobs, read by http.c): a principal at its share gives up its own
 * oldest idle session; a full table is taken from whoever holds the most
 * (their oldest idle session); with nothing idle to give up, the new
 * session is refused with 503.  Sessions idle for the idle time expire
 * (http_sessions_sweep, on the thread that runs the server); a session
 * with a request in flight is not idle, however long the request runs.  A
 * 2026-07-28 request's session is outside the table and its caps: it
 * lives as long as its request, and dropping it cancels what still runs.
 *
 * Locks: the server's mu guards the table and every session's refs (the
 * table's while linked, plus one for each request using it); whoever drops
 * the last ref destroys the session, outside the lock (http_int.h).
 *
 * Not here: the MCP session itself (mcp_server.c); the streams a session's
 * requests are answered on (http_stream.c); who may ask (http_auth.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "http_int.h"
#include "log.h"
#include "mcp_server.h"
#include "metrics.h"
#include "util.h"

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
            http_pending_unlink_locked(st);
        pthread_mutex_unlock(&srv->mu);
        if (!st)
            break;
        http_stream_finish(st);
        http_stream_unref(st);
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

void http_session_unref(struct http_session *hs)
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

struct http_session *http_session_lookup(struct http_server *srv, const char *id)
{
    struct http_session *hs;
    size_t n = strlen(id);

    pthread_mutex_lock(&srv->mu);
    for (hs = srv->sessions; hs; hs = hs->next) {
        if (hs->ready && http_secret_equal(hs->id, strlen(hs->id), id, n)) {
            hs->refs++;
            hs->last_used = hutch_now_ms();
            hs->began = ++srv->began;
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
 * session.  The oldest idle session (whose latest request began first:
 * `began`, not `last_used`, which a request's end sets, and the end of a
 * client's request may come after its next began, on another connection's
 * thread) of the principal holding the most,
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
        if (session_idle(hs) && (!h[i].oldest || hs->began < h[i].oldest->began))
            h[i].oldest = hs;
    }
    for (size_t i = 0; i < nh; i++) {
        if (h[i].n <= mine || !h[i].oldest)
            continue;
        if (!best || h[i].n > best->n ||
            (h[i].n == best->n && h[i].oldest->began < best->oldest->began))
            best = &h[i];
    }
    {
        struct http_session *victim = best ? best->oldest : NULL;
        free(h);
        return victim;
    }
}

/* A new 2025 session for `principal`, in the table but not findable until
 * its initialize succeeded (http_session_settle).  Makes room as the top of
 * this file says; the session it ended for that is destroyed here.  NULL
 * with the HTTP status and why. */
struct http_session *http_session_create(struct http_server *srv, const char *principal,
                                         unsigned *status, const char **why)
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
        hs->s = hutch_mcp_session_new(srv->m, http_on_send, hs, principal);
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
        if (session_idle(i) && (!mine_oldest || i->began < mine_oldest->began))
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
    hs->began = ++srv->began; /* its initialize */
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
struct http_session *http_session_transient(struct http_server *srv,
                                            const char *principal)
{
    struct http_session *hs = calloc(1, sizeof(*hs));

    if (!hs)
        return NULL;
    hs->srv = srv;
    hs->transient = 1;
    snprintf(hs->principal, sizeof(hs->principal), "%s", principal);
    hs->s = hutch_mcp_session_new(srv->m, http_on_send, hs, principal);
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
void http_session_settle(struct http_session *hs, int keep)
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
void http_session_end(struct http_session *hs)
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
void http_sessions_sweep(struct http_server *srv, int all)
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
