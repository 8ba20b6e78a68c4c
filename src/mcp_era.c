/* mcp_era.c — one message from a client, parsed, and one decision about
 * it: legacy (2025, sessions) or modern (2026-07-28, stateless), with the
 * modern era's protocol errors.  See mcp_era.h for the rules.  The checks
 * run in the order of the revision's validation ladder (the official SDK's
 * classifyInboundRequest, then validateStandardRequestHeaders), so that a
 * request wrong in several ways gets the error a conforming server gives.
 *
 * Not here: what a modern request does once admitted (mcp_server.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "caps.h"
#include "mcp_era.h"
#include "util.h"
#include "wire.h"

/* The methods (mcp_methods.def): the 2026-07-28 revision removed
 * initialize, ping, logging/setLevel and resources/(un)subscribe; hutch
 * offers no prompts, completions or subscriptions/listen (server/discover
 * says so), so those are "method not found" in that era. */
const struct hutch_mcp_method hutch_mcp_methods[] = {
#define MCP_METHOD(name, eras, init, mirror, handler) {name, eras, init, mirror},
#include "mcp_methods.def"
#undef MCP_METHOD
};
const size_t hutch_mcp_nmethods =
    sizeof(hutch_mcp_methods) / sizeof(hutch_mcp_methods[0]);

const struct hutch_mcp_method *hutch_mcp_method_find(const char *name)
{
    for (size_t i = 0; name && i < hutch_mcp_nmethods; i++)
        if (!strcmp(name, hutch_mcp_methods[i].name))
            return &hutch_mcp_methods[i];
    return NULL;
}

/* The body field Mcp-Name mirrors (SEP-2243): the method's row says; a
 * method of the tasks extension hutch does not serve is routed by task
 * too (SEP-2663). */
static const char *name_source(const char *method)
{
    const struct hutch_mcp_method *m = hutch_mcp_method_find(method);
    if (m)
        return m->mirror;
    return !strncmp(method, "tasks/", 6) ? "taskId" : NULL;
}

int hutch_mcp_version_modern(const char *version)
{
    return version && strcmp(version, HUTCH_MCP_MODERN_PROTOCOL) == 0;
}

cJSON *hutch_mcp_modern_versions(void)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString(HUTCH_MCP_MODERN_PROTOCOL));
    return a;
}

/* Revision names are ISO dates: from 2026-07-28 on (and anything that sorts
 * after it, such as an unknown "v999") is the modern era's business. */
static int era_is_modern(const char *version)
{
    return strcmp(version, HUTCH_MCP_MODERN_PROTOCOL) >= 0;
}

void hutch_mcp_verdict_clear(struct hutch_mcp_verdict *v)
{
    cJSON_Delete(v->data);
    v->data = NULL;
}

/* A header value without the optional whitespace around it (RFC 9110 5.5),
 * as a span of the header (no copy, no length limit). */
struct span {
    const char *p; /* NULL: the header is absent */
    size_t n;
};

static struct span trimmed(const char *h)
{
    struct span s = {h, 0};
    if (!h)
        return s;
    while (*s.p == ' ' || *s.p == '\t')
        s.p++;
    s.n = strlen(s.p);
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

/* The header, present, says exactly `value`. */
static int span_is(struct span s, const char *value)
{
    return s.p && strlen(value) == s.n && memcmp(s.p, value, s.n) == 0;
}

static int refuse(struct hutch_mcp_verdict *v, struct hutch_err *err, int code,
                  unsigned status, cJSON *data, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int refuse(struct hutch_mcp_verdict *v, struct hutch_err *err, int code,
                  unsigned status, cJSON *data, const char *fmt, ...)
{
    va_list ap;
    char text[HUTCH_ERR_MSG];

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    v->code = code;
    v->http_status = status;
    cJSON_Delete(v->data);
    v->data = data;
    return hutch_err_set(err, -EPROTO, "%s", text);
}

static int mismatch(struct hutch_mcp_verdict *v, struct hutch_err *err,
                    const char *header, const char *expected, const char *why)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "header", header);
    if (expected)
        cJSON_AddStringToObject(d, "expected", expected);
    return refuse(v, err, HUTCH_RPC_HEADER_MISMATCH, 400, d, "Header mismatch: %s",
                  why);
}

static int bad_envelope(struct hutch_mcp_verdict *v, struct hutch_err *err,
                        const char *key, const char *problem)
{
    cJSON *d = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(d, "envelope");
    cJSON_AddStringToObject(e, "key", key);
    cJSON_AddStringToObject(e, "problem", problem);
    return refuse(v, err, HUTCH_RPC_INVALID_PARAMS, 400, d,
                  "Invalid params: _meta[\"%s\"] %s", key, problem);
}

/* The _meta envelope of a request that claims the modern era. */
static int check_envelope(const cJSON *meta, struct hutch_mcp_verdict *v,
                          struct hutch_err *err)
{
    const cJSON *ver =
        cJSON_GetObjectItemCaseSensitive(meta, HUTCH_MCP_META_PROTOCOL_VERSION);
    const cJSON *caps =
        cJSON_GetObjectItemCaseSensitive(meta, HUTCH_MCP_META_CLIENT_CAPS);
    const cJSON *info =
        cJSON_GetObjectItemCaseSensitive(meta, HUTCH_MCP_META_CLIENT_INFO);

    if (!cJSON_IsString(ver) || !ver->valuestring[0])
        return bad_envelope(v, err, HUTCH_MCP_META_PROTOCOL_VERSION,
                            "must be a protocol version string");
    if (!caps)
        return bad_envelope(v, err, HUTCH_MCP_META_CLIENT_CAPS, "is missing");
    if (!cJSON_IsObject(caps))
        return bad_envelope(v, err, HUTCH_MCP_META_CLIENT_CAPS, "must be an object");
    /* clientInfo is a SHOULD: absent is fine, malformed is not. */
    if (info && !(cJSON_IsObject(info) &&
                  cJSON_IsString(cJSON_GetObjectItemCaseSensitive(info, "name")) &&
                  cJSON_IsString(cJSON_GetObjectItemCaseSensitive(info, "version"))))
        return bad_envelope(v, err, HUTCH_MCP_META_CLIENT_INFO,
                            "must be an object with string name and version");
    v->version = ver->valuestring;
    v->client_caps = caps;
    return 0;
}

/* Mcp-Name against the body (HTTP, modern requests): the value as sent or
 * as a "=?base64?…?=" sentinel. */
static int check_name_header(const char *method, const cJSON *params, struct span hn,
                             struct hutch_mcp_verdict *v, struct hutch_err *err)
{
    const char *field = name_source(method);
    const cJSON *body = field ? cJSON_GetObjectItemCaseSensitive(params, field) : NULL;
    const char *want = cJSON_IsString(body) ? body->valuestring : NULL;
    unsigned char *dec = NULL;
    size_t dn = 0;
    int same;

    if (!field)
        return 0;
    if (!hn.p)
        return want ? mismatch(v, err, "Mcp-Name", want,
                               "the required Mcp-Name header is absent")
                    : 0;
    if (hn.n >= 11 && !strncmp(hn.p, "=?base64?", 9) &&
        !memcmp(hn.p + hn.n - 2, "?=", 2)) {
        if (hutch_base64_decode(hn.p + 9, hn.n - 11, &dec, &dn) < 0 ||
            memchr(dec, '\0', dn) || !hutch_utf8_valid((const char *)dec, dn)) {
            free(dec);
            return mismatch(v, err, "Mcp-Name", NULL,
                            "the Mcp-Name header is not valid Base64 of UTF-8 text");
        }
    }
    same = !want ||
           (dec ? strlen(want) == dn && !memcmp(want, dec, dn) : span_is(hn, want));
    free(dec);
    if (!same)
        return mismatch(v, err, "Mcp-Name", want,
                        "the Mcp-Name header does not match the body");
    return 0;
}

/* The revision a header names is a modern one (see era_is_modern). */
static int span_modern(struct span s)
{
    char buf[sizeof(HUTCH_MCP_MODERN_PROTOCOL)];
    size_t n = s.n < sizeof(buf) - 1 ? s.n : sizeof(buf) - 1;
    if (!s.p)
        return 0;
    /* Compared over the length of a revision name: a longer header that
     * starts with one sorts after it too. */
    memcpy(buf, s.p, n);
    buf[n] = '\0';
    return strcmp(buf, HUTCH_MCP_MODERN_PROTOCOL) >= 0;
}

int hutch_mcp_classify(const cJSON *msg, const struct hutch_mcp_headers *headers,
                       struct hutch_mcp_verdict *v, struct hutch_err *err)
{
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    struct span hv = {0}, hm = {0}, hn = {0};
    const char *meth;
    int claim, r;

    memset(v, 0, sizeof(*v));
    if (headers) {
        hv = trimmed(headers->protocol_version);
        hm = trimmed(headers->method);
        hn = trimmed(headers->name);
    }
    if (!cJSON_IsString(method))
        return 0; /* a response from the client: 2025 session traffic */
    meth = method->valuestring;
    claim = cJSON_IsObject(meta) &&
            cJSON_HasObjectItem(meta, HUTCH_MCP_META_PROTOCOL_VERSION);

    if (!id) { /* a notification: its header decides when its body cannot */
        const cJSON *ver = claim ? cJSON_GetObjectItemCaseSensitive(
                                       meta, HUTCH_MCP_META_PROTOCOL_VERSION)
                                 : NULL;
        if (claim && !cJSON_IsString(ver))
            return bad_envelope(v, err, HUTCH_MCP_META_PROTOCOL_VERSION,
                                "must be a protocol version string");
        if (claim && hv.p && !span_is(hv, ver->valuestring))
            return mismatch(v, err, "MCP-Protocol-Version", ver->valuestring,
                            "MCP-Protocol-Version does not match the body's _meta");
        if (!claim && !span_modern(hv))
            return 0;
        if (hm.p && !span_is(hm, meth))
            return mismatch(v, err, "Mcp-Method", meth,
                            "Mcp-Method does not match the body's method");
        v->era = HUTCH_MCP_MODERN;
        v->version = claim ? ver->valuestring : NULL;
        return 0;
    }

    /* initialize is the 2025 handshake, unless a valid modern envelope
     * says otherwise (then the modern era answers "method not found"). */
    if (!strcmp(meth, "initialize") && claim) {
        struct hutch_mcp_verdict probe = {0};
        struct hutch_err perr = HUTCH_ERR_INIT;
        r = check_envelope(meta, &probe, &perr);
        hutch_mcp_verdict_clear(&probe);
        if (r < 0 || !era_is_modern(probe.version))
            claim = 0;
    }
    if (!claim) {
        if (span_modern(hv)) {
            if (!strcmp(meth, "initialize"))
                return mismatch(v, err, "MCP-Protocol-Version", NULL,
                                "initialize (the 2025 handshake) sent with a 2026 "
                                "MCP-Protocol-Version");
            cJSON *d = cJSON_CreateObject();
            cJSON *e = cJSON_AddObjectToObject(d, "envelope");
            cJSON *miss = cJSON_AddArrayToObject(e, "missing");
            if (!cJSON_IsObject(meta)) {
                cJSON_AddItemToArray(miss, cJSON_CreateString("_meta"));
            } else {
                cJSON_AddItemToArray(
                    miss, cJSON_CreateString(HUTCH_MCP_META_PROTOCOL_VERSION));
                if (!cJSON_HasObjectItem(meta, HUTCH_MCP_META_CLIENT_CAPS))
                    cJSON_AddItemToArray(
                        miss, cJSON_CreateString(HUTCH_MCP_META_CLIENT_CAPS));
            }
            return refuse(v, err, HUTCH_RPC_INVALID_PARAMS, 400, d,
                          "Invalid params: MCP-Protocol-Version names a 2026 "
                          "revision, but params._meta does not carry %s",
                          HUTCH_MCP_META_PROTOCOL_VERSION);
        }
        return 0; /* 2025: the session's business */
    }

    v->era = HUTCH_MCP_MODERN;
    if ((r = check_envelope(meta, v, err)) < 0)
        return r;
    if (hv.p && !span_is(hv, v->version))
        return mismatch(v, err, "MCP-Protocol-Version", v->version,
                        "MCP-Protocol-Version does not match the body's _meta");
    if (hm.p && !span_is(hm, meth))
        return mismatch(v, err, "Mcp-Method", meth,
                        "Mcp-Method does not match the body's method");
    if (!hutch_mcp_version_modern(v->version)) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "supported", hutch_mcp_modern_versions());
        cJSON_AddStringToObject(d, "requested", v->version);
        return refuse(v, err, HUTCH_RPC_UNSUPPORTED_VERSION, 400, d,
                      "Unsupported protocol version: hutch speaks %s per request "
                      "(and 2025-11-25, 2025-06-18 through initialize)",
                      HUTCH_MCP_MODERN_PROTOCOL);
    }
    if (headers) { /* the standard headers every modern request carries */
        if (!hv.p)
            return mismatch(v, err, "MCP-Protocol-Version", v->version,
                            "the required MCP-Protocol-Version header is absent");
        if (!hm.p)
            return mismatch(v, err, "Mcp-Method", meth,
                            "the required Mcp-Method header is absent");
        if ((r = check_name_header(meth, params, hn, v, err)) < 0)
            return r;
    }
    {
        const struct hutch_mcp_method *row = hutch_mcp_method_find(meth);
        if (row && (row->eras & MCP_ERA_2026))
            return 0;
    }
    return refuse(v, err, HUTCH_RPC_METHOD_NOT_FOUND, 404, NULL,
                  "Method not found: %.128s", meth);
}

void hutch_mcp_stamp_result(cJSON *result, const struct hutch_mcp_cache *cache)
{
    if (!cJSON_IsObject(result))
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(result, "resultType");
    cJSON_AddStringToObject(result, "resultType", "complete");
    if (!cache)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(result, "ttlMs");
    cJSON_DeleteItemFromObjectCaseSensitive(result, "cacheScope");
    cJSON_AddNumberToObject(result, "ttlMs", cache->ttl_ms);
    cJSON_AddStringToObject(result, "cacheScope",
                            cache->public_scope ? "public" : "private");
}

/* --- one message ------------------------------------------------------------- */

cJSON *hutch_mcp_error_response(const cJSON *id, int code, const char *message,
                                cJSON *data)
{
    cJSON *msg = cJSON_CreateObject(), *e;
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddItemToObject(msg, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    e = cJSON_AddObjectToObject(msg, "error");
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
    if (data)
        cJSON_AddItemToObject(e, "data", data);
    return msg;
}

static void junk(struct hutch_mcp_msg *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void junk(struct hutch_mcp_msg *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, sizeof(m->why), fmt, ap);
    va_end(ap);
    m->refused = 1;
    m->answer = 1;
    m->v.code = code;
    m->v.http_status = 400;
}

static int valid_id(const cJSON *id)
{
    /* The range first: converting a double outside int64_t's is undefined
     * (fuzz_mcp found an id of 8.9e81). */
    return cJSON_IsString(id) ||
           (cJSON_IsNumber(id) && id->valuedouble >= -9223372036854775808.0 &&
            id->valuedouble < 9223372036854775808.0 &&
            id->valuedouble == (double)(int64_t)id->valuedouble);
}

void hutch_mcp_msg_parse(const char *json, size_t len,
                         const struct hutch_mcp_headers *headers,
                         struct hutch_mcp_msg *m)
{
    const cJSON *ver, *method, *id, *params;
    struct hutch_err err = HUTCH_ERR_INIT;

    memset(m, 0, sizeof(*m));
    if (len > HUTCH_MCP_MAX_MESSAGE)
        return junk(m, HUTCH_RPC_INVALID_REQUEST, "message of %zu bytes exceeds %u",
                    len, HUTCH_MCP_MAX_MESSAGE);
    if (!hutch_utf8_valid(json, len))
        return junk(m, HUTCH_RPC_PARSE_ERROR,
                    "Parse error: the message is not valid UTF-8");
    if (hutch_json_check_text(json, len, HUTCH_JSON_MAX_TREE, "a message", &err) < 0)
        return junk(m, HUTCH_RPC_INVALID_REQUEST, "%s", err.msg);
    m->json = cJSON_ParseWithLength(json, len);
    if (!m->json)
        return junk(m, HUTCH_RPC_PARSE_ERROR,
                    "Parse error: the message is not valid JSON");
    if (cJSON_IsArray(m->json))
        return junk(m, HUTCH_RPC_INVALID_REQUEST,
                    "Invalid Request: JSON-RPC batches are not supported (MCP "
                    "2025-06-18 removed them); send one message at a time");
    if (!cJSON_IsObject(m->json) || hutch_json_depth(m->json) > HUTCH_MCP_MAX_DEPTH)
        return junk(m, HUTCH_RPC_INVALID_REQUEST,
                    "Invalid Request: not a JSON-RPC object");
    ver = cJSON_GetObjectItemCaseSensitive(m->json, "jsonrpc");
    method = cJSON_GetObjectItemCaseSensitive(m->json, "method");
    id = cJSON_GetObjectItemCaseSensitive(m->json, "id");
    params = cJSON_GetObjectItemCaseSensitive(m->json, "params");
    if (!method && (cJSON_GetObjectItemCaseSensitive(m->json, "result") ||
                    cJSON_GetObjectItemCaseSensitive(m->json, "error")))
        return; /* a response to a request hutch never sends: ignored */
    if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0 ||
        !cJSON_IsString(method) || (id && !valid_id(id)) ||
        (params && !cJSON_IsObject(params))) {
        junk(m, HUTCH_RPC_INVALID_REQUEST,
             "Invalid Request: needs \"jsonrpc\": \"2.0\", a string \"method\", an "
             "integer or string \"id\" and object \"params\"");
        m->id = id && valid_id(id) ? id : NULL;
        m->answer = id != NULL || !cJSON_IsString(method);
        return;
    }
    m->id = id;
    m->method = method->valuestring;
    m->params = params;
    m->answer = id != NULL;
    /* cJSON ends a string at an escaped NUL: "a\u0000b" would be taken as
     * the name, path or program "a".  No string of a request may hold one. */
    {
        char where[160];
        int r = hutch_json_find_nul(m->json, json, len, where, sizeof(where));
        if (r < 0)
            junk(m, HUTCH_RPC_INTERNAL_ERROR, "out of memory");
        else if (r > 0)
            junk(m, HUTCH_RPC_INVALID_PARAMS,
                 "Invalid params: %s holds a NUL character (\\u0000), which no "
                 "string hutch takes may hold (a name, a path or a program; send a "
                 "file's binary content with \"encoding\": \"base64\")",
                 where);
        if (r != 0) {
            m->answer = id != NULL;
            return;
        }
    }
    if (hutch_mcp_classify(m->json, headers, &m->v, &err) < 0) {
        m->refused = 1;
        m->protocol_error = 1;
        snprintf(m->why, sizeof(m->why), "%s", err.msg);
    }
}

void hutch_mcp_msg_clear(struct hutch_mcp_msg *m)
{
    hutch_mcp_verdict_clear(&m->v);
    cJSON_Delete(m->json);
    m->json = NULL;
}

char *hutch_mcp_msg_refusal(struct hutch_mcp_msg *m)
{
    cJSON *r = hutch_mcp_error_response(m->id, m->v.code, m->why, m->v.data);
    char *text;
    m->v.data = NULL; /* taken over */
    text = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return text;
}
