/* wire.h — the runner wire protocol, core side: NDJSON framing with a cap,
 * and validation of every message a runner sends (src/runners/PROTOCOL.md). */
#ifndef HUTCH_WIRE_H
#define HUTCH_WIRE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hutch-executor.h"

/* Splits a byte stream into lines of at most `max` bytes. */
struct hutch_wire_reader {
    struct hutch_buf buf;
    size_t consumed; /* bytes of buf already handed out */
    size_t max_line;
};
void hutch_wire_reader_init(struct hutch_wire_reader *r, size_t max_line);
void hutch_wire_reader_free(struct hutch_wire_reader *r);
/* Append bytes; -E2BIG when a line, complete or not, is longer than
 * max_line (the reader is then useless). */
int hutch_wire_feed(struct hutch_wire_reader *r, const void *data, size_t n);
/* 1 and the next complete line (without '\n', valid until the next call), or
 * 0 when none is complete. */
int hutch_wire_next(struct hutch_wire_reader *r, const char **line, size_t *len);

enum hutch_msg_type {
    HUTCH_MSG_READY = 1,
    HUTCH_MSG_TOOL_CALL,
    HUTCH_MSG_DONE,
    HUTCH_MSG_SEARCH,   /* tools.search: id and args as a tool_call, tool NULL */
    HUTCH_MSG_DESCRIBE, /* dir(), help(), .signature: the same shape */
};

struct hutch_msg {
    enum hutch_msg_type type;
    cJSON *root; /* owned: free with hutch_msg_free */
    /* ready */
    const char *lang, *version;
    /* tool_call */
    int64_t id;
    const char *tool;
    cJSON *args; /* borrowed from root; an object */
    /* done */
    int ok;
    int status;    /* the exit status the runner will exit with; -1: not said */
    int files;     /* /work/out holds something: 1, 0, or -1 not said */
    cJSON *result; /* borrowed; NULL when absent */
    cJSON *error;  /* borrowed; an object when !ok */
};

/* Parse and validate one line from a runner.  Rejects invalid UTF-8, JSON
 * that is not an object, nesting past HUTCH_WIRE_MAX_DEPTH, an unknown "t",
 * ids that are not positive integers, tool names that are not short
 * printable strings, args that are not objects. */
int hutch_wire_parse(const char *line, size_t len, struct hutch_msg *m,
                     struct hutch_err *err);
void hutch_msg_free(struct hutch_msg *m);

/* Serialise `msg` as one line ending in '\n'; caller frees. */
char *hutch_wire_encode(const cJSON *msg, size_t *len);

/* 1 when s[0..len) is well-formed UTF-8. */
int hutch_utf8_valid(const char *s, size_t len);
/* Bytes from a sandbox as text that survives a C string and a JSON string
 * whole: well-formed UTF-8 is kept, and a NUL and every byte that does not
 * belong to a well-formed sequence become U+FFFD.  malloc'd, NUL-terminated,
 * its length in *outlen when not NULL; NULL only when out of memory. */
char *hutch_utf8_sanitize(const char *s, size_t len, size_t *outlen);
/* Depth of nested arrays/objects. */
int hutch_json_depth(const cJSON *j);
/* cJSON reads the escape \u0000 as a NUL that ends its C string ("a\u0000b"
 * reads as "a"): whether `parsed`, cJSON's tree of text[0..len), lost part
 * of a key or string so.  1 with `where` naming the first (its path from the
 * top, like params.arguments.workspace or files[0].path), 0 when none
 * did, -ENOMEM.  Costs a scan of the text, and a second parse only when the
 * text holds such an escape. */
int hutch_json_find_nul(const cJSON *parsed, const char *text, size_t len, char *where,
                        size_t where_len);

#endif
