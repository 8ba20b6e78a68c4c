/* http_stream.c — a request's stream in `hutch serve --http`: what the
 * core sends for one request (progress, then the final response), queued
 * on its way to the client, and the connection's side that takes it out:
 * waiting for the final message (a JSON answer), or an SSE response that
 * writes events as they come, with keepalive comments meanwhile.
 *
 * The core sends from any thread, and never blocks doing it (a slow client
 * cannot stall a worker): past HUTCH_HTTP_SSE_MAX_QUEUED, progress
 * messages are dropped, the final one never.  A stream is reference
 * counted so that the HTTP side (client gone, server stopping) and the
 * core (final response, session freed) can each finish first: the request
 * holds a ref, the core one while the stream is pending on its session,
 * an SSE response one until MHD frees it.  The connection's thread blocks
 * on the stream (libmicrohttpd gives every connection its own), waking at
 * least every HUTCH_HTTP_TICK_MS to notice shutdown and a client that
 * went away.
 *
 * Locks: the stream's mu guards its queue; the list of streams pending on
 * a session is under the server's mu; never both at once (http_int.h).
 *
 * Not here: sessions (http_session.c, which calls this file: a stream
 * holds its 2026-07-28 session only through the unref function http.c
 * gives it); reading the request and the JSON answer (http.c). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "http_int.h"
#include "log.h"
#include "util.h"

/* ---------------------------------------------------------------------- */
/* Queueing what the core sends */

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

struct http_stream *http_stream_new(struct http_server *srv,
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

void http_stream_unref(struct http_stream *st)
{
    if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    msgs_free(st->head);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* The HTTP side will read nothing more: free what waits, drop what comes. */
void http_stream_abandon(struct http_stream *st)
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

void http_stream_finish(struct http_stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->done = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* The core now owes this stream a final message: hold a ref for it. */
void http_pending_add(struct http_session *hs, struct http_stream *st)
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

void http_pending_unlink_locked(struct http_stream *st)
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
void http_pending_release(struct http_stream *st)
{
    struct http_server *srv = st->srv;
    int held = 0;

    pthread_mutex_lock(&srv->mu);
    if (st->pending) {
        http_pending_unlink_locked(st);
        held = 1;
    }
    pthread_mutex_unlock(&srv->mu);
    if (held) {
        http_stream_finish(st);
        http_stream_unref(st);
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
void http_on_send(void *arg, void *stream, const char *json, size_t len, int last)
{
    struct http_session *hs = arg;
    struct http_stream *st = stream;

    if (!st) {
        /* No GET stream to carry it (see the top of http.c). */
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
        http_pending_release(st);
}

/* ---------------------------------------------------------------------- */
/* Writing it out */

/* Wait for the final message.  A long tool call is not an idle connection,
 * so MHD's timeout is off meanwhile (setting it again restarts its clock).
 * Returns 0, -ECANCELED when the server stops, -ECONNRESET when the client
 * left. */
int http_stream_wait_done(struct http_stream *st)
{
    int rc = 0;

    MHD_set_connection_option(st->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    pthread_mutex_lock(&st->mu);
    while (!st->done) {
        if (http_stopping(st->srv)) {
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
        if (http_stopping(st->srv) || client_gone(st->conn)) {
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

    http_stream_abandon(st);
    /* The request's own session ends with its response (http_session.c:
     * what still runs is cancelled), through the function http.c left. */
    if (owner)
        st->owner_unref(owner);
    http_stream_unref(st);
}

/* The stream is done: everything it holds in one buffer (the final message
 * for JSON, every event for SSE).  NULL when nothing came. */
char *http_stream_take_all(struct http_stream *st, size_t *len)
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

enum MHD_Result http_reply_sse_stream(struct MHD_Connection *conn,
                                      struct http_stream *st)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    stream_ref(st); /* the response's, dropped by sse_free */
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, sse_read, st,
                                          sse_free);
    if (!r) {
        http_stream_unref(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int http_stream_is_done(struct http_stream *st)
{
    int done;

    pthread_mutex_lock(&st->mu);
    done = st->done;
    pthread_mutex_unlock(&st->mu);
    return done;
}
