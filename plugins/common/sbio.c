/* sbio.c — listening for hutch-init and speaking its ctl protocol (see
 * sbio.h and plugins/init/init.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi.h"
#include "box.h"
#include "sbio.h"

static const char *const names[SBIO_NSOCK] = {"ctl", "chan", "out", "err"};

static int sock_path(const struct sbio *io, int i, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s", io->dir, names[i]);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void close_listeners(struct sbio *io)
{
    char path[PATH_MAX];
    for (int i = 0; i < SBIO_NSOCK; i++) {
        if (io->lfd[i] < 0)
            continue;
        close(io->lfd[i]);
        io->lfd[i] = -1;
        if (sock_path(io, i, path, sizeof(path)) == 0)
            unlink(path);
    }
}

int sbio_open(struct sbio *io, const char *dir, struct hutch_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    int r, dfd;

    memset(io, 0, sizeof(*io));
    for (int i = 0; i < SBIO_NSOCK; i++)
        io->lfd[i] = io->fd[i] = -1;
    if (strlen(dir) >= sizeof(io->dir) || strlen(dir) + 6 >= sizeof(sa.sun_path))
        return hutch_err_set(err, -ENAMETOOLONG,
                             "socket directory %s: the path is too long for a unix "
                             "socket (choose a shorter state directory)",
                             dir);
    memcpy(io->dir, dir, strlen(dir) + 1);
    if (mkdir(dir, 0755) < 0) {
        r = -errno;
        io->dir[0] = '\0';
        return hutch_err_set(err, r, "creating %s: %s", dir, strerror(-r));
    }
    /* mkdir is subject to the umask; the sandbox user must search it. */
    chmod(dir, 0755);
    /* Bound through /proc/self/fd/N/: a socket's name is what bind() was
     * given, and the sandbox sees it in its /proc/net/unix (the server end
     * of each connection init makes lives in the sandbox's network
     * namespace and carries the listener's name), so the host's path of
     * the state directory does not show there. */
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        r = -errno;
        hutch_err_set(err, r, "opening %s: %s", dir, strerror(-r));
        sbio_close(io);
        return r;
    }
    for (int i = 0; i < SBIO_NSOCK; i++) {
        sock_path(io, i, path, sizeof(path));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd,
                 names[i]);
        io->lfd[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (io->lfd[i] < 0 ||
            bind(io->lfd[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            chmod(path, 0666) < 0 || listen(io->lfd[i], 1) < 0) {
            r = -errno;
            hutch_err_set(err, r, "listening on %s: %s", path, strerror(-r));
            close(dfd);
            sbio_close(io);
            return r;
        }
    }
    close(dfd);
    return 0;
}

/* Waits until `step` says done (1) or fails (negative), at most timeout_ms:
 * the one loop of sbio_accept and sbio_wait_hello.  `step` waits at most
 * the slice it is given.  `alive` is asked every 200 ms whether the sandbox
 * still runs, how->cancelled() between slices. */
static int wait_for(struct sbio *io, int timeout_ms, const char *what,
                    int (*step)(struct sbio *io, int slice_ms, struct hutch_err *err),
                    int (*alive)(void *arg, struct hutch_err *err), void *arg,
                    const struct hutch_start *how, struct hutch_err *err)
{
    uint64_t deadline = box_now_ms() + (uint64_t)timeout_ms;
    uint64_t next_alive = box_now_ms() + 200;

    for (;;) {
        uint64_t now = box_now_ms();
        int r, slice;
        if (plugin_start_cancelled(how))
            return hutch_err_set(err, -ECANCELED, "%s: sandbox start cancelled",
                                 plugin_start_label(how, "-"));
        if (now >= deadline)
            return hutch_err_set(err, -ETIMEDOUT,
                                 "the sandbox's init did not %s within %d ms", what,
                                 timeout_ms);
        /* Short slices: cancellation is asked about between them. */
        slice = deadline - now > 50 ? 50 : (int)(deadline - now);
        r = step(io, slice, err);
        if (r != 0) {
            /* init gone before it was up: the sandbox may say why. */
            if (r < 0 && r == -EPIPE && alive && alive(arg, err) < 0)
                return err->code ? err->code : -EIO;
            return r > 0 ? 0 : r;
        }
        /* `alive` may cost an API call: every 200 ms at most. */
        if (alive && box_now_ms() >= next_alive) {
            next_alive = box_now_ms() + 200;
            r = alive(arg, err);
            if (r < 0)
                return r;
        }
    }
}

static int accept_step(struct sbio *io, int slice_ms, struct hutch_err *err)
{
    struct pollfd p[SBIO_NSOCK];
    int idx[SBIO_NSOCK], n = 0, left = 0, r;
    char path[PATH_MAX];

    for (int i = 0; i < SBIO_NSOCK; i++)
        if (io->lfd[i] >= 0) {
            idx[n] = i;
            p[n++] = (struct pollfd){io->lfd[i], POLLIN, 0};
        }
    r = poll(p, (nfds_t)n, slice_ms);
    if (r < 0 && errno != EINTR)
        return hutch_err_set(err, -errno, "poll: %s", strerror(errno));
    for (int k = 0; r > 0 && k < n; k++) {
        int i = idx[k], fd;
        if (!(p[k].revents & POLLIN))
            continue;
        fd = accept4(io->lfd[i], NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        io->fd[i] = fd;
        close(io->lfd[i]);
        io->lfd[i] = -1;
        if (sock_path(io, i, path, sizeof(path)) == 0)
            unlink(path); /* or the directory cannot be removed */
    }
    for (int i = 0; i < SBIO_NSOCK; i++)
        left += io->lfd[i] >= 0;
    return left == 0;
}

int sbio_accept(struct sbio *io, int timeout_ms,
                int (*alive)(void *arg, struct hutch_err *err), void *arg,
                const struct hutch_start *how, struct hutch_err *err)
{
    int r = wait_for(io, timeout_ms, "connect", accept_step, alive, arg, how, err);
    close_listeners(io);
    return r;
}

void sbio_adopt(struct sbio *io, const int fd[SBIO_NSOCK])
{
    memset(io, 0, sizeof(*io));
    for (int i = 0; i < SBIO_NSOCK; i++) {
        io->lfd[i] = -1;
        io->fd[i] = fd[i];
    }
}

static void read_ctl(struct sbio *io);

static int hello_step(struct sbio *io, int slice_ms, struct hutch_err *err)
{
    struct pollfd p = {io->fd[SBIO_CTL], POLLIN, 0};
    if (poll(&p, 1, slice_ms) < 0 && errno != EINTR)
        return hutch_err_set(err, -errno, "poll: %s", strerror(errno));
    read_ctl(io);
    if (io->hello)
        return 1;
    if (io->ctl_eof)
        return hutch_err_set(err, -EPIPE,
                             "the sandbox's init ended before it said hello");
    return 0;
}

int sbio_wait_hello(struct sbio *io, int timeout_ms,
                    int (*alive)(void *arg, struct hutch_err *err), void *arg,
                    const struct hutch_start *how, struct hutch_err *err)
{
    return wait_for(io, timeout_ms, "say hello", hello_step, alive, arg, how, err);
}

/* "work MAJ:MIN INO SEC.NSEC" (see struct sbio_work): 0, or -1 when the
 * line is not one. */
static int parse_work(const char *line, struct sbio_work *w)
{
    struct sbio_work v = {.known = 1};
    int end = 0;

    if (sscanf(line, "work %u:%u %llu %lld.%ld%n", &v.major, &v.minor, &v.ino,
               &v.ctime_sec, &v.ctime_nsec, &end) != 5 ||
        line[end] != '\0' || v.ctime_nsec < 0 || v.ctime_nsec > 999999999)
        return -1;
    *w = v;
    return 0;
}

/* Reads whatever init has said; sets exited/stopped/work/ctl_eof. */
static void read_ctl(struct sbio *io)
{
    while (!io->ctl_eof) {
        char *nl;
        ssize_t n;
        if (io->line_len >= sizeof(io->line) - 1) {
            io->ctl_eof = 1; /* init never says that much: treat it as gone */
            break;
        }
        n = recv(io->fd[SBIO_CTL], io->line + io->line_len,
                 sizeof(io->line) - 1 - io->line_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            io->ctl_eof = 1;
            break;
        }
        io->line_len += (size_t)n;
        io->line[io->line_len] = '\0';
        while ((nl = strchr(io->line, '\n'))) {
            int status, oom;
            *nl = '\0';
            if (strcmp(io->line, "hello") == 0) {
                io->hello = 1;
            } else if (strncmp(io->line, "work ", 5) == 0) {
                if (parse_work(io->line, &io->work) < 0)
                    io->work.known = 0;
            } else if (strncmp(io->line, "noview ", 7) == 0) {
                snprintf(io->noview, sizeof(io->noview), "%s", io->line + 7);
            } else if (strcmp(io->line, "egress off") == 0) {
                io->egress_off = 1;
            } else if (strncmp(io->line, "egress ", 7) == 0) {
                int e = 0;
                io->egress = strcmp(io->line + 7, "ok") == 0                ? 1
                             : sscanf(io->line + 7, "%d", &e) == 1 && e > 0 ? -e
                                                                            : -EPROTO;
            } else if (!io->exited &&
                       sscanf(io->line, "exit %d %d", &status, &oom) == 2) {
                io->exited = 1;
                io->status = status;
                io->oom = oom;
            } else if (strncmp(io->line, "stopped", 7) == 0 &&
                       (io->line[7] == ' ' || io->line[7] == '\0')) {
                io->stopped = 1;
                snprintf(io->out, sizeof(io->out), "%s",
                         io->line[7] ? io->line + 8 : "");
            }
            io->line_len -= (size_t)(nl + 1 - io->line);
            memmove(io->line, nl + 1, io->line_len + 1);
        }
    }
}

int sbio_poll_exit(struct sbio *io)
{
    if (io->fd[SBIO_CTL] < 0)
        return -EPIPE;
    read_ctl(io);
    if (io->exited)
        return 1;
    return io->ctl_eof ? -EPIPE : 0;
}

/* Says `cmd` on ctl and waits, at most timeout_ms, until *said is set
 * (read_ctl sets it from init's answer): 0, or -EPIPE / -ETIMEDOUT. */
static int ctl_ask(struct sbio *io, const char *cmd, const int *said, int timeout_ms)
{
    uint64_t deadline = box_now_ms() + (uint64_t)timeout_ms;

    if (io->fd[SBIO_CTL] < 0 || io->ctl_eof ||
        send(io->fd[SBIO_CTL], cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd))
        return -EPIPE;
    for (;;) {
        struct pollfd p = {io->fd[SBIO_CTL], POLLIN, 0};
        uint64_t now = box_now_ms();
        read_ctl(io);
        if (*said)
            return 0;
        if (io->ctl_eof)
            return -EPIPE;
        if (now >= deadline)
            return -ETIMEDOUT;
        if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
            return -errno;
    }
}

int sbio_stop(struct sbio *io, int timeout_ms)
{
    io->stopped = 0;
    io->out[0] = '\0';
    io->work.known = 0;
    return ctl_ask(io, "stop\n", &io->stopped, timeout_ms);
}

int sbio_egress_off(struct sbio *io, int timeout_ms)
{
    return io->egress_off ? 0
                          : ctl_ask(io, "egress off\n", &io->egress_off, timeout_ms);
}

int sbio_out_check(const struct sbio *io, struct hutch_err *err)
{
    int e;

    if (strcmp(io->out, "ok") == 0)
        return 0;
    if (strcmp(io->out, "absent") == 0)
        return 1;
    if (strcmp(io->out, "symlink") == 0)
        return hutch_err_set(err, -ELOOP,
                             "cannot pack /work/out: it is a symbolic link (not "
                             "followed)");
    if (strcmp(io->out, "notdir") == 0)
        return hutch_err_set(err, -ENOTDIR, "cannot pack /work/out: %s",
                             strerror(ENOTDIR));
    if (strcmp(io->out, "owner") == 0)
        return hutch_err_set(err, -EPERM,
                             "cannot pack /work/out: it does not belong to the "
                             "sandbox user");
    if (sscanf(io->out, "errno=%d", &e) == 1 && e > 0)
        return hutch_err_set(err, -e, "cannot pack /work/out: %s", strerror(e));
    return hutch_err_set(err, -EPROTO,
                         "the sandbox's init did not say what /work/out is (\"%s\")",
                         io->out);
}

int sbio_egress_listen(const char *dir, mode_t mode, struct hutch_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    int fd, dfd, r;

    if (snprintf(path, sizeof(path), "%s/" SBIO_EGRESS, dir) >= (int)sizeof(path))
        return hutch_err_set(err, -ENAMETOOLONG, "%s: the path is too long", dir);
    /* Bound through /proc/self/fd/N/, as sbio_open's: the sandbox's
     * /proc/net/unix shows the name bind() was given, not the host's
     * path. */
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return hutch_err_set(err, -errno, "opening %s: %s", dir, strerror(errno));
    snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" SBIO_EGRESS, dfd);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(path, mode) < 0 || listen(fd, HUTCH_SANDBOX_EGRESS_CONNS) < 0) {
        r = hutch_err_set(err, -errno, "listening on %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        close(dfd);
        return r;
    }
    close(dfd);
    return fd;
}

void sbio_close(struct sbio *io)
{
    char path[PATH_MAX + 8];

    close_listeners(io);
    for (int i = 0; i < SBIO_NSOCK; i++)
        if (io->fd[i] >= 0) {
            close(io->fd[i]);
            io->fd[i] = -1;
        }
    if (io->dir[0]) {
        /* The egress socket, if there is one: its listener is the core's. */
        snprintf(path, sizeof(path), "%s/" SBIO_EGRESS, io->dir);
        unlink(path);
        rmdir(io->dir);
        io->dir[0] = '\0';
    }
}

void sbio_remove_leftover(const char *dir)
{
    char path[PATH_MAX + 8];
    for (int i = 0; i < SBIO_NSOCK; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/" SBIO_EGRESS, dir);
    unlink(path);
    rmdir(dir);
}

void sbio_exit_from_status(int status, int oom, struct hutch_exit *ex)
{
    plugin_exit_from_status(ex, status, oom);
}
