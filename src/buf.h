/* buf.h — the bounded byte buffer (the idea of curl's dynbuf).
 *
 * Every buffer gets its maximum when it is created: an append that would
 * take it past the maximum fails with -E2BIG and appends nothing, so bytes
 * from outside (a client, an upstream server, a sandbox) can never grow one
 * without bound.  A buffer created with a cut marker (hutch_buf_init_cut)
 * keeps what fits instead, adds the marker once and drops the rest: for
 * text shown to a person or a model.
 *
 * data is NUL-terminated whenever it is not NULL; the NUL counts neither in
 * len nor against max, so a text buffer reads as a C string.
 *
 * Not here: splitting lines (wire.c and each transport do, over this),
 * anything about files or tar.  Not thread-safe: one owner at a time. */
#ifndef HUTCH_BUF_H
#define HUTCH_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct hutch_buf {
    char *data; /* NULL until something is appended */
    size_t len;
    size_t cap;           /* allocated, without the NUL */
    size_t max;           /* len never passes it (a cut marker may) */
    const char *cut_mark; /* NULL: appends past max fail */
    bool cut;             /* cut mode: the marker is in, the rest dropped */
};

/* An empty buffer holding at most max bytes; allocates nothing.  The
 * macro does the same in a declaration: struct hutch_buf b =
 * HUTCH_BUF_INIT(max); */
void hutch_buf_init(struct hutch_buf *b, size_t max);
#define HUTCH_BUF_INIT(MAX)                                                            \
    {                                                                                  \
        .max = (MAX)                                                                   \
    } /* the rest zero: NULL, false */
/* The same, but an append past max keeps what fits, adds `mark` (a static
 * string, not counted against max) and ignores every later append. */
void hutch_buf_init_cut(struct hutch_buf *b, size_t max, const char *mark);

/* 0; -E2BIG past max (nothing appended; in cut mode what fits is kept and
 * the marker added); -ENOMEM (nothing appended; in cut mode the buffer is
 * cut without a marker). */
int hutch_buf_append(struct hutch_buf *b, const void *p, size_t n);
int hutch_buf_appends(struct hutch_buf *b, const char *s);
int hutch_buf_appendf(struct hutch_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One read(2) of at most n bytes from fd onto the end: the count read, 0 at
 * end of file, -E2BIG when the buffer is already at max (nothing read), or
 * -errno of read (EINTR and EAGAIN included). */
ssize_t hutch_buf_read(struct hutch_buf *b, int fd, size_t n);

/* Drops the first n bytes (n <= len), keeping the memory: for line
 * readers that hand out what they parsed. */
void hutch_buf_consume(struct hutch_buf *b, size_t n);
/* Empty again, memory and maximum kept, a cut undone. */
void hutch_buf_reset(struct hutch_buf *b);
/* The contents as a malloc'd NUL-terminated string the caller frees, *len
 * set when len is not NULL; the buffer is left empty.  NULL only when out
 * of memory (an empty buffer gives ""). */
char *hutch_buf_steal(struct hutch_buf *b, size_t *len);
/* The contents as a C string: data, or "" before the first append. */
const char *hutch_buf_str(const struct hutch_buf *b);
/* Frees the memory; the buffer is empty and usable again, same maximum. */
void hutch_buf_free(struct hutch_buf *b);

/* hutch_write_fn adapter (see hutch-executor.h): arg is a struct hutch_buf *. */
int hutch_buf_write(void *arg, const void *p, size_t n);

#endif
