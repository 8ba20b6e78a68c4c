/* catalog.c — the catalog of upstream tools: building it (identifiers for
 * tools.<server>.<tool> and their collisions, a tool listed twice), lookup
 * by name, and ranked search with the results it returns.  The identifier
 * rule and the Python signature and TypeScript declaration generated from
 * each tool's JSON Schema live in catalog_sig.c; fetching the tools in
 * upstream.c; checking arguments against a schema in schema.c.
 *
 * Everything here comes from upstream servers and is untrusted: names are
 * capped, search words are bounded in size and number, and every string
 * handed out has a maximum.  The catalog owns copies of everything it
 * keeps, so the array it was built from can be freed at once. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "caps.h"
#include "catalog.h"
#include "catalog_int.h"

/* Search weights, per query word and field.  A name says what a tool does
 * more reliably than a description that mentions everything, and the server
 * name groups tools by subject ("fs", "github"); parameter names say what a
 * tool works on.  A word matching its field's word exactly (or after the
 * light stemming below) scores the full weight, a prefix of it (3 bytes or
 * more) half.  A query equal to a tool's name outright trumps everything;
 * a tool all of whose name words the query covers gets a bonus, so "read
 * file" puts read_file above read_multiple_files. */
#define W_EXACT  100
#define W_NAME   10
#define W_SERVER 6
#define W_PARAM  4
#define W_DESC   2
#define W_COVER  5

/* Words a query drops before matching: English function words, which every
 * description has ("send email to bob" matched whatever said "to").  Only
 * words that never name what a tool does: "get", "list", "read", "find",
 * "new", "all" stay.  Sorted (bsearch). */
static const char *const stop_words[] = {
    "a",     "about", "after", "am",    "an",    "and",   "are",    "as",   "at",
    "be",    "been",  "but",   "by",    "can",   "could", "did",    "do",   "does",
    "for",   "from",  "had",   "has",   "have",  "he",    "her",    "him",  "his",
    "how",   "i",     "if",    "in",    "into",  "is",    "it",     "its",  "me",
    "my",    "of",    "on",    "onto",  "or",    "our",   "please", "she",  "should",
    "so",    "some",  "than",  "that",  "the",   "their", "them",   "then", "there",
    "these", "they",  "this",  "those", "to",    "us",    "via",    "was",  "we",
    "were",  "what",  "when",  "where", "which", "who",   "whom",   "why",  "will",
    "with",  "would", "you",   "your"};

struct toks {
    struct hutch_buf b; /* n words, each "raw\0stem\0" */
    size_t n;
};
/* tokenize() takes at most HUTCH_SEARCH_FIELD_WORDS words of at most 2 *
 * HUTCH_SEARCH_MAX_WORD bytes each. */
#define TOKS_INIT                                                                      \
    {                                                                                  \
        .b = {.max = HUTCH_SEARCH_FIELD_WORDS * 2 * HUTCH_SEARCH_MAX_WORD }            \
    }

struct entry {
    struct hutch_catalog_entry pub;
    char *server, *tool, *qualified;
    char *py_server, *py_tool; /* always the identifiers; pub.py_tool is
                                  NULL when another tool owns the name */
    cJSON *def;
    char *python_sig, *ts_decl;
    size_t ls, lt, lps, lpt; /* lengths of the four names: lookups compare
                                these first */
    size_t index;            /* position in the input: catalog order */
    int server_lost;         /* another server owns py_server */
    int tool_lost;           /* another tool of this server owns py_tool */
    struct toks t_name, t_server, t_params, t_desc;
};

struct hutch_catalog {
    struct entry *e;
    size_t n;
    cJSON *warnings;
    size_t nwarn, dropped;
};

/* --- strings ---------------------------------------------------------------- */

/* The largest n' <= n that does not split a UTF-8 sequence of s, which
 * holds more than n bytes. */
static size_t utf8_cut(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

static char *ident_dup(const char *name)
{
    char buf[HUTCH_CATALOG_MAX_IDENT + 2];
    if (hutch_ident(name, buf, sizeof(buf)) < 0)
        return NULL;
    return strdup(buf);
}

/* --- words for search --------------------------------------------------------- */

static int word_byte(unsigned char c)
{
    return ascii_alnum(c) || c >= 0x80;
}

static int is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static int is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

/* Strip common English endings so "files" finds "file" and "reading"
 * finds "read": a light stemmer, not a linguistic one. */
static void stem(const char *raw, char *out, size_t n)
{
    size_t len = strlen(raw);
    snprintf(out, n, "%s", raw);
    if (len > 4 && ends_with(raw, "ies")) {
        snprintf(out + len - 3, n - (len - 3), "y");
        len -= 2;
    } else if (len > 5 && ends_with(raw, "ing")) {
        len -= 3;
    } else if (len > 4 && ends_with(raw, "ed")) {
        len -= 2;
    } else if (len > 4 && ends_with(raw, "es") && strchr("sxzh", raw[len - 3])) {
        len -= 2;
    } else if (len > 3 && raw[len - 1] == 's' && raw[len - 2] != 's') {
        len -= 1;
    }
    out[len] = '\0';
    if (len > 3 && out[len - 1] == 'e') /* create / created / creates */
        out[len - 1] = '\0';
}

static int toks_add(struct toks *t, const char *w, size_t n)
{
    char raw[HUTCH_SEARCH_MAX_WORD], st[HUTCH_SEARCH_MAX_WORD];
    size_t need;
    int r;

    if (n >= HUTCH_SEARCH_MAX_WORD)
        n = HUTCH_SEARCH_MAX_WORD - 1;
    for (size_t i = 0; i < n; i++)
        raw[i] = is_upper((unsigned char)w[i]) ? (char)(w[i] - 'A' + 'a') : w[i];
    raw[n] = '\0';
    stem(raw, st, sizeof(st));
    need = n + 1 + strlen(st) + 1;
    if (t->b.len + need > t->b.max)
        return -E2BIG;
    r = hutch_buf_append(&t->b, raw, n + 1);
    if (r == 0)
        r = hutch_buf_append(&t->b, st, strlen(st) + 1);
    if (r < 0)
        return r;
    t->n++;
    return 0;
}

/* Lowercase words of at most `max` bytes of s, split at every byte that is
 * no letter or digit (non-ASCII counts as a letter) and inside camelCase:
 * "getTinyImage" -> get tiny image, "HTMLParser" -> html parser. */
static int tokenize(struct toks *t, const char *s, size_t max, size_t max_words)
{
    size_t n = s ? strnlen(s, max) : 0, i = 0;
    const unsigned char *u = (const unsigned char *)s;

    while (i < n && t->n < max_words) {
        size_t start;
        while (i < n && !word_byte(u[i]))
            i++;
        start = i;
        while (i < n && word_byte(u[i])) {
            if (i > start && is_upper(u[i]) &&
                (is_lower(u[i - 1]) || (u[i - 1] >= '0' && u[i - 1] <= '9') ||
                 (is_upper(u[i - 1]) && i + 1 < n && is_lower(u[i + 1]))))
                break;
            i++;
        }
        if (i > start && toks_add(t, s + start, i - start) < 0)
            return -ENOMEM;
    }
    return 0;
}

static const char *tok_next(const char *w)
{
    w += strlen(w) + 1;       /* past raw */
    return w + strlen(w) + 1; /* past stem */
}

/* 2: the same word (or stem); 1: q is a prefix of w (3 bytes or more). */
static int word_match(const char *q, const char *w)
{
    const char *qs = q + strlen(q) + 1, *ws = w + strlen(w) + 1;
    size_t ql = strlen(q);
    if (!strcmp(q, w) || !strcmp(qs, ws))
        return 2;
    if (ql >= 3 && !strncmp(q, w, ql))
        return 1;
    return 0;
}

static int field_match(const char *q, const struct toks *t)
{
    const char *w = t->b.data;
    int best = 0;
    for (size_t i = 0; i < t->n && best < 2; i++, w = tok_next(w)) {
        int m = word_match(q, w);
        if (m > best)
            best = m;
    }
    return best;
}

static int make_tokens(struct entry *e)
{
    const cJSON *desc = get(e->def, "description"), *title = get(e->def, "title");
    const cJSON *props = get(get(e->def, "inputSchema"), "properties"), *p;
    int r = 0;

    e->t_name = e->t_server = e->t_params = e->t_desc = (struct toks)TOKS_INIT;
    r |= tokenize(&e->t_name, e->tool, HUTCH_MAX_TOOL_NAME, HUTCH_SEARCH_FIELD_WORDS);
    r |= tokenize(&e->t_server, e->server, HUTCH_MAX_SERVER_NAME,
                  HUTCH_SEARCH_FIELD_WORDS);
    if (!cJSON_IsObject(props))
        props = NULL;
    cJSON_ArrayForEach(p, props)
    {
        if (e->t_params.n >= HUTCH_SEARCH_FIELD_WORDS)
            break;
        r |= tokenize(&e->t_params, p->string, HUTCH_SEARCH_NAME_BYTES,
                      HUTCH_SEARCH_FIELD_WORDS);
    }
    if (cJSON_IsString(title))
        r |= tokenize(&e->t_desc, title->valuestring, HUTCH_SEARCH_NAME_BYTES,
                      HUTCH_SEARCH_FIELD_WORDS);
    if (cJSON_IsString(desc))
        r |= tokenize(&e->t_desc, desc->valuestring, HUTCH_SEARCH_DESC_BYTES,
                      HUTCH_SEARCH_FIELD_WORDS);
    return r ? -ENOMEM : 0;
}

/* --- building --------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int warn(struct hutch_catalog *c,
                                                      const char *fmt, ...)
{
    char buf[HUTCH_CATALOG_WARNING_BYTES];
    va_list ap;
    cJSON *s;
    int n;

    if (c->nwarn >= HUTCH_CATALOG_MAX_WARNINGS) {
        c->dropped++;
        return 0;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(buf))
        buf[utf8_cut(buf, sizeof(buf) - 1)] = '\0';
    s = cJSON_CreateString(buf);
    if (!s || !cJSON_AddItemToArray(c->warnings, s)) {
        cJSON_Delete(s);
        return -ENOMEM;
    }
    c->nwarn++;
    return 0;
}

static void toks_free(struct toks *t)
{
    hutch_buf_free(&t->b);
}

static void entry_free(struct entry *e)
{
    free(e->server);
    free(e->tool);
    free(e->qualified);
    free(e->py_server);
    free(e->py_tool);
    cJSON_Delete(e->def);
    free(e->python_sig);
    free(e->ts_decl);
    toks_free(&e->t_name);
    toks_free(&e->t_server);
    toks_free(&e->t_params);
    toks_free(&e->t_desc);
}

/* 0 added, 1 skipped with a warning, or -ENOMEM. */
static int add_entry(struct hutch_catalog *c, const cJSON *item, size_t idx)
{
    const cJSON *server = get(item, "server"), *tool = get(item, "tool");
    const cJSON *name = get(tool, "name");
    struct entry *e = &c->e[c->n];
    size_t ls, lt;
    int r;

    if (!cJSON_IsString(server) || !cJSON_IsObject(tool)) {
        r = warn(c, "skipped tools[%zu]: not a {\"server\", \"tool\"} pair", idx);
        return r < 0 ? r : 1;
    }
    if ((ls = strlen(server->valuestring)) > HUTCH_MAX_SERVER_NAME) {
        r = warn(c, "skipped tools[%zu]: server name longer than %d bytes", idx,
                 HUTCH_MAX_SERVER_NAME);
        return r < 0 ? r : 1;
    }
    if (!cJSON_IsString(name)) {
        r = warn(c, "skipped a tool of server \"%s\": it has no \"name\"",
                 server->valuestring);
        return r < 0 ? r : 1;
    }
    if ((lt = strlen(name->valuestring)) > HUTCH_MAX_TOOL_NAME) {
        r = warn(c, "skipped a tool of server \"%s\": name longer than %d bytes",
                 server->valuestring, HUTCH_MAX_TOOL_NAME);
        return r < 0 ? r : 1;
    }
    memset(e, 0, sizeof(*e));
    e->index = idx;
    e->server = strdup(server->valuestring);
    e->tool = strdup(name->valuestring);
    e->qualified = malloc(ls + lt + 2);
    e->py_server = ident_dup(server->valuestring);
    /* tools.search is the runners' own search (discover.c): a server of
     * that name is tools.search_ (a tool of that name keeps it). */
    if (e->py_server && !strcmp(e->py_server, "search")) {
        free(e->py_server);
        e->py_server = strdup("search_");
    }
    e->py_tool = ident_dup(name->valuestring);
    e->def = cJSON_Duplicate(tool, 1);
    if (!e->server || !e->tool || !e->qualified || !e->py_server || !e->py_tool ||
        !e->def) {
        entry_free(e);
        return -ENOMEM;
    }
    snprintf(e->qualified, ls + lt + 2, "%s.%s", e->server, e->tool);
    e->ls = ls;
    e->lt = lt;
    e->lps = strlen(e->py_server);
    e->lpt = strlen(e->py_tool);
    c->n++;
    return 0;
}

static int cmp_index(size_t a, size_t b)
{
    return a < b ? -1 : a > b;
}

static int by_server_tool(const void *pa, const void *pb)
{
    const struct entry *a = *(struct entry *const *)pa, *b = *(struct entry *const *)pb;
    int r = strcmp(a->server, b->server);
    if (!r)
        r = strcmp(a->tool, b->tool);
    return r ? r : cmp_index(a->index, b->index);
}

/* Tools grouped by (server, identifier), the one literally named like the
 * identifier first, then catalog order.  The literal name must win: the
 * runners send tools.s.get_sum as "s.get_sum", the very string tools.call
 * gets for a tool named get_sum, so only that tool can own the attribute. */
static int by_tool_ident(const void *pa, const void *pb)
{
    const struct entry *a = *(struct entry *const *)pa, *b = *(struct entry *const *)pb;
    int r = strcmp(a->server, b->server);
    if (!r)
        r = strcmp(a->py_tool, b->py_tool);
    if (!r)
        r = (strcmp(a->tool, a->py_tool) != 0) - (strcmp(b->tool, b->py_tool) != 0);
    return r ? r : cmp_index(a->index, b->index);
}

struct srv {
    const char *name, *ident;
    size_t first; /* catalog index of its first tool */
    int lost;
};

static int srv_by_ident(const void *pa, const void *pb)
{
    const struct srv *a = *(struct srv *const *)pa, *b = *(struct srv *const *)pb;
    int r = strcmp(a->ident, b->ident);
    if (!r)
        r = (strcmp(a->name, a->ident) != 0) - (strcmp(b->name, b->ident) != 0);
    return r ? r : cmp_index(a->first, b->first);
}

/* The same tool listed twice by one server: the first one counts. */
static int drop_duplicates(struct hutch_catalog *c, struct entry **by)
{
    size_t i, o;
    int r;

    for (i = 0; i < c->n; i++)
        by[i] = &c->e[i];
    qsort(by, c->n, sizeof(*by), by_server_tool);
    for (i = 1; i < c->n; i++) {
        if (strcmp(by[i]->server, by[i - 1]->server) ||
            strcmp(by[i]->tool, by[i - 1]->tool))
            continue;
        if ((r = warn(c, "server \"%s\" lists tool \"%s\" twice: the first one is used",
                      by[i]->server, by[i]->tool)) < 0)
            return r;
        by[i]->index = SIZE_MAX; /* marks it for removal below */
    }
    for (i = o = 0; i < c->n; i++) {
        if (c->e[i].index == SIZE_MAX) {
            entry_free(&c->e[i]);
            continue;
        }
        c->e[o++] = c->e[i];
    }
    c->n = o;
    return 0;
}

/* Two servers with one identifier: the one named like it (else the first)
 * keeps tools.<ident>; the other's tools are reached through tools.call. */
static int resolve_servers(struct hutch_catalog *c, struct entry **by)
{
    struct srv *s = NULL, **sp = NULL;
    size_t ns = 0, i, j;
    int r = 0;

    for (i = 0; i < c->n; i++)
        by[i] = &c->e[i];
    qsort(by, c->n, sizeof(*by), by_server_tool);
    s = calloc(c->n ? c->n : 1, sizeof(*s));
    sp = calloc(c->n ? c->n : 1, sizeof(*sp));
    if (!s || !sp) {
        r = -ENOMEM;
        goto out;
    }
    for (i = 0; i < c->n; i++) {
        if (ns && !strcmp(s[ns - 1].name, by[i]->server)) {
            if (by[i]->index < s[ns - 1].first)
                s[ns - 1].first = by[i]->index;
            continue;
        }
        s[ns] = (struct srv){by[i]->server, by[i]->py_server, by[i]->index, 0};
        sp[ns] = &s[ns];
        ns++;
    }
    qsort(sp, ns, sizeof(*sp), srv_by_ident);
    for (i = 0; i < ns; i = j) { /* each group's first is its owner */
        for (j = i + 1; j < ns && !strcmp(sp[j]->ident, sp[i]->ident); j++) {
            sp[j]->lost = 1;
            r = warn(
                c,
                "servers \"%s\" and \"%s\" both map to tools.%s, which calls \"%s\"; "
                "the tools of \"%s\" are reached through tools.call(\"%s.<tool>\")",
                sp[i]->name, sp[j]->name, sp[i]->ident, sp[i]->name, sp[j]->name,
                sp[j]->name);
            if (r < 0)
                goto out;
        }
    }
    /* by[] and s[] are both in server-name order. */
    for (i = j = 0; i < c->n; i++) {
        while (strcmp(s[j].name, by[i]->server))
            j++;
        by[i]->server_lost = s[j].lost;
    }
out:
    free(s);
    free(sp);
    return r;
}

static int resolve_tools(struct hutch_catalog *c, struct entry **by)
{
    size_t i, j;
    int r;

    for (i = 0; i < c->n; i++)
        by[i] = &c->e[i];
    qsort(by, c->n, sizeof(*by), by_tool_ident);
    for (i = 0; i < c->n; i = j) {
        for (j = i + 1; j < c->n && !strcmp(by[j]->server, by[i]->server) &&
                        !strcmp(by[j]->py_tool, by[i]->py_tool);
             j++) {
            by[j]->tool_lost = 1;
            if (by[j]->server_lost)
                continue; /* its server's warning covers it */
            r = warn(c,
                     "server \"%s\": tools \"%s\" and \"%s\" both map to tools.%s.%s, "
                     "which calls \"%s\"; \"%s\" is reached through tools.call(\"%s\")",
                     by[i]->server, by[i]->tool, by[j]->tool, by[i]->py_server,
                     by[i]->py_tool, by[i]->tool, by[j]->tool, by[j]->qualified);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

void hutch_catalog_free(struct hutch_catalog *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        entry_free(&c->e[i]);
    free(c->e);
    cJSON_Delete(c->warnings);
    free(c);
}

int hutch_catalog_build(const cJSON *tools, struct hutch_catalog **out,
                        struct hutch_err *err)
{
    struct hutch_catalog *c = NULL;
    struct entry **by = NULL;
    const cJSON *item;
    size_t cap, idx = 0;
    int r;

    if (out)
        *out = NULL;
    if (!out || !cJSON_IsArray(tools))
        return hutch_err_set(err, -EINVAL, "catalog: the tool list is not an array");
    cap = (size_t)cJSON_GetArraySize(tools);
    if (cap > HUTCH_CATALOG_MAX_TOOLS)
        cap = HUTCH_CATALOG_MAX_TOOLS;
    c = calloc(1, sizeof(*c));
    if (!c || !(c->warnings = cJSON_CreateArray()) ||
        !(c->e = calloc(cap ? cap : 1, sizeof(*c->e)))) {
        r = -ENOMEM;
        goto out;
    }
    cJSON_ArrayForEach(item, tools)
    {
        if (c->n == cap) {
            r = warn(c, "catalog full: tools past the first %zu skipped", cap);
            if (r < 0)
                goto out;
            break;
        }
        if ((r = add_entry(c, item, idx++)) < 0)
            goto out;
    }
    if (!(by = calloc(c->n ? c->n : 1, sizeof(*by)))) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = drop_duplicates(c, by)) < 0 || (r = resolve_servers(c, by)) < 0 ||
        (r = resolve_tools(c, by)) < 0)
        goto out;
    for (size_t i = 0; i < c->n; i++) {
        struct entry *e = &c->e[i];
        if ((r = cat_make_sigs(e->def, e->py_tool, &e->python_sig, &e->ts_decl)) < 0 ||
            (r = make_tokens(e)) < 0)
            goto out;
        e->pub = (struct hutch_catalog_entry){
            .server = e->server,
            .tool = e->tool,
            .qualified = e->qualified,
            .py_server = e->py_server,
            .py_tool = e->server_lost || e->tool_lost ? NULL : e->py_tool,
            .def = e->def,
            .python_sig = e->python_sig,
            .ts_decl = e->ts_decl,
        };
    }
    if (c->dropped) {
        char buf[96];
        cJSON *s;
        snprintf(buf, sizeof(buf), "%zu more warnings not shown", c->dropped);
        if (!(s = cJSON_CreateString(buf)) || !cJSON_AddItemToArray(c->warnings, s)) {
            cJSON_Delete(s);
            r = -ENOMEM;
            goto out;
        }
    }
    *out = c;
    c = NULL;
    r = 0;
out:
    free(by);
    hutch_catalog_free(c);
    if (r < 0)
        hutch_err_set(err, r, "catalog: out of memory building the tool catalog");
    return r;
}

size_t hutch_catalog_count(const struct hutch_catalog *c)
{
    return c ? c->n : 0;
}

const struct hutch_catalog_entry *hutch_catalog_at(const struct hutch_catalog *c,
                                                   size_t i)
{
    return c && i < c->n ? &c->e[i].pub : NULL;
}

const cJSON *hutch_catalog_warnings(const struct hutch_catalog *c)
{
    return c ? c->warnings : NULL;
}

/* --- lookup ------------------------------------------------------------------- */

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* ASCII-only case folding: locale-independent, and non-ASCII names compare
 * byte for byte. */
static int eq_n(const char *a, const char *b, size_t n, int fold)
{
    if (!fold)
        return !memcmp(a, b, n);
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

/* s (n bytes) is "<a>.<b>", a and b of la and lb bytes. */
static int is_pair(const char *s, size_t n, const char *a, size_t la, const char *b,
                   size_t lb, int fold)
{
    return n == la + 1 + lb && s[la] == '.' && eq_n(s, a, la, fold) &&
           eq_n(s + la + 1, b, lb, fold);
}

/* Forms of a name, most specific first: upstream.upstream, ident.ident,
 * upstream.ident, ident.upstream.  An identifier counts only where its
 * owner is this entry, so tools.s.t and tools.call("s.t") agree. */
static int matches(const struct entry *e, const char *s, size_t n, int fold, int form)
{
    switch (form) {
    case 0:
        return is_pair(s, n, e->server, e->ls, e->tool, e->lt, fold);
    case 1:
        return e->pub.py_tool &&
               is_pair(s, n, e->py_server, e->lps, e->py_tool, e->lpt, fold);
    case 2:
        return !e->tool_lost &&
               is_pair(s, n, e->server, e->ls, e->py_tool, e->lpt, fold);
    default:
        return !e->server_lost &&
               is_pair(s, n, e->py_server, e->lps, e->tool, e->lt, fold);
    }
}

static int is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* One linear pass per phase, keeping the best form seen so far: the first
 * entry in catalog order with the most specific form wins.  Milliseconds
 * at the largest catalog the caps allow, next to an upstream call. */
static const struct entry *find_pass(const struct hutch_catalog *c, const char *s,
                                     size_t n, int fold)
{
    const struct entry *best = NULL;
    int best_form = 4;

    for (size_t i = 0; i < c->n && best_form > 0; i++)
        for (int form = 0; form < best_form; form++)
            if (matches(&c->e[i], s, n, fold, form)) {
                best = &c->e[i];
                best_form = form;
                break;
            }
    return best;
}

const struct hutch_catalog_entry *hutch_catalog_find(const struct hutch_catalog *c,
                                                     const char *qualified)
{
    const struct entry *e;
    const char *s = qualified;
    size_t n;

    if (!c || !qualified)
        return NULL;
    n = strlen(s);
    if ((e = find_pass(c, s, n, 0)))
        return &e->pub;
    while (n && is_space((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && is_space((unsigned char)s[n - 1]))
        n--;
    e = find_pass(c, s, n, 1);
    return e ? &e->pub : NULL;
}

/* --- search ------------------------------------------------------------------- */

struct hit {
    size_t i;
    long score;
};

static int by_score(const void *pa, const void *pb)
{
    const struct hit *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return cmp_index(a->i, b->i);
}

static int ieq(const char *q, size_t n, const char *name)
{
    return name && strlen(name) == n && eq_n(q, name, n, 1);
}

static int cmp_word(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int stop_word(const char *w)
{
    return bsearch(&w, stop_words, sizeof(stop_words) / sizeof(*stop_words),
                   sizeof(*stop_words), cmp_word) != NULL;
}

/* 0 when e does not match.  A tool matches when the query names it
 * outright, or when one of the query's words is in its name, or when half
 * of them (rounded up) are somewhere in it: a word that happens to be in
 * one long description ("sends an elicitation request") does not make a
 * three-word query ("send email bob") match it. */
static long score(const struct entry *e, const struct toks *q, const char *exact,
                  size_t exact_len)
{
    long s = 0;
    const char *qw, *w;
    size_t i, k, hit = 0;
    int covered = e->t_name.n > 0, named = 0, outright;

    outright = exact_len &&
               (ieq(exact, exact_len, e->tool) || ieq(exact, exact_len, e->py_tool) ||
                ieq(exact, exact_len, e->qualified) ||
                is_pair(exact, exact_len, e->py_server, e->lps, e->py_tool, e->lpt, 1));
    if (outright)
        s += W_EXACT;
    for (qw = q->b.data, k = 0; k < q->n; k++, qw = tok_next(qw)) {
        int mn = field_match(qw, &e->t_name), ms = field_match(qw, &e->t_server),
            mp = field_match(qw, &e->t_params), md = field_match(qw, &e->t_desc);
        s += (W_NAME * mn + W_SERVER * ms + W_PARAM * mp + W_DESC * md) / 2;
        hit += (mn | ms | mp | md) != 0;
        named |= mn != 0;
    }
    if (!outright && !named && 2 * hit < q->n)
        return 0;
    /* The name's own function words ("add_to_cart") need no covering. */
    for (w = e->t_name.b.data, i = 0; covered && i < e->t_name.n;
         i++, w = tok_next(w)) {
        int m = stop_word(w);
        for (qw = q->b.data, k = 0; !m && k < q->n; k++, qw = tok_next(qw))
            m = word_match(qw, w);
        covered = m > 0;
    }
    return s ? s + (covered ? W_COVER : 0) : 0;
}

/* First line, first sentence, at most HUTCH_SEARCH_DESC_SHORT bytes ("..." included).
 */
static char *short_desc(const char *d)
{
    size_t n = 0, len;
    int cut;
    char *r;

    while (*d && is_space((unsigned char)*d))
        d++;
    while (d[n] && d[n] != '\n' &&
           !(d[n] == '.' && (!d[n + 1] || is_space((unsigned char)d[n + 1]))))
        n++;
    if (d[n] == '.')
        n++;
    while (n && is_space((unsigned char)d[n - 1]))
        n--;
    cut = n > HUTCH_SEARCH_DESC_SHORT;
    len = cut ? utf8_cut(d, HUTCH_SEARCH_DESC_SHORT - 3) : n;
    if (!(r = malloc(len + 4)))
        return NULL;
    memcpy(r, d, len);
    snprintf(r + len, 4, "%s", cut ? "..." : "");
    return r;
}

static char *full_desc(const char *d)
{
    size_t n = strlen(d), len = n > HUTCH_SEARCH_DESC_FULL
                                    ? utf8_cut(d, HUTCH_SEARCH_DESC_FULL - 3)
                                    : n;
    char *r = malloc(len + 4);
    if (!r)
        return NULL;
    memcpy(r, d, len);
    snprintf(r + len, 4, "%s", n > HUTCH_SEARCH_DESC_FULL ? "..." : "");
    return r;
}

static int add_dup(cJSON *o, const char *k, const cJSON *v)
{
    cJSON *d;
    if (!v)
        return 0;
    d = cJSON_Duplicate(v, 1);
    if (!d || !cJSON_AddItemToObject(o, k, d)) {
        cJSON_Delete(d);
        return -ENOMEM;
    }
    return 0;
}

/* How a program calls the tool: tools.server.tool, or tools.call("...")
 * after a collision.  NULL when out of memory. */
static char *call_text(const struct entry *e)
{
    struct sbuf call = SBUF_INIT(2 * HUTCH_MAX_TOOL_NAME + 64);
    if (e->pub.py_tool) {
        sb_puts(&call, "tools.");
        sb_puts(&call, e->py_server);
        sb_puts(&call, ".");
        sb_puts(&call, e->py_tool);
    } else {
        sb_puts(&call, "tools.call(");
        sb_quote(&call, e->qualified);
        sb_puts(&call, ")");
    }
    return sb_take(&call, NULL);
}

static char *desc_text(const struct entry *e, enum hutch_detail detail)
{
    const cJSON *desc = get(e->def, "description");
    const char *d = cJSON_IsString(desc) ? desc->valuestring : "";
    return detail == HUTCH_DETAIL_NAMES ? short_desc(d) : full_desc(d);
}

char *hutch_catalog_call(const struct hutch_catalog_entry *e)
{
    return call_text((const struct entry *)e);
}

char *hutch_catalog_description(const struct hutch_catalog_entry *e,
                                enum hutch_detail detail)
{
    return desc_text((const struct entry *)e, detail);
}

static cJSON *result(const struct entry *e, enum hutch_detail detail)
{
    const cJSON *title = get(e->def, "title");
    const cJSON *ann = get(e->def, "annotations");
    cJSON *o = cJSON_CreateObject();
    char *d = NULL, *c = NULL;
    int bad = !o;

    if (!cJSON_IsString(title))
        title = get(ann, "title");
    c = call_text(e);
    d = desc_text(e, detail);
    bad |= !c || !d;
    bad |= !bad && !cJSON_AddStringToObject(o, "name", e->qualified);
    bad |= !bad && !cJSON_AddStringToObject(o, "call", c);
    if (!bad && detail == HUTCH_DETAIL_FULL && cJSON_IsString(title))
        bad |= !cJSON_AddStringToObject(o, "title", title->valuestring);
    bad |= !bad && !cJSON_AddStringToObject(o, "description", d);
    if (!bad && detail != HUTCH_DETAIL_NAMES) {
        bad |= !cJSON_AddStringToObject(o, "python", e->python_sig);
        bad |= !bad && !cJSON_AddStringToObject(o, "typescript", e->ts_decl);
    }
    if (!bad && detail == HUTCH_DETAIL_FULL) {
        bad |= add_dup(o, "inputSchema", get(e->def, "inputSchema")) < 0;
        bad |= !bad && add_dup(o, "outputSchema", get(e->def, "outputSchema")) < 0;
        bad |= !bad && add_dup(o, "annotations", ann) < 0;
    }
    free(c);
    free(d);
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *hutch_catalog_describe(const struct hutch_catalog_entry *e,
                              enum hutch_detail detail)
{
    /* Every entry handed out is the pub member, first in its struct entry. */
    return e ? result((const struct entry *)e, detail) : NULL;
}

cJSON *hutch_catalog_search(const struct hutch_catalog *c, const char *query,
                            size_t limit, enum hutch_detail detail)
{
    return hutch_catalog_search_keep(c, query, limit, detail, NULL, NULL, NULL);
}

/* The entries that match, best first, at most `limit` of them, in *out
 * (caller frees the array, not the entries); *matches how many matched
 * before the limit.  0 or -ENOMEM. */
static int rank(const struct hutch_catalog *c, const char *query, size_t limit,
                int (*keep)(void *arg, const struct hutch_catalog_entry *e), void *arg,
                const struct hutch_catalog_entry ***out, size_t *n, size_t *matches)
{
    struct toks q = TOKS_INIT, uq = TOKS_INIT;
    struct hit *hits = NULL;
    const struct hutch_catalog_entry **v = NULL;
    const char *exact = query ? query : "";
    size_t nh = 0, exact_len;

    *out = NULL;
    *n = 0;
    if (matches)
        *matches = 0;
    if (!c)
        return 0;
    if (limit == 0)
        limit = HUTCH_SEARCH_DEFAULT_RESULTS;
    if (limit > HUTCH_SEARCH_MAX_RESULTS)
        limit = HUTCH_SEARCH_MAX_RESULTS;
    exact_len = strnlen(exact, HUTCH_SEARCH_MAX_QUERY);
    while (exact_len && is_space((unsigned char)*exact)) {
        exact++;
        exact_len--;
    }
    while (exact_len && is_space((unsigned char)exact[exact_len - 1]))
        exact_len--;
    if (tokenize(&q, exact, exact_len, HUTCH_SEARCH_QUERY_WORDS) < 0)
        goto fail;
    /* Each word counts once however often the query repeats it; stop
     * words not at all (a query of nothing else matches names outright
     * only, below). */
    for (const char *w = q.b.data; w && uq.n < q.n && w < q.b.data + q.b.len;
         w = tok_next(w)) {
        const char *u = uq.b.data;
        size_t k;
        if (stop_word(w))
            continue;
        for (k = 0; k < uq.n && strcmp(u, w); k++)
            u = tok_next(u);
        if (k == uq.n && toks_add(&uq, w, strlen(w)) < 0)
            goto fail;
    }
    if (!(hits = malloc((c->n ? c->n : 1) * sizeof(*hits))))
        goto fail;
    for (size_t i = 0; i < c->n; i++) {
        long s;
        if (keep && !keep(arg, &c->e[i].pub))
            continue;
        s = q.n ? score(&c->e[i], &uq, exact, exact_len) : 1;
        if (s > 0)
            hits[nh++] = (struct hit){i, s};
    }
    if (q.n)
        qsort(hits, nh, sizeof(*hits), by_score);
    if (matches)
        *matches = nh;
    if (!(v = malloc((nh ? nh : 1) * sizeof(*v))))
        goto fail;
    for (size_t i = 0; i < nh && i < limit; i++)
        v[(*n)++] = &c->e[hits[i].i].pub;
    *out = v;
    free(hits);
    toks_free(&q);
    toks_free(&uq);
    return 0;
fail:
    free(hits);
    toks_free(&q);
    toks_free(&uq);
    return -ENOMEM;
}

int hutch_catalog_rank(const struct hutch_catalog *c, const char *query, size_t limit,
                       const struct hutch_catalog_entry ***out, size_t *n)
{
    return rank(c, query, limit, NULL, NULL, out, n, NULL);
}

cJSON *hutch_catalog_search_keep(const struct hutch_catalog *c, const char *query,
                                 size_t limit, enum hutch_detail detail,
                                 int (*keep)(void *arg,
                                             const struct hutch_catalog_entry *e),
                                 void *arg, size_t *matches)
{
    cJSON *arr = cJSON_CreateArray();
    const struct hutch_catalog_entry **v;
    size_t n;

    if (!arr || !c)
        return arr;
    if (rank(c, query, limit, keep, arg, &v, &n, matches) < 0) {
        cJSON_Delete(arr);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *o = result((const struct entry *)v[i], detail);
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            free(v);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    free(v);
    return arr;
}
