/* api.h — the Docker Engine API over libcurl (unix socket, or TCP with
 * optional TLS), as the Docker executor uses it. */
#ifndef HUTCH_DOCKER_API_H
#define HUTCH_DOCKER_API_H

#include <limits.h>
#include <stddef.h>

#include "buf.h" /* src/buf.h: reply bodies are bounded hutch_bufs */
#include "hutch-executor.h"

/* The newest API version hutch speaks, and the oldest it accepts (Docker
 * 17.12; what hutch uses exists since 1.25, older daemons are untested). */
#define DK_API_MAX "1.41"
#define DK_API_MIN "1.35"

/* Caps on what the daemon sends back. */
#define DK_MAX_REPLY (4u << 20) /* one JSON answer */
#define DK_CALL_MS   30000      /* one API call */
#define DK_PROBE_MS  2000       /* reachability checks */

struct dk_api {
    char where[PATH_MAX + 16]; /* DOCKER_HOST as given, for messages */
    char unix_path[108];       /* the socket, or "" for TCP */
    char origin[300];          /* "http://localhost" or "https://host:port" */
    int tls;
    char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
    char version[16]; /* negotiated, "" until dk_api_negotiate */
    int podman;       /* the engine is Podman's service (dk_api_negotiate) */
};

/* From DOCKER_HOST (unix:// or tcp://; default unix:///var/run/docker.sock),
 * DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.  No I/O. */
int dk_api_init(struct dk_api *api, struct hutch_err *err);

/* One endpoint of a list (HUTCH_DOCKER_ENDPOINTS, the policy's
 * executor_options.docker.endpoints): "URL" or "URL,tls=/DIR", DIR holding
 * ca.pem, cert.pem and key.pem; `len` bytes of spec.  `said` names the
 * list in messages.  No I/O. */
int dk_api_init_spec(struct dk_api *api, const char *spec, size_t len, const char *said,
                     struct hutch_err *err);

/* Cheap: can we connect to the daemon's socket at all?  (TCP: assumed.) */
int dk_api_reachable(const struct dk_api *api, struct hutch_err *err);

/* GET /version; picks min(server, DK_API_MAX), refuses below DK_API_MIN.
 * engine (may be NULL) receives the Engine's version. */
int dk_api_negotiate(struct dk_api *api, char *engine, size_t engine_len,
                     struct hutch_err *err);

/* One call.  `path` is below the version prefix ("/containers/create").
 * The status goes to *status, the body to *reply (max reply->max bytes;
 * caller frees).  A body that is not 2xx becomes err's message with the
 * daemon's own words; the return is then -EPROTO, and *status tells which.
 * `sink`, when not NULL, receives the body instead of *reply. */
int dk_call(const struct dk_api *api, const char *method, const char *path,
            const char *ctype, const void *body, size_t len, long timeout_ms,
            long *status, struct hutch_buf *reply, hutch_write_fn sink, void *sink_arg,
            struct hutch_err *err);

/* Same with a JSON body given as a string (may be NULL). */
int dk_json(const struct dk_api *api, const char *method, const char *path,
            const char *json, long *status, struct hutch_buf *reply,
            struct hutch_err *err);

/* A hijacked connection (the attach endpoint): after the answer's head,
 * the connection is a raw byte stream both ways, through curl_easy_send and
 * curl_easy_recv (plain or TLS alike); `sock` is for poll() only. */
struct dk_hijack {
    void *curl; /* CURL *: this header does not include curl.h */
    int sock;
    char extra[8192]; /* the head while reading it; after: stream bytes read past it */
    size_t extra_len;
};

/* POST `path` (below the version prefix) asking to upgrade the connection
 * to a raw stream; 0 with *h ready, or an error with the daemon's words.
 * At most DK_CALL_MS. */
int dk_api_hijack(const struct dk_api *api, const char *path, struct dk_hijack *h,
                  struct hutch_err *err);
void dk_api_hijack_close(struct dk_hijack *h);

#endif
