/* test_discover.c — what an agent is offered (discover.c): the brief
 * search_tools answer stays within its budget whatever the catalog holds,
 * the details give more, what the policy denies is neither shown nor
 * counted nor suggested, "did you mean", the policy's folders in words, and
 * the policy's direct_tools field. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caps.h"
#include "discover.h"
#include "tap.h"

static char dir[] = "/tmp/hutch-test-discover-XXXXXX";

static struct hutch_policy *policy(const char *text, struct hutch_err *err)
{
    char path[128];
    FILE *f;
    struct hutch_policy *p = NULL;
    snprintf(path, sizeof(path), "%s/p.lua", dir);
    f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(2);
    }
    if (hutch_policy_load(path, &p, err) < 0)
        return NULL;
    return p;
}

/* n tools per server, descriptions and schemas long enough to overflow a
 * brief answer many times over. */
static struct hutch_catalog *catalog(void)
{
    cJSON *arr = cJSON_CreateArray();
    struct hutch_catalog *c = NULL;
    struct hutch_err e = HUTCH_ERR_INIT;
    const char *servers[] = {"fs", "db"};
    char name[64], desc[600], json[4096];

    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 20; i++) {
            cJSON *o = cJSON_CreateObject();
            snprintf(name, sizeof(name), "read_file_%d", i);
            snprintf(desc, sizeof(desc),
                     "Read file number %d and return its contents. %0500d", i, 0);
            snprintf(
                json, sizeof(json),
                "{\"name\":\"%s\",\"description\":\"%s\",\"inputSchema\":{\"type\":"
                "\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                "\"encoding\":{\"type\":\"string\"},\"offset\":{\"type\":"
                "\"integer\"},\"length\":{\"type\":\"integer\"}},\"required\":["
                "\"path\"]}}",
                name, desc);
            cJSON_AddStringToObject(o, "server", servers[s]);
            cJSON_AddItemToObject(o, "tool", cJSON_Parse(json));
            cJSON_AddItemToArray(arr, o);
        }
    {
        /* One tool whose signature alone is over the budget. */
        struct hutch_buf b;
        cJSON *o = cJSON_CreateObject();
        hutch_buf_init(&b, 1 << 20);
        hutch_buf_appendf(&b, "{\"name\":\"huge\",\"description\":\"Huge read file "
                              "tool.\",\"inputSchema\":{\"type\":\"object\","
                              "\"properties\":{");
        for (int i = 0; i < 120; i++)
            hutch_buf_appendf(&b, "%s\"parameter_number_%d\":{\"type\":\"string\"}",
                              i ? "," : "", i);
        hutch_buf_appendf(&b, "}}}");
        cJSON_AddStringToObject(o, "server", "big");
        cJSON_AddItemToObject(o, "tool", cJSON_Parse(hutch_buf_str(&b)));
        cJSON_AddItemToArray(arr, o);
        hutch_buf_free(&b);
    }
    if (hutch_catalog_build(arr, &c, &e) < 0) {
        printf("# catalog: %s\n", e.msg);
        exit(2);
    }
    cJSON_Delete(arr);
    return c;
}

static cJSON *search(const struct hutch_catalog *c, const struct hutch_policy *p,
                     const char *args, int brief, struct hutch_buf *t)
{
    struct hutch_err e = HUTCH_ERR_INIT;
    cJSON *a = cJSON_Parse(args), *out = NULL;
    int r = hutch_discover_search(c, p, a, brief, HUTCH_SEARCH_BRIEF_TEXT, NULL, &out,
                                  t, &e);
    cJSON_Delete(a);
    if (r < 0)
        printf("# search %s: %s\n", args, e.msg);
    return out;
}

static int has(const cJSON *tools, const char *name)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, tools)
    {
        const cJSON *n = cJSON_GetObjectItem(it, "name");
        if ((cJSON_IsString(n) && !strcmp(n->valuestring, name)) ||
            (cJSON_IsString(it) && !strcmp(it->valuestring, name)))
            return 1;
    }
    return 0;
}

static void test_search(void)
{
    struct hutch_catalog *c = catalog();
    struct hutch_err e = HUTCH_ERR_INIT;
    struct hutch_policy *p = policy(
        "return { tools = { allow = { \"*\" }, deny = { \"db.read_file_1\" } } }", &e);
    struct hutch_buf t;
    cJSON *o;

    ok(p != NULL, "policy loads (%s)", e.msg);
    hutch_buf_init(&t, 1 << 20);
    o = search(c, p, "{\"query\":\"read file\"}", 1, &t);
    ok(o && t.len <= HUTCH_SEARCH_BRIEF_TEXT, "brief answer: %zu bytes of text", t.len);
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(o, "tools")) >= 1 &&
           cJSON_GetArraySize(cJSON_GetObjectItem(o, "more")) >= 1,
       "… the best matches whole, the rest by name");
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(o, "tools")) +
               cJSON_GetArraySize(cJSON_GetObjectItem(o, "more")) ==
           HUTCH_SEARCH_DEFAULT_RESULTS,
       "… together the default limit");
    ok(strstr(hutch_buf_str(&t), "more:") && strstr(hutch_buf_str(&t), "python:"),
       "… the text says so: %s", hutch_buf_str(&t));
    ok(cJSON_GetObjectItem(o, "total")->valuedouble == 40,
       "total counts the offered tools (41 less the denied one)");
    cJSON_Delete(o);

    hutch_buf_reset(&t);
    o = search(c, p, "{\"query\":\"\",\"limit\":100,\"detail\":\"names\"}", 1, &t);
    ok(o && !has(cJSON_GetObjectItem(o, "tools"), "db.read_file_1") &&
           has(cJSON_GetObjectItem(o, "tools"), "fs.read_file_1") &&
           !strstr(hutch_buf_str(&t), "db.read_file_1 "),
       "a denied tool is neither listed nor in the text");
    cJSON_Delete(o);

    hutch_buf_reset(&t);
    o = search(c, p, "{\"query\":\"huge\"}", 1, &t);
    ok(o && t.len <= HUTCH_SEARCH_BRIEF_TEXT &&
           has(cJSON_GetObjectItem(o, "tools"), "big.huge") &&
           strstr(hutch_buf_str(&t), "detail \"signatures\""),
       "a result whose signature is over the budget is shown without it (%zu bytes)",
       t.len);
    cJSON_Delete(o);

    hutch_buf_reset(&t);
    o = search(c, p, "{\"query\":\"read file\",\"detail\":\"signatures\",\"limit\":12}",
               1, &t);
    ok(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "tools")) == 12 &&
           !cJSON_GetObjectItem(o, "more") && t.len > HUTCH_SEARCH_BRIEF_TEXT,
       "detail signatures: every result, asked for");
    cJSON_Delete(o);

    hutch_buf_reset(&t);
    o = search(c, p, "{\"query\":\"read file 3\",\"detail\":\"full\",\"limit\":1}", 1,
               &t);
    ok(o && strstr(hutch_buf_str(&t), "input schema: {\"type\":\"object\""),
       "detail full: the schema is in the text");
    cJSON_Delete(o);

    hutch_buf_reset(&t);
    o = search(c, p, "{\"query\":\"\",\"limit\":500,\"detail\":\"names\"}", 1, &t);
    ok(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "tools")) == 40 &&
           !strncmp(hutch_buf_str(&t),
                    "hutch: limit: asked for 500; this server gives at most 100\n",
                    59) &&
           cJSON_IsArray(cJSON_GetObjectItem(o, "notes")),
       "a limit above the maximum is clamped, and the answer says so");
    cJSON_Delete(o);

    o = search(c, p, "{\"query\":\"read file\"}", 0, NULL);
    ok(o &&
           cJSON_GetArraySize(cJSON_GetObjectItem(o, "tools")) ==
               HUTCH_SEARCH_DEFAULT_RESULTS &&
           !cJSON_GetObjectItem(o, "more"),
       "tools.search (brief 0): whole results up to the limit");
    cJSON_Delete(o);

    {
        const char *bad[] = {"{}", "{\"query\":1}", "{\"query\":\"\",\"limit\":0}",
                             "{\"query\":\"\",\"limit\":1.5}",
                             "{\"query\":\"\",\"detail\":\"all\"}"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
            struct hutch_err be = HUTCH_ERR_INIT;
            cJSON *a = cJSON_Parse(bad[i]), *out = NULL;
            ok(hutch_discover_search(c, p, a, 1, 2048, NULL, &out, NULL, &be) ==
                       -EINVAL &&
                   !out && be.msg[0],
               "bad arguments %s: %s", bad[i], be.msg);
            cJSON_Delete(a);
        }
    }

    {
        char hint[256];
        hutch_discover_suggest(c, p, "fs.read_fle_2", hint, sizeof(hint));
        ok(!strcmp(hint, " (did you mean \"fs.read_file_2\"?)"), "typo: %s", hint);
        hutch_discover_suggest(c, p, "files.read_file_3", hint, sizeof(hint));
        ok(strstr(hint, "read_file_3\"") != NULL, "the tool on another server: %s",
           hint);
        hutch_discover_suggest(c, p, "db.read_file_1", hint, sizeof(hint));
        ok(!strstr(hint, "db.read_file_1"), "a denied tool is never suggested: %s",
           hint);
        hutch_discover_suggest(c, p, "zz.nothing_like_it", hint, sizeof(hint));
        ok(hint[0] == '\0', "nothing close: no hint");
    }
    hutch_buf_free(&t);
    hutch_policy_unref(p);
    hutch_catalog_free(c);
}

static void test_paths_and_switch(void)
{
    struct hutch_err e = HUTCH_ERR_INIT;
    struct hutch_policy *p;
    struct hutch_buf t;
    char text[512];

    hutch_buf_init(&t, 4096);
    snprintf(text, sizeof(text),
             "return { paths = { { host = \"%s\", sandbox = \"/data\", mode = \"ro\" },"
             " { host = \"/tmp\", sandbox = \"/work/o\", mode = \"rw\" } },"
             " direct_tools = true }",
             dir);
    p = policy(text, &e);
    ok(p != NULL, "policy with paths loads (%s)", e.msg);
    hutch_discover_paths(p, &t);
    snprintf(text, sizeof(text), "%s (→ /work/data), /tmp (→ /work/o).", dir);
    ok(strstr(hutch_buf_str(&t), text) &&
           strstr(hutch_buf_str(&t), "`output_dir` may be in: /tmp."),
       "the folders in words: %s", hutch_buf_str(&t));
    ok(hutch_policy_direct_tools(p) == 1, "direct_tools = true");
    hutch_policy_unref(p);
    hutch_buf_reset(&t);
    p = policy("return { direct_tools = false }", &e);
    hutch_discover_paths(p, &t);
    ok(p && hutch_policy_direct_tools(p) == 0 &&
           strstr(hutch_buf_str(&t), "names no host folders"),
       "direct_tools = false; no paths said so");
    hutch_policy_unref(p);
    p = policy("return { }", &e);
    ok(p && hutch_policy_direct_tools(p) == -1,
       "no direct_tools: -1 (the flag decides)");
    hutch_policy_unref(p);
    p = policy("return { direct_tools = 1 }", &e);
    ok(!p && strstr(e.msg, "direct_tools: expected true or false"), "a number: %s",
       e.msg);

    /* Egress: the hosts in words, or nothing without the field. */
    hutch_buf_reset(&t);
    p = policy("return { egress = { allow = { \"api.github.com\", \"*.pypi.org:443\", "
               "\"127.0.0.1:8080\" } } }",
               &e);
    hutch_discover_egress(hutch_policy_egress_of(p, NULL), &t);
    ok(p && strstr(hutch_buf_str(&t), "HTTP_PROXY") &&
           strstr(hutch_buf_str(&t), "api.github.com, *.pypi.org:443, 127.0.0.1:8080"),
       "egress: the hosts a program may reach: %s", hutch_buf_str(&t));
    ok(strstr(hutch_buf_str(&t), "JavaScript's fetch(), http and https"),
       "  and that JavaScript's fetch, http and https go through the proxy too");
    hutch_policy_unref(p);
    hutch_buf_reset(&t);
    p = policy("return { }", &e);
    hutch_discover_egress(hutch_policy_egress_of(p, NULL), &t);
    ok(p && t.len == 0, "no egress: nothing said (the first line says no network)");
    hutch_policy_unref(p);
    /* A principal is told its own: its entry's egress, or none. */
    p = policy(
        "return { egress = { allow = { 'api.github.com' } },\n"
        "  principals = {\n"
        "  { name = 'alice', token = 'alice-token-0123456789abcdef',\n"
        "    egress = { allow = { 'pypi.org:443' } } },\n"
        "  { name = 'bob', token = 'bob-token-0123456789abcdef', egress = false },\n"
        "  { name = 'carol', token = 'carol-token-0123456789abcdef' } } }",
        &e);
    hutch_buf_reset(&t);
    hutch_discover_egress(hutch_policy_egress_of(p, "alice"), &t);
    ok(p && strstr(hutch_buf_str(&t), "pypi.org:443") &&
           !strstr(hutch_buf_str(&t), "api.github.com"),
       "alice's own egress, not the policy's: %s", hutch_buf_str(&t));
    hutch_buf_reset(&t);
    hutch_discover_egress(hutch_policy_egress_of(p, "bob"), &t);
    ok(p && t.len == 0, "bob, egress = false: nothing said");
    hutch_buf_reset(&t);
    hutch_discover_egress(hutch_policy_egress_of(p, "carol"), &t);
    ok(p && strstr(hutch_buf_str(&t), "api.github.com"), "carol: the policy's");
    hutch_policy_unref(p);
    hutch_buf_free(&t);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("# mkdtemp failed\n");
        return 2;
    }
    test_search();
    test_paths_and_switch();
    {
        char path[128];
        snprintf(path, sizeof(path), "%s/p.lua", dir);
        unlink(path);
        rmdir(dir);
    }
    return tap_done();
}
