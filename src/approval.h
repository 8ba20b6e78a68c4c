/* approval.h — asking an MCP client's user whether a tool call may go
 * ahead (on_tool_call's "ask"): the requests hutch sends a client and
 * waits on (elicitation/create), and the answers routed back to them.
 * Transport-free: the caller says how a message is sent; mcp_server.c
 * hands every response a client sends to hutch_asks_response.
 *
 * Threads: any number of threads may wait in hutch_asks_request at once
 * (one per program tool call being asked about); responses arrive on the
 * session's reading thread.  One mutex guards the table. */
#ifndef HUTCH_APPROVAL_H
#define HUTCH_APPROVAL_H

#include <cjson/cJSON.h>

#include "hutch-executor.h"

struct hutch_asks;

/* Sends msg (taking it) to the client: 0, or negative when it cannot. */
typedef int (*hutch_asks_send_fn)(void *arg, cJSON *msg);

struct hutch_asks *hutch_asks_new(void);
/* After hutch_asks_close, once no thread can be in hutch_asks_request. */
void hutch_asks_free(struct hutch_asks *a);
/* The session is going away: every waiter returns -ECONNRESET now, and
 * later requests fail at once. */
void hutch_asks_close(struct hutch_asks *a);

/* Sends the request `method` with `params` (taken) under a fresh id of
 * hutch's own ("hutch-ask-N") and waits at most ms for the client's
 * response.  0 with *result (caller frees); -ETIMEDOUT; -EREMOTEIO when
 * the client answered with an error (err says it); -ECONNRESET when the
 * session closed; -ENOMEM. */
int hutch_asks_request(struct hutch_asks *a, hutch_asks_send_fn send, void *send_arg,
                       const char *method, cJSON *params, unsigned ms, cJSON **result,
                       struct hutch_err *err);

/* A JSON-RPC response (no "method") from the client: 1 when it answers one
 * of our requests (handed to its waiter), 0 when it answers nothing we
 * asked (the caller ignores it). */
int hutch_asks_response(struct hutch_asks *a, const cJSON *msg);

/* The arguments of a call as the person asked about it reads them, every
 * one on its own line ("  name: value", the value as JSON), control and
 * bidirectional characters escaped (hutch_text_escape): each line within
 * its share of HUTCH_APPROVAL_ARGS_TEXT, a longer one as its head and its
 * tail with "…[N bytes left out]…" between; arguments past what can be
 * shown are counted ("… and N more arguments, M bytes, left out").  Never
 * one argument hidden behind another's length.  "  (none)" for no
 * arguments.  Caller frees; NULL when out of memory. */
char *hutch_approval_args_text(const cJSON *args);

/* The params of the elicitation/create that asks `question` about a call
 * of `tool` with `args` (form mode: one required boolean "approve"; the
 * message names the tool and shows its arguments as
 * hutch_approval_args_text does).  NULL when out of memory. */
cJSON *hutch_approval_params(const char *tool, const char *question, const cJSON *args);
/* The client's elicitation result as an enum hutch_answer (see below), or
 * -EPROTO with `why` when it is none. */
int hutch_approval_answer(const cJSON *result, char *why, size_t why_len);

/* The question as an elicitation/create (form mode: one boolean "approve"),
 * and the client's answer as an enum hutch_answer (govern.h): accept with
 * approve true is APPROVE, accept with false or decline is DECLINE, cancel
 * is CANCEL; no answer within ms is TIMEOUT.  Negative when the client
 * could not be asked (why says so). */
int hutch_asks_approval(struct hutch_asks *a, hutch_asks_send_fn send, void *send_arg,
                        const char *tool, const char *question, const cJSON *args,
                        unsigned ms, char *why, size_t why_len);

#endif
