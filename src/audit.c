/* audit.c — the audit log (see audit.h): building one JSON line per event,
 * redacting tool arguments, and writing lines without ever blocking a
 * request for long.  What is worth logging, and when, is the callers'
 * business (mcp_server.c, exec.c, the policy reload); this file only makes
 * sure that what is logged is one valid line with no secret in it.
 *
 * Writing: regular files are opened blocking (O_APPEND makes each write(2)
 * one atomic append); anything else (stderr on a pipe or terminal, a FIFO)
 * gets its own non-blocking open file description, so a reader that stops
 * reading costs a line HUTCH_AUDIT_WRITE_MS at most, then nothing, instead
 * of wedging every thread that logs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"

struct hutch_audit {
    pthread_mutex_t lock;
    int fd;
    int regular;      /* fd is a regular file: no need to poll */
    char *file;       /* NULL: stderr */
    int stalled;      /* the last line timed out: do not wait again */
    int partial;      /* the last line was cut short: start with '\n' */
    uint64_t dropped; /* lines not written */
    int values;       /* atomic: hutch_audit_args writes values */
};

static const char *const reserved[] = {
    "time",     "event",  "principal",   "execution", "tool",
    "decision", "reason", "duration_ms", "extra",     "extra_dropped"};

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    unsigned min, cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A copy of s that is valid UTF-8 (each invalid byte becomes U+FFFD), at
 * most max bytes of it, plus "…" when something was cut.  Caller frees. */
static char *clean_string(const char *s, size_t max)
{
    static const char repl[] = "\xef\xbf\xbd", ell[] = "\xe2\x80\xa6";
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), i = 0, o = 0;
    /* Every input byte yields at most three output bytes. */
    size_t cap = len > max ? max : (len * 3 > max ? max : len * 3);
    char *out = malloc(cap + sizeof(ell));

    if (!out)
        return NULL;
    while (i < len) {
        size_t n = utf8_len(p + i, len - i);
        const char *src = n ? s + i : repl;
        size_t w = n ? n : 3;
        if (o + w > max)
            break;
        memcpy(out + o, src, w);
        o += w;
        i += n ? n : 1;
    }
    if (i < len) {
        memcpy(out + o, ell, 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

static cJSON *string_item(const char *s, size_t max)
{
    char *c = clean_string(s, max);
    cJSON *item;

    if (!c)
        return NULL;
    item = cJSON_CreateString(c);
    free(c);
    return item;
}

/* What the copy may still take, in bytes of its JSON text: a line holds
 * HUTCH_AUDIT_MAX_LINE at most, so a copy past that would be dropped
 * whole ("extra_dropped") after it was made; it stops there instead, and
 * says how much it left out.  Arguments of a million values are not copied
 * (they may be most of an execution's memory budget). */
struct room {
    size_t left;
};

static int spend(struct room *rm, size_t n)
{
    if (rm->left < n) {
        rm->left = 0;
        return 0;
    }
    rm->left -= n;
    return 1;
}

/* Deep copy of v: strings repaired and cut at maxstr, secret members
 * replaced, anything below HUTCH_AUDIT_MAX_DEPTH summarised, and past the
 * room a marker of how many members or items were left out. */
static cJSON *copy_value(const cJSON *v, int depth, size_t maxstr,
                         int (*is_secret)(const void *, const char *), const void *arg,
                         struct room *rm)
{
    cJSON *out;
    const cJSON *c;

    if (cJSON_IsString(v)) {
        const char *t = v->valuestring ? v->valuestring : "";
        size_t n = strlen(t);
        spend(rm, (n < maxstr ? n : maxstr) + 8);
        return string_item(t, maxstr);
    }
    spend(rm, 24);
    if (cJSON_IsNumber(v))
        return cJSON_CreateNumber(v->valuedouble);
    if (cJSON_IsBool(v))
        return cJSON_CreateBool(cJSON_IsTrue(v));
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return cJSON_CreateNull(); /* null, and raw text we will not print */
    if (depth >= HUTCH_AUDIT_MAX_DEPTH)
        return cJSON_CreateString("[too deep]");

    out = cJSON_IsArray(v) ? cJSON_CreateArray() : cJSON_CreateObject();
    if (!out)
        return NULL;
    cJSON_ArrayForEach(c, v)
    {
        cJSON *item;
        char *key = NULL;
        int added;
        if (rm->left == 0) {
            /* Out of room: the rest is counted, not copied. */
            size_t more = 0;
            char note[64];
            for (const cJSON *x = c; x; x = x->next)
                more++;
            snprintf(note, sizeof(note), "[%zu more %s left out]", more,
                     cJSON_IsArray(v) ? "items" : "members");
            item = cJSON_CreateString(note);
            added = item && (cJSON_IsArray(v) ? cJSON_AddItemToArray(out, item)
                                              : cJSON_AddItemToObject(out, "…", item));
            if (!added) {
                cJSON_Delete(item);
                cJSON_Delete(out);
                return NULL;
            }
            break;
        }
        if (cJSON_IsArray(v)) {
            item = copy_value(c, depth + 1, maxstr, is_secret, arg, rm);
            added = item && cJSON_AddItemToArray(out, item);
        } else {
            const char *name = c->string ? c->string : "";
            spend(rm, strlen(name) < maxstr ? strlen(name) + 4 : maxstr + 4);
            if (is_secret && is_secret(arg, name) == 1)
                item = cJSON_CreateString("[redacted]");
            else
                item = copy_value(c, depth + 1, maxstr, is_secret, arg, rm);
            key = clean_string(name, HUTCH_AUDIT_MAX_STRING);
            added = item && key && cJSON_AddItemToObject(out, key, item);
        }
        free(key);
        if (!added) {
            cJSON_Delete(item);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

cJSON *hutch_audit_redact(const cJSON *args,
                          int (*is_secret)(const void *arg, const char *key),
                          const void *arg)
{
    struct room rm = {HUTCH_AUDIT_MAX_LINE};
    if (!args)
        return NULL;
    return copy_value(args, 0, HUTCH_AUDIT_MAX_STRING, is_secret, arg, &rm);
}

void hutch_audit_set_values(struct hutch_audit *a, int on)
{
    if (a)
        __atomic_store_n(&a->values, on != 0, __ATOMIC_RELAXED);
}

/* What a value is, without what it says. */
static cJSON *describe(const cJSON *v)
{
    char d[64];

    if (cJSON_IsString(v))
        snprintf(d, sizeof(d), "<string, %zu bytes>",
                 v->valuestring ? strlen(v->valuestring) : (size_t)0);
    else if (cJSON_IsNumber(v))
        snprintf(d, sizeof(d), "<number>");
    else if (cJSON_IsBool(v))
        snprintf(d, sizeof(d), "<boolean>");
    else if (cJSON_IsArray(v))
        snprintf(d, sizeof(d), "<array, %d items>", cJSON_GetArraySize(v));
    else if (cJSON_IsObject(v))
        snprintf(d, sizeof(d), "<object, %d members>", cJSON_GetArraySize(v));
    else
        return cJSON_CreateNull();
    return cJSON_CreateString(d);
}

cJSON *hutch_audit_args(const struct hutch_audit *a, const cJSON *args,
                        int (*is_secret)(const void *arg, const char *key),
                        const void *arg)
{
    const cJSON *c;
    cJSON *out;

    if (!args)
        return NULL;
    if (a && __atomic_load_n(&a->values, __ATOMIC_RELAXED))
        return hutch_audit_redact(args, is_secret, arg);
    /* The names of the arguments are the tool's schema, not the agent's
     * data: kept.  Below them, nothing (a nested object's keys may be
     * data: {"alice@example.com": ...}). */
    if (!cJSON_IsObject(args))
        return describe(args);
    out = cJSON_CreateObject();
    if (!out)
        return NULL;
    cJSON_ArrayForEach(c, args)
    {
        const char *name = c->string ? c->string : "";
        cJSON *item = is_secret && is_secret(arg, name) == 1
                          ? cJSON_CreateString("[redacted]")
                          : describe(c);
        char *key = clean_string(name, HUTCH_AUDIT_MAX_STRING);
        if (!item || !key || !cJSON_AddItemToObject(out, key, item)) {
            free(key);
            cJSON_Delete(item);
            cJSON_Delete(out);
            return NULL;
        }
        free(key);
    }
    return out;
}

/* Open flags shared by open and reopen: O_NONBLOCK so that a FIFO without
 * a reader is an error (ENXIO) instead of a hang; cleared for regular
 * files, where it means nothing anyway. */
static int open_file(const char *file, int *regular)
{
    struct stat st;
    int fd = open(
        file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    *regular = S_ISREG(st.st_mode);
    if (*regular) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    return fd;
}

/* stderr: shared with everything else that writes there, so its flags are
 * not ours to change.  A regular file is dup'ed; anything else is opened
 * again through /proc to get a description of our own that we can make
 * non-blocking; when that fails (a socket) a dup is polled before each
 * write, which bounds the wait for all but a line larger than the room a
 * poll reported. */
static int open_stderr(int *regular)
{
    struct stat st;
    int fd;

    if (fstat(STDERR_FILENO, &st) < 0)
        return -errno;
    *regular = S_ISREG(st.st_mode);
    if (!*regular) {
        fd = open("/proc/self/fd/2",
                  O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0)
            return fd;
    }
    fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    return fd < 0 ? -errno : fd;
}

int hutch_audit_open(const char *file, struct hutch_audit **out, struct hutch_err *err)
{
    struct hutch_audit *a;
    int fd, regular = 0;

    *out = NULL;
    fd = file ? open_file(file, &regular) : open_stderr(&regular);
    if (fd < 0) {
        if (!file)
            return hutch_err_set(err, fd, "audit log on stderr: %s", strerror(-fd));
        return hutch_err_set(err, fd, "opening audit log %s: %s%s", file, strerror(-fd),
                             fd == -ENXIO ? " (a FIFO nobody reads)" : "");
    }
    a = calloc(1, sizeof(*a));
    if (!a || (file && !(a->file = strdup(file)))) {
        free(a);
        close(fd);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&a->lock, NULL);
    a->fd = fd;
    a->regular = regular;
    *out = a;
    return 0;
}

int hutch_audit_check(const char *file, struct hutch_err *err)
{
    char dir[PATH_MAX];
    const char *slash;
    struct stat st;
    int fd;

    if (!file)
        return 0;
    fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    fd = -errno;
    if (fd != -ENOENT)
        return hutch_err_set(
            err, fd, "audit log %s cannot be opened for appending: %s%s", file,
            strerror(-fd), fd == -ENXIO ? " (a FIFO nobody reads)" : "");
    slash = strrchr(file, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == file)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - file), file);
    if (stat(dir, &st) < 0)
        return hutch_err_set(err, -errno,
                             "audit log %s cannot be created: its directory %s: %s",
                             file, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hutch_err_set(err, -ENOTDIR,
                             "audit log %s cannot be created: %s is not a directory",
                             file, dir);
    if (access(dir, W_OK | X_OK) < 0)
        return hutch_err_set(err, -errno,
                             "audit log %s cannot be created: its directory %s is not "
                             "writable: %s",
                             file, dir, strerror(errno));
    return 0;
}

void hutch_audit_close(struct hutch_audit *a)
{
    if (!a)
        return;
    close(a->fd);
    pthread_mutex_destroy(&a->lock);
    free(a->file);
    free(a);
}

int hutch_audit_reopen(struct hutch_audit *a)
{
    int fd, old, regular = 0;

    if (!a->file)
        return 0;
    fd = open_file(a->file, &regular);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&a->lock);
    old = a->fd;
    a->fd = fd;
    a->regular = regular;
    a->partial = 0; /* a fresh file starts at a line boundary */
    a->stalled = 0;
    pthread_mutex_unlock(&a->lock);
    close(old);
    return 0;
}

uint64_t hutch_audit_dropped(struct hutch_audit *a)
{
    uint64_t n;

    pthread_mutex_lock(&a->lock);
    n = a->dropped;
    pthread_mutex_unlock(&a->lock);
    return n;
}

/* Wait until fd takes more bytes or the deadline passed (one poll even
 * then): 0 or -EAGAIN. */
static int wait_writable(int fd, uint64_t deadline)
{
    for (;;) {
        uint64_t now = hutch_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n = poll(&pfd, 1, now < deadline ? (int)(deadline - now) : 0);
        if (n > 0)
            return 0; /* writable, or an error the write will report */
        if (n == 0)
            return -EAGAIN;
        if (errno != EINTR)
            return -errno;
        if (hutch_now_ms() >= deadline)
            return -EAGAIN;
    }
}

/* Write the whole line under the lock.  Returns 0 or the reason it was
 * dropped (counted here). */
static int write_line(struct hutch_audit *a, const char *buf, size_t len)
{
    size_t off = 0;
    uint64_t deadline;
    int r = 0;

    pthread_mutex_lock(&a->lock);
    if (!a->partial) {
        buf++; /* skip the '\n' kept in front for after a cut line */
        len--;
    }
    /* After a timeout, do not wait again until a line gets through. */
    deadline = hutch_now_ms() + (a->stalled ? 0 : HUTCH_AUDIT_WRITE_MS);
    while (off < len) {
        ssize_t n;
        if (!a->regular && (r = wait_writable(a->fd, deadline)) < 0)
            break;
        n = write(a->fd, buf + off, len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        r = n < 0 ? -errno : -EIO;
        break;
    }
    if (r < 0) {
        a->dropped++;
        a->stalled = r == -EAGAIN;
        if (off > 0)
            a->partial = 1;
    } else {
        a->stalled = 0;
        a->partial = 0;
    }
    pthread_mutex_unlock(&a->lock);
    return r;
}

static int add_field(cJSON *o, const char *name, const char *value)
{
    cJSON *item =
        value ? string_item(value, HUTCH_AUDIT_MAX_FIELD) : cJSON_CreateNull();
    if (!item)
        return -ENOMEM;
    if (!cJSON_AddItemToObject(o, name, item)) {
        cJSON_Delete(item);
        return -ENOMEM;
    }
    return 0;
}

static int is_reserved(const char *name)
{
    for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
        if (!strcmp(name, reserved[i]))
            return 1;
    return 0;
}

/* extra's members (or extra itself as "extra" when it is not an object),
 * sanitised but not cut: the caller chose them.  The copy stops at twice a
 * line (a line over HUTCH_AUDIT_MAX_LINE drops its extra anyway). */
static int add_extra(cJSON *o, const cJSON *extra)
{
    struct room rm = {2 * (size_t)HUTCH_AUDIT_MAX_LINE};
    const cJSON *c;

    if (!cJSON_IsObject(extra)) {
        cJSON *item = copy_value(extra, 1, HUTCH_AUDIT_MAX_LINE, NULL, NULL, &rm);
        if (!item || !cJSON_AddItemToObject(o, "extra", item)) {
            cJSON_Delete(item);
            return -ENOMEM;
        }
        return 0;
    }
    cJSON_ArrayForEach(c, extra)
    {
        if (!c->string || is_reserved(c->string))
            continue;
        cJSON *item = copy_value(c, 1, HUTCH_AUDIT_MAX_LINE, NULL, NULL, &rm);
        char *key = clean_string(c->string, HUTCH_AUDIT_MAX_STRING);
        if (!item || !key || !cJSON_AddItemToObject(o, key, item)) {
            free(key);
            cJSON_Delete(item);
            return -ENOMEM;
        }
        free(key);
    }
    return 0;
}

/* Milliseconds rounded to the microsecond (no libm needed). */
static double to_us(double ms)
{
    if (ms >= 1e12) /* 30 years: leave as is */
        return ms;
    return (double)(uint64_t)(ms * 1000.0 + 0.5) / 1000.0;
}

static void now_rfc3339(char out[32])
{
    struct timespec ts;
    struct tm tm;
    size_t n;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000L);
}

/* The line as "\n{...}\n": the leading newline is written only after a
 * line that was cut short.  Caller frees. */
static char *render(cJSON *o, int ncore, size_t *len)
{
    char *s = cJSON_PrintUnformatted(o), *buf;
    size_t n;

    if (s && strlen(s) + 1 > HUTCH_AUDIT_MAX_LINE) {
        /* Too long: keep the core fields, say what is missing. */
        free(s);
        while (cJSON_GetArraySize(o) > ncore)
            cJSON_DeleteItemFromArray(o, ncore);
        if (!cJSON_AddTrueToObject(o, "extra_dropped"))
            return NULL;
        s = cJSON_PrintUnformatted(o);
    }
    if (!s)
        return NULL;
    n = strlen(s);
    buf = malloc(n + 2);
    if (buf) {
        buf[0] = '\n';
        memcpy(buf + 1, s, n);
        buf[n + 1] = '\n';
        *len = n + 2;
    }
    free(s);
    return buf;
}

int hutch_audit_log(struct hutch_audit *a, const char *event, const char *principal,
                    const char *execution, const char *tool, const char *decision,
                    const char *reason, double duration_ms, const cJSON *extra)
{
    char when[32];
    cJSON *o = NULL;
    _cleanup_free_ char *line = NULL;
    size_t len = 0;
    int r = -ENOMEM, ncore;

    if (!a || !event)
        return -EINVAL;
    now_rfc3339(when);
    o = cJSON_CreateObject();
    if (!o || add_field(o, "time", when) < 0 || add_field(o, "event", event) < 0 ||
        add_field(o, "principal", principal) < 0 ||
        add_field(o, "execution", execution) < 0 || add_field(o, "tool", tool) < 0 ||
        add_field(o, "decision", decision) < 0 || add_field(o, "reason", reason) < 0)
        goto fail;
    if (isnan(duration_ms) || isinf(duration_ms) || duration_ms < 0) {
        if (!cJSON_AddNullToObject(o, "duration_ms"))
            goto fail;
    } else if (!cJSON_AddNumberToObject(o, "duration_ms", to_us(duration_ms))) {
        goto fail;
    }
    ncore = cJSON_GetArraySize(o);
    if (extra && add_extra(o, extra) < 0)
        goto fail;
    line = render(o, ncore, &len);
    if (!line)
        goto fail;
    cJSON_Delete(o);
    return write_line(a, line, len);

fail:
    cJSON_Delete(o);
    pthread_mutex_lock(&a->lock);
    a->dropped++;
    pthread_mutex_unlock(&a->lock);
    return r;
}
