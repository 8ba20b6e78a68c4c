/* catalog.h — every upstream tool as `server.tool`, searchable, with a
 * Python signature and a TypeScript declaration generated from its JSON
 * Schema.
 *
 * Names.  In the sandbox a tool is reached as tools.<server>.<tool>, so both
 * parts are mapped to identifiers valid in Python and JavaScript: every
 * character outside [A-Za-z0-9_] becomes "_" (get-sum -> get_sum), a leading
 * digit gets a "_" prefix (2fa -> _2fa), a Python or JavaScript keyword or
 * builtin-shadowing reserved word gets a "_" suffix (class -> class_), an
 * empty name becomes "_".  Two tools of one server (or two servers) that map
 * to the same identifier collide: both keep working through
 * tools.call("server.original-name"), and only the first keeps the mapped
 * attribute (the collision is listed in warnings).  tools.call accepts the
 * original or the mapped names. */
#ifndef HUTCH_CATALOG_H
#define HUTCH_CATALOG_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "hutch-executor.h"

struct hutch_catalog_entry {
    const char *server; /* upstream names */
    const char *tool;
    const char *qualified; /* "server.tool" with upstream names */
    const char *py_server; /* identifiers; py_tool NULL after a collision */
    const char *py_tool;
    const cJSON *def; /* the upstream's tool object */
    /* "def get_sum(*, a: float, b: float) -> Any", and the return type of
     * the outputSchema when the tool declares one ("-> {"sum": float}") */
    const char *python_sig;
    const char *ts_decl; /* "get_sum(args: { a: number; b: number }): Promise<any>" */
};

enum hutch_detail {
    HUTCH_DETAIL_NAMES,      /* name + one-line description */
    HUTCH_DETAIL_SIGNATURES, /* + python and typescript signatures */
    HUTCH_DETAIL_FULL,       /* + input/output schema, annotations */
};

struct hutch_catalog;

/* Build from hutch_upstreams_tools()'s array.  Caller frees. */
int hutch_catalog_build(const cJSON *tools, struct hutch_catalog **out,
                        struct hutch_err *err);
void hutch_catalog_free(struct hutch_catalog *c);

size_t hutch_catalog_count(const struct hutch_catalog *c);
const struct hutch_catalog_entry *hutch_catalog_at(const struct hutch_catalog *c,
                                                   size_t i);
/* By "server.tool", each part its upstream name or its identifier; matching
 * is exact first, then case-insensitive with surrounding whitespace
 * ignored.  NULL when absent. */
const struct hutch_catalog_entry *hutch_catalog_find(const struct hutch_catalog *c,
                                                     const char *qualified);
/* Ranked search over names, descriptions and parameter names; an empty
 * query lists everything.  An array of result objects; caller frees. */
cJSON *hutch_catalog_search(const struct hutch_catalog *c, const char *query,
                            size_t limit, enum hutch_detail detail);
/* The type of a value `schema` describes, as Python (ts 0) or TypeScript
 * (ts 1) spells it in a signature: objects with properties spelled out
 * ({"a": float, "b": NotRequired[str]} / { a: number; b?: string }),
 * shallower when that passes HUTCH_SIG_MAX_RETURN_BYTES, at worst
 * dict[str, Any] / Any.  `schema` is also the root of its "#/..." refs.
 * Used for a tool's return type (its outputSchema or an observed shape).
 * Caller frees; NULL when out of memory. */
char *hutch_catalog_type(const cJSON *schema, int ts);

/* The same, over the entries keep() returns 1 for (keep NULL: all);
 * *matches (when not NULL) receives how many matched before the limit. */
cJSON *hutch_catalog_search_keep(const struct hutch_catalog *c, const char *query,
                                 size_t limit, enum hutch_detail detail,
                                 int (*keep)(void *arg,
                                             const struct hutch_catalog_entry *e),
                                 void *arg, size_t *matches);
/* The same ranking, typed: the matching entries best first, at most
 * `limit` (0: the default), in *out (caller frees the array; the entries
 * are the catalog's).  0 or -ENOMEM. */
int hutch_catalog_rank(const struct hutch_catalog *c, const char *query, size_t limit,
                       const struct hutch_catalog_entry ***out, size_t *n);
/* What a search result shows of an entry, as text: how a program calls it
 * (tools.server.tool) and its description at that detail.  Caller frees;
 * NULL when out of memory. */
char *hutch_catalog_call(const struct hutch_catalog_entry *e);
char *hutch_catalog_description(const struct hutch_catalog_entry *e,
                                enum hutch_detail detail);
/* An entry (of a catalog the caller holds) as a search result at that
 * detail ({name, call, description, python?, typescript?, ...}); caller
 * frees, NULL when out of memory. */
cJSON *hutch_catalog_describe(const struct hutch_catalog_entry *e,
                              enum hutch_detail detail);
/* Collisions and skipped tools, as strings.  Borrowed. */
const cJSON *hutch_catalog_warnings(const struct hutch_catalog *c);

/* The identifier for one name part (see the rule above). */
int hutch_ident(const char *name, char *out, size_t len);

#endif
