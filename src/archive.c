/* archive.c — the one judge of an untrusted tar, on top of libarchive.
 *
 * Here: the default tar limits, the path rule every tar path obeys
 * (hutch_archive_check_relpath), the set of entries a tar creates, the
 * judge that reads every header of a tar from outside (ar_judge_*), and its
 * read-only users: hutch_archive_list and hutch_archive_read_files.  Not
 * here: unpacking to disk (archive_extract.c), writing tar streams
 * (archive_pack.c: pack_dir, the filter, the builder), the byte buffer
 * (buf.c), anything about sandboxes or executors.  What these files share
 * is in archive_int.h; the others call this one, never the other way.
 *
 * libarchive parses tar headers and nothing else: a tar is accepted or
 * refused here, from its headers, before any reader sees its data, so that
 * the same entry is judged the same way by every reader.  Nothing here
 * writes to the file system or keeps state between calls. */
#include "hutch_archive.h"

/* libarchive's <archive.h>; every call goes through the lazily loaded
 * library's table, hutch_la, by name. */
#include "archive_lib.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive_int.h"
#include "caps.h"

/* ---------------------------------------------------------------------- */
/* Limits and the path rule */

void hutch_archive_limits_in(struct hutch_archive_limits *lim)
{
    lim->struct_size = sizeof(*lim);
    lim->max_bytes = HUTCH_TAR_IN_MAX_BYTES;
    lim->max_entries = HUTCH_TAR_MAX_ENTRIES;
    lim->max_path = HUTCH_TAR_MAX_PATH;
    lim->max_depth = HUTCH_TAR_MAX_DEPTH;
}

void hutch_archive_limits_out(struct hutch_archive_limits *lim)
{
    lim->struct_size = sizeof(*lim);
    lim->max_bytes = HUTCH_TAR_OUT_MAX_BYTES;
    lim->max_entries = HUTCH_TAR_MAX_ENTRIES;
    lim->max_path = HUTCH_TAR_MAX_PATH;
    lim->max_depth = HUTCH_TAR_MAX_DEPTH;
}

/* A NULL `lim` means the defaults for untrusted (outgoing) tars. */
const struct hutch_archive_limits *
ar_limits_or_default(const struct hutch_archive_limits *lim,
                     struct hutch_archive_limits *tmp)
{
    if (lim)
        return lim;
    hutch_archive_limits_out(tmp);
    return tmp;
}

/* Limits come from plugins too: they must cover every member ABI 2 has (a
 * struct_size left 0 does not); a later, larger struct is read as far as
 * this one goes. */
bool ar_limits_ok(const struct hutch_archive_limits *lim)
{
    return !lim || HUTCH_HAS_MEMBER(lim, struct hutch_archive_limits, max_depth);
}

int ar_limits_refused(const struct hutch_archive_limits *lim, struct hutch_err *err)
{
    return hutch_err_set(err, -EINVAL,
                         "tar limits with struct_size %u: set it to "
                         "sizeof(struct hutch_archive_limits)",
                         lim->struct_size);
}

/* Paths in error messages come from untrusted tars: keep them printable and
 * short (non-ASCII bytes are escaped too, so a message is always valid
 * UTF-8 for whoever turns it into JSON). */
const char *ar_quote_n(struct qbuf *q, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, o = 0;

    for (i = 0; i < n && i < QUOTE_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            q->s[o++] = (char)c;
        } else {
            q->s[o++] = '\\';
            q->s[o++] = 'x';
            q->s[o++] = hex[c >> 4];
            q->s[o++] = hex[c & 15];
        }
    }
    if (i < n) {
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o] = '\0';
    return q->s;
}

const char *ar_quote(struct qbuf *q, const char *s)
{
    return ar_quote_n(q, s, strlen(s));
}

/* A control character at p[j] (n bytes in all): C0, DEL, or C1 in UTF-8
 * (U+0080..U+009F, C2 80..C2 9F).  A name holding one would forge lines of
 * a listing or drive the terminal that shows it (an OSC 52 escape writes
 * the clipboard), so no name may hold one. */
static bool control_at(const char *p, size_t j, size_t n)
{
    unsigned char c = (unsigned char)p[j];
    return c < 0x20 || c == 0x7f ||
           (c == 0xc2 && j + 1 < n && (unsigned char)p[j + 1] >= 0x80 &&
            (unsigned char)p[j + 1] <= 0x9f);
}

/* Why p[0..n) is not an acceptable relative path, or NULL.  Components are
 * checked first, so "a/../../x" is reported for its "..", not its length. */
const char *ar_relpath_problem(const char *p, size_t n,
                               const struct hutch_archive_limits *lim, char *buf,
                               size_t bufsz)
{
    size_t i = 0, depth = 0;

    if (n == 0)
        return "empty path";
    if (p[0] == '/')
        return "absolute paths are not allowed";
    while (i <= n) {
        size_t j = i;
        while (j < n && p[j] != '/') {
            if (control_at(p, j, n))
                return "control characters (a newline, a tab, an escape, U+0080 to "
                       "U+009F) are not allowed in names";
            j++;
        }
        if (j == i)
            return "empty path components (\"//\" or a trailing \"/\") are not allowed";
        if (j - i == 1 && p[i] == '.')
            return "\".\" is not allowed in paths";
        if (j - i == 2 && p[i] == '.' && p[i + 1] == '.')
            return "\"..\" is not allowed in paths";
        if (j - i > HUTCH_TAR_MAX_NAME) {
            snprintf(buf, bufsz, "a path component is longer than %u bytes (limit)",
                     (unsigned)HUTCH_TAR_MAX_NAME);
            return buf;
        }
        depth++;
        i = j + 1;
    }
    if (n > lim->max_path) {
        snprintf(buf, bufsz, "path is longer than %" PRIu32 " bytes (limit)",
                 lim->max_path);
        return buf;
    }
    if (depth > lim->max_depth) {
        snprintf(buf, bufsz, "path has more than %" PRIu32 " components (limit)",
                 lim->max_depth);
        return buf;
    }
    return NULL;
}

int hutch_archive_check_relpath(const char *path,
                                const struct hutch_archive_limits *lim,
                                struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct qbuf q;
    char why[128];
    const char *bad;

    if (!path)
        return hutch_err_set(err, -EINVAL, "no path given");
    if (!ar_limits_ok(lim))
        return ar_limits_refused(lim, err);
    lim = ar_limits_or_default(lim, &dl);
    bad = ar_relpath_problem(path, strlen(path), lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "path \"%s\": %s", ar_quote(&q, path), bad);
    return 0;
}

uint32_t ar_path_depth(const char *p, size_t n)
{
    uint32_t d = 1;
    for (size_t i = 0; i < n; i++)
        d += p[i] == '/';
    return d;
}

/* ---------------------------------------------------------------------- */
/* The set of paths a tar creates */

void ar_xset_free(struct xset *xs)
{
    for (size_t i = 0; i < xs->n; i++)
        free(xs->v[i].path);
    free(xs->v);
    free(xs->sorted);
    memset(xs, 0, sizeof(*xs));
}

/* Takes ownership of x->path, also on failure. */
int ar_xset_push(struct xset *xs, struct xent *x)
{
    if (xs->n == xs->cap) {
        size_t ncap = xs->cap ? xs->cap * 2 : 64;
        struct xent *nv = realloc(xs->v, ncap * sizeof(*nv));
        if (!nv) {
            free(x->path);
            x->path = NULL;
            return -ENOMEM;
        }
        xs->v = nv;
        xs->cap = ncap;
    }
    xs->v[xs->n++] = *x;
    x->path = NULL;
    return 0;
}

/* Tree order: byte order with '/' below every other byte, so a directory
 * comes first and everything under it right after (preorder). */
static int pcmp(const char *a, size_t la, const char *b, size_t lb)
{
    size_t n = la < lb ? la : lb;

    for (size_t i = 0; i < n; i++) {
        unsigned ca = a[i] == '/' ? 0 : (unsigned char)a[i];
        unsigned cb = b[i] == '/' ? 0 : (unsigned char)b[i];
        if (ca != cb)
            return ca < cb ? -1 : 1;
    }
    return la < lb ? -1 : la > lb;
}

static int xent_ptr_cmp(const void *a, const void *b)
{
    const struct xent *x = *(const struct xent *const *)a;
    const struct xent *y = *(const struct xent *const *)b;
    return pcmp(x->path, x->len, y->path, y->len);
}

struct xkey {
    const char *p;
    size_t len;
};

static int xkey_cmp(const void *k, const void *elem)
{
    const struct xkey *key = k;
    const struct xent *y = *(const struct xent *const *)elem;
    return pcmp(key->p, key->len, y->path, y->len);
}

static int xset_sort(struct xset *xs)
{
    struct xent **s = realloc(xs->sorted, (xs->n ? xs->n : 1) * sizeof(*s));

    if (!s)
        return -ENOMEM;
    xs->sorted = s;
    for (size_t i = 0; i < xs->n; i++)
        s[i] = &xs->v[i];
    if (xs->n > 1)
        qsort(s, xs->n, sizeof(*s), xent_ptr_cmp);
    return 0;
}

struct xent *ar_xset_find(const struct xset *xs, const char *p, size_t len)
{
    struct xkey key = {p, len};
    struct xent **hit;

    if (xs->n == 0)
        return NULL;
    hit = bsearch(&key, xs->sorted, xs->n, sizeof(*xs->sorted), xkey_cmp);
    return hit ? *hit : NULL;
}

struct pref {
    const char *p;
    size_t len;
    uint32_t depth;
    const char *origin;
};

static int pref_cmp(const void *a, const void *b)
{
    const struct pref *x = a, *y = b;
    return pcmp(x->p, x->len, y->p, y->len);
}

/* Checks the entries as a whole: no path twice, no file used as a directory,
 * and entries plus the parent directories they imply within
 * lim->max_entries (implied parents are created by extract, so they count).
 * Adds the implied directories to xs and sorts it. */
int ar_xset_validate(struct xset *xs, const struct hutch_archive_limits *lim,
                     struct hutch_err *err)
{
    struct pref *pv = NULL;
    size_t np = 0, pcap = 0, nimp = 0;
    struct qbuf q1, q2;
    int r;

    r = xset_sort(xs);
    if (r < 0)
        goto out;
    for (size_t i = 1; i < xs->n; i++) {
        if (xent_ptr_cmp(&xs->sorted[i - 1], &xs->sorted[i]) == 0) {
            r = hutch_err_set(err, -EINVAL, "tar entry \"%s\": appears more than once",
                              ar_quote(&q1, xs->sorted[i]->path));
            goto out;
        }
    }
    for (size_t i = 0; i < xs->nent; i++) {
        const struct xent *e = &xs->v[i];
        uint32_t d = 0;
        for (size_t k = 0; k < e->len; k++) {
            struct xent *f;
            if (e->path[k] != '/')
                continue;
            d++;
            f = ar_xset_find(xs, e->path, k);
            if (f && !f->is_dir) {
                r = hutch_err_set(
                    err, -EINVAL,
                    "tar entry \"%s\": \"%s\" is a file in this tar, not a directory",
                    ar_quote(&q1, e->path), ar_quote_n(&q2, e->path, k));
                goto out;
            }
            if (f)
                continue;
            if (np == pcap) {
                size_t ncap = pcap ? pcap * 2 : 64;
                struct pref *n = realloc(pv, ncap * sizeof(*n));
                if (!n) {
                    r = hutch_err_set(err, -ENOMEM,
                                      "out of memory checking tar entries");
                    goto out;
                }
                pv = n;
                pcap = ncap;
            }
            pv[np++] = (struct pref){e->path, k, d, e->path};
        }
    }
    if (np > 1)
        qsort(pv, np, sizeof(*pv), pref_cmp);
    for (size_t i = 0; i < np; i++)
        if (i == 0 || pref_cmp(&pv[i - 1], &pv[i]) != 0)
            pv[nimp++] = pv[i];
    if (xs->nent + nimp > lim->max_entries) {
        r = hutch_err_set(err, -E2BIG,
                          "tar creates more than %" PRIu32
                          " files and directories (limit; "
                          "parent directories it implies count too)",
                          lim->max_entries);
        goto out;
    }
    for (size_t i = 0; i < nimp; i++) {
        struct xent x = {0};
        x.path = strndup(pv[i].p, pv[i].len);
        if (!x.path) {
            r = hutch_err_set(err, -ENOMEM, "out of memory checking tar entries");
            goto out;
        }
        x.len = pv[i].len;
        x.depth = pv[i].depth;
        x.is_dir = true;
        x.implied = true;
        x.mode = 0755;
        x.origin = pv[i].origin; /* an entry's path string: outlives reallocs of v */
        r = ar_xset_push(xs, &x);
        if (r < 0) {
            hutch_err_set(err, r, "out of memory checking tar entries");
            goto out;
        }
    }
    r = xset_sort(xs);
    if (r < 0)
        hutch_err_set(err, r, "out of memory checking tar entries");
out:
    free(pv);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Reading tar headers */

/* What compressed or foreign input looks like, to say so instead of
 * libarchive's "Unrecognized archive format". */
static const char *sniff_not_tar(const void *data, size_t len)
{
    static const struct {
        const char *magic;
        size_t n;
        const char *what;
    } m[] = {
        {"\x1f\x8b", 2, "gzip-compressed"},
        {"BZh", 3, "bzip2-compressed"},
        {"\xfd\x37\x7a\x58\x5a\x00", 6, "xz-compressed"},
        {"\x28\xb5\x2f\xfd", 4, "zstd-compressed"},
        {"\x04\x22\x4d\x18", 4, "lz4-compressed"},
        {"\x1f\x9d", 2, "compress(1)-compressed"},
        {"LZIP", 4, "lzip-compressed"},
        {"PK\x03\x04", 4, "a zip archive"},
        {"7z\xbc\xaf\x27\x1c", 6, "a 7z archive"},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (len >= m[i].n && memcmp(data, m[i].magic, m[i].n) == 0)
            return m[i].what;
    return NULL;
}

static int reader_open(struct archive **out, const void *tar, size_t len,
                       struct hutch_err *err)
{
    struct archive *a = hutch_la.archive_read_new();

    *out = NULL;
    if (!a)
        return hutch_err_set(err, -ENOMEM, "out of memory reading a tar");
    /* Tar (ustar, pax, GNU, v7) only, and no decompression filter: the
     * only filter libarchive applies without being asked is "none". */
    if (hutch_la.archive_read_support_format_tar(a) != ARCHIVE_OK ||
        hutch_la.archive_read_open_memory(a, tar, len) != ARCHIVE_OK) {
        const char *what = sniff_not_tar(tar, len);
        int r;
        if (what)
            r = hutch_err_set(err, -EINVAL,
                              "input is %s; only an uncompressed tar is accepted",
                              what);
        else
            r = hutch_err_set(err, -EINVAL, "input is not a tar archive: %s",
                              hutch_la.archive_error_string(a)
                                  ? hutch_la.archive_error_string(a)
                                  : "unknown error");
        hutch_la.archive_read_free(a);
        return r;
    }
    *out = a;
    return 0;
}

/* 1 at the end of the tar, 0 with *e set, or a negative errno. */
static int read_header(struct archive *a, struct archive_entry **e, const void *tar,
                       size_t len, size_t nread, struct hutch_err *err)
{
    int r = hutch_la.archive_read_next_header(a, e);
    const char *s, *what;

    if (r == ARCHIVE_EOF)
        return 1;
    /* A warning is about metadata we do not use (charset conversion of a
     * name, unknown pax keys): every field we use is checked below. */
    if (r == ARCHIVE_OK || r == ARCHIVE_WARN)
        return 0;
    s = hutch_la.archive_error_string(a) ? hutch_la.archive_error_string(a)
                                         : "unknown error";
    if (nread > 0)
        return hutch_err_set(err, -EINVAL, "tar is damaged after entry %zu: %s", nread,
                             s);
    what = sniff_not_tar(tar, len);
    if (what)
        return hutch_err_set(err, -EINVAL,
                             "input is %s; only an uncompressed tar is accepted", what);
    return hutch_err_set(err, -EINVAL, "input is not a tar archive: %s", s);
}

/* ---------------------------------------------------------------------- */
/* The judge of an untrusted tar
 *
 * Every reader of a tar that came from outside (extract, list, read_files,
 * filter) reads its headers through ar_judge_next(), so the same entry is
 * judged the same way everywhere: its type and mode bits (judge_entry), its
 * path (ar_relpath_problem: absolute, "..", ".", empty components, control
 * characters, component, path and depth caps), the number of headers, and
 * the bytes of file data
 * declared.  ar_judge_tar() adds the rules about the set as a whole
 * (ar_xset_validate: no path twice, no file used as a directory, implied
 * parent directories within the entry cap) and is what decides whether a
 * tar is acceptable; extract, list and read_files all start with it. */

/* Checks one header on its own and fills x (x->path allocated).  x->path
 * stays NULL for an entry to skip: the top directory itself ("." or "./",
 * as `tar -C dir .` writes), or, as a packer, a link or special file. */
static int judge_entry(struct archive_entry *e, const struct hutch_archive_limits *lim,
                       enum judge_how how, struct xent *x, struct hutch_err *err)
{
    const char *raw, *p, *bad, *kind = NULL;
    struct qbuf q;
    char why[128];
    mode_t mode;
    size_t n;
    bool is_dir = false;

    memset(x, 0, sizeof(*x));
    raw = hutch_la.archive_entry_pathname(e);
    if (!raw)
        raw = hutch_la.archive_entry_pathname_utf8(e);
    if (!raw)
        return hutch_err_set(err, -EINVAL, "tar entry without a usable path");
    if (hutch_la.archive_entry_hardlink(e)) {
        kind = "hard links are not allowed";
    } else {
        switch (hutch_la.archive_entry_filetype(e)) {
        case AE_IFREG:
            break;
        case AE_IFDIR:
            is_dir = true;
            break;
        case AE_IFLNK:
            kind = "symbolic links are not allowed";
            break;
        case AE_IFCHR:
        case AE_IFBLK:
            kind = "device files are not allowed";
            break;
        case AE_IFIFO:
            kind = "fifos are not allowed";
            break;
        case AE_IFSOCK:
            kind = "sockets are not allowed";
            break;
        default:
            kind = "only regular files and directories are allowed";
            break;
        }
    }
    if (kind && how == JUDGE_AS_PACKER)
        return 0; /* pack_dir skips these */
    if (kind)
        return hutch_err_set(err, -EINVAL, "tar entry \"%s\": %s", ar_quote(&q, raw),
                             kind);
    mode = hutch_la.archive_entry_mode(e);
    if ((mode & (S_ISUID | S_ISGID | S_ISVTX)) && how == JUDGE_STRICT)
        return hutch_err_set(
            err, -EINVAL,
            "tar entry \"%s\": setuid, setgid and sticky bits are not allowed",
            ar_quote(&q, raw));

    if (is_dir && (!strcmp(raw, ".") || !strcmp(raw, "./")))
        return 0;
    p = raw;
    if (p[0] == '.' && p[1] == '/')
        p += 2;
    n = strlen(p);
    if (is_dir && n > 1 && p[n - 1] == '/')
        n--;
    bad = ar_relpath_problem(p, n, lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "tar entry \"%s\": %s", ar_quote(&q, raw),
                             bad);
    if (!is_dir) {
        int64_t sz = hutch_la.archive_entry_size(e);
        if (sz < 0)
            return hutch_err_set(err, -EINVAL, "tar entry \"%s\": negative size",
                                 ar_quote(&q, raw));
        x->size = (uint64_t)sz;
    }
    x->path = strndup(p, n);
    if (!x->path)
        return hutch_err_set(err, -ENOMEM, "out of memory reading a tar");
    x->len = n;
    x->depth = ar_path_depth(p, n);
    x->is_dir = is_dir;
    x->mode = (is_dir || (mode & 0111)) ? 0755 : 0644;
    return 0;
}

int ar_judge_open(struct judge *j, const void *tar, size_t len,
                  const struct hutch_archive_limits *lim, enum judge_how how,
                  struct hutch_err *err)
{
    memset(j, 0, sizeof(*j));
    j->tar = tar;
    j->len = len;
    j->lim = lim;
    j->how = how;
    return reader_open(&j->a, tar, len, err);
}

void ar_judge_close(struct judge *j)
{
    if (j->a)
        hutch_la.archive_read_free(j->a);
    j->a = NULL;
}

/* The next entry: 1 at the end of the tar, 0 with *e and x set (x->path
 * NULL: skip this entry; else the caller owns x->path), or a negative code
 * when the tar is refused. */
int ar_judge_next(struct judge *j, struct archive_entry **e, struct xent *x,
                  struct hutch_err *err)
{
    const struct hutch_archive_limits *lim = j->lim;
    struct qbuf q;
    int r;

    r = read_header(j->a, e, j->tar, j->len, j->nread, err);
    if (r != 0)
        return r;
    if (++j->nread > lim->max_entries)
        return hutch_err_set(err, -E2BIG,
                             "tar has more than %" PRIu32 " entries (limit)",
                             lim->max_entries);
    r = judge_entry(*e, lim, j->how, x, err);
    if (r < 0)
        return r;
    if (x->path && x->size > lim->max_bytes - j->total) {
        r = hutch_err_set(err, -E2BIG,
                          "tar entry \"%s\": tar holds more than %" PRIu64
                          " bytes of file data (limit)",
                          ar_quote(&q, x->path), lim->max_bytes);
        free(x->path);
        x->path = NULL;
        return r;
    }
    j->total += x->size;
    return 0;
}

/* Whether an untrusted tar is acceptable, from its headers alone (no data
 * read, nothing written); on 0, xs holds its entries in tar order and the
 * parent directories they imply.  `how` as for ar_judge_open: the filter's
 * entries are those it keeps, under the same rules for the whole set. */
int ar_judge_tar(const void *tar, size_t len, const struct hutch_archive_limits *lim,
                 enum judge_how how, struct xset *xs, struct hutch_err *err)
{
    struct judge j;
    struct archive_entry *e;
    int r;

    r = ar_judge_open(&j, tar, len, lim, how, err);
    if (r < 0)
        return r;
    for (;;) {
        struct xent x;
        r = ar_judge_next(&j, &e, &x, err);
        if (r < 0)
            goto out;
        if (r == 1)
            break;
        if (x.path) {
            r = ar_xset_push(xs, &x);
            if (r < 0) {
                hutch_err_set(err, r, "out of memory reading a tar");
                goto out;
            }
        }
        r = hutch_la.archive_read_data_skip(j.a);
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            r = hutch_err_set(err, -EINVAL, "tar is damaged at entry %zu: %s", j.nread,
                              hutch_la.archive_error_string(j.a)
                                  ? hutch_la.archive_error_string(j.a)
                                  : "unknown error");
            goto out;
        }
    }
    xs->nent = xs->n;
    ar_judge_close(&j);
    return ar_xset_validate(xs, lim, err);
out:
    ar_judge_close(&j);
    return r;
}

/* What every reader that wants the data does after ar_judge_tar(): walk the
 * same tar again, calling fn for each entry ar_judge_tar() put in xs, with the
 * archive at that entry's data.  The tar is the same bytes; it is checked
 * to read the same anyway.  fn returns <0 to fail, >0 to stop early. */
int ar_judge_walk(const void *tar, size_t len, const struct hutch_archive_limits *lim,
                  const struct xset *xs, ar_judged_fn fn, void *arg,
                  struct hutch_err *err)
{
    struct judge j;
    struct archive_entry *e;
    size_t idx = 0;
    int r;

    r = ar_judge_open(&j, tar, len, lim, JUDGE_STRICT, err);
    if (r < 0)
        return r;
    for (;;) {
        struct xent x;
        const struct xent *want;
        bool same;

        r = ar_judge_next(&j, &e, &x, err);
        if (r < 0)
            goto out;
        if (r == 1) {
            r = 0;
            break;
        }
        if (!x.path)
            continue;
        want = idx < xs->nent ? &xs->v[idx] : NULL;
        same = want && !strcmp(x.path, want->path) && x.is_dir == want->is_dir &&
               x.size == want->size;
        free(x.path);
        if (!same) {
            r = hutch_err_set(
                err, -EIO, "tar read differently the second time (entry %zu)", j.nread);
            goto out;
        }
        idx++;
        r = fn(arg, j.a, want, err);
        if (r != 0)
            goto out;
    }
    if (idx != xs->nent)
        r = hutch_err_set(err, -EIO,
                          "tar read differently the second time (%zu entries)", idx);
out:
    ar_judge_close(&j);
    return r < 0 ? r : 0;
}

int hutch_archive_list(const void *tar, size_t len,
                       const struct hutch_archive_limits *lim, hutch_tar_entry_fn fn,
                       void *arg, struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct xset xs = {0};
    int r;

    lim = ar_limits_or_default(lim, &dl);
    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    r = ar_judge_tar(tar, len, lim, JUDGE_STRICT, &xs, err);
    for (size_t i = 0; r == 0 && fn && i < xs.nent; i++)
        if (fn(arg, xs.v[i].path, xs.v[i].is_dir, xs.v[i].size))
            break;
    ar_xset_free(&xs);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Reading the files' data */

/* Pass 2 of read_files: each file's bytes, NUL-terminated, to fn. */
struct reading {
    size_t max_file;
    hutch_tar_file_fn fn;
    void *arg;
    char *data;
};

static int read_one(void *arg, struct archive *a, const struct xent *x,
                    struct hutch_err *err)
{
    struct reading *rd = arg;
    struct qbuf q;

    if (x->is_dir)
        return 0;
    if (x->size > rd->max_file)
        return rd->fn(rd->arg, x->path, NULL, (size_t)x->size) ? 1 : 0;
    free(rd->data);
    rd->data = malloc((size_t)x->size + 1);
    if (!rd->data)
        return hutch_err_set(err, -ENOMEM, "out of memory reading \"%s\"",
                             ar_quote(&q, x->path));
    if (hutch_la.archive_read_data(a, rd->data, (size_t)x->size) != (la_ssize_t)x->size)
        return hutch_err_set(err, -EBADMSG, "reading \"%s\" from the result tar: %s",
                             ar_quote(&q, x->path),
                             hutch_la.archive_error_string(a)
                                 ? hutch_la.archive_error_string(a)
                                 : "unknown error");
    rd->data[x->size] = '\0';
    return rd->fn(rd->arg, x->path, rd->data, (size_t)x->size) ? 1 : 0;
}

/* The judge first: a tar it refuses gives no file at all. */
int hutch_archive_read_files(const void *tar, size_t len, size_t max_file,
                             hutch_tar_file_fn fn, void *arg, struct hutch_err *err)
{
    struct hutch_archive_limits lim;
    struct reading rd = {max_file, fn, arg, NULL};
    struct xset xs = {0};
    int r;

    if (!tar || len == 0)
        return 0;
    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    hutch_archive_limits_out(&lim);
    r = ar_judge_tar(tar, len, &lim, JUDGE_STRICT, &xs, err);
    if (r == 0)
        r = ar_judge_walk(tar, len, &lim, &xs, read_one, &rd, err);
    free(rd.data);
    ar_xset_free(&xs);
    return r;
}
