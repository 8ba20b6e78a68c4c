/* mcp_server.c — hutch as an MCP server (JSON-RPC 2.0), transport-free.
 *
 * Two tools make code mode: search_tools finds upstream tools and their
 * signatures; execute_code runs a program in a fresh sandbox whose tool
 * calls come back through the bridge.  Requests are validated here, before
 * anything runs; execute_code runs on a worker thread per call, so one slow
 * execution never blocks another or the session's other requests.
 *
 * Two protocol eras, decided per message by mcp_era.c: the 2025 session
 * protocol (dispatch_legacy: initialize, then the session's methods) and
 * 2026-07-28 (dispatch_modern: every request stands alone; its results are
 * stamped with resultType and, for lists, cache hints).  A modern request
 * uses the session only to answer and to name the principal: nothing of it
 * is kept, so any hutch with the same configuration serves it alike.
 * Not here: parsing a message and judging its era (mcp_era.c); a
 * session's life and sending on it (mcp_session.c, under this file and
 * mcp_exec.c); the tools' definitions and results (mcp_tools.c);
 * executions, parked questions and tasks (mcp_exec.c).  What they share:
 * mcp_int.h. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "bridge.h"
#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "discover.h"
#include "exec.h"
#include "govern.h"
#include "hutch_archive.h"
#include "job.h"
#include "log.h"
#include "mcp_direct.h"
#include "mcp_era.h"
#include "mcp_int.h"
#include "mcp_server.h"
#include "output.h"
#include "plugin.h"
#include "reqstate.h"
#include "resources.h"
#include "result_files.h"
#include "shape.h"
#include "util.h"
#include "wire.h"
#include "workspace.h"

#define LATEST_PROTOCOL "2025-11-25"
static const char *const protocols[] = {"2025-11-25", "2025-06-18", NULL};

static void list_changed(void *arg);

int hutch_mcp_protocol_supported(const char *version)
{
    for (int i = 0; version && protocols[i]; i++)
        if (strcmp(version, protocols[i]) == 0)
            return 1;
    return 0;
}

int hutch_mcp_new(const struct hutch_mcp_opts *opts, struct hutch_mcp **out,
                  struct hutch_err *err)
{
    struct hutch_mcp *m = calloc(1, sizeof(*m));
    if (!m)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    m->o = *opts;
    m->bridge = opts->bridge;
    {
        unsigned ttl_ms;
        int r = hutch_resources_ttl_from_env(&ttl_ms, err);
        if (r == 0)
            r = hutch_resources_new(ttl_ms, opts->resources_dir, &m->resources, err);
        if (r < 0) {
            free(m);
            return r;
        }
    }
    pthread_mutex_init(&m->sessions_mu, NULL);
    pthread_mutex_init(&m->park_mu, NULL);
    pthread_cond_init(&m->park_cond, NULL);
    m->direct = (struct hutch_direct_opts){.bridge = opts->bridge,
                                           .gov = opts->gov,
                                           .upstreams = opts->upstreams,
                                           .flag = opts->direct_tools,
                                           .timeout_ms = opts->timeout_ms};
    /* Upstreams join the catalog in the background (and a reload may turn
     * the direct tools on): the clients hear of it. */
    if (opts->gov && opts->bridge && opts->upstreams)
        m->watch = hutch_direct_watch_start(&m->direct, list_changed, m);
    *out = m;
    return 0;
}

void mcp_park_stop_all(struct hutch_mcp *m);

void hutch_mcp_free(struct hutch_mcp *m)
{
    if (!m)
        return;
    mcp_park_stop_all(m);
    hutch_direct_watch_stop(m->watch);
    pthread_mutex_destroy(&m->sessions_mu);
    hutch_resources_free(m->resources);
    free(m);
}

/* The direct tools' list changed (mcp_direct.c's watch thread): every
 * initialized session hears it.  A notification tied to no request: the
 * HTTP transport has no stream for it (doc/code-mode.md, "Direct
 * tools"). */
static void list_changed(void *arg)
{
    struct hutch_mcp *m = arg;
    pthread_mutex_lock(&m->sessions_mu);
    for (struct hutch_mcp_session *s = m->sessions; s; s = s->next) {
        cJSON *msg;
        if (!s->initialized)
            continue;
        msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
        cJSON_AddStringToObject(msg, "method", "notifications/tools/list_changed");
        mcp_send_msg(s, NULL, msg, 0);
    }
    pthread_mutex_unlock(&m->sessions_mu);
}

/* --- dispatch
 * ------------------------------------------------------------------------- */

static cJSON *tools_list(struct hutch_mcp *m, const char *principal, int structured)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *defs = mcp_tool_defs(m, principal, structured);
    hutch_direct_list(&m->direct, defs); /* --direct-tools */
    cJSON_AddItemToObject(r, "tools", defs);
    return r;
}

static const char mcp_instructions[] =
    "Code mode: find the user's tools with search_tools, then write one short "
    "Python or JavaScript program that calls them as functions (tools.server.tool) "
    "and run it with execute_code. Do the filtering and aggregation inside the "
    "program.";

static void add_server_info(cJSON *obj, const char *key)
{
    cJSON *info = cJSON_AddObjectToObject(obj, key);
    cJSON_AddStringToObject(info, "name", "hutch");
    cJSON_AddStringToObject(info, "title", "hutch code mode");
    cJSON_AddStringToObject(info, "version", PACKAGE_VERSION);
}

/* server/discover (2026-07-28): what initialize told a 2025 client, for
 * any request to ask.  No logging (the revision moved the log level into
 * _meta; hutch sends no log messages) and no listChanged: the revision
 * delivers list changes on subscriptions/listen, which hutch does not
 * offer (doc/operating.md, "Protocol versions"). */
static cJSON *discover_result(void)
{
    cJSON *r = cJSON_CreateObject(), *caps;
    cJSON_AddItemToObject(r, "supportedVersions", hutch_mcp_modern_versions());
    caps = cJSON_AddObjectToObject(r, "capabilities");
    cJSON_AddObjectToObject(caps, "tools");
    cJSON_AddObjectToObject(caps, "resources");
    /* execute_code runs as a task for a request that declares it. */
    cJSON_AddObjectToObject(cJSON_AddObjectToObject(caps, "extensions"),
                            HUTCH_MCP_EXT_TASKS);
    cJSON_AddStringToObject(r, "instructions", mcp_instructions);
    add_server_info(cJSON_AddObjectToObject(r, "_meta"), HUTCH_MCP_META_SERVER_INFO);
    return r;
}

static const char *const log_levels[] = {"debug",   "info",      "notice",
                                         "warning", "error",     "critical",
                                         "alert",   "emergency", NULL};

static void m_initialize(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                         const char *meth, const cJSON *params, int modern)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
    cJSON *r, *caps;

    if (!cJSON_IsObject(params) || !cJSON_IsString(v)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "initialize needs params.protocolVersion (a string)");
        return;
    }
    if (s->initialized) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_REQUEST,
                       "this session is already initialized");
        return;
    }
    snprintf(s->protocol, sizeof(s->protocol), "%s",
             hutch_mcp_protocol_supported(v->valuestring) ? v->valuestring
                                                          : LATEST_PROTOCOL);
    s->initialized = 1;
    s->can_elicit = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "capabilities"), "elicitation"));
    s->structured =
        mcp_caps_structured(cJSON_GetObjectItemCaseSensitive(params, "capabilities"));
    r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "protocolVersion", s->protocol);
    caps = cJSON_AddObjectToObject(r, "capabilities");
    /* With direct tools the list follows the upstreams: it changes. */
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged",
                          hutch_direct_enabled(&s->m->direct));
    cJSON_AddObjectToObject(caps, "logging");
    /* Result files that do not fit in a result are resource_links read
     * with resources/read (result_files.c, resources.c). */
    cJSON_AddFalseToObject(cJSON_AddObjectToObject(caps, "resources"), "listChanged");
    add_server_info(r, "serverInfo");
    cJSON_AddStringToObject(r, "instructions", mcp_instructions);
    mcp_send_result(s, stream, id, r);
}

static void m_tools_call(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                         const char *meth, const cJSON *params, int modern)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");

    if (!cJSON_IsObject(params) || !cJSON_IsString(name)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "tools/call needs params.name (a string)");
        return;
    }
    if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "tools/call params.arguments must be an object");
        return;
    }
    if (!strcmp(name->valuestring, "search_tools")) {
        cJSON *empty = cJSON_CreateObject();
        cJSON *r =
            mcp_search_tools(s->m, s->principal, cJSON_IsObject(args) ? args : empty,
                             mcp_wants_structured(s, params, modern));
        if (modern)
            hutch_mcp_stamp_result(r, NULL);
        mcp_send_result(s, stream, id, r);
        cJSON_Delete(empty);
    } else if (!strcmp(name->valuestring, "execute_code") && modern &&
               cJSON_GetObjectItemCaseSensitive(params, "requestState")) {
        mcp_on_answer(s, stream, id, params); /* the answer to a parked question */
    } else if (!strcmp(name->valuestring, "execute_code") && modern &&
               mcp_wants_tasks(params) &&
               mcp_start_task(s, stream, id, params,
                              cJSON_IsObject(args) ? args : NULL) == 0) {
        ; /* a task: answered with the task, the execution runs on */
    } else if (!strcmp(name->valuestring, "execute_code")) {
        mcp_start_job(s, stream, id, params, cJSON_IsObject(args) ? args : NULL, NULL,
                      modern);
    } else if (hutch_direct_enabled(&s->m->direct)) {
        /* An upstream tool (--direct-tools), called on a worker: it may wait
         * for its server as long as a call from a sandbox. */
        mcp_start_job(s, stream, id, params, cJSON_IsObject(args) ? args : NULL,
                      name->valuestring, modern);
    } else {
        mcp_send_error(
            s, stream, id, HUTCH_RPC_INVALID_PARAMS,
            "Unknown tool: %.128s (hutch offers search_tools and execute_code)",
            name->valuestring);
    }
}

/* resources/read of a resource_link from an execute_code result; MCP's
 * "resource not found" code for an unknown, expired or foreign uri. */
static void m_resources_read(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                             const char *meth, const cJSON *params, int modern)
{
    const cJSON *uri = cJSON_GetObjectItemCaseSensitive(params, "uri");
    struct hutch_err err = HUTCH_ERR_INIT;
    cJSON *r;

    if (!cJSON_IsString(uri)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_PARAMS,
                       "resources/read needs params.uri (a string)");
        return;
    }
    r = hutch_resources_read(s->m->resources, s->principal, uri->valuestring, &err);
    if (r && modern) {
        /* A result file never changes under its uri, but it is one
         * principal's and expires: the client keeps it no longer than
         * this request. */
        const struct hutch_mcp_cache c = {0, 0};
        hutch_mcp_stamp_result(r, &c);
    }
    if (r) {
        mcp_send_result(s, stream, id, r);
    } else if (modern && err.code == -ENOENT) {
        /* 2026-07-28 (SEP-2164): invalid params, naming the uri. */
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "uri", uri->valuestring);
        mcp_send_msg(s, stream,
                     hutch_mcp_error_response(id, HUTCH_RPC_INVALID_PARAMS, err.msg, d),
                     1);
    } else {
        mcp_send_error(s, stream, id,
                       err.code == -ENOENT ? HUTCH_RPC_RESOURCE_NOT_FOUND
                                           : HUTCH_RPC_INTERNAL_ERROR,
                       "%s", err.msg);
    }
}

static void on_cancelled(struct hutch_mcp_session *s, const cJSON *params)
{
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
    char *key;
    if (!rid || !(cJSON_IsString(rid) || cJSON_IsNumber(rid)))
        return;
    key = cJSON_PrintUnformatted(rid);
    if (!key)
        return;
    pthread_mutex_lock(&s->mu);
    for (struct inflight *f = s->inflight; f; f = f->next)
        if (strcmp(f->key, key) == 0)
            atomic_store(&f->cancel, 1);
    pthread_mutex_unlock(&s->mu);
    free(key);
}

/* --- the methods (one row each in mcp_methods.def) --------------------------- */

/* What hutch itself offers changes only with a new hutch; the direct tools
 * follow the upstreams and the policy; a principal's result files change
 * with every run. */
static const struct hutch_mcp_cache cache_fixed = {HUTCH_MCP_LIST_TTL_MS, 1},
                                    cache_none = {0, 0};

/* A list's answer: in the 2026-07-28 era stamped with how long it may be
 * kept. */
static void send_list(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                      cJSON *r, int modern, const struct hutch_mcp_cache *c)
{
    if (modern)
        hutch_mcp_stamp_result(r, c);
    mcp_send_result(s, stream, id, r);
}

static void m_ping(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                   const char *meth, const cJSON *params, int modern)
{
    (void)params;
    (void)modern;
    mcp_send_result(s, stream, id, cJSON_CreateObject());
}

static void m_discover(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                       const char *meth, const cJSON *params, int modern)
{
    (void)params;
    send_list(s, stream, id, discover_result(), modern, &cache_fixed);
}

static void m_tools_list(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                         const char *meth, const cJSON *params, int modern)
{
    send_list(s, stream, id,
              tools_list(s->m, s->principal, mcp_wants_structured(s, params, modern)),
              modern, hutch_direct_enabled(&s->m->direct) ? &cache_none : &cache_fixed);
}

static void m_resources_list(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                             const char *meth, const cJSON *params, int modern)
{
    (void)params;
    send_list(s, stream, id, hutch_resources_list(s->m->resources, s->principal),
              modern, &cache_none);
}

static void m_templates(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                        const char *meth, const cJSON *params, int modern)
{
    cJSON *r = cJSON_CreateObject();
    (void)params;
    cJSON_AddArrayToObject(r, "resourceTemplates");
    send_list(s, stream, id, r, modern, &cache_fixed);
}

static void m_set_level(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                        const char *meth, const cJSON *params, int modern)
{
    const cJSON *lvl = cJSON_GetObjectItemCaseSensitive(params, "level");
    int ok = 0;
    (void)modern;
    for (int i = 0; cJSON_IsString(lvl) && log_levels[i]; i++)
        ok |= !strcmp(lvl->valuestring, log_levels[i]);
    if (ok)
        mcp_send_result(s, stream, id, cJSON_CreateObject());
    else
        mcp_send_error(
            s, stream, id, HUTCH_RPC_INVALID_PARAMS,
            "logging/setLevel needs params.level: debug, info, notice, warning, "
            "error, critical, alert or emergency");
}

static void m_tasks(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                    const char *meth, const cJSON *params, int modern)
{
    (void)modern;
    mcp_on_tasks(s, stream, id, meth, params);
}

typedef void mcp_handler_fn(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                            const char *meth, const cJSON *params, int modern);
/* mcp_methods.def's handlers, in its order (hutch_mcp_methods[i]'s is
 * handlers[i]). */
static mcp_handler_fn *const handlers[] = {
#define MCP_METHOD(name, eras, init, mirror, handler) handler,
#include "mcp_methods.def"
#undef MCP_METHOD
};

/* One request, in either era.  2026-07-28: hutch_mcp_classify let only
 * that era's methods through, and everything the request needs is in it
 * (the session is only the way back to the client and the principal).
 * 2025: initialize first, then the session's methods. */
static void dispatch(struct hutch_mcp_session *s, void *stream, const cJSON *id,
                     const char *meth, const cJSON *params, int modern)
{
    const struct hutch_mcp_method *row = hutch_mcp_method_find(meth);
    unsigned era = modern ? MCP_ERA_2026 : MCP_ERA_2025;

    if (!modern && !s->initialized && !(row && (row->eras & era) && !row->init)) {
        mcp_send_error(s, stream, id, HUTCH_RPC_INVALID_REQUEST,
                       "the session is not initialized: send initialize first");
        return;
    }
    if (!row || !(row->eras & era) || !handlers[row - hutch_mcp_methods]) {
        mcp_send_error(s, stream, id, HUTCH_RPC_METHOD_NOT_FOUND,
                       "Method not found: %.128s", meth);
        return;
    }
    handlers[row - hutch_mcp_methods](s, stream, id, meth, params, modern);
}

int hutch_mcp_session_deliver(struct hutch_mcp_session *s, struct hutch_mcp_msg *m,
                              void *stream)
{
    if (m->refused) {
        if (m->answer) {
            cJSON *r = hutch_mcp_error_response(m->id, m->v.code, m->why, m->v.data);
            m->v.data = NULL;
            mcp_send_msg(s, stream, r, 1);
        }
        return m->answer;
    }
    if (!m->method) { /* a response from the client: to one of our questions? */
        if (m->json)
            hutch_asks_response(s->asks, m->json);
        return 0;
    }
    if (!m->id) {
        if (!strcmp(m->method, "notifications/cancelled"))
            on_cancelled(s, m->params);
        /* notifications/initialized and others need nothing */
        return 0;
    }
    dispatch(s, stream, m->id, m->method, m->params, m->v.era == HUTCH_MCP_MODERN);
    return 1;
}

int hutch_mcp_session_receive(struct hutch_mcp_session *s, const char *json, size_t len,
                              void *stream)
{
    struct hutch_mcp_msg m;
    int r;

    hutch_mcp_msg_parse(json, len, NULL, &m);
    r = hutch_mcp_session_deliver(s, &m, stream);
    hutch_mcp_msg_clear(&m);
    return r;
}
