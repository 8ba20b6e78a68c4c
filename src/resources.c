/* resources.c — the store behind resource_link: result files an
 * execute_code result could not carry inline, kept in memory for a bounded
 * time and fetched with MCP resources/read.
 *
 * Bounded three ways (caps.h): a file of at most HUTCH_MCP_LINK_MAX_FILE
 * (its base64 must fit in one JSON-RPC message), at most
 * HUTCH_MCP_LINKS_MAX_BYTES and HUTCH_MCP_LINKS_MAX_COUNT files per process
 * (the oldest are dropped to make room for new ones: a link is a lease,
 * not a promise), and an expiry of HUTCH_MCP_LINK_TTL_MS after the result.
 * Each file belongs to the principal whose execution wrote it; the uri
 * holds 128 random bits, and another principal's uri reads as unknown.
 *
 * Not here: deciding which file goes inline and which gets a link
 * (result_files.c), JSON-RPC framing (mcp_server.c).
 *
 * Thread rules: one mutex guards the list; every function may be called
 * from any thread (execute_code's workers put, the session reads). */
#include "resources.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "wire.h"

struct res_file {
    struct res_file *next; /* newer first */
    char *uri, *principal, *name, *mime;
    unsigned char *data;
    size_t size;
    uint64_t expires_ms; /* monotonic */
};

struct hutch_resources {
    pthread_mutex_t mu;
    struct res_file *head; /* newest first */
    size_t bytes, count;
    unsigned ttl_ms;
};

static void file_free(struct res_file *f)
{
    if (!f)
        return;
    free(f->uri);
    free(f->principal);
    free(f->name);
    free(f->mime);
    free(f->data);
    free(f);
}

int hutch_resources_new(unsigned ttl_ms, struct hutch_resources **out,
                        struct hutch_err *err)
{
    struct hutch_resources *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&rs->mu, NULL);
    rs->ttl_ms = ttl_ms ? ttl_ms : HUTCH_MCP_LINK_TTL_MS;
    *out = rs;
    return 0;
}

void hutch_resources_free(struct hutch_resources *rs)
{
    if (!rs)
        return;
    while (rs->head) {
        struct res_file *f = rs->head;
        rs->head = f->next;
        file_free(f);
    }
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

unsigned hutch_resources_ttl_ms(const struct hutch_resources *rs)
{
    return rs->ttl_ms;
}

int hutch_resources_ttl_from_env(unsigned *ttl_ms, struct hutch_err *err)
{
    const char *env = getenv("HUTCH_RESOURCE_TTL_MS");
    uint64_t v;

    *ttl_ms = HUTCH_MCP_LINK_TTL_MS;
    if (!env || !*env)
        return 0;
    if (hutch_parse_u64(env, HUTCH_MCP_LINK_MIN_TTL_MS, HUTCH_MCP_LINK_TTL_MS, &v) < 0)
        return hutch_err_set(
            err, -EINVAL, "HUTCH_RESOURCE_TTL_MS=%s: want milliseconds from %u to %u",
            env, HUTCH_MCP_LINK_MIN_TTL_MS, HUTCH_MCP_LINK_TTL_MS);
    *ttl_ms = (unsigned)v;
    return 0;
}

/* Drops expired files, then the oldest until `need` more bytes and one
 * more file fit.  Called with the mutex held. */
static void make_room(struct hutch_resources *rs, size_t need)
{
    uint64_t now = hutch_now_ms();
    struct res_file **pp = &rs->head;

    while (*pp) {
        struct res_file *f = *pp;
        if (f->expires_ms <= now) {
            *pp = f->next;
            rs->bytes -= f->size;
            rs->count--;
            file_free(f);
        } else {
            pp = &f->next;
        }
    }
    while (rs->head && (rs->bytes + need > HUTCH_MCP_LINKS_MAX_BYTES ||
                        rs->count + 1 > HUTCH_MCP_LINKS_MAX_COUNT)) {
        /* The list is newest first: the oldest is the last. */
        pp = &rs->head;
        while ((*pp)->next)
            pp = &(*pp)->next;
        rs->bytes -= (*pp)->size;
        rs->count--;
        file_free(*pp);
        *pp = NULL;
    }
}

/* RFC 3986 unreserved characters and '/' stay, everything else is
 * percent-encoded, so any path the tar judge accepted makes a valid uri. */
static int uri_path(char *out, size_t len, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
            if (o + 1 >= len)
                return -1;
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= len)
                return -1;
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

int hutch_resources_put(struct hutch_resources *rs, const char *principal,
                        const char *path, const char *mime, const void *data,
                        size_t size, char *uri, size_t urilen, time_t *expires,
                        struct hutch_err *err)
{
    struct res_file *f;
    char a[17], b[17], enc[HUTCH_TAR_MAX_PATH * 3 + 1];

    if (size > HUTCH_MCP_LINK_MAX_FILE)
        return hutch_err_set(err, -EFBIG, "over the %u MiB a link can carry",
                             HUTCH_MCP_LINK_MAX_FILE >> 20);
    if (uri_path(enc, sizeof(enc), path) < 0)
        return hutch_err_set(err, -ENAMETOOLONG, "its path is too long for a uri");
    hutch_random_id(a);
    hutch_random_id(b);
    f = calloc(1, sizeof(*f));
    if (f) {
        size_t n = strlen(enc) + 64;
        f->uri = malloc(n);
        if (f->uri)
            snprintf(f->uri, n, "hutch://files/%s%s/%s", a, b, enc);
        f->principal = strdup(principal ? principal : "");
        f->name = strdup(path);
        f->mime = strdup(mime);
        f->data = malloc(size ? size : 1);
    }
    if (!f || !f->uri || !f->principal || !f->name || !f->mime || !f->data) {
        file_free(f);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    if (snprintf(uri, urilen, "%s", f->uri) >= (int)urilen) {
        file_free(f);
        return hutch_err_set(err, -ENAMETOOLONG, "its path is too long for a uri");
    }
    memcpy(f->data, data, size);
    f->size = size;
    f->expires_ms = hutch_now_ms() + rs->ttl_ms;
    *expires = time(NULL) + (time_t)((rs->ttl_ms + 999) / 1000);
    pthread_mutex_lock(&rs->mu);
    make_room(rs, size);
    f->next = rs->head;
    rs->head = f;
    rs->bytes += size;
    rs->count++;
    pthread_mutex_unlock(&rs->mu);
    return 0;
}

/* The live file of `principal` named `uri`, with the mutex held. */
static struct res_file *find(struct hutch_resources *rs, const char *principal,
                             const char *uri)
{
    uint64_t now = hutch_now_ms();
    for (struct res_file *f = rs->head; f; f = f->next)
        if (f->expires_ms > now && strcmp(f->uri, uri) == 0 &&
            strcmp(f->principal, principal ? principal : "") == 0)
            return f;
    return NULL;
}

cJSON *hutch_resources_read(struct hutch_resources *rs, const char *principal,
                            const char *uri, struct hutch_err *err)
{
    cJSON *r = NULL, *c;
    char *b64 = NULL, *text = NULL;
    struct res_file *f;
    int is_text;

    pthread_mutex_lock(&rs->mu);
    f = find(rs, principal, uri);
    if (!f) {
        pthread_mutex_unlock(&rs->mu);
        hutch_err_set(err, -ENOENT,
                      "Resource not found: %.200s is unknown or expired (files of a "
                      "result stay fetchable for %u s, while hutch has room for them); "
                      "run the code again to get the file anew",
                      uri, rs->ttl_ms / 1000);
        return NULL;
    }
    /* Copied out under the lock: a concurrent put may drop the file. */
    is_text = memchr(f->data, '\0', f->size) == NULL &&
              hutch_utf8_valid((const char *)f->data, f->size);
    if (is_text) {
        text = malloc(f->size + 1);
        if (text) {
            memcpy(text, f->data, f->size);
            text[f->size] = '\0';
        }
    } else {
        b64 = hutch_base64_encode(f->data, f->size);
    }
    r = cJSON_CreateObject();
    c = cJSON_CreateObject();
    if (r && c) {
        cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "contents"), c);
        cJSON_AddStringToObject(c, "uri", f->uri);
        cJSON_AddStringToObject(c, "mimeType", f->mime);
        if (text || b64)
            cJSON_AddStringToObject(c, text ? "text" : "blob", text ? text : b64);
    } else {
        cJSON_Delete(c);
    }
    pthread_mutex_unlock(&rs->mu);
    if (!r || !c || (!text && !b64) ||
        !cJSON_GetObjectItem(c, text ? "text" : "blob")) {
        cJSON_Delete(r);
        r = NULL;
        hutch_err_set(err, -ENOMEM, "out of memory reading %.200s", uri);
    }
    free(text);
    free(b64);
    return r;
}

cJSON *hutch_resources_list(struct hutch_resources *rs, const char *principal)
{
    cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "resources");
    uint64_t now = hutch_now_ms();

    pthread_mutex_lock(&rs->mu);
    for (struct res_file *f = rs->head; a && f; f = f->next) {
        cJSON *o;
        if (f->expires_ms <= now || strcmp(f->principal, principal ? principal : ""))
            continue;
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "uri", f->uri);
        cJSON_AddStringToObject(o, "name", f->name);
        cJSON_AddStringToObject(o, "mimeType", f->mime);
        cJSON_AddNumberToObject(o, "size", (double)f->size);
        cJSON_AddItemToArray(a, o);
    }
    pthread_mutex_unlock(&rs->mu);
    return r;
}
