/* schema.c — checking a tool call's arguments against the tool's JSON Schema
 * before they go upstream, so an agent gets a precise message
 * (`args.b: expected number, got string`) instead of an upstream's stack
 * trace.  Only the keywords listed in schema.h are enforced; anything else
 * is ignored, because the upstream validates again and refusing a valid call
 * over a keyword we do not understand would be worse than letting the
 * upstream decide.  Generating signatures from schemas lives in
 * catalog_sig.c.
 *
 * Schemas come from upstream servers and are untrusted too: keywords of the
 * wrong JSON type are ignored, nesting is capped, and a step budget stops
 * schemas whose anyOf/$ref structure would take exponential time. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "schema.h"

#define PATH_MAX_BYTES 256 /* the path shown in messages */
#define BRANCH_MSG     256 /* one anyOf/oneOf branch's message */
#define ENUM_SHOWN     200 /* bytes of allowed values listed */

struct vctx {
    const cJSON *root;
    unsigned long steps, max_steps;
    int limit; /* a cap was hit: never turned into success by anyOf or not */
    char *msg;
    size_t len;
    char path[PATH_MAX_BYTES];
    size_t plen;
};

static int validate(struct vctx *v, const cJSON *s, const cJSON *x, int depth);

__attribute__((format(printf, 2, 3))) static int fail(struct vctx *v, const char *fmt,
                                                      ...)
{
    va_list ap;
    int n;
    if (!v->msg || !v->len)
        return -EINVAL;
    n = snprintf(v->msg, v->len, "%s: ", v->path);
    if (n >= 0 && (size_t)n < v->len) {
        va_start(ap, fmt);
        vsnprintf(v->msg + n, v->len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int too_deep(struct vctx *v)
{
    v->limit = 1;
    return fail(v, "schema or value nested deeper than %d levels",
                HUTCH_SCHEMA_MAX_DEPTH);
}

/* JSON-quote `s` into out (truncated with "..." past a few dozen bytes: a
 * message names a key, it does not reproduce it). */
static void quote(char *out, size_t n, const char *s)
{
    size_t o = 0;
    const size_t room = n > 64 ? 64 : n;
    if (!n)
        return;
    out[o++] = '"';
    for (; *s && o + 8 < room; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, room - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    if (*s && o + 4 <= n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    if (o + 2 <= n)
        out[o++] = '"';
    out[o < n ? o : n - 1] = '\0';
}

static int is_ident(const char *s)
{
    if (!(*s == '_' || *s == '$' || (*s >= 'a' && *s <= 'z') ||
          (*s >= 'A' && *s <= 'Z')))
        return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || *s == '$' || (*s >= 'a' && *s <= 'z') ||
              (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* Append ".key", `["odd key"]` or "[3]" to the path; returns the length to
 * restore afterwards.  A path past the cap ends in "..." and stops growing. */
static size_t path_push(struct vctx *v, const char *key, int index)
{
    size_t saved = v->plen;
    char seg[80];
    int n;
    if (key && is_ident(key) && strlen(key) < 64) {
        n = snprintf(seg, sizeof(seg), ".%s", key);
    } else if (key) {
        char q[68];
        quote(q, sizeof(q), key);
        n = snprintf(seg, sizeof(seg), "[%s]", q);
    } else {
        n = snprintf(seg, sizeof(seg), "[%d]", index);
    }
    if (n < 0)
        return saved;
    if (v->plen + (size_t)n + 4 < sizeof(v->path)) {
        memcpy(v->path + v->plen, seg, (size_t)n + 1);
        v->plen += (size_t)n;
    } else if (v->plen + 4 <= sizeof(v->path) &&
               (v->plen < 3 || memcmp(v->path + v->plen - 3, "...", 3))) {
        memcpy(v->path + v->plen, "...", 4);
        v->plen += 3;
    }
    return saved;
}

static void path_pop(struct vctx *v, size_t saved)
{
    v->plen = saved;
    v->path[saved] = '\0';
}

static const char *type_name(const cJSON *x)
{
    if (cJSON_IsString(x))
        return "string";
    if (cJSON_IsNumber(x))
        return "number";
    if (cJSON_IsBool(x))
        return "boolean";
    if (cJSON_IsNull(x))
        return "null";
    if (cJSON_IsArray(x))
        return "array";
    if (cJSON_IsObject(x))
        return "object";
    return "invalid";
}

/* Whole numbers without libm: every double at or past 2^53 is whole. */
static int is_whole(double d)
{
    if (d != d || d - d != 0) /* NaN, infinities */
        return 0;
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
        return 1;
    return d == (double)(long long)d;
}

static void fmt_num(char *out, size_t n, double d)
{
    if (is_whole(d) && d < 1e15 && d > -1e15)
        snprintf(out, n, "%lld", (long long)d);
    else
        snprintf(out, n, "%.15g", d);
}

/* 1 when x is of JSON Schema type `t`; -1 when `t` is no type we know. */
static int type_is(const cJSON *x, const char *t)
{
    if (!strcmp(t, "string"))
        return cJSON_IsString(x);
    if (!strcmp(t, "number"))
        return cJSON_IsNumber(x);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(x) && is_whole(x->valuedouble);
    if (!strcmp(t, "boolean"))
        return cJSON_IsBool(x);
    if (!strcmp(t, "null"))
        return cJSON_IsNull(x);
    if (!strcmp(t, "array"))
        return cJSON_IsArray(x);
    if (!strcmp(t, "object"))
        return cJSON_IsObject(x);
    return -1;
}

static int check_type(struct vctx *v, const cJSON *t, const cJSON *x)
{
    char want[160];
    size_t w = 0;
    const cJSON *e;
    int known = 0;

    if (cJSON_IsString(t)) {
        if (type_is(x, t->valuestring) != 0)
            return 0;
        return fail(v, "expected %s, got %s", t->valuestring, type_name(x));
    }
    if (!cJSON_IsArray(t))
        return 0; /* hostile or broken schema: ignored */
    want[0] = '\0';
    cJSON_ArrayForEach(e, t)
    {
        int r;
        if (!cJSON_IsString(e))
            continue;
        r = type_is(x, e->valuestring);
        if (r != 0) /* a match, or a type we cannot judge: fail open */
            return 0;
        known++;
        if (w < sizeof(want)) {
            int n = snprintf(want + w, sizeof(want) - w, "%s%s", w ? " or " : "",
                             e->valuestring);
            w = n < 0 ? sizeof(want) : w + (size_t)n;
        }
    }
    if (!known)
        return 0;
    return fail(v, "expected %s, got %s", want, type_name(x));
}

/* "r", "w" — the allowed values, bounded. */
static void list_values(const cJSON *arr, char *out, size_t n)
{
    size_t o = 0;
    const cJSON *e;
    out[0] = '\0';
    cJSON_ArrayForEach(e, arr)
    {
        char *p = cJSON_PrintUnformatted(e);
        size_t pl;
        if (!p)
            break;
        pl = strlen(p);
        if (o + pl + 2 >= ENUM_SHOWN || o + pl + 8 >= n) {
            if (o + 6 < n)
                snprintf(out + o, n - o, "%s...", o ? ", " : "");
            cJSON_free(p);
            return;
        }
        o += (size_t)snprintf(out + o, n - o, "%s%s", o ? ", " : "", p);
        cJSON_free(p);
    }
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

/* A non-negative integer keyword, or -1 when absent or malformed. */
static double count_kw(const cJSON *s, const char *kw)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!cJSON_IsNumber(k) || k->valuedouble < 0 || !is_whole(k->valuedouble))
        return -1;
    return k->valuedouble;
}

static int check_number(struct vctx *v, const cJSON *s, double d)
{
    const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    const cJSON *xmin = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
    const cJSON *xmax = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    char b[40];

    /* Draft 4 spelled exclusivity as a boolean beside minimum/maximum. */
    if (cJSON_IsNumber(min)) {
        if (cJSON_IsTrue(xmin) ? !(d > min->valuedouble) : !(d >= min->valuedouble)) {
            fmt_num(b, sizeof(b), min->valuedouble);
            return fail(v, "must be %s %s", cJSON_IsTrue(xmin) ? ">" : ">=", b);
        }
    }
    if (cJSON_IsNumber(max)) {
        if (cJSON_IsTrue(xmax) ? !(d < max->valuedouble) : !(d <= max->valuedouble)) {
            fmt_num(b, sizeof(b), max->valuedouble);
            return fail(v, "must be %s %s", cJSON_IsTrue(xmax) ? "<" : "<=", b);
        }
    }
    if (cJSON_IsNumber(xmin) && !(d > xmin->valuedouble)) {
        fmt_num(b, sizeof(b), xmin->valuedouble);
        return fail(v, "must be > %s", b);
    }
    if (cJSON_IsNumber(xmax) && !(d < xmax->valuedouble)) {
        fmt_num(b, sizeof(b), xmax->valuedouble);
        return fail(v, "must be < %s", b);
    }
    return 0;
}

static int check_string(struct vctx *v, const cJSON *s, const char *str)
{
    double min = count_kw(s, "minLength"), max = count_kw(s, "maxLength");
    size_t n;
    if (min < 0 && max < 0)
        return 0;
    n = utf8_chars(str);
    if (min >= 0 && (double)n < min)
        return fail(v, "must be at least %.0f characters long, got %zu", min, n);
    if (max >= 0 && (double)n > max)
        return fail(v, "must be at most %.0f characters long, got %zu", max, n);
    return 0;
}

static int check_array(struct vctx *v, const cJSON *s, const cJSON *x, int depth)
{
    double min = count_kw(s, "minItems"), max = count_kw(s, "maxItems");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *tuple = NULL, *rest = items, *e;
    int n = cJSON_GetArraySize(x), ntuple = 0, i = 0;

    if (min >= 0 && (double)n < min)
        return fail(v, "must have at least %.0f items, got %d", min, n);
    if (max >= 0 && (double)n > max)
        return fail(v, "must have at most %.0f items, got %d", max, n);
    /* Tuples: "prefixItems" with "items" for the rest (2020-12), or an
     * array under "items" with "additionalItems" for the rest (draft 4-7). */
    if (cJSON_IsArray(prefix)) {
        tuple = prefix;
    } else if (cJSON_IsArray(items)) {
        tuple = items;
        rest = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    }
    if (tuple)
        ntuple = cJSON_GetArraySize(tuple);
    cJSON_ArrayForEach(e, x)
    {
        const cJSON *sub = i < ntuple ? cJSON_GetArrayItem(tuple, i) : rest;
        if (cJSON_IsObject(sub) || cJSON_IsBool(sub)) {
            size_t saved = path_push(v, NULL, i);
            int r = validate(v, sub, e, depth + 1);
            path_pop(v, saved);
            if (r < 0)
                return r;
        }
        i++;
    }
    return 0;
}

static int check_object(struct vctx *v, const cJSON *s, const cJSON *x, int depth)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *e;
    char q[68];

    if (!cJSON_IsObject(props))
        props = NULL;
    if (cJSON_IsArray(req)) {
        cJSON_ArrayForEach(e, req)
        {
            if (cJSON_IsString(e) &&
                !cJSON_GetObjectItemCaseSensitive(x, e->valuestring)) {
                quote(q, sizeof(q), e->valuestring);
                return fail(v, "missing required property %s", q);
            }
        }
    }
    /* Keys matched by patternProperties cannot be told apart without a
     * regex engine, so additionalProperties is not judged next to it. */
    if (cJSON_GetObjectItemCaseSensitive(s, "patternProperties"))
        extra = NULL;
    cJSON_ArrayForEach(e, x)
    {
        const cJSON *sub = NULL;
        size_t saved;
        int r;
        if (!e->string)
            continue;
        if (props && (sub = cJSON_GetObjectItemCaseSensitive(props, e->string))) {
            /* declared: its own schema */
        } else if (cJSON_IsFalse(extra)) {
            quote(q, sizeof(q), e->string);
            return fail(v, "unexpected property %s", q);
        } else if (cJSON_IsObject(extra)) {
            sub = extra;
        }
        if (!sub)
            continue;
        saved = path_push(v, e->string, 0);
        r = validate(v, sub, e, depth + 1);
        path_pop(v, saved);
        if (r < 0)
            return r;
    }
    return 0;
}

/* anyOf / oneOf: how many branches accept x; with none, msg lists why each
 * refused (the current path stripped, it is said once in front). */
static int count_matches(struct vctx *v, const cJSON *arr, const cJSON *x, int depth,
                         int stop_at, char *why, size_t why_len)
{
    char *saved_msg = v->msg;
    size_t saved_len = v->len, w = 0, plen = strlen(v->path);
    const cJSON *e;
    char branch[BRANCH_MSG];
    int matched = 0, i = 0;

    why[0] = '\0';
    cJSON_ArrayForEach(e, arr)
    {
        int r;
        v->msg = branch;
        v->len = sizeof(branch);
        branch[0] = '\0';
        r = validate(v, e, x, depth + 1);
        v->msg = saved_msg;
        v->len = saved_len;
        if (v->limit) {
            /* A cap hit inside a branch is the answer, not a mismatch. */
            if (saved_msg && saved_len)
                snprintf(saved_msg, saved_len, "%s", branch);
            return -1;
        }
        if (r == 0) {
            if (++matched >= stop_at)
                return matched;
        } else if (w + 16 < why_len) {
            const char *b = branch;
            int n;
            if (!strncmp(b, v->path, plen) && !strncmp(b + plen, ": ", 2))
                b += plen + 2;
            n = snprintf(why + w, why_len - w, "%s[%d] %s", w ? "; " : "", i, b);
            w = n < 0 ? why_len : w + (size_t)n;
        }
        i++;
    }
    return matched;
}

/* The one $ref resolver (schema.h): validation here, signatures in
 * catalog_sig.c. */
const cJSON *hutch_schema_ref(const cJSON *root, const char *ref)
{
    const cJSON *cur = root;
    const char *p;
    char seg[HUTCH_SCHEMA_MAX_POINTER];

    if (!ref || ref[0] != '#' || strlen(ref) >= HUTCH_SCHEMA_MAX_POINTER)
        return NULL; /* remote or anchor references: not followed */
    p = ref + 1;
    if (*p && *p != '/')
        return NULL;
    while (*p == '/') {
        size_t n = 0;
        for (p++; *p && *p != '/'; n++) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                seg[n] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else {
                seg[n] = *p++;
            }
        }
        seg[n] = '\0';
        if (cJSON_IsObject(cur)) {
            cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
        } else if (cJSON_IsArray(cur)) {
            char *end;
            long i = strtol(seg, &end, 10);
            if (!n || *end || i < 0 || i > HUTCH_SCHEMA_MAX_POINTER_INDEX)
                return NULL;
            cur = cJSON_GetArrayItem(cur, (int)i);
        } else {
            return NULL;
        }
        if (!cur)
            return NULL;
    }
    return cur;
}

const cJSON *hutch_schema_deref(const cJSON *root, const cJSON *s, int *depth,
                                int max_depth)
{
    const cJSON *ref;
    while (cJSON_IsObject(s) &&
           cJSON_IsString(ref = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        s = hutch_schema_ref(root, ref->valuestring);
        if (!s || ++*depth > max_depth)
            return NULL;
    }
    return s;
}

static int validate(struct vctx *v, const cJSON *s, const cJSON *x, int depth)
{
    const cJSON *k;
    char buf[ENUM_SHOWN + 16];
    int r;

    if (depth > HUTCH_SCHEMA_MAX_DEPTH)
        return too_deep(v);
    if (++v->steps > v->max_steps) {
        v->limit = 1;
        return fail(v, "schema too complex to check");
    }
    if (cJSON_IsFalse(s))
        return fail(v, "no value is allowed here");
    if (!cJSON_IsObject(s))
        return 0; /* true, absent, or not a schema at all */

    k = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(k)) {
        const cJSON *target = hutch_schema_ref(v->root, k->valuestring);
        /* The target is validated one level deeper, so a cycle of
         * references ends at the depth cap instead of looping. */
        if (target && (r = validate(v, target, x, depth + 1)) < 0)
            return r;
    }

    if ((k = cJSON_GetObjectItemCaseSensitive(s, "type")) &&
        (r = check_type(v, k, x)) < 0)
        return r;

    k = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(k)) {
        const cJSON *e;
        int found = 0;
        cJSON_ArrayForEach(e, k)
        {
            if (cJSON_Compare(e, x, 1)) {
                found = 1;
                break;
            }
        }
        if (!found) {
            list_values(k, buf, sizeof(buf));
            return fail(v, "must be one of %s", buf);
        }
    }
    k = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (k && !cJSON_Compare(k, x, 1)) {
        char *p = cJSON_PrintUnformatted(k);
        if (p && strlen(p) < ENUM_SHOWN)
            r = fail(v, "must be %s", p);
        else
            r = fail(v, "must be the constant given in the schema");
        cJSON_free(p);
        return r;
    }

    if (cJSON_IsNumber(x) && (r = check_number(v, s, x->valuedouble)) < 0)
        return r;
    if (cJSON_IsString(x) && (r = check_string(v, s, x->valuestring)) < 0)
        return r;
    if (cJSON_IsArray(x) && (r = check_array(v, s, x, depth)) < 0)
        return r;
    if (cJSON_IsObject(x) && (r = check_object(v, s, x, depth)) < 0)
        return r;

    k = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (cJSON_IsArray(k)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, k)
        {
            if ((r = validate(v, e, x, depth + 1)) < 0)
                return r;
        }
    }
    k = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0) {
        char why[BRANCH_MSG * 2];
        r = count_matches(v, k, x, depth, 1, why, sizeof(why));
        if (r < 0)
            return -EINVAL;
        if (r == 0)
            return fail(v, "matches none of anyOf: %s", why);
    }
    k = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0) {
        char why[BRANCH_MSG * 2];
        r = count_matches(v, k, x, depth, 2, why, sizeof(why));
        if (r < 0)
            return -EINVAL;
        if (r == 0)
            return fail(v, "matches none of oneOf: %s", why);
        if (r > 1)
            return fail(v,
                        "matches more than one schema of oneOf, expected exactly one");
    }
    k = cJSON_GetObjectItemCaseSensitive(s, "not");
    if (k && (cJSON_IsObject(k) || cJSON_IsBool(k))) {
        char *saved_msg = v->msg;
        size_t saved_len = v->len;
        v->msg = NULL;
        v->len = 0;
        r = validate(v, k, x, depth + 1);
        v->msg = saved_msg;
        v->len = saved_len;
        if (v->limit) /* the inner message was dropped: restate it */
            return fail(v, "schema too deep or complex to check");
        if (r == 0)
            return fail(v, "must not match the schema under \"not\"");
    }
    return 0;
}

/* Nodes of a value, counted as deep as validation can reach. */
static unsigned long count_nodes(const cJSON *x, int depth)
{
    unsigned long n = 1;
    const cJSON *e;
    if (depth > HUTCH_SCHEMA_MAX_DEPTH)
        return n;
    cJSON_ArrayForEach(e, x)
    {
        n += count_nodes(e, depth + 1);
    }
    return n;
}

int hutch_schema_validate(const cJSON *schema, const cJSON *value, char *msg,
                          size_t len)
{
    struct vctx v;

    if (msg && len)
        msg[0] = '\0';
    if (!schema)
        return 0;
    memset(&v, 0, sizeof(v));
    v.root = schema;
    v.msg = msg;
    v.len = len;
    memcpy(v.path, "args", 5);
    v.plen = 4;
    if (!value)
        return fail(&v, "no value");
    v.max_steps =
        HUTCH_SCHEMA_BASE_STEPS + HUTCH_SCHEMA_NODE_STEPS * count_nodes(value, 0);
    if (v.max_steps > HUTCH_SCHEMA_MAX_STEPS)
        v.max_steps = HUTCH_SCHEMA_MAX_STEPS;
    return validate(&v, schema, value, 0) < 0 ? -EINVAL : 0;
}
