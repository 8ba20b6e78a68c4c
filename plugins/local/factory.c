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
 * A factory started as a Python zygote (zygote.c: `factory FD python
 * INTERP RUNNER_DIR`) holds an initialised interpreter, says whether it
 * could start one (a hello, before any request), and forks the Python
 * sandboxes whose runner can be a fork of it.  It retires after
 * HUTCH_ZYGOTE_FORKS of them: its last answer says so, it closes the
 * socket, and it stays only while one of its sandboxes lives (they die
 * with it) or until hutch is gone (a pidfd of its parent); hutch starts
 * the next zygote at the next request.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "box.h"
#include "caps.h"
#include "env.h"
#include "factory.h"
#include "zygote.h"

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
    int32_t pid;      /* C1, or -errno */
    int32_t retiring; /* a zygote's last: it closes the socket after this */
};

/* A zygote's first message: 0, or -errno and why it has no interpreter. */
struct hello {
    int32_t status;
    char why[256];
};

/* The factory's own state (one per process, one thread). */
static struct {
    int zygote;                 /* lsb_zygote_init succeeded */
    char interp[PATH_MAX];      /* the interpreter it holds */
    unsigned long long vm_size; /* its address space, bytes */
    unsigned forks;             /* zygote forks so far */
    unsigned live;              /* children not yet reaped */
    char runner_dir[PATH_MAX];  /* where the zygote loaded the runner */
    struct stat runner[2];      /* runner.py and hutch_runner.py then */
} fac;

static const char *const runner_files[2] = {"runner.py", "hutch_runner.py"};

/* The runner files as they are now, into st[2]; -1 when one is missing. */
static int runner_stat(struct stat st[2])
{
    char path[PATH_MAX + 32];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", fac.runner_dir, runner_files[i]);
        if (stat(path, &st[i]) < 0)
            return -1;
    }
    return 0;
}

/* The runner the zygote holds is still the one on disk: a runner updated
 * or taken away since retires the zygote (its next fork would run code no
 * longer installed; an exec'd runner would use the files). */
static int runner_same(void)
{
    struct stat now[2];
    if (runner_stat(now) < 0)
        return 0;
    for (int i = 0; i < 2; i++)
        if (now[i].st_dev != fac.runner[i].st_dev ||
            now[i].st_ino != fac.runner[i].st_ino ||
            now[i].st_size != fac.runner[i].st_size ||
            now[i].st_mtim.tv_sec != fac.runner[i].st_mtim.tv_sec ||
            now[i].st_mtim.tv_nsec != fac.runner[i].st_mtim.tv_nsec)
            return 0;
    return 1;
}

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
        if (fac.live > 0)
            fac.live--;
}

/* Whether this sandbox's runner can be a fork of the zygote: Python, not
 * the data flavour's preload (its own packages), the interpreter the
 * zygote holds, and, where the memory limit is an address-space limit (no
 * memory cgroup), one the inherited address space fits well under. */
static int zygote_fits(const struct lsb_params *p)
{
    if (!fac.zygote || strcmp(p->language, "python") != 0 || p->preload ||
        strcmp(p->interp, fac.interp) != 0)
        return 0;
    if (!p->have_memcg && p->memory_bytes &&
        fac.vm_size + HUTCH_ZYGOTE_AS_SLACK > p->memory_bytes)
        return 0;
    if (!runner_same()) {
        fac.forks = HUTCH_ZYGOTE_FORKS; /* retire after this answer */
        return 0;
    }
    return 1;
}

static unsigned long long vm_size(void)
{
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* One request: fork C1 with its parameters and descriptors, answer its pid
 * and a pidfd.  The factory's copies of the descriptors are closed here. */
static void serve_one(const struct hutch_host *host, int sock, int sfd, struct req *rq,
                      size_t n, int *fds, int nfds)
{
    struct reply rp = {.pid = -EPROTO, .retiring = 0};
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
        p->zygote = zygote_fits(p);
        if (p->zygote)
            lsb_zygote_before_fork();
        pid = fork();
        if (pid > 0 && p->zygote) {
            lsb_zygote_after_fork_parent();
            fac.forks++;
        }
        if (pid > 0)
            fac.live++;
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
    rp.retiring = fac.zygote && fac.forks >= HUTCH_ZYGOTE_FORKS;
    if (send_fds(sock, &iov, 1, &pidfd, pidfd >= 0 ? 1 : 0) < 0 && pidfd >= 0)
        kill(rp.pid, SIGKILL); /* hutch went away: nobody will use it */
    if (pidfd >= 0)
        close(pidfd);
}

/* lsb_zygote_init with stdout and stderr on a pipe, as a sandbox has
 * them: the interpreter settles what it knows of its standard streams
 * (seekable, a terminal) as it starts, and its sandboxes inherit that.
 * What it printed (a traceback) ends the reason when it failed. */
static int zygote_init(const char *interp, const char *runner_dir, char *why,
                       size_t len)
{
    int pfd[2], saved = fcntl(2, F_DUPFD_CLOEXEC, 3), r;
    char out[4096], *tail = out;
    ssize_t n, k;

    if (saved < 0 || pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        if (saved >= 0)
            close(saved);
        snprintf(why, len, "a pipe: %s", strerror(e));
        return -e;
    }
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    close(pfd[1]);
    r = lsb_zygote_init(interp, runner_dir, why, len);
    dup2(saved, 2);
    close(saved);
    /* Its last lines: the exception. */
    for (n = 0; (k = read(pfd[0], out + n, sizeof(out) - 1 - (size_t)n)) > 0;)
        if ((n += k) == (ssize_t)sizeof(out) - 1)
            n = 0;
    if (r < 0 && n > 0) {
        size_t at = strlen(why);
        out[n] = '\0';
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
        for (char *c = out; *c; c++)
            if (*c == '\n')
                *c = ' ';
        if (n > 120) { /* the last 120 bytes, from a word's start */
            char *sp = strchr(out + n - 120, ' ');
            tail = sp ? sp + 1 : out + n - 120;
        }
        snprintf(why + at, len - at, ": %s", tail);
    }
    close(pfd[0]);
    {
        /* What the interpreter writes to stdout from here on goes
         * nowhere (it writes nothing); a sandbox replaces it. */
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 1);
            close(null);
        }
    }
    return r;
}

/* A retired zygote: no more requests; it stays while a sandbox of its own
 * lives (they die with it) and hutch does. */
static void retire(int sfd, int parent)
{
    while (fac.live > 0) {
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {parent, POLLIN, 0}};
        if (poll(pf, parent >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (pf[0].revents)
            reap(sfd);
        if (parent >= 0 && pf[1].revents)
            return; /* hutch is gone: so are its sandboxes */
    }
}

/* The helper's main: `factory FD [python INTERP RUNNER_DIR]`, FD the
 * socket to hutch; with python, a zygote (zygote.c). */
int lsb_factory_main(const struct hutch_host *host, int argc, char **argv)
{
    sigset_t chld;
    int sock, sfd, rc = 0, parent = -1;
    char *end;
    struct req *rq;

    if ((argc != 2 && argc != 5) || strcmp(argv[0], "factory") != 0 ||
        (argc == 5 && strcmp(argv[2], "python") != 0)) {
        fprintf(
            stderr,
            "hutch: local helper: want \"factory FD [python INTERP RUNNER_DIR]\"\n");
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
    if (argc == 5) {
        /* After the signals above: the interpreter leaves an ignored
         * SIGINT ignored. */
        struct hello hi;
        struct iovec iov = {&hi, sizeof(hi)};
        memset(&hi, 0, sizeof(hi));
        prctl(PR_SET_NAME, "hutch-zygote");
        parent = (int)syscall(SYS_pidfd_open, getppid(), 0);
        snprintf(fac.runner_dir, sizeof(fac.runner_dir), "%s", argv[4]);
        /* Before loading: a file changed in between shows as a change. */
        if (runner_stat(fac.runner) < 0) {
            hi.status = -ENOENT;
            snprintf(hi.why, sizeof(hi.why), "no %s/%s", argv[4], "runner.py");
        } else {
            hi.status = zygote_init(argv[3], argv[4], hi.why, sizeof(hi.why));
        }
        if (hi.status == 0) {
            fac.zygote = 1;
            snprintf(fac.interp, sizeof(fac.interp), "%s", argv[3]);
            fac.vm_size = vm_size();
        }
        if (send_fds(sock, &iov, 1, NULL, 0) < 0 || hi.status < 0) {
            free(rq);
            return 1;
        }
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
        if (fac.zygote && fac.forks >= HUTCH_ZYGOTE_FORKS) {
            close(sock);
            sock = -1;
            retire(sfd, parent);
            break;
        }
    }
    free(rq);
    close(sfd);
    if (sock >= 0)
        close(sock);
    if (parent >= 0)
        close(parent);
    return rc;
}

/* --- hutch's side ----------------------------------------------------------- */

static void stop(struct lsb_factory *f);

/* A zygote's hello: 0, or -errno with f->why set.  Under f->mu. */
static int hello(struct lsb_factory *f)
{
    struct hello hi;
    struct pollfd pf = {f->sock, POLLIN, 0};
    ssize_t n;
    int r;

    while ((r = poll(&pf, 1, HUTCH_ZYGOTE_START_MS)) < 0 && errno == EINTR)
        ;
    n = r > 0 ? recv(f->sock, &hi, sizeof(hi), 0) : -1;
    if (n != (ssize_t)sizeof(hi)) {
        if (r == 0)
            snprintf(f->why, sizeof(f->why), "it did not say within %d ms",
                     HUTCH_ZYGOTE_START_MS);
        else
            snprintf(f->why, sizeof(f->why), "it exited as it started");
        return -EIO;
    }
    if (hi.status < 0) {
        hi.why[sizeof(hi.why) - 1] = '\0';
        snprintf(f->why, sizeof(f->why), "%s", hi.why);
        return hi.status;
    }
    return 0;
}

/* Reap the retired zygotes that have exited.  Under f->mu. */
static void reap_retired(struct lsb_factory *f)
{
    int k = 0;
    for (int i = 0; i < f->nretired; i++)
        if (waitpid(f->retired[i], NULL, WNOHANG) == 0)
            f->retired[k++] = f->retired[i];
    f->nretired = k;
}

/* A zygote that cannot start: said, then Python sandboxes start
 * their own interpreter (the caller's plain factory) until it is tried
 * again, HUTCH_ZYGOTE_RETRY_MS later (a runner being reinstalled, a
 * library coming back).  -ENOEXEC.  Under f->mu. */
static int zygote_failed(struct lsb_factory *f, struct hutch_err *err)
{
    f->failed = 1;
    f->retry_ms = box_now_ms() + HUTCH_ZYGOTE_RETRY_MS;
    f->host->log(HUTCH_LOG_INFO, "local",
                 "the Python zygote: %s; Python sandboxes start their own interpreter "
                 "(another try in %d s)",
                 f->why, HUTCH_ZYGOTE_RETRY_MS / 1000);
    return hutch_err_set(err, -ENOEXEC, "the Python zygote: %s", f->why);
}

/* Start the factory.  Under f->mu (or before any other thread has f). */
static int start(struct lsb_factory *f, struct hutch_err *err)
{
    int sv[2], r;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none;
    char fdarg[16];
    pid_t pid;
    char *argv[] = {(char *)f->exe,
                    (char *)HUTCH_HELPER_VERB,
                    f->so,
                    (char *)"factory",
                    fdarg,
                    (char *)"python",
                    f->interp,
                    f->runner_dir,
                    NULL};

    if (!f->zygote)
        argv[5] = NULL;
    reap_retired(f);

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
    /* A zygote's memory is every Python sandbox's: nothing of hutch's
     * environment in it (the sandbox's own, env.h), nor its stdout. */
    if (f->zygote)
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    r = posix_spawn(&pid, f->exe, &fa, &at, argv,
                    f->zygote ? (char *const *)hutch_sandbox_env : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (r != 0) {
        close(sv[0]);
        if (f->zygote) {
            snprintf(f->why, sizeof(f->why), "cannot start %s: %s", f->exe,
                     strerror(r));
            return zygote_failed(f, err);
        }
        return hutch_err_set(err, -r, "cannot start the sandbox factory %s: %s", f->exe,
                             strerror(r));
    }
    f->sock = sv[0];
    f->pid = pid;
    /* A zygote that cannot start serves nothing for a while (ENOEXEC):
     * the plain factory does instead. */
    if (f->zygote && hello(f) < 0) {
        stop(f);
        return zygote_failed(f, err);
    }
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

static int setup(struct lsb_factory *f, const struct hutch_host *host,
                 struct hutch_err *err);

int lsb_factory_init(struct lsb_factory *f, const struct hutch_host *host,
                     struct hutch_err *err)
{
    int r = setup(f, host, err);
    return r < 0 ? r : start(f, err);
}

int lsb_factory_init_zygote(struct lsb_factory *f, const struct hutch_host *host,
                            const char *interp, const char *runner_dir,
                            struct hutch_err *err)
{
    int r = setup(f, host, err);
    if (r < 0)
        return r;
    if (strlen(interp) >= sizeof(f->interp) ||
        strlen(runner_dir) >= sizeof(f->runner_dir))
        return hutch_err_set(err, -ENAMETOOLONG, "the Python zygote: a path too long");
    snprintf(f->interp, sizeof(f->interp), "%s", interp);
    snprintf(f->runner_dir, sizeof(f->runner_dir), "%s", runner_dir);
    f->zygote = 1;
    return 0; /* started at its first request */
}

static int setup(struct lsb_factory *f, const struct hutch_host *host,
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
    return 0;
}

void lsb_factory_fini(struct lsb_factory *f)
{
    stop(f);
    for (int i = 0; i < f->nretired; i++) {
        kill(f->retired[i], SIGKILL);
        while (waitpid(f->retired[i], NULL, 0) < 0 && errno == EINTR)
            ;
    }
    f->nretired = 0;
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
    if (rp.retiring) {
        /* Its sandboxes live on in it; it exits when they are gone.  The
         * next request starts its successor (no socket). */
        if (f->nretired < (int)(sizeof(f->retired) / sizeof(f->retired[0])))
            f->retired[f->nretired++] = f->pid;
        close(f->sock);
        f->sock = -1;
        f->pid = 0;
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

/* See factory.h. */
void lsb_factory_poll(struct lsb_factory *f)
{
    if (pthread_mutex_trylock(&f->mu) != 0)
        return; /* a request is under way: it finds out itself */
    if (f->pid > 0 && waitpid(f->pid, NULL, WNOHANG) == f->pid) {
        f->host->log(
            HUTCH_LOG_WARN, "local",
            "the sandbox factory (pid %d) exited; another starts with the next "
            "sandbox it makes",
            (int)f->pid);
        f->pid = 0;
        close(f->sock);
        f->sock = -1;
    }
    reap_retired(f);
    pthread_mutex_unlock(&f->mu);
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
    if (f->failed && box_now_ms() < f->retry_ms) {
        r = hutch_err_set(err, -ENOEXEC, "the Python zygote: %s", f->why);
        goto out;
    }
    f->failed = 0; /* none, or time to try it again */
    r = f->sock >= 0 ? ask(f, rq, p->bpf, fds, c1, pidfd, err) : -EPIPE;
    if (r == -EPIPE) {
        /* Gone before it took this request (killed, crashed), or none yet
         * (a zygote retired, failed, reaped by lsb_factory_poll): once
         * more, with a new one; said only when it went unannounced. */
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
out:
    pthread_mutex_unlock(&f->mu);
    free(rq);
    return r;
}
