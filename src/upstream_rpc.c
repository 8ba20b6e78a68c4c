/* upstream_rpc.c — the JSON-RPC of hutch as an MCP client, whatever the
 * transport: the messages hutch sends an upstream (requests, with the
 * 2026-07-28 _meta; its answer to a request from a server), JSON-RPC ids,
 * the calls waiting for their response, the budget a request's text is
 * charged to, text made fit for a log, and this thread's answerer of an
 * upstream's questions (hutch_upstreams_set_elicitor, upstream.h).
 *
 * The bottom of the upstream_*.c files: upstream.c, its transports
 * (upstream_stdio.c, upstream_http.c), the servers file and the
 * x-mcp-header code call it, and it calls none of them.  What a transport
 * hands up to upstream.c (a notification, an expired HTTP session) goes
 * through the struct up_events upstream.c gives it (upstream_int.h), so
 * that the transports sit under upstream.c too.
 *
 * No state of its own but the elicitor, which is per thread; pending calls
 * are under their server's lock (upstream.c's rules).
 *
 * Not here: a server's state and lifecycle (upstream.c); the transports. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "jsonrpc.h"
#include "log.h"
#include "upstream.h"
#include "upstream_int.h"
#include "util.h"

/* This thread's answerer of upstream questions (hutch_upstreams_set_elicitor). */
static _Thread_local const struct hutch_elicitor *elicitor;

void hutch_upstreams_set_elicitor(const struct hutch_elicitor *e)
{
    elicitor = e && e->fn ? e : NULL;
}

const struct hutch_elicitor *up_elicitor(void)
{
    return elicitor;
}

/* --- small helpers ------------------------------------------------------ */

/* Untrusted text made fit for a log line or an error message: control
 * characters become '?', at most cap - 1 bytes, never a cut UTF-8
 * sequence. */
void up_clean_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = 0;

    if (!cap)
        return;
    if (len > cap - 1) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[n++] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? '?' : (char)ch;
    }
    dst[n] = '\0';
}
void up_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}
/* A JSON-RPC id we could have sent: a positive integer. */
bool up_rpc_id(const cJSON *id, int64_t *out)
{
    double d;

    if (!cJSON_IsNumber(id))
        return false;
    d = id->valuedouble;
    if (!(d >= 1 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
        return false;
    *out = (int64_t)d;
    return true;
}
/* {"jsonrpc": "2.0", "id"?: id, "method"?: method, "params"?: params}.
 * An object's members are referenced, not copied (a tool call's arguments
 * may be most of an execution's memory budget, and a copy of them would
 * be held outside it): the message is printed and freed while the caller
 * still holds params.  Its _meta is copied, since up_request_msg changes
 * it. */
cJSON *up_rpc_new(int64_t id, const char *method, const cJSON *params)
{
    cJSON *m = cJSON_CreateObject(), *p = NULL;
    const cJSON *it;

    if (!m || !cJSON_AddStringToObject(m, "jsonrpc", "2.0") ||
        (id > 0 && !cJSON_AddNumberToObject(m, "id", (double)id)) ||
        (method && !cJSON_AddStringToObject(m, "method", method)))
        goto fail;
    if (params && !cJSON_IsObject(params)) {
        p = cJSON_Duplicate(params, true);
        if (!p || !cJSON_AddItemToObject(m, "params", p)) {
            cJSON_Delete(p);
            goto fail;
        }
    } else if (params) {
        p = cJSON_AddObjectToObject(m, "params");
        if (!p)
            goto fail;
        cJSON_ArrayForEach(it, params)
        {
            bool added;
            if (!it->string)
                continue;
            if (!strcmp(it->string, "_meta")) {
                cJSON *dup = cJSON_Duplicate(it, true);
                added = dup && cJSON_AddItemToObject(p, it->string, dup);
                if (!added)
                    cJSON_Delete(dup);
            } else {
                added = cJSON_AddItemReferenceToObject(p, it->string, (cJSON *)it);
            }
            if (!added)
                goto fail;
        }
    }
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

int up_charge_text(const struct server *s, const char *what, const char *text,
                   size_t *charged, struct hutch_err *err)
{
    struct hutch_budget *b = hutch_budget_current();
    size_t n = strlen(text) + 1;
    char why[600];
    int br;

    *charged = 0;
    if (!b)
        return 0;
    br = hutch_budget_take(b, n);
    if (br < 0)
        return hutch_err_set(err, -E2BIG, "%s for upstream %s: its %zu bytes are %s",
                             what, s->name, n,
                             hutch_budget_why(b, br, why, sizeof(why)));
    *charged = n;
    return 0;
}

cJSON *up_request_msg(struct server *s, int64_t id, const char *method,
                      const cJSON *params)
{
    cJSON *m = up_rpc_new(id, method, params), *p, *meta, *ci, *caps;

    if (!m || id <= 0 || era_of(s) == ERA_LEGACY)
        return m;
    p = cJSON_GetObjectItemCaseSensitive(m, "params");
    if (!p)
        p = cJSON_AddObjectToObject(m, "params");
    if (!cJSON_IsObject(p))
        goto fail;
    meta = cJSON_GetObjectItemCaseSensitive(p, "_meta");
    if (!meta)
        meta = cJSON_AddObjectToObject(p, "_meta");
    if (!cJSON_IsObject(meta))
        goto fail;
    cJSON_DeleteItemFromObjectCaseSensitive(meta, META_VERSION);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, META_CAPABILITIES);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, META_CLIENT_INFO);
    /* hutch asks nothing of an upstream: no sampling, no elicitation, no
     * roots (a question from an upstream is refused, doc/servers.md,
     * "Upstream servers of either MCP era"). */
    ci = cJSON_AddObjectToObject(meta, META_CLIENT_INFO);
    caps = cJSON_AddObjectToObject(meta, META_CAPABILITIES);
    /* Elicitation only where someone can answer (an upstream's question
     * goes to hutch's own client: hutch_upstreams_set_elicitor). */
    if (caps && elicitor && !strcmp(method, "tools/call"))
        cJSON_AddObjectToObject(caps, "elicitation");
    if (!cJSON_AddStringToObject(meta, META_VERSION, MODERN_VERSION) || !caps || !ci ||
        !cJSON_AddStringToObject(ci, "name", s->u->client_name) ||
        !cJSON_AddStringToObject(ci, "version", PACKAGE_VERSION))
        goto fail;
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

const char *up_request_name(const char *method, const cJSON *params)
{
    const cJSON *v = NULL;
    if (!strcmp(method, "tools/call") || !strcmp(method, "prompts/get"))
        v = get(params, "name");
    else if (!strcmp(method, "resources/read"))
        v = get(params, "uri");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* --- what upstreams send us, whatever the transport --------------------- */

void up_on_notification(struct server *s, const char *method, const cJSON *params)
{
    if (!strcmp(method, "notifications/tools/list_changed")) {
        pthread_mutex_lock(&s->lock);
        s->list_changed = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    } else if (!strcmp(method, "notifications/message")) {
        const cJSON *level = get(params, "level"), *logger = get(params, "logger");
        const cJSON *data = get(params, "data");
        enum hutch_log_level lv = HUTCH_LOG_WARN;
        char text[1000], from[64] = "";
        char *printed = NULL;
        size_t flen;

        if (cJSON_IsString(level)) {
            if (!strcmp(level->valuestring, "debug"))
                lv = HUTCH_LOG_DEBUG;
            else if (!strcmp(level->valuestring, "info") ||
                     !strcmp(level->valuestring, "notice"))
                lv = HUTCH_LOG_INFO;
        }
        if (lv > hutch_log_get_level())
            return;
        if (cJSON_IsString(logger))
            up_clean_text(from, sizeof(from) - 2, logger->valuestring,
                          strlen(logger->valuestring));
        flen = strlen(from);
        if (flen)
            snprintf(from + flen, sizeof(from) - flen, ": ");
        if (cJSON_IsString(data)) {
            up_clean_text(text, sizeof(text), data->valuestring,
                          strlen(data->valuestring));
        } else {
            printed = data ? cJSON_PrintUnformatted(data) : NULL;
            up_clean_text(text, sizeof(text), printed ? printed : "",
                          printed ? strlen(printed) : 0);
            free(printed);
        }
        hutch_log(lv, s->who, "%s%s", from, text);
    } else {
        char m[80];
        up_clean_text(m, sizeof(m), method, strlen(method));
        hutch_log(HUTCH_LOG_DEBUG, s->who, "ignoring notification %s", m);
    }
}

/* Our answer to a request from the server: ping gets {}, the rest -32601
 * (we declare no client capabilities).  NULL when there is nothing to
 * answer. */
cJSON *up_answer_request(struct server *s, const char *method, const cJSON *id)
{
    cJSON *m, *e;
    char shown[80];

    if (!cJSON_IsString(id) && !cJSON_IsNumber(id))
        return NULL;
    m = cJSON_CreateObject();
    if (!m || !cJSON_AddStringToObject(m, "jsonrpc", "2.0"))
        goto fail;
    cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, false));
    if (!strcmp(method, "ping")) {
        if (!cJSON_AddObjectToObject(m, "result"))
            goto fail;
        return m;
    }
    up_clean_text(shown, sizeof(shown), method, strlen(method));
    hutch_log(HUTCH_LOG_DEBUG, s->who, "refusing request %s", shown);
    e = cJSON_AddObjectToObject(m, "error");
    if (!e || !cJSON_AddNumberToObject(e, "code", HUTCH_RPC_METHOD_NOT_FOUND) ||
        !cJSON_AddStringToObject(e, "message", "Method not found"))
        goto fail;
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

/* Under the server's lock. */
void up_fail_pending_locked(struct server *s, int code, const char *why)
{
    for (struct pending *p = s->pending; p; p = p->next) {
        if (p->done)
            continue;
        p->done = true;
        p->code = code;
        snprintf(p->why, sizeof(p->why), "%s", why);
        if (!p->done_fn)
            pthread_cond_signal(&p->cond);
        else if (!p->starting)
            up_child_poke(p->child); /* its I/O thread tells the owner */
    }
}
