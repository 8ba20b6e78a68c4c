/* abi.h — the in-tree plugins' helpers for the core's structs: reading
 * struct hutch_start and writing struct hutch_exit as far as the core's
 * struct_size goes (the core may be older than the plugin, its structs
 * smaller).  Header-only: the local plugin does not link the rest of
 * plugins/common. */
#ifndef HUTCH_PLUGIN_ABI_H
#define HUTCH_PLUGIN_ABI_H

#include <string.h>
#include <sys/wait.h>

#include "hutch-executor.h"

/* Has the core given up on this start()?  Asked while start() waits. */
static inline int plugin_start_cancelled(const struct hutch_start *how)
{
    return how && HUTCH_HAS_MEMBER(how, struct hutch_start, cancel_arg) &&
           how->cancelled && how->cancelled(how->cancel_arg);
}

/* A start for a pool (its job comes later), not for a job waiting. */
static inline int plugin_start_pooled(const struct hutch_start *how)
{
    return how && HUTCH_HAS_MEMBER(how, struct hutch_start, pooled) && how->pooled;
}

/* The runner imports the data flavour's packages before it says ready:
 * for a python sandbox of the data flavour started for a pool (a cold
 * start's job would wait for imports it may not need). */
static inline int plugin_preload(const struct hutch_sandbox_class *cls, int data,
                                 const struct hutch_start *how)
{
    return data == 1 && strcmp(cls->language, "python") == 0 &&
           plugin_start_pooled(how);
}

/* how->label, or `dflt`. */
static inline const char *plugin_start_label(const struct hutch_start *how,
                                             const char *dflt)
{
    return how && HUTCH_HAS_MEMBER(how, struct hutch_start, label) && how->label
               ? how->label
               : dflt;
}

/* job->label, or `dflt`. */
static inline const char *plugin_job_label(const struct hutch_job *job,
                                           const char *dflt)
{
    return job && HUTCH_HAS_MEMBER(job, struct hutch_job, label) && job->label
               ? job->label
               : dflt;
}

/* job->deadline_ms (CLOCK_MONOTONIC ms), or 0 when the core gave none. */
static inline uint64_t plugin_job_deadline(const struct hutch_job *job)
{
    return job && HUTCH_HAS_MEMBER(job, struct hutch_job, deadline_ms)
               ? job->deadline_ms
               : 0;
}

/* job->egress: 1 (or a core that does not say) when the job may have
 * egress, 0 when it has none. */
static inline int plugin_job_egress(const struct hutch_job *job)
{
    return !job || !HUTCH_HAS_MEMBER(job, struct hutch_job, egress) || job->egress;
}

/* Write only what the core's struct_size covers; struct_size is never
 * touched. */
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

#endif /* HUTCH_PLUGIN_ABI_H */
