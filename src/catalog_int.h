/* catalog_int.h — what catalog.c and catalog_sig.c share, and nobody
 * else: the bounded string builder, the small JSON and character helpers
 * both use, and the one call from the catalog into the signature
 * generator.  Not an API (that is catalog.h).
 *
 *   catalog_sig.c  identifiers (hutch_ident) and the signature generator:
 *                  a tool's JSON Schema as a Python signature and a
 *                  TypeScript declaration, and hutch_catalog_type
 *   catalog.c      building the catalog (entries, duplicates, collisions),
 *                  lookup by name, and ranked search and its results
 *
 * catalog.c calls catalog_sig.c, never the other way.  Neither keeps any
 * state outside the catalog it builds (no locks). */
#ifndef HUTCH_CATALOG_INT_H
#define HUTCH_CATALOG_INT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"

/* --- bounded strings -------------------------------------------------------- */

/* A hutch_buf whose first error sticks, so that a signature is built with
 * plain appends and checked once, in sb_take(). */
struct sbuf {
    struct hutch_buf b;
    int err; /* -ENOMEM, or -E2BIG past max */
};
/* max counts the NUL, as the signature caps always have. */
#define SBUF_INIT(limit)                                                               \
    {                                                                                  \
        .b = {.max = (limit)-1 }                                                       \
    }

static inline void sb_add(struct sbuf *b, const char *p, size_t n)
{
    if (!b->err)
        b->err = hutch_buf_append(&b->b, p, n);
}

static inline void sb_puts(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* A JSON string literal, which Python and TypeScript read the same way. */
static inline void sb_quote(struct sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_add(b, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            sb_add(b, esc, 6);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* The string, or NULL (and *err set) when building it failed. */
static inline char *sb_take(struct sbuf *b, int *err)
{
    char *s = b->err ? NULL : hutch_buf_steal(&b->b, NULL);

    if (!s && !b->err)
        b->err = -ENOMEM;
    if (b->err) {
        if (err && !*err)
            *err = b->err;
        hutch_buf_free(&b->b);
        return NULL;
    }
    return s;
}

/* --- small helpers ---------------------------------------------------------- */

static inline const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static inline int ascii_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* --- catalog_sig.c --------------------------------------------------------- */

/* Both signatures of a tool (`def`, the upstream's tool object), named
 * `py_tool`: *python_sig and *ts_decl, caller frees.  0, or -ENOMEM. */
int cat_make_sigs(const cJSON *def, const char *py_tool, char **python_sig,
                  char **ts_decl);

#endif
