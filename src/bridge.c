/* bridge.c — the host end of the sandbox tool bridge (see bridge.h).
 *
 * The catalog is shared by every execution and rebuilt when an upstream's
 * tool list changes; a call holds a reference to the catalog it looked the
 * tool up in, so a rebuild never frees what a running call uses. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bridge.h"
#include "log.h"
#include "schema.h"
#include "shape.h"
#include "util.h"

struct catref {
    struct hutch_catalog *cat;
    int refs;
};

struct hutch_bridge {
    struct hutch_upstreams *u;
    pthread_mutex_t mu;
    struct catref *cur;
    uint64_t gen;
    int built;
    struct hutch_shapes *shapes; /* what tools without outputSchema returned */
};

struct hutch_upstreams *hutch_bridge_upstreams(struct hutch_bridge *b)
{
    return b ? b->u : NULL;
}

int hutch_bridge_new(struct hutch_upstreams *u, struct hutch_bridge **out,
                     struct hutch_err *err)
{
    struct hutch_bridge *b = calloc(1, sizeof(*b));
    if (!b)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    b->u = u;
    if (hutch_shapes_new(&b->shapes, err) < 0) {
        free(b);
        return -ENOMEM;
    }
    pthread_mutex_init(&b->mu, NULL);
    *out = b;
    return 0;
}

struct hutch_shapes *hutch_bridge_shapes(struct hutch_bridge *b)
{
    return b->shapes;
}

static void catref_drop(struct catref *r)
{
    if (r && --r->refs == 0) {
        hutch_catalog_free(r->cat);
        free(r);
    }
}

void hutch_bridge_free(struct hutch_bridge *b)
{
    if (!b)
        return;
    catref_drop(b->cur);
    hutch_shapes_free(b->shapes);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Rebuild when the generation moved (or on first use).  Called locked. */
static void refresh(struct hutch_bridge *b)
{
    uint64_t gen = b->u ? hutch_upstreams_generation(b->u) : 0;
    struct hutch_catalog *cat = NULL;
    struct hutch_err err = {0};
    struct catref *r;
    cJSON *tools;

    if (b->built && gen == b->gen)
        return;
    tools = b->u ? hutch_upstreams_tools(b->u) : cJSON_CreateArray();
    if (!tools || hutch_catalog_build(tools, &cat, &err) < 0) {
        hutch_warn("building the tool catalog: %s",
                   err.msg[0] ? err.msg : "out of memory");
        cJSON_Delete(tools);
        return;
    }
    cJSON_Delete(tools);
    r = calloc(1, sizeof(*r));
    if (!r) {
        hutch_catalog_free(cat);
        return;
    }
    r->cat = cat;
    r->refs = 1;
    catref_drop(b->cur);
    b->cur = r;
    b->gen = gen;
    b->built = 1;
    {
        const cJSON *w;
        cJSON_ArrayForEach(w, hutch_catalog_warnings(cat))
        {
            if (cJSON_IsString(w))
                hutch_warn("tool catalog: %s", w->valuestring);
        }
    }
}

struct hutch_catalog *hutch_bridge_catalog_get(struct hutch_bridge *b, void **ref)
{
    struct hutch_catalog *c = NULL;
    pthread_mutex_lock(&b->mu);
    refresh(b);
    *ref = b->cur;
    if (b->cur) {
        b->cur->refs++;
        c = b->cur->cat;
    }
    pthread_mutex_unlock(&b->mu);
    return c;
}

void hutch_bridge_catalog_put(struct hutch_bridge *b, void *ref)
{
    if (!ref)
        return;
    pthread_mutex_lock(&b->mu);
    catref_drop(ref);
    pthread_mutex_unlock(&b->mu);
}

static cJSON *content_value(const cJSON *item)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(item, "type");
    if (!cJSON_IsString(type))
        return cJSON_Duplicate(item, 1);
    if (strcmp(type->valuestring, "text") == 0) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "text");
        cJSON *parsed;
        if (!cJSON_IsString(text))
            return cJSON_CreateNull();
        /* "parsed as JSON when it is JSON": objects and arrays only, so the
         * text "42" or "true" a tool meant as text stays text. */
        parsed = cJSON_Parse(text->valuestring);
        if (parsed && (cJSON_IsObject(parsed) || cJSON_IsArray(parsed)))
            return parsed;
        cJSON_Delete(parsed);
        return cJSON_CreateString(text->valuestring);
    }
    /* image, audio, resource, resource_link: the object itself carries the
     * mime type and the (base64) bytes or the text. */
    return cJSON_Duplicate(item, 1);
}

/* The value of a CallToolResult, taken out of `res` where it is one whole
 * member (structuredContent): no second copy of a large result is held
 * while res still is. */
static cJSON *take_result_value(cJSON *res)
{
    cJSON *sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
    if (sc && !cJSON_IsNull(sc))
        return cJSON_DetachItemViaPointer(res, sc);
    return hutch_bridge_result_value(res);
}

cJSON *hutch_bridge_result_value(const cJSON *res)
{
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
    cJSON *list;
    const cJSON *it;
    int n;

    if (sc && !cJSON_IsNull(sc))
        return cJSON_Duplicate(sc, 1);
    if (!cJSON_IsArray(content))
        return cJSON_CreateNull();
    n = cJSON_GetArraySize(content);
    if (n == 0)
        return cJSON_CreateNull();
    if (n == 1)
        return content_value(cJSON_GetArrayItem(content, 0));
    list = cJSON_CreateArray();
    cJSON_ArrayForEach(it, content)
    {
        cJSON_AddItemToArray(list, content_value(it));
    }
    return list;
}

/* The text of an error result, for the exception's message. */
static char *error_text(const cJSON *res)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content"), *it;
    size_t cap = 2048, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = '\0';
    cJSON_ArrayForEach(it, content)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(it, "text");
        if (cJSON_IsString(text) && n < cap - 1) {
            int w =
                snprintf(out + n, cap - n, "%s%s", n ? "\n" : "", text->valuestring);
            n = w < 0 ? n : (n + (size_t)w >= cap ? cap - 1 : n + (size_t)w);
        }
    }
    if (!out[0])
        snprintf(out, cap, "the tool reported an error without a message");
    return out;
}

/* A tool of a server that is not ready (crashed and restarting, or failed
 * to start) is absent from the catalog; say that rather than "unknown". */
static int server_down(struct hutch_bridge *b, const char *tool, char *msg, size_t len)
{
    const char *dot = strchr(tool, '.');
    struct hutch_upstream_status *st;
    size_t n;
    int down = 0;
    if (!dot || hutch_upstreams_snapshot(b->u, &st, &n) < 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = st[i].server;
        const char *state = hutch_upstream_state_name(st[i].state);
        const char *why = st[i].error[0] ? st[i].error : NULL;
        if (strlen(name) == (size_t)(dot - tool) &&
            strncasecmp(name, tool, (size_t)(dot - tool)) == 0 &&
            st[i].state != HUTCH_UPSTREAM_READY) {
            bool never = !hutch_upstream_started(st[i].state);
            snprintf(msg, len, "upstream server \"%s\" is %s%s%s%s", name, state,
                     why ? ": " : "", why ? why : "",
                     never ? " (in the servers file)" : "; try again shortly");
            down = 1;
            break;
        }
    }
    free(st);
    return down;
}

static int fail(struct hutch_tool_reply *reply, int r, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct hutch_tool_reply *reply, int r, const char *code,
                const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    reply->code = code;
    reply->message = strdup(buf);
    return r;
}

int hutch_bridge_unknown(struct hutch_bridge *b, const char *tool,
                         struct hutch_tool_reply *reply)
{
    char msg[512];
    if (b->u && server_down(b, tool, msg, sizeof(msg)))
        return fail(reply, -EHOSTDOWN, "upstream", "%s", msg);
    if (!b->u)
        return fail(reply, -ENOENT, "unknown_tool",
                    "unknown tool \"%.256s\": no upstream MCP servers are configured "
                    "(start hutch with --servers FILE)",
                    tool);
    return fail(reply, -ENOENT, "unknown_tool",
                "unknown tool \"%.256s\" (use search_tools or `hutch tools` to see "
                "what exists; names are server.tool)",
                tool);
}

/* What the upstream's answer (r, res: taken) makes of reply. */
static int finish(struct hutch_bridge *b, const char *principal,
                  const struct hutch_catalog_entry *e, int r, cJSON *res,
                  const struct hutch_err *err, struct hutch_tool_reply *reply)
{
    if (r == -ETIMEDOUT)
        r = fail(reply, r, "timeout", "%s: %s", e->qualified, err->msg);
    else if (r == -E2BIG)
        r = fail(reply, r, "too_large", "%s: %s", e->qualified, err->msg);
    else if (r < 0)
        r = fail(reply, r, "upstream", "%s: %s", e->qualified,
                 err->msg[0] ? err->msg : strerror(-r));
    if (r < 0) {
        cJSON_Delete(res);
        return r;
    }
    if (reply->want_raw)
        reply->raw = cJSON_Duplicate(res, 1);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError"))) {
        reply->code = "upstream";
        reply->message = error_text(res);
        r = -EREMOTEIO;
    } else {
        reply->result = take_result_value(res);
        r = reply->result ? 0 : fail(reply, -ENOMEM, "internal", "out of memory");
        /* A declared outputSchema says more than any observation. */
        if (r == 0 &&
            !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(e->def, "outputSchema")))
            hutch_shapes_observe(b->shapes, principal, e->qualified, reply->result);
    }
    cJSON_Delete(res);
    return r;
}

/* What the program called, by the upstream's own names (a Python
 * identifier like get_sum stands for get-sum), and whether its arguments
 * fit the tool's inputSchema: 0, or negative with reply saying why. */
static int prepare(const struct hutch_catalog_entry *e, const cJSON *args,
                   struct hutch_tool_reply *reply)
{
    char msg[512];

    reply->tool = strdup(e->qualified);
    reply->server = strdup(e->server);
    if (hutch_schema_validate(cJSON_GetObjectItemCaseSensitive(e->def, "inputSchema"),
                              args, msg, sizeof(msg)) < 0)
        return fail(reply, -EINVAL, "invalid_args", "%s: %s", e->qualified, msg);
    return 0;
}

int hutch_bridge_call(struct hutch_bridge *b, const char *principal,
                      const struct hutch_catalog_entry *e, const cJSON *args,
                      int timeout_ms, struct hutch_tool_reply *reply)
{
    struct hutch_err err = {0};
    cJSON *res = NULL;
    int r = prepare(e, args, reply);

    if (r < 0)
        return r;
    r = hutch_upstreams_call(b->u, e->server, e->tool, args, timeout_ms, &res, &err);
    return finish(b, principal, e, r, res, &err, reply);
}

/* An asynchronous call on its way (hutch_bridge_call_start). */
struct bcall {
    struct hutch_bridge *b;
    const char *principal;
    const struct hutch_catalog_entry *e;
    struct hutch_tool_reply *reply;
    hutch_tool_done_fn done;
    void *arg;
};

static void bcall_done(void *arg, int r, cJSON *res, struct hutch_err *err)
{
    struct bcall bc = *(struct bcall *)arg;

    free(arg);
    r = finish(bc.b, bc.principal, bc.e, r, res, err, bc.reply);
    bc.done(bc.arg, r, bc.reply);
}

int hutch_bridge_call_start(struct hutch_bridge *b, const char *principal,
                            const struct hutch_catalog_entry *e, const cJSON *args,
                            int timeout_ms, struct hutch_tool_reply *reply,
                            hutch_tool_done_fn done, void *arg)
{
    struct hutch_err err = {0};
    struct bcall *bc;
    int r;

    if (reply->want_raw)
        return 0; /* the direct tools' callers wait for it themselves */
    if ((r = prepare(e, args, reply)) < 0)
        return r;
    if (!(bc = malloc(sizeof(*bc))))
        return fail(reply, -ENOMEM, "internal", "out of memory");
    *bc = (struct bcall){b, principal, e, reply, done, arg};
    r = hutch_upstreams_call_start(b->u, e->server, e->tool, args, timeout_ms,
                                   bcall_done, bc, &err);
    if (r > 0)
        return 1; /* bc is bcall_done's */
    free(bc);
    if (r == 0) {
        /* Not for this server: hutch_bridge_call starts from scratch. */
        free(reply->tool);
        free(reply->server);
        reply->tool = reply->server = NULL;
        return 0;
    }
    return finish(b, principal, e, r, NULL, &err, reply);
}

const struct hutch_catalog_entry *
hutch_bridge_find(struct hutch_bridge *b, const char *tool, int timeout_ms, void **ref)
{
    struct hutch_catalog *cat = hutch_bridge_catalog_get(b, ref);
    const struct hutch_catalog_entry *e = cat ? hutch_catalog_find(cat, tool) : NULL;
    const char *dot = strchr(tool, '.');

    if (e || !b->u || !dot ||
        !hutch_upstreams_wait_started(b->u, tool, (size_t)(dot - tool),
                                      hutch_now_ms() + (uint64_t)timeout_ms))
        return e;
    /* Its server settled: look again in the catalog that brought. */
    hutch_bridge_catalog_put(b, *ref);
    cat = hutch_bridge_catalog_get(b, ref);
    return cat ? hutch_catalog_find(cat, tool) : NULL;
}

int hutch_bridge_tool(void *arg, const char *tool, const cJSON *args, int timeout_ms,
                      struct hutch_tool_reply *reply)
{
    struct hutch_bridge *b = arg;
    void *ref;
    const struct hutch_catalog_entry *e = hutch_bridge_find(b, tool, timeout_ms, &ref);
    int r = e ? hutch_bridge_call(b, "local", e, args, timeout_ms, reply)
              : hutch_bridge_unknown(b, tool, reply);
    hutch_bridge_catalog_put(b, ref);
    return r;
}
