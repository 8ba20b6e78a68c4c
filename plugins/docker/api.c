/* api.c — Docker Engine API calls over libcurl (see api.h).  libcurl is
 * loaded on first use, as in the core: every `hutch run` loads every
 * plugin, and only the Docker executor's calls need it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "curl_lib.h"

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

int dk_api_init(struct dk_api *api, struct hutch_err *err)
{
    const char *h = env_or("DOCKER_HOST", "unix:///var/run/docker.sock");

    memset(api, 0, sizeof(*api));
    snprintf(api->where, sizeof(api->where), "%s", h);
    if (strncmp(h, "unix://", 7) == 0) {
        if (strlen(h + 7) >= sizeof(api->unix_path) || !h[7])
            return hutch_err_set(err, -EINVAL,
                                 "DOCKER_HOST=%s: the socket path is empty or too long",
                                 h);
        memcpy(api->unix_path, h + 7, strlen(h + 7) + 1);
        snprintf(api->origin, sizeof(api->origin), "http://localhost");
        return 0;
    }
    if (strncmp(h, "tcp://", 6) == 0) {
        const char *hostport = h + 6, *certs;
        size_t n = strcspn(hostport, "/");
        const char *home = env_or("HOME", "/root");
        char dflt[PATH_MAX];
        if (n == 0 || n > 255)
            return hutch_err_set(err, -EINVAL, "DOCKER_HOST=%s: no host:port", h);
        api->tls = getenv("DOCKER_TLS_VERIFY") && *getenv("DOCKER_TLS_VERIFY");
        snprintf(api->origin, sizeof(api->origin), "%s://%.*s",
                 api->tls ? "https" : "http", (int)n, hostport);
        snprintf(dflt, sizeof(dflt), "%s/.docker", home);
        certs = env_or("DOCKER_CERT_PATH", dflt);
        snprintf(api->ca, sizeof(api->ca), "%s/ca.pem", certs);
        snprintf(api->cert, sizeof(api->cert), "%s/cert.pem", certs);
        snprintf(api->key, sizeof(api->key), "%s/key.pem", certs);
        if (api->tls)
            for (const char *f = api->ca; f; f = f == api->ca     ? api->cert
                                                 : f == api->cert ? api->key
                                                                  : NULL)
                if (access(f, R_OK) < 0)
                    return hutch_err_set(err, -errno,
                                         "DOCKER_TLS_VERIFY is set but %s cannot be "
                                         "read: %s (set DOCKER_CERT_PATH to the "
                                         "directory holding ca.pem, cert.pem, key.pem)",
                                         f, strerror(errno));
        return 0;
    }
    return hutch_err_set(err, -EINVAL,
                         "DOCKER_HOST=%s: only unix:// and tcp:// are supported", h);
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
    int r;

    r = hutch_libcurl_load(err);
    if (r < 0)
        return r;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return hutch_err_set(err, -EIO, "curl_global_init failed");
    if (!reply)
        reply = &local;
    s = (struct sink){sink_fn ? sink_fn : hutch_buf_write, sink_fn ? sink_arg : reply,
                      0};
    if (api->version[0])
        snprintf(url, sizeof(url), "%s/v%s%s", api->origin, api->version, path);
    else
        snprintf(url, sizeof(url), "%s%s", api->origin, path);
    c = curl_easy_init();
    if (!c)
        return hutch_err_set(err, -ENOMEM, "curl_easy_init failed");
    if (api->unix_path[0])
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, api->unix_path);
    if (api->tls) {
        curl_easy_setopt(c, CURLOPT_CAINFO, api->ca);
        curl_easy_setopt(c, CURLOPT_SSLCERT, api->cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, api->key);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)DK_PROBE_MS);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
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
        snprintf(api->version, sizeof(api->version), "%s",
                 vnum(sv) < vnum(DK_API_MAX) ? sv : DK_API_MAX);
        if (engine)
            snprintf(engine, engine_len, "%s", ev ? ev : "?");
    }
    cJSON_Delete(j);
out:
    hutch_buf_free(&b);
    return r;
}
