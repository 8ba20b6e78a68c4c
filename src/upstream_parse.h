/* upstream_parse.h — the parser of an upstream's HTTP responses (upstream_http.c)
 * as a function of bytes alone, for the fuzz harness (tests/fuzz/fuzz_sse.c)
 * and the unit tests.  Not an API: hutch itself only reaches this parser
 * through hutch_upstreams_call. */
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

#endif
