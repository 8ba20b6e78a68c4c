/* shape.c — the store of observed result shapes (see shape.h): taking the
 * shape of one result, merging shapes, the cache file (its format, strict
 * loading, atomic saving) and putting observed return types into search
 * results.
 *
 * Not here: the type syntax of Python and TypeScript (catalog_sig.c renders the
 * JSON Schema a shape converts to), policy (search_tools passes may_see).
 *
 * Threads: one mutex (mu) guards the table of entries; a second (save_mu)
 * orders writes of the cache file, taken before mu so that a snapshot taken
 * later is never overwritten by an older one.  A tool call's worker thread
 * that finds a save due only tries save_mu: another thread saving is as
 * good.
 *
 * The table: one entry per (principal, tool), HUTCH_SHAPE_MAX_TOOLS in all;
 * a new entry in a full table takes the place of the least recently
 * observed entry of the principal holding the most (make_room).
 *
 * The file, version 2: {"hutch_shapes": 2, "principals": {"alice":
 * {"server.tool": {"calls": N, "shape": NODE}}}}, NODE = {"types":
 * ["object", ...], "objects": N, "keys": {"name": {"seen": N, "shape":
 * NODE}}, "open": true, "values": NODE, "items": NODE}.  Loading checks
 * every rule the merge keeps (caps, key and principal syntax, seen <=
 * objects) and refuses anything else whole.  Version 1 (one table for
 * every principal) is refused, saying why: whose calls its shapes came
 * from is not known, and showing them to anyone could be the leak this
 * version closes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "caps.h"
#include "log.h"
#include "shape.h"
#include "util.h"

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_INT = 4,
    T_NUM = 8,
    T_STR = 16,
    T_ARR = 32,
    T_OBJ = 64,
    T_ALL = 127,
};
static const char *const type_names[] = {"null",   "boolean", "integer", "number",
                                         "string", "array",   "object"};
#define NTYPES (sizeof(type_names) / sizeof(*type_names))

struct key;
struct shape {
    unsigned types;
    int open;             /* objects seen as a map: keys not kept */
    uint64_t objects;     /* objects merged in; a key seen in fewer is optional */
    struct key *keys;     /* closed objects, in first-seen order */
    size_t nkeys;         /* <= HUTCH_SHAPE_MAX_KEYS */
    struct shape *values; /* open: the merged value, NULL when none seen */
    struct shape *items;  /* arrays: the merged element, NULL when none seen */
};
struct key {
    char *name;
    uint64_t seen;
    struct shape *s;
};

struct tool {
    char *principal;
    char *name;
    uint64_t calls;
    uint64_t used; /* the store's clock when last observed: the oldest goes */
    struct shape *s;
};

struct hutch_shapes {
    pthread_mutex_t mu, save_mu;
    struct tool *t;
    size_t n;
    char *file;
    uint64_t clock;    /* observations so far (mu) */
    uint64_t changes;  /* bumped by every change (mu) */
    uint64_t saved;    /* changes when last written (save_mu) */
    uint64_t saved_ms; /* when (mu) */
};

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b > HUTCH_SHAPE_MAX_COUNT ? HUTCH_SHAPE_MAX_COUNT : a + b;
}

/* --- nodes ---------------------------------------------------------------- */

static void shape_free(struct shape *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nkeys; i++) {
        free(s->keys[i].name);
        shape_free(s->keys[i].s);
    }
    free(s->keys);
    shape_free(s->values);
    shape_free(s->items);
    free(s);
}

static size_t shape_count(const struct shape *s)
{
    size_t n = 1;
    if (!s)
        return 0;
    for (size_t i = 0; i < s->nkeys; i++)
        n += shape_count(s->keys[i].s);
    return n + shape_count(s->values) + shape_count(s->items);
}

/* A field name, not data: a plain identifier, [A-Za-z_][A-Za-z0-9_]*, at
 * most KEY_BYTES.  Anything else (paths, file names, dates, ids with dots or
 * spaces, "$ref", "content-type", text made to read as an instruction) makes
 * its object a map, so its text is never kept and never reaches a
 * signature. */
static int key_ok(const char *k)
{
    size_t n = 0;
    if (!k || !*k || (*k >= '0' && *k <= '9'))
        return 0;
    for (const char *p = k; *p; p++, n++) {
        unsigned char c = (unsigned char)*p;
        if (n >= HUTCH_SHAPE_MAX_KEY_BYTES)
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

/* A principal's name as the policy allows one (and "local", "http"): 1 to
 * HUTCH_MAX_PRINCIPAL_NAME of [A-Za-z0-9_.@+-]. */
static int principal_ok(const char *p)
{
    size_t n = 0;
    if (!p || !*p)
        return 0;
    for (; *p; p++, n++) {
        unsigned char c = (unsigned char)*p;
        if (n >= HUTCH_MAX_PRINCIPAL_NAME)
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("_.@+-", c)))
            return 0;
    }
    return 1;
}

/* Room for every key an object may keep: merges add keys in place. */
static struct key *keys_alloc(void)
{
    return calloc(HUTCH_SHAPE_MAX_KEYS, sizeof(struct key));
}

static struct key *find_key(struct shape *s, const char *name)
{
    for (size_t i = 0; i < s->nkeys; i++)
        if (!strcmp(s->keys[i].name, name))
            return &s->keys[i];
    return NULL;
}

static struct shape *shape_copy(const struct shape *b);

/* Merge b into a (b unchanged).  0, or -ENOMEM with a possibly partial
 * (still consistent) a. */
static int merge(struct shape *a, const struct shape *b);

/* a's objects become a map: every key's shape folds into values. */
static int make_open(struct shape *a)
{
    int r = 0;
    if (a->open)
        return 0;
    for (size_t i = 0; i < a->nkeys; i++) {
        if (!r && !a->values) {
            a->values = a->keys[i].s;
            a->keys[i].s = NULL;
        } else if (!r) {
            r = merge(a->values, a->keys[i].s);
        }
        free(a->keys[i].name);
        shape_free(a->keys[i].s);
    }
    free(a->keys);
    a->keys = NULL;
    a->nkeys = 0;
    a->open = 1;
    return r;
}

/* Fold shape v into a's map values. */
static int add_value(struct shape *a, const struct shape *v)
{
    if (!v)
        return 0;
    if (!a->values)
        return (a->values = shape_copy(v)) ? 0 : -ENOMEM;
    return merge(a->values, v);
}

/* Append a copy of key bk to a's keys (allocated on first use). */
static int add_key(struct shape *a, const struct key *bk)
{
    struct key *k;
    if (!a->keys && !(a->keys = keys_alloc()))
        return -ENOMEM;
    k = &a->keys[a->nkeys];
    k->name = strdup(bk->name);
    k->s = shape_copy(bk->s);
    k->seen = bk->seen;
    if (!k->name || !k->s) {
        free(k->name);
        shape_free(k->s);
        k->name = NULL;
        k->s = NULL;
        return -ENOMEM;
    }
    a->nkeys++;
    return 0;
}

static int merge_object(struct shape *a, const struct shape *b, int a_had)
{
    int r = 0;
    if (!a_had) { /* a had no objects: b's object part as it is */
        a->objects = b->objects;
        a->open = b->open;
        if (b->values && !(a->values = shape_copy(b->values)))
            return -ENOMEM;
        for (size_t i = 0; i < b->nkeys; i++)
            if ((r = add_key(a, &b->keys[i])) < 0)
                return r;
        return 0;
    }
    a->objects = add_sat(a->objects, b->objects);
    if (b->open && (r = make_open(a)) < 0)
        return r;
    if (a->open) {
        if (b->open)
            return add_value(a, b->values);
        for (size_t i = 0; i < b->nkeys && !r; i++)
            r = add_value(a, b->keys[i].s);
        return r;
    }
    for (size_t i = 0; i < b->nkeys; i++) {
        struct key *k = find_key(a, b->keys[i].name);
        if (k) {
            k->seen = add_sat(k->seen, b->keys[i].seen);
            if ((r = merge(k->s, b->keys[i].s)) < 0)
                return r;
            continue;
        }
        if (a->nkeys == HUTCH_SHAPE_MAX_KEYS) { /* too many names: a map */
            if ((r = make_open(a)) < 0)
                return r;
            for (; i < b->nkeys && !r; i++)
                r = add_value(a, b->keys[i].s);
            return r;
        }
        if ((r = add_key(a, &b->keys[i])) < 0)
            return r;
    }
    return 0;
}

static int merge(struct shape *a, const struct shape *b)
{
    int a_obj = (a->types & T_OBJ) != 0;
    if (!b)
        return 0;
    a->types |= b->types;
    if ((b->types & T_ARR) && b->items) {
        if (!a->items)
            a->items = shape_copy(b->items);
        else if (merge(a->items, b->items) < 0)
            return -ENOMEM;
        if (!a->items)
            return -ENOMEM;
    }
    if (b->types & T_OBJ)
        return merge_object(a, b, a_obj);
    return 0;
}

static struct shape *shape_copy(const struct shape *b)
{
    struct shape *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    if (merge(a, b) < 0) {
        shape_free(a);
        return NULL;
    }
    return a;
}

/* Below `depth` levels nothing is kept: objects become maps of unknown
 * values, arrays lists of unknown elements. */
static void trim(struct shape *s, int depth)
{
    if (!s)
        return;
    if (depth <= 0) {
        for (size_t i = 0; i < s->nkeys; i++) {
            free(s->keys[i].name);
            shape_free(s->keys[i].s);
        }
        free(s->keys);
        s->keys = NULL;
        s->nkeys = 0;
        s->open = (s->types & T_OBJ) != 0;
        shape_free(s->values);
        shape_free(s->items);
        s->values = s->items = NULL;
        return;
    }
    for (size_t i = 0; i < s->nkeys; i++)
        trim(s->keys[i].s, depth - 1);
    trim(s->values, depth - 1);
    trim(s->items, depth - 1);
}

static void fit(struct shape *s)
{
    for (int d = HUTCH_SHAPE_MAX_DEPTH;
         d >= 0 && shape_count(s) > HUTCH_SHAPE_MAX_NODES; d--)
        trim(s, d);
}

/* --- the shape of one value ------------------------------------------------ */

struct walk {
    size_t visits;
    int err; /* -E2BIG past MAX_VISITS, -ENOMEM */
};

static struct shape *shape_of(struct walk *w, const cJSON *v, int depth)
{
    struct shape *s;
    const cJSON *c;
    size_t n = 0;
    int keys_ok = 1;

    if (w->err)
        return NULL;
    if (++w->visits > HUTCH_SHAPE_MAX_VISITS) {
        w->err = -E2BIG;
        return NULL;
    }
    if (!(s = calloc(1, sizeof(*s)))) {
        w->err = -ENOMEM;
        return NULL;
    }
    if (cJSON_IsNull(v)) {
        s->types = T_NULL;
    } else if (cJSON_IsBool(v)) {
        s->types = T_BOOL;
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* The range first: converting a double outside long long's is
         * undefined (an upstream may answer 1e24). */
        s->types = d > -9007199254740992.0 && d < 9007199254740992.0 &&
                           d == (double)(long long)d
                       ? T_INT
                       : T_NUM;
    } else if (cJSON_IsString(v) || cJSON_IsRaw(v)) {
        s->types = T_STR;
    } else if (cJSON_IsArray(v)) {
        s->types = T_ARR;
        if (depth >= HUTCH_SHAPE_MAX_DEPTH)
            return s;
        cJSON_ArrayForEach(c, v)
        {
            struct shape *e;
            if (n++ == HUTCH_SHAPE_MAX_ITEMS)
                break;
            if (!(e = shape_of(w, c, depth + 1)))
                break;
            if (!s->items) {
                s->items = e;
            } else {
                if (merge(s->items, e) < 0)
                    w->err = -ENOMEM;
                shape_free(e);
            }
        }
    } else if (cJSON_IsObject(v)) {
        s->types = T_OBJ;
        s->objects = 1;
        cJSON_ArrayForEach(c, v)
        {
            keys_ok &= ++n <= HUTCH_SHAPE_MAX_KEYS && key_ok(c->string);
        }
        if (depth >= HUTCH_SHAPE_MAX_DEPTH) {
            s->open = 1;
            return s;
        }
        s->open = !keys_ok;
        if (keys_ok && n && !(s->keys = keys_alloc()))
            w->err = -ENOMEM;
        n = 0;
        cJSON_ArrayForEach(c, v)
        {
            struct shape *e;
            struct key *k;
            if (w->err || (s->open && n++ == HUTCH_SHAPE_MAX_ITEMS))
                break;
            if (!(e = shape_of(w, c, depth + 1)))
                break;
            if (s->open) {
                if (!s->values)
                    s->values = e;
                else if (merge(s->values, e) < 0)
                    w->err = -ENOMEM;
                if (s->values != e)
                    shape_free(e);
            } else if ((k = find_key(s, c->string))) { /* a repeated key */
                if (merge(k->s, e) < 0)
                    w->err = -ENOMEM;
                shape_free(e);
            } else {
                k = &s->keys[s->nkeys];
                if (!(k->name = strdup(c->string))) {
                    shape_free(e);
                    w->err = -ENOMEM;
                    break;
                }
                k->s = e;
                k->seen = 1;
                s->nkeys++;
            }
        }
    }
    if (w->err) {
        shape_free(s);
        return NULL;
    }
    return s;
}

/* --- the store --------------------------------------------------------------- */

int hutch_shapes_new(struct hutch_shapes **out, struct hutch_err *err)
{
    struct hutch_shapes *s = calloc(1, sizeof(*s));
    if (!s)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->save_mu, NULL);
    *out = s;
    return 0;
}

static void tool_clear(struct tool *t)
{
    free(t->principal);
    free(t->name);
    shape_free(t->s);
    memset(t, 0, sizeof(*t));
}

static void tools_free(struct tool *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tool_clear(&t[i]);
    free(t);
}

void hutch_shapes_free(struct hutch_shapes *s)
{
    if (!s)
        return;
    tools_free(s->t, s->n);
    free(s->file);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->save_mu);
    free(s);
}

static struct tool *find_tool(struct hutch_shapes *s, const char *principal,
                              const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name) && !strcmp(s->t[i].principal, principal))
            return &s->t[i];
    return NULL;
}

static int by_principal(const void *a, const void *b)
{
    const struct tool *x = *(const struct tool *const *)a,
                      *y = *(const struct tool *const *)b;
    int c = strcmp(x->principal, y->principal);
    return c ? c : (x->used > y->used) - (x->used < y->used);
}

/* A full table: the entry to give up for a new one, the least recently
 * observed of the principal that holds the most entries (the newcomer's
 * own when it is that principal).  Under mu; NULL when out of memory. */
static struct tool *make_room(struct hutch_shapes *s)
{
    struct tool **v = malloc(s->n * sizeof(*v)), *victim = NULL;
    size_t best = 0;

    if (!v)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        v[i] = &s->t[i];
    /* By principal, oldest first: each run's first entry is its oldest. */
    qsort(v, s->n, sizeof(*v), by_principal);
    for (size_t i = 0, j; i < s->n; i = j) {
        for (j = i + 1; j < s->n && !strcmp(v[j]->principal, v[i]->principal); j++)
            ;
        if (j - i > best) {
            best = j - i;
            victim = v[i];
        }
    }
    free(v);
    return victim;
}

/* --- JSON: the file, and the schema for rendering -------------------------- */

static cJSON *types_json(unsigned types)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < NTYPES; i++)
        if ((types & (1u << i)) &&
            !cJSON_AddItemToArray(a, cJSON_CreateString(type_names[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

static cJSON *node_json(const struct shape *s)
{
    cJSON *o = cJSON_CreateObject(), *keys;
    int bad = !o;

    bad |= !bad && !cJSON_AddItemToObject(o, "types", types_json(s->types));
    if (!bad && (s->types & T_OBJ))
        bad |= !cJSON_AddNumberToObject(o, "objects", (double)s->objects);
    if (!bad && s->nkeys) {
        bad |= !(keys = cJSON_AddObjectToObject(o, "keys"));
        for (size_t i = 0; !bad && i < s->nkeys; i++) {
            cJSON *k = cJSON_CreateObject();
            bad |= !k || !cJSON_AddItemToObject(keys, s->keys[i].name, k);
            bad |= !bad && !cJSON_AddNumberToObject(k, "seen", (double)s->keys[i].seen);
            bad |= !bad && !cJSON_AddItemToObject(k, "shape", node_json(s->keys[i].s));
        }
    }
    if (!bad && s->open)
        bad |= !cJSON_AddTrueToObject(o, "open");
    if (!bad && s->values)
        bad |= !cJSON_AddItemToObject(o, "values", node_json(s->values));
    if (!bad && s->items)
        bad |= !cJSON_AddItemToObject(o, "items", node_json(s->items));
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The JSON Schema catalog_sig.c renders: integer and number are number. */
static cJSON *schema_json(const struct shape *s)
{
    unsigned types = s->types & T_ALL;
    cJSON *o = cJSON_CreateObject(), *t = NULL;
    size_t n = 0;
    int bad = !o;

    if (types & T_NUM)
        types &= ~(unsigned)T_INT;
    for (size_t i = 0; i < NTYPES; i++)
        n += (types >> i) & 1;
    if (bad || !n)
        return o; /* {}: any */
    if (n == 1) {
        for (size_t i = 0; i < NTYPES; i++)
            if (types & (1u << i))
                t = cJSON_CreateString(type_names[i]);
    } else {
        t = types_json(types);
    }
    bad |= !cJSON_AddItemToObject(o, "type", t);
    if (!bad && (types & T_ARR) && s->items)
        bad |= !cJSON_AddItemToObject(o, "items", schema_json(s->items));
    if (!bad && (types & T_OBJ) && s->open && s->values)
        bad |=
            !cJSON_AddItemToObject(o, "additionalProperties", schema_json(s->values));
    if (!bad && (types & T_OBJ) && !s->open) {
        cJSON *props = cJSON_AddObjectToObject(o, "properties");
        cJSON *req = cJSON_AddArrayToObject(o, "required");
        bad |= !props || !req;
        for (size_t i = 0; !bad && i < s->nkeys; i++) {
            bad |= !cJSON_AddItemToObject(props, s->keys[i].name,
                                          schema_json(s->keys[i].s));
            if (!bad && s->keys[i].seen >= s->objects)
                bad |= !cJSON_AddItemToArray(req, cJSON_CreateString(s->keys[i].name));
        }
    }
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *hutch_shapes_dump(struct hutch_shapes *s)
{
    cJSON *root = cJSON_CreateObject(), *principals = NULL, *tools;
    char *text = NULL;
    int bad = !root;

    pthread_mutex_lock(&s->mu);
    bad |= !bad && !cJSON_AddNumberToObject(root, "hutch_shapes", 2);
    bad |= !bad && !(principals = cJSON_AddObjectToObject(root, "principals"));
    for (size_t i = 0; !bad && i < s->n; i++) {
        cJSON *t = cJSON_CreateObject();
        tools = cJSON_GetObjectItemCaseSensitive(principals, s->t[i].principal);
        if (!tools)
            tools = cJSON_AddObjectToObject(principals, s->t[i].principal);
        if (!t || !tools || !cJSON_AddItemToObject(tools, s->t[i].name, t)) {
            cJSON_Delete(t);
            bad = 1;
            break;
        }
        bad |= !bad && !cJSON_AddNumberToObject(t, "calls", (double)s->t[i].calls);
        bad |= !bad && !cJSON_AddItemToObject(t, "shape", node_json(s->t[i].s));
    }
    pthread_mutex_unlock(&s->mu);
    if (!bad)
        text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* Loading.  Every failure names the place: tools["x.y"].shape.keys.a. */
struct load {
    struct hutch_err *err;
    char where[256];
    size_t nodes;
};

static int bad_at(struct load *l, const char *what)
{
    return hutch_err_set(l->err, -EINVAL, "%s: %s", l->where, what);
}

static int count_of(const cJSON *v, uint64_t min, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)min ||
        v->valuedouble > (double)HUTCH_SHAPE_MAX_COUNT ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static int node_load(struct load *l, const cJSON *j, int depth, struct shape **out)
{
    size_t where_len = strlen(l->where);
    struct shape *s = NULL;
    const cJSON *f, *types = NULL, *objects = NULL, *keys = NULL, *open = NULL,
                    *values = NULL, *items = NULL;
    int r = 0;

#define AT(...)                                                                        \
    snprintf(l->where + where_len, sizeof(l->where) - where_len, __VA_ARGS__)
    *out = NULL;
    if (!cJSON_IsObject(j))
        return bad_at(l, "not an object");
    if (depth > HUTCH_SHAPE_MAX_DEPTH)
        return bad_at(l, "nested too deep");
    if (++l->nodes > HUTCH_SHAPE_MAX_NODES)
        return bad_at(l, "too many nodes in one tool's shape");
    cJSON_ArrayForEach(f, j)
    {
        const cJSON **slot = !strcmp(f->string, "types")     ? &types
                             : !strcmp(f->string, "objects") ? &objects
                             : !strcmp(f->string, "keys")    ? &keys
                             : !strcmp(f->string, "open")    ? &open
                             : !strcmp(f->string, "values")  ? &values
                             : !strcmp(f->string, "items")   ? &items
                                                             : NULL;
        if (!slot || *slot) {
            AT(".%.64s", f->string);
            return bad_at(l, slot ? "repeated" : "unknown field");
        }
        *slot = f;
    }
    if (!(s = calloc(1, sizeof(*s))))
        return hutch_err_set(l->err, -ENOMEM, "out of memory");
    if (!cJSON_IsArray(types) || !cJSON_GetArraySize(types)) {
        r = bad_at(l, "\"types\" must be a non-empty array");
        goto fail;
    }
    cJSON_ArrayForEach(f, types)
    {
        size_t i;
        for (i = 0; i < NTYPES &&
                    !(cJSON_IsString(f) && !strcmp(f->valuestring, type_names[i]));
             i++)
            ;
        if (i == NTYPES) {
            r = bad_at(l, "\"types\" holds an unknown type");
            goto fail;
        }
        s->types |= 1u << i;
    }
    if ((s->types & T_OBJ) ? count_of(objects, 1, &s->objects) < 0 : objects != NULL) {
        r = bad_at(l, "\"objects\" must be a count, and only with type object");
        goto fail;
    }
    if (open && (!cJSON_IsTrue(open) || !(s->types & T_OBJ))) {
        r = bad_at(l, "\"open\" must be true, and only with type object");
        goto fail;
    }
    s->open = open != NULL;
    if ((keys && (!cJSON_IsObject(keys) || s->open || !(s->types & T_OBJ))) ||
        (values && !s->open) || (items && !(s->types & T_ARR))) {
        r = bad_at(l, "\"keys\" belong to objects, \"values\" to open ones, "
                      "\"items\" to arrays");
        goto fail;
    }
    if (cJSON_GetArraySize(keys) > HUTCH_SHAPE_MAX_KEYS) {
        r = bad_at(l, "too many keys");
        goto fail;
    }
    if (keys && keys->child && !(s->keys = keys_alloc())) {
        r = hutch_err_set(l->err, -ENOMEM, "out of memory");
        goto fail;
    }
    cJSON_ArrayForEach(f, keys)
    {
        const cJSON *seen = cJSON_GetObjectItemCaseSensitive(f, "seen");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(f, "shape");
        struct key *k = &s->keys[s->nkeys];
        AT(".keys.%.64s", f->string);
        if (!key_ok(f->string) || find_key(s, f->string)) {
            r = bad_at(l, "not a field name, or repeated");
            goto fail;
        }
        if (!cJSON_IsObject(f) || cJSON_GetArraySize(f) != 2 ||
            count_of(seen, 1, &k->seen) < 0 || k->seen > s->objects) {
            r = bad_at(l,
                       "wants {\"seen\": N, \"shape\": {...}}, N at most \"objects\"");
            goto fail;
        }
        if ((r = node_load(l, sh, depth + 1, &k->s)) < 0)
            goto fail;
        if (!(k->name = strdup(f->string))) {
            shape_free(k->s);
            r = hutch_err_set(l->err, -ENOMEM, "out of memory");
            goto fail;
        }
        s->nkeys++;
    }
    if (values) {
        AT(".values");
        if ((r = node_load(l, values, depth + 1, &s->values)) < 0)
            goto fail;
    }
    if (items) {
        AT(".items");
        if ((r = node_load(l, items, depth + 1, &s->items)) < 0)
            goto fail;
    }
    l->where[where_len] = '\0';
    *out = s;
    return 0;
fail:
    shape_free(s);
    return r;
#undef AT
}

/* One principal's tools from the file, appended to t[*n] (room for
 * HUTCH_SHAPE_MAX_TOOLS).  l->where names the principal. */
static int principal_load(struct load *l, const char *principal, const cJSON *tools,
                          struct tool *t, size_t *n)
{
    size_t first = *n;
    const cJSON *it;
    int r;

    if (!cJSON_IsObject(tools) || !tools->child)
        return bad_at(l, "wants the principal's tools: {\"server.tool\": {...}}");
    cJSON_ArrayForEach(it, tools)
    {
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(it, "calls");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        struct tool *e = &t[*n];
        snprintf(l->where, sizeof(l->where), "principals[\"%s\"][\"%.64s\"]", principal,
                 it->string);
        if (*n == HUTCH_SHAPE_MAX_TOOLS)
            return bad_at(l, "too many tools (all principals together)");
        if (!*it->string || strlen(it->string) > HUTCH_MAX_QUALIFIED_NAME ||
            !strchr(it->string, '.'))
            return bad_at(l, "not a tool name (server.tool)");
        for (size_t i = first; i < *n; i++)
            if (!strcmp(t[i].name, it->string))
                return bad_at(l, "repeated");
        if (!cJSON_IsObject(it) || cJSON_GetArraySize(it) != 2 ||
            count_of(calls, 1, &e->calls) < 0)
            return bad_at(l, "wants {\"calls\": N, \"shape\": {...}}");
        snprintf(l->where + strlen(l->where), sizeof(l->where) - strlen(l->where),
                 ".shape");
        l->nodes = 0;
        if ((r = node_load(l, sh, 0, &e->s)) < 0)
            return r;
        e->name = strdup(it->string);
        e->principal = strdup(principal);
        e->used = *n;
        (*n)++; /* freed with the rest, whole or not */
        if (!e->name || !e->principal)
            return hutch_err_set(l->err, -ENOMEM, "out of memory");
    }
    return 0;
}

int hutch_shapes_parse(struct hutch_shapes *s, const char *text, size_t len,
                       struct hutch_err *err)
{
    struct load l = {.err = err};
    struct tool *t = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    const cJSON *v, *principals, *p;
    int r = -EINVAL;

    if (len > HUTCH_SHAPE_FILE_BYTES)
        return hutch_err_set(err, -E2BIG, "larger than %u MiB",
                             HUTCH_SHAPE_FILE_BYTES >> 20);
    if ((r = hutch_json_check_text(text, len, HUTCH_JSON_MAX_TREE, "the shapes file",
                                   err)) < 0)
        return r;
    root = cJSON_ParseWithLength(text, len);
    if (!root)
        return hutch_err_set(err, -EINVAL, "not JSON");
    snprintf(l.where, sizeof(l.where), "the file");
    v = cJSON_GetObjectItemCaseSensitive(root, "hutch_shapes");
    principals = cJSON_GetObjectItemCaseSensitive(root, "principals");
    if (cJSON_IsObject(root) && cJSON_IsNumber(v) && v->valuedouble == 1) {
        r = bad_at(&l, "version 1 of the shapes file holds the shapes of every "
                       "principal together, and whose calls they came from is not "
                       "known: it is not read (shapes are kept per principal now, "
                       "so that one principal's results never type another's; the "
                       "file is replaced at the next save)");
        goto out;
    }
    if (!cJSON_IsObject(root) || cJSON_GetArraySize(root) != 2 || !cJSON_IsNumber(v) ||
        v->valuedouble != 2 || !cJSON_IsObject(principals)) {
        r = bad_at(&l, "not a shapes file (version 2: {\"hutch_shapes\": 2, "
                       "\"principals\": {\"name\": {\"server.tool\": ...}}})");
        goto out;
    }
    if (cJSON_GetArraySize(principals) > HUTCH_SHAPE_MAX_TOOLS) {
        r = bad_at(&l, "too many principals");
        goto out;
    }
    if (principals->child && !(t = calloc(HUTCH_SHAPE_MAX_TOOLS, sizeof(*t)))) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(p, principals)
    {
        snprintf(l.where, sizeof(l.where), "principals[\"%.64s\"]", p->string);
        if (!principal_ok(p->string)) {
            r = bad_at(&l, "not a principal's name (1 to 64 of letters, digits and "
                           "_ . @ + -)");
            goto out;
        }
        for (const cJSON *q = principals->child; q != p; q = q->next)
            if (!strcmp(q->string, p->string)) {
                r = bad_at(&l, "repeated");
                goto out;
            }
        if ((r = principal_load(&l, p->string, p, t, &n)) < 0)
            goto out;
    }
    pthread_mutex_lock(&s->mu);
    tools_free(s->t, s->n);
    s->t = t;
    s->n = n;
    s->clock = n;
    s->changes++;
    pthread_mutex_unlock(&s->mu);
    t = NULL;
    n = 0;
    r = 0;
out:
    tools_free(t, n);
    cJSON_Delete(root);
    return r;
}

int hutch_shapes_attach(struct hutch_shapes *s, const char *file, struct hutch_err *err)
{
    char *text = NULL;
    size_t len = 0;
    struct hutch_err e = {0};
    int r;

    free(s->file);
    if (!(s->file = strdup(file)))
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = hutch_read_file(file, HUTCH_SHAPE_FILE_BYTES, &text, &len, &e);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return hutch_err_set(err, r, "%s: %s", file, e.msg[0] ? e.msg : strerror(-r));
    r = hutch_shapes_parse(s, text, len, &e);
    free(text);
    if (r < 0)
        return hutch_err_set(err, r, "%s: %s", file, e.msg);
    pthread_mutex_lock(&s->save_mu);
    pthread_mutex_lock(&s->mu);
    s->saved = s->changes; /* what is in the file needs no writing */
    s->saved_ms = hutch_now_ms();
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->save_mu);
    return 0;
}

/* Write the file from a snapshot, under save_mu. */
static int save_locked(struct hutch_shapes *s, struct hutch_err *err)
{
    char *text;
    uint64_t changes;
    int r = 0;

    pthread_mutex_lock(&s->mu);
    changes = s->changes;
    s->saved_ms = hutch_now_ms();
    pthread_mutex_unlock(&s->mu);
    if (!s->file || changes == s->saved)
        return 0;
    if (!(text = hutch_shapes_dump(s)))
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = hutch_write_file_atomic(s->file, text, strlen(text), err);
    free(text);
    if (r < 0)
        return r;
    s->saved = changes;
    return 0;
}

int hutch_shapes_save(struct hutch_shapes *s, struct hutch_err *err)
{
    int r;
    pthread_mutex_lock(&s->save_mu);
    r = save_locked(s, err);
    pthread_mutex_unlock(&s->save_mu);
    return r;
}

void hutch_shapes_observe(struct hutch_shapes *s, const char *principal,
                          const char *tool, const cJSON *value)
{
    struct walk w = {0};
    struct shape *sh;
    struct tool *t;
    int due = 0;

    if (!s || !tool || strlen(tool) > HUTCH_MAX_QUALIFIED_NAME ||
        !principal_ok(principal))
        return;
    /* Walked outside the lock: the bounded part of the work. */
    if (!(sh = shape_of(&w, value, 0))) {
        if (w.err == -E2BIG)
            hutch_debug("%s: a result too large to observe its shape", tool);
        return;
    }
    pthread_mutex_lock(&s->mu);
    t = find_tool(s, principal, tool);
    if (!t) {
        struct tool *slot = NULL;
        char *name = strdup(tool), *who = strdup(principal);
        if (name && who && s->n < HUTCH_SHAPE_MAX_TOOLS) {
            struct tool *grown = realloc(s->t, (s->n + 1) * sizeof(*s->t));
            if (grown) {
                s->t = grown;
                slot = &s->t[s->n++];
            }
        } else if (name && who && (slot = make_room(s))) {
            tool_clear(slot); /* the oldest of whoever holds the most */
        }
        if (slot) {
            *slot = (struct tool){.principal = who, .name = name, .s = sh};
            t = slot;
            sh = NULL;
        } else {
            free(name);
            free(who);
        }
    } else if (merge(t->s, sh) < 0) {
        t = NULL; /* out of memory: the shape may lack this result */
    }
    if (t) {
        t->calls = add_sat(t->calls, 1);
        t->used = ++s->clock;
        fit(t->s);
        s->changes++;
        due = s->file && hutch_now_ms() - s->saved_ms >= HUTCH_SHAPE_SAVE_MS;
    }
    pthread_mutex_unlock(&s->mu);
    shape_free(sh);
    if (due && pthread_mutex_trylock(&s->save_mu) == 0) {
        struct hutch_err err = {0};
        if (save_locked(s, &err) < 0)
            hutch_warn("saving result shapes: %s", err.msg);
        pthread_mutex_unlock(&s->save_mu);
    }
}

cJSON *hutch_shapes_schema(struct hutch_shapes *s, const char *principal,
                           const char *tool, uint64_t *calls)
{
    cJSON *r = NULL;
    struct tool *t;
    if (!s || !tool || !principal)
        return NULL;
    pthread_mutex_lock(&s->mu);
    if ((t = find_tool(s, principal, tool))) {
        r = schema_json(t->s);
        if (calls)
            *calls = t->calls;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* --- search results -------------------------------------------------------- */

/* sig with its generic return type `generic` (at the very end) replaced by
 * `type` followed by `tail`; NULL when sig does not end so. */
static char *with_return(const char *sig, const char *generic, const char *type,
                         const char *tail)
{
    size_t n = strlen(sig), g = strlen(generic);
    char *r;
    if (n < g || strcmp(sig + n - g, generic))
        return NULL;
    if (!(r = malloc(n - g + strlen(type) + strlen(tail) + 1)))
        return NULL;
    memcpy(r, sig, n - g);
    memcpy(r + n - g, type, strlen(type));
    memcpy(r + n - g + strlen(type), tail, strlen(tail) + 1);
    return r;
}

/* o[key] = v (taken); on failure o[key] stays. */
static int replace_string(cJSON *o, const char *key, char *v)
{
    cJSON *s = v ? cJSON_CreateString(v) : NULL;
    free(v);
    return s && cJSON_ReplaceItemInObjectCaseSensitive(o, key, s)
               ? 0
               : (cJSON_Delete(s), -1);
}

void hutch_shapes_annotate(struct hutch_shapes *s, const char *principal,
                           const struct hutch_catalog *cat, cJSON *results,
                           enum hutch_detail detail,
                           int (*may_see)(void *arg, const char *tool), void *arg)
{
    cJSON *it;
    cJSON_ArrayForEach(it, results)
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
        const char *py = cJSON_GetStringValue(cJSON_GetObjectItem(it, "python"));
        const char *ts = cJSON_GetStringValue(cJSON_GetObjectItem(it, "typescript"));
        const struct hutch_catalog_entry *e =
            name ? hutch_catalog_find(cat, name) : NULL;
        char note[64], *pt = NULL, *tt = NULL, *npy, *nts;
        uint64_t calls = 0;
        cJSON *schema;

        if (!e || !py || !ts)
            continue; /* detail "names": no signatures to type */
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(e->def, "outputSchema"))) {
            cJSON_AddStringToObject(it, "returns", "declared");
            continue;
        }
        if (!may_see || !may_see(arg, e->qualified) ||
            !(schema = hutch_shapes_schema(s, principal, e->qualified, &calls)))
            continue;
        pt = hutch_catalog_type(schema, 0);
        tt = hutch_catalog_type(schema, 1);
        /* Both signatures or neither (py and ts end in the generic type:
         * catalog_sig.c, cat_make_sigs). */
        npy = pt ? with_return(py, "Any", pt, "") : NULL;
        nts = tt ? with_return(ts, "any>", tt, ">") : NULL;
        if (npy && nts) {
            replace_string(it, "python", hutch_steal(&npy));
            replace_string(it, "typescript", hutch_steal(&nts));
            snprintf(note, sizeof(note), "observed from %llu call%s",
                     (unsigned long long)calls, calls == 1 ? "" : "s");
            cJSON_AddStringToObject(it, "returns", note);
            if (detail == HUTCH_DETAIL_FULL) {
                cJSON_AddItemToObject(it, "observedSchema", schema);
                schema = NULL;
            }
        }
        free(npy);
        free(nts);
        free(pt);
        free(tt);
        cJSON_Delete(schema);
    }
}
