/* discover.c — what an agent is offered of the upstream tools (see
 * discover.h).
 *
 * The default answer of search_tools is for a model's context: the best
 * matches whole (name, how to call it, the first sentence of its
 * description, its Python and TypeScript signatures) for as long as they fit
 * HUTCH_SEARCH_BRIEF_TEXT bytes, then the other matches by name only, with
 * the way to ask for more.  More is only given when asked: `detail`
 * "signatures" gives every result with its description, "full" adds the
 * JSON Schemas.  A tool the policy's globs deny is neither shown nor
 * counted, so an agent never plans with a tool it cannot call.
 *
 * Not here: ranking (catalog.c) and signatures (catalog_sig.c), the
 * decision on a call (policy.c, govern.c), MCP framing (mcp_tools.c),
 * waiting for the servers still starting (upstream.c).  No state: every
 * function works on a catalog, a policy or a status the caller holds, from
 * any thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "caps.h"
#include "discover.h"
#include "egress.h"
#include "shape.h"
#include "util.h"

int hutch_discover_offered(const struct hutch_policy *p,
                           const struct hutch_catalog_entry *e)
{
    return !p || hutch_policy_tool_listed(p, e->server, e->tool);
}

static int keep(void *arg, const struct hutch_catalog_entry *e)
{
    return hutch_discover_offered(arg, e);
}

/* The first sentence of d, at most max bytes, cut on a UTF-8 boundary. */
static void first_sentence(const char *d, char *out, size_t max)
{
    size_t n = 0;
    while (*d == ' ' || *d == '\n' || *d == '\t' || *d == '\r')
        d++;
    while (d[n] && d[n] != '\n' && !(d[n] == '.' && (!d[n + 1] || d[n + 1] == ' ')))
        n++;
    if (d[n] == '.')
        n++;
    if (n + 1 > max) {
        n = max > 4 ? max - 4 : 0;
        while (n && ((unsigned char)d[n] & 0xc0) == 0x80)
            n--;
        snprintf(out, max, "%.*s...", (int)n, d);
        return;
    }
    snprintf(out, max, "%.*s", (int)n, d);
}

static const char *str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static void add_json(struct hutch_buf *t, const char *label, const cJSON *v)
{
    char *js;
    if (!v)
        return;
    js = cJSON_PrintUnformatted(v);
    if (js)
        hutch_buf_appendf(t, "  %s: %s\n", label, js);
    free(js);
}

/* One result as text. */
static void render(struct hutch_buf *t, const cJSON *o, int sigs, int full)
{
    const char *name = str(o, "name"), *call = str(o, "call"),
               *desc = str(o, "description");
    const char *py = str(o, "python"), *ts = str(o, "typescript");
    hutch_buf_appendf(t, "%s — %s\n", name ? name : "?", call ? call : "");
    if (desc && desc[0])
        hutch_buf_appendf(t, "  %s\n", desc);
    if (sigs && py)
        hutch_buf_appendf(t, "  python:     %s\n", py);
    if (sigs && ts)
        hutch_buf_appendf(t, "  typescript: %s\n", ts);
    if (sigs && str(o, "returns") && strncmp(str(o, "returns"), "observed", 8) == 0)
        hutch_buf_appendf(t, "  returns:    %s (a shape seen, not a promise)\n",
                          str(o, "returns"));
    if (full) {
        add_json(t, "input schema", cJSON_GetObjectItemCaseSensitive(o, "inputSchema"));
        add_json(t, "output schema",
                 cJSON_GetObjectItemCaseSensitive(o, "outputSchema"));
        add_json(t, "annotations", cJSON_GetObjectItemCaseSensitive(o, "annotations"));
    }
}

/* *asked: a limit above HUTCH_SEARCH_MAX_RESULTS, clamped to it (the answer
 * says so, as execute_code does for its ceilings); 0 when none was. */
static int parse_args(const cJSON *args, const char **query, size_t *limit, int *detail,
                      double *asked, struct hutch_err *err)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(args, "query");
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(args, "limit");
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(args, "detail");

    if (!cJSON_IsString(q))
        return hutch_err_set(err, -EINVAL, "\"query\" must be a string");
    *query = q->valuestring;
    *limit = HUTCH_SEARCH_DEFAULT_RESULTS;
    *detail = -1;
    *asked = 0;
    if (lim && !cJSON_IsNull(lim)) {
        double v = cJSON_IsNumber(lim) ? lim->valuedouble : 0;
        if (!cJSON_IsNumber(lim) || v < 1 || (v < 1e15 && v != (double)(long long)v))
            return hutch_err_set(err, -EINVAL,
                                 "\"limit\" must be an integer from 1 to %d",
                                 HUTCH_SEARCH_MAX_RESULTS);
        if (v > HUTCH_SEARCH_MAX_RESULTS) {
            *asked = v;
            v = HUTCH_SEARCH_MAX_RESULTS;
        }
        *limit = (size_t)v;
    }
    if (det && !cJSON_IsNull(det)) {
        if (cJSON_IsString(det) && !strcmp(det->valuestring, "names"))
            *detail = HUTCH_DETAIL_NAMES;
        else if (cJSON_IsString(det) && !strcmp(det->valuestring, "signatures"))
            *detail = HUTCH_DETAIL_SIGNATURES;
        else if (cJSON_IsString(det) && !strcmp(det->valuestring, "full"))
            *detail = HUTCH_DETAIL_FULL;
        else
            return hutch_err_set(err, -EINVAL,
                                 "\"detail\" must be \"names\", \"signatures\" or "
                                 "\"full\"");
    }
    return 0;
}

/* The brief answer: whole results while they fit, then names.  Moves the
 * results shown into `shown` and the names of the rest into `more`. */
static void brief(const cJSON *found, size_t budget, struct hutch_buf *t, cJSON *shown,
                  cJSON *more)
{
    /* Room kept for the names of the rest and the hint after them. */
    const size_t reserve = 420;
    struct hutch_buf one;
    const cJSON *it;
    size_t base = t->len, nshown = 0, nrest = 0, written = 0;

    hutch_buf_init(&one, HUTCH_MCP_MAX_OUTPUT_TEXT);
    cJSON_ArrayForEach(it, found)
    {
        char d[HUTCH_SEARCH_BRIEF_DESC + 4];
        cJSON *o;
        if (nrest) {
            nrest++;
            cJSON_AddItemToArray(more, cJSON_CreateString(str(it, "name")));
            continue;
        }
        o = cJSON_Duplicate(it, 1);
        first_sentence(str(it, "description") ? str(it, "description") : "", d,
                       sizeof(d));
        cJSON_ReplaceItemInObjectCaseSensitive(o, "description", cJSON_CreateString(d));
        hutch_buf_reset(&one);
        render(&one, o, 1, 0);
        if (t->len - base + one.len + reserve > budget && nshown == 0) {
            /* Signatures too long for the brief answer: the name and the
             * sentence, and the signatures on request. */
            cJSON_DeleteItemFromObjectCaseSensitive(o, "python");
            cJSON_DeleteItemFromObjectCaseSensitive(o, "typescript");
            hutch_buf_reset(&one);
            render(&one, o, 0, 0);
            hutch_buf_appendf(&one,
                              "  (signatures: search with detail \"signatures\")\n");
        }
        if (t->len - base + one.len + reserve > budget) {
            cJSON_Delete(o);
            nrest++;
            cJSON_AddItemToArray(more, cJSON_CreateString(str(it, "name")));
            continue;
        }
        hutch_buf_append(t, one.data, one.len);
        cJSON_AddItemToArray(shown, o);
        nshown++;
    }
    hutch_buf_free(&one);
    if (!nrest)
        return;
    hutch_buf_appendf(t, "%zu more:", nrest);
    cJSON_ArrayForEach(it, more)
    {
        const char *n = cJSON_GetStringValue(it);
        size_t need = strlen(n) + 2;
        /* The hint below takes ~110 bytes. */
        if (t->len - base + need + 120 > budget) {
            hutch_buf_appendf(t, " …");
            break;
        }
        hutch_buf_appendf(t, "%s %s", written++ ? "," : "", n);
    }
    hutch_buf_appendf(t, "\n(search with a narrower query, or detail \"names\" / "
                         "\"signatures\" and a limit, for more)\n");
}

int hutch_discover_search(const struct hutch_catalog *cat, const struct hutch_policy *p,
                          const cJSON *args, int brief_ok, size_t budget,
                          const struct hutch_discover_shapes *shapes, cJSON **out,
                          struct hutch_buf *text, struct hutch_err *err)
{
    const char *query = "";
    size_t limit = HUTCH_SEARCH_DEFAULT_RESULTS, matches = 0, total = 0;
    int detail = -1, r;
    double asked = 0;
    cJSON *found, *o, *it;

    r = parse_args(args, &query, &limit, &detail, &asked, err);
    if (r < 0)
        return r;
    for (size_t i = 0; cat && i < hutch_catalog_count(cat); i++)
        total += hutch_discover_offered(p, hutch_catalog_at(cat, i));
    found = cat ? hutch_catalog_search_keep(cat, query, limit,
                                            detail < 0 ? HUTCH_DETAIL_SIGNATURES
                                                       : (enum hutch_detail)detail,
                                            keep, (void *)p, &matches)
                : cJSON_CreateArray();
    if (!found)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    if (cat && shapes && shapes->shapes)
        hutch_shapes_annotate(shapes->shapes, shapes->principal, cat, found,
                              detail < 0 ? HUTCH_DETAIL_SIGNATURES
                                         : (enum hutch_detail)detail,
                              shapes->may_see, shapes->arg);
    o = cJSON_CreateObject();
    if (!o) {
        cJSON_Delete(found);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    if (asked > 0) {
        char note[128];
        snprintf(note, sizeof(note),
                 "hutch: limit: asked for %.0f; this server gives at most %d", asked,
                 HUTCH_SEARCH_MAX_RESULTS);
        if (text)
            hutch_buf_appendf(text, "%s\n", note);
        cJSON_AddItemToObject(o, "notes",
                              cJSON_CreateStringArray((const char *[]){note}, 1));
    }
    if (text && cJSON_GetArraySize(found) == 0 && cat && hutch_catalog_count(cat))
        hutch_buf_appendf(text,
                          "No tool matches \"%.200s\" among %zu tools; try other words "
                          "or an empty query to list them all.\n",
                          query, total);
    if (detail < 0 && brief_ok && text) {
        cJSON *shown = cJSON_AddArrayToObject(o, "tools");
        cJSON *more = cJSON_CreateArray();
        brief(found, budget, text, shown, more);
        if (cJSON_GetArraySize(more))
            cJSON_AddItemToObject(o, "more", more);
        else
            cJSON_Delete(more);
        cJSON_Delete(found);
    } else {
        cJSON_ArrayForEach(it, found)
        {
            if (text)
                render(text, it, detail != HUTCH_DETAIL_NAMES,
                       detail == HUTCH_DETAIL_FULL);
        }
        cJSON_AddItemToObject(o, "tools", found);
    }
    cJSON_AddNumberToObject(o, "total", (double)total);
    cJSON_AddNumberToObject(o, "matches", (double)matches);
    *out = o;
    return 0;
}

cJSON *hutch_discover_directory(const struct hutch_catalog *cat,
                                const struct hutch_policy *p, const char *server)
{
    cJSON *o = cJSON_CreateObject(), *tools, *calls = NULL;
    size_t n = hutch_catalog_count(cat);

    if (!o)
        return NULL;
    tools = server ? cJSON_AddArrayToObject(o, "tools")
                   : cJSON_AddObjectToObject(o, "tools");
    if (!tools || (!server && !(calls = cJSON_AddArrayToObject(o, "calls"))))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(cat, i);
        cJSON *item, *list;
        if (!hutch_discover_offered(p, e))
            continue;
        if (server) {
            if (strcmp(e->server, server) &&
                (!e->py_tool || strcmp(e->py_server, server)))
                continue;
            if (!(item = hutch_catalog_describe(e, HUTCH_DETAIL_SIGNATURES)) ||
                !cJSON_AddItemToArray(tools, item)) {
                cJSON_Delete(item);
                goto fail;
            }
            continue;
        }
        if (!e->py_tool) {
            if (!(item = cJSON_CreateString(e->qualified)) ||
                !cJSON_AddItemToArray(calls, item)) {
                cJSON_Delete(item);
                goto fail;
            }
            continue;
        }
        list = cJSON_GetObjectItemCaseSensitive(tools, e->py_server);
        if (!list && !(list = cJSON_AddArrayToObject(tools, e->py_server)))
            goto fail;
        if (!(item = cJSON_CreateString(e->py_tool)) ||
            !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            goto fail;
        }
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

cJSON *hutch_discover_not_ready(const struct hutch_upstream_status *rows, size_t n,
                                struct hutch_buf *t)
{
    cJSON *down = NULL;
    int starting = 0;

    for (size_t i = 0; i < n; i++) {
        const char *name = rows[i].server,
                   *state = hutch_upstream_state_name(rows[i].state),
                   *why = rows[i].error[0] ? rows[i].error : NULL;
        cJSON *o;
        if (rows[i].state == HUTCH_UPSTREAM_READY ||
            !hutch_upstream_started(rows[i].state))
            continue;
        if (!down && !(down = cJSON_CreateArray()))
            return NULL;
        if (t && cJSON_GetArraySize(down) == 0)
            hutch_buf_appendf(t, "Servers whose tools are not listed:\n");
        if (t)
            hutch_buf_appendf(t, "  %s: %s%s%.300s%s\n", name, state, why ? " (" : "",
                              why ? why : "", why ? ")" : "");
        starting |= rows[i].state == HUTCH_UPSTREAM_STARTING;
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "server", name) ||
            !cJSON_AddStringToObject(o, "state", state) ||
            (why && !cJSON_AddStringToObject(o, "error", why)) ||
            !cJSON_AddItemToArray(down, o)) {
            cJSON_Delete(o);
            cJSON_Delete(down);
            return NULL;
        }
    }
    if (t && starting)
        hutch_buf_appendf(t, "A server still starting joins in a moment: search again "
                             "(a call to one of its tools waits for it).\n");
    return down;
}

void hutch_discover_suggest(const struct hutch_catalog *cat,
                            const struct hutch_policy *p, const char *tool, char *out,
                            size_t len)
{
    size_t n = cat ? hutch_catalog_count(cat) : 0, k = 0;
    const char **names = calloc(2 * n + 1, sizeof(*names));
    const char **owner = calloc(2 * n + 1, sizeof(*owner));
    char **idents = calloc(n + 1, sizeof(*idents));
    const char *best = NULL, *dot = strchr(tool, '.');

    out[0] = '\0';
    if (!names || !owner || !idents)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(cat, i);
        char id[2 * HUTCH_CATALOG_MAX_IDENT + 2];
        if (!hutch_discover_offered(p, e))
            continue;
        owner[k] = e->qualified;
        names[k++] = e->qualified;
        snprintf(id, sizeof(id), "%s.%s", e->py_server,
                 e->py_tool ? e->py_tool : e->tool);
        if (strcmp(id, e->qualified) && (idents[i] = strdup(id))) {
            owner[k] = e->qualified;
            names[k++] = idents[i];
        }
    }
    best = hutch_suggest(tool, names);
    for (size_t i = 0; best && i < k; i++)
        if (names[i] == best)
            best = owner[i];
    /* The right tool on another server: fs.read_file for files.read_file. */
    for (size_t i = 0; !best && dot && i < k; i++) {
        const char *d = strchr(owner[i], '.');
        if (d && !strcasecmp(d + 1, dot + 1))
            best = owner[i];
    }
    if (best)
        snprintf(out, len, " (did you mean \"%s\"?)", best);
out:
    for (size_t i = 0; idents && i < n; i++)
        free(idents[i]);
    free(idents);
    free(names);
    free(owner);
}

void hutch_discover_paths(const struct hutch_policy *p, struct hutch_buf *t)
{
    size_t n = p ? hutch_policy_npaths(p) : 0, rw = 0;
    if (!n) {
        hutch_buf_appendf(t, "- The policy names no host folders: `inputs` and "
                             "`output_dir` are refused.");
        return;
    }
    hutch_buf_appendf(t, "- Host folders the policy lets `inputs` copy from "
                         "(read-only, into /work):");
    for (size_t i = 0; i < n; i++) {
        const struct hutch_policy_path *e = hutch_policy_path_at(p, i);
        const char *sb = e->sandbox;
        int under = !strncmp(sb, "/work/", 6) || !strcmp(sb, "/work");
        hutch_buf_appendf(t, "%s %s (→ %s%s)", i ? "," : "", e->host,
                          under ? "" : "/work", sb);
        rw += e->rw;
    }
    hutch_buf_appendf(t, ".");
    if (!rw) {
        hutch_buf_appendf(t, " None is read-write: `output_dir` is refused.");
        return;
    }
    hutch_buf_appendf(t, " `output_dir` may be in:");
    for (size_t i = 0, w = 0; i < n; i++) {
        const struct hutch_policy_path *e = hutch_policy_path_at(p, i);
        if (e->rw)
            hutch_buf_appendf(t, "%s %s", w++ ? "," : "", e->host);
    }
    hutch_buf_appendf(t, ".");
}

void hutch_discover_egress(const struct hutch_egress_rules *r, struct hutch_buf *t)
{
    char one[HUTCH_EGRESS_MAX_PATTERN + 8];
    size_t shown =
        r && r->n < HUTCH_DISCOVER_EGRESS_RULES ? r->n : HUTCH_DISCOVER_EGRESS_RULES;
    if (!r)
        return;
    hutch_buf_appendf(
        t, "- Network: HTTP and HTTPS only through the proxy in "
           "HTTP_PROXY/HTTPS_PROXY (Python's urllib and requests, pip and "
           "curl use it, and so do JavaScript's fetch(), http and https), and "
           "only to");
    if (!r->n)
        hutch_buf_appendf(t, " nothing: the policy allows no host.");
    for (size_t i = 0; i < shown; i++)
        hutch_buf_appendf(t, "%s %s", i ? "," : "",
                          hutch_egress_rule_str(&r->rule[i], one, sizeof(one)));
    if (r->n > shown)
        hutch_buf_appendf(t, " and %zu more", r->n - shown);
    if (r->n)
        hutch_buf_appendf(t,
                          " (a host without a port: 80 and 443); the rest is refused "
                          "with a 403 saying why.");
}
