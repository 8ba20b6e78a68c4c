/* upstream_http.c — streamable HTTP upstreams through libcurl: a pool of
 * connections per server, a POST per message in the caller's thread, the
 * response read as JSON or as an SSE stream (its parser also reachable
 * alone through upstream_parse.h, for the fuzz harness), the session
 * header and re-initializing a session the server dropped.  The thread
 * and lock rules are at the top of upstream.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "curl_lib.h"
#include "log.h"
#include "upstream.h"
#include "upstream_int.h"
#include "upstream_parse.h"
#include "util.h"

/* --- HTTP ---------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct xfer {
    struct server *s;
    CURL *h;
    CURLM *m;
    int64_t want_id; /* 0: nothing to wait for */
    int depth;       /* 1 inside an answer to a server request */
    bool stop_aborts;
    int mode;              /* 0 not yet known, 1 JSON or other, 2 SSE */
    struct hutch_buf body; /* mode 1 */
    struct hutch_buf line; /* mode 2: the current line */
    struct hutch_buf data; /* mode 2: the current event's data */
    char event[32];
    bool cr;
    /* mode 2: the last "id:" (to resume from; id_bad: one we cannot send
     * back) and "retry:" (ms, -1: none) */
    char last_id[HUTCH_UPSTREAM_MAX_EVENT_ID + 1];
    bool id_bad;
    long retry_ms;
    cJSON *reply;
    bool done;
    uint64_t done_at;
    int err;
    char why[200];
    char session[HUTCH_UPSTREAM_MAX_SESSION_ID + 1];
    bool got_session;
};

/* What one POST carries: the JSON-RPC text, and for the 2026 era's
 * headers its method and what it names (NULL: no Mcp-Name). */
struct post {
    const char *body, *method, *name;
    /* "Mcp-Param-<Name>: value" lines of a 2026 tools/call (SEP-2243),
     * NULL-terminated; NULL: none. */
    char *const *params;
    /* A 4xx whose body is the JSON-RPC error for this request is that
     * error, as a reply (the server/discover probe reads its code). */
    bool error_is_reply;
};

static int http_post(struct server *s, const struct post *p, int64_t want_id,
                     unsigned ms, bool initialize, int depth, cJSON **reply,
                     char *session_out, struct hutch_err *err);

/* The caps of struct xfer's buffers: a body or an event's data holds one
 * message (data has a newline after each line), an SSE line a little more
 * for its "data: ".  No "retry:" seen yet. */
#define XFER_INIT                                                                      \
    .body = {.max = HUTCH_UPSTREAM_MAX_MESSAGE},                                       \
    .line = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 16},                                  \
    .data = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 1}, .retry_ms = -1

static void xfer_free_bufs(struct xfer *x)
{
    hutch_buf_free(&x->body);
    hutch_buf_free(&x->line);
    hutch_buf_free(&x->data);
}

/* One JSON-RPC message of an HTTP response body; takes msg. */
static void http_message(struct xfer *x, cJSON *msg)
{
    struct server *s = x->s;
    const cJSON *method = get(msg, "method"), *id = get(msg, "id");
    int64_t rid;

    if (!cJSON_IsObject(msg)) {
        hutch_log(HUTCH_LOG_WARN, s->who, "ignoring a JSON value that is not JSON-RPC");
    } else if (cJSON_IsString(method)) {
        if (id && !cJSON_IsNull(id)) {
            cJSON *ans = up_answer_request(s, method->valuestring, id);
            char *text = ans && !x->depth ? cJSON_PrintUnformatted(ans) : NULL;
            struct post p = {text, NULL, NULL, NULL, false};
            if (text)
                http_post(s, &p, 0, HUTCH_UPSTREAM_NOTE_MS, false, 1, NULL, NULL, NULL);
            free(text);
            cJSON_Delete(ans);
        } else {
            up_on_notification(s, method->valuestring, get(msg, "params"));
        }
    } else if (up_rpc_id(id, &rid) && rid == x->want_id && !x->done &&
               (get(msg, "result") || get(msg, "error"))) {
        x->reply = msg;
        x->done = true;
        x->done_at = hutch_now_ms();
        return;
    } else {
        hutch_log(HUTCH_LOG_DEBUG, s->who, "ignoring a response that is not ours");
    }
    cJSON_Delete(msg);
}

/* A whole body or SSE event: one message or a batch. */
static void http_payload(struct xfer *x, const char *text, size_t len)
{
    struct hutch_err jerr = HUTCH_ERR_INIT;
    const char *end = NULL;
    cJSON *msg;

    while (len && is_space(text[len - 1]))
        len--;
    if (!len)
        return;
    if (hutch_json_check_text(text, len, HUTCH_JSON_MAX_TREE, "a body", &jerr) < 0) {
        hutch_log(HUTCH_LOG_WARN, x->s->who, "ignoring %s", jerr.msg);
        return;
    }
    msg = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!msg || end != text + len) {
        char shown[120];
        cJSON_Delete(msg);
        up_clean_text(shown, sizeof(shown), text, len);
        hutch_log(HUTCH_LOG_WARN, x->s->who, "ignoring a body that is not JSON: %s",
                  shown);
        return;
    }
    if (cJSON_IsArray(msg)) {
        cJSON *m;
        while ((m = msg->child)) {
            cJSON_DetachItemViaPointer(msg, m);
            http_message(x, m);
        }
        cJSON_Delete(msg);
        return;
    }
    http_message(x, msg);
}

static void sse_dispatch(struct xfer *x)
{
    if (x->data.len && (!x->event[0] || !strcmp(x->event, "message")))
        http_payload(x, x->data.data, x->data.len);
    hutch_buf_reset(&x->data);
    x->event[0] = '\0';
}

/* "id:" (the SSE rules: an id with a NUL is ignored, an empty one
 * forgets the last).  It goes back in a Last-Event-ID header, so only a
 * visible ASCII one of sane length is kept. */
static void sse_id(struct xfer *x, const char *val, size_t vlen)
{
    x->id_bad = vlen > HUTCH_UPSTREAM_MAX_EVENT_ID;
    for (size_t i = 0; i < vlen && !x->id_bad; i++)
        x->id_bad = (unsigned char)val[i] < 0x21 || (unsigned char)val[i] > 0x7e;
    if (x->id_bad)
        vlen = 0;
    memcpy(x->last_id, val, vlen);
    x->last_id[vlen] = '\0';
}

/* "retry:": ASCII digits only, else ignored (the SSE rules); kept up to
 * HUTCH_UPSTREAM_RETRY_MAX_MS. */
static void sse_retry(struct xfer *x, const char *val, size_t vlen)
{
    long ms = 0;

    if (!vlen)
        return;
    for (size_t i = 0; i < vlen; i++) {
        if (val[i] < '0' || val[i] > '9')
            return;
        if (ms <= HUTCH_UPSTREAM_RETRY_MAX_MS)
            ms = ms * 10 + (val[i] - '0');
    }
    x->retry_ms = ms < HUTCH_UPSTREAM_RETRY_MAX_MS ? ms : HUTCH_UPSTREAM_RETRY_MAX_MS;
}

static int sse_line(struct xfer *x, const char *line, size_t len)
{
    const char *colon, *val;
    size_t flen, vlen;
    int r;

    if (!len) {
        sse_dispatch(x);
        return 0;
    }
    if (line[0] == ':')
        return 0;
    colon = memchr(line, ':', len);
    flen = colon ? (size_t)(colon - line) : len;
    val = colon ? colon + 1 : line + len;
    vlen = (size_t)(line + len - val);
    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
    if (flen == 4 && !memcmp(line, "data", 4)) {
        if (vlen + 1 > x->data.max - x->data.len)
            return -E2BIG;
        r = hutch_buf_append(&x->data, val, vlen);
        if (r == 0)
            r = hutch_buf_append(&x->data, "\n", 1);
        if (r < 0)
            return r;
    } else if (flen == 5 && !memcmp(line, "event", 5)) {
        up_clean_text(x->event, sizeof(x->event), val, vlen);
    } else if (flen == 2 && !memcmp(line, "id", 2) && !memchr(val, '\0', vlen)) {
        sse_id(x, val, vlen);
    } else if (flen == 5 && !memcmp(line, "retry", 5)) {
        sse_retry(x, val, vlen);
    }
    return 0;
}

/* Feed SSE bytes: lines end in CRLF, LF or CR. */
static int sse_feed(struct xfer *x, const char *p, size_t n)
{
    for (size_t i = 0; i < n && !x->done; i++) {
        char ch = p[i];
        int r;
        if (x->cr && ch == '\n') {
            x->cr = false;
            continue;
        }
        x->cr = ch == '\r';
        if (ch == '\r' || ch == '\n') {
            r = sse_line(x, hutch_buf_str(&x->line), x->line.len);
            hutch_buf_reset(&x->line);
            if (r < 0)
                return r;
            continue;
        }
        r = hutch_buf_append(&x->line, &ch, 1);
        if (r < 0)
            return r;
    }
    return 0;
}

static size_t http_write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb;
    int r;

    if (x->done) /* the rest of a stream after our response: let it end */
        return n;
    if (!x->mode) {
        char *ct = NULL;
        curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
        x->mode = ct && !strncasecmp(ct, "text/event-stream", 17) ? 2 : 1;
    }
    if (x->mode == 2) {
        r = sse_feed(x, ptr, n);
    } else {
        r = hutch_buf_append(&x->body, ptr, n);
    }
    if (r == -E2BIG)
        r = -EPROTO;
    if (r < 0) {
        x->err = r == -EPROTO ? -EPROTO : r;
        snprintf(x->why, sizeof(x->why), "%s",
                 r == -EPROTO ? "sent a message over the size limit" : "out of memory");
        return 0;
    }
    return n;
}

static size_t http_header_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb, vlen;
    const char *v;

    if (n > 15 && !strncasecmp(ptr, "mcp-session-id:", 15)) {
        v = ptr + 15;
        vlen = n - 15;
        while (vlen && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        while (vlen && is_space(v[vlen - 1]))
            vlen--;
        x->got_session = vlen > 0 && vlen <= HUTCH_UPSTREAM_MAX_SESSION_ID;
        for (size_t i = 0; i < vlen && x->got_session; i++)
            if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
                x->got_session = false;
        if (x->got_session) {
            memcpy(x->session, v, vlen);
            x->session[vlen] = '\0';
        }
    }
    return n;
}

void up_hconn_free(struct hconn *c)
{
    if (c->m)
        curl_multi_cleanup(c->m);
    if (c->h)
        curl_easy_cleanup(c->h);
    c->h = NULL;
    c->m = NULL;
}

/* 0, or -ENOMEM. */
static int pool_get(struct server *s, struct xfer *x)
{
    struct hconn c = {0};

    pthread_mutex_lock(&s->lock);
    if (s->npool)
        c = s->pool[--s->npool];
    pthread_mutex_unlock(&s->lock);
    if (c.h) {
        curl_easy_reset(c.h);
    } else {
        c.h = curl_easy_init();
        c.m = curl_multi_init();
        if (!c.h || !c.m) {
            up_hconn_free(&c);
            return -ENOMEM;
        }
    }
    x->h = c.h;
    x->m = c.m;
    return 0;
}

static void pool_put(struct server *s, struct xfer *x)
{
    struct hconn c = {.h = x->h, .m = x->m};

    if (!c.h)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->npool < HUTCH_UPSTREAM_HTTP_POOL) {
        s->pool[s->npool++] = c;
        c = (struct hconn){0};
    }
    pthread_mutex_unlock(&s->lock);
    up_hconn_free(&c);
    x->h = NULL;
    x->m = NULL;
}

/* Run the transfer.  Our own loop rather than curl_easy_perform: a stream
 * left open after our response is cut off HUTCH_UPSTREAM_SSE_LINGER_MS later (servers
 * SHOULD close it; those that do keep the connection reusable), and
 * hutch stopping is noticed within HUTCH_UPSTREAM_POLL_MS. */
static CURLcode http_perform(struct xfer *x)
{
    CURLcode rc = CURLE_OK;
    int running = 1, left;
    CURLMsg *msg;

    if (curl_multi_add_handle(x->m, x->h) != CURLM_OK)
        return CURLE_FAILED_INIT;
    for (;;) {
        int wait = HUTCH_UPSTREAM_POLL_MS;
        if (curl_multi_perform(x->m, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        if (!running)
            break;
        if (x->done) {
            uint64_t since = hutch_now_ms() - x->done_at;
            if (since >= HUTCH_UPSTREAM_SSE_LINGER_MS)
                break;
            wait = (int)(HUTCH_UPSTREAM_SSE_LINGER_MS - since);
        }
        if (x->stop_aborts && stopping(x->s->u)) {
            rc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        if (curl_multi_poll(x->m, NULL, 0, wait, NULL) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
    }
    while (!running && (msg = curl_multi_info_read(x->m, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == x->h)
            rc = msg->data.result;
    curl_multi_remove_handle(x->m, x->h);
    return rc;
}

/* A header value that may be sent as it is: visible ASCII and inner
 * spaces, no more than a line's worth. */
static bool header_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (!n || n > 1024 || v[0] == ' ' || v[n - 1] == ' ')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return false;
    return true;
}

/* The headers of one POST: the 2025 era's session and negotiated version,
 * or the 2026 era's MCP-Protocol-Version, Mcp-Method, Mcp-Name and a
 * tools/call's Mcp-Param-* (p NULL: a DELETE, or with last_id the GET that
 * resumes an event stream, no method). */
static struct curl_slist *http_headers(struct server *s, const struct post *p,
                                       bool with_session, const char *last_id,
                                       bool *sent)
{
    struct curl_slist *l = NULL, *t;
    char line[HUTCH_UPSTREAM_MAX_SESSION_ID + 1100];

    *sent = false;
#define ADD(str)                                                                       \
    do {                                                                               \
        if (!(t = curl_slist_append(l, (str))))                                        \
            goto fail;                                                                 \
        l = t;                                                                         \
    } while (0)
    if (last_id) {
        ADD("Accept: text/event-stream");
        snprintf(line, sizeof(line), "Last-Event-ID: %s", last_id);
        ADD(line);
    } else {
        ADD("Content-Type: application/json");
        ADD("Accept: application/json, text/event-stream");
    }
    for (char **h = s->cfg.headers; *h; h++) {
        /* Ours alone say what a tools/call's arguments are. */
        if (p && p->params && !strncasecmp(*h, "Mcp-Param-", 10))
            continue;
        ADD(*h);
    }
    if (era_of(s) != ERA_LEGACY) {
        ADD("MCP-Protocol-Version: " MODERN_VERSION);
        if (p && p->method) {
            snprintf(line, sizeof(line), "Mcp-Method: %s", p->method);
            ADD(line);
        }
        if (p && p->name && header_value_ok(p->name)) {
            snprintf(line, sizeof(line), "Mcp-Name: %s", p->name);
            ADD(line);
        }
        for (char *const *h = p ? p->params : NULL; h && *h; h++)
            ADD(*h);
    } else if (with_session) {
        pthread_mutex_lock(&s->lock);
        line[0] = '\0';
        if (s->session) {
            snprintf(line, sizeof(line), "Mcp-Session-Id: %s", s->session);
            *sent = true;
        }
        t = line[0] ? curl_slist_append(l, line) : l;
        if (t && s->proto[0]) {
            snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", s->proto);
            t = curl_slist_append(t, line);
        }
        pthread_mutex_unlock(&s->lock);
        if (!t)
            goto fail;
        l = t;
    }
#undef ADD
    return l;
fail:
    curl_slist_free_all(l);
    return NULL;
}

static void http_setup(struct server *s, CURL *h, struct xfer *x, unsigned ms)
{
    curl_easy_setopt(h, CURLOPT_URL, s->cfg.url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(ms ? ms : 1));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(ms && ms < 10000 ? ms : 10000));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_USERAGENT, "hutch/" PACKAGE_VERSION);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, http_write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, http_header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
}

/* Whether a response stream that ended without our response may be
 * resumed: a 2xx event stream that gave an event id, ended by the server
 * (cleanly or with a broken connection; not our timeout). */
static bool stream_resumable(const struct xfer *x, CURLcode rc, long status)
{
    return x->want_id && !x->done && !x->err && x->mode == 2 && status >= 200 &&
           status < 300 &&
           (rc == CURLE_OK || rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR) &&
           x->last_id[0] && !x->id_bad;
}

/* Sleep ms, or less when hutch stops: 0, or -ECANCELED. */
static int resume_wait(struct server *s, const struct xfer *x, unsigned ms)
{
    for (uint64_t until = hutch_now_ms() + ms, now; (now = hutch_now_ms()) < until;) {
        if (x->stop_aborts && stopping(s->u))
            return -ECANCELED;
        hutch_sleep_ms(until - now < HUTCH_UPSTREAM_POLL_MS ? (unsigned)(until - now)
                                                            : HUTCH_UPSTREAM_POLL_MS);
    }
    return 0;
}

/* The 2025 era's resumption (2025-11-25 transports, "Resumability and
 * Redelivery", SEP-1699): the server closed a POST's event stream before
 * our response, after an event id.  Wait its "retry:" delay, GET the
 * endpoint with Last-Event-ID and the session, and read on there; again
 * when that stream closes too, HUTCH_UPSTREAM_MAX_RESUMES times at most
 * and never past the call's deadline.  0 with x->done, or negative.  The
 * 2026-07-28 revision has no resumption (a closed stream is cancellation),
 * so only a 2025-era server gets here. */
static int http_resume(struct server *s, struct xfer *x, uint64_t deadline,
                       struct hutch_err *err)
{
    for (int n = 1;; n++) {
        unsigned wait =
            x->retry_ms < 0 ? HUTCH_UPSTREAM_RETRY_MS : (unsigned)x->retry_ms;
        struct curl_slist *hl;
        char *ct = NULL;
        bool sent = false, sse;
        long status = 0;
        CURLcode rc;

        if (n > HUTCH_UPSTREAM_MAX_RESUMES)
            return hutch_err_set(err, -EPROTO,
                                 "upstream %s closed its event stream %d times without "
                                 "answering",
                                 s->name, HUTCH_UPSTREAM_MAX_RESUMES);
        if (ms_left(deadline) <= wait)
            return hutch_err_set(err, -ETIMEDOUT,
                                 "upstream %s did not answer in time (its event stream "
                                 "closed, and it asked for %u ms before resuming)",
                                 s->name, wait);
        if (resume_wait(s, x, wait) < 0)
            return hutch_err_set(err, -ECANCELED, "hutch is stopping");
        hutch_log(HUTCH_LOG_DEBUG, s->who,
                  "resuming its closed event stream after event %s (%u ms later)",
                  x->last_id, wait);
        hl = http_headers(s, NULL, true, x->last_id, &sent);
        if (!hl)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        curl_easy_reset(x->h);
        http_setup(s, x->h, x, ms_left(deadline));
        curl_easy_setopt(x->h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, hl);
        x->mode = 0;
        x->cr = false;
        x->event[0] = '\0';
        hutch_buf_reset(&x->line);
        hutch_buf_reset(&x->data);
        rc = http_perform(x);
        curl_slist_free_all(hl);
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
        sse = ct && !strncasecmp(ct, "text/event-stream", 17);
        if (!x->done && rc == CURLE_OK && x->mode == 2)
            sse_feed(x, "\n\n", 2);
        if (x->done)
            return 0;
        if (rc == CURLE_ABORTED_BY_CALLBACK)
            return hutch_err_set(err, -ECANCELED, "hutch is stopping");
        if (x->err)
            return hutch_err_set(err, x->err, "upstream %s %s", s->name, x->why);
        if (rc == CURLE_OPERATION_TIMEDOUT)
            return hutch_err_set(err, -ETIMEDOUT, "upstream %s did not answer in time",
                                 s->name);
        if (status == 404 && sent)
            return hutch_err_set(err, -ECONNRESET,
                                 "upstream %s forgot our session while hutch resumed "
                                 "its event stream",
                                 s->name);
        if (status && (status < 200 || status >= 300 || !sse))
            return hutch_err_set(
                err, -EPROTO,
                "upstream %s answered the resumption of its event stream "
                "(GET with Last-Event-ID) with HTTP %ld%s",
                s->name, status, sse ? "" : ", not an event stream");
        if (rc != CURLE_OK && rc != CURLE_PARTIAL_FILE && rc != CURLE_RECV_ERROR)
            return hutch_err_set(
                err, rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -ECONNRESET,
                "upstream %s at %s, resuming its event stream: %s", s->name, s->cfg.url,
                curl_easy_strerror(rc));
        if (!x->last_id[0] || x->id_bad)
            return hutch_err_set(
                err, -EPROTO,
                "upstream %s closed its resumed event stream before the "
                "response, with no event id to resume from",
                s->name);
    }
}

/* POST one JSON-RPC message.  want_id > 0: return the response with that
 * id in *reply.  -ESTALE: the server forgot our session (HTTP 404). */
static int http_post(struct server *s, const struct post *p, int64_t want_id,
                     unsigned ms, bool initialize, int depth, cJSON **reply,
                     char *session_out, struct hutch_err *err)
{
    struct xfer x = {
        .s = s, .want_id = want_id, .depth = depth, .stop_aborts = true, XFER_INIT};
    uint64_t deadline = hutch_now_ms() + ms;
    struct curl_slist *hl = NULL;
    bool sent_session = false;
    long status = 0;
    CURLcode rc;
    int r = 0;

    hl = pool_get(s, &x) == 0 ? http_headers(s, p, !initialize, NULL, &sent_session)
                              : NULL;
    if (!hl) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    http_setup(s, x.h, &x, ms);
    curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, p->body);
    curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(p->body));
    rc = http_perform(&x);
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &status);
    if (!x.done && rc == CURLE_OK && x.mode == 2) {
        sse_feed(&x, "\n\n", 2); /* an event without its blank line */
    }
    if (stream_resumable(&x, rc, status) && era_of(s) == ERA_LEGACY) {
        r = http_resume(s, &x, deadline, err);
        if (r < 0)
            goto out;
    }
    if (x.done) {
        r = 0;
    } else if (rc == CURLE_ABORTED_BY_CALLBACK) {
        r = hutch_err_set(err, -ECANCELED, "hutch is stopping");
    } else if (x.err) {
        r = hutch_err_set(err, x.err, "upstream %s %s", s->name, x.why);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        r = hutch_err_set(err, -ETIMEDOUT, "upstream %s did not answer within %u ms",
                          s->name, ms);
    } else if (rc != CURLE_OK) {
        r = hutch_err_set(
            err, rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -ECONNRESET,
            "upstream %s at %s: %s", s->name, s->cfg.url, curl_easy_strerror(rc));
    } else if (status == 404 && sent_session) {
        r = hutch_err_set(err, -ESTALE, "upstream %s forgot our session", s->name);
    } else if (status >= 200 && status < 300) {
        if (x.mode != 2 && want_id)
            http_payload(&x, hutch_buf_str(&x.body), x.body.len);
        if (want_id && !x.done && x.mode == 2)
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s closed its event stream before the response%s", s->name,
                era_of(s) != ERA_LEGACY
                    ? " (2026-07-28 has no resumption: the request is lost)"
                : !x.last_id[0] || x.id_bad ? " and gave no event id to resume from"
                                            : "");
        else if (want_id && !x.done)
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s answered with HTTP %ld but no JSON-RPC response", s->name,
                status);
    } else {
        char shown[SNIPPET] = "";
        cJSON *msg = NULL;
        const cJSON *e, *em;
        int64_t rid;
        if (x.mode != 2 && x.body.data &&
            hutch_json_text_cost(x.body.data, x.body.len) <= HUTCH_JSON_MAX_TREE)
            msg = cJSON_ParseWithLength(x.body.data, x.body.len);
        e = get(msg, "error");
        em = get(e, "message");
        if (p && p->error_is_reply && reply && e && status >= 400 && status < 500 &&
            status != 401 && status != 403 && up_rpc_id(get(msg, "id"), &rid) &&
            rid == want_id) {
            *reply = msg; /* the JSON-RPC error is the answer */
            msg = NULL;
            r = 0;
            goto out;
        }
        if (cJSON_IsString(em))
            up_clean_text(shown, sizeof(shown), em->valuestring,
                          strlen(em->valuestring));
        else if (x.mode != 2 && x.body.data)
            up_clean_text(shown, sizeof(shown), x.body.data, x.body.len);
        cJSON_Delete(msg);
        /* -EBADRQC: the server refused the request itself (a 2025-era
         * server asked server/discover; upstream.c's probe_era). */
        r = hutch_err_set(err,
                          status == 401 || status == 403  ? -EACCES
                          : status >= 400 && status < 500 ? -EBADRQC
                                                          : -EREMOTEIO,
                          "upstream %s answered with HTTP %ld%s%s%s", s->name, status,
                          shown[0] ? ": " : "", shown,
                          status == 401 || status == 403 ? " (check its \"headers\")"
                                                         : "");
    }
    if (r == 0 && x.done && reply) {
        *reply = x.reply;
        x.reply = NULL;
    }
    if (r == 0 && initialize && session_out)
        snprintf(session_out, HUTCH_UPSTREAM_MAX_SESSION_ID + 1, "%s",
                 x.got_session ? x.session : "");
out:
    curl_slist_free_all(hl);
    pool_put(s, &x);
    cJSON_Delete(x.reply);
    xfer_free_bufs(&x);
    return r;
}

/* http_post's parsing without curl (upstream_parse.h): depth 1, so a
 * request in the body is answered by nobody. */
int hutch_upstream_parse_http(const char *body, size_t len, int sse, size_t chunk,
                              int64_t want_id, cJSON **reply)
{
    struct server s = {.cfg.tr = TR_HTTP, .name = "fuzz", .who = "upstream fuzz"};
    struct xfer x = {
        .s = &s, .want_id = want_id, .depth = 1, .mode = sse ? 2 : 1, XFER_INIT};
    int r = 0;

    *reply = NULL;
    pthread_mutex_init(&s.lock, NULL);
    hutch_cond_init_mono(&s.cond);
    for (size_t off = 0, n; off < len && !r; off += n) {
        n = chunk && chunk < len - off ? chunk : len - off;
        if (http_write_cb((char *)body + off, 1, n, &x) != n)
            r = x.err ? x.err : -EPROTO;
    }
    if (!r && !x.done && x.mode == 2)
        sse_feed(&x, "\n\n", 2);
    if (!r && x.mode != 2 && want_id)
        http_payload(&x, hutch_buf_str(&x.body), x.body.len);
    if (!r && want_id && !x.done)
        r = -EPROTO;
    if (!r && x.done)
        *reply = hutch_steal(&x.reply);
    cJSON_Delete(x.reply);
    xfer_free_bufs(&x);
    pthread_cond_destroy(&s.cond);
    pthread_mutex_destroy(&s.lock);
    return r;
}

int hutch_upstream_parse_sse_cursor(const char *body, size_t len, char *id,
                                    size_t id_cap, long *retry_ms)
{
    struct server s = {.cfg.tr = TR_HTTP, .name = "fuzz", .who = "upstream fuzz"};
    struct xfer x = {.s = &s, .depth = 1, .mode = 2, XFER_INIT};
    int r;

    pthread_mutex_init(&s.lock, NULL);
    hutch_cond_init_mono(&s.cond);
    r = sse_feed(&x, body, len);
    if (id_cap)
        snprintf(id, id_cap, "%s", x.id_bad ? "" : x.last_id);
    *retry_ms = x.retry_ms;
    xfer_free_bufs(&x);
    pthread_cond_destroy(&s.cond);
    pthread_mutex_destroy(&s.lock);
    return r == -E2BIG ? -EPROTO : r;
}

int up_http_request(struct server *s, const char *method, const cJSON *params,
                    uint64_t deadline, unsigned budget, const char *what,
                    bool may_reinit, cJSON **reply, struct hutch_err *err)
{
    bool initialize = !strcmp(method, "initialize");
    char session[HUTCH_UPSTREAM_MAX_SESSION_ID + 1];
    char **xparams = NULL;
    uint64_t gen;
    int r, attempt = 0;

    if (era_of(s) == ERA_MODERN && !strcmp(method, "tools/call")) {
        r = up_xheader_call(s, params, &xparams, err);
        if (r < 0)
            return r;
    }
again:
    pthread_mutex_lock(&s->lock);
    int64_t id = ++s->next_id;
    gen = s->session_gen;
    pthread_mutex_unlock(&s->lock);
    {
        cJSON *m = up_request_msg(s, id, method, params);
        char *text = m ? cJSON_PrintUnformatted(m) : NULL;
        struct post p = {text, method, up_request_name(method, params), xparams,
                         !strcmp(method, "server/discover")};
        size_t charged = 0;
        cJSON_Delete(m);
        if (!text) {
            up_strv_free(xparams);
            return hutch_err_set(err, -ENOMEM, "out of memory");
        }
        if ((r = up_charge_text(s, what, text, &charged, err)) < 0) {
            free(text);
            up_strv_free(xparams);
            return r;
        }
        r = http_post(s, &p, id, ms_left(deadline), initialize, 0, reply, session, err);
        free(text);
        hutch_budget_give(hutch_budget_current(), charged);
    }
    /* Only the 2025 era calls again (-ESTALE); it has no Mcp-Param-*. */
    up_strv_free(xparams);
    xparams = NULL;
    if (r == -ETIMEDOUT) {
        /* In the 2026 era the closed stream is the cancellation. */
        if (!initialize && era_of(s) == ERA_LEGACY) {
            cJSON *cm = up_rpc_new(0, "notifications/cancelled", NULL);
            cJSON *cp = cm ? cJSON_AddObjectToObject(cm, "params") : NULL;
            char *text = NULL;
            if (cp && cJSON_AddNumberToObject(cp, "requestId", (double)id) &&
                cJSON_AddStringToObject(cp, "reason", "timed out"))
                text = cJSON_PrintUnformatted(cm);
            struct post p = {text, "notifications/cancelled", NULL, NULL, false};
            if (text)
                http_post(s, &p, 0, HUTCH_UPSTREAM_NOTE_MS, false, 1, NULL, NULL, NULL);
            free(text);
            cJSON_Delete(cm);
        }
        return hutch_err_set(err, -ETIMEDOUT,
                             "upstream %s did not answer %s within %u ms", s->name,
                             what, budget);
    }
    if (r == -ESTALE && may_reinit && attempt++ == 0) {
        hutch_log(HUTCH_LOG_INFO, s->who, "session expired, initializing again");
        r = s->u->ev->http_reinit(s, gen, err);
        if (r == 0)
            goto again;
        return r;
    }
    if (r == -ESTALE)
        return hutch_err_set(err, -ECONNRESET, "upstream %s lost its session during %s",
                             s->name, what);
    if (r < 0)
        return r;
    if (initialize) {
        pthread_mutex_lock(&s->lock);
        free(s->session);
        s->session = session[0] ? strdup(session) : NULL;
        s->proto[0] = '\0';
        s->session_gen++;
        pthread_mutex_unlock(&s->lock);
    }
    return 0;
}

int up_http_notify(struct server *s, const char *method, uint64_t deadline,
                   struct hutch_err *err)
{
    cJSON *m = up_rpc_new(0, method, NULL);
    char *text = m ? cJSON_PrintUnformatted(m) : NULL;
    struct post p = {text, method, NULL, NULL, false};
    int r;

    cJSON_Delete(m);
    if (!text)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = http_post(s, &p, 0, ms_left(deadline), false, 0, NULL, NULL, err);
    free(text);
    return r;
}

/* Best effort: tell the server we are done with the session. */
void up_http_end_session(struct server *s)
{
    struct xfer x = {.s = s, XFER_INIT};
    struct curl_slist *hl = NULL;
    bool sent = false;

    if (pool_get(s, &x) < 0)
        return;
    hl = http_headers(s, NULL, true, NULL, &sent);
    if (hl && sent) {
        http_setup(s, x.h, &x, HUTCH_UPSTREAM_NOTE_MS);
        curl_easy_setopt(x.h, CURLOPT_CUSTOMREQUEST, "DELETE");
        curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hl);
        http_perform(&x);
    }
    curl_slist_free_all(hl);
    pool_put(s, &x);
    xfer_free_bufs(&x);
    cJSON_Delete(x.reply);
}

int up_http_global_init(struct hutch_err *err)
{
    int r = hutch_libcurl_load(err);
    if (r < 0)
        return r;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return hutch_err_set(err, -EIO, "cannot initialize libcurl: %s",
                             curl_easy_strerror(curl_init_rc));
    return 0;
}
