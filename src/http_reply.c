/* http_reply.c — queueing one reply on a libmicrohttpd connection: a
 * buffer, its Content-Type and extra headers.  The bottom of the http*.c
 * files: http.c (/mcp) and http_ops.c (/healthz, /readyz, /metrics) call
 * it, and it calls none of them, so the arrow between those two runs one
 * way (http.c → http_ops.c).
 *
 * No state and no lock: called on the connection's thread.
 *
 * Not here: what a reply says (the callers); streamed replies, JSON or SSE
 * (http_stream.c). */
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

enum MHD_Result http_reply(struct MHD_Connection *conn, unsigned status,
                           const char *ctype, void *body, size_t len,
                           enum MHD_ResponseMemoryMode mode, const char *const *hdrs)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result ret;

    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    for (; hdrs && hdrs[0]; hdrs += 2)
        MHD_add_response_header(r, hdrs[0], hdrs[1]);
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result http_reply_text(struct MHD_Connection *conn, unsigned status,
                                const char *msg, const char *const *hdrs)
{
    return http_reply(conn, status, "text/plain; charset=utf-8", (void *)msg,
                      strlen(msg), MHD_RESPMEM_PERSISTENT, hdrs);
}
