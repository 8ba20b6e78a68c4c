/* resources.c — the store behind resource_link: result files an
 * execute_code result could not carry inline, kept in memory for a bounded
 * time and fetched with MCP resources/read.
 *
 * Bounded three ways (caps.h): a file of at most HUTCH_MCP_LINK_MAX_FILE
 * (its base64 must fit in one JSON-RPC message), at most
 * HUTCH_MCP_LINKS_MAX_BYTES and HUTCH_MCP_LINKS_MAX_COUNT files per process
 * (files are dropped to make room for new ones: a link is a lease, not a
 * promise), and an expiry of HUTCH_MCP_LINK_TTL_MS after the result.
 * Each file belongs to the principal whose execution wrote it; the uri
 * holds 128 random bits, and another principal's uri reads as unknown.
 *
 * Shares.  One principal may fill the store while nobody else uses it, but
 * room is always made at the expense of whoever holds the most: when the
 * store is full, the oldest file of the principal holding the most files
 * goes (the most bytes, when the bytes are what is full), the principal
 * putting counted with its new file, and preferred on a tie.  So a flood
 * of links drops only the flooder's own oldest ones while it holds more
 * than the others, and every principal keeps at least an equal share of
 * the store (1/N of it among N principals using it), whatever the others
 * put.
 *
 * Not here: deciding which file goes inline and which gets a link
 * (result_files.c), JSON-RPC framing (mcp_server.c).
 *
 * With a directory (hutch serve --resources-dir), the files are kept there
 * instead, so that every hutch process given the same directory (replicas
 * behind one address) can serve a link another one made:
 * DIR/<principal in hex>/<id>.data and <id>.meta (uri, name, mimeType,
 * size, expiry in wall-clock seconds), the .meta written last and
 * atomically: a file exists once its .meta does.  The same caps hold for
 * the directory as a whole, enforced by whoever puts.
 *
 * Thread rules: one mutex guards the list; every function may be called
 * from any thread (execute_code's workers put, the session reads).  The
 * directory needs no lock: each file appears whole by rename. */
#include "resources.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "knobs.h"
#include "wire.h"

/* One principal's part of the in-memory store (freed with its last file). */
struct holder {
    struct holder *next;
    char *principal;
    size_t bytes, count;
};

struct res_file {
    struct res_file *next; /* newer first */
    char *uri, *principal, *name, *mime;
    unsigned char *data;
    size_t size;
    uint64_t expires_ms; /* monotonic */
    struct holder *h;    /* set once in the list */
};

struct hutch_resources {
    pthread_mutex_t mu;
    struct res_file *head; /* newest first */
    struct holder *holders;
    size_t bytes, count;
    unsigned ttl_ms;
    char *dir; /* NULL: in memory */
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

int hutch_resources_new(unsigned ttl_ms, const char *dir, struct hutch_resources **out,
                        struct hutch_err *err)
{
    struct hutch_resources *rs;
    struct stat st;

    *out = NULL;
    if (dir && (dir[0] != '/' || strlen(dir) > PATH_MAX - 128))
        return hutch_err_set(err, -EINVAL,
                             "resources directory %.200s: want an absolute path", dir);
    if (dir && mkdir(dir, 0700) < 0 && errno != EEXIST)
        return hutch_err_set(err, -errno, "resources directory %.200s: %s", dir,
                             strerror(errno));
    if (dir && (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
                (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022)))
        return hutch_err_set(err, -EPERM,
                             "resources directory %.200s: not a directory that only "
                             "this user can write",
                             dir);
    rs = calloc(1, sizeof(*rs));
    if (!rs || (dir && !(rs->dir = strdup(dir)))) {
        free(rs);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
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
    while (rs->holders) {
        struct holder *h = rs->holders;
        rs->holders = h->next;
        free(h->principal);
        free(h);
    }
    pthread_mutex_destroy(&rs->mu);
    free(rs->dir);
    free(rs);
}

unsigned hutch_resources_ttl_ms(const struct hutch_resources *rs)
{
    return rs->ttl_ms;
}

int hutch_resources_ttl_from_env(unsigned *ttl_ms, struct hutch_err *err)
{
    uint64_t v;
    int r = hutch_knob_uint(HUTCH_KNOB_RESOURCE_TTL_MS, &v, err);

    *ttl_ms = (unsigned)v;
    return r < 0 ? r : 0;
}

/* The holder of `principal`, created (empty) when it has none; NULL when
 * out of memory.  Under the mutex. */
static struct holder *holder_get(struct hutch_resources *rs, const char *principal)
{
    struct holder *h;
    for (h = rs->holders; h; h = h->next)
        if (!strcmp(h->principal, principal))
            return h;
    h = calloc(1, sizeof(*h));
    if (h && !(h->principal = strdup(principal))) {
        free(h);
        return NULL;
    }
    if (h) {
        h->next = rs->holders;
        rs->holders = h;
    }
    return h;
}

/* Holders with nothing left go, but `keep`.  Under the mutex. */
static void holders_prune(struct hutch_resources *rs, const struct holder *keep)
{
    for (struct holder **pp = &rs->holders; *pp;) {
        struct holder *h = *pp;
        if (h->count || h == keep) {
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        free(h->principal);
        free(h);
    }
}

/* Unlinks *pp (a file in the list) and frees it.  Under the mutex. */
static void unlink_file(struct hutch_resources *rs, struct res_file **pp)
{
    struct res_file *f = *pp;
    *pp = f->next;
    rs->bytes -= f->size;
    rs->count--;
    f->h->bytes -= f->size;
    f->h->count--;
    file_free(f);
}

/* Whose file goes to make room for `put`'s new one of `need` bytes: the
 * holder of the most files (by_count) or bytes, `put` counted with the new
 * file and chosen on a tie; `put` itself only when it holds a file.  NULL
 * when nobody holds one.  Under the mutex. */
static struct holder *victim(struct hutch_resources *rs, struct holder *put,
                             size_t need, int by_count)
{
    struct holder *best = NULL;
    size_t most = 0;
    if (put->count) {
        best = put;
        most = by_count ? put->count + 1 : put->bytes + need;
    }
    for (struct holder *h = rs->holders; h; h = h->next) {
        size_t u = by_count ? h->count : h->bytes;
        if (h != put && h->count && (!best || u > most)) {
            best = h;
            most = u;
        }
    }
    return best;
}

/* Drops expired files, then, while `need` more bytes and one more file do
 * not fit, the oldest file of the victim (the shares above).  Called with
 * the mutex held. */
static void make_room(struct hutch_resources *rs, struct holder *put, size_t need)
{
    uint64_t now = hutch_now_ms();
    struct res_file **pp = &rs->head;

    while (*pp) {
        if ((*pp)->expires_ms <= now)
            unlink_file(rs, pp);
        else
            pp = &(*pp)->next;
    }
    while (rs->head && (rs->bytes + need > HUTCH_MCP_LINKS_MAX_BYTES ||
                        rs->count + 1 > HUTCH_MCP_LINKS_MAX_COUNT)) {
        struct holder *v =
            victim(rs, put, need, rs->count + 1 > HUTCH_MCP_LINKS_MAX_COUNT);
        struct res_file **oldest = NULL;
        if (!v)
            break;
        /* The list is newest first: the victim's oldest is its last. */
        for (pp = &rs->head; *pp; pp = &(*pp)->next)
            if ((*pp)->h == v)
                oldest = pp;
        unlink_file(rs, oldest);
    }
    holders_prune(rs, put);
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

/* {"contents": [{uri, mimeType, text | blob}]}: text when the bytes are
 * UTF-8 without NUL, else base64.  NULL when out of memory. */
static cJSON *contents(const char *uri, const char *mime, const unsigned char *data,
                       size_t size)
{
    cJSON *r = cJSON_CreateObject(), *c = cJSON_CreateObject();
    char *b64 = NULL, *text = NULL;
    int is_text =
        memchr(data, '\0', size) == NULL && hutch_utf8_valid((const char *)data, size);

    if (is_text && (text = malloc(size + 1))) {
        memcpy(text, data, size);
        text[size] = '\0';
    } else if (!is_text) {
        b64 = hutch_base64_encode(data, size);
    }
    if (r && c && (text || b64)) {
        cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "contents"), c);
        c = NULL;
        cJSON *it = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "contents"), 0);
        if (!cJSON_AddStringToObject(it, "uri", uri) ||
            !cJSON_AddStringToObject(it, "mimeType", mime) ||
            !cJSON_AddStringToObject(it, text ? "text" : "blob", text ? text : b64)) {
            cJSON_Delete(r);
            r = NULL;
        }
    } else {
        cJSON_Delete(r);
        r = NULL;
    }
    cJSON_Delete(c);
    free(text);
    free(b64);
    return r;
}

static cJSON *not_found(const struct hutch_resources *rs, const char *uri,
                        struct hutch_err *err)
{
    hutch_err_set(err, -ENOENT,
                  "Resource not found: %.200s is unknown or expired (files of a result "
                  "stay fetchable for %u s, while hutch has room for them%s); run the "
                  "code again to get the file anew",
                  uri, rs->ttl_ms / 1000,
                  rs->dir ? ""
                          : "; replicas of hutch share them only through a common "
                            "--resources-dir");
    return NULL;
}

/* --- the shared directory ---------------------------------------------- */

/* DIR/<principal in hex>; -ENAMETOOLONG past the room. */
static int principal_dir(const struct hutch_resources *rs, const char *principal,
                         char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "%s/", rs->dir);
    principal = principal ? principal : "";
    if (o + 2 * strlen(principal) + 2 > len)
        return -ENAMETOOLONG;
    if (!*principal)
        o += (size_t)snprintf(out + o, len - o, "-");
    for (const unsigned char *p = (const unsigned char *)principal; *p; p++)
        o += (size_t)snprintf(out + o, len - o, "%02x", *p);
    return 0;
}

/* The 32 hex characters of a hutch://files/ uri into id: 0, or -1 when
 * the uri is not one of ours. */
static int uri_id(const char *uri, char id[33])
{
    if (strncmp(uri, "hutch://files/", 14))
        return -1;
    for (int i = 0; i < 32; i++) {
        char ch = uri[14 + i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return -1;
        id[i] = ch;
    }
    id[32] = '\0';
    return uri[46] == '/' ? 0 : -1;
}

/* The .meta of DIR/PDIR/ID, parsed; NULL when missing or not ours. */
static cJSON *read_meta(const char *pdir, const char *id)
{
    char path[PATH_MAX], *text = NULL;
    size_t len = 0;
    struct hutch_err err = HUTCH_ERR_INIT;
    cJSON *m;

    snprintf(path, sizeof(path), "%s/%s.meta", pdir, id);
    if (hutch_read_file(path, 16384, &text, &len, &err) < 0)
        return NULL;
    m = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsString(cJSON_GetObjectItem(m, "uri")) ||
        !cJSON_IsString(cJSON_GetObjectItem(m, "name")) ||
        !cJSON_IsString(cJSON_GetObjectItem(m, "mimeType")) ||
        !cJSON_IsNumber(cJSON_GetObjectItem(m, "size")) ||
        !cJSON_IsNumber(cJSON_GetObjectItem(m, "expires"))) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

static void remove_pair(const char *pdir, const char *id)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.meta", pdir, id);
    unlink(path);
    snprintf(path, sizeof(path), "%s/%s.data", pdir, id);
    unlink(path);
}

/* Every live file in the directory, for the caps. */
struct entry {
    char pname[256]; /* the principal's directory, under DIR */
    char id[33];
    double expires, size; /* size -1: removed */
};

/* By principal, then soonest to expire first (the oldest: one ttl). */
static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->pname, y->pname);
    if (c)
        return c;
    return x->expires < y->expires ? -1 : x->expires > y->expires;
}

/* One principal's files among the sorted entries: [first, end), of which
 * [next, end) are still there. */
struct group {
    size_t first, next, end;
    double bytes;
    size_t count;
};

/* Expired files go; then, while `need` more bytes and one more file of
 * `put` (a principal's directory name) do not fit, the oldest file of
 * whoever holds the most, as in the memory store (the shares at the top).
 * Another process may sweep at the same time: removing what is already
 * gone is harmless. */
static void disk_sweep(struct hutch_resources *rs, const char *put, size_t need)
{
    DIR *top = opendir(rs->dir), *d;
    struct dirent *pe, *e;
    struct entry *all = NULL;
    struct group *g = NULL;
    size_t n = 0, cap = 0, count = 0, ng = 0, gput = (size_t)-1;
    double bytes = 0, now = (double)time(NULL);

    if (!top)
        return;
    while ((pe = readdir(top))) {
        char pdir[PATH_MAX - 64];
        if (pe->d_name[0] == '.')
            continue;
        snprintf(pdir, sizeof(pdir), "%s/%s", rs->dir, pe->d_name);
        if (!(d = opendir(pdir)))
            continue;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            char id[33];
            cJSON *m;
            if (l != 37 || strcmp(e->d_name + 32, ".meta"))
                continue;
            memcpy(id, e->d_name, 32);
            id[32] = '\0';
            if (!(m = read_meta(pdir, id)))
                continue;
            if (cJSON_GetObjectItem(m, "expires")->valuedouble <= now) {
                remove_pair(pdir, id);
            } else if (n < HUTCH_MCP_LINKS_MAX_COUNT * 2) {
                if (n == cap) {
                    struct entry *bigger =
                        realloc(all, (cap = cap ? cap * 2 : 64) * sizeof(*all));
                    if (!bigger) {
                        cJSON_Delete(m);
                        break;
                    }
                    all = bigger;
                }
                snprintf(all[n].pname, sizeof(all[n].pname), "%s", pe->d_name);
                memcpy(all[n].id, id, 33);
                all[n].expires = cJSON_GetObjectItem(m, "expires")->valuedouble;
                all[n].size = cJSON_GetObjectItem(m, "size")->valuedouble;
                bytes += all[n].size;
                count++;
                n++;
            }
            cJSON_Delete(m);
        }
        closedir(d);
    }
    closedir(top);
    if (!count || (bytes + (double)need <= HUTCH_MCP_LINKS_MAX_BYTES &&
                   count + 1 <= HUTCH_MCP_LINKS_MAX_COUNT))
        goto out;
    qsort(all, n, sizeof(*all), entry_cmp);
    if (!(g = calloc(n, sizeof(*g))))
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(all[i].pname, all[i - 1].pname)) {
            if (!strcmp(all[i].pname, put))
                gput = ng;
            g[ng++] = (struct group){.first = i, .next = i};
        }
        g[ng - 1].end = i + 1;
        g[ng - 1].bytes += all[i].size;
        g[ng - 1].count++;
    }
    while (count && (bytes + (double)need > HUTCH_MCP_LINKS_MAX_BYTES ||
                     count + 1 > HUTCH_MCP_LINKS_MAX_COUNT)) {
        int by_count = count + 1 > HUTCH_MCP_LINKS_MAX_COUNT;
        size_t v = (size_t)-1;
        double most = 0;
        char pdir[PATH_MAX];
        struct entry *x;
        if (gput != (size_t)-1 && g[gput].count) {
            v = gput;
            most = by_count ? (double)g[gput].count + 1 : g[gput].bytes + (double)need;
        }
        for (size_t i = 0; i < ng; i++) {
            double u = by_count ? (double)g[i].count : g[i].bytes;
            if (i != gput && g[i].count && (v == (size_t)-1 || u > most)) {
                v = i;
                most = u;
            }
        }
        if (v == (size_t)-1)
            break;
        x = &all[g[v].next++];
        snprintf(pdir, sizeof(pdir), "%s/%s", rs->dir, x->pname);
        remove_pair(pdir, x->id);
        g[v].bytes -= x->size;
        g[v].count--;
        bytes -= x->size;
        count--;
    }
out:
    free(g);
    free(all);
}

/* expires: wall-clock seconds to the microsecond, so that the order of
 * expiry is the order of the puts (the sweep drops the oldest first). */
static int disk_put(struct hutch_resources *rs, const struct res_file *f,
                    double expires, struct hutch_err *err)
{
    char pdir[PATH_MAX], path[PATH_MAX], id[33], *meta;
    cJSON *m;
    int r;

    if (uri_id(f->uri, id) < 0 ||
        principal_dir(rs, f->principal, pdir, sizeof(pdir)) < 0)
        return hutch_err_set(err, -ENAMETOOLONG, "its name is too long to keep");
    if (mkdir(pdir, 0700) < 0 && errno != EEXIST)
        return hutch_err_set(err, -errno, "%s: %s", pdir, strerror(errno));
    disk_sweep(rs, strrchr(pdir, '/') + 1, f->size);
    snprintf(path, sizeof(path), "%s/%s.data", pdir, id);
    r = hutch_write_file_atomic(path, f->data, f->size, err);
    if (r < 0)
        return r;
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "uri", f->uri);
    cJSON_AddStringToObject(m, "name", f->name);
    cJSON_AddStringToObject(m, "mimeType", f->mime);
    cJSON_AddNumberToObject(m, "size", (double)f->size);
    cJSON_AddNumberToObject(m, "expires", expires);
    meta = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    if (!meta) {
        unlink(path);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    snprintf(path, sizeof(path), "%s/%s.meta", pdir, id);
    r = hutch_write_file_atomic(path, meta, strlen(meta), err);
    free(meta);
    if (r < 0)
        remove_pair(pdir, id);
    return r;
}

static cJSON *disk_read(struct hutch_resources *rs, const char *principal,
                        const char *uri, struct hutch_err *err)
{
    char pdir[PATH_MAX], path[PATH_MAX], id[33], *data = NULL;
    size_t len = 0;
    cJSON *m, *r;
    struct hutch_err e2 = HUTCH_ERR_INIT;

    if (uri_id(uri, id) < 0 || principal_dir(rs, principal, pdir, sizeof(pdir)) < 0 ||
        !(m = read_meta(pdir, id)))
        return not_found(rs, uri, err);
    if (strcmp(cJSON_GetObjectItem(m, "uri")->valuestring, uri) ||
        cJSON_GetObjectItem(m, "expires")->valuedouble <= (double)time(NULL)) {
        cJSON_Delete(m);
        return not_found(rs, uri, err);
    }
    snprintf(path, sizeof(path), "%s/%s.data", pdir, id);
    if (hutch_read_file(path, HUTCH_MCP_LINK_MAX_FILE, &data, &len, &e2) < 0) {
        cJSON_Delete(m);
        return not_found(rs, uri, err);
    }
    r = contents(uri, cJSON_GetObjectItem(m, "mimeType")->valuestring,
                 (const unsigned char *)data, len);
    free(data);
    cJSON_Delete(m);
    if (!r)
        hutch_err_set(err, -ENOMEM, "out of memory reading %.200s", uri);
    return r;
}

/* The live files of `principal` into the array a (in directory order). */
static void disk_list(struct hutch_resources *rs, const char *principal, cJSON *a)
{
    char pdir[PATH_MAX];
    double now = (double)time(NULL);
    struct dirent *e;
    DIR *d;

    if (!a || principal_dir(rs, principal, pdir, sizeof(pdir)) < 0 ||
        !(d = opendir(pdir)))
        return;
    while ((e = readdir(d))) {
        char id[33];
        cJSON *m, *o;
        if (strlen(e->d_name) != 37 || strcmp(e->d_name + 32, ".meta"))
            continue;
        memcpy(id, e->d_name, 32);
        id[32] = '\0';
        if (!(m = read_meta(pdir, id)))
            continue;
        if (cJSON_GetObjectItem(m, "expires")->valuedouble > now &&
            (o = cJSON_CreateObject())) {
            cJSON_AddStringToObject(o, "uri",
                                    cJSON_GetObjectItem(m, "uri")->valuestring);
            cJSON_AddStringToObject(o, "name",
                                    cJSON_GetObjectItem(m, "name")->valuestring);
            cJSON_AddStringToObject(o, "mimeType",
                                    cJSON_GetObjectItem(m, "mimeType")->valuestring);
            cJSON_AddNumberToObject(o, "size",
                                    cJSON_GetObjectItem(m, "size")->valuedouble);
            cJSON_AddItemToArray(a, o);
        }
        cJSON_Delete(m);
    }
    closedir(d);
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
    if (rs->dir) {
        struct timespec ts;
        int r;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = disk_put(rs, f,
                     (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6 +
                         (double)rs->ttl_ms / 1000.0,
                     err);
        file_free(f);
        return r;
    }
    pthread_mutex_lock(&rs->mu);
    if (!(f->h = holder_get(rs, f->principal))) {
        pthread_mutex_unlock(&rs->mu);
        file_free(f);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    make_room(rs, f->h, size);
    f->next = rs->head;
    rs->head = f;
    rs->bytes += size;
    rs->count++;
    f->h->bytes += size;
    f->h->count++;
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
    cJSON *r;
    struct res_file *f;

    if (rs->dir)
        return disk_read(rs, principal, uri, err);
    pthread_mutex_lock(&rs->mu);
    f = find(rs, principal, uri);
    if (!f) {
        pthread_mutex_unlock(&rs->mu);
        return not_found(rs, uri, err);
    }
    /* Copied out under the lock: a concurrent put may drop the file. */
    r = contents(f->uri, f->mime, f->data, f->size);
    pthread_mutex_unlock(&rs->mu);
    if (!r)
        hutch_err_set(err, -ENOMEM, "out of memory reading %.200s", uri);
    return r;
}

cJSON *hutch_resources_list(struct hutch_resources *rs, const char *principal)
{
    cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "resources");
    uint64_t now = hutch_now_ms();

    if (rs->dir) {
        disk_list(rs, principal, a);
        return r;
    }

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
