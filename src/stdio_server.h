/* stdio_server.h — MCP's stdio transport: newline-delimited JSON-RPC on
 * stdin/stdout for one client (principal "local"), logs on stderr only.
 * It sits beside the streamable HTTP one (http.h); the MCP semantics live
 * in mcp_server.h. */
#ifndef HUTCH_STDIO_SERVER_H
#define HUTCH_STDIO_SERVER_H

#include <signal.h>

#include "hutch-executor.h"

struct hutch_mcp;
struct hutch_upstreams;

/* Serve one client reading in_fd and writing out_fd until it closes in_fd,
 * a write to it fails (the client went away), or *stop becomes non-zero
 * (a signal; the read is interrupted).  Before the session is freed (its
 * executions cancelled and waited for) the upstreams are stopped, so that
 * tool calls in flight end at once.  0, or a negative errno-style code with
 * err set (reading in_fd failed). */
int hutch_stdio_serve(struct hutch_mcp *m, struct hutch_upstreams *ups, int in_fd,
                      int out_fd, volatile sig_atomic_t *stop, struct hutch_err *err);

#endif
