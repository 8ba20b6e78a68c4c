/* fuzz_shapes.c — the shapes cache file (shape.c: hutch_shapes_parse) and
 * the shape taken of a tool's result (hutch_shapes_observe).
 *
 * Input: JSON text, read two ways.  As a shapes file: refused with a
 * message, or loaded, and then what it dumps loads again to the same dump.
 * As a tool result: observed (twice, under two tools, once merged with the
 * result of another kind) for principal alice, and once for bob under a
 * third; whatever the store then holds must dump to a file that loads
 * again (the merge never keeps what loading refuses), every shape renders
 * as a Python and a TypeScript type, no key of a shape is anything but a
 * plain identifier, and no principal sees a shape learned from another's
 * calls. */
#include "caps.h"
#include "catalog.h"
#include "fuzz.h"
#include "shape.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    return 0;
}

/* The store's dump loads into a fresh store and dumps the same. */
static void round_trip(struct hutch_shapes *s)
{
    struct hutch_shapes *t = NULL;
    struct hutch_err err = {0};
    char *a = hutch_shapes_dump(s), *b;

    fuzz_assert(a);
    fuzz_assert(hutch_shapes_new(&t, &err) == 0);
    if (hutch_shapes_parse(t, a, strlen(a), &err) < 0) {
        fprintf(stderr, "dump refused: %s\n%s\n", err.msg, a);
        abort();
    }
    b = hutch_shapes_dump(t);
    fuzz_assert(b && !strcmp(a, b));
    free(a);
    free(b);
    hutch_shapes_free(t);
}

/* Every key a schema names is a plain identifier: no other text of a
 * result may reach a signature. */
static void keys_plain(const cJSON *sc)
{
    const cJSON *c, *props = cJSON_GetObjectItemCaseSensitive(sc, "properties");
    if (!sc)
        return;
    cJSON_ArrayForEach(c, props)
    {
        const char *k = c->string;
        size_t n = strlen(k);
        fuzz_assert(n >= 1 && n <= HUTCH_SHAPE_MAX_KEY_BYTES &&
                    !(*k >= '0' && *k <= '9'));
        for (; *k; k++)
            fuzz_assert((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
                        (*k >= '0' && *k <= '9') || *k == '_');
        keys_plain(c);
    }
    keys_plain(cJSON_GetObjectItemCaseSensitive(sc, "items"));
    keys_plain(cJSON_GetObjectItemCaseSensitive(sc, "additionalProperties"));
}

static void render(struct hutch_shapes *s, const char *principal, const char *tool)
{
    uint64_t calls = 0;
    cJSON *sc = hutch_shapes_schema(s, principal, tool, &calls);
    if (!sc)
        return;
    keys_plain(sc);
    fuzz_assert(calls >= 1);
    for (int ts = 0; ts < 2; ts++) {
        char *t = hutch_catalog_type(sc, ts);
        fuzz_assert(t && strlen(t) <= HUTCH_SIG_MAX_RETURN_BYTES + 32);
        free(t);
    }
    cJSON_Delete(sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_shapes *s = NULL;
    struct hutch_err err = {0};
    cJSON *v;

    fuzz_assert(hutch_shapes_new(&s, &err) == 0);
    if (hutch_shapes_parse(s, (const char *)data, size, &err) < 0)
        fuzz_assert(err.msg[0]);
    else
        round_trip(s);
    hutch_shapes_free(s);

    v = cJSON_ParseWithLength((const char *)data, size);
    if (!v)
        return 0;
    fuzz_assert(hutch_shapes_new(&s, &err) == 0);
    hutch_shapes_observe(s, "alice", "fuzz.a", v);
    hutch_shapes_observe(s, "alice", "fuzz.b", v);
    {
        cJSON *other = cJSON_IsObject(v) ? cJSON_CreateArray() : cJSON_CreateObject();
        hutch_shapes_observe(s, "alice", "fuzz.b", other);
        cJSON_Delete(other);
    }
    hutch_shapes_observe(s, "alice", "fuzz.b", v);
    hutch_shapes_observe(s, "bob", "fuzz.c", v);
    render(s, "alice", "fuzz.a");
    render(s, "alice", "fuzz.b");
    render(s, "bob", "fuzz.c");
    {
        /* Nothing crosses principals. */
        cJSON *a = hutch_shapes_schema(s, "bob", "fuzz.a", NULL),
              *b = hutch_shapes_schema(s, "alice", "fuzz.c", NULL);
        fuzz_assert(!a && !b);
    }
    round_trip(s);
    hutch_shapes_free(s);
    cJSON_Delete(v);
    return 0;
}
