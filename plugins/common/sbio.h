/* sbio.h — the four streams between an executor plugin and hutch-init
 * (see plugins/init/init.c), and init's ctl protocol, shared by the Docker
 * and gVisor executors.
 *
 * gVisor: the plugin makes a directory holding four listening unix
 * sockets; the sandbox gets it bind-mounted at /run/hutch/io, and
 * hutch-init, pid 1 of the sandbox, connects to each once.  After that the
 * listeners are closed and removed, so nothing else can connect.  One more
 * may stay for the sandbox's life: the egress socket (sbio_egress_listen),
 * which init connects to once per connection of the program's to hutch's
 * proxy (init.c's --egress).
 * Docker: the streams travel framed over the container's attach stream
 * (plugins/docker/attach.c), which hands sbio the socket pairs it feeds
 * (sbio_adopt); the ctl protocol is the same. */
#ifndef HUTCH_SBIO_H
#define HUTCH_SBIO_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "caps.h"
#include "hutch-executor.h"

enum { SBIO_CTL, SBIO_CHAN, SBIO_OUT, SBIO_ERR, SBIO_NSOCK };

struct sbio {
    char dir[PATH_MAX];                /* host side of /run/hutch/io */
    int lfd[SBIO_NSOCK];               /* listeners, -1 once accepted */
    int fd[SBIO_NSOCK];                /* connections from init */
    char line[HUTCH_SANDBOX_CTL_LINE]; /* partial line read from ctl */
    size_t line_len;
    int exited, status, oom; /* from init's "exit STATUS OOM" */
    int stopped;             /* init said "stopped" */
    char out[16];            /* what init said of /work/out with "stopped" */
    /* What init said of /work itself just before "stopped" (--attach):
     * "work MAJ:MIN INO SEC.NSEC", its device, inode and change time as
     * the container's kernel has them.  The Docker executor's proof that a
     * directory of the host is the container's /work (docker.c,
     * docker_get); known is 0 until said, and again at every sbio_stop. */
    struct sbio_work {
        int known;
        unsigned major, minor;
        unsigned long long ino;
        long long ctime_sec;
        long ctime_nsec;
    } work;
    int ctl_eof;
    int hello; /* init said "hello" (attach mode) */
    /* init said "noview STEP ERRNO" (before hello): the engine refused the
     * program's view (plugins/init/init.c); "STEP ERRNO", else "". */
    char noview[56];
    /* init said "egress ok" (1) or "egress ERRNO" (-ERRNO) before hello:
     * whether it could connect to its --egress socket; 0 unsaid. */
    int egress;
    int egress_off; /* init said "egress off": it no longer listens */
};

/* Create `dir` (mode 0755; its parent must exist) and listen on its four
 * sockets.  On error nothing is left. */
int sbio_open(struct sbio *io, const char *dir, struct hutch_err *err);

/* Wait until init connected to all four sockets, at most timeout_ms.
 * `alive` is asked every 200 ms whether the sandbox still runs (0 yes,
 * negative no, with err filled), so a sandbox that died early does not
 * cost the whole timeout; how->cancelled() (how may be NULL) every 50 ms,
 * -ECANCELED when it says so.  The listeners are closed and removed either
 * way. */
int sbio_accept(struct sbio *io, int timeout_ms,
                int (*alive)(void *arg, struct hutch_err *err), void *arg,
                const struct hutch_start *how, struct hutch_err *err);

/* Attach mode (plugins/docker/attach.c): the four streams arrive as the
 * core-facing ends of socket pairs fd[SBIO_*] instead of accepted sockets;
 * io takes them (sbio_close closes them). */
void sbio_adopt(struct sbio *io, const int fd[SBIO_NSOCK]);

/* Attach mode: wait until init said "hello" on ctl, as sbio_accept waits
 * for its connections (same timeout, `alive` and cancellation rules). */
int sbio_wait_hello(struct sbio *io, int timeout_ms,
                    int (*alive)(void *arg, struct hutch_err *err), void *arg,
                    const struct hutch_start *how, struct hutch_err *err);

/* Read what init said on ctl.  1 once the runner's exit is known (io->status,
 * io->oom), 0 while not, -EPIPE when init is gone without saying. */
int sbio_poll_exit(struct sbio *io);

/* Ask init to kill every process but itself and wait for it to confirm
 * (the runner's exit, if still unknown, arrives on the way, and with
 * --attach what /work is, io->work).  0, or -EPIPE / -ETIMEDOUT. */
int sbio_stop(struct sbio *io, int timeout_ms);

/* Ask init to stop listening on 127.0.0.1:HUTCH_EGRESS_PORT (a job
 * without egress) and wait until it says it did.  0, or -EPIPE /
 * -ETIMEDOUT. */
int sbio_egress_off(struct sbio *io, int timeout_ms);

/* After sbio_stop: may /work/out be fetched by someone who follows
 * symbolic links (Docker's archive endpoint runs as root)?  0 when it is a
 * directory of the sandbox user, 1 when there is none (no files), else an
 * error worded as the core's own packer words it for the local and gVisor
 * executors. */
int sbio_out_check(const struct sbio *io, struct hutch_err *err);

/* The egress socket's name in a socket directory. */
#define SBIO_EGRESS "egress"

/* Listen on DIR/egress for hutch-init's egress forwarder (non-blocking,
 * close-on-exec, a backlog of HUTCH_SANDBOX_EGRESS_CONNS): the listener,
 * which the caller hands to the core as its sandbox's egress_fd, or
 * -errno with err set.  The socket is hutch's user's, with `mode`: 0600
 * lets only root (init, where the sandbox's root is the host's) connect,
 * not the program.  sbio_close and sbio_remove_leftover remove it. */
int sbio_egress_listen(const char *dir, mode_t mode, struct hutch_err *err);

/* Close everything and remove the directory.  Closing ctl ends init, and
 * with it the sandbox. */
void sbio_close(struct sbio *io);

/* Remove a socket directory a gone hutch process left. */
void sbio_remove_leftover(const char *dir);

/* Fill *ex from a wait status (only what the core's struct_size covers). */
void sbio_exit_from_status(int status, int oom, struct hutch_exit *ex);

#endif
