/* hutch-executor.h — the executor plugin ABI (installed; the only header a
 * plugin needs).
 *
 * A plugin is a shared object exporting one symbol, hutch_executor_entry()
 * (declare it with HUTCH_EXECUTOR_EXPORT, see the end of this file), which
 * returns a static struct hutch_executor.  The core checks `abi` and
 * `struct_size` before touching anything else; a plugin of another ABI is
 * listed by `hutch plugins` with the reason and never called.  Plugins never
 * call the core by symbol: everything the core offers arrives in struct
 * hutch_host.
 *
 * Compatibility rules: every struct that crosses the boundary starts with its
 * size (struct_size, after abi where there is one) and only ever grows at the
 * end; a reader looks at a member only when the producer's struct_size covers
 * it (HUTCH_HAS_MEMBER), and a writer writes a member only when the owner's
 * struct_size covers it.
 *
 * ABI 2 (this header) changed from ABI 1: the sandbox spec is split into the
 * class (known before a job exists) and the job (given at assign()); start()
 * takes a cancellation callback; assign() is new; hutch_err, hutch_exit and
 * hutch_archive_limits start with struct_size; doctor's report callback gets
 * a context pointer; hutch_executor has a `version`.  Grown since, at the
 * end (check HUTCH_HAS_MEMBER): hutch_executor's runtime(), then sweep(),
 * then helper(), then cpu_weight(), then options (the declared executor
 * options); hutch_host's helper_exe; hutch_sandbox's egress_fd (with
 * HUTCH_CAP_EGRESS); hutch_job's egress.
 *
 * Processes.  hutch is multi-threaded: in a child fork()ed from hutch's
 * process a plugin makes only async-signal-safe calls (POSIX; no malloc, no
 * stdio, no hutch_host callback) and then execs.  Work a child must do with
 * hutch's code (unpacking a tar into a sandbox) runs in a helper process:
 * a fresh, single-threaded hutch that the plugin execs (helper_exe) and
 * that runs its helper(), where fork() is free again.
 *
 * Life of a sandbox (a sandbox is single use):
 *   start()        the sandbox of a class exists, its runner started and will
 *                  send "ready" on chan_fd, then wait for one job.  This may
 *                  happen long before a job exists (warm pools): nothing in
 *                  the class names a job.
 *   assign()       the one job of this sandbox (its label and deadline) is
 *                  known; called once, before put_archive().
 *   put_archive()  uncompressed tar unpacked under /work
 *   ...            the core speaks the wire protocol on chan_fd and reads
 *                  stdout_fd/stderr_fd until event_fd is readable
 *   reap()         exit status of the runner
 *   get_archive()  uncompressed tar of /work/out (untrusted: the core unpacks it)
 *   destroy()      everything of the sandbox is gone when this returns
 * kill() may be called at any point after start() (timeout, cancellation); a
 * sandbox may also be destroyed without ever being assigned (a pool drained).
 *
 * Threads.  The core never makes two calls on one sandbox at the same time:
 * kill() does not overlap reap(), put_archive() or get_archive() of the same
 * sandbox, and nothing is called on a sandbox after destroy() began.  With
 * HUTCH_CAP_CONCURRENT, calls on *different* sandboxes (start() included) may
 * come from different threads at once, so the plugin's state must be
 * thread-safe.  start() calls cancelled(cancel_arg) (when not NULL) while it
 * waits, and when it returns non-zero gives up: everything it made is removed
 * and it returns -ECANCELED.
 */
#ifndef HUTCH_EXECUTOR_H
#define HUTCH_EXECUTOR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUTCH_EXECUTOR_ABI   2
#define HUTCH_EXECUTOR_ENTRY "hutch_executor_entry"

#define HUTCH_HAS_MEMBER(ptr, type, member)                                            \
    ((ptr)->struct_size >= offsetof(type, member) + sizeof((ptr)->member))

/* Errors: functions return 0 or a negative errno-style code and fill the
 * caller-owned struct hutch_err with what failed, on what, and what to do.
 * The owner sets struct_size (HUTCH_ERR_INIT); the message is cut to the room
 * the owner's struct has.  A struct_size of 0 stands for ABI 2's struct (code
 * and msg[1024]; the core's own errors, zero-initialised): a member added
 * later is never written into such an error. */
#define HUTCH_ERR_MSG 1024
struct hutch_err {
    uint32_t struct_size;
    int code; /* negative errno-style code, 0 when unset */
    char msg[HUTCH_ERR_MSG];
};
/* clang-format off */
#define HUTCH_ERR_INIT {.struct_size = sizeof(struct hutch_err)}
/* clang-format on */

__attribute__((format(printf, 3, 4))) static inline int
hutch_err_set(struct hutch_err *err, int code, const char *fmt, ...)
{
    if (err) {
        size_t room = sizeof(err->msg);
        if (err->struct_size &&
            err->struct_size < offsetof(struct hutch_err, msg) + room)
            room = err->struct_size > offsetof(struct hutch_err, msg)
                       ? err->struct_size - offsetof(struct hutch_err, msg)
                       : 0;
        if (room) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err->msg, room, fmt, ap);
            va_end(ap);
        }
        err->code = code;
    }
    return code;
}

/* Caps applied when a tar stream is unpacked or packed. */
struct hutch_archive_limits {
    uint32_t struct_size;
    uint32_t max_entries;
    uint64_t max_bytes; /* sum of regular file sizes */
    uint32_t max_path;  /* bytes in one path */
    uint32_t max_depth; /* path components */
};

/* Sink for streamed bytes; returns 0 or a negative errno. */
typedef int (*hutch_write_fn)(void *arg, const void *buf, size_t len);

enum hutch_log_level {
    HUTCH_LOG_ERROR = 0,
    HUTCH_LOG_WARN = 1,
    HUTCH_LOG_INFO = 2,
    HUTCH_LOG_DEBUG = 3,
};

/* The core's services, passed to every plugin call that needs them. */
struct hutch_host {
    uint32_t abi; /* HUTCH_EXECUTOR_ABI of the core */
    uint32_t struct_size;
    const char *version;    /* hutch's version string */
    const char *runner_dir; /* directory holding runner.py and runner.js */
    void (*log)(enum hutch_log_level level, const char *who, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* Safe unpack: rejects absolute paths, "..", links, devices, fifos,
     * setuid/setgid bits; enforces `lim`; never follows a symlink; on error
     * nothing is left at dest_dir.  Thread-safe (it never touches the umask
     * or the working directory), and usable in a forked sandbox helper. */
    int (*archive_extract)(const void *tar, size_t len, const char *dest_dir,
                           const struct hutch_archive_limits *lim,
                           struct hutch_err *err);
    /* Pack a directory into an uncompressed tar written to `write`; regular
     * files and directories only, other entries are skipped; never follows
     * a symlink; enforces `lim`.  Thread-safe. */
    int (*archive_pack_dir)(const char *dir, hutch_write_fn write, void *arg,
                            const struct hutch_archive_limits *lim,
                            struct hutch_err *err);
    /* Re-pack an untrusted tar (e.g. from Docker's archive endpoint) as
     * archive_pack_dir would have packed the tree: regular files and
     * directories only, "./" dropped, modes 0644/0755, paths and `lim`
     * checked, every entry owned by uid:gid (what a daemon that keeps tar
     * owners will give the files).  Thread-safe. */
    int (*archive_filter)(const void *tar, size_t len, hutch_write_fn write, void *arg,
                          const struct hutch_archive_limits *lim, uint32_t uid,
                          uint32_t gid, struct hutch_err *err);
    /* Grown (check HUTCH_HAS_MEMBER).  The program that runs a plugin's
     * helper(): `helper_exe HUTCH_HELPER_VERB PLUGIN_PATH ARG...` loads the
     * plugin at PLUGIN_PATH (a fresh process: no thread of hutch's, no
     * state of it), calls its helper() with its own host and the ARGs, and
     * exits with what it returns.  Exec it (posix_spawn); its environment
     * and descriptors are the caller's to set. */
    const char *helper_exe;
};
#define HUTCH_HELPER_VERB "__plugin-helper"

/* Per-deployment configuration handed to open().  Its strings stay valid
 * until close() returns. */
struct hutch_config {
    uint32_t struct_size;
    const char *instance_id; /* unique per hutch process: label leftovers */
    /* A private directory of this plugin in this hutch process, created by
     * the core (mode 0700) and removed, with what is left in it (without
     * crossing mounts), when the core closes the plugin.  Its name is
     * PID.START (this process's pid and start time, field 22 of
     * /proc/PID/stat), possibly followed by ".N"; its parent holds the
     * state directories of the same executor in other hutch processes.  A
     * hutch that died left its directory: the plugin may clean the ones
     * whose process is gone (the core only removes empty ones), as only
     * the plugin knows what they hold (mounts, a runtime's state). */
    const char *state_dir;
};

/* The class of a sandbox: everything that must be fixed when it starts,
 * before any job exists.  Two sandboxes of equal classes are
 * interchangeable.  Zero means "the executor's default". */
struct hutch_sandbox_class {
    uint32_t struct_size;
    uint32_t pids_max;
    const char *language; /* "python" | "javascript" */
    uint64_t memory_bytes;
    uint64_t work_bytes; /* size cap of /work */
    uint64_t tmp_bytes;  /* size cap of /tmp */
    uint32_t cpu_millis; /* 1000 = one CPU */
    uint32_t open_files;
    /* The policy's executor_options for this executor: a JSON object of
     * strings, or NULL.  An executor refuses options it does not know, as
     * its declarations (hutch_executor's `options`) say: a name it does not
     * declare, one declared HUTCH_OPTION_ENV_ONLY, or a value not of the
     * declared type. */
    const char *options;
};

/* How one start() is made (not part of the class). */
struct hutch_start {
    uint32_t struct_size;
    uint32_t pooled;   /* 1: started ahead of any job, for a warm pool */
    const char *label; /* for names and logs: the execution id, or "pool-N" */
    /* Polled while start() waits; non-zero: give up with -ECANCELED. */
    int (*cancelled)(void *cancel_arg);
    void *cancel_arg;
};

/* The one job of a sandbox, given to assign(). */
struct hutch_job {
    uint32_t struct_size;
    uint32_t reserved;
    const char *label;    /* execution id, for logs */
    uint64_t deadline_ms; /* CLOCK_MONOTONIC ms: the core kills the job then */
    /* Grown (check HUTCH_HAS_MEMBER): 1 when the job has egress, 0 when it
     * has none and the core closed the sandbox's egress_fd already.  A
     * sandbox where something else holds 127.0.0.1:HUTCH_EGRESS_PORT
     * (docker and gvisor: hutch-init's forwarder) stops listening there
     * before assign() returns without egress, so that the program's
     * connections are refused, as they are where that port is egress_fd
     * itself. */
    int egress;
};

/* Written by reap() into the core's struct: check HUTCH_HAS_MEMBER. */
struct hutch_exit {
    uint32_t struct_size;
    int exit_code; /* the runner's exit status, or 128+signal */
    int signal;    /* terminating signal, 0 when it exited */
    int oom;       /* killed by the memory limit */
};

/* Filled by the plugin.  Plugins embed it first in their own struct. */
struct hutch_sandbox {
    uint32_t struct_size;
    int chan_fd;   /* wire protocol with the runner (NDJSON) */
    int stdout_fd; /* the program's stdout, read end */
    int stderr_fd; /* the program's stderr, read end */
    int event_fd;  /* readable once the runner ended: call reap() */
    /* Grown (check HUTCH_HAS_MEMBER), read only with HUTCH_CAP_EGRESS: a
     * listening stream socket (any family, non-blocking) each accepted
     * connection of which is one connection the program made to
     * 127.0.0.1:HUTCH_EGRESS_PORT inside the sandbox, its bytes as the
     * program sent them (local: the TCP listener itself, made in the
     * sandbox's network namespace; docker and gvisor: a unix socket that
     * hutch-init's forwarder connects to once per connection).  The core
     * owns it once start() returned (it accepts on it during the job, or
     * closes it at once when the job has no egress, so that the program's
     * connections are refused) and closes it; the plugin never touches it
     * again.  -1: none. */
    int egress_fd;
};
/* The port of hutch's egress proxy on the sandbox's loopback: the program
 * gets HTTP_PROXY and HTTPS_PROXY naming http://127.0.0.1:3128 when its
 * job has egress. */
#define HUTCH_EGRESS_PORT 3128

/* The declaration of one executor option (hutch_executor's `options`).
 * An option is a string in the policy's executor_options.EXECUTOR table
 * (hutch-policy(5)), read by the plugin at start() (per class); when the
 * policy does not set it, the plugin reads its environment variable `env`
 * (set for the whole hutch process), else it has its default (told in
 * `doc`).  An option flagged HUTCH_OPTION_ENV_ONLY is a setting of the
 * whole process, read from `env` only (at probe(), open() or sweep(),
 * where no class exists): a policy naming it is refused, with the variable
 * to set instead.  Every HUTCH_* variable a plugin reads is one of its
 * declared options; what it reads besides are other programs' variables
 * (docker's DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, which mean
 * for hutch what they mean for the docker CLI, and HOME), which no table
 * declares.
 *
 * The core reads the table without open(): `hutch policy check` refuses a
 * policy whose executor_options name an option the executor does not
 * declare (a typo), an environment-only one, or a value not of its type;
 * `hutch plugins` lists the options; hutch(1)'s list of executor options
 * and their variables is generated from the in-tree plugins' tables.
 *
 * Rows are read as far as the first row's struct_size goes (every row of
 * a table has the same struct_size, which is its stride); a row whose name
 * is NULL ends the table; at most HUTCH_OPTIONS_MAX rows before it.  A
 * table the core cannot read (a bad name, type or stride) makes the plugin
 * unusable, with the reason. */
enum hutch_option_type {
    HUTCH_OPTION_STRING = 1, /* any string */
    HUTCH_OPTION_BOOL = 2,   /* "true" or "false" */
    HUTCH_OPTION_INT = 3,    /* a decimal integer, optionally signed */
};
#define HUTCH_OPTION_ENV_ONLY (1u << 0) /* a process setting: `env` only */
#define HUTCH_OPTIONS_MAX     64        /* rows of one table */
#define HUTCH_OPTION_NAME_MAX 32        /* bytes: [a-z0-9_], a letter first */

struct hutch_option {
    uint32_t struct_size; /* sizeof(struct hutch_option) when built */
    uint32_t type;        /* enum hutch_option_type */
    const char *name;     /* executor_options.EXECUTOR.NAME; NULL ends */
    const char *env;      /* environment fallback ("HUTCH_..."), or NULL */
    const char *doc;      /* one sentence for people: what, and the default */
    uint32_t flags;       /* HUTCH_OPTION_ENV_ONLY */
};

/* Capability bits. */
#define HUTCH_CAP_ARCHIVE    (1u << 0) /* put_archive/get_archive work */
#define HUTCH_CAP_PRESTART   (1u << 1) /* start() may run before a job exists */
#define HUTCH_CAP_CONCURRENT (1u << 2) /* one state drives many sandboxes */
#define HUTCH_CAP_EGRESS     (1u << 3) /* struct hutch_sandbox's egress_fd */

struct hutch_executor {
    uint32_t abi;         /* HUTCH_EXECUTOR_ABI: checked before anything */
    uint32_t struct_size; /* sizeof(struct hutch_executor) when built */
    const char *name;     /* "local", "docker", "gvisor" */
    const char *summary;
    const char *version; /* the plugin's own version, shown by hutch plugins */
    uint64_t caps;

    /* Is this executor usable on this machine?  0, or why not (+ the fix). */
    int (*probe)(const struct hutch_host *host, struct hutch_err *err);
    int (*open)(const struct hutch_host *host, const struct hutch_config *cfg,
                void **state, struct hutch_err *err);
    /* Start a fresh sandbox of class `cls` whose runner sends "ready" on
     * chan_fd and waits for a job.  -ECANCELED when cancelled (see Threads). */
    int (*start)(void *state, const struct hutch_sandbox_class *cls,
                 const struct hutch_start *how, struct hutch_sandbox **sb,
                 struct hutch_err *err);
    /* The sandbox's one job is known (called once, before put_archive). */
    int (*assign)(void *state, struct hutch_sandbox *sb, const struct hutch_job *job,
                  struct hutch_err *err);
    int (*put_archive)(void *state, struct hutch_sandbox *sb, const void *tar,
                       size_t len, struct hutch_err *err);
    /* 0 and *ex filled once the runner ended; -EAGAIN while it runs. */
    int (*reap)(void *state, struct hutch_sandbox *sb, struct hutch_exit *ex,
                struct hutch_err *err);
    /* Tar of /work/out, at most max_bytes, streamed to `write`.  Stops every
     * process left in the sandbox first. */
    int (*get_archive)(void *state, struct hutch_sandbox *sb, hutch_write_fn write,
                       void *arg, uint64_t max_bytes, struct hutch_err *err);
    /* Stop every process of the sandbox now (timeout, cancellation). */
    void (*kill)(void *state, struct hutch_sandbox *sb);
    /* Release everything; the sandbox pointer is invalid afterwards. */
    void (*destroy)(void *state, struct hutch_sandbox *sb);
    void (*close)(void *state);

    /* Optional (NULL allowed; past the required part, so check
     * HUTCH_HAS_MEMBER): what `hutch doctor` should say about this
     * executor, one report(ctx, …) per check; status is "ok", "warn" or
     * "FAIL", detail says how to fix what fails. */
    void (*doctor)(const struct hutch_host *host, void *ctx,
                   void (*report)(void *ctx, const char *status, const char *what,
                                  const char *detail));
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), after open(): the
     * runtime `language` ("python" | "javascript") runs on in this
     * executor's sandboxes, one line for people such as "Python 3.11.2" or
     * "Node.js v18.19.0" (the execute_code description names it).  Found
     * without starting a sandbox (an image's label, a file of the rootfs,
     * the host interpreter's --version), but it may be slow: the core asks
     * once per language and keeps the answer.  0, or why it is not known. */
    int (*runtime)(void *state, const char *language, char *buf, size_t len,
                   struct hutch_err *err);
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), after open(): the
     * packages beyond its standard library that `language` can import in
     * this executor's sandboxes of flavour `flavour` ("base" or "data"),
     * one line for people such as "numpy 1.24.2, pandas 1.5.3, matplotlib
     * 3.6.3", or "" when there are none (the execute_code description names
     * them, so a model does not write `import numpy` where it fails).
     * Found without starting a sandbox; may be slow: the core asks once per
     * language and flavour and keeps the answer.  0, or why it is not
     * known (an unknown language or flavour is refused). */
    int (*packages)(void *state, const char *language, const char *flavour, char *buf,
                    size_t len, struct hutch_err *err);
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), without open():
     * remove what hutch processes that are gone left behind (sandboxes,
     * their processes, cgroups, mounts, containers, volumes).  `state_parent`
     * is the directory holding this executor's state directories (see
     * struct hutch_config); the core calls sweep() at the start of every
     * hutch, whichever executor it uses, when a directory there names a
     * process that is gone.  A process is gone when its pid no longer runs
     * with the start time its directory (or label) names: what a live hutch
     * made is never touched.  The state directory of a gone process is
     * removed here once nothing of it is left (the core removes it when it
     * is empty). */
    void (*sweep)(const struct hutch_host *host, const char *state_parent);
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), without open(): the
     * main of this plugin's helper process (see "Processes" at the top and
     * hutch_host's helper_exe), single-threaded and fresh; `argv` are the
     * ARGs the plugin passed.  Returns the process's exit status. */
    int (*helper)(const struct hutch_host *host, int argc, char **argv);
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), between start() and
     * destroy(), from any thread, while the job runs: the sandbox's share
     * of the CPU when CPUs are contended, relative to other sandboxes and
     * to hutch's own threads, on cgroup v2's cpu.weight scale
     * (HUTCH_CPU_WEIGHT_MIN..HUTCH_CPU_WEIGHT_MAX; a sandbox starts at
     * HUTCH_CPU_WEIGHT_DEFAULT).  The core lowers it so that each principal's
     * running sandboxes weigh one sandbox together.  Called under that
     * principal's lock: keep it short (a cgroup file written, or one
     * request to the engine); of the host's services, only log().  0, or
     * why not (the core logs it and goes on). */
    int (*cpu_weight)(void *state, struct hutch_sandbox *sb, uint32_t weight,
                      struct hutch_err *err);
    /* Optional (NULL allowed; check HUTCH_HAS_MEMBER), read without
     * open(): the executor's options, a table of struct hutch_option ended
     * by a row whose name is NULL (see struct hutch_option).  Static: the
     * core keeps the pointer while the plugin is loaded.  A plugin without
     * it declares nothing, and the core checks none of its options. */
    const struct hutch_option *options;
};
#define HUTCH_CPU_WEIGHT_MIN     1
#define HUTCH_CPU_WEIGHT_DEFAULT 100
#define HUTCH_CPU_WEIGHT_MAX     10000

typedef const struct hutch_executor *(*hutch_executor_entry_fn)(void);

/* The entry point, the only symbol a plugin exports (build with
 * -fvisibility=hidden):
 *     HUTCH_EXECUTOR_EXPORT const struct hutch_executor *
 *     hutch_executor_entry(void) { return &my_executor; } */
#define HUTCH_EXECUTOR_EXPORT __attribute__((visibility("default")))
HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void);

#ifdef __cplusplus
}
#endif
#endif
