/* shape.h — observed return types: the JSON shape of what each upstream
 * tool without an outputSchema has returned, merged over its calls, so a
 * signature can say what a call gives back instead of Any.
 *
 * A shape holds types and field names, never values: an object's keys
 * with their shapes (a key missing from some results is optional), an
 * array's merged element shape, unions of string / number / integer /
 * boolean / null.  Everything is bounded (caps.h HUTCH_SHAPE_*): a result
 * too big to walk cheaply is not observed; an object with too many keys,
 * or a key that is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most
 * HUTCH_SHAPE_MAX_KEY_BYTES), becomes a map (dict[str, V]) whose keys are
 * not kept: no other text of a result ever reaches a signature.
 *
 * Shapes are learned per principal: what alice's calls returned types
 * alice's search_tools only, never bob's (it would show bob the field
 * names of alice's data, and let alice plant text in bob's model
 * context).  The store is shared by every execution (the bridge observes,
 * search_tools reads) and safe to use from any thread; when it holds
 * HUTCH_SHAPE_MAX_TOOLS (principal, tool) entries, a new one takes the
 * place of the least recently observed entry of the principal holding the
 * most, so no principal can crowd another out.  With a cache file it is
 * loaded at start, written atomically (a temporary file renamed over it)
 * at most every HUTCH_SHAPE_SAVE_MS while calls come in, and at exit.
 *
 * Not here: rendering a schema as a Python or TypeScript type
 * (catalog_sig.c, hutch_catalog_type), deciding who may see which tool
 * (the caller passes a predicate). */
#ifndef HUTCH_SHAPE_H
#define HUTCH_SHAPE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "hutch-executor.h"

struct hutch_shapes;

/* An empty store.  Caller frees with hutch_shapes_free (which saves
 * nothing: call hutch_shapes_save first). */
int hutch_shapes_new(struct hutch_shapes **out, struct hutch_err *err);
void hutch_shapes_free(struct hutch_shapes *s);

/* Use `file` as the cache: load it now, save to it from now on.  An absent
 * file is fine (0; it is created at the first save).  A file that cannot be
 * read or is not a valid shapes file: -errno with a message, the store
 * stays empty and the file is replaced at the next save (the caller warns:
 * a cache is never a reason not to start). */
int hutch_shapes_attach(struct hutch_shapes *s, const char *file,
                        struct hutch_err *err);

/* Replace the store's contents with the shapes file text (what
 * hutch_shapes_dump writes).  -EINVAL with a message naming the place when
 * it is not one; then the store is left as it was. */
int hutch_shapes_parse(struct hutch_shapes *s, const char *text, size_t len,
                       struct hutch_err *err);
/* The store as shapes file text; caller frees.  NULL when out of memory. */
char *hutch_shapes_dump(struct hutch_shapes *s);

/* Write the cache file now when anything changed since the last write
 * (0 without a file).  -errno with a message when it cannot be written. */
int hutch_shapes_save(struct hutch_shapes *s, struct hutch_err *err);

/* One successful result of `tool` ("server.tool") to a call of
 * `principal`'s (a policy principal's name, or "local" / "http"), as the
 * program received it (hutch_bridge_result_value).  Bounded work; a result
 * too big to walk, or a principal's name that is not one, is not observed.
 * May write the cache file (at most every HUTCH_SHAPE_SAVE_MS; a failure is
 * logged). */
void hutch_shapes_observe(struct hutch_shapes *s, const char *principal,
                          const char *tool, const cJSON *value);

/* The merged shape of `tool` learned from `principal`'s calls as a JSON
 * Schema ({"type": ..., "properties": ..., "required": ..., "items": ...,
 * "additionalProperties": ...}) and the number of calls it was observed
 * from; NULL when none.  Caller frees. */
cJSON *hutch_shapes_schema(struct hutch_shapes *s, const char *principal,
                           const char *tool, uint64_t *calls);

/* search_tools' results for `principal` (hutch_catalog_search's array at
 * `detail`, changed in place): a tool that declares an outputSchema gets
 * "returns": "declared"; one without, that has a shape observed from
 * `principal`'s own calls and that `may_see(arg, "server.tool")` allows,
 * gets that shape as the return type of its "python" and "typescript"
 * signatures, "returns": "observed from N calls" and, at HUTCH_DETAIL_FULL,
 * "observedSchema".  Others are left alone (Any).  `may_see` NULL: no
 * observed shape is shown. */
void hutch_shapes_annotate(struct hutch_shapes *s, const char *principal,
                           const struct hutch_catalog *cat, cJSON *results,
                           enum hutch_detail detail,
                           int (*may_see)(void *arg, const char *tool), void *arg);

#endif
