/* exit.h — filling the core's struct hutch_exit from a plugin: only the
 * members the core's struct_size covers are written (the core may be older
 * than the plugin and its struct smaller), and struct_size is never touched. */
#ifndef HUTCH_PLUGIN_EXIT_H
#define HUTCH_PLUGIN_EXIT_H

#include <sys/wait.h>

#include "hutch-executor.h"

static inline void plugin_exit_set(struct hutch_exit *ex, int exit_code, int signal,
                                   int oom)
{
    if (HUTCH_HAS_MEMBER(ex, struct hutch_exit, exit_code))
        ex->exit_code = exit_code;
    if (HUTCH_HAS_MEMBER(ex, struct hutch_exit, signal))
        ex->signal = signal;
    if (HUTCH_HAS_MEMBER(ex, struct hutch_exit, oom))
        ex->oom = oom;
}

/* From a wait status: the exit status, or 128+signal. */
static inline void plugin_exit_from_status(struct hutch_exit *ex, int status, int oom)
{
    if (WIFSIGNALED(status))
        plugin_exit_set(ex, 128 + WTERMSIG(status), WTERMSIG(status), oom);
    else
        plugin_exit_set(ex, WEXITSTATUS(status), 0, oom);
}

#endif
