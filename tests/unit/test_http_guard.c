/* test_http_guard.c — the connection guard of `hutch serve --http`
 * (http_guard.h) on socket pairs: which connection it closes, and when.
 * A connection is "closed" when its peer reads the end of the stream. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_guard.h"
#include "tap.h"

struct end {
    int ours, peer; /* ours: the guard's descriptor; peer: the client's */
    struct hutch_http_conn *c;
};

static void v4(struct sockaddr_in *sa, const char *ip)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    inet_pton(AF_INET, ip, &sa->sin_addr);
}

static void v6(struct sockaddr_in6 *sa, const char *ip)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &sa->sin6_addr);
}

/* A connection whose client sent `head` (NULL: nothing) before the
 * transport saw it start. */
static int open_end_sent(struct hutch_http_guard *g, struct end *e,
                         const struct sockaddr *sa, uint64_t now, const char *head)
{
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    e->ours = sv[0];
    e->peer = sv[1];
    if (head && write(e->peer, head, strlen(head)) != (ssize_t)strlen(head))
        return -1;
    e->c = hutch_http_guard_open(g, e->ours, sa, now);
    return e->c ? 0 : -1;
}

static int open_end(struct hutch_http_guard *g, struct end *e,
                    const struct sockaddr *sa, uint64_t now)
{
    return open_end_sent(g, e, sa, now, NULL);
}

/* The guard shut it down: the peer sees the end of the stream. */
static int closed(const struct end *e)
{
    char b;
    ssize_t n = recv(e->peer, &b, 1, MSG_DONTWAIT);
    return n == 0;
}

static void close_end(struct hutch_http_guard *g, struct end *e)
{
    hutch_http_guard_close(g, e->c);
    close(e->ours);
    close(e->peer);
}

static const struct hutch_http_guard_opts opts = {.max_conns = 10,
                                                  .max_unauth = 4,
                                                  .per_address = 2,
                                                  .head_ms = 1000,
                                                  .trusted_ms = 60000,
                                                  .grace_ms = 1};

int main(void)
{
    struct sockaddr_in a, b, c, d, e;
    struct sockaddr_in6 x1, x2, y, mapped;
    struct hutch_http_guard_stats st;

    v4(&a, "127.0.0.2");
    v4(&b, "127.0.0.3");
    v4(&c, "127.0.0.4");
    v4(&d, "127.0.0.5");
    v4(&e, "127.0.0.6");
    v6(&x1, "2001:db8:1:2::1");
    v6(&x2, "2001:db8:1:2:ffff::9");
    v6(&y, "2001:db8:1:3::1");
    v6(&mapped, "::ffff:127.0.0.2");

    /* One address: only its newest `per_address` wait for a head. */
    {
        struct hutch_http_guard *g = hutch_http_guard_new(&opts);
        struct end s[3];
        for (int i = 0; i < 3; i++)
            open_end(g, &s[i], (struct sockaddr *)&a, 100 + i);
        ok(closed(&s[0]) && !closed(&s[1]) && !closed(&s[2]),
           "a third connection from one address closes that address's oldest");
        hutch_http_guard_stats(g, &st);
        ok(st.evicted == 1 && st.head_timeouts == 0, "counted as closed for room");
        for (int i = 0; i < 3; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* Grace: a client connects many at once before it writes on any, so
     * none younger than grace_ms is closed for room; the tick closes the
     * oldest once it may be (and not before its head deadline would). */
    {
        struct hutch_http_guard_opts o = opts;
        struct hutch_http_guard *g;
        struct end s[3];
        o.grace_ms = 500;
        o.head_ms = 5000;
        g = hutch_http_guard_new(&o);
        for (int i = 0; i < 3; i++)
            open_end(g, &s[i], (struct sockaddr *)&a, 100 + i);
        ok(!closed(&s[0]) && !closed(&s[1]) && !closed(&s[2]),
           "past the share, connections younger than the grace are all kept");
        ok(hutch_http_guard_tick(g, 599) == 0 && !closed(&s[0]),
           "the tick keeps the oldest before its grace ends");
        hutch_http_guard_tick(g, 600);
        ok(closed(&s[0]) && !closed(&s[1]) && !closed(&s[2]),
           "once its grace ended the tick closes the oldest, and only it");
        hutch_http_guard_stats(g, &st);
        ok(st.evicted == 1 && st.head_timeouts == 0,
           "counted as closed for room, not as a head timeout");
        for (int i = 0; i < 3; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* A burst from one client: connections whose complete head already
     * waits to be read are not slow, and are never closed for room. */
    {
        static const char full[] = "POST /mcp HTTP/1.1\r\nHost: h\r\n\r\n{}";
        static const char part[] = "POST /mcp HTTP/1.1\r\nHost: h\r\nX-Slow: 1\r\n";
        struct hutch_http_guard *g = hutch_http_guard_new(&opts);
        struct end s[5];
        open_end(g, &s[0], (struct sockaddr *)&a, 100);
        ok(write(s[0].peer, full, sizeof(full) - 1) == (ssize_t)sizeof(full) - 1,
           "a client sends its whole head at once");
        open_end(g, &s[1], (struct sockaddr *)&a, 101);
        ok(write(s[1].peer, part, sizeof(part) - 1) == (ssize_t)sizeof(part) - 1,
           "another trickles a partial head");
        open_end(g, &s[2], (struct sockaddr *)&a, 102);
        ok(!closed(&s[0]) && closed(&s[1]) && !closed(&s[2]),
           "a third from that address closes the oldest without a whole head, not "
           "the oldest");
        ok(write(s[2].peer, full, sizeof(full) - 1) == (ssize_t)sizeof(full) - 1,
           "the third sends its whole head");
        open_end(g, &s[3], (struct sockaddr *)&a, 103);
        ok(!closed(&s[0]) && !closed(&s[2]) && !closed(&s[3]),
           "past the share with every head arrived: nobody closed (they are "
           "about to be served)");
        hutch_http_guard_head(g, s[0].c); /* their threads read them */
        hutch_http_guard_head(g, s[2].c);
        open_end(g, &s[4], (struct sockaddr *)&a, 104);
        ok(!closed(&s[3]) && !closed(&s[4]), "then the share is back: two waiting");
        for (int i = 0; i < 5; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* The same address as IPv4 and as an IPv4-mapped IPv6 address; IPv6
     * by its /64. */
    {
        struct hutch_http_guard *g = hutch_http_guard_new(&opts);
        struct end s[3], t[4];
        open_end(g, &s[0], (struct sockaddr *)&a, 100);
        open_end(g, &s[1], (struct sockaddr *)&mapped, 101);
        open_end(g, &s[2], (struct sockaddr *)&a, 102);
        ok(closed(&s[0]) && !closed(&s[1]) && !closed(&s[2]),
           "::ffff:127.0.0.2 counts as 127.0.0.2");
        for (int i = 0; i < 3; i++)
            close_end(g, &s[i]);
        open_end(g, &t[0], (struct sockaddr *)&x1, 200);
        open_end(g, &t[1], (struct sockaddr *)&y, 201);
        open_end(g, &t[2], (struct sockaddr *)&x2, 202);
        ok(!closed(&t[0]) && !closed(&t[1]) && !closed(&t[2]),
           "two from one /64 and one from another: all kept");
        open_end(g, &t[3], (struct sockaddr *)&x2, 203);
        ok(closed(&t[0]) && !closed(&t[1]) && !closed(&t[2]) && !closed(&t[3]),
           "a third from the same /64 (another address in it) closes that /64's "
           "oldest");
        for (int i = 0; i < 4; i++)
            close_end(g, &t[i]);
        hutch_http_guard_free(g);
    }
    /* All addresses together: at most max_unauth wait unauthenticated;
     * authenticated or busy connections are not counted nor closed. */
    {
        struct hutch_http_guard *g = hutch_http_guard_new(&opts);
        const struct sockaddr *addrs[] = {(struct sockaddr *)&a, (struct sockaddr *)&b,
                                          (struct sockaddr *)&c, (struct sockaddr *)&d,
                                          (struct sockaddr *)&e};
        struct end s[7];
        open_end(g, &s[0], addrs[0], 100);
        hutch_http_guard_head(g, s[0].c);
        hutch_http_guard_trust(g, s[0].c);
        hutch_http_guard_idle(g, s[0].c, 101); /* authenticated, waiting */
        open_end(g, &s[1], addrs[1], 102);
        hutch_http_guard_head(g, s[1].c); /* busy: a request is handled */
        for (int i = 2; i < 6; i++)
            open_end(g, &s[i], addrs[i - 1], 100 + i);
        ok(!closed(&s[2]) && !closed(&s[5]), "four unauthenticated: all kept");
        open_end(g, &s[6], addrs[4], 110);
        ok(closed(&s[2]) && !closed(&s[3]) && !closed(&s[6]),
           "a fifth unauthenticated closes the oldest unauthenticated one");
        ok(!closed(&s[0]) && !closed(&s[1]),
           "never an authenticated one, nor one whose request is being handled");
        for (int i = 0; i < 7; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* Deadlines. */
    {
        struct hutch_http_guard *g = hutch_http_guard_new(&opts);
        struct end s[4];
        open_end(g, &s[0], (struct sockaddr *)&a, 1000);
        open_end(g, &s[1], (struct sockaddr *)&b, 1000);
        open_end(g, &s[2], (struct sockaddr *)&c, 1000);
        open_end(g, &s[3], (struct sockaddr *)&d, 1000);
        hutch_http_guard_head(g, s[1].c); /* busy past its deadline: fine */
        hutch_http_guard_head(g, s[2].c);
        hutch_http_guard_trust(g, s[2].c);
        hutch_http_guard_idle(g, s[2].c, 1500);
        hutch_http_guard_head(g, s[3].c);
        hutch_http_guard_idle(g, s[3].c, 1800); /* unauthenticated, answered */
        ok(hutch_http_guard_tick(g, 1999) == 0 && !closed(&s[0]),
           "nothing closed before the head deadline");
        ok(hutch_http_guard_tick(g, 2000) == 1 && closed(&s[0]),
           "no complete head within head_ms: closed");
        ok(!closed(&s[1]) && !closed(&s[2]) && !closed(&s[3]),
           "… not a busy one, an authenticated one, nor one whose deadline was "
           "restarted by its last response");
        ok(hutch_http_guard_tick(g, 2800) == 1 && closed(&s[3]),
           "an unauthenticated connection's next head: head_ms from its last response");
        ok(hutch_http_guard_tick(g, 61499) == 0 && !closed(&s[2]) &&
               hutch_http_guard_tick(g, 61500) == 1 && closed(&s[2]),
           "an authenticated connection's next head: trusted_ms from its last "
           "response");
        ok(hutch_http_guard_tick(g, 1000000) == 0 && !closed(&s[1]),
           "a request being handled is never timed out here");
        hutch_http_guard_stats(g, &st);
        ok(st.head_timeouts == 3 && st.evicted == 0, "counted as head timeouts");
        for (int i = 0; i < 4; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* The connection limit: one place kept free while an unauthenticated
     * connection can give it up. */
    {
        const struct hutch_http_guard_opts o = {.max_conns = 4,
                                                .max_unauth = 4,
                                                .per_address = 4,
                                                .head_ms = 1000,
                                                .trusted_ms = 60000,
                                                .grace_ms = 1};
        struct hutch_http_guard *g = hutch_http_guard_new(&o);
        struct end s[5];
        for (int i = 0; i < 2; i++) {
            open_end(g, &s[i], (struct sockaddr *)&a, 100 + i);
            hutch_http_guard_head(g, s[i].c);
            hutch_http_guard_trust(g, s[i].c);
        }
        open_end(g, &s[2], (struct sockaddr *)&b, 200);
        ok(!closed(&s[2]), "three of four places taken: nothing closed");
        open_end(g, &s[3], (struct sockaddr *)&c, 201);
        ok(closed(&s[2]) && !closed(&s[3]),
           "the fourth: the oldest unauthenticated one gives its place up");
        hutch_http_guard_close(g, s[2].c); /* the transport saw it end */
        close(s[2].ours);
        close(s[2].peer);
        hutch_http_guard_head(g, s[3].c);
        hutch_http_guard_trust(g, s[3].c);
        open_end(g, &s[4], (struct sockaddr *)&d, 300);
        ok(!closed(&s[4]) && !closed(&s[0]) && !closed(&s[1]) && !closed(&s[3]),
           "all authenticated and the newcomer: nobody to close");
        close_end(g, &s[0]);
        close_end(g, &s[1]);
        close_end(g, &s[3]);
        close_end(g, &s[4]);
        hutch_http_guard_free(g);
    }
    /* Kept free: `reserve` places.  Pressed for them, a connection in its
     * grace (a client that reconnects at once whenever it is closed) gives
     * its place up once room_grace_ms have passed without its head. */
    {
        const struct hutch_http_guard_opts o = {.max_conns = 6,
                                                .max_unauth = 6,
                                                .per_address = 6,
                                                .head_ms = 5000,
                                                .trusted_ms = 60000,
                                                .grace_ms = 1000,
                                                .reserve = 2,
                                                .room_grace_ms = 100};
        struct hutch_http_guard *g = hutch_http_guard_new(&o);
        struct end s[7];
        for (int i = 0; i < 4; i++)
            open_end(g, &s[i], (struct sockaddr *)&a, 100 + i);
        ok(!closed(&s[0]) && !closed(&s[3]), "four of six places: nothing closed");
        open_end(g, &s[4], (struct sockaddr *)&b, 150);
        ok(!closed(&s[0]) && !closed(&s[4]),
           "the fifth, into the reserve: nobody has had 100 ms, nothing closed");
        ok(hutch_http_guard_tick(g, 199) == 0 && !closed(&s[0]),
           "the tick keeps them before 100 ms");
        hutch_http_guard_tick(g, 200);
        ok(closed(&s[0]) && !closed(&s[1]) && !closed(&s[4]),
           "at 100 ms the oldest gives its place up, well within its grace");
        hutch_http_guard_close(g, s[0].c);
        close(s[0].ours);
        close(s[0].peer);
        hutch_http_guard_head(g, s[1].c);
        hutch_http_guard_trust(g, s[1].c);
        open_end(g, &s[5], (struct sockaddr *)&c, 300);
        ok(closed(&s[2]) && !closed(&s[1]) && !closed(&s[5]),
           "a newcomer: the oldest unauthenticated one gives its place up, "
           "not the authenticated one");
        hutch_http_guard_stats(g, &st);
        ok(st.evicted == 2 && st.head_timeouts == 0, "counted as closed for room");
        for (int i = 1; i < 6; i++)
            close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    /* Pressed for room, a newcomer from an address that already has one
     * waiting 100 ms without its head is closed at once (it would
     * reconnect into the places kept free), unless its own head is there;
     * a newcomer from another address is not, nor one beside connections
     * of its address younger than that (a burst). */
    {
        static const char full[] = "POST /mcp HTTP/1.1\r\nHost: h\r\n\r\n{}";
        const struct hutch_http_guard_opts o = {.max_conns = 8,
                                                .max_unauth = 8,
                                                .per_address = 8,
                                                .head_ms = 5000,
                                                .trusted_ms = 60000,
                                                .grace_ms = 1000,
                                                .reserve = 5,
                                                .room_grace_ms = 100};
        struct hutch_http_guard *g = hutch_http_guard_new(&o);
        struct end s[7];
        for (int i = 0; i < 3; i++)
            open_end(g, &s[i], (struct sockaddr *)&a, 100 + i);
        open_end(g, &s[3], (struct sockaddr *)&a, 150);
        ok(!closed(&s[3]) && !closed(&s[0]),
           "pressed: a newcomer beside connections of its address younger than 100 ms "
           "gets in");
        open_end(g, &s[4], (struct sockaddr *)&a, 250);
        ok(closed(&s[4]) && !closed(&s[0]) && !closed(&s[3]),
           "… one beside a connection of its address waiting 100 ms is closed at once");
        hutch_http_guard_close(g, s[4].c);
        close(s[4].ours);
        close(s[4].peer);
        open_end(g, &s[5], (struct sockaddr *)&b, 251);
        ok(!closed(&s[5]) && closed(&s[0]) && closed(&s[1]) && !closed(&s[2]),
           "a newcomer from another address gets in; the oldest give their places "
           "up until five are free");
        ok(open_end_sent(g, &s[6], (struct sockaddr *)&a, 252, full) == 0 &&
               !closed(&s[6]),
           "one whose whole head is already there gets in from that address");
        hutch_http_guard_stats(g, &st);
        ok(!closed(&s[3]) && closed(&s[2]), "… and the oldest left gives its place up");
        ok(st.evicted == 4,
           "counted as closed for room, the one closed at once included");
        for (int i = 0; i < 7; i++)
            if (i != 4)
                close_end(g, &s[i]);
        hutch_http_guard_free(g);
    }
    return tap_done();
}
