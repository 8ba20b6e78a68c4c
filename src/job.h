/* job.h — one execution, end to end: the only place one is put together.
 *
 * `hutch run` and `execute_code` parse their input into a struct hutch_job_req
 * and render the struct hutch_exec_result they get back; everything in
 * between happens here, in this order:
 *   1. the policy gate and the rate limit (govern.c), audited; govern.c
 *      also resolves the execution's plan (struct hutch_plan: executor,
 *      limits, class options, pool sizes, workspaces, the principal's
 *      facts), and nothing below asks the policy again;
 *   2. the executor (the plan's, by one rule, see govern.h and
 *      doc/executors.md, "Which executor runs a program");
 *   3. the host paths the job reads and writes, checked against the policy;
 *   4. the limits (the plan's: every source is a ceiling, the lowest wins;
 *      the request's own are held against them here);
 *   4b. the workspace, when the request names one: locked, and its files
 *      added to the job's input (workspace.c);
 *   5. the sandbox: a warm one from the pool when its class is kept warm,
 *      else a cold one;
 *   6. the run (exec.c), and the audit record of its outcome, which names
 *      the executor and whether the sandbox came warm; a workspace's files
 *      are taken out of the result and, when the program succeeded, saved.
 *
 * Threads: hutch_job_run may be called from many threads at once; the
 * struct hutch_jobs is shared and thread-safe. */
#ifndef HUTCH_JOB_H
#define HUTCH_JOB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "govern.h"
#include "hutch-executor.h"
#include "hutch_archive.h"
#include "metrics.h"

struct hutch_jobs;
struct hutch_gov;
struct hutch_bridge;
struct hutch_policy;

struct hutch_jobs_opts {
    const char *plugin_dir; /* NULL: $HUTCH_PLUGIN_DIR or the install dir */
    /* The operator's executor (--executor), or NULL: then $HUTCH_EXECUTOR
     * when set.  `executor_from` names where it came from, for messages. */
    const char *executor;
    const char *executor_from;
    struct hutch_gov *gov;       /* policy, audit, rate limits (required) */
    struct hutch_bridge *bridge; /* upstream tools; NULL: none */
    /* The operator's limits (--timeout, --memory, --pids): ceilings; 0 when
     * not given. */
    uint64_t timeout_ms;
    uint64_t memory_mb;
    uint32_t pids;
    uint64_t output_bytes; /* --output-bytes: a ceiling like the others */
    /* What is kept of each output stream when no source sets it: the
     * front's default (execute_code's is HUTCH_OUTPUT_MODEL_BYTES); 0:
     * HUTCH_OUTPUT_MAX_BYTES. */
    uint64_t output_default;
    /* Warm pools: 0 keeps every sandbox cold (hutch run).  pool_size[0]
     * python, [1] javascript: the --pool flag, -1 when not given. */
    int pools;
    int pool_size[2];
    /* Where workspaces are kept (--workspaces), or NULL: see workspace.h. */
    const char *workspaces_dir;
};

/* Loads the plugins and decides the default executor: the operator's, else
 * the policy's when its file names one, else "local".  An operator's choice
 * and a policy file's that differ are an error naming both; an executor
 * that is missing or unusable is an error saying why.  With pools, starts
 * filling them in the background. */
int hutch_jobs_new(const struct hutch_jobs_opts *opts, struct hutch_jobs **out,
                   struct hutch_err *err);
/* What hutch_jobs_new would decide under policy `p`, checked without
 * opening anything (hutch serve --check-config): the plugins load, the
 * operator's and the policy's executors agree, and the default executor
 * exists and is usable (its probe).  0, or why not. */
int hutch_jobs_check(const struct hutch_jobs_opts *opts, struct hutch_policy *p,
                     struct hutch_err *err);
/* Drains the pools (nothing of them is left) and closes the plugins. */
/* The start of a shutdown: the pools stop starting sandboxes (a start
 * under way is cancelled), so that what hutch_jobs_free removes is
 * already all there is. */
void hutch_jobs_stop(struct hutch_jobs *j);
void hutch_jobs_free(struct hutch_jobs *j);
/* After a policy reload: the pools' classes that changed are drained and the
 * new ones filled.  0, or the reason the new policy cannot be served (its
 * executor conflicts with the operator's): it is logged, and every execution
 * is refused with it until the policy agrees again. */
int hutch_jobs_policy_changed(struct hutch_jobs *j, struct hutch_err *err);
/* The pools' state, one row per class (status.h) in *rows (caller frees
 * with free()) and *n; none without pools.  0, or -ENOMEM. */
int hutch_jobs_pool_status(struct hutch_jobs *j, struct hutch_pool_status **rows,
                           size_t *n);

/* Readiness (GET /readyz): the current policy can be served (its executor
 * agrees with the operator's) and the executor it runs on is usable now
 * (its probe, at most every HUTCH_READY_PROBE_MS).  Adds "executor":
 * {"name", "usable", "error"?} and "policy": {"source"?, "ok", "error"?,
 * "reload"?: {"state": "loaded"|"failed", "time", "error"?}} to `out`
 * (source and errors only with detail; reload once there was one); 1 when
 * ready, else 0.  A failed reload leaves the policy before it in use, so
 * it does not make hutch unready. */
int hutch_jobs_ready(struct hutch_jobs *j, cJSON *out, int detail);

/* The two above as metrics.c reads them (metrics.h): what /metrics and
 * /readyz are given, so that metrics.c need not call up into this file. */
struct hutch_metrics_source hutch_jobs_metrics_source(struct hutch_jobs *j);

/* What the default executor runs, for the execute_code description:
 * "Python 3.11.2, Node.js v18.19.0 (docker executor)", or "the local
 * executor" alone when its plugin cannot say.  Each plugin's runtime() is
 * asked once per language, at first use, and its answer kept. */
void hutch_jobs_runtime(struct hutch_jobs *j, char *buf, size_t len);

/* A host file or folder copied into /work. */
struct hutch_job_input {
    const char *src;  /* host path */
    const char *dest; /* relative to /work; NULL: where the policy's paths say */
};

struct hutch_job_req {
    const char *principal; /* NULL: "local" */
    const char *language;  /* "python" | "javascript" | "typescript" */
    const char *code;
    /* Files for /work the caller already packed (the agent's `files`), or
     * NULL; inputs are added to it.  Owned by the caller. */
    struct hutch_tar *files;
    size_t nfiles; /* how many the agent sent, for on_execute */
    const struct hutch_job_input *inputs;
    size_t ninputs;
    const char *output_dir; /* host folder receiving /work/out, or NULL */
    /* The workspace this execution uses (workspace.h), or NULL. */
    const char *workspace;
    /* The host paths are the invoking user's own (hutch run without a
     * policy file): not checked against the policy's paths. */
    int host_paths_trusted;
    uint64_t timeout_ms;   /* the request's ceiling; 0: none */
    uint64_t output_bytes; /* the request's ceiling per stream; 0: none */
    int skip_files;        /* nobody looks at /work/out */
    int stream_fd_out, stream_fd_err;
    const atomic_int *cancel;
    void (*tick)(void *arg, uint64_t elapsed_ms);
    void *tick_arg;
    /* Who answers the policy's questions about tool calls (govern.h); NULL:
     * nobody, a question is a denial. */
    hutch_ask_fn ask;
    void *ask_arg;
    /* Who answers an upstream's questions (govern.h); fn NULL: nobody. */
    struct hutch_elicitor elicit;
    /* Out: the execution id (also in the audit log). */
    char execution[40];
    /* Private: the spent sandbox, until hutch_job_release; the principal
     * the pool counts it for ("": none). */
    struct hutch_box *spent;
    int pooled;
    char pool_who[64];
};

/* Call once the result of hutch_job_run has been rendered and sent (also
 * after a failure): the spent sandbox is destroyed, off this thread when
 * there is a pool, and the pool may start refilling (a refill started
 * while the result is rendered would compete with it for the CPU). */
void hutch_job_release(struct hutch_jobs *j, struct hutch_job_req *job);

/* Runs one execution.  0 when the program ran, whatever its exit status
 * (res has it, and res->executor, res->warm); -EPERM or -EAGAIN when the
 * policy, its rate limit or its paths refused it; another negative code
 * when hutch could not run it.  err says why, without a prefix. */
int hutch_job_run(struct hutch_jobs *j, struct hutch_job_req *job,
                  struct hutch_exec_result *res, struct hutch_err *err);

#endif
