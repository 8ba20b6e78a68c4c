/* govern.h — applying the policy to executions and tool calls: the current
 * policy (swapped whole on reload), the audit log, the rate limits, and the
 * per-execution context through which every tool call from a sandbox is
 * decided before the bridge forwards it. */
#ifndef HUTCH_GOVERN_H
#define HUTCH_GOVERN_H

#include <cjson/cJSON.h>

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
};

/* Rate limit, then on_execute.  0: allowed, *d holds the executor and the
 * limits to apply; -EPERM (or -EAGAIN for a rate limit): refused with
 * `reason`.  Every decision is audited.  After 0, call hutch_gov_end.
 * `workspace` (NULL: none) is on_execute's req.workspace. */
int hutch_gov_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                    struct hutch_bridge *bridge, const char *principal,
                    const char *language, size_t code_bytes, size_t nfiles,
                    const char *workspace, struct hutch_policy_decision *d,
                    char *reason, size_t reason_len);
/* A tool call that comes from no sandbox (hutch serve --direct-tools): x is
 * filled as hutch_gov_begin does (the current policy, an id "d…" for the
 * audit log) without on_execute or the execution rate limit, so that
 * hutch_gov_tool(x, …) decides, audits and rate-limits it exactly as a call
 * from a program.  Close with hutch_gov_direct_end. */
void hutch_gov_direct_begin(struct hutch_gov *g, struct hutch_gov_exec *x,
                            struct hutch_bridge *bridge, const char *principal);
void hutch_gov_direct_end(struct hutch_gov_exec *x);
/* Audit the execution's outcome and drop its policy reference. */
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

#endif
