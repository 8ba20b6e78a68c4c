/* mcp_direct.h — hutch serve --direct-tools: the upstream tools offered as
 * MCP tools of their own next to search_tools and execute_code, for clients
 * that bring their own code mode (no code mode stacked on another).  Each
 * call goes through the same governed path as a call from a sandbox
 * (govern.c hutch_gov_tool): policy, audit, rate limit. */
#ifndef HUTCH_MCP_DIRECT_H
#define HUTCH_MCP_DIRECT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "hutch-executor.h"

struct hutch_bridge;
struct hutch_gov;
struct hutch_upstreams;

struct hutch_direct_opts {
    struct hutch_bridge *bridge;
    struct hutch_gov *gov;             /* may be NULL: never on */
    struct hutch_upstreams *upstreams; /* may be NULL */
    int flag;                          /* --direct-tools */
    uint64_t timeout_ms;               /* of one call */
};

/* On when the policy's direct_tools says true, or says nothing and the flag
 * is given. */
int hutch_direct_enabled(const struct hutch_direct_opts *o);

/* Append the MCP definitions of the tools the policy offers to `tools`
 * (nothing when off).  Names: see mcp_direct.c. */
void hutch_direct_list(const struct hutch_direct_opts *o, cJSON *tools);

/* tools/call of `name` for `principal`: the CallToolResult (the upstream's
 * own, or isError with the reason), or NULL when `name` is no direct tool
 * (or the switch is off).  Blocks for the upstream call: run it on a worker. */
cJSON *hutch_direct_call(const struct hutch_direct_opts *o, const char *principal,
                         const char *name, const cJSON *args);

/* Watch what hutch_direct_list would list (upstreams joining or leaving the
 * catalog, a policy reload) and call changed(arg) from a thread of its own
 * when it changes.  NULL when the thread cannot start. */
struct hutch_direct_watch;
struct hutch_direct_watch *hutch_direct_watch_start(const struct hutch_direct_opts *o,
                                                    void (*changed)(void *arg),
                                                    void *arg);
void hutch_direct_watch_stop(struct hutch_direct_watch *w);

#endif
