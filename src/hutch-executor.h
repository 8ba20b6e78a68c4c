/* hutch-executor.h — the executor plugin ABI (installed; the only header a
 * plugin needs).
 *
 * A plugin is a shared object exporting one symbol, hutch_executor_entry(),
 * which returns a static struct hutch_executor.  The core checks `abi` and
 * `struct_size` before touching anything else.  Plugins never call the core by
 * symbol: everything the core offers arrives in struct hutch_host, so a plugin
 * built against ABI 1 keeps loading as the core grows.
 *
 * Compatibility rules: every struct starts with its size (or abi+size) and
 * only ever grows at the end; a reader looks at a member only when the
 * producer's struct_size covers it (HUTCH_HAS_MEMBER).
 *
 * Life of a sandbox (a sandbox is single use):
 *   start()        sandbox exists, runner started, waiting for a job on chan_fd
 *                  (this can happen long before a job exists: warm pools)
 *   put_archive()  uncompressed tar unpacked under /work
 *   ...            the core speaks the wire protocol on chan_fd and reads
 *                  stdout_fd/stderr_fd until event_fd is readable
 *   reap()         exit status of the runner
 *   get_archive()  uncompressed tar of /work/out (untrusted: the core unpacks it)
 *   destroy()      everything of the sandbox is gone when this returns
 * kill() may be called at any point after start() (timeout, cancellation).
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

#define HUTCH_EXECUTOR_ABI   1
#define HUTCH_EXECUTOR_ENTRY "hutch_executor_entry"

#define HUTCH_HAS_MEMBER(ptr, type, member)                                            \
    ((ptr)->struct_size >= offsetof(type, member) + sizeof((ptr)->member))

/* Errors: functions return 0 or a negative errno-style code and fill the
 * caller-owned struct hutch_err with what failed, on what, and what to do. */
#define HUTCH_ERR_MSG 1024
struct hutch_err {
    int code; /* negative errno-style code, 0 when unset */
    char msg[HUTCH_ERR_MSG];
};

__attribute__((format(printf, 3, 4))) static inline int
hutch_err_set(struct hutch_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

/* Caps applied when a tar stream is unpacked or packed. */
struct hutch_archive_limits {
    uint64_t max_bytes; /* sum of regular file sizes */
    uint32_t max_entries;
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
     * nothing is left at dest_dir.  Single-threaded callers only (it is
     * called in sandbox helpers after fork). */
    int (*archive_extract)(const void *tar, size_t len, const char *dest_dir,
                           const struct hutch_archive_limits *lim,
                           struct hutch_err *err);
    /* Pack a directory into an uncompressed tar written to `write`; regular
     * files and directories only, other entries are skipped; never follows
     * a symlink; enforces `lim`. */
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
};

/* Per-deployment configuration handed to open(). */
struct hutch_config {
    uint32_t struct_size;
    const char *instance_id; /* unique per hutch process: label leftovers */
    const char *state_dir;   /* private, writable directory for the plugin */
};

/* What one sandbox must look like.  Zero means "the executor's default". */
struct hutch_sandbox_spec {
    uint32_t struct_size;
    const char *language; /* "python" | "javascript" */
    const char *label;    /* execution id, for names and logs */
    uint64_t memory_bytes;
    uint64_t work_bytes; /* size cap of /work */
    uint64_t tmp_bytes;  /* size cap of /tmp */
    uint32_t pids_max;
    uint32_t cpu_millis; /* 1000 = one CPU */
    uint32_t open_files;
    uint32_t reserved;
    /* The policy's executor_options for this executor: a JSON object of
     * strings, or NULL.  An executor refuses options it does not know. */
    const char *options;
};

struct hutch_exit {
    int exit_code; /* the runner's exit status, or 128+signal */
    int signal;    /* terminating signal, 0 when it exited */
    int oom;       /* killed by the memory limit */
    int reserved;
};

/* Filled by the plugin.  Plugins embed it first in their own struct. */
struct hutch_sandbox {
    uint32_t struct_size;
    int chan_fd;   /* wire protocol with the runner (NDJSON) */
    int stdout_fd; /* the program's stdout, read end */
    int stderr_fd; /* the program's stderr, read end */
    int event_fd;  /* readable once the runner ended: call reap() */
};

/* Capability bits. */
#define HUTCH_CAP_ARCHIVE    (1u << 0) /* put_archive/get_archive work */
#define HUTCH_CAP_PRESTART   (1u << 1) /* start() may run before a job exists */
#define HUTCH_CAP_CONCURRENT (1u << 2) /* one state drives many sandboxes */

struct hutch_executor {
    uint32_t abi;         /* HUTCH_EXECUTOR_ABI: checked before anything */
    uint32_t struct_size; /* sizeof(struct hutch_executor) when built */
    const char *name;     /* "local", "docker", "gvisor" */
    const char *summary;
    uint64_t caps;

    /* Is this executor usable on this machine?  0, or why not (+ the fix). */
    int (*probe)(const struct hutch_host *host, struct hutch_err *err);
    int (*open)(const struct hutch_host *host, const struct hutch_config *cfg,
                void **state, struct hutch_err *err);
    /* Start a fresh sandbox whose runner waits for a job on chan_fd. */
    int (*start)(void *state, const struct hutch_sandbox_spec *spec,
                 struct hutch_sandbox **sb, struct hutch_err *err);
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

    /* Optional (check HUTCH_HAS_MEMBER): what `hutch doctor` should say
     * about this executor, one report() per check; status is "ok", "warn"
     * or "FAIL", detail says how to fix what fails. */
    void (*doctor)(const struct hutch_host *host,
                   void (*report)(const char *status, const char *what,
                                  const char *detail));
};

typedef const struct hutch_executor *(*hutch_executor_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
