/* stdio_server.c — MCP over stdio (stdio_server.h).  What lives here:
 * framing lines, the over-long line, end of input.  Not here: the MCP
 * semantics (mcp_server.c), the command (cmd_serve.c).
 *
 * Threads: the caller's thread reads; replies are written by whichever
 * thread has one (the core serialises a session's sends), each message in
 * one write so lines stay whole.  A failed write marks the client gone
 * (an atomic the reading loop checks). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"
#include "jsonrpc.h"
#include "mcp_server.h"
#include "stdio_server.h"
#include "upstream.h"
#include "util.h"

#define STDIO_READ_CHUNK 65536

struct stdio_out {
    int fd;
    atomic_int gone; /* a write failed: the client went away */
};

static void stdio_send(void *arg, void *stream, const char *json, size_t len, int last)
{
    struct stdio_out *o = arg;
    char *line = malloc(len + 1);

    (void)stream;
    (void)last;
    if (!line)
        return;
    memcpy(line, json, len);
    line[len] = '\n';
    if (hutch_write_all(o->fd, line, len + 1) < 0)
        atomic_store(&o->gone, 1);
    free(line);
}

int hutch_stdio_serve(struct hutch_mcp *m, struct hutch_upstreams *ups, int in_fd,
                      int out_fd, volatile sig_atomic_t *stop, struct hutch_err *err)
{
    struct stdio_out out = {.fd = out_fd};
    struct hutch_mcp_session *s = hutch_mcp_session_new(m, stdio_send, &out, "local");
    struct hutch_buf in;
    size_t scan = 0;
    int skipping = 0, r = 0;

    if (!s)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    /* One message, a "\r" and its newline. */
    hutch_buf_init(&in, HUTCH_MCP_MAX_MESSAGE + 2);
    while (!*stop && !atomic_load(&out.gone)) {
        ssize_t n = hutch_buf_read(&in, in_fd, STDIO_READ_CHUNK);
        char *nl;
        if (n == -E2BIG) {
            /* An over-long line: answer once, then drop it to its end. */
            char msg[128];
            int len =
                snprintf(msg, sizeof(msg),
                         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,"
                         "\"message\":\"message exceeds %u MiB\"}}",
                         HUTCH_RPC_INVALID_REQUEST, HUTCH_MCP_MAX_MESSAGE >> 20);
            if (!skipping)
                stdio_send(&out, NULL, msg, (size_t)len, 1);
            skipping = 1;
            hutch_buf_reset(&in);
            scan = 0;
            continue;
        }
        if (n == -EINTR)
            continue;
        if (n < 0) {
            r = hutch_err_set(err, (int)n, "reading stdin: %s", strerror((int)-n));
            break;
        }
        if (n == 0)
            break; /* the client closed stdin: done */
        while ((nl = memchr(in.data + scan, '\n', in.len - scan))) {
            size_t l = (size_t)(nl - in.data);
            size_t mlen = l;
            if (mlen && in.data[mlen - 1] == '\r')
                mlen--;
            if (!skipping && mlen > 0)
                hutch_mcp_session_receive(s, in.data, mlen, NULL);
            skipping = 0;
            hutch_buf_consume(&in, l + 1);
            scan = 0;
        }
        scan = in.len;
    }
    /* The session's executions are cancelled and waited for: their tool
     * calls in flight must end now. */
    hutch_upstreams_stop(ups);
    hutch_mcp_session_free(s);
    hutch_buf_free(&in);
    return r;
}
