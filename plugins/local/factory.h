/* factory.h — the local executor's sandbox factory (factory.c): the
 * single-threaded process that forks every sandbox, and hutch's side of
 * it. */
#ifndef HUTCH_LOCAL_FACTORY_H
#define HUTCH_LOCAL_FACTORY_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox.h"

struct lsb_factory {
    pthread_mutex_t mu; /* the socket: one request and its answer at a time */
    const struct hutch_host *host;
    int sock;           /* -1: not running */
    pid_t pid;          /* our child */
    char exe[PATH_MAX]; /* host->helper_exe */
    char so[PATH_MAX];  /* this plugin's file */
    /* A Python zygote (zygote.c), started at its first request: */
    int zygote;                /* this is one */
    char interp[PATH_MAX];     /* the interpreter it holds */
    char runner_dir[PATH_MAX]; /* where it loads the runner from */
    int failed;                /* it could not start: why says why */
    char why[256];
    uint64_t retry_ms; /* failed: when to try again (monotonic) */
    pid_t retired[8];  /* retired ones not yet reaped */
    int nretired;
};

/* Start the factory (plugin open). */
int lsb_factory_init(struct lsb_factory *f, const struct hutch_host *host,
                     struct hutch_err *err);
/* Set up a Python zygote for `interp`, the runner in `runner_dir`; it
 * starts at its first request.  Its lsb_factory_spawn() fails with
 * -ENOEXEC, saying why, when it cannot start (no library, another version):
 * the caller then uses a plain factory. */
int lsb_factory_init_zygote(struct lsb_factory *f, const struct hutch_host *host,
                            const char *interp, const char *runner_dir,
                            struct hutch_err *err);
/* Stop it and reap it (plugin close: no sandbox is left). */
void lsb_factory_fini(struct lsb_factory *f);
/* Fork a sandbox's C1 with parameters `p` (its five descriptors are sent;
 * the caller still closes its own copies).  *c1: C1's pid; *pidfd: a pidfd
 * of it, the caller's to close.  C1 is the factory's child: wait for it
 * on the pidfd, not with waitpid().  -EAGAIN: the factory went away with
 * the request; the next call starts another; try again with new
 * descriptors (a C1 may have used these before it died). */
int lsb_factory_spawn(struct lsb_factory *f, const struct lsb_params *p, pid_t *c1,
                      int *pidfd, struct hutch_err *err);
/* Reap the factory if it exited (killed, crashed), so that no zombie of
 * it stays until its next request, and the retired zygotes that are gone.
 * Never waits: skipped while a request is under way. */
void lsb_factory_poll(struct lsb_factory *f);
/* The factory process's main (the plugin's helper()). */
int lsb_factory_main(const struct hutch_host *host, int argc, char **argv);

#endif
