/* http.h — MCP's streamable HTTP transport (POST and DELETE on /mcp), built
 * on libmicrohttpd, beside /healthz, /readyz and /metrics.  The MCP
 * semantics live in mcp_server.h; this only moves messages between HTTP
 * requests and sessions. */
#ifndef HUTCH_HTTP_H
#define HUTCH_HTTP_H

#include <signal.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_mcp;
struct hutch_jobs;
struct hutch_upstreams;

struct hutch_http_opts {
    const char *addr;  /* "127.0.0.1", "::1", "0.0.0.0": a host name is not accepted */
    uint16_t port;     /* 0: pick one (reported in bound_port) */
    const char *token; /* bearer token required on every request; NULL: none */
    /* Tokens of named principals (the policy's): 1 and the name written
     * when `token` is one of them.  With it set, a request needs the
     * server token or a principal's token. */
    int (*principal)(void *arg, const char *token, char *name, size_t len);
    void *principal_arg;
    /* What /readyz and /metrics report on (either may be NULL). */
    struct hutch_jobs *jobs;
    struct hutch_upstreams *upstreams;
    uint16_t bound_port; /* out: set once listening, before serving starts */
};

/* What hutch_http_serve checks before it listens, without listening: the
 * address (an IP address), a token off loopback, the HUTCH_HTTP_*
 * environment variables, libmicrohttpd.  `hutch serve` calls it before it
 * starts anything else.  0, or a negative errno-style code with err set. */
int hutch_http_check(const struct hutch_http_opts *opts, struct hutch_err *err);

/* Serve MCP at http://ADDR:PORT/mcp until *stop becomes non-zero (checked at
 * least every 100 ms) or a fatal error.  Refuses to start without a token on
 * a non-loopback address.  Every session is freed before this returns.
 * Returns 0 or a negative errno-style code with err set. */
int hutch_http_serve(struct hutch_mcp *m, struct hutch_http_opts *opts,
                     volatile sig_atomic_t *stop, struct hutch_err *err);

#endif
