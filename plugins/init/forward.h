/* forward.h — hutch-init's egress forwarder: the sandbox's end of hutch's
 * HTTP proxy (see forward.c).  Only init's loops call it. */
#ifndef HUTCH_INIT_FORWARD_H
#define HUTCH_INIT_FORWARD_H

#include <poll.h>
#include <stddef.h>

#include "../../src/caps.h"
#include "../../src/hutch-executor.h" /* HUTCH_EGRESS_PORT */

/* The most pollfds fwd_poll_fill adds: the listener and both ends of each
 * connection. */
#define FWD_POLLFDS (1 + 2 * HUTCH_SANDBOX_EGRESS_CONNS)

/* Listens on 127.0.0.1:HUTCH_EGRESS_PORT and carries each connection
 * accepted there to the unix socket `target` (a path of the sandbox).
 * Called before the runner is forked, so the port is init's before the
 * program runs.  0, or -errno. */
int fwd_open(const char *target);

/* Connects once to fwd_open's `target` and lets go: 0 when init can reach
 * it, else -errno.  The docker executor's proof that the socket it made is
 * what the container sees at that path (init.c: "egress" on ctl). */
int fwd_probe(void);

/* Stops listening and ends every connection: the job has no egress, so
 * that the program's connections are refused from now on, and the port is
 * anybody's. */
void fwd_close(void);

/* The forwarder's pollfds, appended to p (room entries; FWD_POLLFDS are
 * enough): their count.  0 without fwd_open. */
size_t fwd_poll_fill(struct pollfd *p, size_t room);

/* After poll(): the entries fwd_poll_fill filled (n of them, revents set),
 * handled.  Nothing else may have changed between the two calls. */
void fwd_poll_done(const struct pollfd *p, size_t n);

#endif
