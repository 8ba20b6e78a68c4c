/* exec.h — the core's side of one sandbox: start it until its runner is
 * ready (a "box", which a warm pool may hold long before a job exists), then
 * run one job on it: send files and code, serve the runner's tool calls,
 * collect output, the result and /work/out, and destroy the sandbox.
 *
 * What does not live here: deciding which executor, which limits, which
 * policy, and where the box comes from (src/job.c); keeping boxes warm
 * (src/pool.c). */
#ifndef HUTCH_EXEC_H
#define HUTCH_EXEC_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "egress.h"
#include "hutch-executor.h"
#include "hutch_archive.h"
#include "plugin.h"
#include "result.h"
#include "wire.h"

/* Answers one tool call, on a worker thread (several run at once), within
 * timeout_ms.  Return 0 with reply->result set, or a negative code with
 * reply->code ("unknown_tool", "denied", "invalid_args", "upstream",
 * "timeout", "internal") and reply->message (malloc'd) set.  The executor
 * frees both. */
struct hutch_tool_reply {
    cJSON *result;
    const char *code; /* static string */
    char *message;
    char *tool;   /* malloc'd: "server.tool" the call resolved to, or NULL */
    char *server; /* malloc'd: the server of that tool, or NULL (metrics) */
    /* Set by the caller: also keep the upstream's CallToolResult whole in
     * `raw` (malloc'd, the caller frees; hutch serve --direct-tools). */
    int want_raw;
    cJSON *raw;
};
typedef int (*hutch_tool_fn)(void *arg, const char *tool, const cJSON *args,
                             int timeout_ms, struct hutch_tool_reply *reply);

/* A tool call that goes out from the run loop's thread and comes back on
 * another (the upstream's reader), with no thread waiting for it: one
 * thread hop less each way (calls.c).  done(done_arg, r, reply) ends it,
 * with what a hutch_tool_fn would have returned. */
typedef void (*hutch_tool_done_fn)(void *done_arg, int r,
                                   struct hutch_tool_reply *reply);
/* The rest of a call that was decided but needs a thread (a question to
 * the user, an upstream the loop cannot wait for without blocking):
 * run(arg, args, timeout_ms, reply) on a worker returns what hutch_tool_fn
 * would have; drop(arg) when it never runs.  Either frees arg. */
struct hutch_tool_cont {
    int (*run)(void *arg, const cJSON *args, int timeout_ms,
               struct hutch_tool_reply *reply);
    void (*drop)(void *arg);
    void *arg;
};
/* Starts a call without blocking, from the run loop's thread:
 * HUTCH_TOOL_STARTED: done comes exactly once, on another thread or before
 * this returns; args are not needed after this returns.
 * HUTCH_TOOL_THREAD: a worker must go on: with cont->run when it is set,
 * else with the hutch_tool_fn from the start (nothing was done).
 * Anything else: answered at once, r as a hutch_tool_fn returns it. */
#define HUTCH_TOOL_STARTED 1
#define HUTCH_TOOL_THREAD  2
typedef int (*hutch_tool_start_fn)(void *arg, const char *tool, const cJSON *args,
                                   int timeout_ms, struct hutch_tool_reply *reply,
                                   hutch_tool_done_fn done, void *done_arg,
                                   struct hutch_tool_cont *cont);

/* A started sandbox whose runner has said "ready" and waits for its one job.
 * Owned by whoever holds it (a pool, or a job); hutch_exec_run consumes it. */
struct hutch_box {
    struct hutch_plugin *plugin;
    struct hutch_sandbox *sb;
    struct hutch_sandbox_class cls; /* the class it was started for */
    char *options;                  /* cls.options, owned */
    struct hutch_wire_reader rd;    /* "ready" consumed; the rest is the job's */
    int pooled;                     /* started ahead of any job */
    int egress_fd; /* the sandbox's egress listener (HUTCH_CAP_EGRESS), or -1 */
    struct hutch_box *next; /* the pool's lists */
    uint64_t t_begin_us, t_started_us, t_ready_us;
};

/* Start a sandbox of class `cls` with `p` and wait until its runner is
 * ready (at most HUTCH_WIRE_READY_MS).  `cancelled` (may be NULL) is polled
 * while waiting: non-zero gives up with -ECANCELED.  On failure nothing of
 * the sandbox is left and err says why (with what the runner printed). */
int hutch_box_start(struct hutch_plugin *p, const struct hutch_sandbox_class *cls,
                    const char *label, int pooled, int (*cancelled)(void *), void *arg,
                    struct hutch_box **out, struct hutch_err *err);
/* 1 when the box's sandbox can carry egress (its executor has
 * HUTCH_CAP_EGRESS and handed over a listener). */
int hutch_box_egress(const struct hutch_box *b);
/* Destroy a box that will not run a job (a pool drained or recycled). */
void hutch_box_destroy(struct hutch_box *b);
/* 1 when an idle box is still as it was made: nothing arrived on its
 * channel, stdout or stderr and its runner has not ended.  Doesn't block. */
int hutch_box_idle_ok(struct hutch_box *b);
/* Sets the box's share of contended CPU (the executor's cpu_weight(), see
 * fair.h): a setter for hutch_fair_join.  An executor without it, or one
 * that fails, leaves the weight as it is (a failure is logged). */
void hutch_box_cpu_weight(void *box, uint32_t weight);
/* Two classes are the same class (every limit and the options). */
int hutch_class_equal(const struct hutch_sandbox_class *a,
                      const struct hutch_sandbox_class *b);

struct hutch_exec_req {
    const char *language; /* the run message's: typescript on a javascript box */
    const char *code;
    const void *tar; /* files for /work, may be NULL */
    size_t tar_len;
    uint64_t timeout_ms;
    uint64_t output_bytes; /* kept per stream, head and tail (output.h);
                              0: HUTCH_OUTPUT_MAX_BYTES */
    uint64_t files_bytes;  /* /work/out cap; 0: HUTCH_TAR_OUT_MAX_BYTES */
    const char *label;
    const char *out_dir; /* unpack /work/out here; NULL: list only */
    int skip_files;      /* nobody looks at /work/out: do not fetch it */
    int stream_fd_out;   /* live copy of stdout, -1 for none */
    int stream_fd_err;
    hutch_tool_fn tool; /* NULL: every tool is unknown */
    void *tool_arg;
    hutch_tool_start_fn tool_start; /* NULL: every call runs on a worker */
    const atomic_int *cancel;       /* set to non-zero to kill the run */
    /* Called about once a second while the job runs (progress). */
    void (*tick)(void *arg, uint64_t elapsed_ms);
    void *tick_arg;
    /* Answers tools.search (`tool` is NULL; args are search_tools') and the
     * runner's describe (`tool` is "describe"; discover.h); NULL: they
     * fail with "internal". */
    hutch_tool_fn search;
    void *search_arg;
    /* The principal's share of hutch's memory (budget.h), or NULL. */
    struct hutch_budget_share *share;
    /* The execution's egress proxy (egress.h), or NULL: no egress, and the
     * sandbox's listener is closed as the job starts, so that the
     * program's connections are refused.  With one, the box must have a
     * listener (hutch_box_egress); the program gets HTTP_PROXY and
     * HTTPS_PROXY, and each connection it makes is handed to the proxy. */
    struct hutch_egress *egress;
};

struct hutch_exec_result {
    int exit_code;
    int timed_out;
    int oom;
    int ok; /* runner said done ok */
    uint64_t duration_ms;
    struct hutch_buf out, err;         /* what was kept: head, then tail */
    size_t out_head, err_head;         /* where the head ends in out, err */
    uint64_t out_total, err_total;     /* bytes produced, kept or not */
    uint64_t out_omitted, err_omitted; /* left out at out_head, err_head */
    cJSON *result;                     /* owned; JSON null when none: the
                                          program's value, JSON by nature */
    struct hutch_result_error error;   /* the runner's, when it failed */
    struct hutch_file_list files;      /* the listing of out_tar */
    struct hutch_call_log tool_calls;  /* every call (the trace) */
    struct hutch_buf out_tar;          /* raw tar of /work/out (validated) */
    char message[HUTCH_ERR_MSG];       /* hutch's note (timeout, protocol error…) */
    /* What hutch changed in the request, one line each ("timeout_ms:
     * asked for 600000 ms; this server allows 30000"): set by job.c. */
    char notes[HUTCH_RESULT_NOTES_MAX];
    char executor[64]; /* the executor that ran it */
    /* hutch's memory this execution holds (budget.h): charged while it
     * runs, and what stays with the result (its value) until
     * hutch_exec_result_free gives it back. */
    struct hutch_budget budget;
    int warm;           /* its sandbox came from a warm pool */
    uint64_t memory_mb; /* its memory limit, for the OOM note */
};

void hutch_exec_result_init(struct hutch_exec_result *res);
void hutch_exec_result_free(struct hutch_exec_result *res);

/* Runs one job on box `b`.  The box is spent, whatever happens: the caller
 * destroys it afterwards (hutch_box_destroy, or hutch_pool_discard, which
 * does so off the caller's thread).  A program that ran over its time or
 * failed is killed before this returns; one that finished may have left
 * processes that live until the box is destroyed.  Returns 0 when the
 * program ran (whatever its exit status; see res), or a negative code when
 * hutch could not run it (err says why and what to do). */
int hutch_exec_run(struct hutch_box *b, const struct hutch_exec_req *req,
                   struct hutch_exec_result *res, struct hutch_err *err);

/* The result is rendered above: result_json.c (structuredContent, `hutch
 * run --json`), mcp_tools.c (the text a model reads). */

#endif
