/* forward.c — hutch-init's egress forwarder.  The program's HTTP_PROXY
 * names 127.0.0.1:HUTCH_EGRESS_PORT in the sandbox, which has no network of
 * its own; init listens there and carries each connection accepted to
 * hutch's proxy as a new connection to a unix socket the executor listens
 * on (the gVisor executor's /run/hutch/io/egress, the docker executor's
 * bind-mounted one), relaying the bytes both ways as they are, ends
 * included: the end of one side's bytes is a shutdown(SHUT_WR) of the
 * other, so a request whose sender half-closed still gets its answer.
 *
 * The port is init's before the program runs (fwd_open is called before
 * the runner is forked) and stays init's: the program, another uid, can
 * bind neither it nor an address that covers it while init listens (no
 * SO_REUSEADDR or SO_REUSEPORT here, and a reuse of a port of another uid
 * is refused anyway).  The listener and every relayed socket are
 * close-on-exec, and the runner closes all of init's descriptors before
 * it execs.
 *
 * What the program can make init hold is bounded: at most
 * HUTCH_SANDBOX_EGRESS_CONNS connections at once (one more is answered 503
 * and closed at once, so a flood costs init nothing but accept(), and
 * never blocks the connections under way), each with one
 * HUTCH_SANDBOX_EGRESS_BUF buffer per direction, read into only while it
 * has room: a side that does not read stops the other being read.  All of
 * it runs in init's one poll loop (fwd_poll_fill, fwd_poll_done), never
 * blocking: the connect to the unix socket is non-blocking too, and one
 * that cannot complete at once (the executor does not accept) is answered
 * 503.  Nothing here is timed: a connection lasts until one of its sides
 * ends it, and all of them end with the sandbox.
 *
 * Only libc here: init is static and links nothing of the core. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "forward.h"

enum { PROG, HUTCH }; /* the two ends of a connection */

/* Descriptors init holds besides the forwarder's (stdio, the sockets or
 * the attach stream's pairs, the signalfd), with room to spare. */
#define FWD_INIT_FDS 16

struct fwd_conn {
    int fd[2];      /* [PROG] accepted on 127.0.0.1, [HUTCH] to the socket */
    int connecting; /* the unix connect is under way */
    int eof[2];     /* fd[d] said its end */
    int shut[2];    /* fd[d] was shut for writing */
    size_t len[2];  /* bytes read from fd[d], for fd[!d] */
    unsigned char buf[2][HUTCH_SANDBOX_EGRESS_BUF];
};

static int listen_fd = -1;
static struct sockaddr_un target_sa;
static struct fwd_conn *conns[HUTCH_SANDBOX_EGRESS_CONNS];
static size_t n_conns;
/* The cap on n_conns: HUTCH_SANDBOX_EGRESS_CONNS, fewer when init's own
 * RLIMIT_NOFILE (the class's open files, on gVisor) has no room for two
 * descriptors each. */
static size_t max_conns;
/* accept() failed for want of a descriptor or memory: the listener is left
 * out of poll until a connection ends, or it would wake init for ever. */
static int accept_blocked;
/* What each pollfd fwd_poll_fill added stands for: -1 the listener, else
 * a connection's slot times 2 plus the end. */
static int poll_what[FWD_POLLFDS];

int fwd_open(const char *target)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(HUTCH_EGRESS_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct rlimit rl;
    int fd;

    if (strlen(target) >= sizeof(target_sa.sun_path))
        return -ENAMETOOLONG;
    target_sa.sun_family = AF_UNIX;
    memcpy(target_sa.sun_path, target, strlen(target) + 1);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, HUTCH_SANDBOX_EGRESS_BACKLOG) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    listen_fd = fd;
    max_conns = HUTCH_SANDBOX_EGRESS_CONNS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* init's own descriptors, and one to refuse with. */
        rlim_t spare = rl.rlim_cur > FWD_INIT_FDS ? rl.rlim_cur - FWD_INIT_FDS : 0;
        if (spare / 2 < max_conns)
            max_conns = (size_t)(spare / 2);
    }
    return 0;
}

int fwd_probe(void)
{
    /* Non-blocking: a socket that does not accept must not hold init. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), r = 0;
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&target_sa, sizeof(target_sa)) < 0)
        r = -errno;
    close(fd);
    return r;
}

/* Answers a connection init does not carry with a 503 the program can
 * print, and closes it.  What the program sent already is read first (up
 * to a head's worth), so that the close does not reset the connection
 * before the answer is read. */
static void refuse(int fd, const char *why)
{
    char msg[256], sink[4096];
    int n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 503 Service Unavailable\r\n"
                     "Content-Type: text/plain\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s\n",
                     strlen(why) + 1, why);
    for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
        ;
    if (n > 0 && (size_t)n < sizeof(msg))
        (void)!send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    close(fd);
}

static void conn_close(size_t slot)
{
    struct fwd_conn *c = conns[slot];
    for (int d = PROG; d <= HUTCH; d++)
        if (c->fd[d] >= 0)
            close(c->fd[d]);
    free(c);
    conns[slot] = conns[--n_conns];
    conns[n_conns] = NULL;
    accept_blocked = 0;
}

void fwd_close(void)
{
    while (n_conns)
        conn_close(n_conns - 1);
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
}

/* One accepted connection: its slot, or refused. */
static void conn_new(int fd)
{
    struct fwd_conn *c;
    int u;

    if (n_conns >= max_conns) {
        refuse(fd, "hutch: too many connections through the egress proxy at once");
        return;
    }
    u = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (u < 0) {
        refuse(fd, "hutch: the sandbox cannot reach the egress proxy");
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        close(u);
        refuse(fd, "hutch: the sandbox cannot reach the egress proxy");
        return;
    }
    if (connect(u, (struct sockaddr *)&target_sa, sizeof(target_sa)) < 0) {
        if (errno != EINPROGRESS) {
            /* Refused: this execution has no egress (the core closed the
             * listener, and the plugin did not say so first: fwd_close);
             * EAGAIN: its backlog is full. */
            int gone = errno == ECONNREFUSED || errno == ENOENT;
            const char *why = gone ? "hutch: this execution has no egress (the "
                                     "policy's egress allows no host)"
                                   : "hutch: the egress proxy is busy";
            close(u);
            free(c);
            refuse(fd, why);
            if (gone)
                fwd_close(); /* nobody listens again: refuse from now on */
            return;
        }
        c->connecting = 1;
    }
    c->fd[PROG] = fd;
    c->fd[HUTCH] = u;
    conns[n_conns++] = c;
}

/* Moves what can move now, without blocking.  0, or -1 when the connection
 * is over (both directions ended, or one side failed). */
static int conn_pump(struct fwd_conn *c)
{
    if (c->connecting) {
        int e = 0;
        socklen_t el = sizeof(e);
        struct pollfd p = {c->fd[HUTCH], POLLOUT, 0};
        if (poll(&p, 1, 0) <= 0)
            return 0;
        if (getsockopt(c->fd[HUTCH], SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
            refuse(c->fd[PROG], "hutch: the sandbox cannot reach the egress proxy");
            c->fd[PROG] = -1; /* closed by refuse() */
            return -1;
        }
        c->connecting = 0;
    }
    for (int d = PROG; d <= HUTCH; d++) {
        int to = c->fd[!d];
        if (!c->eof[d] && c->len[d] < sizeof(c->buf[d])) {
            ssize_t n = recv(c->fd[d], c->buf[d] + c->len[d],
                             sizeof(c->buf[d]) - c->len[d], MSG_DONTWAIT);
            if (n > 0)
                c->len[d] += (size_t)n;
            else if (n == 0)
                c->eof[d] = 1;
            else if (errno != EAGAIN && errno != EINTR)
                return -1; /* reset: the other side learns it by the close */
        }
        if (c->len[d]) {
            ssize_t n = send(to, c->buf[d], c->len[d], MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                c->len[d] -= (size_t)n;
                memmove(c->buf[d], c->buf[d] + n, c->len[d]);
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                /* The reader is gone: this direction is over, what it was
                 * sent and what more comes for it go nowhere.  The other
                 * direction carries on: hutch's proxy answers a refusal
                 * and closes without reading the rest of the request. */
                c->len[d] = 0;
                c->eof[d] = 1;
                c->shut[!d] = 1;
            }
        }
        if (c->eof[d] && !c->len[d] && !c->shut[!d]) {
            shutdown(to, SHUT_WR);
            c->shut[!d] = 1;
        }
    }
    return c->shut[PROG] && c->shut[HUTCH] ? -1 : 0;
}

size_t fwd_poll_fill(struct pollfd *p, size_t room)
{
    size_t n = 0;

    if (listen_fd < 0)
        return 0;
    /* The listener always: past the cap, connections are refused at once
     * rather than left waiting in the backlog. */
    if (n < room && !accept_blocked) {
        poll_what[n] = -1;
        p[n++] = (struct pollfd){listen_fd, POLLIN, 0};
    }
    for (size_t i = 0; i < n_conns; i++) {
        struct fwd_conn *c = conns[i];
        for (int d = PROG; d <= HUTCH; d++) {
            short ev = 0;
            if (c->connecting) {
                ev = d == HUTCH ? POLLOUT : 0;
            } else {
                if (!c->eof[d] && c->len[d] < sizeof(c->buf[d]))
                    ev |= POLLIN;
                if (c->len[!d])
                    ev |= POLLOUT;
            }
            /* Nothing wanted of this end now: left out, or its hangup
             * would wake the loop for nothing. */
            if (!ev || n >= room)
                continue;
            poll_what[n] = (int)(i * 2) + d;
            p[n++] = (struct pollfd){c->fd[d], ev, 0};
        }
    }
    return n;
}

void fwd_poll_done(const struct pollfd *p, size_t n)
{
    unsigned char woke[HUTCH_SANDBOX_EGRESS_CONNS] = {0};
    size_t before = n_conns;
    int accept_now = 0;

    for (size_t k = 0; k < n; k++) {
        if (!p[k].revents)
            continue;
        if (poll_what[k] < 0)
            accept_now = 1;
        else
            woke[poll_what[k] / 2] = 1;
    }
    /* Backwards: conn_close moves the last slot into the closed one, and
     * the last one was looked at already. */
    for (size_t i = before; i-- > 0;)
        if (woke[i] && conn_pump(conns[i]) < 0)
            conn_close(i);
    /* A bounded batch, so that a flood of connections does not keep init
     * from its other fds. */
    for (int i = 0; accept_now && i < HUTCH_SANDBOX_EGRESS_CONNS; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM)
                accept_blocked = n_conns > 0; /* else nothing would clear it */
            break;
        }
        conn_new(fd);
    }
}
