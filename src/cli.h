/* cli.h — the subcommands of the hutch binary, one file each. */
#ifndef HUTCH_CLI_H
#define HUTCH_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "plugin.h"

struct hutch_upstreams;

int hutch_cmd_run(int argc, char **argv);
int hutch_cmd_plugins(int argc, char **argv);
int hutch_cmd_doctor(int argc, char **argv);
int hutch_cmd_serve(int argc, char **argv);
int hutch_cmd_tools(int argc, char **argv);
int hutch_cmd_policy(int argc, char **argv);
int hutch_cmd_workspace(int argc, char **argv);

/* Load and start the servers of a servers file.  wait: until each is ready
 * or failed (each one that is not ready is reported on stderr, prefixed
 * with `who`, with its reason); else at once, the servers joining as they
 * come up (hutch serve: a client's initialize is not kept waiting by a slow
 * upstream).  Caller frees *config and *ups. */
int hutch_cli_start_upstreams(const char *servers, const char *who, bool wait,
                              cJSON **config, struct hutch_upstreams **ups,
                              struct hutch_err *err);

/* The tools executions call: the servers file's upstreams (none when
 * servers is NULL) and the bridge to them.  Caller frees all three. */
struct hutch_bridge;
int hutch_cli_start_tools(const char *servers, const char *who, bool wait,
                          cJSON **config, struct hutch_upstreams **ups,
                          struct hutch_bridge **bridge, struct hutch_err *err);

/* --timeout, --memory and --pids, the same in every command: 0 and *val
 * within hutch's caps, or -1 after saying on stderr what is allowed. */
int hutch_cli_limit(const char *who, const char *flag, const char *arg, uint64_t *val);

#endif
