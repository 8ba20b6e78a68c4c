/* schema.h — validating tool arguments against a tool's JSON Schema before
 * anything is sent upstream.  The subset tools use in practice: type (one or
 * a list), properties, required, additionalProperties (bool or schema),
 * items, enum, const, minimum/maximum/exclusive*, minLength/maxLength,
 * minItems/maxItems, anyOf/oneOf/allOf/not, local $ref (#/$defs/…,
 * #/definitions/…).  Keywords it does not know (pattern, format…) are
 * ignored rather than failing closed: the upstream validates too. */
#ifndef HUTCH_SCHEMA_H
#define HUTCH_SCHEMA_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* 0 when `value` satisfies `schema`; -EINVAL with a message naming the
 * path and the rule (`args.b: expected number, got string`).  A missing or
 * empty schema accepts everything.  Bounded in depth. */
int hutch_schema_validate(const cJSON *schema, const cJSON *value, char *msg,
                          size_t len);

/* The subschema a local $ref names in `root`: a JSON pointer ("#",
 * "#/$defs/Item", "#/anyOf/0", with ~0 and ~1 escapes).  NULL for a remote
 * or anchor reference, one of HUTCH_SCHEMA_MAX_POINTER bytes or more, an
 * array index past HUTCH_SCHEMA_MAX_POINTER_INDEX, or one that names
 * nothing.  The one $ref resolver: validation (here) and signatures
 * (catalog_sig.c) both use it. */
const cJSON *hutch_schema_ref(const cJSON *root, const char *ref);

/* `s` with its chain of $refs followed (s itself when it has none); each
 * step adds one to *depth, and NULL is returned when a reference does not
 * resolve or *depth passes max_depth (so a cycle ends there: callers pass
 * HUTCH_SIG_MAX_DEPTH or HUTCH_SCHEMA_MAX_DEPTH, caps.h). */
const cJSON *hutch_schema_deref(const cJSON *root, const cJSON *s, int *depth,
                                int max_depth);

#endif
