/* upstream_xheader.c — SEP-2243's custom headers (MCP 2026-07-28, Streamable
 * HTTP "Custom Headers from Tool Parameters"): a tool's inputSchema may
 * mark a parameter with "x-mcp-header": "<Name>", and a client mirrors that
 * argument of a tools/call into an "Mcp-Param-<Name>" header.  Here: the
 * check of a tool's annotations (an invalid one drops the tool; upstream.c's
 * fetch_tools), and the header lines of one call, each value encoded as the
 * spec says (plain when it is safe visible ASCII, else
 * "=?base64?<UTF-8 in base64>?=").  Argument values come from the agent's
 * program: a value is bounded (HUTCH_UPSTREAM_MAX_PARAM_VALUE) and anything
 * but visible ASCII and inner spaces goes in base64, so no CR or LF can
 * reach a header.
 *
 * Not here: sending them (upstream_http.c), the standard Mcp-Method and
 * Mcp-Name headers (upstream_http.c too). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "caps.h"
#include "upstream_int.h"
#include "upstream_parse.h"
#include "util.h"

#define XH_KEY    "x-mcp-header"
#define XH_PREFIX "Mcp-Param-"
#define B64_OPEN  "=?base64?"
#define B64_CLOSE "?="

/* The schema keywords a parameter is not "statically reachable" through:
 * an annotation under any of them makes the tool invalid. */
static const char *const unreachable_keys[] = {
    "items",
    "prefixItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "patternProperties",
    "dependentSchemas",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "$defs",
    "definitions",
};

/* Keywords whose value maps names to subschemas. */
static bool maps_names(const char *k)
{
    return !strcmp(k, "patternProperties") || !strcmp(k, "dependentSchemas") ||
           !strcmp(k, "$defs") || !strcmp(k, "definitions");
}

/* RFC 9110 token characters. */
static bool tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

struct walk {
    const char *names[HUTCH_UPSTREAM_MAX_PARAM_HEADERS];
    int n;
    char *why;
    size_t why_cap;
};

/* -EINVAL, with "parameter "<where>": <fmt ...>" in w->why; where and the
 * arguments are the server's text, so callers pass them cleaned. */
__attribute__((format(printf, 3, 4))) static int
fault(struct walk *w, const char *where, const char *fmt, ...)
{
    char shown[80];
    size_t off;
    va_list ap;

    if (!w->why_cap)
        return -EINVAL;
    up_clean_text(shown, sizeof(shown), where, strlen(where));
    snprintf(w->why, w->why_cap, "parameter \"%s\": ", shown);
    off = strlen(w->why);
    va_start(ap, fmt);
    vsnprintf(w->why + off, w->why_cap - off, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* One annotation: its name and the type of the parameter carrying it. */
static int check_one(struct walk *w, const cJSON *node, const char *where)
{
    const cJSON *v = get(node, XH_KEY), *type = get(node, "type");
    char shown[80];
    const char *name;
    size_t len;

    if (!cJSON_IsString(v) || !v->valuestring[0])
        return fault(w, where, "x-mcp-header is not a non-empty string");
    name = v->valuestring;
    len = strlen(name);
    up_clean_text(shown, sizeof(shown), name, len);
    if (len > HUTCH_UPSTREAM_MAX_PARAM_NAME)
        return fault(w, where, "x-mcp-header \"%s\" is too long", shown);
    for (size_t i = 0; i < len; i++)
        if (!tchar((unsigned char)name[i]))
            return fault(w, where,
                         "x-mcp-header \"%s\" is not an HTTP token (no spaces, control "
                         "characters, non-ASCII or delimiters)",
                         shown);
    if (!cJSON_IsString(type) ||
        (strcmp(type->valuestring, "string") && strcmp(type->valuestring, "integer") &&
         strcmp(type->valuestring, "boolean"))) {
        char tshown[40] = "(none)";
        if (cJSON_IsString(type))
            up_clean_text(tshown, sizeof(tshown), type->valuestring,
                          strlen(type->valuestring));
        return fault(w, where,
                     "x-mcp-header is only allowed on a string, integer or boolean "
                     "parameter, not on type %s",
                     tshown);
    }
    for (int i = 0; i < w->n; i++)
        if (!strcasecmp(w->names[i], name))
            return fault(w, where, "x-mcp-header \"%s\" is declared twice", shown);
    if (w->n == HUTCH_UPSTREAM_MAX_PARAM_HEADERS)
        return fault(w, where, "more than %d x-mcp-header parameters",
                     HUTCH_UPSTREAM_MAX_PARAM_HEADERS);
    w->names[w->n++] = name;
    return 0;
}

static int visit(struct walk *w, const cJSON *node, const char *where, bool reachable,
                 bool root)
{
    const cJSON *props, *c;
    int r;

    if (!cJSON_IsObject(node))
        return 0;
    if (get(node, XH_KEY)) {
        if (root || !reachable)
            return fault(w, where,
                         "x-mcp-header is only allowed on a parameter reached through "
                         "\"properties\" alone (not under items, oneOf, $defs ...)");
        if ((r = check_one(w, node, where)) < 0)
            return r;
    }
    props = get(node, "properties");
    if (cJSON_IsObject(props))
        cJSON_ArrayForEach(c, props)
        {
            if ((r = visit(w, c, c->string, reachable, false)) < 0)
                return r;
        }
    for (size_t k = 0; k < sizeof(unreachable_keys) / sizeof(*unreachable_keys); k++) {
        const cJSON *sub = get(node, unreachable_keys[k]);
        if (!sub)
            continue;
        if (cJSON_IsArray(sub) ||
            (cJSON_IsObject(sub) && maps_names(unreachable_keys[k]))) {
            cJSON_ArrayForEach(c, sub)
            {
                if ((r = visit(w, c, where, false, false)) < 0)
                    return r;
            }
        } else if ((r = visit(w, sub, where, false, false)) < 0) {
            return r;
        }
    }
    return 0;
}

int hutch_upstream_xheader_check(const cJSON *input_schema, char *why, size_t why_cap)
{
    struct walk w = {.why = why, .why_cap = why_cap};

    if (why_cap)
        why[0] = '\0';
    return visit(&w, input_schema, "(root)", true, true);
}

/* --- the headers of one call --------------------------------------------- */

/* An argument as the spec writes it: strings as they are, booleans as
 * true/false, numbers in decimal (integers without a fraction; none beyond
 * 2^53, none infinite).  NULL for what has no header: null, objects,
 * arrays and such numbers (the spec: a null or absent argument has none;
 * a server's own validation deals with the wrong types). */
static const char *value_text(const cJSON *v, char *num, size_t cap)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    if (cJSON_IsTrue(v))
        return "true";
    if (cJSON_IsFalse(v))
        return "false";
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        double d = v->valuedouble;
        if (d == floor(d)) {
            if (fabs(d) > 9007199254740991.0)
                return NULL;
            snprintf(num, cap, "%.0f", d);
            return num;
        }
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(num, cap, "%.*g", prec, d);
            if (strtod(num, NULL) == d)
                break;
        }
        return num;
    }
    return NULL;
}

/* The spec's rule, made stricter for what reaches a header: plain only when
 * non-empty visible ASCII with inner spaces, and not looking like the
 * base64 form itself. */
static bool needs_base64(const char *v, size_t len)
{
    size_t no = strlen(B64_OPEN), nc = strlen(B64_CLOSE);

    if (!len || v[0] == ' ' || v[len - 1] == ' ')
        return true;
    if (len >= no + nc && !memcmp(v, B64_OPEN, no) &&
        !memcmp(v + len - nc, B64_CLOSE, nc))
        return true;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return true;
    return false;
}

struct build {
    char **lines;
    int n;
    struct hutch_err *err;
};

static int emit(struct build *b, const char *name, const char *where, const cJSON *v)
{
    char num[40], *b64 = NULL, *line;
    const char *text = value_text(v, num, sizeof(num));
    size_t len, need, cap;
    int r = 0;

    if (!text)
        return 0;
    len = strlen(text);
    if (needs_base64(text, len)) {
        if (len > HUTCH_UPSTREAM_MAX_PARAM_VALUE)
            goto too_long;
        if (!(b64 = hutch_base64_encode(text, len)))
            return hutch_err_set(b->err, -ENOMEM, "out of memory");
    }
    need = b64 ? strlen(B64_OPEN) + strlen(b64) + strlen(B64_CLOSE) : len;
    if (need > HUTCH_UPSTREAM_MAX_PARAM_VALUE)
        goto too_long;
    cap = strlen(XH_PREFIX) + strlen(name) + 2 + need + 1;
    if (!(line = malloc(cap))) {
        free(b64);
        return hutch_err_set(b->err, -ENOMEM, "out of memory");
    }
    if (b64)
        snprintf(line, cap, XH_PREFIX "%s: " B64_OPEN "%s" B64_CLOSE, name, b64);
    else
        snprintf(line, cap, XH_PREFIX "%s: %s", name, text);
    b->lines[b->n++] = line;
    free(b64);
    return 0;
too_long:
    free(b64);
    {
        char shown[80];
        up_clean_text(shown, sizeof(shown), where, strlen(where));
        r = hutch_err_set(b->err, -E2BIG,
                          "argument \"%s\" is too long for its header " XH_PREFIX
                          "%s (at most %d bytes, encoded)",
                          shown, name, HUTCH_UPSTREAM_MAX_PARAM_VALUE);
    }
    return r;
}

/* Follow "properties" only (the tool passed the check), the argument
 * beside it in args. */
static int build_visit(struct build *b, const cJSON *node, const cJSON *arg,
                       const char *where, int depth)
{
    const cJSON *v = get(node, XH_KEY), *props = get(node, "properties"), *c;
    int r;

    if (depth && cJSON_IsString(v) && b->n < HUTCH_UPSTREAM_MAX_PARAM_HEADERS &&
        (r = emit(b, v->valuestring, where, arg)) < 0)
        return r;
    if (!cJSON_IsObject(props) || !cJSON_IsObject(arg))
        return 0;
    cJSON_ArrayForEach(c, props)
    {
        const cJSON *a = get(arg, c->string);
        if (a && cJSON_IsObject(c) &&
            (r = build_visit(b, c, a, c->string, depth + 1)) < 0)
            return r;
    }
    return 0;
}

int hutch_upstream_xheader_lines(const cJSON *input_schema, const cJSON *args,
                                 char ***lines, struct hutch_err *err)
{
    struct build b = {.err = err};
    int r;

    *lines = NULL;
    if (!(b.lines = strv_new(HUTCH_UPSTREAM_MAX_PARAM_HEADERS)))
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = build_visit(&b, input_schema, args, "", 0);
    if (r < 0 || !b.n) {
        up_strv_free(b.lines);
        return r < 0 ? r : 0;
    }
    *lines = b.lines;
    return 0;
}

int up_xheader_call(struct server *s, const cJSON *params, char ***lines,
                    struct hutch_err *err)
{
    const cJSON *name = get(params, "name"), *t;
    int r = 0;

    *lines = NULL;
    if (!cJSON_IsString(name))
        return 0;
    pthread_mutex_lock(&s->lock);
    cJSON_ArrayForEach(t, s->tools)
    {
        const cJSON *n = get(t, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name->valuestring)) {
            r = hutch_upstream_xheader_lines(get(t, "inputSchema"),
                                             get(params, "arguments"), lines, err);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}
