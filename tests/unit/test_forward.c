/* test_forward.c — hutch-init's egress forwarder (plugins/init/forward.c)
 * on its own, in a network namespace of the test's (so 127.0.0.1:3128 is
 * its own; skipped where none can be made): the test plays both the
 * program, connecting to 127.0.0.1:HUTCH_EGRESS_PORT, and hutch, the unix
 * socket the forwarder connects to, while a thread runs init's poll loop
 * over fwd_poll_fill and fwd_poll_done.  Bytes both ways, the ends of
 * each direction apart, a megabytes-long relay through the bounded
 * buffers, the cap on connections at once, a flood, and a socket nobody
 * listens on (an execution without egress: the forwarder answers once,
 * then closes the port). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../plugins/init/forward.h"
#include "tap.h"

static char sock_path[108];
static int stop_pipe[2];
/* Held by a test to make both ends' events wait for one turn of the loop. */
static pthread_mutex_t loop_mu = PTHREAD_MUTEX_INITIALIZER;

/* init's loop, the forwarder's part of it, until stop_pipe says so. */
static void *loop(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[1 + FWD_POLLFDS] = {{stop_pipe[0], POLLIN, 0}};
        size_t n = fwd_poll_fill(p + 1, FWD_POLLFDS);
        if (poll(p, 1 + n, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[0].revents)
            return NULL;
        pthread_mutex_lock(&loop_mu);
        fwd_poll_done(p + 1, n);
        pthread_mutex_unlock(&loop_mu);
    }
}

static int lo_up(void)
{
    struct ifreq ifr = {0};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;
    if (fd < 0)
        return -1;
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    r = ioctl(fd, SIOCGIFFLAGS, &ifr);
    if (r == 0) {
        ifr.ifr_flags |= IFF_UP;
        r = ioctl(fd, SIOCSIFFLAGS, &ifr);
    }
    close(fd);
    return r;
}

/* A network namespace of our own: as root, else in a user namespace. */
static int own_network(void)
{
    if (unshare(CLONE_NEWNET) == 0)
        return lo_up();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0)
        return lo_up();
    return -1;
}

static void timeouts(int fd)
{
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* The program's side: a connection to 127.0.0.1:3128. */
static int prog_connect(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(HUTCH_EGRESS_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    timeouts(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* hutch's side: the listener, and one connection from the forwarder. */
static int hutch_listen(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(sock_path);
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, HUTCH_SANDBOX_EGRESS_CONNS) < 0)
        return -1;
    return fd;
}

static int hutch_accept(int lfd)
{
    struct pollfd p = {lfd, POLLIN, 0};
    int fd;
    if (poll(&p, 1, 10000) != 1)
        return -1;
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        timeouts(fd);
    return fd;
}

/* Reads until end of file (or len bytes): the count, -1 on error. */
static ssize_t read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, buf + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void t_both_ways(int lfd)
{
    char buf[64];
    int c = prog_connect(), h = hutch_accept(lfd);
    ssize_t n;

    ok(c >= 0 && h >= 0, "a connection to 127.0.0.1:%d reaches the unix socket",
       HUTCH_EGRESS_PORT);
    send_all(c, "GET http://a/ HTTP/1.1\r\n\r\n", 26);
    n = recv(h, buf, sizeof(buf), 0);
    ok(n == 26 && memcmp(buf, "GET http://a/", 13) == 0,
       "the program's bytes arrive as it sent them (%zd)", n);
    send_all(h, "HTTP/1.1 200 OK\r\n\r\n", 19);
    n = recv(c, buf, sizeof(buf), 0);
    ok(n == 19 && memcmp(buf, "HTTP/1.1 200", 12) == 0, "and hutch's come back (%zd)",
       n);
    /* The program's end of its bytes: hutch reads end of file, and may
     * still answer. */
    shutdown(c, SHUT_WR);
    n = recv(h, buf, sizeof(buf), 0);
    ok(n == 0, "the program's half-close reaches hutch as end of file (%zd)", n);
    send_all(h, "late", 4);
    n = recv(c, buf, sizeof(buf), 0);
    ok(n == 4, "an answer after the program's half-close still arrives (%zd)", n);
    close(h);
    n = recv(c, buf, sizeof(buf), 0);
    ok(n == 0, "hutch's close ends the program's connection (%zd)", n);
    close(c);

    /* The other way round: hutch ends first, the program still sends. */
    c = prog_connect();
    h = hutch_accept(lfd);
    shutdown(h, SHUT_WR);
    n = recv(c, buf, sizeof(buf), 0);
    ok(n == 0, "hutch's half-close reaches the program as end of file (%zd)", n);
    send_all(c, "more", 4);
    n = recv(h, buf, sizeof(buf), 0);
    ok(n == 4, "the program may still send after it (%zd)", n);
    close(c);
    n = recv(h, buf, sizeof(buf), 0);
    ok(n == 0, "the program's close ends hutch's (%zd)", n);
    close(h);

    /* hutch answers and closes without reading (a refusal) while the
     * program's request is on its way: init finds both in one turn, the
     * request meets a closed socket, and still the answer arrives. */
    c = prog_connect();
    h = hutch_accept(lfd);
    pthread_mutex_lock(&loop_mu);
    send_all(h, "HTTP/1.1 403 Forbidden\r\n\r\n", 26);
    close(h);
    send_all(c, "GET http://a/ HTTP/1.1\r\n\r\n", 26);
    usleep(50000);
    pthread_mutex_unlock(&loop_mu);
    n = read_all(c, buf, sizeof(buf));
    ok(n == 26 && memcmp(buf, "HTTP/1.1 403", 12) == 0,
       "an answer hutch closed after arrives, though the request found it closed "
       "(%zd)",
       n);
    close(c);
}

struct bulk {
    int fd;
    size_t len;
    int r;
};

static void *bulk_send(void *arg)
{
    struct bulk *b = arg;
    unsigned char *buf = malloc(b->len);
    for (size_t i = 0; buf && i < b->len; i++)
        buf[i] = (unsigned char)(i * 7 + i / 4096);
    b->r = buf ? send_all(b->fd, buf, b->len) : -1;
    shutdown(b->fd, SHUT_WR);
    free(buf);
    return NULL;
}

/* 8 MiB each way at once, through buffers of HUTCH_SANDBOX_EGRESS_BUF. */
static void t_bulk(int lfd)
{
    const size_t len = 8u << 20;
    int c = prog_connect(), h = hutch_accept(lfd), same = 1;
    struct bulk up = {c, len, 0}, down = {h, len, 0};
    char *got_h = malloc(len + 1), *got_c = malloc(len + 1);
    pthread_t t1, t2;
    ssize_t nh, nc;

    pthread_create(&t1, NULL, bulk_send, &up);
    pthread_create(&t2, NULL, bulk_send, &down);
    /* One side read now, the other after: a reader that waits holds up
     * its direction alone. */
    nh = read_all(h, got_h, len + 1);
    nc = read_all(c, got_c, len + 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    for (size_t i = 0; nh == (ssize_t)len && nc == (ssize_t)len && i < len; i++)
        same &= got_h[i] == (char)(i * 7 + i / 4096) && got_c[i] == got_h[i];
    ok(up.r == 0 && down.r == 0 && nh == (ssize_t)len && nc == (ssize_t)len && same,
       "8 MiB each way at once arrive whole and in order (%zd, %zd)", nh, nc);
    close(c);
    close(h);
    free(got_h);
    free(got_c);
}

/* An answer's body, its newline cut. */
static const char *body(char *answer)
{
    char *b = strstr(answer, "\r\n\r\n");
    b = b ? b + 4 : answer;
    b[strcspn(b, "\r\n")] = '\0';
    return b;
}

/* At most HUTCH_SANDBOX_EGRESS_CONNS at once: one more is answered 503. */
static void t_cap(int lfd)
{
    int c[HUTCH_SANDBOX_EGRESS_CONNS], h[HUTCH_SANDBOX_EGRESS_CONNS], all = 1, extra;
    char buf[512];
    ssize_t n;

    for (int i = 0; i < HUTCH_SANDBOX_EGRESS_CONNS; i++) {
        c[i] = prog_connect();
        h[i] = hutch_accept(lfd);
        all &= c[i] >= 0 && h[i] >= 0;
    }
    ok(all, "%d connections at once are carried", HUTCH_SANDBOX_EGRESS_CONNS);
    extra = prog_connect();
    n = extra >= 0 ? read_all(extra, buf, sizeof(buf) - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    ok(n > 0 && strstr(buf, "503") && strstr(buf, "too many connections"),
       "one more is answered 503, saying why: %s", body(buf));
    if (extra >= 0)
        close(extra);
    close(c[0]);
    close(h[0]);
    /* The forwarder sees the close first; then there is room again. */
    usleep(100000);
    c[0] = prog_connect();
    h[0] = hutch_accept(lfd);
    send_all(c[0], "x", 1);
    n = h[0] >= 0 ? recv(h[0], buf, 1, 0) : -1;
    ok(n == 1, "once one ended, a new one is carried (%zd)", n);
    for (int i = 0; i < HUTCH_SANDBOX_EGRESS_CONNS; i++) {
        close(c[i]);
        close(h[i]);
    }
}

/* 1000 connections opened and held, none accepted by hutch: the
 * forwarder refuses what is past its cap and still serves afterwards. */
static void t_flood(int lfd)
{
    enum { N = 1000 };
    static int c[N];
    int opened = 0, h, refused = 0;
    char buf[64];
    ssize_t n;

    for (int i = 0; i < N; i++) {
        c[i] = prog_connect();
        opened += c[i] >= 0;
    }
    usleep(500000); /* the forwarder answered those past the cap by now */
    for (int i = 0; i < N; i++)
        if (c[i] >= 0 && recv(c[i], buf, sizeof(buf), MSG_DONTWAIT) >= 12 &&
            memcmp(buf, "HTTP/1.1 503", 12) == 0)
            refused++;
    ok(refused >= 100, "a flood of %d connections: those past the cap are refused (%d)",
       opened, refused);
    /* hutch's backlog holds the forwarder's connections: let them go. */
    for (int i = 0; i < N; i++)
        if (c[i] >= 0)
            close(c[i]);
    for (int i = 0; i < HUTCH_SANDBOX_EGRESS_CONNS; i++) {
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, 200) != 1)
            break;
        close(accept4(lfd, NULL, NULL, SOCK_CLOEXEC));
    }
    usleep(200000);
    n = -1;
    {
        int pc = prog_connect();
        h = hutch_accept(lfd);
        if (pc >= 0 && h >= 0 && send_all(pc, "after", 5) == 0)
            n = recv(h, buf, sizeof(buf), 0);
        if (pc >= 0)
            close(pc);
        if (h >= 0)
            close(h);
    }
    ok(n == 5, "after the flood a connection is carried again (%zd)", n);
}

/* No listener (the core closed it: the execution has no egress). */
static void t_no_egress(int lfd)
{
    char buf[512];
    int c;
    ssize_t n;

    close(lfd);
    unlink(sock_path);
    c = prog_connect();
    n = c >= 0 ? read_all(c, buf, sizeof(buf) - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    ok(n > 0 && strstr(buf, "503") && strstr(buf, "no egress"),
       "without a listener the program is answered 503: %s", body(buf));
    if (c >= 0)
        close(c);
    /* Nobody will listen again: the forwarder let go of the port. */
    usleep(100000);
    c = prog_connect();
    ok(c < 0 && errno == ECONNREFUSED,
       "and the next connection is refused: the port is closed (%s)",
       c < 0 ? strerror(errno) : "connected");
    if (c >= 0)
        close(c);
}

int main(void)
{
    char dir[] = "/tmp/hutch-fwd-XXXXXX";
    pthread_t t;
    int lfd, r;

    struct rlimit rl;
    /* The flood's 1000 and the forwarder's own in one process. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2048 &&
        rl.rlim_max >= 2048) {
        rl.rlim_cur = 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (own_network() < 0) {
        printf("1..0 # SKIP no network namespace of our own: %s\n", strerror(errno));
        return 0;
    }
    if (!mkdtemp(dir))
        return 1;
    snprintf(sock_path, sizeof(sock_path), "%s/egress", dir);
    lfd = hutch_listen();
    r = fwd_open(sock_path);
    ok(r == 0, "fwd_open listens on 127.0.0.1:%d (%d)", HUTCH_EGRESS_PORT, r);
    {
        int b = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(HUTCH_EGRESS_PORT),
                                 .sin_addr.s_addr = htonl(INADDR_ANY)};
        setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(b, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        ok(bind(b, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EADDRINUSE,
           "nobody else binds the port, even with SO_REUSEADDR and SO_REUSEPORT");
        close(b);
    }
    if (r < 0 || lfd < 0 || pipe2(stop_pipe, O_CLOEXEC) < 0)
        return tap_done();
    pthread_create(&t, NULL, loop, NULL);
    t_both_ways(lfd);
    t_bulk(lfd);
    t_cap(lfd);
    t_flood(lfd);
    t_no_egress(lfd);
    (void)!write(stop_pipe[1], "x", 1);
    pthread_join(t, NULL);
    unlink(sock_path);
    rmdir(dir);
    return tap_done();
}
