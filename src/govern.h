/* govern.h — applying the policy to executions and tool calls: the current
 * policy (swapped whole on reload), the audit log, the rate limits, the
 * plan of an execution (everything job.c needs from the policy, resolved
 * at once from one policy with the operator's settings), and the
 * per-execution context through which every tool call from a sandbox is
 * decided before the bridge forwards it.
 *
 * Not here: putting an execution together (job.c, from the plan), the
 * policy's file and hooks (policy.c). */
#ifndef HUTCH_GOVERN_H
#define HUTCH_GOVERN_H

#include <cjson/cJSON.h>
#include <stdatomic.h>

#include "bridge.h"
#include "exec.h"
#include "policy.h"
#include "upstream.h"

struct hutch_gov;
struct hutch_audit;

/* policy_file NULL: the built-in default; audit_file NULL: stderr.  Caller
 * frees with hutch_gov_free. */
int hutch_gov_new(const char *policy_file, const char *audit_file,
                  struct hutch_gov **out, struct hutch_err *err);
void hutch_gov_free(struct hutch_gov *g);
/* The operator's --flavour (NULL: none), applied to the policy now and to
 * every policy a reload brings (hutch_policy_apply_flavour).  Right after
 * hutch_gov_new, before anything else uses g. */
int hutch_gov_set_flavour(struct hutch_gov *g, const char *flavour,
                          struct hutch_err *err);

/* Load the policy file again; on failure the current policy stays and err
 * says why.  Executions in flight keep the policy they started with.  Also
 * reopens the audit log (rotation). */
int hutch_gov_reload(struct hutch_gov *g, struct hutch_err *err);

/* The last reload (SIGHUP): done 0 when there was none yet; ok 0 when it
 * failed (the policy in use is the one before it), with why in error
 * (which may name the file); time in UTC, RFC 3339, to the second. */
struct hutch_gov_reload {
    int done, ok;
    char time[32];
    char error[256];
};
void hutch_gov_last_reload(struct hutch_gov *g, struct hutch_gov_reload *out);

/* The current policy, with a reference the caller drops
 * (hutch_policy_unref). */
struct hutch_policy *hutch_gov_policy(struct hutch_gov *g);
struct hutch_audit *hutch_gov_audit(struct hutch_gov *g);

/* The operator's settings (struct hutch_jobs_opts and $HUTCH_EXECUTOR):
 * the other half of every plan. */
struct hutch_plan_operator {
    const char *executor;      /* --executor or $HUTCH_EXECUTOR; NULL: none */
    const char *executor_from; /* where it came from, for messages; NULL: --executor */
    uint64_t timeout_ms, memory_mb, output_bytes; /* ceilings; 0: not given */
    uint32_t pids;                                /* a ceiling; 0: not given */
    /* What is kept of each output stream when no source sets it (the
     * front's default); 0: HUTCH_OUTPUT_MAX_BYTES. */
    uint64_t output_default;
    int pool_size[2]; /* python, javascript: --pool, -1 when not given */
    /* The executor --pool sizes (and the default size) are for: the one
     * hutch opened at start; NULL: the plan's own executor (the pools set up
     * for a policy). */
    const char *pool_executor;
};

/* What one execution runs with: resolved in one place (govern.c) from one
 * policy (the execution's, with its on_execute decision; or the current
 * one, for the pools and readiness) and the operator's settings, by the
 * two rules of doc/executors.md and doc/operating.md ("Limits"):
 *
 * Executor.  The operator's (--executor, else $HUTCH_EXECUTOR), else the
 * one the policy file names, else "local".  An operator's choice and a
 * policy file's that differ are an error.  on_execute may pick another for
 * one execution, but only one of hutch's own that isolates at least as
 * well (local < docker < gvisor); any other pick is refused.  Never
 * silently less.
 *
 * Limits.  Every source is a ceiling and the lowest wins: hutch's defaults
 * (caps.h), the operator's flags, the policy file's limits (the built-in
 * policy only supplies defaults), and its on_execute hook; the request's
 * timeout_ms and output_bytes are held against the plan's ceilings by
 * job.c.  A default applies only when no source sets the limit.
 * output_bytes: the policy's value counts when it is below
 * HUTCH_OUTPUT_MAX_BYTES, which is its default and hutch's maximum (so a
 * policy file that does not mention it leaves execute_code's model-sized
 * default in place, where timeout_ms's and memory_mb's defaults are the
 * same as hutch's own).
 *
 * The strings point into the policy, which the plan holds a reference to
 * until hutch_plan_release. */
struct hutch_plan {
    struct hutch_policy *policy; /* the snapshot it was resolved from */
    const char *source;          /* the policy's file, or "built-in" */
    /* The executor: rc 0 and its name, else rc negative (-EINVAL: the
     * operator's and the policy file's differ; -EPERM: on_execute picked
     * one that may isolate less) and why in error.  An execution whose
     * plan has no executor fails with it. */
    int rc;
    char error[HUTCH_ERR_MSG];
    char executor[64];
    char flavour[16]; /* executor_options' flavour on it: "base" when none */
    /* The sandbox class on it (limits, executor_options); language NULL:
     * the job sets it. */
    struct hutch_sandbox_class cls;
    int pool_size[2]; /* warm sandboxes of python, javascript to keep on it */
    /* Ceilings the request is held against, and the defaults below them. */
    uint64_t timeout_ms;     /* ceiling and default */
    uint64_t output_max;     /* per stream */
    uint64_t output_default; /* per stream, at most output_max */
    uint64_t files_bytes;    /* files in and out, each way */
    struct hutch_policy_workspaces workspaces;
    /* The policy's egress rules (egress.h), or NULL: the program gets no
     * network at all. */
    const struct hutch_egress_rules *egress;
    /* The principal's concurrency limits, and the policy's principals. */
    struct hutch_policy_concurrency concurrency;
    int has_principals;
    unsigned nprincipals;
};

/* The plan under policy `p` (a reference is taken) for `principal` (NULL:
 * "local"), with on_execute's decision `d` (NULL: none, the policy's own
 * executor and limits).  Never fails: an executor that cannot be used is
 * plan->rc.  Release with hutch_plan_release. */
void hutch_plan_resolve(struct hutch_policy *p, const struct hutch_policy_decision *d,
                        const char *principal, const struct hutch_plan_operator *op,
                        struct hutch_plan *plan);
void hutch_plan_release(struct hutch_plan *plan);
/* The plan under the current policy, without an execution (the pools,
 * readiness, the runtime the description names). */
void hutch_gov_plan(struct hutch_gov *g, const struct hutch_plan_operator *op,
                    struct hutch_plan *plan);
/* 1 when `plan` was resolved from the current policy (no reload since). */
int hutch_gov_plan_current(struct hutch_gov *g, const struct hutch_plan *plan);

/* The user's answer to the policy's question (on_tool_call returned
 * "ask", question). */
enum hutch_answer {
    HUTCH_ANSWER_APPROVE,
    HUTCH_ANSWER_DECLINE,
    HUTCH_ANSWER_CANCEL,  /* dismissed without a choice */
    HUTCH_ANSWER_TIMEOUT, /* no answer within the time given */
};
/* Asks the user whether the call of `tool` (its `args`) may go ahead:
 * `question` is the policy's.  Waits at most ms.  An enum hutch_answer, or
 * negative when the user cannot be asked (`why` says why).  Called on the
 * thread of the program's tool call; several may ask at once. */
typedef int (*hutch_ask_fn)(void *arg, const char *tool, const char *question,
                            const cJSON *args, unsigned ms, char *why, size_t why_len);

/* One execution as the policy sees it.  Filled by hutch_gov_begin, used as
 * the tool_arg of hutch_gov_tool, closed by hutch_gov_end. */
struct hutch_gov_exec {
    struct hutch_gov *g;
    struct hutch_policy *policy; /* the policy the execution started with */
    struct hutch_bridge *bridge;
    char principal[64];
    char execution[40];
    char executor[64]; /* set by the job once decided: audited */
    int warm;          /* its sandbox came from a pool: audited */
    char ws[72];       /* the workspace it names, or "": audited */
    uint64_t t0_ms;
    /* Who answers the policy's questions (set after hutch_gov_begin; NULL:
     * nobody can be asked, a question is a denial saying so). */
    hutch_ask_fn ask;
    void *ask_arg;
    /* Who answers an upstream's own questions during this execution's
     * calls (upstream.h; fn NULL: nobody, such a question fails the call). */
    struct hutch_elicitor elicit;
    /* What it runs with (hutch_gov_begin; released by hutch_gov_end). */
    struct hutch_plan plan;
    /* Taint (policy.h): what first gave this execution untrusted data (a
     * taint.sources tool, or the workspace it opened), hutch_gov_taint.
     * Set once, never cleared; `tainted` is stored after `taint` with
     * release order, so whoever sees it set reads the whole text.  A source
     * call marks it before its result goes back to the program, so every
     * call the program makes knowing that result is decided tainted. */
    atomic_int taint_claim, tainted;
    char taint[200];
};

/* Rate limit, then on_execute.  0: allowed, x->plan holds what to run it
 * with (the executor and the limits, after on_execute, under the
 * operator's `op`); -EPERM (or -EAGAIN for a rate limit): refused with
 * `reason`.  Every decision is audited.  After 0, call hutch_gov_end.
 * `workspace` (NULL: none) is on_execute's req.workspace. */
int hutch_gov_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                    struct hutch_bridge *bridge, const char *principal,
                    const char *language, size_t code_bytes, size_t nfiles,
                    const char *workspace, const struct hutch_plan_operator *op,
                    char *reason, size_t reason_len);
/* A tool call that comes from no sandbox (hutch serve --direct-tools): x is
 * filled as hutch_gov_begin does (the current policy, an id "d…" for the
 * audit log) without on_execute or the execution rate limit, so that
 * hutch_gov_tool(x, …) decides, audits and rate-limits it exactly as a call
 * from a program.  Close with hutch_gov_direct_end. */
void hutch_gov_direct_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                            struct hutch_bridge *bridge, const char *principal);
void hutch_gov_direct_end(struct hutch_gov_exec *x);
/* The egress proxy's on_record hook (egress.h) for execution x (arg): each
 * connection of its program, in the audit log (event "egress": host:port
 * as the tool, allow or deny, the outcome, the address, the bytes) and in
 * /metrics. */
struct hutch_egress_record;
void hutch_gov_egress_record(void *x, const struct hutch_egress_record *rec);

/* The egress proxy's decide hook (egress.h) for execution x (arg): the
 * taint rule on a connection.  A tainted execution's connection is denied,
 * or asked about, when taint.sinks has "egress"; an allowed one taints the
 * execution when taint.sources has "egress" (before any byte comes back). */
int hutch_gov_egress_decide(void *x, const char *host, unsigned port, char *why,
                            size_t len);

/* Marks x tainted by `source` (what to name in messages and the audit
 * log); the first mark stays. */
void hutch_gov_taint(struct hutch_gov_exec *x, const char *source);
/* What tainted x, or NULL. */
const char *hutch_gov_tainted(struct hutch_gov_exec *x);

/* Audit the execution's outcome and drop its policy and its plan. */
void hutch_gov_end(struct hutch_gov_exec *x, const struct hutch_exec_result *res,
                   const char *error);

/* A host path given as an input of an execution: allowed when it lies in a
 * `paths` entry (any mode).  0 with the resolved host path (use it, not
 * the original string) and its destination relative to /work (the entry's
 * sandbox path below /work, or the sandbox path itself made relative:
 * "/data" is /work/data); -EPERM with `reason`. */
/* hutch_tool_fn for tools.search (arg: struct hutch_gov_exec; `tool` is
 * NULL): search_tools' search over what the execution's policy offers,
 * {tools, total, matches} at detail "signatures" unless args ask another.
 * Bad arguments: code "invalid_args". */
int hutch_gov_search(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                     struct hutch_tool_reply *reply);

int hutch_gov_input(struct hutch_policy *p, const char *path, char *resolved,
                    size_t rlen, char *dest, size_t dlen, char *reason,
                    size_t reason_len);
/* A host directory that receives /work/out: allowed when it lies in an "rw"
 * `paths` entry.  0 with the resolved path; -EPERM with `reason`. */
int hutch_gov_output(struct hutch_policy *p, const char *path, char *resolved,
                     size_t rlen, char *reason, size_t reason_len);

/* hutch_tool_fn (arg: struct hutch_gov_exec): resolve the tool in the
 * catalog, apply the tool-call rate limit and the policy (deny: code
 * "denied"; a question: x->ask asks the user, and the call goes ahead only
 * when approved), audit the decision with the question and the answer,
 * then call the bridge. */
int hutch_gov_tool(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                   struct hutch_tool_reply *reply);
/* hutch_tool_start_fn (exec.h) of the same: the decision on the caller's
 * thread, and the call sent from it when its server allows
 * (hutch_bridge_call_start); a question to the user, a server that needs
 * a thread and a tool the catalog does not have yet go on a worker. */
int hutch_gov_tool_start(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                         struct hutch_tool_reply *reply, hutch_tool_done_fn done,
                         void *done_arg, struct hutch_tool_cont *cont);

#endif
