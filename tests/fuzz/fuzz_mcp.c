/* fuzz_mcp.c — JSON-RPC as hutch serves it (mcp_server.c), through the
 * function both transports hand messages to, hutch_mcp_session_receive:
 *   - stdio: the input cut into lines as `hutch serve` cuts stdin (a "\r"
 *     before the "\n" dropped, empty lines skipped), each line a message
 *     to one session;
 *   - HTTP: the whole input as one POST body, to a second session; and
 *     again judged as http.c judges it (mcp_era.h), with the headers of a
 *     2026-07-28 tools/call of execute_code: a refusal is rendered as
 *     http.c answers it, anything else delivered to a third session.
 * The server has no jobs (mcp_server.h): execute_code checks its arguments
 * (files, inputs, limits) and answers that nothing runs, so no sandbox is
 * ever started; the bridge has no upstreams, so search_tools finds nothing.
 *
 * Checked beyond "no crash": everything sent is a JSON-RPC 2.0 object;
 * every message receive() called a request gets exactly one final response
 * on its own stream, and every other message gets nothing. */
#include "bridge.h"
#include "caps.h"
#include "fuzz.h"
#include "mcp_era.h"
#include "mcp_server.h"

static struct hutch_mcp *mcp;
static struct hutch_bridge *bridge;

struct stream {
    int request; /* what receive() returned */
    int sends, finals;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct hutch_mcp_opts o = {.timeout_ms = 1000, .untrusted_envelope = 1};
    struct hutch_err err = {0};

    (void)argc;
    (void)argv;
    fuzz_setup(0);
    if (hutch_bridge_new(NULL, &bridge, &err) < 0)
        abort();
    o.bridge = bridge;
    if (hutch_mcp_new(&o, &mcp, &err) < 0)
        abort();
    return 0;
}

/* Called under the session's send lock, from the receiving thread or a
 * worker. */
static void on_send(void *arg, void *stream, const char *json, size_t len, int last)
{
    struct stream *st = stream;
    cJSON *msg = cJSON_ParseWithLength(json, len);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");

    (void)arg;
    fuzz_assert(st);
    fuzz_assert(cJSON_IsObject(msg) && cJSON_IsString(v) &&
                !strcmp(v->valuestring, "2.0"));
    fuzz_assert(strlen(json) == len);
    cJSON_Delete(msg);
    st->sends++;
    st->finals += !!last;
}

static void check(const struct stream *st)
{
    if (st->request)
        fuzz_assert(st->finals == 1);
    else
        fuzz_assert(st->sends == 0);
}

static void stdio_session(const char *data, size_t size)
{
    struct hutch_mcp_session *s = hutch_mcp_session_new(mcp, on_send, NULL, "local");
    struct stream *streams;
    size_t lines = 1, n = 0;

    fuzz_assert(s);
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    streams = calloc(lines, sizeof(*streams));
    fuzz_assert(streams);
    for (const char *p = data, *end = data + size; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (len && p[len - 1] == '\r')
            len--;
        if (len) {
            struct stream *st = &streams[n++];
            st->request = hutch_mcp_session_receive(s, p, len, st);
            fuzz_assert(st->request == 0 || st->request == 1);
        }
        p = nl ? nl + 1 : end;
    }
    hutch_mcp_session_free(s); /* waits for the workers */
    for (size_t i = 0; i < n; i++)
        check(&streams[i]);
    free(streams);
}

static void http_session(const char *data, size_t size)
{
    struct hutch_mcp_session *s = hutch_mcp_session_new(mcp, on_send, NULL, "alice");
    struct stream st = {0};

    fuzz_assert(s);
    st.request = hutch_mcp_session_receive(s, data, size, &st);
    hutch_mcp_session_free(s);
    check(&st);
}

static void http_2026(const char *data, size_t size)
{
    static const struct hutch_mcp_headers h = {"2026-07-28", "tools/call",
                                               " execute_code "};
    struct hutch_mcp_msg m;
    struct stream st = {0};

    hutch_mcp_msg_parse(data, size, &h, &m);
    if (m.refused) {
        char *text = hutch_mcp_msg_refusal(&m);
        fuzz_assert(text);
        fuzz_assert(m.v.http_status == 400 || m.v.http_status == 404);
        on_send(NULL, &st, text, strlen(text), 1);
        free(text);
    } else {
        struct hutch_mcp_session *s = hutch_mcp_session_new(mcp, on_send, NULL, "bob");
        fuzz_assert(s);
        st.request = hutch_mcp_session_deliver(s, &m, &st);
        hutch_mcp_session_free(s);
        check(&st);
    }
    hutch_mcp_msg_clear(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > HUTCH_MCP_MAX_MESSAGE)
        return 0;
    stdio_session((const char *)data, size);
    http_session((const char *)data, size);
    http_2026((const char *)data, size);
    return 0;
}
