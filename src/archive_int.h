/* archive_int.h — what the archive*.c files share, and nobody else: the
 * set of entries a tar creates, the judge's reader, and the helpers for
 * limits, paths and messages.  Not an API (that is hutch_archive.h), and not
 * installed.
 *
 *   archive.c          the limits, the path rule, the set of entries, and
 *                      the one judge of an untrusted tar with its read-only
 *                      users (hutch_archive_list, hutch_archive_read_files)
 *   archive_extract.c  the safe unpacker: hutch_archive_extract
 *   archive_pack.c     writing tar: hutch_archive_pack_dir,
 *                      hutch_archive_filter and the builder (hutch_tar_*)
 *
 * archive_extract.c and archive_pack.c call only archive.c, never each
 * other.  Every reader of a tar from outside goes through the judge below
 * (ar_judge_tar, ar_judge_walk, ar_judge_next): no other file reads a tar
 * header.  None of this holds a lock or global state; every call works on
 * what its caller hands it. */
#ifndef HUTCH_ARCHIVE_INT_H
#define HUTCH_ARCHIVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "archive_lib.h"
#include "hutch_archive.h"

/* Bytes read or written at a time, file data included. */
#define IO_CHUNK (64u * 1024u)

/* Paths in error messages come from untrusted tars: at most QUOTE_MAX bytes
 * of one are shown, escaped (see ar_quote_n). */
#define QUOTE_MAX 160
struct qbuf {
    char s[QUOTE_MAX * 4 + 8];
};

/* What the destination has at an entry's path (extract's check_dest). */
enum { DEST_ABSENT = 0, DEST_PRESENT };
/* What extract's move into place did with an entry. */
enum {
    DONE_NONE = 0,
    DONE_MERGED,
    DONE_MOVED,
    DONE_UNDER,
    DONE_EXCHANGED,
    DONE_REPLACED
};

/* One path a tar creates. */
struct xent {
    char *path; /* normalized: no "./" prefix, no trailing "/" */
    size_t len;
    uint32_t depth;
    bool is_dir;
    bool implied;       /* a parent directory no entry names */
    mode_t mode;        /* what the file gets: 0644, 0755 */
    uint64_t size;      /* from the header */
    const char *origin; /* implied dirs: path of an entry below it */
    int dest;           /* DEST_*: what the destination already has */
    int done;           /* DONE_*: what the move into place did */
};

/* Entries in tar order in v[0..nent), then implied directories; `sorted`
 * orders all of them as a tree walk would (pcmp), parents before children. */
struct xset {
    struct xent *v;
    size_t n, nent, cap;
    struct xent **sorted;
};

/* What a reader does with what pack_dir would never have written. */
enum judge_how {
    JUDGE_STRICT,    /* refuse the tar: extract, list, read_files */
    JUDGE_AS_PACKER, /* drop links and special files, normalise modes: filter */
};

/* One pass over a tar's headers. */
struct judge {
    struct archive *a;
    const void *tar;
    size_t len;
    const struct hutch_archive_limits *lim;
    enum judge_how how;
    size_t nread;   /* headers read */
    uint64_t total; /* bytes of file data the accepted entries declare */
};

/* Called by ar_judge_walk() for each entry, the archive at its data. */
typedef int (*ar_judged_fn)(void *arg, struct archive *a, const struct xent *x,
                            struct hutch_err *err);

/* --- limits, the path rule, messages (archive.c) --- */

/* lim, or the defaults for untrusted tars (hutch_archive_limits_out) in tmp. */
const struct hutch_archive_limits *
ar_limits_or_default(const struct hutch_archive_limits *lim,
                     struct hutch_archive_limits *tmp);
/* Whether lim (from a plugin, maybe) covers every member ABI 2 has. */
bool ar_limits_ok(const struct hutch_archive_limits *lim);
/* The error for limits ar_limits_ok() refused. */
int ar_limits_refused(const struct hutch_archive_limits *lim, struct hutch_err *err);
/* s[0..n) printable, short and valid UTF-8, in q. */
const char *ar_quote_n(struct qbuf *q, const char *s, size_t n);
const char *ar_quote(struct qbuf *q, const char *s);
/* Why p[0..n) is not an acceptable relative path (maybe in buf), or NULL. */
const char *ar_relpath_problem(const char *p, size_t n,
                               const struct hutch_archive_limits *lim, char *buf,
                               size_t bufsz);
/* The number of components of the acceptable path p[0..n). */
uint32_t ar_path_depth(const char *p, size_t n);

/* --- the set of entries (archive.c) --- */

void ar_xset_free(struct xset *xs);
/* Appends *x; takes ownership of x->path, also on failure. */
int ar_xset_push(struct xset *xs, struct xent *x);
/* The entry at p[0..len), from a sorted set, or NULL. */
struct xent *ar_xset_find(const struct xset *xs, const char *p, size_t len);
/* The rules about the set as a whole; adds implied directories and sorts. */
int ar_xset_validate(struct xset *xs, const struct hutch_archive_limits *lim,
                     struct hutch_err *err);

/* --- the judge (archive.c); libarchive loaded by the caller --- */

int ar_judge_open(struct judge *j, const void *tar, size_t len,
                  const struct hutch_archive_limits *lim, enum judge_how how,
                  struct hutch_err *err);
void ar_judge_close(struct judge *j);
/* 1 at the end, 0 with *e and x set (x->path NULL: skip it), or <0. */
int ar_judge_next(struct judge *j, struct archive_entry **e, struct xent *x,
                  struct hutch_err *err);
/* Whether a tar is acceptable, from its headers; on 0, its entries in xs. */
int ar_judge_tar(const void *tar, size_t len, const struct hutch_archive_limits *lim,
                 enum judge_how how, struct xset *xs, struct hutch_err *err);
/* A second pass over a tar ar_judge_tar() accepted into xs, calling fn. */
int ar_judge_walk(const void *tar, size_t len, const struct hutch_archive_limits *lim,
                  const struct xset *xs, ar_judged_fn fn, void *arg,
                  struct hutch_err *err);

#endif
