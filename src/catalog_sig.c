/* catalog_sig.c — what a tool looks like to the program that calls it:
 * the identifier rule for tools.<server>.<tool> (hutch_ident, stated in
 * catalog.h), and the Python signature and TypeScript declaration
 * generated from a tool's JSON Schema, with hutch_catalog_type for a
 * return type alone (an outputSchema, or an observed shape: shape.c).
 * Building the catalog, lookup and search live in catalog.c; checking
 * arguments against a schema in schema.c.
 *
 * Schemas come from upstream servers and are untrusted: they are walked to
 * a fixed depth with a step budget ($ref chains included, resolved by
 * schema.c's hutch_schema_deref), and every
 * generated string has a maximum (HUTCH_SIG_* in caps.h); a schema too
 * large for that is rendered shallower, at worst as the generic form.  No
 * state outside the strings returned (no locks). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "catalog.h"
#include "catalog_int.h"
#include "schema.h"

/* --- identifiers -------------------------------------------------------------- */

/* Words an identifier may not be.  Python 3.11's keyword.kwlist (the soft
 * keywords match, case, type and _ are legal after a dot, so they stay
 * usable); JavaScript's reserved and strict-mode words (legal after a dot in
 * JavaScript, but a name should read the same in both languages and in the
 * signatures); and the names the runners' tools objects answer themselves
 * instead of treating as a server or tool: call (tools.call in both
 * runners), _server (a slot of hutch_runner.py's server object), then,
 * toJSON and constructor (runner.js leaves them alone because await,
 * JSON.stringify and inspection probe them).  One list serves both parts so
 * the rule stays one sentence; a tool literally named "call" pays for it
 * with tools.<server>.call_. */
static const char *const reserved[] = {
    /* Python */
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from",
    "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
    "raise", "return", "try", "while", "with", "yield",
    /* JavaScript, beyond the words Python shares */
    "case", "catch", "const", "debugger", "default", "delete", "do", "enum", "export",
    "extends", "false", "function", "implements", "instanceof", "interface", "let",
    "new", "null", "package", "private", "protected", "public", "static", "super",
    "switch", "this", "throw", "true", "typeof", "var", "void",
    /* the runners' own members */
    "call", "_server", "then", "toJSON", "constructor"};

static const char *const py_keywords[] = {
    "False",  "None",   "True",    "and",      "as",       "assert", "async",
    "await",  "break",  "class",   "continue", "def",      "del",    "elif",
    "else",   "except", "finally", "for",      "from",     "global", "if",
    "import", "in",     "is",      "lambda",   "nonlocal", "not",    "or",
    "pass",   "raise",  "return",  "try",      "while",    "with",   "yield"};

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return 1;
    return 0;
}

/* Beyond catalog.h's rule: a name starting with "__" keeps one leading
 * underscore, because both runners refuse dunder attributes (and Python
 * mangles them inside a class body); and the result is cut at HUTCH_CATALOG_MAX_IDENT
 * bytes.  Non-ASCII characters become one "_" each (not one per byte). */
int hutch_ident(const char *name, char *out, size_t len)
{
    char buf[HUTCH_CATALOG_MAX_IDENT + 2];
    const unsigned char *p = (const unsigned char *)name;
    size_t n = 0, skip = 0;
    int in_seq = 0;

    if (!name || !out || !len)
        return -EINVAL;
    if (*p >= '0' && *p <= '9')
        buf[n++] = '_';
    for (; *p && n < HUTCH_CATALOG_MAX_IDENT; p++) {
        if (*p >= 0x80) {
            if (in_seq && (*p & 0xC0) == 0x80)
                continue; /* the rest of a UTF-8 sequence */
            in_seq = 1;
            buf[n++] = '_';
            continue;
        }
        in_seq = 0;
        buf[n++] = ascii_alnum(*p) || *p == '_' ? (char)*p : '_';
    }
    while (skip + 1 < n && buf[skip] == '_' && buf[skip + 1] == '_')
        skip++;
    if (n - skip == 0) {
        buf[0] = '_';
        n = 1;
    }
    buf[n] = '\0';
    if (in_list(buf + skip, reserved, sizeof(reserved) / sizeof(*reserved))) {
        buf[n++] = '_'; /* reserved words are short: no overflow */
        buf[n] = '\0';
    }
    if (n - skip + 1 > len)
        return -ENOSPC;
    memcpy(out, buf + skip, n - skip + 1);
    return 0;
}

/* A keyword argument Python accepts in a call: ASCII identifier, no
 * keyword. */
static int py_param_ok(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!ascii_alnum((unsigned char)*p) && *p != '_')
            return 0;
    return !in_list(s, py_keywords, sizeof(py_keywords) / sizeof(*py_keywords));
}

/* A property name TypeScript accepts unquoted. */
static int ts_ident(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!ascii_alnum((unsigned char)*p) && *p != '_' && *p != '$')
            return 0;
    return 1;
}
/* --- signatures ------------------------------------------------------------------ */

struct gen {
    const cJSON *root; /* where "#/..." references point */
    int ts;            /* TypeScript, else Python */
    int max_depth;     /* deeper subschemas are Any */
    unsigned steps;
    int err; /* -ENOMEM, or -E2BIG past HUTCH_SIG_MAX_BYTES or HUTCH_SIG_MAX_STEPS */
};

#define ANY(g) ((g)->ts ? "any" : "Any")

static char *gen_strdup(struct gen *g, const char *s)
{
    char *r = strdup(s);
    if (!r && !g->err)
        g->err = -ENOMEM;
    return r;
}

/* Follow $ref chains (schema.h); NULL when one does not resolve or the
 * depth runs out. */
static const cJSON *deref(struct gen *g, const cJSON *s, int *depth)
{
    return hutch_schema_deref(g->root, s, depth, g->max_depth);
}

static int is_required(const cJSON *req, const char *key)
{
    const cJSON *e;
    if (!cJSON_IsArray(req))
        return 0;
    cJSON_ArrayForEach(e, req)
    {
        if (cJSON_IsString(e) && !strcmp(e->valuestring, key))
            return 1;
    }
    return 0;
}

/* Literal["a", "b"] | None, or "a" | "b" | null; NULL without an error
 * when the values are not all scalars (then the type says more). */
static char *render_literals(struct gen *g, const cJSON *const *v, size_t n)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    size_t shown = 0;
    int has_null = 0;

    for (size_t i = 0; i < n; i++)
        if (cJSON_IsArray(v[i]) || cJSON_IsObject(v[i]) || cJSON_IsRaw(v[i]) ||
            cJSON_IsInvalid(v[i]))
            return NULL;
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsNull(v[i])) {
            has_null = 1;
            continue;
        }
        sb_puts(&b, shown ? (g->ts ? " | " : ", ") : (g->ts ? "" : "Literal["));
        shown++;
        if (cJSON_IsString(v[i])) {
            sb_quote(&b, v[i]->valuestring);
        } else if (cJSON_IsBool(v[i])) {
            sb_puts(&b, cJSON_IsTrue(v[i]) ? (g->ts ? "true" : "True")
                                           : (g->ts ? "false" : "False"));
        } else {
            char *num = cJSON_PrintUnformatted(v[i]);
            if (!num) {
                b.err = -ENOMEM;
                break;
            }
            sb_puts(&b, num);
            cJSON_free(num);
        }
    }
    if (shown && !g->ts)
        sb_puts(&b, "]");
    if (has_null)
        sb_puts(&b,
                shown ? (g->ts ? " | null" : " | None") : (g->ts ? "null" : "None"));
    return sb_take(&b, &g->err);
}

struct ulist {
    char *v[HUTCH_SIG_MAX_UNION];
    size_t n;
    int any; /* a member is Any, or there are too many: the union is Any */
};

static void ul_add(struct gen *g, struct ulist *u, char *t)
{
    if (!t)
        return;
    if (!strcmp(t, ANY(g)) || u->n == HUTCH_SIG_MAX_UNION) {
        u->any = 1;
        free(t);
        return;
    }
    for (size_t i = 0; i < u->n; i++) {
        if (!strcmp(u->v[i], t)) {
            free(t);
            return;
        }
    }
    u->v[u->n++] = t;
}

/* "A | B" with None/null last; NULL without an error when the union says
 * nothing (empty, or Any). */
static char *ul_join(struct gen *g, struct ulist *u)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    const char *none = g->ts ? "null" : "None";
    char *r = NULL;
    size_t shown = 0;

    if (!g->err && !u->any && u->n) {
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < u->n; i++) {
                if ((strcmp(u->v[i], none) == 0) != pass)
                    continue;
                if (shown++)
                    sb_puts(&b, " | ");
                sb_puts(&b, u->v[i]);
            }
        }
        r = sb_take(&b, &g->err);
    }
    for (size_t i = 0; i < u->n; i++)
        free(u->v[i]);
    u->n = 0;
    u->any = 0; /* ready for the next union of the same schema */
    return r;
}

static char *render(struct gen *g, const cJSON *s, int depth);

/* { a: number; note?: string } */
static char *ts_object(struct gen *g, const cJSON *s, const cJSON *props, int depth)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    const cJSON *req = get(s, "required"), *p;
    size_t n = 0;

    if (cJSON_GetArraySize(props) > HUTCH_SIG_MAX_PROPS) {
        g->err = -E2BIG;
        return NULL;
    }
    cJSON_ArrayForEach(p, props)
    {
        char *t = render(g, p, depth + 1);
        if (!t)
            break;
        sb_puts(&b, n++ ? "; " : "{ ");
        if (ts_ident(p->string))
            sb_puts(&b, p->string);
        else
            sb_quote(&b, p->string);
        sb_puts(&b, is_required(req, p->string) ? ": " : "?: ");
        sb_puts(&b, t);
        free(t);
    }
    sb_puts(&b, n ? " }" : "{}");
    if (g->err)
        b.err = b.err ? b.err : g->err;
    return sb_take(&b, &g->err);
}

/* A "|" outside braces, brackets and quotes: "a | b" but not
 * "{ x: a | b }", whose [] binds to the whole object. */
static int top_union(const char *t)
{
    int nest = 0, quoted = 0;
    for (; *t; t++) {
        if (quoted) {
            if (*t == '\\' && t[1])
                t++;
            else if (*t == '"')
                quoted = 0;
        } else if (*t == '"') {
            quoted = 1;
        } else if (*t == '{' || *t == '[' || *t == '<' || *t == '(') {
            nest++;
        } else if (*t == '}' || *t == ']' || *t == '>' || *t == ')') {
            nest--;
        } else if (*t == '|' && nest == 0) {
            return 1;
        }
    }
    return 0;
}

/* {"a": float, "note": NotRequired[str]}: an object with properties, in
 * the inline TypedDict form the dict-argument signatures use, wherever it
 * nests (a parameter, a list's items, a return type), as TypeScript spells
 * it { a: number; note?: string }. */
static char *py_object(struct gen *g, const cJSON *s, const cJSON *props, int depth)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    const cJSON *req = get(s, "required"), *p;
    size_t n = 0;

    if (cJSON_GetArraySize(props) > HUTCH_SIG_MAX_PROPS) {
        g->err = -E2BIG;
        return NULL;
    }
    sb_puts(&b, "{");
    cJSON_ArrayForEach(p, props)
    {
        int required = is_required(req, p->string);
        char *t = render(g, p, depth + 1);
        if (!t)
            break;
        if (n++)
            sb_puts(&b, ", ");
        sb_quote(&b, p->string);
        sb_puts(&b, required ? ": " : ": NotRequired[");
        sb_puts(&b, t);
        sb_puts(&b, required ? "" : "]");
        free(t);
    }
    sb_puts(&b, "}");
    if (g->err)
        b.err = b.err ? b.err : g->err;
    return sb_take(&b, &g->err);
}

static char *render_type(struct gen *g, const cJSON *s, const char *t, int depth)
{
    static const char *const scalars[][3] = {{"string", "str", "string"},
                                             {"integer", "int", "number"},
                                             {"number", "float", "number"},
                                             {"boolean", "bool", "boolean"},
                                             {"null", "None", "null"}};
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);

    for (size_t i = 0; i < sizeof(scalars) / sizeof(*scalars); i++)
        if (!strcmp(t, scalars[i][0]))
            return gen_strdup(g, scalars[i][g->ts ? 2 : 1]);
    if (!strcmp(t, "array")) {
        const cJSON *items = get(s, "items");
        char *elem =
            cJSON_IsObject(items) ? render(g, items, depth + 1) : gen_strdup(g, ANY(g));
        if (!elem)
            return NULL;
        if (!g->ts) {
            sb_puts(&b, "list[");
            sb_puts(&b, elem);
            sb_puts(&b, "]");
        } else if (top_union(elem)) { /* a union needs Array<…> */
            sb_puts(&b, "Array<");
            sb_puts(&b, elem);
            sb_puts(&b, ">");
        } else {
            sb_puts(&b, elem);
            sb_puts(&b, "[]");
        }
        free(elem);
        return sb_take(&b, &g->err);
    }
    if (!strcmp(t, "object")) {
        const cJSON *props = get(s, "properties"),
                    *extra = get(s, "additionalProperties");
        if (g->ts && cJSON_IsObject(props))
            return ts_object(g, s, props, depth);
        if (cJSON_IsObject(props) && props->child)
            return py_object(g, s, props, depth);
        if (!cJSON_IsObject(props) && cJSON_IsObject(extra)) {
            char *v = render(g, extra, depth + 1);
            if (!v)
                return NULL;
            sb_puts(&b, g->ts ? "Record<string, " : "dict[str, ");
            sb_puts(&b, v);
            sb_puts(&b, g->ts ? ">" : "]");
            free(v);
            return sb_take(&b, &g->err);
        }
        return gen_strdup(g, g->ts ? "Record<string, any>" : "dict[str, Any]");
    }
    return gen_strdup(g, ANY(g));
}

/* The type of one schema; NULL only with g->err set. */
static char *render(struct gen *g, const cJSON *s, int depth)
{
    static const char *const unions[] = {"anyOf", "oneOf"};
    const cJSON *k, *e;
    struct ulist u = {0};
    char *r;

    if (g->err)
        return NULL;
    if (++g->steps > HUTCH_SIG_MAX_STEPS) {
        g->err = -E2BIG;
        return NULL;
    }
    s = deref(g, s, &depth);
    if (!cJSON_IsObject(s) || depth > g->max_depth)
        return gen_strdup(g, ANY(g));

    if ((k = get(s, "const"))) {
        if ((r = render_literals(g, &k, 1)) || g->err)
            return r;
    }
    k = get(s, "enum");
    if (cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0 &&
        cJSON_GetArraySize(k) <= HUTCH_SIG_MAX_ENUM) {
        const cJSON *vals[HUTCH_SIG_MAX_ENUM];
        size_t n = 0;
        cJSON_ArrayForEach(e, k)
        {
            vals[n++] = e;
        }
        if ((r = render_literals(g, vals, n)) || g->err)
            return r;
    }
    for (size_t i = 0; i < 2; i++) {
        k = get(s, unions[i]);
        if (!cJSON_IsArray(k))
            continue;
        cJSON_ArrayForEach(e, k)
        {
            ul_add(g, &u, render(g, e, depth + 1));
        }
        if ((r = ul_join(g, &u)) || g->err)
            return r;
    }
    k = get(s, "allOf");
    if (cJSON_IsArray(k)) {
        /* The first member that says something: usually the only one, or a
         * $ref next to members that only add a description. */
        cJSON_ArrayForEach(e, k)
        {
            if (!(r = render(g, e, depth + 1)))
                return NULL;
            if (strcmp(r, ANY(g)))
                return r;
            free(r);
        }
    }
    k = get(s, "type");
    if (cJSON_IsString(k))
        return render_type(g, s, k->valuestring, depth);
    if (cJSON_IsArray(k)) {
        cJSON_ArrayForEach(e, k)
        {
            if (cJSON_IsString(e))
                ul_add(g, &u, render_type(g, s, e->valuestring, depth));
        }
        if ((r = ul_join(g, &u)) || g->err)
            return r;
    }
    if (cJSON_IsObject(get(s, "properties")))
        return render_type(g, s, "object", depth);
    if (get(s, "items"))
        return render_type(g, s, "array", depth);
    return gen_strdup(g, ANY(g));
}

/* def get_sum(*, a: float, b: float, note: str | None = None) -> Any
 *
 * Keyword-only parameters, required first.  When a property name cannot be
 * a keyword argument ("from", "file-path"), the tool is called with a dict
 * (tools.s.t({"from": …})), so the signature says that instead:
 *   def copy(args: {"from": str, "to": NotRequired[str]}, /) -> Any */
static char *py_sig(struct gen *g, const char *fname, const cJSON *in, const char *ret)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    int depth = 0, dict_mode = 0;
    const cJSON *schema = deref(g, in, &depth), *props = get(schema, "properties");
    const cJSON *req = get(schema, "required"), *p;
    size_t n = 0;

    sb_puts(&b, "def ");
    sb_puts(&b, fname);
    if (!cJSON_IsObject(props)) {
        sb_puts(&b, "(**kwargs: Any) -> ");
        sb_puts(&b, ret);
        return sb_take(&b, &g->err);
    }
    if (cJSON_GetArraySize(props) > HUTCH_SIG_MAX_PROPS) {
        g->err = -E2BIG;
        hutch_buf_free(&b.b);
        return NULL;
    }
    cJSON_ArrayForEach(p, props)
    {
        dict_mode |= !py_param_ok(p->string);
    }
    sb_puts(&b, dict_mode ? "(args: {" : props->child ? "(*, " : "(");
    for (int pass = 0; pass < 2; pass++) {
        cJSON_ArrayForEach(p, props)
        {
            int required = is_required(req, p->string);
            char *t;
            if (required != !pass)
                continue;
            if (!(t = render(g, p, depth + 1)))
                break;
            if (n++)
                sb_puts(&b, ", ");
            if (dict_mode) {
                sb_quote(&b, p->string);
                sb_puts(&b, ": ");
                sb_puts(&b, required ? "" : "NotRequired[");
                sb_puts(&b, t);
                sb_puts(&b, required ? "" : "]");
            } else {
                sb_puts(&b, p->string);
                sb_puts(&b, ": ");
                sb_puts(&b, t);
                if (!required)
                    sb_puts(&b, !strcmp(t, "Any") || ends_with(t, "None")
                                    ? " = None"
                                    : " | None = None");
            }
            free(t);
        }
    }
    sb_puts(&b, dict_mode ? "}, /) -> " : ") -> ");
    sb_puts(&b, ret);
    if (g->err)
        b.err = b.err ? b.err : g->err;
    return sb_take(&b, &g->err);
}

/* get_sum(args: { a: number; b: number; note?: string }): Promise<any>;
 * args is optional when no property is required. */
static char *ts_sig(struct gen *g, const char *fname, const cJSON *in, const char *ret)
{
    struct sbuf b = SBUF_INIT(HUTCH_SIG_MAX_BYTES);
    int depth = 0, any_required = 0;
    const cJSON *schema = deref(g, in, &depth), *props = get(schema, "properties"), *p;
    char *obj;

    sb_puts(&b, fname);
    if (!cJSON_IsObject(props)) {
        sb_puts(&b, "(args?: Record<string, any>): Promise<");
    } else {
        if (!(obj = ts_object(g, schema, props, depth))) {
            hutch_buf_free(&b.b);
            return NULL;
        }
        cJSON_ArrayForEach(p, props)
        {
            any_required |= is_required(get(schema, "required"), p->string);
        }
        sb_puts(&b, any_required ? "(args: " : "(args?: ");
        sb_puts(&b, obj);
        sb_puts(&b, "): Promise<");
        free(obj);
    }
    sb_puts(&b, ret);
    sb_puts(&b, ">");
    return sb_take(&b, &g->err);
}

char *hutch_catalog_type(const cJSON *schema, int ts)
{
    /* Spelled out to HUTCH_SIG_MAX_DEPTH, then shallower until it fits. */
    static const int depths[] = {HUTCH_SIG_MAX_DEPTH, 3, 2, 1};
    const cJSON *t = get(schema, "type");
    int obj = cJSON_IsString(t) ? !strcmp(t->valuestring, "object")
                                : cJSON_IsObject(get(schema, "properties"));

    for (size_t i = 0; i < sizeof(depths) / sizeof(*depths); i++) {
        struct gen g = {.root = schema, .ts = ts, .max_depth = depths[i]};
        char *r = render(&g, schema, 0);
        if (r && !g.err && strlen(r) <= HUTCH_SIG_MAX_RETURN_BYTES)
            return r;
        free(r);
        if (g.err == -ENOMEM)
            return NULL;
    }
    return strdup(obj ? (ts ? "Record<string, any>" : "dict[str, Any]")
                      : (ts ? "any" : "Any"));
}

/* Both signatures of an entry, nested objects spelled out in both
 * languages alike (Python {"name": str, "tags": NotRequired[list[str]]},
 * TypeScript { name: string; tags?: string[] }).  A schema too large or
 * intricate to render whole is rendered shallower, at the same depth in
 * both (deeper parts are Any / any), and at worst gets the generic form;
 * the schema itself is in the FULL detail.  The return type is the
 * outputSchema's when there is one, else Any (an observed shape replaces
 * it in search results: shape.c). */
int cat_make_sigs(const cJSON *def, const char *py_tool, char **python_sig,
                  char **ts_decl)
{
    static const int depths[] = {HUTCH_SIG_MAX_DEPTH, 3, 2, 1};
    const cJSON *in = get(def, "inputSchema"), *out = get(def, "outputSchema");
    char fallback[HUTCH_CATALOG_MAX_IDENT + 96 + HUTCH_SIG_MAX_RETURN_BYTES];
    char *ret[2] = {NULL, NULL}, *sig[2] = {NULL, NULL};
    int r = -ENOMEM;

    for (int ts = 0; ts < 2; ts++) {
        ret[ts] = cJSON_IsObject(out) ? hutch_catalog_type(out, ts)
                                      : strdup(ts ? "any" : "Any");
        if (!ret[ts])
            goto out;
    }
    for (size_t i = 0; i < sizeof(depths) / sizeof(*depths) && !sig[1]; i++) {
        for (int ts = 0; ts < 2; ts++) {
            struct gen g = {.root = in, .ts = ts, .max_depth = depths[i]};
            sig[ts] = ts ? ts_sig(&g, py_tool, in, ret[ts])
                         : py_sig(&g, py_tool, in, ret[ts]);
            if (sig[ts] && g.err) { /* cannot happen: err always drops the string */
                free(sig[ts]);
                sig[ts] = NULL;
            }
            if (!sig[ts] && g.err != -E2BIG)
                goto out;
            if (!sig[ts]) { /* too big at this depth: both go shallower */
                free(sig[0]);
                sig[0] = NULL;
                break;
            }
        }
    }
    for (int ts = 0; ts < 2 && !sig[1]; ts++) {
        if (ts)
            snprintf(fallback, sizeof(fallback),
                     "%s(args?: Record<string, any>): Promise<%s>", py_tool, ret[ts]);
        else
            snprintf(fallback, sizeof(fallback), "def %s(**kwargs: Any) -> %s", py_tool,
                     ret[ts]);
        if (!(sig[ts] = strdup(fallback)))
            goto out;
    }
    *python_sig = sig[0];
    *ts_decl = sig[1];
    sig[0] = sig[1] = NULL;
    r = 0;
out:
    for (int ts = 0; ts < 2; ts++) {
        free(ret[ts]);
        free(sig[ts]);
    }
    return r;
}
