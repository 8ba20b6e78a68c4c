/* mcp_server.h — hutch as an MCP server, independent of the transport.
 *
 * The server holds what every session shares (the jobs that run
 * executions, the upstreams' catalog).  It parses requests and renders
 * results; an execution itself is put together in job.c.  A session is one client: the
 * single client of stdio, or one Mcp-Session-Id of streamable HTTP, or, for a
 * 2026-07-28 request over HTTP, that one request (the era has no sessions;
 * mcp_era.h decides which era each message belongs to).  A transport hands
 * each message it reads to hutch_mcp_session_receive() and delivers what the session
 * sends back through its hutch_mcp_send_fn.  Requests run concurrently: tools/call runs
 * on a worker thread, so one slow execution never blocks another. */
#ifndef HUTCH_MCP_SERVER_H
#define HUTCH_MCP_SERVER_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_mcp;
struct hutch_mcp_session;
struct hutch_plugin;
struct hutch_upstreams;

struct hutch_jobs;
struct hutch_gov;
struct hutch_bridge;

struct hutch_mcp_opts {
    /* Runs execute_code (job.h).  NULL: execute_code checks its arguments
     * and answers that nothing can run (the fuzz harness, tests/fuzz). */
    struct hutch_jobs *jobs;
    struct hutch_bridge *bridge;       /* the upstream tools' catalog */
    struct hutch_upstreams *upstreams; /* may be NULL: no upstream tools */
    /* The policy: what search_tools offers (NULL: all), and whose observed
     * return types it shows (NULL: none). */
    struct hutch_gov *gov;
    int direct_tools;       /* --direct-tools (mcp_direct.h) */
    uint64_t timeout_ms;    /* the most execute_code may ask for */
    uint64_t output_max;    /* the most output_bytes may ask for (0: hutch's) */
    int untrusted_envelope; /* wrap sandbox output (default on) */
    /* Where result files behind resource_links are kept (resources.h):
     * NULL in memory; a directory replicas share. */
    const char *resources_dir;
};

/* Caller frees with hutch_mcp_free after every session is gone. */
int hutch_mcp_new(const struct hutch_mcp_opts *opts, struct hutch_mcp **out,
                  struct hutch_err *err);
void hutch_mcp_free(struct hutch_mcp *m);

/* Deliver one JSON-RPC message (complete JSON text, no trailing newline) to
 * the client.  `stream` is the value the transport passed to
 * hutch_mcp_session_receive() with the request this message answers or
 * reports on (a response, or notifications/progress for it), or NULL for a
 * message tied to no request.  `last` is 1 on the response that ends that
 * request.  Called from any thread, never concurrently for one session. */
typedef void (*hutch_mcp_send_fn)(void *arg, void *stream, const char *json, size_t len,
                                  int last);

/* `principal` names the client for logs ("local" for stdio).  Caller frees
 * with hutch_mcp_session_free, which cancels the session's executions and
 * waits for its workers. */
struct hutch_mcp_session *hutch_mcp_session_new(struct hutch_mcp *m,
                                                hutch_mcp_send_fn send, void *arg,
                                                const char *principal);
void hutch_mcp_session_free(struct hutch_mcp_session *s);
/* The same without waiting: the session's executions are cancelled, and it
 * is freed once its workers are done — now, or later on the last worker's
 * thread — and then gone(arg) is called, after which the session sends
 * nothing more.  For a transport that must not wait for a sandbox to be
 * torn down after the response went out (HTTP's 2026-07-28 requests). */
void hutch_mcp_session_close(struct hutch_mcp_session *s, void (*gone)(void *arg),
                             void *arg);

/* Handle one message from the client (untrusted).  Returns 1 when it was a
 * request, whose response will arrive through send() with `stream` and
 * last=1 (maybe before this returns, maybe later from a worker), or 0 when
 * it needs no response (a notification, or a response from the client).
 * A message that cannot be parsed is answered at once with a JSON-RPC error
 * (id null) on `stream` and counts as a request. */
int hutch_mcp_session_receive(struct hutch_mcp_session *s, const char *json, size_t len,
                              void *stream);

/* The same for a message already parsed and judged (mcp_era.h), as the
 * HTTP transport does to pick the session before delivering.  m stays the
 * caller's. */
struct hutch_mcp_msg;
int hutch_mcp_session_deliver(struct hutch_mcp_session *s, struct hutch_mcp_msg *m,
                              void *stream);

/* The session id handed out in Mcp-Session-Id (random, 32 hex). */
const char *hutch_mcp_session_id(const struct hutch_mcp_session *s);
/* The protocol version agreed in initialize, NULL before. */
const char *hutch_mcp_session_protocol(const struct hutch_mcp_session *s);
/* 1 when `version` is one the 2025 session protocol agrees on in initialize
 * (2025-06-18, 2025-11-25); 2026-07-28 is per request (mcp_era.h). */
int hutch_mcp_protocol_supported(const char *version);

#endif
