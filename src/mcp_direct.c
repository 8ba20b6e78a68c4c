/* mcp_direct.c — hutch serve --direct-tools (see mcp_direct.h).
 *
 * Names.  An upstream tool is offered as `server__tool`, each part with
 * every character outside [A-Za-z0-9_-] turned into "_": the model APIs
 * clients put MCP tools into accept only ^[a-zA-Z0-9_-]{1,64}$ as a tool
 * name (the catalog's own "server.tool" has a dot, which they refuse), and
 * the double underscore is how Claude Code already spells mcp__server__tool.
 * A name over 64 bytes is not offered; when two tools map to one name, the
 * first in the catalog's order keeps it.  Both stay reachable from
 * execute_code.
 *
 * What is offered is what search_tools offers (discover.c): the tools the
 * policy's tools.allow/deny globs let be called.  A call of a tool that is
 * not offered but exists (the client kept an old list) is decided, refused
 * and audited like any other.  A call runs through hutch_gov_tool with an
 * execution of its own ("d…" in the audit log), so the policy, the audit log
 * and the tool-call rate limit treat it exactly as a call from a sandbox;
 * its result is the upstream's CallToolResult, unchanged.
 *
 * The watch thread looks every HUTCH_DIRECT_WATCH_MS at the upstreams'
 * generation and the current policy; when either moved, it computes a digest
 * of the names offered and reports a change (notifications/tools/list_changed
 * in mcp_server.c).
 *
 * Threads: hutch_direct_list and hutch_direct_call run on any thread (a call
 * on the session's worker; each holds its own catalog and policy
 * references); the watch is one thread of its own, and changed() is called
 * from it.
 *
 * Not here: MCP framing, sessions and workers (mcp_server.c); deciding and
 * forwarding the call (govern.c, bridge.c). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge.h"
#include "caps.h"
#include "discover.h"
#include "govern.h"
#include "log.h"
#include "mcp_direct.h"
#include "metrics.h"
#include "upstream.h"
#include "util.h"

#define DIRECT_MAX_NAME 64

int hutch_direct_enabled(const struct hutch_direct_opts *o)
{
    struct hutch_policy *p;
    int v;
    if (!o->gov || !o->bridge)
        return 0;
    p = hutch_gov_policy(o->gov);
    v = hutch_policy_direct_tools(p);
    hutch_policy_unref(p);
    return v < 0 ? o->flag : v;
}

static void part(const char *s, char *out, size_t *n, size_t len)
{
    for (; *s && *n + 1 < len; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == '-';
        out[(*n)++] = ok ? c : '_';
    }
    out[*n] = '\0';
}

/* 0 with the name in out, -1 when it would be over DIRECT_MAX_NAME. */
static int direct_name(const struct hutch_catalog_entry *e, char *out, size_t len)
{
    char buf[2 * HUTCH_MAX_QUALIFIED_NAME + 4];
    size_t n = 0;
    part(e->server, buf, &n, sizeof(buf));
    part("__", buf, &n, sizeof(buf)); /* kept as is */
    part(e->tool, buf, &n, sizeof(buf));
    if (n > DIRECT_MAX_NAME || n + 1 > len)
        return -1;
    memcpy(out, buf, n + 1);
    return 0;
}

/* The entry that owns `name`: the first in catalog order. */
static const struct hutch_catalog_entry *owner(const struct hutch_catalog *cat,
                                               const char *name)
{
    char n[DIRECT_MAX_NAME + 1];
    for (size_t i = 0; i < hutch_catalog_count(cat); i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(cat, i);
        if (direct_name(e, n, sizeof(n)) == 0 && !strcmp(n, name))
            return e;
    }
    return NULL;
}

struct named {
    char name[DIRECT_MAX_NAME + 1];
    size_t i;
};

static int by_name(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int by_index(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    return (x->i > y->i) - (x->i < y->i);
}

/* Calls fn for each offered tool with its name, in catalog order; a name
 * two tools share is the first's (sorted once: n log n, for catalogs of
 * thousands). */
static void each_offered(const struct hutch_catalog *cat, const struct hutch_policy *p,
                         void (*fn)(void *arg, const struct hutch_catalog_entry *e,
                                    const char *name),
                         void *arg)
{
    size_t n = cat ? hutch_catalog_count(cat) : 0, k = 0, w = 0;
    struct named *v = n ? calloc(n, sizeof(*v)) : NULL;
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        if (direct_name(hutch_catalog_at(cat, i), v[k].name, sizeof(v[k].name)) == 0)
            v[k++].i = i;
    qsort(v, k, sizeof(*v), by_name);
    for (size_t i = 0; i < k; i++)
        if (i == 0 || strcmp(v[i].name, v[w - 1].name))
            v[w++] = v[i]; /* the first of each name */
    qsort(v, w, sizeof(*v), by_index);
    for (size_t i = 0; i < w; i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(cat, v[i].i);
        if (hutch_discover_offered(p, e))
            fn(arg, e, v[i].name);
    }
    free(v);
}

static void add_def(void *arg, const struct hutch_catalog_entry *e, const char *name)
{
    cJSON *tools = arg, *t = cJSON_CreateObject();
    const cJSON *d = e->def;
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(d, "description");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(d, "title");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(d, "inputSchema");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(d, "outputSchema");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(d, "annotations");
    char *text;
    size_t len;

    if (!t)
        return;
    cJSON_AddStringToObject(t, "name", name);
    if (cJSON_IsString(title))
        cJSON_AddStringToObject(t, "title", title->valuestring);
    /* Which server it is, since the client sees no catalog. */
    len =
        strlen(e->server) + 16 + (cJSON_IsString(desc) ? strlen(desc->valuestring) : 0);
    if ((text = malloc(len))) {
        snprintf(text, len, "[%s] %s", e->server,
                 cJSON_IsString(desc) ? desc->valuestring : e->tool);
        cJSON_AddStringToObject(t, "description", text);
        free(text);
    }
    if (cJSON_IsObject(in))
        cJSON_AddItemToObject(t, "inputSchema", cJSON_Duplicate(in, 1));
    else
        cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "inputSchema"), "type",
                                "object");
    if (cJSON_IsObject(out))
        cJSON_AddItemToObject(t, "outputSchema", cJSON_Duplicate(out, 1));
    if (cJSON_IsObject(ann))
        cJSON_AddItemToObject(t, "annotations", cJSON_Duplicate(ann, 1));
    cJSON_AddItemToArray(tools, t);
}

void hutch_direct_list(const struct hutch_direct_opts *o, cJSON *tools)
{
    struct hutch_catalog *cat;
    struct hutch_policy *p;
    void *ref;
    if (!hutch_direct_enabled(o))
        return;
    p = hutch_gov_policy(o->gov);
    cat = hutch_bridge_catalog_get(o->bridge, &ref);
    each_offered(cat, p, add_def, tools);
    hutch_bridge_catalog_put(o->bridge, ref);
    hutch_policy_unref(p);
}

static cJSON *error_result(const char *code, const char *msg)
{
    cJSON *r = cJSON_CreateObject(), *t = cJSON_CreateObject();
    char text[1200];
    snprintf(text, sizeof(text), "%s: %s", code ? code : "internal",
             msg ? msg : "the tool call failed");
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "content"), t);
    cJSON_AddTrueToObject(r, "isError");
    return r;
}

cJSON *hutch_direct_call(const struct hutch_direct_opts *o, const char *principal,
                         const char *name, const cJSON *args)
{
    struct hutch_tool_reply reply = {.want_raw = 1};
    struct hutch_gov_exec x;
    struct hutch_catalog *cat;
    const struct hutch_catalog_entry *e;
    char qualified[HUTCH_MAX_QUALIFIED_NAME + 1];
    cJSON *empty = NULL, *out;
    void *ref;
    int r;

    if (!hutch_direct_enabled(o) || strlen(name) > DIRECT_MAX_NAME)
        return NULL;
    cat = hutch_bridge_catalog_get(o->bridge, &ref);
    e = cat ? owner(cat, name) : NULL;
    if (e)
        snprintf(qualified, sizeof(qualified), "%s", e->qualified);
    hutch_bridge_catalog_put(o->bridge, ref);
    if (!e)
        return NULL;
    if (!args)
        args = empty = cJSON_CreateObject();
    /* The governed path of a sandbox's call: policy, audit, rate limit. */
    hutch_gov_direct_begin(o->gov, &x, o->bridge, principal);
    r = hutch_gov_tool(&x, qualified, args,
                       o->timeout_ms > INT32_MAX ? INT32_MAX : (int)o->timeout_ms,
                       &reply);
    hutch_gov_direct_end(&x);
    hutch_metrics_tool_call(reply.server, r == 0 ? "ok" : reply.code);
    if (reply.raw) {
        out = reply.raw; /* the upstream's own result, isError or not */
        reply.raw = NULL;
    } else if (r == 0) {
        /* No raw result (cannot happen with want_raw): the value as text. */
        char *js = cJSON_PrintUnformatted(reply.result);
        out = cJSON_CreateObject();
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", "text");
        cJSON_AddStringToObject(t, "text", js ? js : "null");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(out, "content"), t);
        free(js);
    } else {
        out = error_result(reply.code, reply.message);
    }
    cJSON_Delete(empty);
    cJSON_Delete(reply.result);
    cJSON_Delete(reply.raw);
    free(reply.message);
    free(reply.tool);
    free(reply.server);
    return out;
}

/* --- the watch ------------------------------------------------------------------ */

struct hutch_direct_watch {
    struct hutch_direct_opts o;
    void (*changed)(void *arg);
    void *arg;
    atomic_int stop;
    pthread_t th;
};

static void hash_name(void *arg, const struct hutch_catalog_entry *e, const char *name)
{
    uint64_t *h = arg;
    (void)e;
    for (const char *c = name; *c; c++)
        *h = (*h ^ (unsigned char)*c) * 1099511628211ull; /* FNV-1a */
    *h = (*h ^ 0xff) * 1099511628211ull;                  /* a separator */
}

static uint64_t digest(const struct hutch_direct_opts *o)
{
    uint64_t h = 14695981039346656037ull;
    struct hutch_catalog *cat;
    struct hutch_policy *p;
    void *ref;
    if (!hutch_direct_enabled(o))
        return 0;
    p = hutch_gov_policy(o->gov);
    cat = hutch_bridge_catalog_get(o->bridge, &ref);
    each_offered(cat, p, hash_name, &h);
    hutch_bridge_catalog_put(o->bridge, ref);
    hutch_policy_unref(p);
    return h;
}

static void *watch_main(void *arg)
{
    struct hutch_direct_watch *w = arg;
    struct hutch_policy *seen = hutch_gov_policy(w->o.gov);
    uint64_t gen = hutch_upstreams_generation(w->o.upstreams);
    uint64_t last = digest(&w->o);

    while (!atomic_load(&w->stop)) {
        struct timespec ts = {0, HUTCH_DIRECT_WATCH_MS * 1000000L};
        struct hutch_policy *p;
        uint64_t g, d;
        nanosleep(&ts, NULL);
        g = hutch_upstreams_generation(w->o.upstreams);
        p = hutch_gov_policy(w->o.gov);
        if (g == gen && p == seen) {
            hutch_policy_unref(p);
            continue;
        }
        /* Holding `seen` keeps its address from being reused. */
        hutch_policy_unref(seen);
        seen = p;
        gen = g;
        d = digest(&w->o);
        if (d != last) {
            last = d;
            hutch_debug("direct tools: the list changed");
            w->changed(w->arg);
        }
    }
    hutch_policy_unref(seen);
    return NULL;
}

struct hutch_direct_watch *hutch_direct_watch_start(const struct hutch_direct_opts *o,
                                                    void (*changed)(void *arg),
                                                    void *arg)
{
    struct hutch_direct_watch *w;
    if (!o->gov || !o->bridge || !(w = calloc(1, sizeof(*w))))
        return NULL;
    w->o = *o;
    w->changed = changed;
    w->arg = arg;
    atomic_init(&w->stop, 0);
    if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

void hutch_direct_watch_stop(struct hutch_direct_watch *w)
{
    if (!w)
        return;
    atomic_store(&w->stop, 1);
    pthread_join(w->th, NULL);
    free(w);
}
