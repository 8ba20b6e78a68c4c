/* fuzz_schema.c — JSON Schema validation (schema.c) and what the catalog
 * makes of a tool's schema (catalog.c: collisions, lookup and search;
 * catalog_sig.c: identifiers, the Python signature and TypeScript
 * declaration).
 *
 * Input: JSON text.  An array [schema, value, ...] validates value against
 * schema; anything else validates itself (as value) against itself (as
 * schema).  The catalog is built from the input's "tools" member when it is
 * an object holding an array there (hutch_upstreams_tools' format:
 * [{"server": S, "tool": {...}}]), else from one tool whose inputSchema is
 * the schema.  Checked beyond "no crash": a refusal has a message; every
 * catalog entry has both signatures, and its "server.tool" name finds an
 * entry of that name. */
#include "catalog.h"
#include "fuzz.h"
#include "schema.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    return 0;
}

static void catalog(const cJSON *tools)
{
    struct hutch_catalog *c = NULL;
    struct hutch_err err = {0};
    cJSON *found;

    if (hutch_catalog_build(tools, &c, &err) < 0) {
        fuzz_assert(err.msg[0] && !c);
        return;
    }
    for (size_t i = 0; i < hutch_catalog_count(c); i++) {
        const struct hutch_catalog_entry *e = hutch_catalog_at(c, i);
        char id[512];
        fuzz_assert(e->python_sig && e->ts_decl && e->qualified && e->py_server);
        /* Not always e: "a.b" + "c" and "a" + "b.c" share "a.b.c", and the
         * first in catalog order wins (catalog.c, find_pass). */
        fuzz_assert(
            !strcmp(hutch_catalog_find(c, e->qualified)->qualified, e->qualified));
        fuzz_assert(hutch_ident(e->tool, id, sizeof(id)) == 0 && id[0]);
    }
    found = hutch_catalog_search(c, "", 100, HUTCH_DETAIL_FULL);
    fuzz_assert(cJSON_IsArray(found));
    cJSON_Delete(found);
    if (hutch_catalog_count(c)) {
        found = hutch_catalog_search(c, hutch_catalog_at(c, 0)->tool, 5,
                                     HUTCH_DETAIL_SIGNATURES);
        cJSON_Delete(found);
    }
    found = hutch_catalog_search(c, "read file", 5, HUTCH_DETAIL_NAMES);
    cJSON_Delete(found);
    hutch_catalog_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *doc = cJSON_ParseWithLength((const char *)data, size);
    const cJSON *schema = doc, *value = doc, *tools;
    char msg[512];

    if (!doc)
        return 0;
    if (cJSON_IsArray(doc) && cJSON_GetArraySize(doc) >= 2) {
        schema = cJSON_GetArrayItem(doc, 0);
        value = cJSON_GetArrayItem(doc, 1);
    }
    msg[0] = '\0';
    if (hutch_schema_validate(schema, value, msg, sizeof(msg)) < 0)
        fuzz_assert(msg[0]);

    tools = cJSON_GetObjectItemCaseSensitive(doc, "tools");
    if (cJSON_IsObject(doc) && cJSON_IsArray(tools)) {
        catalog(tools);
    } else {
        cJSON *arr = cJSON_CreateArray(), *item = cJSON_CreateObject();
        cJSON *tool = cJSON_AddObjectToObject(item, "tool");
        cJSON_AddStringToObject(item, "server", "fuzz");
        cJSON_AddStringToObject(tool, "name", "tool");
        cJSON_AddStringToObject(tool, "description", "a tool");
        cJSON_AddItemToObject(tool, "inputSchema", cJSON_Duplicate(schema, 1));
        cJSON_AddItemToArray(arr, item);
        catalog(arr);
        cJSON_Delete(arr);
    }
    cJSON_Delete(doc);
    return 0;
}
