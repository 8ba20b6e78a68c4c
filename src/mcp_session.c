/* mcp_session.c — a session of hutch's MCP server, under dispatch: its
 * life (made by a transport, quit, closed while its workers finish,
 * destroyed by the last), sending on it (one message at a time through the
 * transport's send function), and what its client asked for
 * (structuredContent).  mcp_server.c (dispatch) and mcp_exec.c (the
 * executions) both call it; it calls neither, so dispatch sits above the
 * executions and the arrows between the mcp_*.c files run one way.
 *
 * Locks: a session's mu guards its in-flight list, worker count and
 * closing state, send_mu one send at a time; m->sessions_mu the server's
 * list of sessions (mcp_int.h gives the order).
 *
 * Not here: dispatch, initialize and the list of sessions' notifications
 * (mcp_server.c); executions (mcp_exec.c); the JSON-RPC envelope of an
 * error (mcp_era.c). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "log.h"
#include "mcp_era.h"
#include "mcp_int.h"
#include "util.h"

struct hutch_mcp_session *hutch_mcp_session_new(struct hutch_mcp *m,
                                                hutch_mcp_send_fn send, void *arg,
                                                const char *principal)
{
    struct hutch_mcp_session *s = calloc(1, sizeof(*s));
    char a[17], b[17];
    if (!s)
        return NULL;
    s->m = m;
    s->send = send;
    s->arg = arg;
    snprintf(s->principal, sizeof(s->principal), "%s", principal ? principal : "local");
    hutch_random_id(a);
    hutch_random_id(b);
    snprintf(s->id, sizeof(s->id), "%s%s", a, b);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->send_mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->asks = hutch_asks_new(); /* NULL: questions cannot be asked here */
    pthread_mutex_lock(&m->sessions_mu);
    s->next = m->sessions;
    m->sessions = s;
    pthread_mutex_unlock(&m->sessions_mu);
    return s;
}

/* Out of m->sessions (no list_changed for it), its executions cancelled. */
static void session_quit(struct hutch_mcp_session *s)
{
    pthread_mutex_lock(&s->m->sessions_mu);
    for (struct hutch_mcp_session **p = &s->m->sessions; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&s->m->sessions_mu);
    pthread_mutex_lock(&s->mu);
    for (struct inflight *f = s->inflight; f; f = f->next)
        atomic_store(&f->cancel, 1);
    pthread_mutex_unlock(&s->mu);
    /* A question waiting for this client is not answered now: its call is
     * denied and the execution goes on to its end. */
    hutch_asks_close(s->asks);
}

/* No worker left: nothing refers to s. */
void mcp_session_destroy(struct hutch_mcp_session *s)
{
    void (*gone)(void *) = s->gone;
    void *arg = s->gone_arg;

    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->send_mu);
    pthread_cond_destroy(&s->idle);
    hutch_asks_free(s->asks);
    free(s);
    if (gone)
        gone(arg);
}

void hutch_mcp_session_free(struct hutch_mcp_session *s)
{
    if (!s)
        return;
    session_quit(s);
    pthread_mutex_lock(&s->mu);
    while (s->workers > 0)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
    mcp_session_destroy(s);
}

void hutch_mcp_session_close(struct hutch_mcp_session *s, void (*gone)(void *arg),
                             void *arg)
{
    int now;

    session_quit(s);
    pthread_mutex_lock(&s->mu);
    s->gone = gone;
    s->gone_arg = arg;
    s->closing = 1;
    now = s->workers == 0;
    pthread_mutex_unlock(&s->mu);
    if (now)
        mcp_session_destroy(s);
}

const char *hutch_mcp_session_id(const struct hutch_mcp_session *s)
{
    return s->id;
}

const char *hutch_mcp_session_protocol(const struct hutch_mcp_session *s)
{
    return s->protocol[0] ? s->protocol : NULL;
}

/* --- sending ----------------------------------------------------------------- */

void mcp_send_msg(struct hutch_mcp_session *s, void *stream, cJSON *msg, int last)
{
    char *text = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    if (!text) {
        hutch_error("out of memory serialising a response");
        return;
    }
    pthread_mutex_lock(&s->send_mu);
    s->send(s->arg, stream, text, strlen(text), last);
    pthread_mutex_unlock(&s->send_mu);
    free(text);
}

void mcp_send_result(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                     cJSON *result)
{
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddItemToObject(msg, "id", cJSON_Duplicate(id, 1));
    cJSON_AddItemToObject(msg, "result", result);
    mcp_send_msg(s, stream, msg, 1);
}

void mcp_send_error(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                    int code, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    mcp_send_msg(s, stream, hutch_mcp_error_response(id, code, text, NULL), 1);
}

int mcp_caps_structured(const cJSON *caps)
{
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(caps, "experimental"),
        HUTCH_MCP_CAP_STRUCTURED));
}

int mcp_wants_structured(const struct hutch_mcp_session *s, const cJSON *params,
                         int modern)
{
    if (!modern)
        return s->structured;
    return mcp_caps_structured(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "_meta"), HUTCH_MCP_META_CLIENT_CAPS));
}
