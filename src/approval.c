/* approval.c — the requests hutch sends an MCP client and waits on, and
 * the approval question built on them (approval.h).  What lives here: the
 * table of pending requests of one session, and the elicitation/create
 * that asks the user about a tool call.  Not here: deciding that a call
 * needs asking (policy.c, govern.c), sending bytes (mcp_server.c). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval.h"
#include "caps.h"
#include "govern.h"
#include "util.h"

/* One request waiting for its response; lives on the waiter's stack. */
struct ask {
    struct ask *next;
    char id[32];
    bool done;
    cJSON *reply; /* the whole response */
    pthread_cond_t cond;
};

struct hutch_asks {
    pthread_mutex_t mu;
    struct ask *pending;
    unsigned long next_id;
    bool closed;
};

struct hutch_asks *hutch_asks_new(void)
{
    struct hutch_asks *a = calloc(1, sizeof(*a));
    if (a)
        pthread_mutex_init(&a->mu, NULL);
    return a;
}

void hutch_asks_free(struct hutch_asks *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    free(a);
}

void hutch_asks_close(struct hutch_asks *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->closed = true;
    for (struct ask *q = a->pending; q; q = q->next) {
        q->done = true;
        pthread_cond_signal(&q->cond);
    }
    pthread_mutex_unlock(&a->mu);
}

int hutch_asks_response(struct hutch_asks *a, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    int taken = 0;

    if (!a || !cJSON_IsString(id) || cJSON_GetObjectItemCaseSensitive(msg, "method"))
        return 0;
    pthread_mutex_lock(&a->mu);
    for (struct ask *q = a->pending; q; q = q->next) {
        if (q->done || strcmp(q->id, id->valuestring))
            continue;
        q->reply = cJSON_Duplicate(msg, 1);
        q->done = true;
        pthread_cond_signal(&q->cond);
        taken = 1;
        break;
    }
    pthread_mutex_unlock(&a->mu);
    return taken;
}

static void unlink_ask(struct hutch_asks *a, struct ask *q)
{
    for (struct ask **p = &a->pending; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
}

int hutch_asks_request(struct hutch_asks *a, hutch_asks_send_fn send, void *send_arg,
                       const char *method, cJSON *params, unsigned ms, cJSON **result,
                       struct hutch_err *err)
{
    struct ask q = {0};
    cJSON *msg = cJSON_CreateObject(), *e, *res;
    uint64_t deadline = hutch_now_ms() + ms;
    int r = 0;

    *result = NULL;
    if (!msg) {
        cJSON_Delete(params);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    hutch_cond_init_mono(&q.cond);

    pthread_mutex_lock(&a->mu);
    if (a->closed) {
        pthread_mutex_unlock(&a->mu);
        cJSON_Delete(msg);
        cJSON_Delete(params);
        pthread_cond_destroy(&q.cond);
        return hutch_err_set(err, -ECONNRESET, "the client's session has ended");
    }
    snprintf(q.id, sizeof(q.id), "hutch-ask-%lu", ++a->next_id);
    q.next = a->pending;
    a->pending = &q;
    pthread_mutex_unlock(&a->mu);

    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "id", q.id);
    cJSON_AddStringToObject(msg, "method", method);
    if (params)
        cJSON_AddItemToObject(msg, "params", params);
    r = send(send_arg, msg);

    pthread_mutex_lock(&a->mu);
    if (r < 0) {
        hutch_err_set(err, r, "cannot send %s to the client", method);
    } else {
        while (!q.done) {
            if (hutch_cond_wait_until(&q.cond, &a->mu, deadline) == ETIMEDOUT &&
                !q.done)
                break;
        }
        if (!q.done)
            r = hutch_err_set(err, -ETIMEDOUT,
                              "the client did not answer %s within %u ms", method, ms);
        else if (!q.reply)
            r = hutch_err_set(err, -ECONNRESET, "the client's session ended during %s",
                              method);
    }
    unlink_ask(a, &q);
    pthread_mutex_unlock(&a->mu);
    pthread_cond_destroy(&q.cond);
    if (r < 0) {
        cJSON_Delete(q.reply);
        return r;
    }
    e = cJSON_GetObjectItemCaseSensitive(q.reply, "error");
    res = cJSON_GetObjectItemCaseSensitive(q.reply, "result");
    if (e || !cJSON_IsObject(res)) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        r = hutch_err_set(err, -EREMOTEIO, "the client answered %s with %s%.200s",
                          method, e ? "an error: " : "no result object",
                          cJSON_IsString(m) ? m->valuestring : "");
    } else {
        *result = cJSON_DetachItemViaPointer(q.reply, res);
    }
    cJSON_Delete(q.reply);
    return r;
}

cJSON *hutch_approval_params(const char *tool, const char *question, const cJSON *args)
{
    char *shown = args ? cJSON_PrintUnformatted(args) : NULL, message[1024];
    cJSON *params = cJSON_CreateObject(), *schema, *props, *approve;

    snprintf(message, sizeof(message),
             "%s\n\nA program asks to call %s with the arguments %.300s%s", question,
             tool, shown ? shown : "{}", shown && strlen(shown) > 300 ? "…" : "");
    free(shown);
    schema = cJSON_AddObjectToObject(params, "requestedSchema");
    props = cJSON_AddObjectToObject(schema, "properties");
    approve = cJSON_AddObjectToObject(props, "approve");
    if (!cJSON_AddStringToObject(params, "message", message) ||
        !cJSON_AddStringToObject(schema, "type", "object") || !approve ||
        !cJSON_AddStringToObject(approve, "type", "boolean") ||
        !cJSON_AddStringToObject(approve, "title", "Allow this call") ||
        !cJSON_AddItemToObject(
            schema, "required",
            cJSON_CreateStringArray((const char *[]){"approve"}, 1))) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

int hutch_approval_answer(const cJSON *res, char *why, size_t why_len)
{
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(res, "action");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(content, "approve");

    if (cJSON_IsString(action) && !strcmp(action->valuestring, "accept"))
        return cJSON_IsTrue(v) ? HUTCH_ANSWER_APPROVE : HUTCH_ANSWER_DECLINE;
    if (cJSON_IsString(action) && !strcmp(action->valuestring, "decline"))
        return HUTCH_ANSWER_DECLINE;
    if (cJSON_IsString(action) && !strcmp(action->valuestring, "cancel"))
        return HUTCH_ANSWER_CANCEL;
    snprintf(why, why_len, "the client's answer has no valid \"action\"");
    return -EPROTO;
}

int hutch_asks_approval(struct hutch_asks *a, hutch_asks_send_fn send, void *send_arg,
                        const char *tool, const char *question, const cJSON *args,
                        unsigned ms, char *why, size_t why_len)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    cJSON *params = hutch_approval_params(tool, question, args), *res = NULL;
    int r;

    if (!params) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    r = hutch_asks_request(a, send, send_arg, "elicitation/create", params, ms, &res,
                           &err);
    if (r == -ETIMEDOUT)
        return HUTCH_ANSWER_TIMEOUT;
    if (r < 0) {
        snprintf(why, why_len, "%s", err.msg);
        return r;
    }
    r = hutch_approval_answer(res, why, why_len);
    cJSON_Delete(res);
    return r;
}
