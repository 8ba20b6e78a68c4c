/* api.c — Docker Engine API calls over libcurl (see api.h).  libcurl is
 * loaded on first use, as in the core: every `hutch run` loads every
 * plugin, and only the Docker executor's calls need it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "box.h"
#include "curl_lib.h"

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* One endpoint: URL (unix:// or tcp://), and for TLS the directory of
 * ca.pem, cert.pem and key.pem (NULL: plain).  `said` names where the URL
 * came from, `certs_said` where the directory did, for messages. */
static int init_url(struct dk_api *api, const char *url, size_t url_len,
                    const char *certs, const char *certs_said, const char *said,
                    struct hutch_err *err)
{
    memset(api, 0, sizeof(*api));
    snprintf(api->where, sizeof(api->where), "%.*s", (int)url_len, url);
    if (url_len > 7 && strncmp(url, "unix://", 7) == 0) {
        if (url_len - 7 >= sizeof(api->unix_path))
            return hutch_err_set(err, -EINVAL, "%s %s: the socket path is too long",
                                 said, api->where);
        memcpy(api->unix_path, url + 7, url_len - 7);
        api->unix_path[url_len - 7] = '\0';
        snprintf(api->origin, sizeof(api->origin), "http://localhost");
        return 0;
    }
    if (url_len > 6 && strncmp(url, "tcp://", 6) == 0) {
        const char *hostport = url + 6;
        size_t n = strcspn(hostport, "/");
        if (n > url_len - 6)
            n = url_len - 6;
        if (n == 0 || n > 255)
            return hutch_err_set(err, -EINVAL, "%s %s: no host:port", said, api->where);
        api->tls = certs != NULL;
        snprintf(api->origin, sizeof(api->origin), "%s://%.*s",
                 api->tls ? "https" : "http", (int)n, hostport);
        if (!certs)
            return 0;
        snprintf(api->ca, sizeof(api->ca), "%s/ca.pem", certs);
        snprintf(api->cert, sizeof(api->cert), "%s/cert.pem", certs);
        snprintf(api->key, sizeof(api->key), "%s/key.pem", certs);
        for (const char *f = api->ca; f; f = f == api->ca     ? api->cert
                                             : f == api->cert ? api->key
                                                              : NULL)
            if (access(f, R_OK) < 0)
                return hutch_err_set(
                    err, -errno,
                    "%s %s: TLS is asked for but %s cannot be read: %s "
                    "(%s must name the directory holding ca.pem, cert.pem, key.pem)",
                    said, api->where, f, strerror(errno), certs_said);
        return 0;
    }
    return hutch_err_set(err, -EINVAL, "%s %s: only unix:// and tcp:// are supported",
                         said, api->where);
}

int dk_api_init(struct dk_api *api, struct hutch_err *err)
{
    const char *h = env_or("DOCKER_HOST", "unix:///var/run/docker.sock");
    const char *certs = NULL;
    char dflt[PATH_MAX];

    if (getenv("DOCKER_TLS_VERIFY") && *getenv("DOCKER_TLS_VERIFY")) {
        snprintf(dflt, sizeof(dflt), "%s/.docker", env_or("HOME", "/root"));
        certs = env_or("DOCKER_CERT_PATH", dflt);
    }
    return init_url(api, h, strlen(h), certs,
                    getenv("DOCKER_CERT_PATH") && *getenv("DOCKER_CERT_PATH")
                        ? "DOCKER_CERT_PATH"
                        : "DOCKER_CERT_PATH (unset: ~/.docker)",
                    "DOCKER_HOST", err);
}

int dk_api_init_spec(struct dk_api *api, const char *spec, size_t len, const char *said,
                     struct hutch_err *err)
{
    const char *comma = memchr(spec, ',', len);
    char certs[PATH_MAX];
    size_t ulen = comma ? (size_t)(comma - spec) : len;

    if (!comma)
        return init_url(api, spec, len, NULL, NULL, said, err);
    if (len - ulen - 1 < 5 || strncmp(comma + 1, "tls=", 4) != 0 ||
        len - ulen - 5 >= sizeof(certs) || comma[5] != '/')
        return hutch_err_set(err, -EINVAL,
                             "%s %.*s: after the URL only ,tls=/DIR may follow (the "
                             "directory of ca.pem, cert.pem and key.pem)",
                             said, (int)(len > 300 ? 300 : len), spec);
    memcpy(certs, comma + 5, len - ulen - 5);
    certs[len - ulen - 5] = '\0';
    return init_url(api, spec, ulen, certs, "its tls=", said, err);
}

static int unreachable(const struct dk_api *api, const char *why, struct hutch_err *err)
{
    return hutch_err_set(err, -ECONNREFUSED,
                         "cannot reach the Docker daemon at %s: %s (is dockerd "
                         "running? start it with 'systemctl start docker' or "
                         "'dockerd &', or point DOCKER_HOST at it)",
                         api->where, why);
}

int dk_api_reachable(const struct dk_api *api, struct hutch_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, r = 0;

    if (!api->unix_path[0])
        return 0;
    memcpy(sa.sun_path, api->unix_path, strlen(api->unix_path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return hutch_err_set(err, -errno, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
        if (r == -EACCES)
            hutch_err_set(err, r,
                          "no permission to use the Docker daemon's socket %s: run "
                          "hutch as root or as a member of the 'docker' group",
                          api->unix_path);
        else
            unreachable(api, strerror(-r), err);
    }
    close(fd);
    return r;
}

struct sink {
    hutch_write_fn fn;
    void *arg;
    int err;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    int r = s->fn(s->arg, p, size * n);
    if (r < 0) {
        s->err = r;
        return 0;
    }
    return size * n;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;
static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The daemon's own words from an error body ({"message": "..."}). */
static void daemon_says(const struct hutch_buf *b, char *out, size_t len)
{
    cJSON *j = b->data ? cJSON_ParseWithLength(b->data, b->len) : NULL;
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
    size_t n;
    if (m) {
        snprintf(out, len, "%s", m);
    } else {
        n = b->len < len - 1 ? b->len : len - 1;
        memcpy(out, b->data ? b->data : "", n);
        out[n] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
    }
    cJSON_Delete(j);
}

/* One configured handle: the daemon's socket or its TLS material. */
static CURL *handle(const struct dk_api *api, struct hutch_err *err)
{
    CURL *c;
    int r = hutch_libcurl_load(err);
    if (r < 0)
        return NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        hutch_err_set(err, -EIO, "curl_global_init failed");
        return NULL;
    }
    c = curl_easy_init();
    if (!c) {
        hutch_err_set(err, -ENOMEM, "curl_easy_init failed");
        return NULL;
    }
    if (api->unix_path[0])
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, api->unix_path);
    if (api->tls) {
        curl_easy_setopt(c, CURLOPT_CAINFO, api->ca);
        curl_easy_setopt(c, CURLOPT_SSLCERT, api->cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, api->key);
    }
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)DK_PROBE_MS);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    return c;
}

int dk_call(const struct dk_api *api, const char *method, const char *path,
            const char *ctype, const void *body, size_t len, long timeout_ms,
            long *status, struct hutch_buf *reply, hutch_write_fn sink_fn,
            void *sink_arg, struct hutch_err *err)
{
    struct hutch_buf local = HUTCH_BUF_INIT(DK_MAX_REPLY);
    struct curl_slist *hdrs = NULL;
    struct sink s;
    char url[1024], hdr[128];
    CURL *c = NULL;
    CURLcode cc;
    long code = 0;
    int r = 0;

    if (!reply)
        reply = &local;
    s = (struct sink){sink_fn ? sink_fn : hutch_buf_write, sink_fn ? sink_arg : reply,
                      0};
    if (api->version[0])
        snprintf(url, sizeof(url), "%s/v%s%s", api->origin, api->version, path);
    else
        snprintf(url, sizeof(url), "%s%s", api->origin, path);
    c = handle(api, err);
    if (!c)
        return err->code ? err->code : -EIO;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
        snprintf(hdr, sizeof(hdr), "Content-Type: %s",
                 ctype ? ctype : "application/json");
        hdrs = curl_slist_append(hdrs, hdr);
        /* No 100-continue round trip for uploads. */
        hdrs = curl_slist_append(hdrs, "Expect:");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    }
    cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (status)
        *status = code;
    if (s.err == -E2BIG) {
        r = hutch_err_set(err, -E2BIG, "Docker's answer to %s %s is too large", method,
                          path);
    } else if (s.err) {
        r = hutch_err_set(err, s.err, "%s %s: %s", method, path, strerror(-s.err));
    } else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) {
        r = unreachable(api, curl_easy_strerror(cc), err);
    } else if (cc != CURLE_OK) {
        r = hutch_err_set(err, cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO,
                          "Docker API %s %s failed: %s", method, path,
                          curl_easy_strerror(cc));
    } else if (code < 200 || code > 299) {
        char said[512];
        daemon_says(reply, said, sizeof(said));
        r = hutch_err_set(err, -EPROTO, "Docker refused %s %s (%ld): %s", method, path,
                          code, said[0] ? said : "no reason given");
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    hutch_buf_free(&local);
    return r;
}

int dk_json(const struct dk_api *api, const char *method, const char *path,
            const char *json, long *status, struct hutch_buf *reply,
            struct hutch_err *err)
{
    return dk_call(api, method, path, "application/json", json, json ? strlen(json) : 0,
                   DK_CALL_MS, status, reply, NULL, NULL, err);
}

/* "1.41" -> 141, for comparisons. */
static int vnum(const char *v)
{
    int a = 0, b = 0;
    if (!v || sscanf(v, "%d.%d", &a, &b) != 2)
        return -1;
    return a * 1000 + b;
}

int dk_api_negotiate(struct dk_api *api, char *engine, size_t engine_len,
                     struct hutch_err *err)
{
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    const char *sv, *ev;
    cJSON *j;
    int r;

    api->version[0] = '\0';
    r = dk_call(api, "GET", "/version", NULL, NULL, 0, DK_PROBE_MS * 2, NULL, &b, NULL,
                NULL, err);
    if (r < 0)
        goto out;
    j = cJSON_ParseWithLength(b.data, b.len);
    sv = cJSON_GetStringValue(cJSON_GetObjectItem(j, "ApiVersion"));
    ev = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Version"));
    if (vnum(sv) < 0) {
        r = hutch_err_set(err, -EPROTO, "%s did not say its API version: is it Docker?",
                          api->where);
    } else if (vnum(sv) < vnum(DK_API_MIN)) {
        r = hutch_err_set(err, -EPROTO,
                          "the Docker daemon at %s speaks API %s; hutch needs %s or "
                          "newer (Docker 17.12+)",
                          api->where, sv, DK_API_MIN);
    } else {
        cJSON *c;
        snprintf(api->version, sizeof(api->version), "%s",
                 vnum(sv) < vnum(DK_API_MAX) ? sv : DK_API_MAX);
        /* Podman's service names itself among the components. */
        api->podman = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "Components"))
        {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(c, "Name"));
            if (n && strstr(n, "Podman"))
                api->podman = 1;
        }
        if (engine)
            snprintf(engine, engine_len, "%s", ev ? ev : "?");
    }
    cJSON_Delete(j);
out:
    hutch_buf_free(&b);
    return r;
}

/* Waits until the connection's socket is ready for `events`, at most until
 * `deadline` (box_now_ms() terms); 0, or -ETIMEDOUT. */
static int wait_sock(curl_socket_t s, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {s, events, 0};
        uint64_t now = box_now_ms();
        int r;
        if (now >= deadline)
            return -ETIMEDOUT;
        r = poll(&p, 1, (int)(deadline - now));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int dk_api_hijack(const struct dk_api *api, const char *path, struct dk_hijack *h,
                  struct hutch_err *err)
{
    uint64_t deadline = box_now_ms() + DK_CALL_MS;
    char req[1024], url[400];
    size_t off = 0, len;
    long sock = -1;
    CURLcode cc;
    CURL *c;
    int r, status = 0;

    memset(h, 0, sizeof(*h));
    c = handle(api, err);
    if (!c)
        return err->code ? err->code : -EIO;
    snprintf(url, sizeof(url), "%s/", api->origin);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
    cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        r = cc == CURLE_COULDNT_CONNECT
                ? unreachable(api, curl_easy_strerror(cc), err)
                : hutch_err_set(err, -EIO,
                                "connecting to the Docker daemon "
                                "at %s: %s",
                                api->where, curl_easy_strerror(cc));
        curl_easy_cleanup(c);
        return r;
    }
    curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &sock);
    len = (size_t)snprintf(req, sizeof(req),
                           "POST /v%s%s HTTP/1.1\r\nHost: docker\r\n"
                           "Content-Type: text/plain\r\nContent-Length: 0\r\n"
                           "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
                           api->version, path);
    while (off < len) {
        size_t sent = 0;
        cc = curl_easy_send(c, req + off, len - off, &sent);
        if (cc == CURLE_AGAIN) {
            if (wait_sock((curl_socket_t)sock, POLLOUT, deadline) < 0)
                goto timeout;
            continue;
        }
        if (cc != CURLE_OK) {
            r = hutch_err_set(err, -EIO, "POST %s: %s", path, curl_easy_strerror(cc));
            goto fail;
        }
        off += sent;
    }
    /* The answer's head, then the raw stream; bytes past the head are kept
     * for the caller. */
    for (;;) {
        size_t got = 0;
        char *end;
        if (h->extra_len >= sizeof(h->extra) - 1) {
            r = hutch_err_set(err, -EPROTO,
                              "POST %s: the daemon's answer has no end of "
                              "headers",
                              path);
            goto fail;
        }
        cc = curl_easy_recv(c, h->extra + h->extra_len,
                            sizeof(h->extra) - 1 - h->extra_len, &got);
        if (cc == CURLE_AGAIN) {
            if (wait_sock((curl_socket_t)sock, POLLIN, deadline) < 0)
                goto timeout;
            continue;
        }
        if (cc != CURLE_OK || got == 0) {
            r = hutch_err_set(err, -EIO,
                              "POST %s: the daemon closed the connection%s%s", path,
                              cc != CURLE_OK ? ": " : "",
                              cc != CURLE_OK ? curl_easy_strerror(cc) : "");
            goto fail;
        }
        h->extra_len += got;
        h->extra[h->extra_len] = '\0';
        end = strstr(h->extra, "\r\n\r\n");
        if (!end)
            continue;
        if (sscanf(h->extra, "HTTP/1.%*d %d", &status) != 1 ||
            (status != 101 && status != 200)) {
            char said[300];
            snprintf(said, sizeof(said), "%.*s", (int)strcspn(h->extra, "\r\n"),
                     h->extra);
            /* An error body follows the head: the daemon's own words. */
            r = hutch_err_set(err, status == 404 ? -ENOENT : -EPROTO,
                              "Docker refused POST %s: %s%s%.*s", path, said,
                              end[4] ? ": " : "", (int)strcspn(end + 4, "\r\n"),
                              end + 4);
            goto fail;
        }
        end += 4;
        h->extra_len -= (size_t)(end - h->extra);
        memmove(h->extra, end, h->extra_len);
        break;
    }
    h->curl = c;
    h->sock = (int)sock;
    return 0;
timeout:
    r = hutch_err_set(err, -ETIMEDOUT,
                      "POST %s: no answer from the Docker daemon within %d ms", path,
                      DK_CALL_MS);
fail:
    curl_easy_cleanup(c);
    return r;
}

void dk_api_hijack_close(struct dk_hijack *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    h->curl = NULL;
    h->sock = -1;
}
