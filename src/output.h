/* output.h — what is kept of one output stream of a program: its first
 * bytes and its last bytes, at most `limit` together, and how many bytes
 * were left out between them.
 *
 * Why head and tail: a program's first lines say what it set out to do, its
 * last ones how it ended (the summary, the traceback); the middle of a
 * chatty program is what a model can least use.  Up to `limit` bytes
 * nothing is lost; past it the first limit - limit/2 bytes and the last
 * limit/2 are kept.
 *
 * Not here: reading the stream (exec.c), the limit's value (job.c), how
 * the cut is shown (hutch_output_marker and its users).  One owner at a
 * time. */
#ifndef HUTCH_OUTPUT_H
#define HUTCH_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct hutch_output {
    struct hutch_buf head; /* the first bytes, up to head_max */
    char *ring;            /* the last bytes seen past the head */
    size_t ring_max, ring_len, ring_pos;
    uint64_t total; /* bytes fed, kept or not */
};

/* Keeps at most `limit` bytes (at least 2).  Allocates nothing yet. */
void hutch_output_init(struct hutch_output *o, size_t limit);
/* Feeds n bytes.  Returns how many of them, from the start of p, went to
 * the head (a live copy may show them now; the rest is known only at the
 * end).  When memory runs out, what could not be kept counts as left
 * out. */
long hutch_output_feed(struct hutch_output *o, const void *p, size_t n);
/* Moves what is kept into `to` (emptied first; its max must be at least
 * the limit): the head, then the tail.  *head_len is the head's length, the
 * place where bytes were left out when *omitted (total - kept) is not 0. */
int hutch_output_finish(struct hutch_output *o, struct hutch_buf *to, size_t *head_len,
                        uint64_t *omitted);
void hutch_output_free(struct hutch_output *o);

/* The line shown where bytes were left out:
 * "\n[… 123456 bytes of stdout left out …]\n" (a static buffer's worth:
 * len is its size). */
void hutch_output_marker(char *buf, size_t len, const char *stream, uint64_t omitted);

#endif
