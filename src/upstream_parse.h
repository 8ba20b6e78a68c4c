/* upstream_parse.h — what the HTTP upstream client does to bytes and JSON
 * alone, for the fuzz harness (tests/fuzz/fuzz_sse.c) and the unit tests:
 * the parser of an upstream's responses (upstream_http.c) and SEP-2243's
 * x-mcp-header rules (upstream_xheader.c).  Not an API: hutch itself only
 * reaches them through hutch_upstreams_call and the tools it lists. */
#ifndef HUTCH_UPSTREAM_PARSE_H
#define HUTCH_UPSTREAM_PARSE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Feed `len` bytes of a response body, as libcurl's write callback would
 * get them in pieces of `chunk` bytes (0: all at once), to the parser of an
 * HTTP upstream named "fuzz", waiting for the JSON-RPC response with id
 * `want_id`; `sse`: the body is text/event-stream, else JSON.  The body's
 * notifications are handled as the server's; its requests are not answered
 * (nothing is sent anywhere).  0 with *reply (the response; caller frees),
 * or the negative code http_post would report (-EPROTO: over a cap, or no
 * response). */
int hutch_upstream_parse_http(const char *body, size_t len, int sse, size_t chunk,
                              int64_t want_id, cJSON **reply);

/* What the same SSE parser keeps of `len` bytes of an event stream to
 * resume it: the last "id:" it would send back as Last-Event-ID (copied
 * into id, "" when none or one it will not send) and the last "retry:" in
 * ms (*retry_ms; -1 when none, at most HUTCH_UPSTREAM_RETRY_MAX_MS).  0, or
 * -EPROTO over a cap. */
int hutch_upstream_parse_sse_cursor(const char *body, size_t len, char *id,
                                    size_t id_cap, long *retry_ms);

struct hutch_err;
/* A tool's inputSchema against SEP-2243's rules for "x-mcp-header": only
 * on a string, integer or boolean parameter reached through "properties"
 * alone, an HTTP token, unique whatever its case, no more than
 * HUTCH_UPSTREAM_MAX_PARAM_HEADERS.  0 (none is fine), or -EINVAL with the
 * first fault in why. */
int hutch_upstream_xheader_check(const cJSON *input_schema, char *why, size_t why_cap);
/* The "Mcp-Param-<Name>: <value>" lines of a tools/call of a tool that
 * passed the check, with these arguments: NULL-terminated in *lines (NULL
 * when none; caller frees each and the array).  0, -E2BIG (an argument
 * too long for its header), -ENOMEM. */
int hutch_upstream_xheader_lines(const cJSON *input_schema, const cJSON *args,
                                 char ***lines, struct hutch_err *err);

#endif
