/* plugin.h — finding, loading and checking executor plugins. */
#ifndef HUTCH_PLUGIN_H
#define HUTCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_plugin {
    char *path;                      /* absolute path of the .so */
    char *name;                      /* executor name, or the file's stem */
    void *dl;                        /* dlopen handle, NULL when not loaded */
    const struct hutch_executor *ex; /* NULL unless the ABI checked out */
    int usable;                      /* loaded and probe() said yes */
    char reason[HUTCH_ERR_MSG];      /* why not usable */
    void *state;                     /* from open(), owned by the plugin */
    int opened;
    char *state_dir; /* cfg->state_dir given to open(); removed on free */
};

struct hutch_plugins {
    struct hutch_plugin *v;
    size_t n;
    char *dir;
};

/* The core's service table for plugins.  runner_dir is borrowed and must
 * outlive every plugin call. */
void hutch_host_init(struct hutch_host *host, const char *runner_dir);

/* Load every *.so of `dir` (sorted by name).  Plugins that fail to load or
 * check are kept in the list with a reason and never called.  Fails only
 * when `dir` itself cannot be read.  Caller frees with hutch_plugins_free. */
int hutch_plugins_load(const char *dir, const struct hutch_host *host,
                       struct hutch_plugins **out, struct hutch_err *err);
/* The same without probe(): what the plugins declare (their name and
 * options, for `hutch policy check` and hutch(1)), none of them usable. */
int hutch_plugins_load_declared(const char *dir, const struct hutch_host *host,
                                struct hutch_plugins **out, struct hutch_err *err);
/* The plugin named `name`, usable or not; NULL when absent. */
struct hutch_plugin *hutch_plugins_find(struct hutch_plugins *ps, const char *name);
/* open() once, with this process's struct hutch_config: the instance id
 * (hutch_instance_id()) and a private state directory for the plugin,
 * created here (mode 0700) as BASE/EXECUTOR/PID.START, where BASE is
 * /run/hutch as root, else $XDG_RUNTIME_DIR/hutch, else /tmp/hutch-UID.
 * Later calls are no-ops.  Not thread-safe for one plugin: callers that
 * open plugins from several threads hold a lock. */
int hutch_plugin_open(struct hutch_plugin *p, const struct hutch_host *host,
                      struct hutch_err *err);
/* What hutch processes that are gone left behind, on every usable
 * executor that has a sweep(), whether this hutch opens it or not: called
 * once at start, before any plugin is opened, and by the janitor
 * (janitor.h).  Cheap when nothing was left: unless `always` (the
 * janitor's later sweeps, for what an engine made after the first), a
 * sweep() is called only for an executor whose state directories include
 * one of a gone process. */
void hutch_plugins_sweep(struct hutch_plugins *ps, const struct hutch_host *host,
                         int always);
/* Unique per hutch process (16 hex digits): plugins label what they make
 * with it. */
const char *hutch_instance_id(void);
/* close() what was opened, remove its state directory, free. */
void hutch_plugins_free(struct hutch_plugins *ps);

/* `hutch __plugin-helper PLUGIN_PATH ARG...` (HUTCH_HELPER_VERB): load
 * the plugin and run its helper() in this fresh process; main() calls it
 * before anything else, so no thread exists.  Exit status. */
int hutch_plugin_helper_main(int argc, char **argv);

/* plugin_opts.c: the options the executor declares (struct hutch_option).
 * Row i of its table, or NULL past the end or when it declares none. */
const struct hutch_option *hutch_plugin_option(const struct hutch_executor *ex,
                                               size_t i);
/* The table is readable (see hutch-executor.h); else -EPROTO and why. */
int hutch_plugin_options_check_table(const struct hutch_executor *ex, char *reason,
                                     size_t len);
/* "string", "bool" or "int". */
const char *hutch_option_type_name(uint32_t type);
/* A policy's executor_options for this executor (a JSON object of strings,
 * or NULL) against its declarations: 0, or -EINVAL naming the option, the
 * executor and the options a policy may set.  0 when the executor declares
 * nothing (a plugin built before the table). */
int hutch_plugin_check_options(const struct hutch_executor *ex, const char *json,
                               struct hutch_err *err);

/* Directory from --plugins, else $HUTCH_PLUGIN_DIR, else the install dir. */
const char *hutch_plugin_dir(const char *flag);
/* Same for runners: $HUTCH_RUNNER_DIR, else the install dir. */
const char *hutch_runner_dir(void);

#endif
