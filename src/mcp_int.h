/* mcp_int.h — what the mcp_*.c files of hutch's MCP server share, and
 * nobody else: the server and session structures, sending, and each
 * file's functions the others call.  Not an API (that is mcp_server.h).
 *
 *   mcp_server.c  dispatch of both eras, initialize, server/discover,
 *                 resources/read, the list of sessions
 *   mcp_session.c a session's life, sending on it, what its client asked
 *                 for: under mcp_server.c and mcp_exec.c, calling neither
 *   mcp_tools.c   search_tools, execute_code's definition and how a result
 *                 is rendered for the model
 *   mcp_exec.c    execute_code's executions: a worker per call, the 2026
 *                 era's parked questions, tasks
 *   mcp_era.c     parsing a message and judging its era
 *
 * Locks: a session's mu guards its in-flight list and worker count,
 * send_mu one send at a time; m->park_mu (mcp_exec.c) is taken before any
 * session's mu or send_mu, never after. */
#ifndef HUTCH_MCP_INT_H
#define HUTCH_MCP_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include <cjson/cJSON.h>

#include "approval.h"
#include "caps.h"
#include "jsonrpc.h"
#include "mcp_direct.h"
#include "mcp_server.h"
#include "resources.h"

struct hutch_exec_result;
struct parked;
struct job;
struct task;

/* The experimental client capability that asks for structuredContent and
 * the tools' outputSchema (doc/code-mode.md, "What the model reads").  Without it a
 * result is its content blocks alone: several agent clients hand the model
 * JSON.stringify(structuredContent) instead of the content when both are
 * there, and drop the images, so by default there is only content. */
#define HUTCH_MCP_CAP_STRUCTURED "hutch/structured-content"

struct hutch_mcp {
    struct hutch_mcp_opts o;
    struct hutch_bridge *bridge;
    struct hutch_direct_opts direct;
    struct hutch_direct_watch *watch;
    pthread_mutex_t sessions_mu; /* sessions; a session's send under it */
    struct hutch_mcp_session *sessions;
    struct hutch_resources *resources; /* result files behind resource_links */
    /* 2026-07-28 questions (see "parked executions" below).  park_mu is
     * taken before any session's mu or send_mu, never after. */
    pthread_mutex_t park_mu;
    pthread_cond_t park_cond; /* a detached job ended (hutch_mcp_free waits) */
    struct parked *parked;    /* questions waiting for their answer */
    struct job *detached;     /* jobs answering no request right now */
    int stopping;
    struct task *tasks; /* newest first */
    unsigned ntasks;
};

struct inflight {
    struct inflight *next;
    char *key; /* the request id as JSON text */
    atomic_int cancel;
};

struct hutch_mcp_session {
    struct hutch_mcp *m;
    hutch_mcp_send_fn send;
    void *arg;
    char principal[HUTCH_MAX_PRINCIPAL_NAME + 1];
    char id[33];
    char protocol[32];
    int initialized;
    pthread_mutex_t mu;      /* inflight, workers */
    pthread_mutex_t send_mu; /* one send at a time */
    pthread_cond_t idle;
    int workers;
    struct inflight *inflight;
    struct hutch_mcp_session *next; /* m->sessions */
    /* Closed while workers ran (hutch_mcp_session_close): the last one
     * frees the session and calls gone(gone_arg).  Under mu. */
    int closing;
    void (*gone)(void *arg);
    void *gone_arg;
    /* The policy's questions (on_tool_call's "ask") asked of a 2025
     * client as elicitation/create during the tools/call (approval.h);
     * can_elicit: its initialize declared the elicitation capability. */
    struct hutch_asks *asks;
    int can_elicit;
    /* Its initialize declared HUTCH_MCP_CAP_STRUCTURED (2025 era). */
    int structured;
};

/* --- mcp_session.c -------------------------------------------------------- */

void mcp_send_msg(struct hutch_mcp_session *s, void *stream, cJSON *msg, int last);
void mcp_send_result(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                     cJSON *result);
void mcp_send_error(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                    int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Whether client capabilities (an initialize's, a 2026 request's) ask for
 * structuredContent: HUTCH_MCP_CAP_STRUCTURED under "experimental". */
int mcp_caps_structured(const cJSON *caps);
/* Whether the client of this request asked for structuredContent: the
 * session's initialize (2025), the request's own capabilities (2026). */
int mcp_wants_structured(const struct hutch_mcp_session *s, const cJSON *params,
                         int modern);
/* No worker left: nothing refers to s. */
void mcp_session_destroy(struct hutch_mcp_session *s);

/* --- mcp_tools.c ---------------------------------------------------------- */

/* The tools; `structured`: with their outputSchema. */
cJSON *mcp_tool_defs(const struct hutch_mcp *m, const char *principal, int structured);
cJSON *mcp_text_result(const char *text, int is_error);
/* A result for the model: content blocks; structuredContent too when the
 * client asked for it (`structured`). */
cJSON *mcp_exec_result(struct hutch_mcp *m, struct hutch_exec_result *res,
                       const char *principal, int trace, int structured);
cJSON *mcp_search_tools(struct hutch_mcp *m, const char *principal, const cJSON *args,
                        int structured);

/* --- mcp_exec.c ----------------------------------------------------------- */

/* execute_code (or a direct tool, `direct`) on a worker: its result is the
 * response to (s, stream, id). */
void mcp_start_job(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params, const cJSON *args, const char *direct,
                   int modern);
/* Whether a 2026 request declared the tasks extension. */
int mcp_wants_tasks(const cJSON *params);
/* execute_code as a task; 0, or -EAGAIN: run it as a plain call. */
int mcp_start_task(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params, const cJSON *args);
/* execute_code with a requestState: the answer to a parked question. */
void mcp_on_answer(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const cJSON *params);
/* tasks/get, tasks/update, tasks/cancel. */
void mcp_on_tasks(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                  const char *meth, const cJSON *params);
/* hutch_mcp_free: parked questions unanswered, detached executions
 * cancelled and waited for, task records freed. */
void mcp_park_stop_all(struct hutch_mcp *m);

#endif
