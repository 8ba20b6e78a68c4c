/* test_catalog.c — the tool catalog (identifiers, collisions, lookup, search,
 * generated signatures) and argument validation against JSON Schema,
 * including schemas an upstream could send to hurt us. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "catalog.h"
#include "schema.h"
#include "tap.h"

static void ident_is(const char *name, const char *want)
{
    char out[256];
    int r = hutch_ident(name, out, sizeof(out));
    ok(r == 0 && !strcmp(out, want), "ident \"%s\" -> \"%s\" (got \"%s\")", name, want,
       r == 0 ? out : "error");
}

static cJSON *tool(const char *server, const char *json)
{
    cJSON *o = cJSON_CreateObject(), *t = cJSON_Parse(json);
    if (!t) {
        printf("# bad test JSON: %s\n", json);
        exit(2);
    }
    cJSON_AddStringToObject(o, "server", server);
    cJSON_AddItemToObject(o, "tool", t);
    return o;
}

static struct hutch_catalog *build(cJSON *arr)
{
    struct hutch_catalog *c = NULL;
    struct hutch_err e = {0};
    int r = hutch_catalog_build(arr, &c, &e);
    cJSON_Delete(arr);
    if (r < 0) {
        printf("# build failed: %s\n", e.msg);
        exit(2);
    }
    return c;
}

static int warned(const struct hutch_catalog *c, const char *a, const char *b)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, hutch_catalog_warnings(c))
    {
        if (strstr(w->valuestring, a) && (!b || strstr(w->valuestring, b)))
            return 1;
    }
    return 0;
}

static const struct hutch_catalog_entry *find_tool(const struct hutch_catalog *c,
                                                   const char *server, const char *t)
{
    for (size_t i = 0; i < hutch_catalog_count(c); i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(c, i);
        if (!strcmp(e->server, server) && !strcmp(e->tool, t))
            return e;
    }
    return NULL;
}

static void test_idents(void)
{
    char small[4];
    char long_name[301], want[129];

    ident_is("get-sum", "get_sum");
    ident_is("get_sum", "get_sum");
    ident_is("2fa", "_2fa");
    ident_is("class", "class_");
    ident_is("None", "None_");
    ident_is("none", "none");
    ident_is("True", "True_");
    ident_is("true", "true_");
    ident_is("lambda", "lambda_");
    ident_is("typeof", "typeof_");
    ident_is("match", "match"); /* soft keyword: fine after a dot */
    ident_is("", "_");
    ident_is("a.b c", "a_b_c");
    ident_is("café", "caf_"); /* one "_" per character, not per byte */
    ident_is("naïve-tool", "na_ve_tool");
    ident_is("日本", "_"); /* "__", then the dunder rule */
    ident_is("x日本y", "x__y");
    ident_is("call", "call_"); /* tools.call is the runners' own method */
    ident_is("then", "then_"); /* probed by await in runner.js */
    ident_is("toJSON", "toJSON_");
    ident_is("constructor", "constructor_");
    ident_is("_server", "_server_"); /* a slot of hutch_runner.py's _Server */
    ident_is("__init__", "_init__");
    ident_is("__proto__", "_proto__");
    ident_is("___", "_");
    ident_is("_private", "_private");
    ident_is("$x", "_x");
    ident_is("9", "_9");
    ok(hutch_ident("get-sum", small, sizeof(small)) == -ENOSPC,
       "too small a buffer: -ENOSPC");
    ok(hutch_ident(NULL, small, sizeof(small)) == -EINVAL, "NULL name: -EINVAL");
    memset(long_name, 'a', 300);
    long_name[300] = '\0';
    memset(want, 'a', 128);
    want[128] = '\0';
    ident_is(long_name, want);
}

static void test_collisions(void)
{
    struct hutch_catalog *c;
    const struct hutch_catalog_entry *dash, *under, *dot, *e;
    cJSON *arr = cJSON_CreateArray();

    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"get-sum\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"get_sum\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"get.sum\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"a-b\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"a.b\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": \"echo\"}"));
    cJSON_AddItemToArray(
        arr, tool("everything", "{\"name\": \"echo\", \"description\": \"again\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"description\": \"no name\"}"));
    cJSON_AddItemToArray(arr, tool("everything", "{\"name\": 7}"));
    cJSON_AddItemToArray(arr, cJSON_CreateString("not an object"));
    cJSON_AddItemToArray(arr, tool("my-fs", "{\"name\": \"read\"}"));
    cJSON_AddItemToArray(arr, tool("my_fs", "{\"name\": \"read\"}"));
    cJSON_AddItemToArray(arr, tool("call", "{\"name\": \"x\"}"));
    {
        char name[400];
        memset(name, 'n', 300);
        name[300] = '\0';
        cJSON *o = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(o, "tool");
        cJSON_AddStringToObject(o, "server", "everything");
        cJSON_AddStringToObject(t, "name", name);
        cJSON_AddItemToArray(arr, o);
    }
    c = build(arr);

    ok(hutch_catalog_count(c) == 9, "invalid and duplicate entries dropped (%zu left)",
       hutch_catalog_count(c));
    dash = find_tool(c, "everything", "get-sum");
    under = find_tool(c, "everything", "get_sum");
    dot = find_tool(c, "everything", "get.sum");
    ok(dash && under && dot, "all three sum tools kept");
    ok(under && under->py_tool && !strcmp(under->py_tool, "get_sum"),
       "the tool literally named get_sum owns tools.everything.get_sum");
    ok(dash && !dash->py_tool && !strcmp(dash->py_server, "everything"),
       "get-sum lost the attribute (py_tool NULL)");
    ok(dot && !dot->py_tool, "get.sum lost it too");
    ok(warned(c, "\"get_sum\"", "\"get-sum\""),
       "the warning names get-sum and get_sum");
    ok(warned(c, "tools.call(\"everything.get-sum\")", NULL),
       "the warning says how to reach get-sum");
    ok(hutch_catalog_find(c, "everything.get_sum") == under,
       "everything.get_sum is the literal get_sum (attribute and tools.call agree)");
    ok(hutch_catalog_find(c, "everything.get-sum") == dash, "get-sum by its own name");
    ok(hutch_catalog_find(c, "everything.get.sum") == dot, "get.sum by its own name");

    e = find_tool(c, "everything", "a-b");
    ok(e && e->py_tool && !strcmp(e->py_tool, "a_b"),
       "no literal owner: the first keeps a_b");
    e = find_tool(c, "everything", "a.b");
    ok(e && !e->py_tool, "the second (a.b) has py_tool NULL");
    ok(warned(c, "\"a-b\"", "\"a.b\""), "warning for a-b / a.b");
    ok(hutch_catalog_find(c, "everything.a_b") == find_tool(c, "everything", "a-b"),
       "everything.a_b finds a-b");

    ok(warned(c, "lists tool \"echo\" twice", NULL), "duplicate tool warned");
    e = find_tool(c, "everything", "echo");
    ok(e && !cJSON_GetObjectItem(e->def, "description"), "the first echo is kept");
    ok(warned(c, "no \"name\"", NULL), "nameless tool warned");
    ok(warned(c, "not a {\"server\", \"tool\"} pair", NULL), "non-object entry warned");
    ok(warned(c, "longer than 256 bytes", NULL), "overlong name warned");

    e = find_tool(c, "my-fs", "read");
    ok(e && !e->py_tool && !strcmp(e->py_server, "my_fs"),
       "server my-fs lost tools.my_fs");
    ok(find_tool(c, "my_fs", "read")->py_tool != NULL, "server my_fs owns it");
    ok(warned(c, "\"my-fs\"", "\"my_fs\""), "server collision warned");
    ok(hutch_catalog_find(c, "my_fs.read") == find_tool(c, "my_fs", "read"),
       "my_fs.read is my_fs's");
    ok(hutch_catalog_find(c, "my-fs.read") == e, "my-fs.read is my-fs's");

    e = find_tool(c, "call", "x");
    ok(e && !strcmp(e->py_server, "call_") && e->py_tool,
       "server \"call\" maps to call_");
    ok(hutch_catalog_find(c, "call_.x") == e && hutch_catalog_find(c, "call.x") == e,
       "found as call_.x and call.x");
    hutch_catalog_free(c);
}

static cJSON *mini_catalog(void)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(
        a,
        tool("fs", "{\"name\":\"read_file\",\"description\":\"Read the complete "
                   "contents of a file from the file system. Handles various text "
                   "encodings.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
                   "\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}}"));
    cJSON_AddItemToArray(
        a,
        tool("fs", "{\"name\":\"read_multiple_files\",\"description\":\"Read the "
                   "contents of multiple files simultaneously.\",\"inputSchema\":{"
                   "\"type\":\"object\",\"properties\":{\"paths\":{\"type\":\"array\","
                   "\"items\":{\"type\":\"string\"}}},\"required\":[\"paths\"]}}"));
    cJSON_AddItemToArray(
        a, tool("fs", "{\"name\":\"write_file\",\"description\":\"Create a new file or "
                      "completely overwrite an existing file with new content.\","
                      "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"path\":{"
                      "\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
                      "\"required\":[\"path\",\"content\"]}}"));
    cJSON_AddItemToArray(
        a, tool("fs", "{\"name\":\"list_directory\",\"description\":\"Get a detailed "
                      "listing of all files and directories in a specified path.\","
                      "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"path\":{"
                      "\"type\":\"string\"}},\"required\":[\"path\"]}}"));
    cJSON_AddItemToArray(
        a, tool("fs", "{\"name\":\"directory_tree\",\"description\":\"Get a recursive "
                      "tree view of files and directories as a JSON structure.\","
                      "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"path\":{"
                      "\"type\":\"string\"}},\"required\":[\"path\"]}}"));
    cJSON_AddItemToArray(
        a, tool("everything",
                "{\"name\":\"echo\",\"description\":\"Echoes back the "
                "input\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
                "{\"message\":{\"type\":\"string\"}},\"required\":["
                "\"message\"]}}"));
    cJSON_AddItemToArray(
        a,
        tool("everything",
             "{\"name\":\"get-sum\",\"title\":\"Get Sum\",\"description\":\"Returns "
             "the sum of two numbers.\\nBoth must be finite.\",\"inputSchema\":{"
             "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{"
             "\"type\":\"number\"}},\"required\":[\"a\",\"b\"]},\"outputSchema\":{"
             "\"type\":\"object\",\"properties\":{\"sum\":{\"type\":\"number\"}}},"
             "\"annotations\":{\"readOnlyHint\":true}}"));
    cJSON_AddItemToArray(
        a,
        tool("everything", "{\"name\":\"getTinyImage\",\"description\":\"Returns the "
                           "MCP_TINY_IMAGE\",\"inputSchema\":{\"type\":\"object\","
                           "\"properties\":{}}}"));
    cJSON_AddItemToArray(
        a,
        tool("memory", "{\"name\":\"create_entities\",\"description\":\"Create "
                       "multiple new entities in the knowledge graph\",\"inputSchema\":"
                       "{\"type\":\"object\",\"properties\":{\"entities\":{\"type\":"
                       "\"array\",\"items\":{\"type\":\"object\"}}},\"required\":["
                       "\"entities\"]}}"));
    cJSON_AddItemToArray(
        a, tool("memory", "{\"name\":\"read_graph\",\"description\":\"Read the entire "
                          "knowledge graph\",\"inputSchema\":{\"type\":\"object\","
                          "\"properties\":{}}}"));
    cJSON_AddItemToArray(
        a,
        tool("memory", "{\"name\":\"search_nodes\",\"description\":\"Search for nodes "
                       "in the knowledge graph based on a query\",\"inputSchema\":{"
                       "\"type\":\"object\",\"properties\":{\"query\":{\"type\":"
                       "\"string\"}},\"required\":[\"query\"]}}"));
    return a;
}

static const char *nth_name(const cJSON *res, int i)
{
    const cJSON *o = cJSON_GetArrayItem(res, i);
    const cJSON *n = cJSON_GetObjectItem(o, "name");
    return cJSON_IsString(n) ? n->valuestring : "(none)";
}

static void search_first(struct hutch_catalog *c, const char *q, const char *want)
{
    cJSON *r = hutch_catalog_search(c, q, 0, HUTCH_DETAIL_NAMES);
    ok(r && !strcmp(nth_name(r, 0), want), "search \"%s\": %s first (got %s)", q, want,
       nth_name(r, 0));
    cJSON_Delete(r);
}

static void test_find_and_search(void)
{
    struct hutch_catalog *c = build(mini_catalog());
    const struct hutch_catalog_entry *sum = find_tool(c, "everything", "get-sum");
    const cJSON *o, *k;
    cJSON *r;
    int all_ok;

    /* find */
    ok(sum && hutch_catalog_find(c, "everything.get-sum") == sum,
       "find by upstream names");
    ok(hutch_catalog_find(c, "everything.get_sum") == sum, "find by identifiers");
    ok(hutch_catalog_find(c, "everything.GET-SUM") == sum, "find ignoring case");
    ok(hutch_catalog_find(c, " Everything.Get-Sum ") == sum,
       "find ignoring case and surrounding whitespace");
    ok(hutch_catalog_find(c, "\teverything.get_Sum\n") == sum,
       "mixed identifier forms");
    ok(hutch_catalog_find(c, "everything.getTinyImage") ==
           find_tool(c, "everything", "getTinyImage"),
       "camelCase name found as is");
    ok(!hutch_catalog_find(c, "everything.nope"), "unknown tool: NULL");
    ok(!hutch_catalog_find(c, "everything"), "a server alone: NULL");
    ok(!hutch_catalog_find(c, ""), "empty: NULL");
    ok(!hutch_catalog_find(c, "everything.get - sum"),
       "inner whitespace is not ignored");
    ok(!hutch_catalog_find(c, "everythingget-sum"), "missing dot: NULL");

    /* ranking */
    search_first(c, "read file", "fs.read_file");
    search_first(c, "sum", "everything.get-sum");
    search_first(c, "directory", "fs.list_directory");
    search_first(c, "list directory", "fs.list_directory");
    search_first(c, "echo", "everything.echo");
    search_first(c, "everything.get_sum", "everything.get-sum");
    search_first(c, "tiny image", "everything.getTinyImage");
    search_first(c, "entities", "memory.create_entities");
    search_first(c, "knowledge graph", "memory.read_graph");
    search_first(c, "write", "fs.write_file");
    search_first(c, "multiple files", "fs.read_multiple_files");
    search_first(c, "files", "fs.read_file"); /* stems: file(s) ties, catalog order */
    search_first(c, "READ_FILE", "fs.read_file");
    r = hutch_catalog_search(c, "read file", 0, HUTCH_DETAIL_NAMES);
    ok(r && !strcmp(nth_name(r, 1), "fs.read_multiple_files"),
       "read file: read_multiple_files second (got %s)", nth_name(r, 1));
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "zebra", 0, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 0, "no match: empty array");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "graph", 0, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 3 && !strcmp(nth_name(r, 0), "memory.read_graph"),
       "only matching tools are returned (%d)", r ? cJSON_GetArraySize(r) : -1);
    cJSON_Delete(r);

    /* empty query and limits */
    r = hutch_catalog_search(c, "", 0, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 10, "empty query, limit 0: the default 10");
    ok(r && !strcmp(nth_name(r, 0), "fs.read_file") &&
           !strcmp(nth_name(r, 9), "memory.read_graph"),
       "empty query lists in catalog order");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "  ", 1000, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 11, "blank query with a large limit lists all 11");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, NULL, 3, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 3, "limit 3 honoured");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "file", 2, HUTCH_DETAIL_NAMES);
    ok(r && cJSON_GetArraySize(r) == 2, "limit honoured on a ranked search");
    cJSON_Delete(r);

    /* detail levels */
    r = hutch_catalog_search(c, "get-sum", 1, HUTCH_DETAIL_NAMES);
    o = cJSON_GetArrayItem(r, 0);
    ok(o && !strcmp(cJSON_GetObjectItem(o, "call")->valuestring,
                    "tools.everything.get_sum"),
       "NAMES: call is tools.everything.get_sum");
    k = cJSON_GetObjectItem(o, "description");
    ok(k && !strcmp(k->valuestring, "Returns the sum of two numbers."),
       "NAMES: the first sentence (%s)", k ? k->valuestring : "-");
    ok(cJSON_GetArraySize(o) == 3 && !cJSON_GetObjectItem(o, "python"),
       "NAMES: only name, call, description");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "get-sum", 1, HUTCH_DETAIL_SIGNATURES);
    o = cJSON_GetArrayItem(r, 0);
    k = cJSON_GetObjectItem(o, "python");
    ok(k && !strcmp(
                k->valuestring,
                "def get_sum(*, a: float, b: float) -> {\"sum\": NotRequired[float]}"),
       "SIGNATURES: python (%s)", k ? k->valuestring : "-");
    k = cJSON_GetObjectItem(o, "typescript");
    ok(k && !strcmp(
                k->valuestring,
                "get_sum(args: { a: number; b: number }): Promise<{ sum?: number }>"),
       "SIGNATURES: typescript (%s)", k ? k->valuestring : "-");
    k = cJSON_GetObjectItem(o, "description");
    ok(k && strstr(k->valuestring, "Both must be finite."),
       "SIGNATURES: full description");
    ok(!cJSON_GetObjectItem(o, "inputSchema"), "SIGNATURES: no schema");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "get-sum", 1, HUTCH_DETAIL_FULL);
    o = cJSON_GetArrayItem(r, 0);
    all_ok = 1;
    for (const char *const *key =
             (const char *const[]){"name", "call", "title", "description", "python",
                                   "typescript", "inputSchema", "outputSchema",
                                   "annotations", NULL};
         *key; key++)
        all_ok &= cJSON_GetObjectItem(o, *key) != NULL;
    ok(all_ok && cJSON_GetArraySize(o) == 9, "FULL: every key present");
    ok(!strcmp(cJSON_GetObjectItem(o, "title")->valuestring, "Get Sum"), "FULL: title");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "echo", 1, HUTCH_DETAIL_FULL);
    o = cJSON_GetArrayItem(r, 0);
    ok(o && !cJSON_GetObjectItem(o, "outputSchema") &&
           !cJSON_GetObjectItem(o, "annotations") && !cJSON_GetObjectItem(o, "title") &&
           cJSON_GetObjectItem(o, "inputSchema"),
       "FULL: absent outputSchema/annotations/title are left out");
    cJSON_Delete(r);
    hutch_catalog_free(c);

    /* a collided tool's call form */
    {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, tool("s", "{\"name\":\"x-y\"}"));
        cJSON_AddItemToArray(a, tool("s", "{\"name\":\"x.y\",\"description\":\""
                                          "say \\\"hi\\\"\"}"));
        c = build(a);
        r = hutch_catalog_search(c, "x.y", 0, HUTCH_DETAIL_NAMES);
        o = cJSON_GetArrayItem(r, 0);
        ok(o && !strcmp(nth_name(r, 0), "s.x.y") &&
               !strcmp(cJSON_GetObjectItem(o, "call")->valuestring,
                       "tools.call(\"s.x.y\")"),
           "collided tool: call is tools.call(\"s.x.y\")");
        cJSON_Delete(r);
        hutch_catalog_free(c);
    }

    /* a long first sentence is cut */
    {
        char desc[1200], json[1400];
        cJSON *a = cJSON_CreateArray();
        memset(desc, 'w', 1000);
        desc[1000] = '\0';
        snprintf(json, sizeof(json), "{\"name\":\"t\",\"description\":\"%s\"}", desc);
        cJSON_AddItemToArray(a, tool("s", json));
        c = build(a);
        r = hutch_catalog_search(c, "", 0, HUTCH_DETAIL_NAMES);
        k = cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "description");
        ok(k && strlen(k->valuestring) == 200 && !strcmp(k->valuestring + 197, "..."),
           "short description capped at 200 bytes");
        cJSON_Delete(r);
        hutch_catalog_free(c);
    }
}

static int count(struct hutch_catalog *c, const char *q)
{
    cJSON *r = hutch_catalog_search(c, q, 100, HUTCH_DETAIL_NAMES);
    int n = r ? cJSON_GetArraySize(r) : -1;
    cJSON_Delete(r);
    return n;
}

/* Function words match nothing, and a word found in one description does
 * not make a longer query match. */
static void test_stop_words(void)
{
    struct hutch_catalog *c = build(mini_catalog());
    cJSON *a, *b;
    char *ja, *jb;

    ok(count(c, "the") == 0, "\"the\" matches nothing (%d)", count(c, "the"));
    ok(count(c, "to the of and") == 0, "a query of function words matches nothing");
    ok(count(c, "in") == 0 && count(c, "for") == 0 && count(c, "a") == 0,
       "\"in\", \"for\", \"a\" match nothing");
    a = hutch_catalog_search(c, "read file", 100, HUTCH_DETAIL_NAMES);
    b = hutch_catalog_search(c, "read the file, please", 100, HUTCH_DETAIL_NAMES);
    ja = cJSON_PrintUnformatted(a);
    jb = cJSON_PrintUnformatted(b);
    ok(ja && jb && !strcmp(ja, jb), "function words leave the ranking as it was");
    free(ja);
    free(jb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    search_first(c, "what is in the knowledge graph", "memory.read_graph");
    hutch_catalog_free(c);

    a = cJSON_CreateArray();
    cJSON_AddItemToArray(
        a, tool("everything",
                "{\"name\":\"simulate-research-query\",\"description\":\"Simulates a "
                "research operation. If 'ambiguous' is true, sends an elicitation "
                "request to the client.\"}"));
    cJSON_AddItemToArray(
        a, tool("fs", "{\"name\":\"write_file\",\"description\":\"Write text to a "
                      "file.\"}"));
    c = build(a);
    ok(count(c, "send email to bob") == 0,
       "\"send email to bob\": a description's \"sends\" alone is no match (%d)",
       count(c, "send email to bob"));
    ok(count(c, "send") == 1, "\"send\" alone still finds it");
    ok(count(c, "send research") == 1, "half the words are enough");
    ok(count(c, "simulate") == 1 && count(c, "simulate email bob zebra") == 1,
       "a word of the name is enough");
    ok(count(c, "everything.simulate-research-query") == 1, "the name outright");
    hutch_catalog_free(c);

    a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, tool("mail", "{\"name\":\"send_message\"}"));
    c = build(a);
    ok(count(c, "send email to bob") == 1, "a tool named for sending is a match");
    hutch_catalog_free(c);
}

static const struct hutch_catalog_entry *sigs_of(struct hutch_catalog **c,
                                                 const char *json)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, tool("s", json));
    *c = build(a);
    return hutch_catalog_at(*c, 0);
}

static void sig_is(const char *json, const char *py, const char *ts, const char *desc)
{
    struct hutch_catalog *c;
    const struct hutch_catalog_entry *e = sigs_of(&c, json);
    int py_ok = e && !strcmp(e->python_sig, py), ts_ok = e && !strcmp(e->ts_decl, ts);
    ok(py_ok, "%s: python", desc);
    if (!py_ok)
        printf("#   got  %s\n#   want %s\n", e ? e->python_sig : "-", py);
    ok(ts_ok, "%s: typescript", desc);
    if (!ts_ok)
        printf("#   got  %s\n#   want %s\n", e ? e->ts_decl : "-", ts);
    hutch_catalog_free(c);
}

static void test_signatures(void)
{
    sig_is("{\"name\":\"get-sum\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"},\"note\":{\"type\":"
           "\"string\"}},\"required\":[\"a\",\"b\"]}}",
           "def get_sum(*, a: float, b: float, note: str | None = None) -> Any",
           "get_sum(args: { a: number; b: number; note?: string }): Promise<any>",
           "the brief's example");
    sig_is(
        "{\"name\":\"open\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
        "\"mode\":{\"type\":\"string\",\"enum\":[\"r\",\"w\"]},"
        "\"path\":{\"type\":\"string\"},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
        "\"opts\":{\"type\":\"object\",\"properties\":{\"depth\":{\"type\":\"integer\"}"
        ","
        "\"follow\":{\"type\":\"boolean\"}},\"required\":[\"depth\"]},"
        "\"size\":{\"type\":[\"integer\",\"null\"]},"
        "\"value\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]},"
        "\"ids\":{\"type\":\"array\",\"items\":{\"type\":[\"integer\",\"string\"]}},"
        "\"meta\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
        "\"item\":{\"$ref\":\"#/$defs/Item\"},"
        "\"kind\":{\"$ref\":\"#/$defs/Kind\"},"
        "\"flag\":{\"const\":true},"
        "\"maybe\":{\"enum\":[\"a\",null,2]},"
        "\"free\":{}},"
        "\"required\":[\"path\",\"tags\",\"mode\"],"
        "\"$defs\":{\"Item\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
        "\"integer\"}},\"required\":[\"id\"]},\"Kind\":{\"enum\":[\"x\",\"y\"]}}}}",
        "def open(*, mode: Literal[\"r\", \"w\"], path: str, tags: list[str], "
        "opts: {\"depth\": int, \"follow\": NotRequired[bool]} | None = None, "
        "size: int | None = None, "
        "value: str | float | None = None, ids: list[int | str] | None = None, "
        "meta: dict[str, str] | None = None, item: {\"id\": int} | None = None, "
        "kind: Literal[\"x\", \"y\"] | None = None, flag: Literal[True] | None = None, "
        "maybe: Literal[\"a\", 2] | None = None, free: Any = None) -> Any",
        "open(args: { mode: \"r\" | \"w\"; path: string; tags: string[]; "
        "opts?: { depth: number; follow?: boolean }; size?: number | null; "
        "value?: string | number; ids?: Array<number | string>; "
        "meta?: Record<string, string>; item?: { id: number }; kind?: \"x\" | \"y\"; "
        "flag?: true; maybe?: \"a\" | 2 | null; free?: any }): Promise<any>",
        "required/optional/enum/array/nested/union/$ref");
    sig_is("{\"name\":\"no-schema\"}", "def no_schema(**kwargs: Any) -> Any",
           "no_schema(args?: Record<string, any>): Promise<any>", "no inputSchema");
    sig_is("{\"name\":\"getTinyImage\",\"inputSchema\":{\"type\":\"object\","
           "\"properties\":{}}}",
           "def getTinyImage() -> Any", "getTinyImage(args?: {}): Promise<any>",
           "no parameters");
    sig_is("{\"name\":\"opt\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"n\":{\"type\":\"integer\"}}},\"outputSchema\":{\"type\":\"object\"}}",
           "def opt(*, n: int | None = None) -> dict[str, Any]",
           "opt(args?: { n?: number }): Promise<Record<string, any>>",
           "all optional, with outputSchema");
    sig_is("{\"name\":\"copy\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"to\":{\"type\":\"string\"},\"from\":{\"type\":\"string\"},"
           "\"file-mode\":{\"type\":\"integer\"}},\"required\":[\"from\"]}}",
           "def copy(args: {\"from\": str, \"to\": NotRequired[str], "
           "\"file-mode\": NotRequired[int]}, /) -> Any",
           "copy(args: { to?: string; from: string; \"file-mode\"?: number }): "
           "Promise<any>",
           "parameters that are no Python keyword argument");
    sig_is("{\"name\":\"class\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"x\":{\"type\":\"object\",\"properties\":{\"q\\\"uote\":{\"type\":"
           "\"string\"}}}}}}",
           "def class_(*, x: {\"q\\\"uote\": NotRequired[str]} | None = None) -> Any",
           "class_(args?: { x?: { \"q\\\"uote\"?: string } }): Promise<any>",
           "quoted nested key, keyword tool name");
    /* server-memory's create_entities: nested shapes spelled out in both. */
    sig_is("{\"name\":\"create_entities\",\"inputSchema\":{\"type\":\"object\","
           "\"properties\":{\"entities\":{\"type\":\"array\",\"items\":{\"type\":"
           "\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"entityType\":"
           "{\"type\":\"string\"},\"observations\":{\"type\":\"array\",\"items\":{"
           "\"type\":\"string\"}}},\"required\":[\"name\",\"entityType\","
           "\"observations\"]}}},\"required\":[\"entities\"]}}",
           "def create_entities(*, entities: list[{\"name\": str, \"entityType\": str, "
           "\"observations\": list[str]}]) -> Any",
           "create_entities(args: { entities: { name: string; entityType: string; "
           "observations: string[] }[] }): Promise<any>",
           "a list of objects: the object's fields in Python as in TypeScript");
    sig_is("{\"name\":\"weird\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"a\":5,\"b\":{\"type\":7},\"c\":{\"type\":\"file\"},\"d\":{\"items\":{"
           "\"type\":\"boolean\"}},\"e\":{\"allOf\":[{\"description\":\"x\"},{\"type\":"
           "\"string\"}]},\"f\":{\"$ref\":\"#/nowhere\"},\"g\":{\"enum\":[{\"a\":1}],"
           "\"type\":\"object\"}},\"required\":5}}",
           "def weird(*, a: Any = None, b: Any = None, c: Any = None, "
           "d: list[bool] | None = None, e: str | None = None, f: Any = None, "
           "g: dict[str, Any] | None = None) -> Any",
           "weird(args?: { a?: any; b?: any; c?: any; d?: boolean[]; e?: string; "
           "f?: any; g?: Record<string, any> }): Promise<any>",
           "odd and broken schemas degrade to Any");
    sig_is("{\"name\":\"u\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
           "\"x\":{\"anyOf\":[{},{\"minimum\":1}],\"type\":[\"integer\",\"null\"]}},"
           "\"required\":[\"x\"]}}",
           "def u(*, x: int | None) -> Any",
           "u(args: { x: number | null }): Promise<any>",
           "an anyOf that says nothing falls through to the type list");
    sig_is("{\"name\":\"t\",\"inputSchema\":{\"properties\":[]}}",
           "def t(**kwargs: Any) -> Any", "t(args?: Record<string, any>): Promise<any>",
           "properties not an object");
    /* Declared return types: the outputSchema spelled out (objects
     * inline, nested ones too, $refs inside it resolved against it). */
    sig_is(
        "{\"name\":\"weather\",\"inputSchema\":{\"type\":\"object\"},"
        "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"temperature\":{"
        "\"type\":\"number\"},\"conditions\":{\"type\":\"string\"},\"tags\":{"
        "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Tag\"}}},\"required\":["
        "\"temperature\",\"conditions\"],\"$defs\":{\"Tag\":{\"type\":\"object\","
        "\"properties\":{\"k\":{\"type\":\"string\"}},\"required\":[\"k\"]}}}}",
        "def weather(**kwargs: Any) -> {\"temperature\": float, \"conditions\": str, "
        "\"tags\": NotRequired[list[{\"k\": str}]]}",
        "weather(args?: Record<string, any>): Promise<{ temperature: number; "
        "conditions: string; tags?: { k: string }[] }>",
        "outputSchema: the declared return type");
    sig_is("{\"name\":\"n\",\"outputSchema\":{\"type\":[\"array\",\"null\"],"
           "\"items\":{\"type\":\"integer\"}}}",
           "def n(**kwargs: Any) -> list[int] | None",
           "n(args?: Record<string, any>): Promise<number[] | null>",
           "outputSchema: a union");
    {
        /* 300 properties: too wide to spell out at any depth, so dict. */
        char big[300 * 40 + 200];
        size_t n = (size_t)snprintf(big, sizeof(big),
                                    "{\"name\":\"w\",\"outputSchema\":{\"type\":"
                                    "\"object\",\"properties\":{");
        for (int i = 0; i < 300; i++)
            n += (size_t)snprintf(big + n, sizeof(big) - n,
                                  "%s\"field_%03d\":{\"type\":\"string\"}",
                                  i ? "," : "", i);
        snprintf(big + n, sizeof(big) - n, "}}}");
        sig_is(big, "def w(**kwargs: Any) -> dict[str, Any]",
               "w(args?: Record<string, any>): Promise<Record<string, any>>",
               "outputSchema too wide: the generic object type");
    }
    sig_is("{\"name\":\"t\",\"inputSchema\":5}", "def t(**kwargs: Any) -> Any",
           "t(args?: Record<string, any>): Promise<any>", "inputSchema not an object");

    /* Hostile: deep nesting, $ref cycles, exponential anyOf. */
    {
        struct hutch_catalog *c;
        const struct hutch_catalog_entry *e;
        const size_t cap = 60000;
        char *deep = malloc(cap);
        size_t o = 0;
        o += (size_t)snprintf(deep + o, cap - o,
                              "{\"name\":\"deep\",\"inputSchema\":{\"type\":"
                              "\"object\",\"properties\":{\"x\":");
        for (int i = 0; i < 900; i++)
            o += (size_t)snprintf(deep + o, cap - o, "{\"type\":\"array\",\"items\":");
        o += (size_t)snprintf(deep + o, cap - o, "{\"type\":\"string\"}");
        for (int i = 0; i < 900; i++)
            deep[o++] = '}';
        o += (size_t)snprintf(deep + o, cap - o, "}}}");
        e = sigs_of(&c, deep);
        ok(e && !strncmp(e->python_sig, "def deep(*, x: list[list[", 25) &&
               strstr(e->python_sig, "list[Any]"),
           "900 levels of arrays: cut to Any at the depth cap");
        hutch_catalog_free(c);
        free(deep);
    }
    sig_is(
        "{\"name\":\"cyc\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"x\":{"
        "\"$ref\":\"#/$defs/A\"}},\"$defs\":{\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{"
        "\"$ref\":\"#/$defs/A\"}}}}",
        "def cyc(*, x: Any = None) -> Any", "cyc(args?: { x?: any }): Promise<any>",
        "a $ref cycle ends as Any");
    sig_is(
        "{\"name\":\"boom\",\"inputSchema\":{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{"
        "\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/A\"},\"b\":{"
        "\"$ref\":\"#/$defs/A\"},\"c\":{\"$ref\":\"#/$defs/A\"},\"d\":{\"$ref\":"
        "\"#/$defs/A\"}}}}}}",
        "def boom(*, a: {\"a\": NotRequired[Any], \"b\": NotRequired[Any], \"c\": "
        "NotRequired[Any], \"d\": NotRequired[Any]} | None = None, b: {\"a\": "
        "NotRequired[Any], \"b\": NotRequired[Any], \"c\": NotRequired[Any], \"d\": "
        "NotRequired[Any]} | None = None, c: {\"a\": NotRequired[Any], \"b\": "
        "NotRequired[Any], \"c\": NotRequired[Any], \"d\": NotRequired[Any]} | None "
        "= None, d: {\"a\": NotRequired[Any], \"b\": NotRequired[Any], \"c\": "
        "NotRequired[Any], \"d\": NotRequired[Any]} | None = None) -> Any",
        "boom(args?: { a?: { a?: any; b?: any; c?: any; d?: any }; b?: { a?: any; b?: "
        "any; c?: any; d?: any }; c?: { a?: any; b?: any; c?: any; d?: any }; d?: { "
        "a?: "
        "any; b?: any; c?: any; d?: any } }): Promise<any>",
        "exponential recursive type: rendered shallower, at one depth in both");
}

static void valid(const char *schema, const char *value, const char *desc)
{
    cJSON *s = schema ? cJSON_Parse(schema) : NULL, *v = cJSON_Parse(value);
    char msg[512];
    int r = hutch_schema_validate(s, v, msg, sizeof(msg));
    ok(r == 0, "valid: %s%s%s", desc, r ? " — " : "", r ? msg : "");
    cJSON_Delete(s);
    cJSON_Delete(v);
}

static void invalid(const char *schema, const char *value, const char *want,
                    const char *desc)
{
    cJSON *s = cJSON_Parse(schema), *v = cJSON_Parse(value);
    char msg[512];
    int r;
    if (!s || !v) {
        printf("# bad test JSON in %s\n", desc);
        exit(2);
    }
    r = hutch_schema_validate(s, v, msg, sizeof(msg));
    ok(r == -EINVAL && !strcmp(msg, want), "invalid: %s", desc);
    if (r != -EINVAL || strcmp(msg, want))
        printf("#   got  %s\n#   want %s\n", r ? msg : "(accepted)", want);
    cJSON_Delete(s);
    cJSON_Delete(v);
}

static void test_schema(void)
{
    const char *obj =
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
        "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}";
    char msg[256];

    valid(NULL, "{\"x\":1}", "no schema accepts everything");
    valid("{}", "[1,\"x\"]", "empty schema accepts everything");
    valid("true", "3", "schema true");
    invalid("false", "3", "args: no value is allowed here", "schema false");
    valid(obj, "{\"a\":1,\"b\":2.5}", "numbers");
    valid(obj, "{\"a\":1,\"b\":2,\"extra\":true}",
          "extra properties allowed by default");
    invalid(obj, "{\"a\":1,\"b\":\"2\"}", "args.b: expected number, got string",
            "type");
    invalid(obj, "{\"b\":2}", "args: missing required property \"a\"", "required");
    invalid(obj, "[]", "args: expected object, got array", "root type");
    invalid("{\"type\":\"integer\"}", "1.5", "args: expected integer, got number",
            "integer rejects fractions");
    valid("{\"type\":\"integer\"}", "3.0", "integer accepts 3.0");
    valid("{\"type\":\"integer\"}", "1e300", "integer accepts 1e300");
    invalid("{\"type\":[\"string\",\"null\"]}", "true",
            "args: expected string or null, got boolean", "type list");
    valid("{\"type\":[\"string\",\"null\"]}", "null", "type list matches null");
    valid("{\"type\":\"file\"}", "3", "an unknown type name is not enforced");
    valid("{\"type\":5}", "3", "type of the wrong JSON type is ignored");
    invalid("{\"properties\":{\"mode\":{\"enum\":[\"r\",\"w\"]}}}", "{\"mode\":\"x\"}",
            "args.mode: must be one of \"r\", \"w\"", "enum");
    valid("{\"enum\":[1,\"a\",null,{\"k\":[1]}]}", "{\"k\":[1]}",
          "enum with an object");
    invalid("{\"const\":\"v1\"}", "\"v2\"", "args: must be \"v1\"", "const");
    valid("{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}", "const object");
    invalid("{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{\"a\":"
            "{}}}",
            "{\"a\":1,\"x\":2}", "args: unexpected property \"x\"",
            "additionalProperties false");
    invalid(
        "{\"additionalProperties\":{\"type\":\"string\"},\"properties\":{\"a\":{}}}",
        "{\"a\":1,\"x\":2}", "args.x: expected string, got number",
        "additionalProperties schema");
    valid("{\"additionalProperties\":false,\"patternProperties\":{\"^x\":{}}}",
          "{\"x1\":2}", "additionalProperties not judged beside patternProperties");
    invalid("{\"minimum\":1}", "0", "args: must be >= 1", "minimum");
    invalid("{\"maximum\":10}", "10.5", "args: must be <= 10", "maximum");
    invalid("{\"exclusiveMinimum\":0}", "0", "args: must be > 0", "exclusiveMinimum");
    invalid("{\"exclusiveMaximum\":1.5}", "1.5", "args: must be < 1.5",
            "exclusiveMaximum");
    invalid("{\"minimum\":0,\"exclusiveMinimum\":true}", "0", "args: must be > 0",
            "draft-4 boolean exclusiveMinimum");
    valid("{\"minimum\":1,\"maximum\":2}", "\"str\"", "number bounds skip strings");
    invalid("{\"minLength\":3}", "\"ab\"",
            "args: must be at least 3 characters long, got 2", "minLength");
    invalid("{\"maxLength\":2}", "\"日本語\"",
            "args: must be at most 2 characters long, got 3",
            "maxLength counts characters, not bytes");
    valid("{\"maxLength\":3}", "\"日本語\"", "3 characters in 9 bytes");
    invalid("{\"minItems\":1}", "[]", "args: must have at least 1 items, got 0",
            "minItems");
    invalid("{\"maxItems\":1}", "[1,2]", "args: must have at most 1 items, got 2",
            "maxItems");
    invalid("{\"properties\":{\"list\":{\"items\":{\"type\":\"string\"}}}}",
            "{\"list\":[\"a\",\"b\",3]}", "args.list[2]: expected string, got number",
            "items, with the index in the path");
    invalid("{\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"number\"}}",
            "[\"a\",1,\"b\"]", "args[2]: expected number, got string",
            "prefixItems + items");
    valid("{\"items\":[{\"type\":\"string\"}]}", "[\"a\",1]",
          "draft-4 tuple, free rest");
    invalid("{\"items\":[{\"type\":\"string\"}],\"additionalItems\":false}",
            "[\"a\",1]", "args[1]: no value is allowed here", "additionalItems false");
    invalid("{\"properties\":{\"a\":{\"properties\":{\"b c\":{\"properties\":{\"d\":{"
            "\"type\":\"boolean\"}}}}}}}",
            "{\"a\":{\"b c\":{\"d\":1}}}",
            "args.a[\"b c\"].d: expected boolean, got number",
            "nested path with an odd key");
    invalid("{\"properties\":{\"v\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":"
            "\"null\"}]}}}",
            "{\"v\":1}",
            "args.v: matches none of anyOf: [0] expected string, got number; "
            "[1] expected null, got number",
            "anyOf");
    valid("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "null",
          "anyOf match");
    invalid("{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "3",
            "args: matches more than one schema of oneOf, expected exactly one",
            "oneOf with two matches");
    valid("{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "3.5",
          "oneOf with one match");
    invalid("{\"oneOf\":[{\"type\":\"string\"}]}", "3",
            "args: matches none of oneOf: [0] expected string, got number",
            "oneOf none");
    invalid("{\"allOf\":[{\"minimum\":0},{\"maximum\":5}]}", "6", "args: must be <= 5",
            "allOf");
    invalid("{\"not\":{\"type\":\"string\"}}", "\"s\"",
            "args: must not match the schema under \"not\"", "not");
    valid("{\"not\":{\"type\":\"string\"}}", "1", "not, passing");
    invalid("{\"$defs\":{\"Pos\":{\"type\":\"integer\",\"minimum\":1}},\"properties\":{"
            "\"n\":"
            "{\"$ref\":\"#/$defs/Pos\"}}}",
            "{\"n\":0}", "args.n: must be >= 1", "$ref into $defs");
    invalid("{\"definitions\":{\"a/b\":{\"type\":\"string\"}},\"items\":{\"$ref\":"
            "\"#/definitions/a~1b\"}}",
            "[1]", "args[0]: expected string, got number",
            "$ref with an escaped pointer");
    valid("{\"$ref\":\"http://example.com/s.json\"}", "1", "remote $ref ignored");
    valid("{\"$ref\":\"#/nowhere\"}", "1", "dangling $ref ignored");
    invalid("{\"type\":\"object\",\"properties\":{\"child\":{\"$ref\":\"#\"}},"
            "\"required\":[\"id\"]}",
            "{\"id\":1,\"child\":{\"id\":2,\"child\":{}}}",
            "args.child.child: missing required property \"id\"",
            "recursive $ref to #");
    invalid(
        "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
        "\"$ref\":\"#/$defs/a\"}",
        "1", "args: schema or value nested deeper than 32 levels", "$ref cycle");
    invalid("{\"anyOf\":[{\"$ref\":\"#\"},{\"$ref\":\"#\"},{\"$ref\":\"#\"}]}", "1",
            "args: schema or value nested deeper than 32 levels",
            "exponential anyOf/$ref ends at a cap, quickly");
    {
        /* 14 levels of anyOf with four $refs each: 4^14 paths, none deeper
         * than the cap; the step budget ends it. */
        char buf[4096];
        size_t o = 0;
        o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                              "{\"$ref\":\"#/$defs/s0\",\"$defs\":{");
        for (int i = 0; i < 14; i++)
            o += (size_t)snprintf(
                buf + o, sizeof(buf) - o,
                "\"s%d\":{\"anyOf\":[{\"$ref\":\"#/$defs/s%d\"},{\"$ref\":"
                "\"#/$defs/s%d\"},{\"$ref\":\"#/$defs/s%d\"},{\"$ref\":"
                "\"#/$defs/s%d\"}]},",
                i, i + 1, i + 1, i + 1, i + 1);
        snprintf(buf + o, sizeof(buf) - o, "\"s14\":{\"type\":\"string\"}}}");
        invalid(buf, "1", "args: schema too complex to check",
                "exponential fan-out within the depth cap: step budget");
        valid(buf, "\"s\"", "the same schema accepts a string quickly");
    }
    invalid("{\"not\":{\"$ref\":\"#\"}}", "1",
            "args: schema too deep or complex to check",
            "a cap inside not is no success");

    /* Hostile schemas: keywords of the wrong JSON type are ignored. */
    valid("{\"required\":5,\"properties\":[],\"type\":\"object\"}", "{\"a\":1}",
          "required: 5, properties: []");
    valid(
        "{\"required\":[5,null,{}],\"enum\":\"x\",\"anyOf\":{},\"allOf\":7,\"not\":[],"
        "\"items\":\"x\",\"minLength\":-1,\"maxItems\":\"2\",\"minimum\":\"3\","
        "\"additionalProperties\":3,\"const\":null}",
        "null", "every keyword malformed");
    valid("{\"anyOf\":[]}", "1", "empty anyOf ignored");
    valid("{\"$ref\":5}", "1", "$ref not a string");
    valid("{\"$ref\":\"#/\"}", "1", "pointer to an empty key");
    valid("{\"$ref\":\"#/anyOf/9\",\"anyOf\":[{}]}", "1", "pointer past an array");

    /* Deep values and schemas hit the cap, not the stack. */
    {
        cJSON *s = cJSON_CreateObject(), *v = cJSON_CreateObject(), *sp = s, *vp = v;
        for (int i = 0; i < 40; i++) {
            sp =
                cJSON_AddObjectToObject(cJSON_AddObjectToObject(sp, "properties"), "x");
            vp = cJSON_AddObjectToObject(vp, "x");
        }
        cJSON_AddStringToObject(sp, "type", "string");
        ok(hutch_schema_validate(s, v, msg, sizeof(msg)) == -EINVAL &&
               strstr(msg, "nested deeper than 32 levels") &&
               !strncmp(msg, "args.x.x.x", 10),
           "40 nested levels: refused at the cap (%s)", msg);
        cJSON_Delete(s);
        cJSON_Delete(v);
    }

    /* msg NULL or tiny is fine. */
    {
        cJSON *s = cJSON_Parse(obj), *v = cJSON_Parse("{}");
        char tiny[6];
        ok(hutch_schema_validate(s, v, NULL, 0) == -EINVAL, "NULL msg buffer");
        ok(hutch_schema_validate(s, v, tiny, sizeof(tiny)) == -EINVAL &&
               strlen(tiny) < sizeof(tiny),
           "tiny msg buffer: truncated (%s)", tiny);
        cJSON_Delete(s);
        cJSON_Delete(v);
    }
    /* Long keys in messages are bounded. */
    {
        char key[600], schema[800];
        memset(key, 'k', 500);
        key[500] = '\0';
        snprintf(schema, sizeof(schema), "{\"required\":[\"%s\"]}", key);
        cJSON *s = cJSON_Parse(schema), *v = cJSON_Parse("{}");
        ok(hutch_schema_validate(s, v, msg, sizeof(msg)) == -EINVAL &&
               strstr(msg, "kkk...\"") && strlen(msg) < 120,
           "a 500-byte key is shortened in the message");
        cJSON_Delete(s);
        cJSON_Delete(v);
    }
}

/* The one $ref resolver (schema.c), which validation and signatures share:
 * JSON pointers with escapes and array indexes, what it refuses, and a
 * chain of references followed until the depth cap stops a cycle. */
static void test_ref(void)
{
    cJSON *root = cJSON_Parse(
        "{\"$defs\":{\"A\":{\"type\":\"string\"},\"a/b\":{\"type\":\"integer\"},"
        "\"t~\":{\"type\":\"null\"},\"C\":{\"$ref\":\"#/$defs/A\"},\"X\":{"
        "\"$ref\":\"#/$defs/Y\"},\"Y\":{\"$ref\":\"#/$defs/X\"}},\"anyOf\":["
        "{\"type\":\"boolean\"},{\"type\":\"number\"}]}");
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "$defs"), "A");
    const cJSON *r;
    char long_ref[HUTCH_SCHEMA_MAX_POINTER + 8];
    int depth;

    ok(hutch_schema_ref(root, "#") == root, "ref \"#\" is the root");
    ok(hutch_schema_ref(root, "#/$defs/A") == a, "ref #/$defs/A");
    r = hutch_schema_ref(root, "#/$defs/a~1b");
    ok(r && !strcmp(cJSON_GetObjectItem(r, "type")->valuestring, "integer"),
       "ref: ~1 is a slash");
    r = hutch_schema_ref(root, "#/$defs/t~0");
    ok(r && !strcmp(cJSON_GetObjectItem(r, "type")->valuestring, "null"),
       "ref: ~0 is a tilde");
    r = hutch_schema_ref(root, "#/anyOf/1");
    ok(r && !strcmp(cJSON_GetObjectItem(r, "type")->valuestring, "number"),
       "ref: an array index");
    ok(!hutch_schema_ref(root, "#/anyOf/2") && !hutch_schema_ref(root, "#/anyOf/-1") &&
           !hutch_schema_ref(root, "#/anyOf/1x") &&
           !hutch_schema_ref(root, "#/anyOf/") &&
           !hutch_schema_ref(root, "#/anyOf/100001"),
       "ref: an index out of range or not a number");
    ok(!hutch_schema_ref(root, "other.json#/$defs/A") &&
           !hutch_schema_ref(root, "#anchor") && !hutch_schema_ref(root, "#/$defs/Z") &&
           !hutch_schema_ref(root, "#/$defs/A/type/x") && !hutch_schema_ref(root, NULL),
       "ref: remote, anchor, missing, through a scalar, NULL: nothing");
    memset(long_ref, 'a', sizeof(long_ref) - 1);
    long_ref[0] = '#';
    long_ref[1] = '/';
    long_ref[sizeof(long_ref) - 1] = '\0';
    ok(!hutch_schema_ref(root, long_ref), "ref: longer than HUTCH_SCHEMA_MAX_POINTER");

    depth = 0;
    r = hutch_schema_deref(root,
                           cJSON_GetObjectItem(cJSON_GetObjectItem(root, "$defs"), "C"),
                           &depth, HUTCH_SIG_MAX_DEPTH);
    ok(r == a && depth == 1, "deref follows a chain, counting its steps");
    depth = 0;
    ok(hutch_schema_deref(root, a, &depth, HUTCH_SIG_MAX_DEPTH) == a && depth == 0,
       "deref of a schema without $ref is itself");
    depth = 0;
    ok(!hutch_schema_deref(root,
                           cJSON_GetObjectItem(cJSON_GetObjectItem(root, "$defs"), "X"),
                           &depth, HUTCH_SIG_MAX_DEPTH) &&
           depth == HUTCH_SIG_MAX_DEPTH + 1,
       "deref of a cycle stops at the depth cap");
    cJSON_Delete(root);
}

/* The typed ranking is the JSON search's: same entries, same order, and
 * the call and description texts are what the JSON shows. */
static void test_rank(void)
{
    struct hutch_catalog *c = build(mini_catalog());
    static const char *const qs[] = {"read file", "graph", "", "zebra", "files"};
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        const struct hutch_catalog_entry **v = NULL;
        size_t n = 0;
        cJSON *r = hutch_catalog_search(c, qs[k], 0, HUTCH_DETAIL_SIGNATURES);
        int same = hutch_catalog_rank(c, qs[k], 0, &v, &n) == 0 && r &&
                   (int)n == cJSON_GetArraySize(r);
        for (size_t i = 0; same && i < n; i++) {
            const cJSON *o = cJSON_GetArrayItem(r, (int)i);
            char *call = hutch_catalog_call(v[i]);
            char *desc = hutch_catalog_description(v[i], HUTCH_DETAIL_SIGNATURES);
            same =
                !strcmp(nth_name(r, (int)i), v[i]->qualified) && call && desc &&
                !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "call")), call) &&
                !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "description")),
                        desc) &&
                !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "python")),
                        v[i]->python_sig);
            free(call);
            free(desc);
        }
        ok(same, "rank \"%s\": the search's %zu entries, in its order, same texts",
           qs[k], n);
        free(v);
        cJSON_Delete(r);
    }
    hutch_catalog_free(c);
}

int main(void)
{
    test_idents();
    test_collisions();
    test_find_and_search();
    test_rank();
    test_stop_words();
    test_signatures();
    test_schema();
    test_ref();
    return tap_done();
}
