/* upstream.h — the MCP client side: hutch talking to the user's own MCP
 * servers, configured in the `mcpServers` JSON format of Claude Desktop and
 * Claude Code:
 *
 *   { "mcpServers": {
 *       "fs":   { "command": "npx", "args": ["-y", "…"], "env": {"K": "V"} },
 *       "docs": { "type": "http", "url": "http://127.0.0.1:9000/mcp",
 *                 "headers": {"Authorization": "Bearer …"} } } }
 *
 * (VS Code's "servers" object is read the same way.)  "disabled": true
 * entries and unsupported ones ("type": "sse", unknown types) are kept,
 * never started, and listed as "disabled" / "skipped"; ${VAR} and
 * ${VAR:-default} are expanded in command, args, cwd, url and the env and
 * headers values (doc/servers.md, "The servers file").
 *
 * stdio entries are spawned as children (NDJSON on their stdin/stdout,
 * stderr logged line by line); http entries use libcurl (POST, JSON or SSE
 * responses, Mcp-Session-Id).  Every server is initialized, its tools are
 * paged through tools/list and re-read on notifications/tools/list_changed;
 * calls from many threads are multiplexed by JSON-RPC id, each with a
 * timeout; a crashed child is restarted with backoff; a server that fails
 * to start is reported with its reason while the others keep working.
 * Everything an upstream sends is untrusted: messages are capped, JSON is
 * validated, ids are checked. */
#ifndef HUTCH_UPSTREAM_H
#define HUTCH_UPSTREAM_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "hutch-executor.h"
#include "status.h"

struct hutch_upstreams;

struct hutch_upstream_opts {
    int call_timeout_ms;     /* per tools/call, unless the server's entry says
                                "timeout_ms"; 0: HUTCH_UPSTREAM_CALL_MS */
    int start_timeout_ms;    /* initialize + first tools/list; 0: default */
    const char *client_name; /* clientInfo.name, "hutch" when NULL */
    bool no_wait;            /* return at once: servers join as they come up */
};

/* Read and validate a servers file (JSON, or VS Code's JSON with comments
 * and trailing commas).  *config is the "mcpServers" (or VS Code's
 * "servers") object as written, variables unexpanded (caller frees).  An
 * entry hutch cannot run or that is broken stays in it and is skipped
 * when started; why is logged as a warning here, once, naming the file,
 * the server and the field (an unset ${VAR}: the variable too), with the
 * unknown keys.  An entry with an invalid name, or an earlier definition
 * of a name given twice, is dropped with a warning.  Errors: a file that
 * is not JSON(C), or has no servers object, or too many servers. */
int hutch_upstreams_load(const char *path, cJSON **config, struct hutch_err *err);
/* How many entries of a loaded config are broken: skipped for an error of
 * their own (a field missing or of the wrong type, a variable unset or
 * only VS Code's), not for a type hutch does not run.  hutch serve
 * starts the others; --check-config fails on them. */
size_t hutch_upstreams_broken(const cJSON *config);

/* Start every server of `config` concurrently and wait (up to the start
 * timeout; not at all with opts->no_wait) until each is ready or failed.  Fails only on
 * bad arguments or out of memory: servers that do not come up are kept with their
 * reason (see hutch_upstreams_snapshot) and retried in the background. Caller frees
 * with hutch_upstreams_free, which stops every child. */
int hutch_upstreams_start(const cJSON *config, const struct hutch_upstream_opts *opts,
                          struct hutch_upstreams **out, struct hutch_err *err);
/* Tell every supervisor to stop its child, without waiting: the teardowns
 * (each up to a few seconds for a child that ignores its closed stdin) run
 * while the caller frees other things; hutch_upstreams_free waits for them. */
void hutch_upstreams_stop(struct hutch_upstreams *u);
/* The server whose name is the first len bytes of `name` (compared without
 * case) is starting for the first time: wait until it is ready or failed,
 * or deadline_ms, or hutch stops.  1 when it waited for such a server. */
int hutch_upstreams_wait_started(struct hutch_upstreams *u, const char *name,
                                 size_t len, uint64_t deadline_ms);
/* Until every server has been ready or failed once, or deadline_ms, or
 * hutch stops. */
void hutch_upstreams_wait_settled(struct hutch_upstreams *u, uint64_t deadline_ms);
/* The same, but never past grace_ms after the first search that found a
 * server still starting (nor past deadline_ms, when not 0): what a search
 * waits for.  The first search waits for the servers still starting, and
 * so do those that come while it waits; once its grace is over, a search
 * answers at once and names them, however long one of them stays stuck. */
void hutch_upstreams_wait_starting(struct hutch_upstreams *u, unsigned grace_ms,
                                   uint64_t deadline_ms);
void hutch_upstreams_free(struct hutch_upstreams *u);

/* The tools of every ready server, as an array of {"server": NAME, "tool":
 * <the tool object from tools/list>}, in config order then upstream order.
 * Caller frees. */
cJSON *hutch_upstreams_tools(struct hutch_upstreams *u);
/* Bumped whenever any server's tool list changed (list_changed, restart). */
uint64_t hutch_upstreams_generation(struct hutch_upstreams *u);
/* One row per entry of the servers file, in its order (status.h), in
 * *rows (caller frees with free()) and *n; none when u is NULL.  disabled
 * and skipped entries were never started (a skipped one's error says why;
 * its transport is "none").  0, or -ENOMEM. */
int hutch_upstreams_snapshot(struct hutch_upstreams *u,
                             struct hutch_upstream_status **rows, size_t *n);

/* Call `tool` (the upstream's own name) on `server`.  Blocking; safe from
 * many threads at once.  It waits the server's per-call timeout (its
 * entry's "timeout_ms", else call_timeout_ms), or timeout_ms when that is
 * positive and lower.  0 and *result = the CallToolResult object (caller
 * frees; it may have isError true: that is still 0), or a negative code:
 * -ENOENT no such server, -EHOSTDOWN server not ready, -ETIMEDOUT,
 * -ECONNRESET the server died during the call, -EPROTO it sent garbage,
 * -EREMOTEIO it answered with a JSON-RPC error (err->msg is its message). */
/* Who answers an upstream's questions for the calls this thread makes: a
 * 2026-07-28 server that answers tools/call with input_required asks its
 * user through elicitation/create; fn asks hutch's own client (params as
 * the server sent them) and gives back its result ({action, content}), or
 * a negative code with why.  While one is set, this thread's calls declare
 * the elicitation capability in their _meta.  Set it around a call, clear
 * it with NULL (govern.c does, per tool call). */
struct hutch_elicitor {
    int (*fn)(void *arg, const cJSON *params, unsigned ms, cJSON **result, char *why,
              size_t why_len);
    void *arg;
};
void hutch_upstreams_set_elicitor(const struct hutch_elicitor *e);

int hutch_upstreams_call(struct hutch_upstreams *u, const char *server,
                         const char *tool, const cJSON *args, int timeout_ms,
                         cJSON **result, struct hutch_err *err);

/* hutch_upstreams_call without a waiting thread, where the server allows
 * it (stdio, the 2025 era: no question can come back).  1: the call is on
 * its way, and done(arg, r, result, err) is called exactly once, with what
 * hutch_upstreams_call would have returned (result the callee's), on the
 * server's I/O thread with no lock held, or on this thread before this
 * returns; args are not needed after this returns.  0: the server needs a
 * thread (HTTP, 2026-07-28): nothing was done, call hutch_upstreams_call.
 * Negative: the call failed at once as hutch_upstreams_call's would, and
 * done is never called. */
typedef void (*hutch_upstreams_done_fn)(void *arg, int r, cJSON *result,
                                        struct hutch_err *err);
int hutch_upstreams_call_start(struct hutch_upstreams *u, const char *server,
                               const char *tool, const cJSON *args, int timeout_ms,
                               hutch_upstreams_done_fn done, void *arg,
                               struct hutch_err *err);

#endif
