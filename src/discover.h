/* discover.h — what an agent is offered of the upstream tools and what it
 * is told when it reaches for one that is not there: the search behind
 * search_tools and tools.search (ranked, filtered by the policy, a compact
 * default answer), "did you mean" for an unknown tool, and the host folders
 * the policy lets execute_code take. */
#ifndef HUTCH_DISCOVER_H
#define HUTCH_DISCOVER_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "buf.h"
#include "catalog.h"
#include "policy.h"
#include "status.h"

/* 1 when the policy offers e (its tools.allow/deny globs let it be called);
 * p NULL offers everything.  on_tool_call decides on a call's arguments, so
 * a tool it may refuse for some arguments is still offered. */
int hutch_discover_offered(const struct hutch_policy *p,
                           const struct hutch_catalog_entry *e);

/* A search as search_tools' arguments ask it ({query, limit?, detail?},
 * untrusted).  On 0, *out is {tools, total, matches, more?} (caller frees)
 * and, when text is not NULL, the readable answer is appended to it:
 * without `detail`, the best matches whole and the rest by name, in at most
 * `budget` bytes; with a detail, every result at that detail (with "full",
 * the schemas as JSON).  Return types: declared, or observed (`shapes`).  `brief` 0
 * (tools.search) never shortens: each result is as the detail (default "signatures")
 * says.  -EINVAL with the reason in err for bad arguments. */
struct hutch_shapes;
/* Return types observed (shape.h) shown in a search's results: those
 * learned from `principal`'s own calls, of the tools may_see(arg,
 * "server.tool") allows.  NULL: none shown. */
struct hutch_discover_shapes {
    struct hutch_shapes *shapes;
    const char *principal;
    int (*may_see)(void *arg, const char *tool);
    void *arg;
};
int hutch_discover_search(const struct hutch_catalog *cat, const struct hutch_policy *p,
                          const cJSON *args, int brief, size_t budget,
                          const struct hutch_discover_shapes *shapes, cJSON **out,
                          struct hutch_buf *text, struct hutch_err *err);

/* What a program's dir() and help() show (the runner's "describe"
 * message), of the tools the policy offers.  server NULL: {"tools":
 * {"<server identifier>": ["<tool identifier>", ...]}, "calls":
 * ["server.tool", ...]}, the attributes of `tools` (in catalog order) and
 * the tools only tools.call reaches (their identifiers collide).  A
 * server (its identifier or its upstream name): {"tools": [...]}, its
 * tools as search results at detail "signatures", none when it offers
 * none.  NULL when out of memory. */
cJSON *hutch_discover_directory(const struct hutch_catalog *cat,
                                const struct hutch_policy *p, const char *server);

/* The servers a search names because their tools are missing, from
 * hutch_upstreams_snapshot()'s n rows: those that were started and are not ready
 * (starting, restarting, failed); a disabled or skipped one is the user's
 * choice, nothing an agent can wait for.  One line each appended to t
 * (when not NULL), and the list [{server, state, error?}] returned (NULL
 * when there is none; caller frees). */
cJSON *hutch_discover_not_ready(const struct hutch_upstream_status *rows, size_t n,
                                struct hutch_buf *t);

/* " (did you mean \"fs.read_file\"?)" for an unknown `tool` when an offered
 * tool is close (a couple of typing errors, identifier spelling, or the same
 * tool name on another server), else "". */
void hutch_discover_suggest(const struct hutch_catalog *cat,
                            const struct hutch_policy *p, const char *tool, char *out,
                            size_t len);

/* The sentence for execute_code's description naming the host folders
 * `inputs` and `output_dir` may use under policy p. */
void hutch_discover_paths(const struct hutch_policy *p, struct hutch_buf *t);
/* The line of execute_code's description on the network: with egress
 * rules r (a principal's, hutch_policy_egress_of), the hosts a program may
 * reach and how (the first HUTCH_DISCOVER_EGRESS_RULES rules); nothing
 * when r is NULL. */
struct hutch_egress_rules;
void hutch_discover_egress(const struct hutch_egress_rules *r, struct hutch_buf *t);

#endif
