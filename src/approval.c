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
#include "buf.h"
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

/* n back to the start of the UTF-8 character it is in (s[n] a
 * continuation byte: not a place to cut). */
static size_t char_start(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* s[0..n) escaped onto b (cut mode keeps b bounded whatever it holds). */
static int add_escaped(struct hutch_buf *b, const char *s, size_t n)
{
    char *piece = strndup(s, n),
         *e = piece ? hutch_text_escape(piece, HUTCH_ESCAPE_TEXT) : NULL;
    int r = e ? hutch_buf_appends(b, e) : -ENOMEM;
    free(piece);
    free(e);
    return r;
}

/* One line, "  text", within `share` bytes of text: its head (two thirds)
 * and its tail (a third) when it is longer, saying what was left out. */
static int add_line(struct hutch_buf *b, const char *text, size_t share)
{
    size_t n = strlen(text), head, tail;
    int r = hutch_buf_appends(b, "  ");

    if (r == 0 && n <= share)
        return add_escaped(b, text, n) || hutch_buf_appends(b, "\n") ? -ENOMEM : 0;
    head = char_start(text, share * 2 / 3);
    tail = char_start(text, n - (share - share * 2 / 3));
    if (tail < head)
        tail = head;
    if (r == 0)
        r = add_escaped(b, text, head);
    if (r == 0)
        r = hutch_buf_appendf(b, "…[%zu bytes left out]…", tail - head);
    if (r == 0)
        r = add_escaped(b, text + tail, n - tail);
    return r == 0 ? hutch_buf_appends(b, "\n") : r;
}

/* "name: value" of one argument (its key as it is when it is a plain
 * identifier, else as a JSON string).  Caller frees. */
static char *arg_line(const cJSON *a)
{
    const char *k = a->string;
    int plain = k && *k && !(*k >= '0' && *k <= '9');
    char *key = NULL, *v = cJSON_PrintUnformatted(a), *line = NULL;
    size_t n;

    for (const char *c = k; plain && *c; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.';
    if (k && !plain) {
        cJSON *ks = cJSON_CreateString(k);
        key = ks ? cJSON_PrintUnformatted(ks) : NULL;
        cJSON_Delete(ks);
    }
    if (v && (!k || plain || key)) {
        n = (k ? strlen(key ? key : k) + 2 : 0) + strlen(v) + 1;
        if ((line = malloc(n)))
            snprintf(line, n, "%s%s%s", k ? (key ? key : k) : "", k ? ": " : "", v);
    }
    free(key);
    free(v);
    return line;
}

char *hutch_approval_args_text(const cJSON *args)
{
    /* Lines within their shares, plus the marks and the last line. */
    struct hutch_buf b = HUTCH_BUF_INIT(HUTCH_APPROVAL_ARGS_TEXT * 5);
    size_t n = 0, shown, share, rest_bytes = 0, i = 0;
    const cJSON *a;
    int r = 0;

    if (!cJSON_IsObject(args)) { /* not a tool's arguments: the value whole */
        char *v = args ? cJSON_PrintUnformatted(args) : NULL;
        r = v ? add_line(&b, v, HUTCH_APPROVAL_ARGS_TEXT) : args ? -ENOMEM : 0;
        free(v);
        if (!args)
            r = hutch_buf_appends(&b, "  (none)\n");
        return r < 0 ? (hutch_buf_free(&b), NULL) : hutch_buf_steal(&b, NULL);
    }
    cJSON_ArrayForEach(a, args) n++;
    if (n == 0)
        r = hutch_buf_appends(&b, "  (none)\n");
    shown = n < HUTCH_APPROVAL_ARGS_TEXT / HUTCH_APPROVAL_ARG_MIN
                ? n
                : HUTCH_APPROVAL_ARGS_TEXT / HUTCH_APPROVAL_ARG_MIN;
    share = n ? HUTCH_APPROVAL_ARGS_TEXT / (shown ? shown : 1) : 0;
    cJSON_ArrayForEach(a, args)
    {
        char *line = r == 0 ? arg_line(a) : NULL;
        if (r == 0 && !line)
            r = -ENOMEM;
        else if (r == 0 && i < shown)
            r = add_line(&b, line, share);
        else if (r == 0)
            rest_bytes += strlen(line);
        free(line);
        i++;
    }
    if (r == 0 && n > shown)
        r = hutch_buf_appendf(&b, "  … and %zu more argument%s (%zu bytes) left out\n",
                              n - shown, n - shown == 1 ? "" : "s", rest_bytes);
    if (r < 0) {
        hutch_buf_free(&b);
        return NULL;
    }
    return hutch_buf_steal(&b, NULL);
}

cJSON *hutch_approval_params(const char *tool, const char *question, const cJSON *args)
{
    char *shown = hutch_approval_args_text(args), *message = NULL;
    char *qtool = hutch_text_escape(tool, HUTCH_ESCAPE_TEXT);
    cJSON *params = cJSON_CreateObject(), *schema, *props, *approve;
    size_t n = cJSON_GetArraySize(args);

    if (shown && qtool) {
        size_t len = strlen(question) + strlen(qtool) + strlen(shown) + 128;
        if ((message = malloc(len)) && cJSON_IsObject(args) && n == 0)
            snprintf(message, len, "%s\n\nA program asks to call %s with no arguments.",
                     question, qtool);
        else if (message)
            snprintf(message, len, "%s\n\nA program asks to call %s with %s:\n%s",
                     question, qtool,
                     !cJSON_IsObject(args) ? "the arguments"
                     : n == 1              ? "1 argument"
                                           : "these arguments",
                     shown);
    }
    free(shown);
    free(qtool);
    if (!message) {
        cJSON_Delete(params);
        return NULL;
    }
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
        free(message);
        cJSON_Delete(params);
        return NULL;
    }
    free(message);
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
