/* policy.h — the deployment's policy: one Lua 5.4 file (doc/policy.md, the
 * hutch-policy(5) manual page).
 *
 * A loaded policy is immutable and reference-counted: a reload (SIGHUP)
 * builds a new one and swaps it in, and every execution keeps the policy it
 * started with.  Hooks run in a restricted Lua state (base without
 * dofile/loadfile/bytecode, string, table, math, utf8; an instruction-count
 * hook; a capped allocator); any error in a hook denies (fail closed).
 * Thread-safe: decisions may be asked from many threads at once. */
#ifndef HUTCH_POLICY_H
#define HUTCH_POLICY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_policy;
struct hutch_egress_rules;

struct hutch_policy_limits {
    uint64_t timeout_ms;
    uint64_t memory_mb;
    uint32_t cpus_milli; /* 1000 = one CPU; 0: no CPU limit */
    uint32_t pids;
    uint64_t output_bytes; /* stdout and stderr, each */
    uint64_t files_bytes;  /* files in and out, each way */
};

struct hutch_policy_path {
    const char *host;    /* absolute, normalised, symlinks resolved */
    const char *sandbox; /* absolute path inside the sandbox */
    int rw;              /* 0 "ro", 1 "rw" */
};

struct hutch_policy_rate {
    uint32_t executions_per_minute; /* 0: unlimited */
    uint32_t tool_calls_per_minute;
};

/* concurrency = { executions, queued }, at the top and in a principal's
 * entry (admit.h): executions of one principal running at once, and
 * waiting.  0 / queued_set 0: not said. */
struct hutch_policy_concurrency {
    uint32_t executions;
    uint32_t queued;
    int queued_set;
};

/* workspaces = { allow, max_bytes, max_count, idle_s } (workspace.c). */
struct hutch_policy_workspaces {
    int allow;          /* executions may name a workspace */
    uint64_t max_bytes; /* one workspace's tar */
    uint32_t max_count; /* workspaces per principal */
    uint64_t idle_s;    /* unused this long: removed */
};

/* Load and validate FILE.  Unknown fields are errors naming the field.  On
 * error err->msg is "FILE:LINE: message" (LINE from Lua when it has one).
 * Caller drops with hutch_policy_unref. */
int hutch_policy_load(const char *file, struct hutch_policy **out,
                      struct hutch_err *err);
/* The built-in default when no --policy is given: executor "local",
 * conservative limits (30 s, 512 MB, 128 pids, 1 MiB output, 64 MiB files),
 * every configured upstream tool allowed, no host paths, no principals, no
 * rate limits, no hooks. */
int hutch_policy_default(struct hutch_policy **out, struct hutch_err *err);
struct hutch_policy *hutch_policy_ref(struct hutch_policy *p);
void hutch_policy_unref(struct hutch_policy *p);

const char *hutch_policy_source(const struct hutch_policy *p); /* file or "built-in" */
const char *hutch_policy_executor(const struct hutch_policy *p);
/* 1 for the built-in default policy (its limits are defaults, not
 * ceilings: see struct hutch_plan, govern.h). */
int hutch_policy_builtin(const struct hutch_policy *p);
/* 1 when the policy file names its executor (the built-in default does not). */
int hutch_policy_executor_explicit(const struct hutch_policy *p);
/* The warm pool size the policy sets for `language` on `executor` (the
 * per-executor table first, then the plain one), or -1 when it says
 * nothing. */
int hutch_policy_pool_size(const struct hutch_policy *p, const char *executor,
                           const char *language);
/* executor_options for `executor`: a JSON object of strings owned by the
 * policy (valid while a reference is held), or NULL. */
/* The operator's flavour (--flavour base|data) over a policy just loaded,
 * before anyone else holds it: executor_options.{local,docker,gvisor}
 * .flavour set to `flavour`.  A policy that names another flavour for one
 * of them is an error (the two must agree, as the executor's names do). */
int hutch_policy_apply_flavour(struct hutch_policy *p, const char *flavour,
                               struct hutch_err *err);
/* The flavour executor_options names for `executor` ("base" when none). */
const char *hutch_policy_flavour(const struct hutch_policy *p, const char *executor,
                                 char *buf, size_t len);
const char *hutch_policy_executor_options(const struct hutch_policy *p,
                                          const char *executor);
/* The name of the i-th executor executor_options names (a table in the
 * file, or a flavour added by hutch_policy_apply_flavour), or NULL past the
 * last. */
const char *hutch_policy_executor_options_name(const struct hutch_policy *p, size_t i);
const struct hutch_policy_limits *hutch_policy_limits(const struct hutch_policy *p);
const struct hutch_policy_rate *hutch_policy_rate(const struct hutch_policy *p);
const struct hutch_policy_workspaces *
hutch_policy_workspaces(const struct hutch_policy *p);
size_t hutch_policy_npaths(const struct hutch_policy *p);
const struct hutch_policy_path *hutch_policy_path_at(const struct hutch_policy *p,
                                                     size_t i);
/* direct_tools: 1 or 0 when the policy says, -1 when it does not (then
 * hutch serve --direct-tools decides). */
int hutch_policy_direct_tools(const struct hutch_policy *p);
/* The concurrency limits of `principal`: its own entry's, each field it
 * does not set from the policy's top-level table. */
void hutch_policy_concurrency(const struct hutch_policy *p, const char *principal,
                              struct hutch_policy_concurrency *out);
/* The policy's `egress` (egress.h): its rules and caps, owned by the
 * policy (valid while a reference is held); NULL when the policy has no
 * `egress` field: egress is off. */
const struct hutch_egress_rules *hutch_policy_egress(const struct hutch_policy *p);
/* The egress of `principal`: its entry's own (principals[i].egress), none
 * when that is false, else the policy's. */
const struct hutch_egress_rules *hutch_policy_egress_of(const struct hutch_policy *p,
                                                        const char *principal);
/* 1 when the policy lists principals (then HTTP needs one of their tokens). */
int hutch_policy_has_principals(const struct hutch_policy *p);
unsigned hutch_policy_nprincipals(const struct hutch_policy *p);
/* The principal whose bearer token is `token` (constant-time compare), or
 * NULL. */
const char *hutch_policy_principal(const struct hutch_policy *p, const char *token);

/* An execution about to start.  The policy may refuse it, or tighten: on
 * success *out holds the executor and limits to use (never looser than the
 * policy's own limits; a hook asking for more is clamped). */
struct hutch_policy_exec {
    const char *principal;
    const char *execution; /* id */
    const char *language;
    size_t code_bytes;
    size_t nfiles;
    const char *workspace; /* the workspace it names, or NULL */
};
struct hutch_policy_decision {
    char executor[64];
    int executor_from_hook; /* on_execute named it (else the policy's) */
    int egress_off;         /* on_execute returned egress = false */
    struct hutch_policy_limits limits;
};
/* 0 allowed (*out filled), -EPERM refused with `reason`, other negative on
 * internal errors (also refusals: fail closed). */
int hutch_policy_check_execute(struct hutch_policy *p,
                               const struct hutch_policy_exec *req,
                               struct hutch_policy_decision *out, char *reason,
                               size_t reason_len);

/* A tool call from a sandbox: tools.deny globs, then tools.allow globs (with
 * a policy file, a tool no allow glob names is denied), then on_tool_call.
 * `tool` is "server.tool" with the upstream names; matching is
 * case-insensitive with surrounding whitespace ignored.  0 allowed, -EPERM
 * denied with `reason`, other negative: failed closed (also a denial);
 * HUTCH_POLICY_ASK: on_tool_call returned "ask", question: `reason` holds
 * the question for the user, who decides (govern.c). */
#define HUTCH_POLICY_ASK 1
int hutch_policy_check_tool(struct hutch_policy *p, const char *principal,
                            const char *execution, const char *server, const char *tool,
                            const cJSON *args, char *reason, size_t reason_len);

/* The half of hutch_policy_check_tool that needs no arguments: 1 when the
 * tools.deny and tools.allow globs let `server`.`tool` be called, 0 when
 * they deny it.  What search_tools, tools.search and the direct tools offer
 * (on_tool_call decides on a call's arguments, so only a call asks it). */
int hutch_policy_tool_listed(const struct hutch_policy *p, const char *server,
                             const char *tool);

/* taint: an execution that has received a result from an untrusted source
 * (a taint.sources glob names the tool) is tainted; a later call of a sink
 * (a taint.sinks glob) is denied, or asked about under on_sink = "ask"
 * (govern.c enforces it, the workspace store carries it on).  Each returns
 * the glob that names `server`.`tool` as the file wrote it, or NULL when
 * none does (or the policy has no taint table); *ask, when not NULL, is set
 * to 1 under on_sink = "ask". */
const char *hutch_policy_taint_source(const struct hutch_policy *p, const char *server,
                                      const char *tool);
const char *hutch_policy_taint_sink(const struct hutch_policy *p, const char *server,
                                    const char *tool, int *ask);

/* Egress in the taint rule: *source is 1 when taint.sources has the entry
 * "egress" (every connection a program makes through the egress proxy
 * taints it: what comes back is a third party's), *sink when taint.sinks
 * has it (a connection may send data out); *ask under on_sink = "ask".
 * Only that exact entry names egress: a glob ("*") names tools only. */
void hutch_policy_taint_egress(const struct hutch_policy *p, int *source, int *sink,
                               int *ask);

/* The taint rule on a call of `server`.`tool` by an execution tainted by
 * `tainted_by` (what gave it untrusted data; NULL: not tainted), after the
 * globs and on_tool_call said `r`: unchanged unless the call is a sink's;
 * then -EPERM with `reason` naming the source and the sink rule, or under
 * on_sink = "ask" HUTCH_POLICY_ASK with a question that names the source
 * (after the hook's own question when it asked too).  *sink, when not
 * NULL, receives the taint.sinks glob that decided, or NULL. */
int hutch_policy_check_taint(const struct hutch_policy *p, const char *server,
                             const char *tool, const char *tainted_by, int r,
                             char *reason, size_t reason_len, const char **sink);
/* The taint rule on a connection to host:port through the egress proxy by
 * an execution tainted by `tainted_by` (NULL: not tainted): 0 unless
 * taint.sinks has "egress" and the execution is tainted; then -EPERM or
 * HUTCH_POLICY_ASK with `reason`, in the words hutch_policy_check_taint
 * uses for a tool. */
int hutch_policy_check_taint_egress(const struct hutch_policy *p, const char *host,
                                    unsigned port, const char *tainted_by, char *reason,
                                    size_t reason_len);

/* 1 when the globs deny every tool call whatever the upstream servers
 * offer, why (at most len bytes) saying which: a policy file without a
 * tools.allow glob (the default of a policy file: a tool is allowed only
 * when an allow glob names it; the built-in default allows every tool),
 * or a tools.deny glob that matches every name ("*", "*.*").  0 otherwise.
 * What `hutch policy check` warns about: such a policy may be meant (code
 * without tools), but is more often an allow list forgotten. */
int hutch_policy_denies_every_tool(const struct hutch_policy *p, char *why, size_t len);

/* hutch.path_allowed(path, mode) from C: normalise `path` (see path.h),
 * resolve symlinks of its existing part, and check it lies inside a `paths`
 * entry whose mode allows `mode` ("ro" or "rw").  1 allowed (*resolved, if
 * given, receives the resolved host path to use from now on), 0 not. */
int hutch_policy_path_allowed(struct hutch_policy *p, const char *path,
                              const char *mode, char *resolved, size_t resolved_len);

/* Argument names whose values never reach the audit log. */
int hutch_policy_is_secret(const struct hutch_policy *p, const char *arg_name);

#endif
