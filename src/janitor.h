/* janitor.h — a process that outlives its hutch, to remove what hutch's
 * executors left when hutch ends without cleaning up (SIGKILL, a crash).
 *
 * Any hutch that starts sweeps what gone hutch processes left
 * (hutch_plugins_sweep); the janitor makes that happen when the one that
 * died is gone, not when the next one starts, which may be never (a
 * client that ends its server with SIGKILL and does not start it again).
 *
 * hutch_janitor_start() spawns `hutch __janitor PID START DIR` (posix_spawn,
 * in a session of its own, stdio on /dev/null but its stdin, a pipe whose
 * write end hutch holds, close-on-exec, for its whole life).  A clean end
 * calls hutch_janitor_release() once everything of hutch is removed: it
 * writes one byte and waits for the janitor to exit.  When the pipe ends
 * without that byte, hutch is gone: the janitor waits until it is reaped
 * (a zombie still counts as running for the sweeps), then sweeps every
 * usable executor at once and twice more a while later (a container the
 * engine was still creating when hutch died appears after the first), and
 * exits.  Silent: nothing it does is hutch's output. */
#ifndef HUTCH_JANITOR_H
#define HUTCH_JANITOR_H

#include "util.h"

#define HUTCH_JANITOR_VERB "__janitor"

/* Starts this process's janitor (once; later calls are no-ops), which
 * loads the plugins of `plugin_dir` to sweep.  0, or -errno with err
 * saying why (hutch goes on without one: the next hutch that starts
 * sweeps instead). */
int hutch_janitor_start(const char *plugin_dir, struct hutch_err *err);
/* The clean end: the janitor exits without sweeping. */
void hutch_janitor_release(void);

/* `hutch __janitor PID START PLUGIN_DIR`: main() calls it first.  Exit
 * status. */
int hutch_janitor_main(int argc, char **argv);

#endif
