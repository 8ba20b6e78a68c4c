/* util.c — small helpers shared by the core: time, fds, files, hints. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "util.h"

void hutch_freep(void *p)
{
    free(*(void **)p);
}

void hutch_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

uint64_t hutch_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t hutch_now_ms(void)
{
    return hutch_now_us() / 1000u;
}

unsigned hutch_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    return 1;
}

void hutch_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void hutch_cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

int hutch_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
                          .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    return pthread_cond_timedwait(c, m, &ts);
}

int hutch_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int hutch_set_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

int hutch_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int hutch_write_file_atomic(const char *path, const void *data, size_t len,
                            struct hutch_err *err)
{
    char tmp[PATH_MAX], dir[PATH_MAX], *slash;
    int fd, r = 0;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= sizeof(tmp))
        return hutch_err_set(err, -ENAMETOOLONG, "%s: path too long", path);
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return hutch_err_set(err, -errno, "%s: creating a temporary file: %s", path,
                             strerror(errno));
    if (len)
        r = hutch_write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return hutch_err_set(err, r, "writing %s: %s", path, strerror(-r));
    }
    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return 0;
}

int hutch_read_fd(int fd, size_t max, char **data, size_t *len, struct hutch_err *err)
{
    struct hutch_buf b;
    ssize_t r;

    /* One byte over max, to tell "exactly max" from "more". */
    hutch_buf_init(&b, max + 1);
    do {
        r = hutch_buf_read(&b, fd, 65536);
    } while (r > 0 || r == -EINTR);
    if (r == -ENOMEM) {
        hutch_buf_free(&b);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    if (r < 0 && r != -E2BIG) {
        hutch_buf_free(&b);
        return hutch_err_set(err, (int)r, "read: %s", strerror((int)-r));
    }
    if (b.len > max) {
        hutch_buf_free(&b);
        return hutch_err_set(err, -E2BIG, "input is larger than %zu bytes", max);
    }
    *data = hutch_buf_steal(&b, len);
    if (!*data)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    return 0;
}

int hutch_read_file(const char *path, size_t max, char **data, size_t *len,
                    struct hutch_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int r;

    if (fd < 0)
        return hutch_err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0)
        return hutch_err_set(err, -errno, "cannot stat %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return hutch_err_set(err, -EISDIR, "%s is a directory, expected a file", path);
    r = hutch_read_fd(fd, max, data, len, err);
    if (r < 0 && r == -E2BIG)
        return hutch_err_set(err, r, "%s is larger than the %zu-byte limit", path, max);
    if (r < 0)
        return hutch_err_set(err, r, "reading %s: %s", path, strerror(-r));
    return 0;
}

void hutch_random_id(char out[17])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[8];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = hutch_now_us() ^ ((uint64_t)getpid() << 32);
        memcpy(b, &t, sizeof(b));
    }
    for (int i = 0; i < 8; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[16] = '\0';
}

int hutch_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF) and its code point;
 * 0 when there is none.  p is NUL-terminated, and a NUL ends any sequence. */
static size_t utf8_seq(const unsigned char *p, uint32_t *cp)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, *cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, *cp = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80,
        hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, *cp = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80,
        hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        unsigned char b = p[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf))
            return 0;
        *cp = (*cp << 6) | (b & 0x3f);
    }
    return n;
}

static int bidi_control(uint32_t cp)
{
    return cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

char *hutch_text_escape(const char *s, enum hutch_escape how)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)p), o = 0;
    char *out = malloc(4 * len + 1); /* "\xNN" for a byte is the most */

    if (!out)
        return NULL;
    while (*p) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
            /* One byte at a time: a C1 character shows as its two. */
            size_t k = n ? n : 1;
            for (size_t i = 0; i < k; i++) {
                unsigned char c = p[i];
                out[o++] = '\\';
                if (c == '\n' || c == '\t' || c == '\r') {
                    out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
                } else {
                    out[o++] = 'x';
                    out[o++] = hex[c >> 4];
                    out[o++] = hex[c & 15];
                }
            }
            p += k;
        } else if (bidi_control(cp)) {
            o += (size_t)snprintf(out + o, 9, "\\u{%04x}", (unsigned)cp);
            p += n;
        } else if (cp == '\\' && how == HUTCH_ESCAPE_NAME) {
            out[o++] = '\\';
            out[o++] = '\\';
            p++;
        } else {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        }
    }
    out[o] = '\0';
    return out;
}

char *hutch_base64_encode(const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t n = (len + 2) / 3 * 4, o = 0;
    char *out;
    if (len > (SIZE_MAX / 4) * 3 - 3)
        return NULL;
    out = malloc(n + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int hutch_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen)
{
    unsigned char *buf;
    size_t o = 0;
    if (len % 4 != 0)
        return -EINVAL;
    buf = malloc(len / 4 * 3 + 1);
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            if (c == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64val(c)) < 0) {
                free(buf);
                return -EINVAL;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        buf[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            buf[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            buf[o++] = (unsigned char)w;
    }
    *out = buf;
    *outlen = o;
    return 0;
}

static int ascii_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Levenshtein distance without case; 99 for words too long to matter. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64], i, j;
    if (la >= 63 || lb >= 63)
        return 99;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (ascii_lower((unsigned char)a[i - 1]) !=
                                  ascii_lower((unsigned char)b[j - 1]));
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *hutch_suggest(const char *k, const char *const *known)
{
    const char *best = NULL;
    size_t bd = 3;
    for (; *known; known++) {
        size_t d = edit_distance(k, *known);
        if (d < bd) {
            bd = d;
            best = *known;
        }
    }
    return best;
}

const char *hutch_lang_canon(const char *name)
{
    static const struct {
        const char *alias, *lang;
    } names[] = {
        {"python", "python"},     {"python3", "python"},
        {"py", "python"},         {"javascript", "javascript"},
        {"js", "javascript"},     {"node", "javascript"},
        {"nodejs", "javascript"}, {"typescript", "typescript"},
        {"ts", "typescript"},
    };
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcasecmp(name, names[i].alias))
            return names[i].lang;
    return NULL;
}

const char *hutch_lang_runtime(const char *lang)
{
    return lang && !strcmp(lang, "typescript") ? "javascript" : lang;
}

int hutch_wait_fd(int fd, short events, int wake_fd, uint64_t deadline_ms)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = events},
                              {.fd = wake_fd, .events = POLLIN}};
        uint64_t now = hutch_now_ms();
        int r;
        if (now >= deadline_ms)
            return 0;
        r = poll(p, 2, (int)(deadline_ms - now > 60000 ? 60000 : deadline_ms - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || p[1].revents)
            return -1;
        if (p[0].revents)
            return 1;
    }
}
