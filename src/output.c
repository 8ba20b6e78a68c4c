/* output.c — head and tail of an output stream (see output.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

void hutch_output_init(struct hutch_output *o, size_t limit)
{
    memset(o, 0, sizeof(*o));
    if (limit < 2)
        limit = 2;
    hutch_buf_init(&o->head, limit - limit / 2);
    o->ring_max = limit / 2;
}

long hutch_output_feed(struct hutch_output *o, const void *p, size_t n)
{
    const char *s = p;
    size_t room = o->head.max - o->head.len, take = n < room ? n : room;

    o->total += n;
    if (take && hutch_buf_append(&o->head, s, take) < 0)
        take = 0; /* out of memory: left out */
    s += take;
    n -= take;
    if (!n)
        return (long)take;
    if (!o->ring && !(o->ring = malloc(o->ring_max)))
        return (long)take; /* out of memory: the rest is left out */
    if (n >= o->ring_max) {
        /* Only the last ring_max bytes of this chunk can survive. */
        memcpy(o->ring, s + n - o->ring_max, o->ring_max);
        o->ring_pos = 0;
        o->ring_len = o->ring_max;
        return (long)take;
    }
    while (n) {
        size_t part = o->ring_max - o->ring_pos;
        if (part > n)
            part = n;
        memcpy(o->ring + o->ring_pos, s, part);
        o->ring_pos = (o->ring_pos + part) % o->ring_max;
        o->ring_len =
            o->ring_len + part > o->ring_max ? o->ring_max : o->ring_len + part;
        s += part;
        n -= part;
    }
    return (long)take;
}

int hutch_output_finish(struct hutch_output *o, struct hutch_buf *to, size_t *head_len,
                        uint64_t *omitted)
{
    size_t start = o->ring_len < o->ring_max ? 0 : o->ring_pos;
    int r;

    hutch_buf_reset(to);
    r = hutch_buf_append(to, hutch_buf_str(&o->head), o->head.len);
    *head_len = to->len;
    /* The ring in order: from its oldest byte. */
    if (r == 0 && o->ring_len) {
        size_t first = o->ring_len < o->ring_max ? o->ring_len : o->ring_max - start;
        r = hutch_buf_append(to, o->ring + start, first);
        if (r == 0 && first < o->ring_len)
            r = hutch_buf_append(to, o->ring, o->ring_len - first);
    }
    *omitted = o->total > to->len ? o->total - to->len : 0;
    return r;
}

void hutch_output_free(struct hutch_output *o)
{
    hutch_buf_free(&o->head);
    free(o->ring);
    o->ring = NULL;
    o->ring_len = o->ring_pos = 0;
}

void hutch_output_marker(char *buf, size_t len, const char *stream, uint64_t omitted)
{
    snprintf(buf, len, "\n[… %llu bytes of %s left out …]\n",
             (unsigned long long)omitted, stream);
}
