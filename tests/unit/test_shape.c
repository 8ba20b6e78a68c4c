/* test_shape.c — observed result shapes (shape.c): the merge rules (types,
 * optional keys, arrays, unions, maps), the caps, that no value is ever
 * kept and no key that is not a plain identifier, that shapes are learned
 * per principal (and a full table never lets one principal crowd out
 * another), the cache file (round trip, atomic replace, mode, corrupt and
 * invalid files, version 1 refused), and the observed return types in
 * search results. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "catalog.h"
#include "shape.h"
#include "tap.h"

static cJSON *json(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    if (!j) {
        printf("# bad test JSON: %s\n", text);
        exit(2);
    }
    return j;
}

static void observe_as(struct hutch_shapes *s, const char *principal, const char *tool,
                       const char *text)
{
    cJSON *v = json(text);
    hutch_shapes_observe(s, principal, tool, v);
    cJSON_Delete(v);
}

/* As principal "p". */
static void observe(struct hutch_shapes *s, const char *tool, const char *text)
{
    observe_as(s, "p", tool, text);
}

/* The observed type of `tool` as Python (ts 0) or TypeScript renders it;
 * "-" when none.  Static buffer: one at a time. */
static const char *type_of(struct hutch_shapes *s, const char *tool, int ts,
                           uint64_t *calls)
{
    static char out[4096];
    cJSON *sc = hutch_shapes_schema(s, "p", tool, calls);
    char *t = sc ? hutch_catalog_type(sc, ts) : NULL;
    snprintf(out, sizeof(out), "%s", t ? t : "-");
    free(t);
    cJSON_Delete(sc);
    return out;
}

static void type_is(struct hutch_shapes *s, const char *tool, const char *py,
                    const char *ts, const char *desc)
{
    const char *got = type_of(s, tool, 0, NULL);
    int ok_py = !strcmp(got, py);
    ok(ok_py, "%s: python", desc);
    if (!ok_py)
        printf("#   got  %s\n#   want %s\n", got, py);
    got = type_of(s, tool, 1, NULL);
    ok(!strcmp(got, ts), "%s: typescript", desc);
    if (strcmp(got, ts))
        printf("#   got  %s\n#   want %s\n", got, ts);
}

static struct hutch_shapes *fresh(void)
{
    struct hutch_shapes *s = NULL;
    struct hutch_err err = {0};
    if (hutch_shapes_new(&s, &err) < 0) {
        printf("# hutch_shapes_new: %s\n", err.msg);
        exit(2);
    }
    return s;
}

/* Nodes ("types" members) in a dump, and its nesting depth of shapes. */
static void measure(const cJSON *j, int depth, size_t *nodes, int *max_depth)
{
    const cJSON *c;
    if (cJSON_IsObject(j) && cJSON_GetObjectItem(j, "types")) {
        (*nodes)++;
        if (depth > *max_depth)
            *max_depth = depth;
        depth++;
    }
    cJSON_ArrayForEach(c, j)
    {
        measure(c, depth, nodes, max_depth);
    }
}

static void test_merge(void)
{
    struct hutch_shapes *s = fresh();
    uint64_t calls = 0;

    ok(!hutch_shapes_schema(s, "p", "a.t", &calls), "no shape before a call");
    observe(s, "a.t", "{\"id\":7,\"name\":\"x\"}");
    type_is(s, "a.t", "{\"id\": int, \"name\": str}", "{ id: number; name: string }",
            "one object");
    observe(s, "a.t", "{\"id\":2.5}");
    type_is(s, "a.t", "{\"id\": float, \"name\": NotRequired[str]}",
            "{ id: number; name?: string }",
            "integer + number is number; a key one result lacks is optional");
    observe(s, "a.t", "{\"id\":1,\"name\":null,\"extra\":true}");
    type_is(s, "a.t",
            "{\"id\": float, \"name\": NotRequired[str | None], \"extra\": "
            "NotRequired[bool]}",
            "{ id: number; name?: string | null; extra?: boolean }",
            "null joins the union; a new key is optional");
    type_of(s, "a.t", 0, &calls);
    ok(calls == 3, "observed from 3 calls (%llu)", (unsigned long long)calls);

    observe(s, "a.list", "[{\"x\":1},{\"x\":null,\"y\":\"a\"}]");
    observe(s, "a.list", "[]");
    type_is(s, "a.list", "list[{\"x\": int | None, \"y\": NotRequired[str]}]",
            "{ x: number | null; y?: string }[]",
            "array elements merge; an empty array changes nothing");

    observe(s, "a.u", "\"plain text\"");
    observe(s, "a.u", "{\"k\":1}");
    observe(s, "a.u", "[1,2]");
    type_is(s, "a.u", "str | list[int] | {\"k\": int}",
            "string | number[] | { k: number }", "a union of kinds");

    observe(s, "a.e", "[]");
    type_is(s, "a.e", "list[Any]", "any[]", "only empty arrays: elements unknown");
    observe(s, "a.o", "{}");
    type_is(s, "a.o", "dict[str, Any]", "{}", "an empty object");

    /* Keys that are data make a map whose keys are never kept. */
    observe(s, "a.map", "{\"/etc/passwd\":{\"size\":1},\"notes.txt\":{\"size\":2}}");
    type_is(s, "a.map", "dict[str, {\"size\": int}]",
            "Record<string, { size: number }>", "keys that are not field names: a map");
    observe(s, "a.map2", "{\"a\":1}");
    observe(s, "a.map2", "{\"b c\":\"x\"}");
    type_is(s, "a.map2", "dict[str, int | str]", "Record<string, number | string>",
            "an object merged with a map is a map");
    hutch_shapes_free(s);
}

static void test_no_values(void)
{
    struct hutch_shapes *s = fresh();
    char *dump;
    observe(s, "v.t",
            "{\"token\":\"SECRET-VALUE-1234\",\"n\":987654321,\"list\":[\"ELEMENT-"
            "VALUE\"],\"/home/alice/private.txt\":\"PATH-VALUE\",\"ok\":true}");
    observe(s, "v.s", "\"TEXT-RESULT-VALUE\"");
    dump = hutch_shapes_dump(s);
    ok(dump && !strstr(dump, "SECRET") && !strstr(dump, "987654321") &&
           !strstr(dump, "ELEMENT") && !strstr(dump, "alice") &&
           !strstr(dump, "PATH-") && !strstr(dump, "TEXT-RESULT"),
       "no value, and no key that looks like data, is kept (%s)", dump ? dump : "-");
    free(dump);
    hutch_shapes_free(s);
}

static void test_caps(void)
{
    struct hutch_shapes *s = fresh();
    enum { BIG = 1 << 18 };
    char buf[65536], *dump, *big = malloc(BIG);
    size_t n = 0, nodes = 0;
    int depth = 0;
    cJSON *d;

    /* Too many keys: a map. */
    n = (size_t)snprintf(buf, sizeof(buf), "{");
    for (int i = 0; i < HUTCH_SHAPE_MAX_KEYS + 1; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"k%d\":1", i ? "," : "", i);
    snprintf(buf + n, sizeof(buf) - n, "}");
    observe(s, "c.wide", buf);
    type_is(s, "c.wide", "dict[str, int]", "Record<string, number>",
            "more than HUTCH_SHAPE_MAX_KEYS keys: a map");

    /* A key too long to be a field name. */
    n = (size_t)snprintf(buf, sizeof(buf), "{\"");
    for (int i = 0; i < HUTCH_SHAPE_MAX_KEY_BYTES + 1; i++)
        buf[n++] = 'a';
    snprintf(buf + n, sizeof(buf) - n, "\":1}");
    observe(s, "c.longkey", buf);
    type_is(s, "c.longkey", "dict[str, int]", "Record<string, number>",
            "a key longer than HUTCH_SHAPE_MAX_KEY_BYTES: a map");

    /* Deeper than HUTCH_SHAPE_MAX_DEPTH: the bare type below. */
    n = 0;
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{\"d\":");
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "1");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "}");
    observe(s, "c.deep", buf);
    /* Many nodes: 30 objects of 30 keys (931 nodes) collapse to the cap. */
    n = (size_t)snprintf(buf, sizeof(buf), "{");
    for (int i = 0; i < 30; i++) {
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"o%d\":{", i ? "," : "", i);
        for (int k = 0; k < 30; k++)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"f%d\":[%d]",
                                  k ? "," : "", k, k);
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "}");
    }
    snprintf(buf + n, sizeof(buf) - n, "}");
    observe(s, "c.many", buf);
    dump = hutch_shapes_dump(s);
    d = dump ? cJSON_Parse(dump) : NULL;
    measure(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(d, "principals"), "p"), "c.deep"),
        0, &nodes, &depth);
    ok(depth == HUTCH_SHAPE_MAX_DEPTH && nodes == HUTCH_SHAPE_MAX_DEPTH + 1,
       "a deep result is kept HUTCH_SHAPE_MAX_DEPTH levels deep (%d levels, %zu nodes)",
       depth, nodes);
    nodes = 0;
    depth = 0;
    measure(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(d, "principals"), "p"), "c.many"),
        0, &nodes, &depth);
    ok(nodes > 1 && nodes <= HUTCH_SHAPE_MAX_NODES,
       "a wide result keeps at most HUTCH_SHAPE_MAX_NODES nodes (%zu)", nodes);
    cJSON_Delete(d);
    free(dump);

    /* Too big to walk: 32^3 values are more than HUTCH_SHAPE_MAX_VISITS. */
    if (!big)
        exit(2);
    n = (size_t)snprintf(big, BIG, "[");
    for (int i = 0; i < 32; i++) {
        n += (size_t)snprintf(big + n, BIG - n, "%s[", i ? "," : "");
        for (int j = 0; j < 32; j++) {
            n += (size_t)snprintf(big + n, BIG - n, "%s[", j ? "," : "");
            for (int k = 0; k < 32; k++)
                n += (size_t)snprintf(big + n, BIG - n, "%s0", k ? "," : "");
            n += (size_t)snprintf(big + n, BIG - n, "]");
        }
        n += (size_t)snprintf(big + n, BIG - n, "]");
    }
    snprintf(big + n, BIG - n, "]");
    observe(s, "c.huge", big);
    free(big);
    ok(!hutch_shapes_schema(s, "p", "c.huge", NULL),
       "a result past HUTCH_SHAPE_MAX_VISITS values is not observed");

    /* Only the first HUTCH_SHAPE_MAX_ITEMS elements are looked at. */
    n = (size_t)snprintf(buf, sizeof(buf), "[");
    for (int i = 0; i < HUTCH_SHAPE_MAX_ITEMS; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "1,");
    snprintf(buf + n, sizeof(buf) - n, "\"late\"]");
    observe(s, "c.sample", buf);
    type_is(s, "c.sample", "list[int]", "number[]",
            "elements past HUTCH_SHAPE_MAX_ITEMS are not walked");
    hutch_shapes_free(s);

    /* At most HUTCH_SHAPE_MAX_TOOLS tools: past them the oldest gives way. */
    s = fresh();
    for (int i = 0; i < HUTCH_SHAPE_MAX_TOOLS + 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "s.t%d", i);
        observe(s, name, "1");
    }
    {
        char last[32], first[32];
        snprintf(first, sizeof(first), "s.t%d", 4);
        snprintf(last, sizeof(last), "s.t%d", HUTCH_SHAPE_MAX_TOOLS + 4);
        cJSON *a = hutch_shapes_schema(s, "p", first, NULL),
              *b = hutch_shapes_schema(s, "p", last, NULL),
              *c = hutch_shapes_schema(s, "p", "s.t5", NULL);
        dump = hutch_shapes_dump(s);
        d = dump ? cJSON_Parse(dump) : NULL;
        ok(!a && b && c &&
               cJSON_GetArraySize(cJSON_GetObjectItem(
                   cJSON_GetObjectItem(d, "principals"), "p")) == HUTCH_SHAPE_MAX_TOOLS,
           "at most HUTCH_SHAPE_MAX_TOOLS tools are kept, the oldest give way");
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(c);
        cJSON_Delete(d);
        free(dump);
    }
    hutch_shapes_free(s);
}

/* Entries of a directory, . and .. aside. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void test_file(void)
{
    char dir[] = "/tmp/hutch-shape-XXXXXX", file[256], *dump1, *dump2;
    struct hutch_shapes *s = fresh(), *t;
    struct hutch_err err = {0};
    struct stat st;
    uint64_t calls = 0;
    FILE *f;

    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    snprintf(file, sizeof(file), "%s/shapes.json", dir);
    ok(hutch_shapes_attach(s, file, &err) == 0, "an absent cache file is fine");
    ok(hutch_shapes_save(s, &err) == 0 && stat(file, &st) < 0,
       "nothing observed: nothing written");
    observe(s, "fs.read", "{\"content\":\"abc\",\"size\":3}");
    observe(s, "fs.read", "{\"content\":\"abcd\"}");
    observe(s, "fs.list", "[\"a\",\"b\"]");
    ok(hutch_shapes_save(s, &err) == 0 && stat(file, &st) == 0, "saved (%s)", err.msg);
    ok((st.st_mode & 0777) == 0600, "the cache file is 0600 (%o)", st.st_mode & 0777);
    ok(entries(dir) == 1, "no temporary file left beside it");
    t = fresh();
    ok(hutch_shapes_attach(t, file, &err) == 0, "loaded again (%s)", err.msg);
    dump1 = hutch_shapes_dump(s);
    dump2 = hutch_shapes_dump(t);
    ok(dump1 && dump2 && !strcmp(dump1, dump2), "round trip: the same shapes");
    type_of(t, "fs.read", 0, &calls);
    ok(calls == 2 && !strcmp(type_of(t, "fs.read", 0, NULL),
                             "{\"content\": str, \"size\": NotRequired[int]}"),
       "round trip: the type and the count of calls (%llu)", (unsigned long long)calls);
    /* Later calls merge into what was loaded. */
    observe(t, "fs.read", "{\"content\":\"x\",\"size\":1}");
    type_of(t, "fs.read", 0, &calls);
    ok(calls == 3, "calls go on counting after a load");
    free(dump1);
    free(dump2);
    hutch_shapes_free(t);
    hutch_shapes_free(s);

    /* A corrupt file: an error to warn about, an empty store, replaced at
     * the next save. */
    f = fopen(file, "w");
    fputs("{\"hutch_shapes\":2,\"principals\":{\"p\":{\"x.y\":", f);
    fclose(f);
    s = fresh();
    err = (struct hutch_err){0};
    ok(hutch_shapes_attach(s, file, &err) < 0 && strstr(err.msg, file),
       "a corrupt file is an error naming it (%s)", err.msg);
    ok(!hutch_shapes_schema(s, "p", "x.y", NULL), "... and the store starts empty");
    observe(s, "x.y", "{\"a\":1}");
    ok(hutch_shapes_save(s, &err) == 0, "... and the next save replaces it");
    hutch_shapes_free(s);
    s = fresh();
    ok(hutch_shapes_attach(s, file, &err) == 0, "... with a valid file");
    {
        cJSON *sc = hutch_shapes_schema(s, "p", "x.y", NULL);
        ok(sc != NULL, "the replaced file loads");
        cJSON_Delete(sc);
    }
    hutch_shapes_free(s);
    if (unlink(file) < 0 || rmdir(dir) < 0)
        printf("# could not remove %s\n", dir);
}

static void bad_file(const char *text, const char *what)
{
    struct hutch_shapes *s = fresh();
    struct hutch_err err = {0};
    cJSON *before;
    observe(s, "keep.me", "1");
    ok(hutch_shapes_parse(s, text, strlen(text), &err) < 0 && err.msg[0],
       "refused: %s (%s)", what, err.msg);
    before = hutch_shapes_schema(s, "p", "keep.me", NULL);
    ok(before != NULL, "... and the store is left as it was");
    cJSON_Delete(before);
    hutch_shapes_free(s);
}

/* A version 2 file of principal "p" whose tools object is `tools`. */
static char *v2(const char *tools)
{
    size_t n = strlen(tools) + 64;
    char *t = malloc(n);
    snprintf(t, n, "{\"hutch_shapes\":2,\"principals\":{\"p\":%s}}", tools);
    return t;
}

static void bad_tools(const char *tools, const char *what)
{
    char *t = v2(tools);
    bad_file(t, what);
    free(t);
}

static void test_invalid_files(void)
{
    struct hutch_shapes *s = fresh();
    struct hutch_err err = {0};
    char *good = v2("{\"a.b\":{\"calls\":2,\"shape\":{"
                    "\"types\":[\"object\"],\"objects\":2,\"keys\":{\"x\":{\"seen\":1,"
                    "\"shape\":{\"types\":[\"string\",\"null\"]}}}}}}");
    ok(hutch_shapes_parse(s, good, strlen(good), &err) == 0, "a valid file (%s)",
       err.msg);
    ok(!strcmp(type_of(s, "a.b", 1, NULL), "{ x?: string | null }"),
       "... read as written (%s)", type_of(s, "a.b", 1, NULL));
    free(good);
    hutch_shapes_free(s);

    bad_file("", "empty");
    bad_file("[]", "not an object");
    bad_file("{\"hutch_shapes\":3,\"principals\":{}}", "another version");
    bad_file("{\"hutch_shapes\":2,\"principals\":{},\"more\":1}",
             "an unknown top field");
    bad_file("{\"hutch_shapes\":2,\"tools\":{}}", "version 2 without principals");
    {
        /* Version 1: one table for every principal.  Refused, saying why. */
        struct hutch_shapes *v = fresh();
        const char *old = "{\"hutch_shapes\":1,\"tools\":{\"a.b\":{\"calls\":1,"
                          "\"shape\":{\"types\":[\"string\"]}}}}";
        err = (struct hutch_err){0};
        ok(hutch_shapes_parse(v, old, strlen(old), &err) == -EINVAL &&
               strstr(err.msg, "version 1") && strstr(err.msg, "every principal") &&
               strstr(err.msg, "replaced at the next save"),
           "version 1 is refused with what it is and why (%s)", err.msg);
        ok(!hutch_shapes_schema(v, "p", "a.b", NULL) &&
               !hutch_shapes_schema(v, "local", "a.b", NULL),
           "... and nobody gets its shapes");
        hutch_shapes_free(v);
    }
    bad_file("{\"hutch_shapes\":2,\"principals\":{\"a b\":{\"a.b\":{\"calls\":1,"
             "\"shape\":{\"types\":[\"string\"]}}}}}",
             "a principal's name with a space");
    bad_file("{\"hutch_shapes\":2,\"principals\":{\"p\":{}}}",
             "a principal without tools");
    bad_file(
        "{\"hutch_shapes\":2,\"principals\":{\"p\":{\"a.b\":{\"calls\":1,\"shape\":"
        "{\"types\":[\"string\"]}}},\"p\":{\"c.d\":{\"calls\":1,\"shape\":{\"types\":"
        "[\"string\"]}}}}}",
        "a repeated principal");
    bad_tools("{\"nodot\":{\"calls\":1,\"shape\":{\"types\":[\"string\"]}}}",
              "a tool name without a server");
    bad_tools("{\"a.b\":{\"calls\":0,\"shape\":{\"types\":[\"string\"]}}}",
              "zero calls");
    bad_tools(
        "{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"string\"],\"value\":\"x\"}}}",
        "an unknown field in a node (a value)");
    bad_tools("{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"date\"]}}}",
              "an unknown type");
    bad_tools("{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"object\"],\"objects\":1,"
              "\"keys\":{\"x\":{\"seen\":2,\"shape\":{\"types\":[\"string\"]}}}}}}",
              "a key seen more often than objects");
    bad_tools(
        "{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"object\"],\"objects\":1,"
        "\"keys\":{\"/etc/x\":{\"seen\":1,\"shape\":{\"types\":[\"string\"]}}}}}}",
        "a key that is not a field name");
    bad_tools(
        "{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"object\"],\"objects\":1,"
        "\"keys\":{\"content-type\":{\"seen\":1,\"shape\":{\"types\":[\"string\"]}"
        "}}}}}",
        "a key that is not a plain identifier (content-type)");
    bad_tools("{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"string\"],\"keys\":{}}}}",
              "keys on a string");
    bad_tools(
        "{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"array\"],\"items\":{\"types\":"
        "[\"array\"],\"items\":{\"types\":[\"array\"],\"items\":{\"types\":[\"array\"],"
        "\"items\":{\"types\":[\"array\"],\"items\":{\"types\":[\"array\"],\"items\":{"
        "\"types\":[\"array\"],\"items\":{\"types\":[\"null\"]}}}}}}}}}}",
        "deeper than HUTCH_SHAPE_MAX_DEPTH");
    bad_tools(
        "{\"a.b\":{\"calls\":1,\"shape\":{\"types\":[\"string\"]}},\"a.b\":{\"calls\":"
        "1,\"shape\":{\"types\":[\"string\"]}}}",
        "a repeated tool");
}

/* What alice's calls taught is alice's: bob's search shows none of it, and
 * the file keeps them apart. */
static void test_principals(void)
{
    struct hutch_shapes *s = fresh(), *t;
    struct hutch_err err = {0};
    char *dump, *dump2;
    cJSON *a, *b;

    observe_as(s, "alice", "crm.get", "{\"salary\":1,\"diagnosis\":\"x\"}");
    a = hutch_shapes_schema(s, "alice", "crm.get", NULL);
    b = hutch_shapes_schema(s, "bob", "crm.get", NULL);
    ok(a && !b, "alice's shape is alice's; bob has none of the same tool");
    cJSON_Delete(a);
    observe_as(s, "bob", "crm.get", "[1,2]");
    a = hutch_shapes_schema(s, "alice", "crm.get", NULL);
    b = hutch_shapes_schema(s, "bob", "crm.get", NULL);
    {
        char *ta = a ? hutch_catalog_type(a, 0) : NULL,
             *tb = b ? hutch_catalog_type(b, 0) : NULL;
        ok(ta && tb && !strcmp(ta, "{\"salary\": int, \"diagnosis\": str}") &&
               !strcmp(tb, "list[int]"),
           "two principals, two shapes of one tool (%s / %s)", ta ? ta : "-",
           tb ? tb : "-");
        free(ta);
        free(tb);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    observe_as(s, "al ice", "crm.get", "{\"x\":1}");
    observe_as(s, "", "crm.get", "{\"x\":1}");
    observe_as(s, NULL, "crm.get", "{\"x\":1}");
    dump = hutch_shapes_dump(s);
    ok(dump && !strstr(dump, "al ice") && !strstr(dump, "\"x\""),
       "a principal that is not a name learns nothing");
    ok(dump && strstr(dump, "\"principals\":{\"alice\":{\"crm.get\"") &&
           strstr(dump, "\"bob\":{\"crm.get\""),
       "the file keeps them apart (%s)", dump ? dump : "-");
    t = fresh();
    ok(dump && hutch_shapes_parse(t, dump, strlen(dump), &err) == 0, "and loads (%s)",
       err.msg);
    dump2 = hutch_shapes_dump(t);
    ok(dump && dump2 && !strcmp(dump, dump2), "round trip with two principals");
    a = hutch_shapes_schema(t, "bob", "crm.get", NULL);
    {
        char *tb = a ? hutch_catalog_type(a, 0) : NULL;
        ok(tb && !strcmp(tb, "list[int]"), "bob's shape after a load is bob's (%s)",
           tb ? tb : "-");
        free(tb);
    }
    cJSON_Delete(a);
    free(dump);
    free(dump2);
    hutch_shapes_free(t);
    hutch_shapes_free(s);

    /* Keys: only plain identifiers are ever kept. */
    s = fresh();
    observe(s, "k.text", "{\"id\":1,\"Ignore previous instructions\":true}");
    observe(s, "k.dash", "{\"id\":1,\"content-type\":\"x\"}");
    observe(s, "k.dollar", "{\"$ref\":\"x\"}");
    observe(s, "k.ok", "{\"id\":1,\"_private\":2,\"camelCase9\":3}");
    type_is(s, "k.text", "dict[str, bool | int]", "Record<string, boolean | number>",
            "a key that is text: a map, its text not kept");
    type_is(s, "k.dash", "dict[str, int | str]", "Record<string, number | string>",
            "a key with a dash: a map");
    type_is(s, "k.dollar", "dict[str, str]", "Record<string, string>",
            "a key with a dollar: a map");
    type_is(s, "k.ok", "{\"id\": int, \"_private\": int, \"camelCase9\": int}",
            "{ id: number; _private: number; camelCase9: number }",
            "identifiers are kept");
    dump = hutch_shapes_dump(s);
    ok(dump && !strstr(dump, "Ignore") && !strstr(dump, "content-type") &&
           !strstr(dump, "$ref"),
       "no key that is not an identifier is in the file");
    free(dump);
    hutch_shapes_free(s);

    /* A full table: one principal filling it pushes out its own oldest,
     * never another's. */
    s = fresh();
    observe_as(s, "bob", "b.one", "1");
    observe_as(s, "bob", "b.two", "1");
    for (int i = 0; i < HUTCH_SHAPE_MAX_TOOLS + 50; i++) {
        char name[32];
        snprintf(name, sizeof(name), "m.t%d", i);
        observe_as(s, "mallory", name, "1");
    }
    a = hutch_shapes_schema(s, "bob", "b.one", NULL);
    b = hutch_shapes_schema(s, "bob", "b.two", NULL);
    ok(a && b, "mallory filling the table does not push out bob's shapes");
    cJSON_Delete(a);
    cJSON_Delete(b);
    a = hutch_shapes_schema(s, "mallory", "m.t0", NULL);
    {
        char last[32];
        snprintf(last, sizeof(last), "m.t%d", HUTCH_SHAPE_MAX_TOOLS + 49);
        b = hutch_shapes_schema(s, "mallory", last, NULL);
    }
    ok(!a && b, "mallory's oldest went, its newest is kept");
    cJSON_Delete(a);
    cJSON_Delete(b);
    observe_as(s, "bob", "b.three", "1");
    a = hutch_shapes_schema(s, "bob", "b.three", NULL);
    b = hutch_shapes_schema(s, "bob", "b.one", NULL);
    ok(a && b, "bob still learns a new tool in the full table, keeping his others");
    cJSON_Delete(a);
    cJSON_Delete(b);
    dump = hutch_shapes_dump(s);
    t = fresh();
    ok(dump && hutch_shapes_parse(t, dump, strlen(dump), &err) == 0,
       "a full table dumps to a file that loads (%s)", err.msg);
    free(dump);
    hutch_shapes_free(t);
    hutch_shapes_free(s);
}

/* Search results: declared types, observed ones for a tool the principal
 * may call, none for one it may not. */
static int allow_all(void *arg, const char *tool)
{
    (void)arg;
    (void)tool;
    return 1;
}

static int deny_all(void *arg, const char *tool)
{
    (void)arg;
    (void)tool;
    return 0;
}

static void test_annotate(void)
{
    struct hutch_shapes *s = fresh();
    struct hutch_catalog *c = NULL;
    struct hutch_err err = {0};
    cJSON *tools = json(
        "[{\"server\":\"srv\",\"tool\":{\"name\":\"plain\",\"inputSchema\":{\"type\":"
        "\"object\",\"properties\":{\"q\":{\"type\":\"string\"}},\"required\":[\"q\"]}}"
        "},"
        "{\"server\":\"srv\",\"tool\":{\"name\":\"typed\",\"inputSchema\":{\"type\":"
        "\"object\"},\"outputSchema\":{\"type\":\"object\",\"properties\":{\"t\":{"
        "\"type\":\"number\"}},\"required\":[\"t\"]}}}]");
    cJSON *r, *o;
    const char *py, *ts, *ret;

    if (hutch_catalog_build(tools, &c, &err) < 0) {
        ok(0, "catalog: %s", err.msg);
        return;
    }
    observe(s, "srv.plain", "{\"hits\":[{\"id\":1,\"title\":\"t\"}],\"total\":1}");
    observe(s, "srv.plain", "{\"hits\":[],\"total\":0}");

    r = hutch_catalog_search(c, "plain", 1, HUTCH_DETAIL_SIGNATURES);
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_SIGNATURES, allow_all, NULL);
    o = cJSON_GetArrayItem(r, 0);
    py = cJSON_GetStringValue(cJSON_GetObjectItem(o, "python"));
    ts = cJSON_GetStringValue(cJSON_GetObjectItem(o, "typescript"));
    ret = cJSON_GetStringValue(cJSON_GetObjectItem(o, "returns"));
    ok(py && !strcmp(py,
                     "def plain(*, q: str) -> {\"hits\": list[{\"id\": int, \"title\": "
                     "str}], \"total\": int}"),
       "observed: the python return type (%s)", py ? py : "-");
    ok(ts && !strcmp(ts, "plain(args: { q: string }): Promise<{ hits: { id: number; "
                         "title: string }[]; total: number }>"),
       "observed: the typescript return type (%s)", ts ? ts : "-");
    ok(ret && !strcmp(ret, "observed from 2 calls"), "marked \"%s\"", ret ? ret : "-");
    ok(!cJSON_GetObjectItem(o, "observedSchema"), "no schema in the signatures detail");
    cJSON_Delete(r);

    r = hutch_catalog_search(c, "plain", 1, HUTCH_DETAIL_FULL);
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_FULL, allow_all, NULL);
    o = cJSON_GetArrayItem(r, 0);
    ok(cJSON_IsObject(cJSON_GetObjectItem(o, "observedSchema")),
       "detail full: the observed shape as a JSON Schema");
    cJSON_Delete(r);

    r = hutch_catalog_search(c, "plain", 1, HUTCH_DETAIL_SIGNATURES);
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_SIGNATURES, deny_all, NULL);
    o = cJSON_GetArrayItem(r, 0);
    py = cJSON_GetStringValue(cJSON_GetObjectItem(o, "python"));
    ok(py && !strcmp(py, "def plain(*, q: str) -> Any") &&
           !cJSON_GetObjectItem(o, "returns"),
       "a tool the principal may not call: no observed shape (%s)", py ? py : "-");
    cJSON_Delete(r);
    r = hutch_catalog_search(c, "plain", 1, HUTCH_DETAIL_SIGNATURES);
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_SIGNATURES, NULL, NULL);
    o = cJSON_GetArrayItem(r, 0);
    ok(!cJSON_GetObjectItem(o, "returns"), "no predicate: no observed shape");
    cJSON_Delete(r);

    r = hutch_catalog_search(c, "typed", 1, HUTCH_DETAIL_SIGNATURES);
    observe(s, "srv.typed", "{\"other\":1}"); /* the bridge would not, but: */
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_SIGNATURES, allow_all, NULL);
    o = cJSON_GetArrayItem(r, 0);
    py = cJSON_GetStringValue(cJSON_GetObjectItem(o, "python"));
    ret = cJSON_GetStringValue(cJSON_GetObjectItem(o, "returns"));
    ok(py && !strcmp(py, "def typed(**kwargs: Any) -> {\"t\": float}") && ret &&
           !strcmp(ret, "declared"),
       "a declared outputSchema wins over observations (%s, %s)", py ? py : "-",
       ret ? ret : "-");
    cJSON_Delete(r);

    r = hutch_catalog_search(c, "plain", 1, HUTCH_DETAIL_NAMES);
    hutch_shapes_annotate(s, "p", c, r, HUTCH_DETAIL_NAMES, allow_all, NULL);
    o = cJSON_GetArrayItem(r, 0);
    ok(!cJSON_GetObjectItem(o, "returns") && !cJSON_GetObjectItem(o, "python"),
       "detail names: nothing added");
    cJSON_Delete(r);

    hutch_catalog_free(c);
    cJSON_Delete(tools);
    hutch_shapes_free(s);
}

int main(void)
{
    test_merge();
    test_no_values();
    test_caps();
    test_file();
    test_invalid_files();
    test_principals();
    test_annotate();
    return tap_done();
}
