/* buf.c — the bounded byte buffer (see buf.h).
 *
 * Here: growth (doubling, never allocating past the maximum except for a
 * cut marker), the strict and the cut mode, and the small conveniences the
 * users share (formatted appends, reading an fd, dropping parsed bytes,
 * handing the bytes over).  Not here: what any buffer holds. */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIRST_CAP 256

void hutch_buf_init(struct hutch_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->cut_mark = NULL;
    b->cut = false;
}

void hutch_buf_init_cut(struct hutch_buf *b, size_t max, const char *mark)
{
    hutch_buf_init(b, max);
    b->cut_mark = mark;
}

/* Room for `need` bytes plus the NUL.  The allocation stops at max unless
 * need itself is past it (only a cut marker asks for that). */
static int grow(struct hutch_buf *b, size_t need)
{
    size_t ncap;
    char *d;

    if (need <= b->cap)
        return 0;
    if (need == SIZE_MAX)
        return -ENOMEM;
    ncap = b->cap ? b->cap : FIRST_CAP;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 4 ? need : ncap * 2;
    if (ncap > b->max && need <= b->max)
        ncap = b->max;
    d = realloc(b->data, ncap + 1);
    if (!d)
        return -ENOMEM;
    b->data = d;
    b->cap = ncap;
    return 0;
}

static void put(struct hutch_buf *b, const void *p, size_t n)
{
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* Cut mode: keep the first n bytes of p that fit, then the marker. */
static int cut_here(struct hutch_buf *b, const void *p, size_t n)
{
    size_t mlen = strlen(b->cut_mark);

    b->cut = true;
    n = b->len >= b->max ? 0 : n < b->max - b->len ? n : b->max - b->len;
    if (grow(b, b->len + n + mlen) < 0) {
        if (grow(b, b->len + n) == 0)
            put(b, p, n);
        return -ENOMEM;
    }
    put(b, p, n);
    put(b, b->cut_mark, mlen);
    return -E2BIG;
}

int hutch_buf_append(struct hutch_buf *b, const void *p, size_t n)
{
    if (b->cut)
        return -E2BIG;
    if (n == 0)
        return 0;
    if (b->len > b->max || n > b->max - b->len)
        return b->cut_mark ? cut_here(b, p, n) : -E2BIG;
    if (grow(b, b->len + n) < 0) {
        if (b->cut_mark)
            b->cut = true;
        return -ENOMEM;
    }
    put(b, p, n);
    return 0;
}

int hutch_buf_appends(struct hutch_buf *b, const char *s)
{
    return hutch_buf_append(b, s, strlen(s));
}

int hutch_buf_appendf(struct hutch_buf *b, const char *fmt, ...)
{
    va_list ap;
    char *tmp;
    int n, r;

    if (b->cut)
        return -E2BIG;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    /* Formatted in place when it fits; through a copy when it does not,
     * so that a cut buffer keeps the part that fits. */
    if ((size_t)n <= b->max - b->len && b->len <= b->max) {
        if (grow(b, b->len + (size_t)n) < 0) {
            if (b->cut_mark)
                b->cut = true;
            return -ENOMEM;
        }
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
        return 0;
    }
    if (!b->cut_mark)
        return -E2BIG;
    tmp = malloc((size_t)n + 1);
    if (!tmp) {
        b->cut = true;
        return -ENOMEM;
    }
    va_start(ap, fmt);
    vsnprintf(tmp, (size_t)n + 1, fmt, ap);
    va_end(ap);
    r = hutch_buf_append(b, tmp, (size_t)n);
    free(tmp);
    return r;
}

ssize_t hutch_buf_read(struct hutch_buf *b, int fd, size_t n)
{
    ssize_t got;

    if (b->len >= b->max)
        return -E2BIG;
    if (n > b->max - b->len)
        n = b->max - b->len;
    if (grow(b, b->len + n) < 0)
        return -ENOMEM;
    got = read(fd, b->data + b->len, n);
    if (got < 0)
        return -errno;
    b->len += (size_t)got;
    b->data[b->len] = '\0';
    return got;
}

void hutch_buf_consume(struct hutch_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = '\0';
}

void hutch_buf_reset(struct hutch_buf *b)
{
    b->len = 0;
    b->cut = false;
    if (b->data)
        b->data[0] = '\0';
}

char *hutch_buf_steal(struct hutch_buf *b, size_t *len)
{
    char *s = b->data ? b->data : strdup("");

    if (!s)
        return NULL;
    if (len)
        *len = b->len;
    hutch_buf_init_cut(b, b->max, b->cut_mark); /* s is the caller's now */
    return s;
}

const char *hutch_buf_str(const struct hutch_buf *b)
{
    return b->data ? b->data : "";
}

void hutch_buf_free(struct hutch_buf *b)
{
    free(b->data);
    hutch_buf_init_cut(b, b->max, b->cut_mark);
}

int hutch_buf_write(void *arg, const void *p, size_t n)
{
    return hutch_buf_append(arg, p, n);
}
