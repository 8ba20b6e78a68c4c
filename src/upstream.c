/* upstream.c — hutch as an MCP client of the user's own servers
 * ("upstreams"): a server's state, what upstreams send whatever the
 * transport, the initialize / tools/list lifecycle, restarts with backoff,
 * tools/call multiplexed by JSON-RPC id, and the public API (upstream.h).
 * The servers file, stdio children and streamable HTTP live beside it in
 * upstream_servers.c, upstream_stdio.c and upstream_http.c, the JSON-RPC
 * they all speak under them in upstream_rpc.c; what they share is
 * upstream_int.h.  This file calls them; they call it only through the
 * struct up_events it gives them (u->ev).  The rules below hold for all
 * of them.
 *
 * Threads.  Every server has a supervisor thread: it spawns or connects,
 * initializes, re-reads tools on list_changed, and restarts with backoff.
 * A stdio call costs no thread hop on the way out: the caller's thread
 * writes its request to the child's stdin itself, as much as the pipe takes
 * without blocking, and waits on its own condition variable.  A stdio child
 * also has an I/O thread, the only reader of its stdout and stderr: it
 * hands each response straight to the caller waiting for it, and writes
 * what the pipe did not take at once, so a child that stops reading its
 * stdin cannot block a caller past its timeout.  A call started with
 * hutch_upstreams_call_start has no caller waiting: the I/O thread runs
 * its done function itself (no lock held), watches its timeout, and ends
 * it when the child goes.  HTTP calls are plain
 * blocking POSTs in the caller's thread.  Our threads block every signal
 * (hutch's main thread takes them); a write to a child's stdin raises no
 * SIGPIPE in any thread (writev_quiet).
 *
 * Locks: u->lock only guards start-up progress and is never held while a
 * server's lock is taken; a server's lock guards its state, tools, child,
 * pending calls and HTTP session.  A child's wlock guards its stdin and the
 * bytes queued for it; it is taken alone or inside the server's lock, never
 * the other way round.  A writer takes it before leaving the server's lock
 * under which it found s->child, and a teardown takes it once after
 * unpublishing the child, so a child is never freed under a writer.
 *
 * Not here: what hutch serves to agents (mcp_server.c), searching tools
 * (catalog.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "curl_lib.h"
#include "jsonrpc.h"
#include "log.h"
#include "upstream.h"
#include "upstream_int.h"
#include "upstream_parse.h"
#include "util.h"

/* --- state -------------------------------------------------------------- */

static void note_settled(struct server *s, bool first)
{
    if (!first)
        return;
    pthread_mutex_lock(&s->u->lock);
    s->u->settled++;
    pthread_cond_broadcast(&s->u->cond);
    pthread_mutex_unlock(&s->u->lock);
}

/* Leave "ready" (or stay out of it) with a reason. */
static void set_down(struct server *s, enum state st, const char *why)
{
    bool was_ready, first;

    pthread_mutex_lock(&s->lock);
    was_ready = s->state == ST_READY;
    /* A server that keeps failing to come back stays "failed". */
    if (st == ST_RESTARTING && s->state == ST_FAILED)
        st = ST_FAILED;
    s->state = st;
    snprintf(s->error, sizeof(s->error), "%s", why);
    cJSON_Delete(s->tools);
    s->tools = NULL;
    first = !s->settled && st == ST_FAILED;
    if (first)
        s->settled = true;
    pthread_mutex_unlock(&s->lock);
    if (was_ready)
        gen_bump(s->u);
    note_settled(s, first);
}

static void set_ready(struct server *s, cJSON *tools)
{
    bool first;

    pthread_mutex_lock(&s->lock);
    cJSON_Delete(s->tools);
    s->tools = tools;
    s->state = ST_READY;
    s->error[0] = '\0';
    s->ready_since = hutch_now_ms();
    first = !s->settled;
    s->settled = true;
    pthread_mutex_unlock(&s->lock);
    gen_bump(s->u);
    note_settled(s, first);
}

/* Sleep the backoff, or less when hutch stops. */
static void wait_backoff(struct server *s, unsigned ms)
{
    uint64_t deadline = hutch_now_ms() + ms;

    pthread_mutex_lock(&s->lock);
    while (!stopping(s->u) &&
           hutch_cond_wait_until(&s->cond, &s->lock, deadline) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&s->lock);
}

/* Turn a response into the result object, or an error. */
/* 2026-07-28's resultType: absent or "complete" is a result; hutch asks
 * for no input, so "input_required" (a question for the user) is refused
 * with what the server wanted, and anything else is an error. */
static int result_type_ok(struct server *s, const char *what, const cJSON *res,
                          struct hutch_err *err)
{
    const cJSON *rt = get(res, "resultType");
    char shown[64];

    if (!rt || (cJSON_IsString(rt) && !strcmp(rt->valuestring, "complete")))
        return 0;
    if (cJSON_IsString(rt) && !strcmp(rt->valuestring, "input_required") &&
        up_elicitor() && !strncmp(what, "tools/call", 10))
        return 0; /* hutch_upstreams_call asks and calls again */
    if (cJSON_IsString(rt) && !strcmp(rt->valuestring, "input_required"))
        return hutch_err_set(err, -ENOTSUP,
                             "upstream %s needs input from the user to answer %s "
                             "(resultType \"input_required\"); hutch does not pass "
                             "an upstream's questions on",
                             s->name, what);
    up_clean_text(shown, sizeof(shown), cJSON_IsString(rt) ? rt->valuestring : "",
                  cJSON_IsString(rt) ? strlen(rt->valuestring) : 0);
    return hutch_err_set(err, -EPROTO, "upstream %s answered %s with resultType \"%s\"",
                         s->name, what, cJSON_IsString(rt) ? shown : "(not a string)");
}

static int take_result(struct server *s, const char *what, cJSON *reply, cJSON **result,
                       struct hutch_err *err)
{
    cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
    cJSON *res = cJSON_GetObjectItemCaseSensitive(reply, "result");
    int r = 0;

    if (e) {
        const cJSON *msg = get(e, "message"), *code = get(e, "code");
        char text[HUTCH_ERR_MSG];
        if (cJSON_IsString(msg) && msg->valuestring[0]) {
            up_clean_text(text, sizeof(text), msg->valuestring,
                          strlen(msg->valuestring));
            r = hutch_err_set(err, -EREMOTEIO, "%s", text);
        } else {
            r = hutch_err_set(err, -EREMOTEIO, "upstream %s answered %s with error %d",
                              s->name, what,
                              cJSON_IsNumber(code) ? (int)code->valuedouble : 0);
        }
    } else if (!cJSON_IsObject(res)) {
        r = hutch_err_set(err, -EPROTO,
                          "upstream %s answered %s with a result that is not an object",
                          s->name, what);
    } else if ((r = result_type_ok(s, what, res, err)) < 0) {
        ;
    } else {
        *result = cJSON_DetachItemViaPointer(reply, res);
    }
    cJSON_Delete(reply);
    return r;
}

/* --- the lifecycle, whatever the transport ------------------------------ */

static int srv_request(struct server *s, const char *method, const cJSON *params,
                       uint64_t deadline, unsigned budget, const char *what,
                       bool may_reinit, cJSON **result, struct hutch_err *err)
{
    cJSON *reply = NULL;
    int r;

    if (s->cfg.tr == TR_STDIO)
        r = up_stdio_request(s, method, params, deadline, budget, what, &reply, err);
    else
        r = up_http_request(s, method, params, deadline, budget, what, may_reinit,
                            &reply, err);
    if (r < 0)
        return r;
    return take_result(s, what, reply, result, err);
}

/* The same, for hutch's own requests: a JSON-RPC error gets context. */
static int own_request(struct server *s, const char *method, const cJSON *params,
                       uint64_t deadline, unsigned budget, bool may_reinit,
                       cJSON **result, struct hutch_err *err)
{
    char msg[HUTCH_ERR_MSG];
    int r = srv_request(s, method, params, deadline, budget, method, may_reinit, result,
                        err);

    if (r == -EREMOTEIO) {
        snprintf(msg, sizeof(msg), "%s", err->msg);
        hutch_err_set(err, r, "upstream %s refused %s: %s", s->name, method, msg);
    }
    return r;
}

static bool has_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        if (!strcmp(get(t, "name")->valuestring, name))
            return true;
    }
    return false;
}

static int fetch_tools(struct server *s, uint64_t deadline, unsigned budget,
                       bool may_reinit, cJSON **out, struct hutch_err *err)
{
    cJSON *tools = cJSON_CreateArray(), *res = NULL, *params = NULL;
    char *cursor = NULL, why[200];
    int r = 0, n = 0, invalid = 0, dups = 0, page;
    bool capped = false;
    /* SEP-2243: an HTTP client of the 2026 era mirrors x-mcp-header
     * parameters into headers, and drops a tool whose annotations are
     * invalid (the other tools stay). */
    bool xheaders = s->cfg.tr == TR_HTTP && era_of(s) == ERA_MODERN;

    if (!tools)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    for (page = 0; page < HUTCH_UPSTREAM_MAX_PAGES; page++) {
        cJSON *list, *t, *next_t;
        const cJSON *next;

        params = cJSON_CreateObject();
        if (!params || (cursor && !cJSON_AddStringToObject(params, "cursor", cursor))) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        r = own_request(s, "tools/list", params, deadline, budget, may_reinit, &res,
                        err);
        cJSON_Delete(params);
        params = NULL;
        if (r < 0)
            goto out;
        list = cJSON_GetObjectItemCaseSensitive(res, "tools");
        if (!cJSON_IsArray(list)) {
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s answered tools/list without a \"tools\" array", s->name);
            goto out;
        }
        for (t = list->child; t && !capped; t = next_t) {
            const cJSON *name = get(t, "name");
            next_t = t->next;
            if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !name->valuestring[0] ||
                strlen(name->valuestring) > HUTCH_MAX_TOOL_NAME ||
                up_text_has_ctl(name->valuestring)) {
                invalid++;
            } else if (has_tool(tools, name->valuestring)) {
                dups++;
            } else if (xheaders && hutch_upstream_xheader_check(get(t, "inputSchema"),
                                                                why, sizeof(why)) < 0) {
                hutch_log(HUTCH_LOG_WARN, s->who,
                          "dropping tool %s: invalid x-mcp-header: %s",
                          name->valuestring, why);
            } else if (n == HUTCH_UPSTREAM_MAX_TOOLS) {
                capped = true;
            } else {
                cJSON_AddItemToArray(tools, cJSON_DetachItemViaPointer(list, t));
                n++;
            }
        }
        next = get(res, "nextCursor");
        free(cursor);
        cursor = NULL;
        if (!capped && cJSON_IsString(next) && next->valuestring[0] &&
            strlen(next->valuestring) <= HUTCH_UPSTREAM_MAX_CURSOR &&
            !(cursor = strdup(next->valuestring))) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        cJSON_Delete(res);
        res = NULL;
        if (!cursor)
            break;
    }
    if (cursor)
        hutch_log(HUTCH_LOG_WARN, s->who,
                  "tools/list has more than %d pages; using the first %d",
                  HUTCH_UPSTREAM_MAX_PAGES, HUTCH_UPSTREAM_MAX_PAGES);
    if (capped)
        hutch_log(HUTCH_LOG_WARN, s->who, "more than %d tools; using the first %d",
                  HUTCH_UPSTREAM_MAX_TOOLS, HUTCH_UPSTREAM_MAX_TOOLS);
    if (invalid)
        hutch_log(HUTCH_LOG_WARN, s->who,
                  "skipped %d tools that are not objects with a valid string \"name\"",
                  invalid);
    if (dups)
        hutch_log(HUTCH_LOG_WARN, s->who, "skipped %d tools listed twice", dups);
    *out = tools;
    tools = NULL;
out:
    cJSON_Delete(tools);
    cJSON_Delete(res);
    cJSON_Delete(params);
    free(cursor);
    return r;
}

/* initialize, notifications/initialized, tools/list. */
static int legacy_handshake(struct server *s, uint64_t deadline, cJSON **tools,
                            struct hutch_err *err);

/* Which era s speaks, by 2026-07-28's dual-era rule: server/discover
 * first, carrying the 2026 _meta (and headers over HTTP).  A result that
 * lists 2026-07-28 in supportedVersions is the 2026 era.  Any JSON-RPC
 * error, a result without it, an HTTP 4xx other than 401/403, and on stdio
 * silence past HUTCH_UPSTREAM_PROBE_MS: the 2025 era (initialize; *silent
 * says it was silence).  A stdio server that exits on the probe is marked
 * legacy_only and restarted.  ERA_MODERN or ERA_LEGACY (and *disc: the
 * discover result, or NULL), or a negative error the start fails with. */
static int probe_era(struct server *s, uint64_t deadline, cJSON **disc, bool *retried,
                     bool *silent, struct hutch_err *err)
{
    unsigned budget = ms_left(deadline);
    uint64_t until = deadline;
    struct hutch_err e = {0};
    cJSON *reply = NULL;
    const cJSON *res, *sv, *it;
    int r;

    *disc = NULL;
    if (s->legacy_only)
        return ERA_LEGACY;
    __atomic_store_n(&s->era, ERA_PROBE, __ATOMIC_RELEASE);
    if (s->cfg.tr == TR_STDIO) {
        if (budget > HUTCH_UPSTREAM_PROBE_MS)
            until = hutch_now_ms() + HUTCH_UPSTREAM_PROBE_MS;
        r = up_stdio_request(s, "server/discover", NULL, until, ms_left(until),
                             "server/discover", &reply, &e);
        if (r == -ETIMEDOUT) {
            *silent = true;
            return ERA_LEGACY;
        }
        if (r == -ECONNRESET && !stopping(s->u)) {
            s->legacy_only = true;
            return hutch_err_set(err, r,
                                 "upstream %s exited when asked server/discover: "
                                 "speaking 2025's initialize to it from now on",
                                 s->name);
        }
    } else {
        r = up_http_request(s, "server/discover", NULL, deadline, budget,
                            "server/discover", false, &reply, &e);
        if (r == -EBADRQC)
            return ERA_LEGACY;
    }
    if (r < 0) {
        hutch_err_set(err, r, "%s", e.msg);
        return r;
    }
    /* -32022 naming 2026-07-28 among the versions it serves: it refused the
     * version we asked on that request only (the revision's corrective
     * retry); ask once more.  Any other error: the 2025 era. */
    {
        const cJSON *re = get(reply, "error");
        const cJSON *sup = get(get(re, "data"), "supported"), *it2;
        if (!cJSON_IsArray(sup))
            sup = NULL;
        if (cJSON_IsNumber(get(re, "code")) &&
            get(re, "code")->valuedouble == HUTCH_RPC_UNSUPPORTED_VERSION &&
            !*retried) {
            cJSON_ArrayForEach(it2, sup)
            {
                if (cJSON_IsString(it2) && !strcmp(it2->valuestring, MODERN_VERSION)) {
                    cJSON_Delete(reply);
                    *retried = true;
                    return probe_era(s, deadline, disc, retried, silent, err);
                }
            }
        }
    }
    res = get(reply, "result");
    sv = get(res, "supportedVersions");
    if (!cJSON_IsArray(sv))
        sv = NULL;
    cJSON_ArrayForEach(it, sv)
    {
        if (cJSON_IsString(it) && !strcmp(it->valuestring, MODERN_VERSION) &&
            result_type_ok(s, "server/discover", res, &e) == 0) {
            *disc = cJSON_DetachItemViaPointer(reply, (cJSON *)res);
            cJSON_Delete(reply);
            return ERA_MODERN;
        }
    }
    cJSON_Delete(reply);
    return ERA_LEGACY;
}

/* A serverInfo's name and version, made fit for the log ("" when absent). */
static void server_info(const cJSON *si, char *name, size_t nlen, char *ver,
                        size_t vlen)
{
    const cJSON *n = get(si, "name"), *v = get(si, "version");
    if (cJSON_IsString(n))
        up_clean_text(name, nlen, n->valuestring, strlen(n->valuestring));
    if (cJSON_IsString(v))
        up_clean_text(ver, vlen, v->valuestring, strlen(v->valuestring));
}

/* The 2026 era: no handshake; server/discover said who the server is. */
static int modern_start(struct server *s, uint64_t deadline, const cJSON *disc,
                        cJSON **tools, struct hutch_err *err)
{
    const cJSON *si = get(disc, "serverInfo"), *m = get(disc, "_meta");
    char sname[64] = "", sver[32] = "";
    int r;

    if (!si) /* some servers put it in _meta */
        si = get(m, "io.modelcontextprotocol/serverInfo");
    server_info(si, sname, sizeof(sname), sver, sizeof(sver));
    r = fetch_tools(s, deadline, ms_left(deadline), false, tools, err);
    if (r < 0)
        return r;
    hutch_log(HUTCH_LOG_INFO, s->who, "ready: %s %s, protocol %s (stateless), %d tools",
              sname[0] ? sname : "(unnamed)", sver, MODERN_VERSION,
              cJSON_GetArraySize(*tools));
    return 0;
}

static int handshake(struct server *s, uint64_t deadline, cJSON **tools,
                     struct hutch_err *err)
{
    cJSON *disc = NULL;
    bool retried = false, silent = false;
    int era = probe_era(s, deadline, &disc, &retried, &silent, err), r;

    if (era < 0)
        return era;
    __atomic_store_n(&s->era, era, __ATOMIC_RELEASE);
    if (era == ERA_MODERN) {
        r = modern_start(s, deadline, disc, tools, err);
        cJSON_Delete(disc);
        return r;
    }
    r = legacy_handshake(s, deadline, tools, err);
    if (r == -EREMOTEIO && silent && !stopping(s->u)) {
        /* Silent on server/discover, then refusing initialize: a server
         * that was only slow to start (a 2026-only one on a busy machine)
         * answers now.  Ask once more; still not the 2026 era, the
         * refusal stands. */
        struct hutch_err e2 = {0};
        retried = silent = false;
        hutch_log(HUTCH_LOG_INFO, s->who,
                  "silent on server/discover, then refused initialize: asking "
                  "server/discover again");
        if (probe_era(s, deadline, &disc, &retried, &silent, &e2) == ERA_MODERN) {
            __atomic_store_n(&s->era, ERA_MODERN, __ATOMIC_RELEASE);
            *err = (struct hutch_err){0};
            r = modern_start(s, deadline, disc, tools, err);
        } else {
            __atomic_store_n(&s->era, ERA_LEGACY, __ATOMIC_RELEASE);
        }
        cJSON_Delete(disc);
    }
    return r;
}

/* The 2025 era: initialize, notifications/initialized, tools/list. */
static int legacy_handshake(struct server *s, uint64_t deadline, cJSON **tools,
                            struct hutch_err *err)
{
    unsigned budget = ms_left(deadline);
    cJSON *params = cJSON_CreateObject(), *res = NULL, *ci;
    const cJSON *pv, *si;
    char shown[64], sname[64] = "", sver[32] = "";
    int r;

    ci = params ? cJSON_AddObjectToObject(params, "clientInfo") : NULL;
    if (!ci || !cJSON_AddStringToObject(params, "protocolVersion", PROTOCOL_VERSION) ||
        !cJSON_AddObjectToObject(params, "capabilities") ||
        !cJSON_AddStringToObject(ci, "name", s->u->client_name) ||
        !cJSON_AddStringToObject(ci, "version", PACKAGE_VERSION)) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = own_request(s, "initialize", params, deadline, budget, false, &res, err);
    if (r < 0)
        goto out;
    pv = get(res, "protocolVersion");
    if (!cJSON_IsString(pv) || !version_ok(pv->valuestring)) {
        up_clean_text(shown, sizeof(shown), cJSON_IsString(pv) ? pv->valuestring : "",
                      cJSON_IsString(pv) ? strlen(pv->valuestring) : 0);
        r = hutch_err_set(err, -EPROTO,
                          "upstream %s wants protocol version \"%s\"; hutch speaks "
                          "2025-11-25, 2025-06-18 and 2025-03-26",
                          s->name, shown);
        goto out;
    }
    if (s->cfg.tr == TR_HTTP) {
        pthread_mutex_lock(&s->lock);
        snprintf(s->proto, sizeof(s->proto), "%s", pv->valuestring);
        pthread_mutex_unlock(&s->lock);
        r = up_http_notify(s, "notifications/initialized", deadline, err);
    } else {
        r = up_stdio_notify(s, "notifications/initialized", err);
    }
    if (r < 0)
        goto out;
    si = get(res, "serverInfo");
    server_info(si, sname, sizeof(sname), sver, sizeof(sver));
    r = fetch_tools(s, deadline, budget, false, tools, err);
    if (r < 0)
        goto out;
    hutch_log(HUTCH_LOG_INFO, s->who, "ready: %s %s, protocol %s, %d tools",
              sname[0] ? sname : "(unnamed)", sver, pv->valuestring,
              cJSON_GetArraySize(*tools));
out:
    cJSON_Delete(params);
    cJSON_Delete(res);
    return r;
}

/* Re-read the tool list (after list_changed). */
static void refresh_tools(struct server *s)
{
    cJSON *tools = NULL;
    struct hutch_err e = {0};
    bool changed = false;
    int r;

    r = fetch_tools(s, hutch_now_ms() + (unsigned)s->u->call_ms,
                    (unsigned)s->u->call_ms, true, &tools, &e);
    if (r < 0) {
        if (!stopping(s->u))
            hutch_log(HUTCH_LOG_WARN, s->who, "re-reading tools after list_changed: %s",
                      e.msg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (s->state == ST_READY) {
        changed = !cJSON_Compare(s->tools, tools, true);
        cJSON_Delete(s->tools);
        s->tools = tools;
        tools = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    cJSON_Delete(tools);
    if (changed) {
        gen_bump(s->u);
        hutch_log(HUTCH_LOG_INFO, s->who, "tool list changed");
    }
}

/* Initialize a new HTTP session after the old one expired, unless another
 * thread already did (upstream_http.c calls it through u->ev). */
static int http_reinit(struct server *s, uint64_t gen, struct hutch_err *err)
{
    cJSON *tools = NULL;
    bool fresh, changed = false;
    int r = 0;

    pthread_mutex_lock(&s->reinit_lock);
    pthread_mutex_lock(&s->lock);
    fresh = s->session_gen != gen;
    pthread_mutex_unlock(&s->lock);
    if (!fresh) { /* sessions are the 2025 era's */
        r = legacy_handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, err);
        if (r == 0) {
            pthread_mutex_lock(&s->lock);
            if (s->state == ST_READY) {
                changed = !cJSON_Compare(s->tools, tools, true);
                cJSON_Delete(s->tools);
                s->tools = tools;
                tools = NULL;
            }
            pthread_mutex_unlock(&s->lock);
        }
    }
    pthread_mutex_unlock(&s->reinit_lock);
    cJSON_Delete(tools);
    if (changed)
        gen_bump(s->u);
    return r;
}

/* What the transports hand up (upstream_int.h): they call nothing of this
 * file by name. */
static const struct up_events events = {.http_reinit = http_reinit};

/* Serve a ready server until it dies (stdio), or hutch stops. */
static void serve(struct server *s, struct child *c)
{
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!stopping(s->u) && !s->list_changed && !(c && (c->dead || c->broken)))
            pthread_cond_wait(&s->cond, &s->lock);
        if (stopping(s->u) || (c && (c->dead || c->broken)))
            break;
        s->list_changed = false;
        pthread_mutex_unlock(&s->lock);
        refresh_tools(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

/* One life of a stdio child: spawn, handshake, serve, teardown. */
static void stdio_run_once(struct server *s, unsigned *backoff)
{
    struct hutch_err e = {0};
    struct exit_info x;
    struct child *c = NULL;
    cJSON *tools = NULL;
    char why[HUTCH_ERR_MSG + 300];
    int r, broken;

    r = up_stdio_spawn(s, &c, &e);
    if (r < 0) {
        hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
        set_down(s, ST_FAILED, e.msg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->child = c;
    s->list_changed = false;
    pthread_mutex_unlock(&s->lock);

    r = handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, &e);
    if (r < 0) {
        if (stopping(s->u)) {
            up_child_teardown(s, c, HUTCH_UPSTREAM_STDIN_GRACE_MS, -ECONNRESET,
                              "was stopped", &x);
            return;
        }
        if (r != -ECONNRESET) { /* no answer or a bad one: it will not get better */
            hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
            set_down(s, ST_FAILED, e.msg);
            up_child_teardown(s, c, 0, -ECONNRESET, "was stopped", &x);
            return;
        }
        up_child_teardown(s, c, HUTCH_UPSTREAM_DEAD_GRACE_MS, -ECONNRESET, "exited",
                          &x);
        snprintf(why, sizeof(why), "%s before initialize%s%s", x.text,
                 x.last_err[0] ? ": " : "", x.last_err);
        hutch_log(HUTCH_LOG_WARN, s->who, "%s", why);
        set_down(s, ST_FAILED, why);
        return;
    }
    set_ready(s, tools);

    serve(s, c);

    pthread_mutex_lock(&s->lock);
    broken = c->broken;
    snprintf(why, sizeof(why), "%s", c->broken_why);
    pthread_mutex_unlock(&s->lock);
    if (stopping(s->u)) {
        up_child_teardown(s, c, HUTCH_UPSTREAM_STDIN_GRACE_MS, -ECONNRESET,
                          "was stopped", &x);
        return;
    }
    /* mark_dead or mark_broken already left "ready". */
    up_child_teardown(s, c, broken ? 0 : HUTCH_UPSTREAM_DEAD_GRACE_MS,
                      broken ? broken : -ECONNRESET, broken ? why : "exited", &x);
    if (broken)
        snprintf(why + strlen(why), sizeof(why) - strlen(why), " (killed it)");
    else
        snprintf(why, sizeof(why), "%s%s%s", x.text, x.last_err[0] ? ": " : "",
                 x.last_err);
    pthread_mutex_lock(&s->lock);
    if (hutch_now_ms() - s->ready_since >= HUTCH_UPSTREAM_STABLE_MS)
        *backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;
    if (s->state == ST_RESTARTING)
        snprintf(s->error, sizeof(s->error), "%s; restarting", why);
    pthread_mutex_unlock(&s->lock);
    hutch_log(HUTCH_LOG_WARN, s->who, "%s; restarting in %u ms", why, *backoff);
}

static void http_run_once(struct server *s, unsigned *backoff)
{
    struct hutch_err e = {0};
    cJSON *tools = NULL;
    int r;

    pthread_mutex_lock(&s->reinit_lock);
    r = handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, &e);
    pthread_mutex_unlock(&s->reinit_lock);
    if (r < 0) {
        if (!stopping(s->u)) {
            hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
            set_down(s, ST_FAILED, e.msg);
        }
        return;
    }
    set_ready(s, tools);
    *backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;
    serve(s, NULL);
}

static void *supervisor_main(void *arg)
{
    struct server *s = arg;
    unsigned backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;

    while (!stopping(s->u)) {
        if (s->cfg.tr == TR_STDIO)
            stdio_run_once(s, &backoff);
        else
            http_run_once(s, &backoff);
        if (stopping(s->u))
            break;
        wait_backoff(s, backoff);
        backoff = backoff * 2 > HUTCH_UPSTREAM_BACKOFF_MAX_MS
                      ? HUTCH_UPSTREAM_BACKOFF_MAX_MS
                      : backoff * 2;
    }
    if (s->cfg.tr == TR_HTTP)
        up_http_end_session(s);
    return NULL;
}

/* --- the public API ----------------------------------------------------- */

static void server_free(struct server *s)
{
    up_entry_free(&s->cfg);
    cJSON_Delete(s->tools);
    free(s->session);
    for (int i = 0; i < s->npool; i++)
        up_hconn_free(&s->pool[i]);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->reinit_lock);
    pthread_cond_destroy(&s->cond);
}

void hutch_upstreams_stop(struct hutch_upstreams *u)
{
    if (!u)
        return;
    __atomic_store_n(&u->stop, true, __ATOMIC_RELEASE);
    for (size_t i = 0; i < u->n; i++) {
        pthread_mutex_lock(&u->srv[i].lock);
        /* A handshake waiting for a server that hangs ends now, not at
         * the start timeout (a hutch told to stop took 30 s). */
        up_fail_pending_locked(&u->srv[i], -ECANCELED,
                               "was not answered: hutch is stopping");
        pthread_cond_broadcast(&u->srv[i].cond);
        pthread_mutex_unlock(&u->srv[i].lock);
    }
    pthread_mutex_lock(&u->lock);
    pthread_cond_broadcast(&u->cond);
    pthread_mutex_unlock(&u->lock);
}

void hutch_upstreams_wait_settled(struct hutch_upstreams *u, uint64_t deadline_ms)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    while (u->settled < u->n && !stopping(u) &&
           hutch_cond_wait_until(&u->cond, &u->lock, deadline_ms) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&u->lock);
}

void hutch_upstreams_wait_starting(struct hutch_upstreams *u, unsigned grace_ms,
                                   uint64_t deadline_ms)
{
    uint64_t until;

    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    if (u->settled == u->n) {
        pthread_mutex_unlock(&u->lock);
        return;
    }
    /* The first search that finds a server starting sets the grace for
     * every search: they wait together, and none after it. */
    if (!u->search_until_ms)
        u->search_until_ms = hutch_now_ms() + grace_ms;
    until = u->search_until_ms;
    pthread_mutex_unlock(&u->lock);
    if (deadline_ms && deadline_ms < until)
        until = deadline_ms;
    if (hutch_now_ms() < until)
        hutch_upstreams_wait_settled(u, until);
}

int hutch_upstreams_wait_started(struct hutch_upstreams *u, const char *name,
                                 size_t len, uint64_t deadline_ms)
{
    struct server *s = NULL;
    bool settled;

    for (size_t i = 0; u && i < u->n && !s; i++)
        if (strlen(u->srv[i].name) == len && !strncasecmp(u->srv[i].name, name, len))
            s = &u->srv[i];
    if (!s)
        return 0;
    /* u->settled counts up after a server's own flag is set: a change of
     * the count seen before reading the flag is never missed. */
    pthread_mutex_lock(&u->lock);
    for (;;) {
        size_t seen = u->settled;
        pthread_mutex_unlock(&u->lock);
        pthread_mutex_lock(&s->lock);
        settled = s->settled;
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_lock(&u->lock);
        if (settled)
            break;
        while (u->settled == seen && !stopping(u) &&
               hutch_cond_wait_until(&u->cond, &u->lock, deadline_ms) != ETIMEDOUT)
            ;
        if (u->settled == seen)
            break; /* the deadline, or hutch stops */
    }
    pthread_mutex_unlock(&u->lock);
    return 1;
}

void hutch_upstreams_free(struct hutch_upstreams *u)
{
    if (!u)
        return;
    hutch_upstreams_stop(u);
    for (size_t i = 0; i < u->n; i++)
        if (u->srv[i].sup_started)
            pthread_join(u->srv[i].sup, NULL);
    for (size_t i = 0; i < u->n; i++)
        server_free(&u->srv[i]);
    free(u->srv);
    free(u->client_name);
    pthread_mutex_destroy(&u->lock);
    pthread_cond_destroy(&u->cond);
    free(u);
}

int hutch_upstreams_start(const cJSON *config, const struct hutch_upstream_opts *opts,
                          struct hutch_upstreams **out, struct hutch_err *err)
{
    struct hutch_upstreams *u = NULL;
    const cJSON *e;
    sigset_t all, old;
    bool any_http = false;
    size_t i = 0;
    int r;

    if (!out || !config)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_start: bad arguments");
    *out = NULL;
    if (opts && (opts->call_timeout_ms < 0 || opts->start_timeout_ms < 0))
        return hutch_err_set(err, -EINVAL, "upstream timeouts cannot be negative");
    r = up_check_servers("mcpServers", "mcpServers", config, false, err);
    if (r < 0)
        return r;

    u = calloc(1, sizeof(*u));
    if (!u)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    u->ev = &events;
    pthread_mutex_init(&u->lock, NULL);
    hutch_cond_init_mono(&u->cond);
    u->call_ms =
        opts && opts->call_timeout_ms ? opts->call_timeout_ms : HUTCH_UPSTREAM_CALL_MS;
    u->start_ms = opts && opts->start_timeout_ms ? opts->start_timeout_ms
                                                 : HUTCH_UPSTREAM_START_MS;
    u->client_name = strdup(opts && opts->client_name ? opts->client_name : "hutch");
    u->n = (size_t)cJSON_GetArraySize(config);
    u->srv = calloc(u->n ? u->n : 1, sizeof(*u->srv));
    if (!u->client_name || !u->srv) {
        u->n = 0;
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        s->u = u;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->reinit_lock, NULL);
        hutch_cond_init_mono(&s->cond);
        s->state = ST_STARTING;
    }
    i = 0;
    cJSON_ArrayForEach(e, config)
    {
        struct server *s = &u->srv[i++];
        snprintf(s->name, sizeof(s->name), "%s", e->string);
        snprintf(s->who, sizeof(s->who), "upstream %s", e->string);
        r = up_entry_kind("mcpServers", e->string, e, s->error, sizeof(s->error), err);
        if (r == ENTRY_DISABLED || r == ENTRY_SKIPPED || r == ENTRY_BROKEN) {
            /* Listed with their state, never started: settled already. */
            s->state = r == ENTRY_DISABLED ? ST_DISABLED : ST_SKIPPED;
            s->cfg.tr = (get(e, "url") || get(e, "serverUrl")) && !get(e, "command")
                            ? TR_HTTP
                            : TR_STDIO;
            s->settled = true;
            u->settled++;
            continue;
        }
        if (r == 0)
            r = up_parse_entry("mcpServers", e->string, e, &s->cfg, err);
        if (r < 0) {
            if (r == -ENOMEM)
                hutch_err_set(err, r, "out of memory");
            goto out;
        }
        any_http |= s->cfg.tr == TR_HTTP;
    }
    if (any_http) {
        r = up_http_global_init(err);
        if (r < 0)
            goto out;
    }

    /* Our threads take no signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (i = 0; i < u->n; i++) {
        if (u->srv[i].state == ST_DISABLED || u->srv[i].state == ST_SKIPPED)
            continue;
        r = -pthread_create(&u->srv[i].sup, NULL, supervisor_main, &u->srv[i]);
        if (r < 0)
            break;
        u->srv[i].sup_started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        r = hutch_err_set(err, r, "cannot create a thread: %s", strerror(-r));
        goto out;
    }

    if (!(opts && opts->no_wait))
        hutch_upstreams_wait_settled(u, hutch_now_ms() + (unsigned)u->start_ms + 250);
    *out = u;
    return 0;
out:
    hutch_upstreams_free(u);
    return r;
}

cJSON *hutch_upstreams_tools(struct hutch_upstreams *u)
{
    cJSON *arr = cJSON_CreateArray();

    if (!u || !arr)
        return arr;
    for (size_t i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        const cJSON *t;
        pthread_mutex_lock(&s->lock);
        if (s->state == ST_READY) {
            cJSON_ArrayForEach(t, s->tools)
            {
                cJSON *o = cJSON_CreateObject(), *d = cJSON_Duplicate(t, true);
                if (!o || !d || !cJSON_AddStringToObject(o, "server", s->name)) {
                    cJSON_Delete(o);
                    cJSON_Delete(d);
                    pthread_mutex_unlock(&s->lock);
                    cJSON_Delete(arr);
                    return NULL;
                }
                cJSON_AddItemToObject(o, "tool", d);
                cJSON_AddItemToArray(arr, o);
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    return arr;
}

uint64_t hutch_upstreams_generation(struct hutch_upstreams *u)
{
    return u ? __atomic_load_n(&u->generation, __ATOMIC_ACQUIRE) : 0;
}

int hutch_upstreams_snapshot(struct hutch_upstreams *u,
                             struct hutch_upstream_status **rows, size_t *n)
{
    struct hutch_upstream_status *a;

    *rows = NULL;
    *n = 0;
    if (!u)
        return 0;
    a = calloc(u->n ? u->n : 1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        struct hutch_upstream_status *o = &a[i];
        snprintf(o->server, sizeof(o->server), "%s", s->name);
        pthread_mutex_lock(&s->lock);
        o->transport = s->state == ST_SKIPPED  ? "none"
                       : s->cfg.tr == TR_STDIO ? "stdio"
                                               : "http";
        o->state = (enum hutch_upstream_state)s->state;
        if (s->state != ST_READY)
            snprintf(o->error, sizeof(o->error), "%s", s->error);
        o->tools = s->state == ST_READY ? (size_t)cJSON_GetArraySize(s->tools) : 0;
        pthread_mutex_unlock(&s->lock);
    }
    *rows = a;
    *n = u->n;
    return 0;
}

static bool is_input_required(const cJSON *res)
{
    const cJSON *rt = get(res, "resultType");
    return cJSON_IsString(rt) && !strcmp(rt->valuestring, "input_required");
}

/* An upstream's input_required: every embedded elicitation/create asked of
 * hutch's own client (the thread's elicitor), the answers put into params
 * as inputResponses, with the requestState echoed byte for byte.  Any
 * other embedded request (sampling, roots) cannot be answered. */
static int answer_questions(struct server *s, cJSON *params, const cJSON *res,
                            uint64_t deadline, struct hutch_err *err)
{
    const cJSON *reqs = get(res, "inputRequests"), *rs = get(res, "requestState"), *q;
    const struct hutch_elicitor *elicitor = up_elicitor();
    cJSON *answers = cJSON_CreateObject();
    char why[256] = "";

    if (!answers)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    if (!cJSON_IsObject(reqs))
        reqs = NULL;
    cJSON_ArrayForEach(q, reqs)
    {
        const cJSON *m = get(q, "method");
        cJSON *ans = NULL;
        int r;
        if (!cJSON_IsString(m) || strcmp(m->valuestring, "elicitation/create")) {
            char shown[64];
            up_clean_text(shown, sizeof(shown),
                          cJSON_IsString(m) ? m->valuestring : "?",
                          cJSON_IsString(m) ? strlen(m->valuestring) : 1);
            cJSON_Delete(answers);
            return hutch_err_set(err, -ENOTSUP,
                                 "upstream %s asks for %s, which hutch cannot answer "
                                 "(only elicitation/create is passed to the user)",
                                 s->name, shown);
        }
        r = elicitor->fn(elicitor->arg, get(q, "params"), ms_left(deadline), &ans, why,
                         sizeof(why));
        if (r < 0 || !ans) {
            cJSON_Delete(answers);
            return hutch_err_set(err, r < 0 ? r : -EIO,
                                 "upstream %s needs input from the user, who could not "
                                 "be asked: %s",
                                 s->name, why[0] ? why : "no answer");
        }
        cJSON_AddItemToObject(answers, q->string, ans);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(params, "inputResponses");
    cJSON_DeleteItemFromObjectCaseSensitive(params, "requestState");
    cJSON_AddItemToObject(params, "inputResponses", answers);
    if (rs)
        cJSON_AddItemToObject(params, "requestState", cJSON_Duplicate(rs, true));
    return 0;
}

/* What a tools/call of `tool` on `server` starts from: the server (ready),
 * the time it gets, its name as messages show it, and its params (args by
 * reference: the caller holds, and has charged, them for the whole call).
 * 0, or negative with err. */
static int call_begin(struct hutch_upstreams *u, const char *server, const char *tool,
                      const cJSON *args, int timeout_ms, struct server **out,
                      unsigned *ms_out, char *what, size_t what_len, cJSON **params,
                      struct hutch_err *err)
{
    struct server *s = NULL;
    char tname[HUTCH_MAX_TOOL_NAME + 1], state[HUTCH_ERR_MSG];
    bool ready;
    unsigned ms;

    if (!u || !server || !tool)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_call: bad arguments");
    if (args && !cJSON_IsObject(args))
        return hutch_err_set(err, -EINVAL, "the arguments of %s must be an object",
                             tool);
    for (size_t i = 0; i < u->n && !s; i++)
        if (!strcmp(u->srv[i].name, server))
            s = &u->srv[i];
    if (!s) {
        char shown[80];
        up_clean_text(shown, sizeof(shown), server, strlen(server));
        return hutch_err_set(err, -ENOENT, "no upstream server named %s", shown);
    }
    pthread_mutex_lock(&s->lock);
    ready = s->state == ST_READY;
    snprintf(state, sizeof(state), "%s%s%s",
             hutch_upstream_state_name((enum hutch_upstream_state)s->state),
             s->error[0] ? ": " : "", s->error);
    pthread_mutex_unlock(&s->lock);
    if (!ready && (s->state == ST_DISABLED || s->state == ST_SKIPPED))
        return hutch_err_set(err, -EHOSTDOWN, "upstream %s is %s in the servers file",
                             s->name, state);
    if (!ready)
        return hutch_err_set(err, -EHOSTDOWN, "upstream %s is not ready (%s)", s->name,
                             state);

    /* The server's own limit, lowered to the caller's (what is left of an
     * execution's time, less the share the program keeps for itself). */
    ms = (unsigned)(s->cfg.call_ms ? s->cfg.call_ms : u->call_ms);
    if (timeout_ms > 0 && (unsigned)timeout_ms < ms)
        ms = (unsigned)timeout_ms;
    up_clean_text(tname, sizeof(tname), tool, strlen(tool));
    snprintf(what, what_len, "tools/call %s", tname);
    *params = cJSON_CreateObject();
    if (!*params || !cJSON_AddStringToObject(*params, "name", tool) ||
        !(args ? cJSON_AddItemReferenceToObject(*params, "arguments", (cJSON *)args)
               : cJSON_AddObjectToObject(*params, "arguments") != NULL)) {
        cJSON_Delete(*params);
        *params = NULL;
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    *out = s;
    *ms_out = ms;
    return 0;
}

int hutch_upstreams_call(struct hutch_upstreams *u, const char *server,
                         const char *tool, const cJSON *args, int timeout_ms,
                         cJSON **result, struct hutch_err *err)
{
    struct server *s;
    cJSON *params = NULL;
    char what[HUTCH_MAX_TOOL_NAME + 16];
    uint64_t deadline;
    unsigned ms;
    int r;

    if (!result)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_call: bad arguments");
    *result = NULL;
    r = call_begin(u, server, tool, args, timeout_ms, &s, &ms, what, sizeof(what),
                   &params, err);
    if (r < 0)
        return r;
    deadline = hutch_now_ms() + ms;
    r = srv_request(s, "tools/call", params, deadline, ms, what, true, result, err);
    for (int round = 0; r == 0 && is_input_required(*result); round++) {
        if (round == HUTCH_UPSTREAM_INPUT_ROUNDS) {
            r = hutch_err_set(err, -EPROTO,
                              "upstream %s still asked for input after %d rounds",
                              s->name, round);
            break;
        }
        r = answer_questions(s, params, *result, deadline, err);
        cJSON_Delete(*result);
        *result = NULL;
        if (r == 0)
            r = srv_request(s, "tools/call", params, deadline, ms_left(deadline), what,
                            true, result, err);
    }
    if (r < 0) {
        cJSON_Delete(*result);
        *result = NULL;
    }
    cJSON_Delete(params);
    return r;
}

/* An asynchronous tools/call on its way: what its end needs. */
struct upcall {
    struct server *s;
    hutch_upstreams_done_fn done;
    void *arg;
    char what[HUTCH_MAX_TOOL_NAME + 16];
};

/* On the child's I/O thread (or the starter's), no lock held. */
static void upcall_done(void *arg, int r, cJSON *reply, struct hutch_err *err)
{
    struct upcall *uc = arg;
    cJSON *result = NULL;

    if (r == 0)
        r = take_result(uc->s, uc->what, reply, &result, err);
    uc->done(uc->arg, r, result, err); /* result is set only when r is 0 */
    free(uc);
}

int hutch_upstreams_call_start(struct hutch_upstreams *u, const char *server,
                               const char *tool, const cJSON *args, int timeout_ms,
                               hutch_upstreams_done_fn done, void *arg,
                               struct hutch_err *err)
{
    struct upcall *uc;
    struct server *s;
    cJSON *params = NULL;
    unsigned ms;
    int r;

    if (!done)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_call_start: bad arguments");
    if (!(uc = calloc(1, sizeof(*uc))))
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = call_begin(u, server, tool, args, timeout_ms, &s, &ms, uc->what,
                   sizeof(uc->what), &params, err);
    if (r < 0) {
        free(uc);
        return r;
    }
    /* A 2026-07-28 server may answer with a question (input_required), an
     * HTTP one is a blocking POST: both need a thread of their own. */
    if (s->cfg.tr != TR_STDIO || era_of(s) != ERA_LEGACY) {
        cJSON_Delete(params);
        free(uc);
        return 0;
    }
    uc->s = s;
    uc->done = done;
    uc->arg = arg;
    r = up_stdio_start(s, "tools/call", params, hutch_now_ms() + ms, ms, uc->what,
                       upcall_done, uc, err);
    cJSON_Delete(params); /* written: the text was all it needed */
    if (r < 0) {
        free(uc);
        return r;
    }
    return 1;
}
