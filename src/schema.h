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

#endif
