/* reqstate.c — signed requestState tokens (reqstate.h).  What lives here:
 * making and checking a token.  Not here: the questions and the parked
 * executions they name (mcp_server.c). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "plugin.h"
#include "reqstate.h"
#include "util.h"

#define MAC_LEN 32

static unsigned char key[32];
static int key_ok;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
    key_ok = getrandom(key, sizeof(key), 0) == (ssize_t)sizeof(key);
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* base64url without padding of n bytes into out; its length, or 0 when it
 * does not fit. */
static size_t b64url(const unsigned char *in, size_t n, char *out, size_t cap)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t k = n - i < 3 ? n - i : 3;
        if (k > 1)
            v |= (uint32_t)in[i + 1] << 8;
        if (k > 2)
            v |= in[i + 2];
        if (o + k + 2 > cap)
            return 0;
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        if (k > 1)
            out[o++] = tab[(v >> 6) & 63];
        if (k > 2)
            out[o++] = tab[v & 63];
    }
    out[o] = '\0';
    return o;
}

/* The inverse; the byte count, or -1 for a character outside the alphabet
 * or too much. */
static long unb64url(const char *in, size_t n, unsigned char *out, size_t cap)
{
    uint32_t v = 0;
    size_t bits = 0, o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int d = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '-'             ? 62
                : c == '_'             ? 63
                                       : -1;
        if (d < 0)
            return -1;
        v = (v << 6) | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(v >> bits);
        }
    }
    return (long)o;
}

static int mac(const char *data, size_t len, unsigned char out[MAC_LEN])
{
    unsigned int n = MAC_LEN;
    pthread_once(&key_once, key_init);
    if (!key_ok)
        return -EIO;
    return HMAC(EVP_sha256(), key, (int)sizeof(key), (const unsigned char *)data, len,
                out, &n) &&
                   n == MAC_LEN
               ? 0
               : -EIO;
}

int hutch_reqstate_make(const char *principal, const char *execution, uint64_t q,
                        unsigned ttl_ms, char *out, size_t len, struct hutch_err *err)
{
    cJSON *p = cJSON_CreateObject();
    unsigned char m[MAC_LEN];
    char *json = NULL;
    size_t o;
    int r = -ENOMEM;

    if (p && cJSON_AddNumberToObject(p, "v", 1) &&
        cJSON_AddStringToObject(p, "i", hutch_instance_id()) &&
        cJSON_AddStringToObject(p, "p", principal ? principal : "") &&
        cJSON_AddStringToObject(p, "e", execution) &&
        cJSON_AddNumberToObject(p, "q", (double)q) &&
        cJSON_AddNumberToObject(p, "x", (double)(wall_ms() + ttl_ms)))
        json = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    if (!json)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    o = b64url((const unsigned char *)json, strlen(json), out, len);
    free(json);
    if (!o || o + 2 + (MAC_LEN * 4 + 2) / 3 > len)
        return hutch_err_set(err, -ENAMETOOLONG, "a requestState does not fit");
    if ((r = mac(out, o, m)) < 0)
        return hutch_err_set(err, r, "cannot sign a requestState");
    out[o++] = '.';
    b64url(m, MAC_LEN, out + o, len - o);
    return 0;
}

int hutch_reqstate_check(const char *token, const char *principal, char *execution,
                         size_t elen, uint64_t *q, struct hutch_err *err)
{
    const char *dot = token ? strchr(token, '.') : NULL;
    unsigned char want[MAC_LEN], got[MAC_LEN + 3], json[HUTCH_REQSTATE_MAX];
    const cJSON *v, *i, *p, *e, *qq, *x;
    cJSON *j;
    long n;
    int r;

    if (!token || strlen(token) >= HUTCH_REQSTATE_MAX || !dot)
        return hutch_err_set(err, -EBADMSG, "requestState is not one of hutch's");
    if (unb64url(dot + 1, strlen(dot + 1), got, sizeof(got)) != MAC_LEN ||
        mac(token, (size_t)(dot - token), want) < 0 ||
        CRYPTO_memcmp(want, got, MAC_LEN) != 0) {
        /* A token another process signed fails here too: say which, when
         * its payload names another instance. */
        n = unb64url(token, (size_t)(dot - token), json, sizeof(json) - 1);
        j = n > 0 ? (json[n] = '\0', cJSON_ParseWithLength((char *)json, (size_t)n))
                  : NULL;
        i = cJSON_GetObjectItemCaseSensitive(j, "i");
        r = cJSON_IsString(i) && strcmp(i->valuestring, hutch_instance_id())
                ? hutch_err_set(
                      err, -EXDEV,
                      "requestState was issued by another hutch process "
                      "(%.60s, this one is %s): the question waits there; send "
                      "the answer to the same hutch (a replica or a restarted "
                      "hutch cannot take it)",
                      i->valuestring, hutch_instance_id())
                : hutch_err_set(
                      err, -EBADMSG,
                      "requestState has been altered or was not issued by hutch "
                      "(its signature does not match)");
        cJSON_Delete(j);
        return r;
    }
    n = unb64url(token, (size_t)(dot - token), json, sizeof(json) - 1);
    if (n <= 0)
        return hutch_err_set(err, -EBADMSG, "requestState is not one of hutch's");
    json[n] = '\0';
    j = cJSON_ParseWithLength((char *)json, (size_t)n);
    v = cJSON_GetObjectItemCaseSensitive(j, "v");
    i = cJSON_GetObjectItemCaseSensitive(j, "i");
    p = cJSON_GetObjectItemCaseSensitive(j, "p");
    e = cJSON_GetObjectItemCaseSensitive(j, "e");
    qq = cJSON_GetObjectItemCaseSensitive(j, "q");
    x = cJSON_GetObjectItemCaseSensitive(j, "x");
    if (!cJSON_IsNumber(v) || v->valuedouble != 1 || !cJSON_IsString(i) ||
        !cJSON_IsString(p) || !cJSON_IsString(e) || !cJSON_IsNumber(qq) ||
        !cJSON_IsNumber(x) || qq->valuedouble < 0 || qq->valuedouble > 9e15)
        r = hutch_err_set(err, -EBADMSG, "requestState is not one of hutch's");
    else if (strcmp(i->valuestring, hutch_instance_id()))
        r = hutch_err_set(err, -EXDEV,
                          "requestState was issued by another hutch process");
    else if (strcmp(p->valuestring, principal ? principal : ""))
        r = hutch_err_set(err, -EACCES,
                          "requestState was issued to another principal: only the "
                          "client that was asked can answer");
    else if (x->valuedouble <= (double)wall_ms())
        r = hutch_err_set(err, -ETIMEDOUT,
                          "requestState has expired: the question is no longer asked "
                          "(the tool call was denied when its time ran out)");
    else if (strlen(e->valuestring) >= elen)
        r = hutch_err_set(err, -EBADMSG, "requestState names an execution too long");
    else {
        snprintf(execution, elen, "%s", e->valuestring);
        *q = (uint64_t)qq->valuedouble;
        r = 0;
    }
    cJSON_Delete(j);
    return r;
}
