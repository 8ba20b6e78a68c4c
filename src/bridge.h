/* bridge.h — the host end of the sandbox tool bridge: a tool call from a
 * program (tools.server.tool(...)) is looked up in the catalog, its
 * arguments validated against the tool's input schema, forwarded to the
 * upstream server, and its result turned into a plain value for the
 * program. */
#ifndef HUTCH_BRIDGE_H
#define HUTCH_BRIDGE_H

#include <cjson/cJSON.h>

#include "catalog.h"
#include "exec.h"
#include "upstream.h"

struct hutch_bridge;

/* `u` may be NULL (no upstreams: every tool is unknown); it must outlive
 * the bridge.  Caller frees with hutch_bridge_free. */
int hutch_bridge_new(struct hutch_upstreams *u, struct hutch_bridge **out,
                     struct hutch_err *err);
void hutch_bridge_free(struct hutch_bridge *b);

/* The upstreams it was made with (NULL: none). */
struct hutch_upstreams *hutch_bridge_upstreams(struct hutch_bridge *b);

/* The shapes of the results the bridge passed back (shape.h), observed for
 * tools without an outputSchema; owned by the bridge. */
struct hutch_shapes *hutch_bridge_shapes(struct hutch_bridge *b);

/* The current catalog, rebuilt when the upstreams' tools changed.  It stays
 * valid until hutch_bridge_catalog_put(b, *ref). */
struct hutch_catalog *hutch_bridge_catalog_get(struct hutch_bridge *b, void **ref);
void hutch_bridge_catalog_put(struct hutch_bridge *b, void *ref);

/* The entry for `tool` in the current catalog (NULL when it lacks it), with
 * the catalog held as hutch_bridge_catalog_get does.  A tool of a server
 * still starting for the first time (hutch serve answers before its
 * upstreams are up) is waited for, until that server is ready or failed or
 * timeout_ms passed. */
const struct hutch_catalog_entry *
hutch_bridge_find(struct hutch_bridge *b, const char *tool, int timeout_ms, void **ref);

/* hutch_tool_fn for hutch_exec_req.tool; arg is the struct hutch_bridge.
 * Without a policy there is one principal: "local". */
int hutch_bridge_tool(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                      struct hutch_tool_reply *reply);

/* The two halves of hutch_bridge_tool, for a caller that looked the tool
 * up itself (the policy decides on the catalog entry): call the entry of a
 * catalog the caller holds for `principal` (whose shapes its result
 * teaches), or answer for a name the catalog lacks. */
int hutch_bridge_call(struct hutch_bridge *b, const char *principal,
                      const struct hutch_catalog_entry *e, const cJSON *args,
                      int timeout_ms, struct hutch_tool_reply *reply);
int hutch_bridge_unknown(struct hutch_bridge *b, const char *tool,
                         struct hutch_tool_reply *reply);

/* hutch_bridge_call without a waiting thread, where the tool's server
 * allows it (hutch_upstreams_call_start): 1 when the call is on its way
 * (done(arg, r, reply) then comes exactly once, with what hutch_bridge_call
 * would have returned, maybe before this returns; reply, e and principal
 * must stay until it has), 0 when it needs hutch_bridge_call on a thread
 * (nothing done, reply untouched), negative when it ended at once (reply
 * says why, done is not called). */
int hutch_bridge_call_start(struct hutch_bridge *b, const char *principal,
                            const struct hutch_catalog_entry *e, const cJSON *args,
                            int timeout_ms, struct hutch_tool_reply *reply,
                            hutch_tool_done_fn done, void *arg);

/* A CallToolResult as the value a program receives: structuredContent when
 * there is one, else the content (text parsed as JSON when it is JSON;
 * images, audio and resources as objects with their mime type and data);
 * one item as itself, several as a list.  Caller frees. */
cJSON *hutch_bridge_result_value(const cJSON *call_result);

#endif
