/* http_guard.c — deadlines and shares of connections that have not
 * authenticated (see http_guard.h).
 *
 * One list of every connection the transport holds, oldest first; the
 * counts are found by walking it, which the connection limit keeps short.
 * A connection the guard shut down stays listed (marked closing, counted
 * nowhere) until the transport says it ended: its descriptor is not closed
 * before that, so no shutdown can reach a descriptor reused meanwhile.
 *
 * Not here: reading requests (http.c), tokens (http_auth.c). */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "http_guard.h"

struct hutch_http_conn {
    struct hutch_http_conn *prev, *next;
    int fd;
    unsigned char addr[16]; /* an IPv4 address, or an IPv6 /64, zero-padded */
    int family;             /* 0: unknown (all such share one address) */
    uint64_t since;         /* waiting for a head since; 0: a request is handled */
    uint64_t deadline;      /* while waiting */
    int trusted;
    int closing; /* shut down here; the transport is not done with it yet */
};

struct hutch_http_guard {
    pthread_mutex_t mu;
    struct hutch_http_guard_opts o;
    struct hutch_http_conn *head, *tail;
    struct hutch_http_guard_stats stats;
};

struct hutch_http_guard *hutch_http_guard_new(const struct hutch_http_guard_opts *o)
{
    struct hutch_http_guard *g = calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->o = *o;
    if (!g->o.max_unauth)
        g->o.max_unauth = 1;
    if (!g->o.per_address)
        g->o.per_address = 1;
    if (!g->o.grace_ms)
        g->o.grace_ms = HUTCH_HTTP_ROOM_GRACE_MS;
    if (!g->o.room_grace_ms)
        g->o.room_grace_ms = HUTCH_HTTP_ROOM_PRESSED_GRACE_MS;
    if (g->o.room_grace_ms > g->o.grace_ms)
        g->o.room_grace_ms = g->o.grace_ms;
    if (!g->o.reserve)
        g->o.reserve = 1;
    if (g->o.reserve > g->o.max_conns)
        g->o.reserve = g->o.max_conns;
    return g;
}

void hutch_http_guard_free(struct hutch_http_guard *g)
{
    if (!g)
        return;
    while (g->head) {
        struct hutch_http_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void set_address(struct hutch_http_conn *c, const struct sockaddr *sa)
{
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        c->family = AF_INET;
        memcpy(c->addr, &v4->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
            c->family = AF_INET; /* as the IPv4 client it is */
            memcpy(c->addr, v6->sin6_addr.s6_addr + 12, 4);
        } else {
            /* One host is given a /64: counting addresses within it would
             * give it 2^64 shares. */
            c->family = AF_INET6;
            memcpy(c->addr, v6->sin6_addr.s6_addr, 8);
        }
    }
}

static int same_address(const struct hutch_http_conn *a,
                        const struct hutch_http_conn *b)
{
    return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* Waiting for a head without having authenticated: what the shares count
 * and what may be closed to make room. */
static int unauth_waiting(const struct hutch_http_conn *c)
{
    return !c->closing && !c->trusted && c->since;
}

/* Under g->mu. */
static void shut(struct hutch_http_conn *c)
{
    /* Both ways: the transport's read sees the end at once. */
    shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
}

/* A complete request head waits in the socket's receive buffer: the client
 * sent it at once, and the connection's thread has not read it yet (a
 * burst of new connections, a busy machine).  Not a slow client: it is
 * about to be served, and is never closed to make room.  (A head its
 * thread has read but not yet handed over is not seen here: that window
 * is the time to parse it.) */
static int head_arrived(const struct hutch_http_conn *c)
{
    char b[HUTCH_HTTP_HEAD_PEEK];
    ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

    return n >= 4 && memmem(b, (size_t)n, "\r\n\r\n", 4) != NULL;
}

/* Under g->mu: the oldest unauthenticated connection waiting for a head,
 * other than `keep`, from `like`'s address when `like` is set, that has
 * had `grace` ms to send its head and has not sent it whole.  A client that
 * opens many connections at once connects them all before it writes on
 * any: at the accept of its 17th, the first may hold nothing yet. */
static struct hutch_http_conn *oldest_unauth(struct hutch_http_guard *g,
                                             const struct hutch_http_conn *keep,
                                             const struct hutch_http_conn *like,
                                             uint64_t now, unsigned grace)
{
    struct hutch_http_conn *best = NULL;

    for (struct hutch_http_conn *c = g->head; c; c = c->next)
        if (c != keep && unauth_waiting(c) && (!like || same_address(c, like)) &&
            (!best || c->since < best->since) && now - c->since >= grace &&
            !head_arrived(c))
            best = c;
    return best;
}

/* Under g->mu: fewer than `reserve` places of the limit are free. */
static int pressed(const struct hutch_http_guard *g)
{
    unsigned live = 0;

    for (const struct hutch_http_conn *i = g->head; i; i = i->next)
        live += !i->closing;
    return live + g->o.reserve > g->o.max_conns;
}

/* Under g->mu: make room, as http_guard.h says, for `c` that just came
 * (keep == c: it is not the one closed), or, from the tick, around `c`
 * that is waiting (keep NULL: the oldest may be c itself). */
static void make_room(struct hutch_http_guard *g, struct hutch_http_conn *c,
                      const struct hutch_http_conn *keep, uint64_t now)
{
    for (;;) {
        unsigned unauth = 0, here = 0;
        struct hutch_http_conn *victim = NULL;

        for (struct hutch_http_conn *i = g->head; i; i = i->next) {
            if (unauth_waiting(i)) {
                unauth++;
                here += same_address(i, c);
            }
        }
        /* Past a share with nobody of it to close (their heads have
         * arrived), the next rule decides. */
        if (here > g->o.per_address)
            victim = oldest_unauth(g, keep, c, now, g->o.grace_ms);
        if (!victim && unauth > g->o.max_unauth)
            victim = oldest_unauth(g, keep, NULL, now, g->o.grace_ms);
        /* The transport refuses a connection past its limit, and counts
         * one closed here until its thread is done with it: keep `reserve`
         * places free for the next ones as long as an unauthenticated
         * connection can give one up.  Pressed for room, a connection has
         * only room_grace_ms to send its head: a client that reconnects
         * at once whenever it is closed would otherwise keep a second of
         * its connections each out of the shares' reach. */
        if (!victim && pressed(g))
            victim = oldest_unauth(g, keep, NULL, now, g->o.room_grace_ms);
        if (!victim)
            return;
        shut(victim);
        g->stats.evicted++;
    }
}

/* Under g->mu: `c` just came, and the limit is pressed.  A client that
 * reconnects at once whenever one of its connections is closed would keep
 * the places freed for others filled with connections in their grace, and
 * the transport refuses everyone past its limit: so a newcomer from an
 * address that already has a connection waiting room_grace_ms or more
 * without its whole head is closed at once, unless its own head is
 * already there.  A client at another address, one that sends its head at
 * once, and a burst of connections from one address (each read within
 * room_grace_ms) still get in. */
static int bounce(struct hutch_http_guard *g, struct hutch_http_conn *c, uint64_t now)
{
    if (!pressed(g) || head_arrived(c))
        return 0;
    for (struct hutch_http_conn *i = g->head; i; i = i->next)
        if (i != c && unauth_waiting(i) && same_address(i, c) &&
            now - i->since >= g->o.room_grace_ms && !head_arrived(i)) {
            shut(c);
            g->stats.evicted++;
            return 1;
        }
    return 0;
}

struct hutch_http_conn *hutch_http_guard_open(struct hutch_http_guard *g, int fd,
                                              const struct sockaddr *sa,
                                              uint64_t now_ms)
{
    struct hutch_http_conn *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->fd = fd;
    set_address(c, sa);
    c->since = now_ms ? now_ms : 1;
    c->deadline = now_ms + g->o.head_ms;
    pthread_mutex_lock(&g->mu);
    c->prev = g->tail;
    if (g->tail)
        g->tail->next = c;
    else
        g->head = c;
    g->tail = c;
    if (!bounce(g, c, now_ms))
        make_room(g, c, c, now_ms);
    pthread_mutex_unlock(&g->mu);
    return c;
}

void hutch_http_guard_head(struct hutch_http_guard *g, struct hutch_http_conn *c)
{
    pthread_mutex_lock(&g->mu);
    c->since = 0;
    pthread_mutex_unlock(&g->mu);
}

void hutch_http_guard_trust(struct hutch_http_guard *g, struct hutch_http_conn *c)
{
    pthread_mutex_lock(&g->mu);
    c->trusted = 1;
    pthread_mutex_unlock(&g->mu);
}

void hutch_http_guard_idle(struct hutch_http_guard *g, struct hutch_http_conn *c,
                           uint64_t now_ms)
{
    pthread_mutex_lock(&g->mu);
    c->since = now_ms ? now_ms : 1;
    c->deadline = now_ms + (c->trusted ? g->o.trusted_ms : g->o.head_ms);
    /* A connection that comes back to waiting counts as a newcomer. */
    if (!c->trusted && !c->closing)
        make_room(g, c, c, now_ms);
    pthread_mutex_unlock(&g->mu);
}

void hutch_http_guard_close(struct hutch_http_guard *g, struct hutch_http_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        g->tail = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

unsigned hutch_http_guard_tick(struct hutch_http_guard *g, uint64_t now_ms)
{
    unsigned n = 0;

    pthread_mutex_lock(&g->mu);
    for (struct hutch_http_conn *c = g->head; c; c = c->next)
        if (!c->closing && c->since && now_ms >= c->deadline) {
            shut(c);
            n++;
        }
    g->stats.head_timeouts += n;
    /* What a share could not close yet (too young, or its head was on its
     * way) is closed once it may be. */
    for (struct hutch_http_conn *c = g->head; c; c = c->next)
        if (unauth_waiting(c))
            make_room(g, c, NULL, now_ms);
    pthread_mutex_unlock(&g->mu);
    return n;
}

void hutch_http_guard_stats(struct hutch_http_guard *g,
                            struct hutch_http_guard_stats *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->stats;
    pthread_mutex_unlock(&g->mu);
}
