/* factory.c — the local executor's sandbox factory: the process that
 * forks every sandbox, and the host side that asks it to.
 *
 * hutch is multi-threaded, and a sandbox's first processes run hutch's
 * code after fork() (init unpacks and packs /work with libarchive, which
 * allocates).  POSIX allows only async-signal-safe calls in a child of a
 * threaded process: glibc's malloc survives it, Debian 12's libasan did
 * not (a child stuck on an allocator lock another thread held at the
 * fork, "fetching /work/out: Connection timed out").  So no sandbox is a
 * fork of hutch: the plugin execs a fresh, single-threaded hutch as its
 * helper (hutch-executor.h, "Processes"), and that factory forks C1:
 *
 *   hutch ── posix_spawn ──> factory (hutch __plugin-helper local.so factory)
 *   hutch ── request + 5 descriptors ──> factory ── fork ──> C1 (sandbox.c)
 *   hutch <── C1's pid + a pidfd of it ── factory
 *
 * The factory reaps its children (SIGCHLD on a signalfd) and exits when
 * hutch closes the socket (hutch ended, or closed the plugin): C1 dies with
 * it (PDEATHSIG), and init with C1.  It forks one C1 at a time; a fork of
 * this small process is cheaper than a fork of hutch was.
 *
 * Threads: the host side is called from many threads; one mutex holds the
 * socket for a request and its answer (a fork, well under a millisecond),
 * and a factory that died is started again at the next request.  The
 * factory itself has one thread. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "factory.h"

extern char **environ;

#define REQ_MAGIC 0x68666331u /* "hfc1" */
#define REQ_FDS   5           /* ctrl, sync, chan, out, err */
#define BPF_MAX   (64u * 1024u)

struct req {
    uint32_t magic;
    uint32_t params_size; /* sizeof(struct lsb_params) of the sender */
    uint32_t bpf_len;     /* bytes after this struct */
    uint32_t pad;
    struct lsb_params p; /* pointers in it are the sender's: ignored */
};

struct reply {
    int32_t pid; /* C1, or -errno */
};

/* --- both sides ------------------------------------------------------------ */

static ssize_t send_fds(int sock, const struct iovec *iov, int niov, const int *fds,
                        int nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * REQ_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)niov};
    ssize_t n;

    if (nfds > 0) {
        struct cmsghdr *c;
        memset(&u, 0, sizeof(u));
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    do
        n = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

/* One message; the descriptors it carried (close-on-exec) into fds, their
 * count into *nfds.  A message cut short (MSG_TRUNC, MSG_CTRUNC) closes
 * what came and fails with EMSGSIZE. */
static ssize_t recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds,
                        int *nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * REQ_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;
    ssize_t n;

    *nfds = 0;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        size_t k;
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}

/* --- the factory ------------------------------------------------------------ */

static void reap(int sfd)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        ;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* One request: fork C1 with its parameters and descriptors, answer its pid
 * and a pidfd.  The factory's copies of the descriptors are closed here. */
static void serve_one(const struct hutch_host *host, int sock, int sfd, struct req *rq,
                      size_t n, int *fds, int nfds)
{
    struct reply rp = {.pid = -EPROTO};
    struct iovec iov = {&rp, sizeof(rp)};
    int pidfd = -1;

    if (n < sizeof(*rq) || rq->magic != REQ_MAGIC ||
        rq->params_size != sizeof(struct lsb_params) || rq->bpf_len > BPF_MAX ||
        n != sizeof(*rq) + rq->bpf_len || nfds != REQ_FDS) {
        host->log(HUTCH_LOG_ERROR, "local",
                  "sandbox factory: a malformed request (%zu bytes, %d descriptors)", n,
                  nfds);
    } else {
        pid_t pid;
        struct lsb_params *p = &rq->p;
        p->host = host;
        p->bpf = rq + 1;
        p->bpf_len = rq->bpf_len;
        p->language[sizeof(p->language) - 1] = '\0';
        p->ctrl_fd = fds[0];
        p->sync_fd = fds[1];
        p->chan_fd = fds[2];
        p->out_fd = fds[3];
        p->err_fd = fds[4];
        p->parent = getpid();
        pid = fork();
        if (pid == 0) {
            /* What the factory changed for itself goes back to how a
             * fork of hutch had it: nothing blocked, the signals hutch
             * handles at their defaults (C1 resets handlers itself). */
            sigset_t none;
            static const int dfl[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
            close(sock);
            close(sfd);
            for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
                signal(dfl[i], SIG_DFL);
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            lsb_child_main(p);
        }
        if (pid < 0) {
            rp.pid = -errno;
        } else {
            rp.pid = pid;
            pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
            if (pidfd < 0) {
                rp.pid = -errno;
                kill(pid, SIGKILL);
            }
        }
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (send_fds(sock, &iov, 1, &pidfd, pidfd >= 0 ? 1 : 0) < 0 && pidfd >= 0)
        kill(rp.pid, SIGKILL); /* hutch went away: nobody will use it */
    if (pidfd >= 0)
        close(pidfd);
}

/* The helper's main: `factory FD`, FD the socket to hutch. */
int lsb_factory_main(const struct hutch_host *host, int argc, char **argv)
{
    sigset_t chld;
    int sock, sfd, rc = 0;
    char *end;
    struct req *rq;

    if (argc != 2 || strcmp(argv[0], "factory") != 0) {
        fprintf(stderr, "hutch: local helper: want \"factory FD\"\n");
        return 2;
    }
    sock = (int)strtol(argv[1], &end, 10);
    if (*end || sock < 3 || fcntl(sock, F_SETFD, FD_CLOEXEC) < 0) {
        fprintf(stderr, "hutch: local factory: no socket at %s\n", argv[1]);
        return 2;
    }
    prctl(PR_SET_NAME, "hutch-factory");
    /* hutch decides when sandboxes end: a ^C or a SIGTERM to the process
     * group is hutch's to handle, and it closes the socket when it ends. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    rq = malloc(sizeof(*rq) + BPF_MAX);
    if (sfd < 0 || !rq) {
        fprintf(stderr, "hutch: local factory: %s\n", strerror(errno));
        free(rq);
        return 1;
    }
    for (;;) {
        struct pollfd pf[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        int fds[REQ_FDS], nfds;
        ssize_t n;

        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = 1;
            break;
        }
        if (pf[1].revents)
            reap(sfd);
        if (!pf[0].revents)
            continue;
        n = recv_fds(sock, rq, sizeof(*rq) + BPF_MAX, fds, REQ_FDS, &nfds);
        if (n == 0)
            break; /* hutch closed the socket */
        if (n < 0) {
            if (errno == EMSGSIZE) { /* answer it: hutch waits */
                struct reply rp = {.pid = -EMSGSIZE};
                struct iovec iov = {&rp, sizeof(rp)};
                if (send_fds(sock, &iov, 1, NULL, 0) >= 0)
                    continue;
            }
            break;
        }
        serve_one(host, sock, sfd, rq, (size_t)n, fds, nfds);
    }
    free(rq);
    close(sfd);
    close(sock);
    return rc;
}

/* --- hutch's side ----------------------------------------------------------- */

/* Start the factory.  Under f->mu (or before any other thread has f). */
static int start(struct lsb_factory *f, struct hutch_err *err)
{
    int sv[2], r;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none;
    char fdarg[16];
    pid_t pid;
    char *argv[] = {(char *)f->exe, (char *)HUTCH_HELPER_VERB,
                    f->so,          (char *)"factory",
                    fdarg,          NULL};

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return hutch_err_set(err, -errno, "sandbox factory: socketpair: %s",
                             strerror(errno));
    snprintf(fdarg, sizeof(fdarg), "%d", 3);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* dup2 onto itself clears close-on-exec too (glibc ≥ 2.29). */
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    r = posix_spawn(&pid, f->exe, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (r != 0) {
        close(sv[0]);
        return hutch_err_set(err, -r, "cannot start the sandbox factory %s: %s", f->exe,
                             strerror(r));
    }
    f->sock = sv[0];
    f->pid = pid;
    return 0;
}

/* The factory is gone or unusable: close, reap. */
static void stop(struct lsb_factory *f)
{
    if (f->sock >= 0)
        close(f->sock);
    f->sock = -1;
    if (f->pid > 0)
        kill(f->pid, SIGKILL); /* it would exit on EOF; this needs no wait */
    if (f->pid > 0)
        while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    f->pid = 0;
}

int lsb_factory_init(struct lsb_factory *f, const struct hutch_host *host,
                     struct hutch_err *err)
{
    Dl_info di;
    const char *exe = HUTCH_HAS_MEMBER(host, struct hutch_host, helper_exe) &&
                              host->helper_exe && host->helper_exe[0]
                          ? host->helper_exe
                          : "/proc/self/exe";

    memset(f, 0, sizeof(*f));
    f->host = host;
    f->sock = -1;
    pthread_mutex_init(&f->mu, NULL);
    if (strlen(exe) >= sizeof(f->exe))
        return hutch_err_set(err, -ENAMETOOLONG, "sandbox factory: %s: name too long",
                             exe);
    snprintf(f->exe, sizeof(f->exe), "%s", exe);
    /* This plugin's own file, for the factory to load. */
    if (!dladdr((void *)lsb_factory_main, &di) || !di.dli_fname ||
        !realpath(di.dli_fname, f->so))
        return hutch_err_set(err, -ENOENT,
                             "sandbox factory: cannot tell this plugin's own file");
    return start(f, err);
}

void lsb_factory_fini(struct lsb_factory *f)
{
    stop(f);
    pthread_mutex_destroy(&f->mu);
}

/* One round trip; -EPIPE when the factory was gone before it took the
 * request (send it again), -EAGAIN when it went away with the request
 * (start again with new descriptors: a C1 may have used these). */
static int ask(struct lsb_factory *f, const struct req *rq, const void *bpf,
               const int *fds, pid_t *c1, int *pidfd, struct hutch_err *err)
{
    struct iovec iov[2] = {{(void *)rq, sizeof(*rq)}, {(void *)bpf, rq->bpf_len}};
    struct reply rp;
    int got[REQ_FDS], ngot;
    ssize_t n;

    if (send_fds(f->sock, iov, rq->bpf_len ? 2 : 1, fds, REQ_FDS) < 0) {
        int e = errno;
        if (e == EPIPE || e == ECONNRESET || e == ENOTCONN)
            return -EPIPE;
        return hutch_err_set(err, -e, "sandbox factory: sending a request: %s",
                             strerror(e));
    }
    n = recv_fds(f->sock, &rp, sizeof(rp), got, REQ_FDS, &ngot);
    if (n != (ssize_t)sizeof(rp)) {
        int e = n < 0 ? errno : EPIPE;
        for (int i = 0; i < ngot; i++)
            close(got[i]);
        f->host->log(HUTCH_LOG_WARN, "local",
                     "the sandbox factory (pid %d) went away during a start; starting "
                     "another",
                     (int)f->pid);
        stop(f);
        hutch_err_set(err, -EAGAIN, "the sandbox factory went away during a start (%s)",
                      n < 0 ? strerror(e) : "no answer");
        return -EAGAIN;
    }
    if (rp.pid <= 0 || ngot != 1) {
        for (int i = 0; i < ngot; i++)
            close(got[i]);
        return hutch_err_set(err, rp.pid < 0 ? rp.pid : -EPROTO,
                             "sandbox factory: fork: %s",
                             strerror(rp.pid < 0 ? -rp.pid : EPROTO));
    }
    *c1 = rp.pid;
    *pidfd = got[0];
    return 0;
}

/* See factory.h; -EAGAIN: the factory went away with this request. */
int lsb_factory_spawn(struct lsb_factory *f, const struct lsb_params *p, pid_t *c1,
                      int *pidfd, struct hutch_err *err)
{
    struct req *rq = calloc(1, sizeof(*rq));
    int fds[REQ_FDS] = {p->ctrl_fd, p->sync_fd, p->chan_fd, p->out_fd, p->err_fd};
    int r;

    if (!rq)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    if (p->bpf_len > BPF_MAX) {
        free(rq);
        return hutch_err_set(err, -E2BIG, "sandbox factory: a %zu-byte filter",
                             p->bpf_len);
    }
    rq->magic = REQ_MAGIC;
    rq->params_size = sizeof(struct lsb_params);
    rq->bpf_len = (uint32_t)p->bpf_len;
    rq->p = *p;
    pthread_mutex_lock(&f->mu);
    r = f->sock >= 0 ? ask(f, rq, p->bpf, fds, c1, pidfd, err) : -EPIPE;
    if (r == -EPIPE) {
        /* Gone before it took this request (killed, crashed): once more,
         * with a new one. */
        if (f->sock >= 0)
            f->host->log(HUTCH_LOG_WARN, "local",
                         "the sandbox factory (pid %d) is gone; starting another",
                         (int)f->pid);
        stop(f);
        r = start(f, err);
        if (r == 0)
            r = ask(f, rq, p->bpf, fds, c1, pidfd, err);
        if (r == -EPIPE)
            r = hutch_err_set(err, -EIO, "the sandbox factory %s exits as it starts",
                              f->exe);
    }
    pthread_mutex_unlock(&f->mu);
    free(rq);
    return r;
}
