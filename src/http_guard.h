/* http_guard.h — who may hold a connection of `hutch serve --http` before
 * it has said who it is (slowloris and its kin).
 *
 * A connection is unauthenticated until one of its requests carried a
 * valid token.  While it waits for a request head it must complete that
 * head within head_ms of connecting (or of its previous response), however
 * slowly it trickles bytes; unauthenticated connections waiting for a head
 * take at most max_unauth of the connection limit, at most per_address of
 * them from one client address (an IPv4 address, an IPv6 /64), and the
 * oldest of them is closed to make room for a newer one: so a client that
 * sends its head at once always gets in, and the rest of the limit stays
 * for authenticated clients.  Not closed for room: one younger than
 * grace_ms (a client that opens many connections at once connects them all
 * before it writes on any), and one whose complete head already waits in
 * its socket's receive buffer (it sent its head at once and is about to be
 * served); hutch_http_guard_tick closes, once they may be, what the shares
 * could not close yet.  The oldest is also closed to keep `reserve` places
 * of the limit free (the transport refuses a connection past its limit):
 * then a connection has only room_grace_ms, shorter than grace_ms, to send
 * its head, and a newcomer from an address that already has one waiting
 * that long without its head is closed at once, so that a client that
 * reconnects at once each time it is closed cannot fill the limit with
 * connections still in their grace.  An authenticated connection may wait
 * for its next head up to trusted_ms (a deadline, not an idle timer that
 * each byte restarts).  A connection whose request is being handled is never touched
 * here: a long execution is not an idle connection.
 *
 * Knows nothing of HTTP or libmicrohttpd: the transport says when a
 * connection starts, when a request head arrives (and whether it
 * authenticated), when a response is done and when the connection ends;
 * the guard closes a connection by shutdown(2) of its socket, which the
 * transport then sees end as any other.  The descriptor stays the
 * transport's: it must call hutch_http_guard_close before it closes it, so
 * that a shutdown never reaches a reused descriptor.
 *
 * Thread-safe: one mutex; every call is O(connections), which the
 * connection limit bounds. */
#ifndef HUTCH_HTTP_GUARD_H
#define HUTCH_HTTP_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

struct hutch_http_guard;
struct hutch_http_conn;

struct hutch_http_guard_opts {
    unsigned max_conns;     /* the transport's connection limit */
    unsigned max_unauth;    /* unauthenticated connections waiting for a head */
    unsigned per_address;   /* … of them from one client address */
    unsigned head_ms;       /* to complete a request head, unauthenticated */
    unsigned trusted_ms;    /* to complete the next head, authenticated */
    unsigned grace_ms;      /* never closed for a share younger; 0: the default */
    unsigned reserve;       /* places of max_conns kept free; 0: one */
    unsigned room_grace_ms; /* … for which one younger than grace_ms may be
                             * closed; 0: the default (at most grace_ms) */
};

/* What the guard closed since it was made. */
struct hutch_http_guard_stats {
    uint64_t head_timeouts; /* no complete head in time */
    uint64_t evicted;       /* the oldest unauthenticated, to make room */
};

/* NULL when out of memory. */
struct hutch_http_guard *hutch_http_guard_new(const struct hutch_http_guard_opts *o);
void hutch_http_guard_free(struct hutch_http_guard *g);

/* A connection started (fd its socket, sa the client's address, may be
 * NULL): it waits for its first head.  Makes room for it as said above.
 * NULL when out of memory: the caller should close the connection. */
struct hutch_http_conn *hutch_http_guard_open(struct hutch_http_guard *g, int fd,
                                              const struct sockaddr *sa,
                                              uint64_t now_ms);
/* A request head is complete: the connection is busy until _idle. */
void hutch_http_guard_head(struct hutch_http_guard *g, struct hutch_http_conn *c);
/* That request carried a valid token: the connection is authenticated
 * from now on. */
void hutch_http_guard_trust(struct hutch_http_guard *g, struct hutch_http_conn *c);
/* Its response is done: it waits for its next head. */
void hutch_http_guard_idle(struct hutch_http_guard *g, struct hutch_http_conn *c,
                           uint64_t now_ms);
/* The connection ends (before its descriptor is closed): frees c. */
void hutch_http_guard_close(struct hutch_http_guard *g, struct hutch_http_conn *c);
/* Closes the connections past their deadline; how many it closed. */
unsigned hutch_http_guard_tick(struct hutch_http_guard *g, uint64_t now_ms);
void hutch_http_guard_stats(struct hutch_http_guard *g,
                            struct hutch_http_guard_stats *out);

#endif
