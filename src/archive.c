/* archive.c — tar streams in and out of sandboxes, on top of libarchive.
 *
 * Here: the default tar limits, the path rule every tar path obeys
 * (hutch_archive_check_relpath), the one judge of an untrusted tar and its
 * readers (hutch_archive_list, hutch_archive_read_files, the safe unpacker
 * hutch_archive_extract, the re-packer hutch_archive_filter), the directory
 * packer (hutch_archive_pack_dir) and the in-memory tar builder
 * (hutch_tar_*).  Not here: the byte buffer (buf.c), anything about
 * sandboxes or executors; this file only turns trees into tar bytes and
 * back.
 *
 * libarchive parses and writes tar headers and nothing else.  Every byte
 * that reaches the file system is written here through *at() calls on
 * directory fds opened with O_NOFOLLOW, never by archive_write_disk (it calls
 * umask(), CVE-2023-30571, and makes its own decisions about links). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE */
#endif

#include "hutch_archive.h"

/* libarchive's <archive.h>; every call goes through the lazily loaded
 * library's table, hutch_la, by name. */
#include "archive_lib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"

#define IO_CHUNK (64u * 1024u)

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
static const struct hutch_archive_limits *
limits_or_default(const struct hutch_archive_limits *lim,
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
static bool limits_ok(const struct hutch_archive_limits *lim)
{
    return !lim || HUTCH_HAS_MEMBER(lim, struct hutch_archive_limits, max_depth);
}

static int limits_refused(const struct hutch_archive_limits *lim, struct hutch_err *err)
{
    return hutch_err_set(err, -EINVAL,
                         "tar limits with struct_size %u: set it to "
                         "sizeof(struct hutch_archive_limits)",
                         lim->struct_size);
}

/* Paths in error messages come from untrusted tars: keep them printable and
 * short (non-ASCII bytes are escaped too, so a message is always valid
 * UTF-8 for whoever turns it into JSON). */
#define QUOTE_MAX 160
struct qbuf {
    char s[QUOTE_MAX * 4 + 8];
};

static const char *quote_n(struct qbuf *q, const char *s, size_t n)
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

static const char *quote(struct qbuf *q, const char *s)
{
    return quote_n(q, s, strlen(s));
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
static const char *relpath_problem(const char *p, size_t n,
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
    if (!limits_ok(lim))
        return limits_refused(lim, err);
    lim = limits_or_default(lim, &dl);
    bad = relpath_problem(path, strlen(path), lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "path \"%s\": %s", quote(&q, path), bad);
    return 0;
}

static uint32_t path_depth(const char *p, size_t n)
{
    uint32_t d = 1;
    for (size_t i = 0; i < n; i++)
        d += p[i] == '/';
    return d;
}

/* ---------------------------------------------------------------------- */
/* The set of paths a tar creates */

enum { DEST_ABSENT = 0, DEST_PRESENT };
enum {
    DONE_NONE = 0,
    DONE_MERGED,
    DONE_MOVED,
    DONE_UNDER,
    DONE_EXCHANGED,
    DONE_REPLACED
};

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

static void xset_free(struct xset *xs)
{
    for (size_t i = 0; i < xs->n; i++)
        free(xs->v[i].path);
    free(xs->v);
    free(xs->sorted);
    memset(xs, 0, sizeof(*xs));
}

/* Takes ownership of x->path, also on failure. */
static int xset_push(struct xset *xs, struct xent *x)
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

static struct xent *xset_find(const struct xset *xs, const char *p, size_t len)
{
    struct xkey key = {p, len};
    struct xent **hit;

    if (xs->n == 0)
        return NULL;
    hit = bsearch(&key, xs->sorted, xs->n, sizeof(*xs->sorted), xkey_cmp);
    return hit ? *hit : NULL;
}

static size_t parent_len(const struct xent *x)
{
    const char *slash = memrchr(x->path, '/', x->len);
    return slash ? (size_t)(slash - x->path) : 0;
}

static const char *leaf_name(const struct xent *x)
{
    size_t pl = parent_len(x);
    return x->path + (pl ? pl + 1 : 0);
}

static struct xent *xset_parent(const struct xset *xs, const struct xent *x)
{
    if (x->depth <= 1)
        return NULL;
    return xset_find(xs, x->path, parent_len(x));
}

/* For messages about an implied directory: the entry that needs it. */
static const char *entry_name(const struct xent *x)
{
    return x->implied ? x->origin : x->path;
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
static int xset_validate(struct xset *xs, const struct hutch_archive_limits *lim,
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
                              quote(&q1, xs->sorted[i]->path));
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
            f = xset_find(xs, e->path, k);
            if (f && !f->is_dir) {
                r = hutch_err_set(
                    err, -EINVAL,
                    "tar entry \"%s\": \"%s\" is a file in this tar, not a directory",
                    quote(&q1, e->path), quote_n(&q2, e->path, k));
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
        r = xset_push(xs, &x);
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
/* Directory fds by relative path, one cached */

/* The directories on the path last asked for, one fd per level, so that
 * walking a tree in order opens each directory about once.  Levels past
 * DC_LEVELS are opened afresh each time.  At most DC_LEVELS + 1 fds. */
#define DC_LEVELS 32

struct dcache {
    int root;          /* not owned */
    size_t n;          /* levels held */
    int fd[DC_LEVELS]; /* fd[i] is the directory path[0..end[i]) */
    size_t end[DC_LEVELS];
    int deep; /* beyond DC_LEVELS: the last one returned, or -1 */
    char *path;
    size_t cap;
};

static void dcache_init(struct dcache *c, int root)
{
    c->root = root;
    c->n = 0;
    c->deep = -1;
    c->path = NULL;
    c->cap = 0;
}

static void dcache_pop(struct dcache *c, size_t keep)
{
    if (c->deep >= 0)
        close(c->deep);
    c->deep = -1;
    while (c->n > keep)
        close(c->fd[--c->n]);
}

static void dcache_drop(struct dcache *c)
{
    dcache_pop(c, 0);
    free(c->path);
    dcache_init(c, c->root);
}

/* The directory at path[0..len) below root, opened one component at a time
 * with O_NOFOLLOW.  The fd stays owned by the cache. */
static int dcache_get(struct dcache *c, const char *path, size_t len, int *out)
{
    char name[HUTCH_TAR_MAX_NAME + 1];
    size_t keep = 0, i;
    int cur;

    /* Keep the levels that are a prefix of path[0..len). */
    while (keep < c->n) {
        size_t from = keep ? c->end[keep - 1] : 0, to = c->end[keep];
        if (to > len || (to < len && path[to] != '/') ||
            memcmp(c->path + from, path + from, to - from) != 0)
            break;
        keep++;
    }
    dcache_pop(c, keep);
    if (len + 1 > c->cap) {
        char *np = realloc(c->path, len + 1);
        if (!np)
            return -ENOMEM;
        c->path = np;
        c->cap = len + 1;
    }
    memcpy(c->path, path, len);
    cur = c->n ? c->fd[c->n - 1] : c->root;
    i = c->n ? c->end[c->n - 1] + 1 : 0;
    while (i < len) {
        size_t j = i;
        int nfd;
        while (j < len && path[j] != '/')
            j++;
        if (j - i > HUTCH_TAR_MAX_NAME)
            return -ENAMETOOLONG;
        memcpy(name, path + i, j - i);
        name[j - i] = '\0';
        nfd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0)
            return -errno;
        if (c->n < DC_LEVELS) {
            c->fd[c->n] = nfd;
            c->end[c->n++] = j;
        } else {
            if (c->deep >= 0)
                close(c->deep);
            c->deep = nfd;
        }
        cur = nfd;
        i = j + 1;
    }
    *out = cur;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* File system helpers */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Remove name below pfd and everything under it, never following a link. */
static int rm_tree_at(int pfd, const char *name)
{
    struct stat st;
    struct dirent *de;
    DIR *d;
    int fd, r = 0;

    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(pfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        r = -errno;
        close(fd);
        return r;
    }
    while ((de = readdir(d))) {
        int rr;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        rr = rm_tree_at(dirfd(d), de->d_name);
        if (rr < 0 && r == 0)
            r = rr;
    }
    closedir(d);
    if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && r == 0)
        r = -errno;
    return r;
}

/* renameat2() flags the file system (gVisor, NFS, old kernels) or a seccomp
 * filter refuses; the plain renameat() fallback reports any real error. */
static bool flags_unsupported(int e)
{
    return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EPERM;
}

/* renameat that refuses to replace; falls back to a plain renameat on file
 * systems without RENAME_NOREPLACE (the caller saw ENOENT just before). */
static int rename_new(int sfd, const char *name, int dfd)
{
    if (renameat2(sfd, name, dfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (!flags_unsupported(errno))
        return -errno;
    return renameat(sfd, name, dfd, name) < 0 ? -errno : 0;
}

#define STAGE_PREFIX   ".hutch-unpack-"
#define STAGE_NAME_LEN (sizeof(STAGE_PREFIX) - 1 + 10)

static void stage_name(char *buf /* STAGE_NAME_LEN + 1 */)
{
    static const char cs[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static unsigned counter;
    unsigned char rnd[10];
    size_t o = sizeof(STAGE_PREFIX) - 1;

    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        /* Unpredictability is a nicety here (the name only has to be new,
         * and mkdirat checks that), so a weak fallback is fine. */
        struct timespec ts;
        uint64_t x;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
            ((uint64_t)getpid() << 40) ^ (uint64_t)++counter * 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < sizeof(rnd); i++, x = x * 6364136223846793005ull + 1)
            rnd[i] = (unsigned char)(x >> 56);
    }
    memcpy(buf, STAGE_PREFIX, o);
    for (size_t i = 0; i < sizeof(rnd); i++)
        buf[o++] = cs[rnd[i] % (sizeof(cs) - 1)];
    buf[o] = '\0';
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
 * filter) reads its headers through judge_next(), so the same entry is
 * judged the same way everywhere: its type and mode bits (judge_entry), its
 * path (relpath_problem: absolute, "..", ".", empty components, control
 * characters, component, path and depth caps), the number of headers, and
 * the bytes of file data
 * declared.  judge_tar() adds the rules about the set as a whole
 * (xset_validate: no path twice, no file used as a directory, implied
 * parent directories within the entry cap) and is what decides whether a
 * tar is acceptable; extract, list and read_files all start with it. */

/* What a reader does with what pack_dir would never have written. */
enum judge_how {
    JUDGE_STRICT,    /* refuse the tar: extract, list, read_files */
    JUDGE_AS_PACKER, /* drop links and special files, normalise modes: filter */
};

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
        return hutch_err_set(err, -EINVAL, "tar entry \"%s\": %s", quote(&q, raw),
                             kind);
    mode = hutch_la.archive_entry_mode(e);
    if ((mode & (S_ISUID | S_ISGID | S_ISVTX)) && how == JUDGE_STRICT)
        return hutch_err_set(
            err, -EINVAL,
            "tar entry \"%s\": setuid, setgid and sticky bits are not allowed",
            quote(&q, raw));

    if (is_dir && (!strcmp(raw, ".") || !strcmp(raw, "./")))
        return 0;
    p = raw;
    if (p[0] == '.' && p[1] == '/')
        p += 2;
    n = strlen(p);
    if (is_dir && n > 1 && p[n - 1] == '/')
        n--;
    bad = relpath_problem(p, n, lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "tar entry \"%s\": %s", quote(&q, raw), bad);
    if (!is_dir) {
        int64_t sz = hutch_la.archive_entry_size(e);
        if (sz < 0)
            return hutch_err_set(err, -EINVAL, "tar entry \"%s\": negative size",
                                 quote(&q, raw));
        x->size = (uint64_t)sz;
    }
    x->path = strndup(p, n);
    if (!x->path)
        return hutch_err_set(err, -ENOMEM, "out of memory reading a tar");
    x->len = n;
    x->depth = path_depth(p, n);
    x->is_dir = is_dir;
    x->mode = (is_dir || (mode & 0111)) ? 0755 : 0644;
    return 0;
}

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

static int judge_open(struct judge *j, const void *tar, size_t len,
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

static void judge_close(struct judge *j)
{
    if (j->a)
        hutch_la.archive_read_free(j->a);
    j->a = NULL;
}

/* The next entry: 1 at the end of the tar, 0 with *e and x set (x->path
 * NULL: skip this entry; else the caller owns x->path), or a negative code
 * when the tar is refused. */
static int judge_next(struct judge *j, struct archive_entry **e, struct xent *x,
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
                          quote(&q, x->path), lim->max_bytes);
        free(x->path);
        x->path = NULL;
        return r;
    }
    j->total += x->size;
    return 0;
}

/* Whether an untrusted tar is acceptable, from its headers alone (no data
 * read, nothing written); on 0, xs holds its entries in tar order and the
 * parent directories they imply.  `how` as for judge_open: the filter's
 * entries are those it keeps, under the same rules for the whole set. */
static int judge_tar(const void *tar, size_t len,
                     const struct hutch_archive_limits *lim, enum judge_how how,
                     struct xset *xs, struct hutch_err *err)
{
    struct judge j;
    struct archive_entry *e;
    int r;

    r = judge_open(&j, tar, len, lim, how, err);
    if (r < 0)
        return r;
    for (;;) {
        struct xent x;
        r = judge_next(&j, &e, &x, err);
        if (r < 0)
            goto out;
        if (r == 1)
            break;
        if (x.path) {
            r = xset_push(xs, &x);
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
    judge_close(&j);
    return xset_validate(xs, lim, err);
out:
    judge_close(&j);
    return r;
}

/* What every reader that wants the data does after judge_tar(): walk the
 * same tar again, calling fn for each entry judge_tar() put in xs, with the
 * archive at that entry's data.  The tar is the same bytes; it is checked
 * to read the same anyway.  fn returns <0 to fail, >0 to stop early. */
typedef int (*judged_fn)(void *arg, struct archive *a, const struct xent *x,
                         struct hutch_err *err);

static int judge_walk(const void *tar, size_t len,
                      const struct hutch_archive_limits *lim, const struct xset *xs,
                      judged_fn fn, void *arg, struct hutch_err *err)
{
    struct judge j;
    struct archive_entry *e;
    size_t idx = 0;
    int r;

    r = judge_open(&j, tar, len, lim, JUDGE_STRICT, err);
    if (r < 0)
        return r;
    for (;;) {
        struct xent x;
        const struct xent *want;
        bool same;

        r = judge_next(&j, &e, &x, err);
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
    judge_close(&j);
    return r < 0 ? r : 0;
}

int hutch_archive_list(const void *tar, size_t len,
                       const struct hutch_archive_limits *lim, hutch_tar_entry_fn fn,
                       void *arg, struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct xset xs = {0};
    int r;

    lim = limits_or_default(lim, &dl);
    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    r = judge_tar(tar, len, lim, JUDGE_STRICT, &xs, err);
    for (size_t i = 0; r == 0 && fn && i < xs.nent; i++)
        if (fn(arg, xs.v[i].path, xs.v[i].is_dir, xs.v[i].size))
            break;
    xset_free(&xs);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Extract */

/* Refuses, before anything is written, every entry that would meet a
 * symbolic link, a mount point, or a file of another type in dest. */
static int check_dest(struct xset *xs, int destfd, dev_t dev, struct hutch_err *err)
{
    struct dcache dc;
    struct qbuf q1, q2;
    int r = 0;

    dcache_init(&dc, destfd);
    for (size_t i = 0; i < xs->n; i++) {
        struct xent *x = xs->sorted[i], *par = xset_parent(xs, x);
        const char *why = NULL;
        struct stat st;
        int pfd;

        x->dest = DEST_ABSENT;
        if (par && par->dest != DEST_PRESENT)
            continue;
        r = dcache_get(&dc, x->path, parent_len(x), &pfd);
        if (r < 0) {
            hutch_err_set(
                err, r,
                "tar entry \"%s\": opening its directory in the destination: %s",
                quote(&q1, entry_name(x)), strerror(-r));
            goto out;
        }
        if (fstatat(pfd, leaf_name(x), &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            r = -errno;
            hutch_err_set(err, r, "tar entry \"%s\": checking the destination: %s",
                          quote(&q1, entry_name(x)), strerror(-r));
            goto out;
        }
        if (S_ISLNK(st.st_mode))
            why = "is a symbolic link (not followed)";
        else if (x->is_dir && !S_ISDIR(st.st_mode))
            why = "exists and is not a directory";
        else if (x->is_dir && st.st_dev != dev)
            why = "is a mount point";
        else if (!x->is_dir && S_ISDIR(st.st_mode))
            why = "is a directory";
        else if (!x->is_dir && !S_ISREG(st.st_mode))
            why = "exists and is not a regular file";
        if (why) {
            r = hutch_err_set(err, -EEXIST,
                              "tar entry \"%s\": \"%s\" in the destination %s",
                              quote(&q1, entry_name(x)), quote(&q2, x->path), why);
            goto out;
        }
        x->dest = DEST_PRESENT;
    }
out:
    dcache_drop(&dc);
    return r;
}

/* mkdirat + fchmod: the directory at x, 0755 whatever the umask. */
static int make_dir(struct dcache *sc, const struct xent *x)
{
    int pfd, fd, r;

    r = dcache_get(sc, x->path, parent_len(x), &pfd);
    if (r < 0)
        return r;
    if (mkdirat(pfd, leaf_name(x), 0700) < 0)
        return -errno;
    fd = openat(pfd, leaf_name(x), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    r = fchmod(fd, 0755) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* Every directory, named or implied, parents first. */
static int make_dirs(struct xset *xs, int stagefd, struct hutch_err *err)
{
    struct dcache sc;
    struct qbuf q;
    int r = 0;

    dcache_init(&sc, stagefd);
    for (size_t i = 0; i < xs->n && r == 0; i++) {
        const struct xent *x = xs->sorted[i];
        if (!x->is_dir)
            continue;
        r = make_dir(&sc, x);
        if (r < 0)
            hutch_err_set(err, r, "tar entry \"%s\": creating the directory: %s",
                          quote(&q, entry_name(x)), strerror(-r));
    }
    dcache_drop(&sc);
    return r;
}

static int write_entry(struct archive *a, struct dcache *sc, const struct xent *x,
                       const struct hutch_archive_limits *lim, uint64_t *total,
                       char *buf, struct hutch_err *err)
{
    struct qbuf q;
    uint64_t got = 0;
    int pfd, fd = -1, r;

    r = dcache_get(sc, x->path, parent_len(x), &pfd);
    if (r < 0) {
        hutch_err_set(err, r, "tar entry \"%s\": opening its directory: %s",
                      quote(&q, x->path), strerror(-r));
        goto out;
    }
    fd = openat(pfd, leaf_name(x), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd < 0) {
        r = -errno;
        hutch_err_set(err, r, "tar entry \"%s\": creating the file: %s",
                      quote(&q, x->path), strerror(-r));
        goto out;
    }
    for (;;) {
        la_ssize_t n = hutch_la.archive_read_data(a, buf, IO_CHUNK);
        if (n < 0) {
            r = hutch_err_set(err, -EINVAL, "tar entry \"%s\": reading its data: %s",
                              quote(&q, x->path),
                              hutch_la.archive_error_string(a)
                                  ? hutch_la.archive_error_string(a)
                                  : "unknown error");
            goto out;
        }
        if (n == 0)
            break;
        /* Count what really comes out: pax and sparse headers can declare
         * one size and carry another. */
        got += (uint64_t)n;
        if (got > x->size) {
            r = hutch_err_set(err, -EINVAL,
                              "tar entry \"%s\": more data than its header declares",
                              quote(&q, x->path));
            goto out;
        }
        if ((uint64_t)n > lim->max_bytes - *total) {
            r = hutch_err_set(err, -E2BIG,
                              "tar entry \"%s\": tar holds more than %" PRIu64
                              " bytes of file data (limit)",
                              quote(&q, x->path), lim->max_bytes);
            goto out;
        }
        *total += (uint64_t)n;
        r = write_all(fd, buf, (size_t)n);
        if (r < 0) {
            hutch_err_set(err, r, "tar entry \"%s\": writing: %s", quote(&q, x->path),
                          strerror(-r));
            goto out;
        }
    }
    if (fchmod(fd, x->mode) < 0) {
        r = -errno;
        hutch_err_set(err, r, "tar entry \"%s\": setting its mode: %s",
                      quote(&q, x->path), strerror(-r));
        goto out;
    }
    r = close(fd) < 0 ? -errno : 0;
    fd = -1;
    if (r < 0)
        hutch_err_set(err, r, "tar entry \"%s\": writing: %s", quote(&q, x->path),
                      strerror(-r));
out:
    if (fd >= 0)
        close(fd);
    return r;
}

/* Pass 2: the file data, into the staging tree make_dirs() built. */
struct unpacking {
    struct dcache sc;
    const struct hutch_archive_limits *lim;
    uint64_t total;
    char *buf;
};

static int unpack_one(void *arg, struct archive *a, const struct xent *x,
                      struct hutch_err *err)
{
    struct unpacking *u = arg;

    if (x->is_dir)
        return 0;
    return write_entry(a, &u->sc, x, u->lim, &u->total, u->buf, err);
}

static int unpack(const void *tar, size_t len, const struct hutch_archive_limits *lim,
                  struct xset *xs, int stagefd, struct hutch_err *err)
{
    struct unpacking u = {.lim = lim, .buf = malloc(IO_CHUNK)};
    int r;

    dcache_init(&u.sc, stagefd);
    if (!u.buf)
        r = hutch_err_set(err, -ENOMEM, "out of memory unpacking a tar");
    else
        r = judge_walk(tar, len, lim, xs, unpack_one, &u, err);
    dcache_drop(&u.sc);
    free(u.buf);
    return r;
}

/* One step of move_into_place(); sets x->done. */
static int move_one(struct xset *xs, struct xent *x, struct dcache *sc,
                    struct dcache *dc, dev_t dev)
{
    struct xent *par = xset_parent(xs, x);
    const char *leaf = leaf_name(x);
    struct stat st;
    int sfd, dfd, r;

    if (par && (par->done == DONE_MOVED || par->done == DONE_UNDER)) {
        x->done = DONE_UNDER; /* went along with its parent */
        return 0;
    }
    r = dcache_get(sc, x->path, parent_len(x), &sfd);
    if (r == 0)
        r = dcache_get(dc, x->path, parent_len(x), &dfd);
    if (r < 0)
        return r;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return -errno;
        r = rename_new(sfd, leaf, dfd);
        if (r == 0)
            x->done = DONE_MOVED;
        return r;
    }
    if (x->is_dir && S_ISDIR(st.st_mode) && st.st_dev == dev) {
        x->done = DONE_MERGED;
        return 0;
    }
    if (x->is_dir || !S_ISREG(st.st_mode))
        return -EEXIST; /* check_dest() said otherwise: dest changed since */
    if (renameat2(sfd, leaf, dfd, leaf, RENAME_EXCHANGE) == 0) {
        x->done = DONE_EXCHANGED;
        return 0;
    }
    if (!flags_unsupported(errno))
        return -errno;
    if (renameat(sfd, leaf, dfd, leaf) < 0)
        return -errno;
    x->done = DONE_REPLACED;
    return 0;
}

/* Moves the staged tree into dest: a path dest lacks is renamed over whole
 * (with everything below it), a directory dest has is merged into, a file
 * dest has is swapped with RENAME_EXCHANGE so that move_back() can restore
 * it.  Only a concurrent change to dest, or a file system without
 * RENAME_EXCHANGE (then the old file is replaced and cannot be restored),
 * makes this phase fail or lose the old state. */
static int move_into_place(struct xset *xs, int stagefd, int destfd, dev_t dev,
                           struct hutch_err *err)
{
    struct dcache sc, dc;
    struct qbuf q;
    int r = 0;

    dcache_init(&sc, stagefd);
    dcache_init(&dc, destfd);
    for (size_t i = 0; i < xs->n && r == 0; i++) {
        struct xent *x = xs->sorted[i];
        r = move_one(xs, x, &sc, &dc, dev);
        if (r < 0)
            hutch_err_set(err, r, "tar entry \"%s\": moving it into place: %s",
                          quote(&q, entry_name(x)), strerror(-r));
    }
    dcache_drop(&sc);
    dcache_drop(&dc);
    return r;
}

/* Best effort undo of move_into_place(), last move first. */
static void move_back(struct xset *xs, int stagefd, int destfd)
{
    struct dcache sc, dc;

    dcache_init(&sc, stagefd);
    dcache_init(&dc, destfd);
    for (size_t i = xs->n; i-- > 0;) {
        struct xent *x = xs->sorted[i];
        const char *leaf = leaf_name(x);
        int sfd, dfd;

        if (x->done != DONE_MOVED && x->done != DONE_EXCHANGED)
            continue;
        if (dcache_get(&sc, x->path, parent_len(x), &sfd) < 0 ||
            dcache_get(&dc, x->path, parent_len(x), &dfd) < 0)
            continue;
        if (x->done == DONE_MOVED)
            (void)renameat(dfd, leaf, sfd, leaf);
        else
            (void)renameat2(sfd, leaf, dfd, leaf, RENAME_EXCHANGE);
    }
    dcache_drop(&sc);
    dcache_drop(&dc);
}

/* Decisions beyond hutch_archive.h:
 *  - Zero bytes of input is refused ("empty input is not a tar archive"); a
 *    tar holding no entries (just the 1024-byte end marker, what pack_dir
 *    writes for an empty or missing directory) is accepted and only makes
 *    sure dest_dir exists.
 *  - Missing parent directories of an entry are created with mode 0755, as
 *    if the tar named them; they count against lim->max_entries.
 *  - "./x" is read as "x", and a directory entry "." or "./" (the top, as
 *    `tar -C dir -cf - .` writes) is skipped; it still counts as an entry.
 *  - A path may appear once; a regular file dest_dir already has is
 *    replaced, a directory it already has is merged into.
 *  - dest_dir itself is the caller's trusted path and may be reached through
 *    symbolic links; nothing below it is.
 *  - File data is counted as written, against lim->max_bytes.
 *  - A NULL `lim` means hutch_archive_limits_out(). */
int hutch_archive_extract(const void *tar, size_t len, const char *dest_dir,
                          const struct hutch_archive_limits *lim, struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct xset xs = {0};
    struct stat st;
    char stage[STAGE_NAME_LEN + 1] = "";
    int destfd = -1, stagefd = -1, r;
    bool created = false, moving = false;

    if (!dest_dir || !*dest_dir || (!tar && len))
        return hutch_err_set(err, -EINVAL, "extract: no tar or no destination given");
    if (!limits_ok(lim))
        return limits_refused(lim, err);
    lim = limits_or_default(lim, &dl);
    if (len == 0)
        return hutch_err_set(
            err, -EINVAL,
            "empty input is not a tar archive (an empty tar is 1024 zero bytes)");

    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    r = judge_tar(tar, len, lim, JUDGE_STRICT, &xs, err);
    if (r < 0)
        goto out;

    destfd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (destfd < 0 && errno != ENOENT) {
        r = -errno;
        hutch_err_set(err, r, "cannot open %s: %s", dest_dir, strerror(-r));
        goto out;
    }
    if (destfd >= 0) {
        if (fstat(destfd, &st) < 0) {
            r = -errno;
            hutch_err_set(err, r, "cannot stat %s: %s", dest_dir, strerror(-r));
            goto out;
        }
        r = check_dest(&xs, destfd, st.st_dev, err);
        if (r < 0)
            goto out;
    } else {
        if (mkdir(dest_dir, 0755) < 0) {
            r = -errno;
            hutch_err_set(err, r, "cannot create %s: %s%s", dest_dir, strerror(-r),
                          r == -ENOENT ? " (its parent directory must exist)" : "");
            goto out;
        }
        created = true;
        destfd = open(dest_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (destfd < 0 || fchmod(destfd, 0755) < 0 || fstat(destfd, &st) < 0) {
            r = -errno;
            hutch_err_set(err, r, "cannot open %s: %s", dest_dir, strerror(-r));
            goto out;
        }
    }

    for (int tries = 0;; tries++) {
        char name[STAGE_NAME_LEN + 1];
        stage_name(name);
        if (mkdirat(destfd, name, 0700) == 0) {
            memcpy(stage, name, sizeof(stage));
            break;
        }
        if (errno != EEXIST || tries == 16) {
            r = -errno;
            hutch_err_set(err, r, "cannot create a staging directory in %s: %s",
                          dest_dir, strerror(-r));
            goto out;
        }
    }
    stagefd = openat(destfd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (stagefd < 0) {
        r = -errno;
        hutch_err_set(err, r, "cannot open the staging directory in %s: %s", dest_dir,
                      strerror(-r));
        goto out;
    }

    r = make_dirs(&xs, stagefd, err);
    if (r < 0)
        goto out;
    r = unpack(tar, len, lim, &xs, stagefd, err);
    if (r < 0)
        goto out;
    moving = true;
    r = move_into_place(&xs, stagefd, destfd, st.st_dev, err);
out:
    if (r < 0 && moving)
        move_back(&xs, stagefd, destfd);
    if (stagefd >= 0)
        close(stagefd);
    /* On success this holds only the skeleton of merged directories and
     * the old versions of replaced files.  Should removing it fail (an I/O
     * error), it is left behind: the unpack itself is complete. */
    if (stage[0])
        (void)rm_tree_at(destfd, stage);
    if (destfd >= 0)
        close(destfd);
    if (created && r < 0)
        (void)rmdir(dest_dir);
    xset_free(&xs);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Writing tar */

struct wsink {
    hutch_write_fn fn;
    void *arg;
    int err; /* first error of fn */
};

static la_ssize_t wsink_write(struct archive *a, void *cd, const void *buf, size_t n)
{
    struct wsink *w = cd;
    int r = w->fn(w->arg, buf, n);

    if (r < 0) {
        if (!w->err)
            w->err = r;
        hutch_la.archive_set_error(a, -r, "%s", strerror(-r));
        return -1;
    }
    return (la_ssize_t)n;
}

static int writer_new(struct archive **out, struct wsink *w, struct hutch_err *err)
{
    struct archive *a = hutch_la.archive_write_new();

    *out = NULL;
    if (!a)
        return hutch_err_set(err, -ENOMEM, "out of memory writing a tar");
    /* ustar headers, pax ones only for what ustar cannot hold (long or
     * non-ASCII names); no padding of the last block. */
    if (hutch_la.archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        hutch_la.archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        hutch_la.archive_write_open(a, w, NULL, wsink_write, NULL) != ARCHIVE_OK) {
        int r = hutch_err_set(err, -EIO, "cannot start a tar stream: %s",
                              hutch_la.archive_error_string(a)
                                  ? hutch_la.archive_error_string(a)
                                  : "unknown error");
        hutch_la.archive_write_free(a);
        return r;
    }
    *out = a;
    return 0;
}

/* `what`: what was being done, e.g. "packing \"/work/out/f\"". */
static int write_failed(struct archive *a, const struct wsink *w, const char *what,
                        struct hutch_err *err)
{
    if (w->err == -E2BIG)
        return hutch_err_set(err, -E2BIG, "%s: the tar stream exceeds its size limit",
                             what);
    if (w->err)
        return hutch_err_set(err, w->err, "%s: writing the tar stream: %s", what,
                             strerror(-w->err));
    return hutch_err_set(err, -EIO, "%s: %s", what,
                         hutch_la.archive_error_string(a)
                             ? hutch_la.archive_error_string(a)
                             : "libarchive error");
}

/* Walks host trees into a tar; shared by pack_dir and the builder. */
struct packer {
    struct archive *a;
    struct wsink *w;
    const struct hutch_archive_limits *lim;
    uint64_t nentries, nbytes;
    char *path; /* tar path being written, NUL-terminated */
    size_t pathcap;
    char *buf;           /* IO_CHUNK bytes */
    struct xset *record; /* builder: every entry, for hutch_tar_finish */
    bool broken;         /* a write failed: the stream is unusable */
    uint32_t uid, gid;   /* owner written in every entry */
    /* For messages: the host path whose tar path is path[0..rootlen); NULL
     * for literal data. */
    const char *root;
    size_t rootlen;
};

/* For messages: the host path of p->path[0..len), quoted. */
static const char *where(const struct packer *p, size_t len, struct qbuf *q)
{
    const char *rel = p->path ? p->path : "";
    size_t skip = p->rootlen + (p->rootlen ? 1 : 0);
    char tmp[QUOTE_MAX + 8];

    if (!p->root)
        return quote_n(q, rel, len);
    if (len <= p->rootlen)
        return quote(q, p->root);
    snprintf(tmp, sizeof(tmp), "%s/%.*s", p->root, (int)(len - skip), rel + skip);
    return quote(q, tmp);
}

static int packer_write_failed(struct packer *p, size_t len, struct hutch_err *err)
{
    struct qbuf q;
    char what[sizeof(q.s) + 16];

    p->broken = true;
    snprintf(what, sizeof(what), "packing \"%s\"", where(p, len, &q));
    return write_failed(p->a, p->w, what, err);
}

static int packer_init(struct packer *p, struct archive *a, struct wsink *w,
                       const struct hutch_archive_limits *lim)
{
    memset(p, 0, sizeof(*p));
    p->a = a;
    p->w = w;
    p->lim = lim;
    p->buf = malloc(IO_CHUNK);
    return p->buf ? 0 : -ENOMEM;
}

static void packer_free(struct packer *p)
{
    free(p->buf);
    free(p->path);
    p->buf = NULL;
    p->path = NULL;
}

/* p->path = p->path[0..at) + "/" + name (no "/" when at == 0). */
static int packer_path(struct packer *p, size_t at, const char *name, size_t *newlen,
                       struct hutch_err *err)
{
    size_t nl = strlen(name), len = at + (at ? 1 : 0) + nl;
    struct qbuf q;

    if (len > p->lim->max_path)
        return hutch_err_set(err, -E2BIG,
                             "cannot pack \"%s\": a path in it is longer than %" PRIu32
                             " bytes (limit)",
                             where(p, at, &q), p->lim->max_path);
    if (len + 1 > p->pathcap) {
        size_t ncap = len + 1 < 256 ? 256 : (len + 1) * 2;
        char *np = realloc(p->path, ncap);
        if (!np)
            return hutch_err_set(err, -ENOMEM, "out of memory packing files");
        p->path = np;
        p->pathcap = ncap;
    }
    if (at)
        p->path[at++] = '/';
    memcpy(p->path + at, name, nl + 1);
    *newlen = len;
    return 0;
}

static int packer_header(struct packer *p, size_t len, bool is_dir, uint64_t size,
                         time_t mtime, unsigned perm, struct hutch_err *err)
{
    struct archive_entry *e;
    struct qbuf q;
    char why[128];
    const char *bad = relpath_problem(p->path, len, p->lim, why, sizeof(why));
    int r;

    if (bad)
        return hutch_err_set(err, -EINVAL, "cannot pack \"%s\": %s", where(p, len, &q),
                             bad);
    if (p->nentries >= p->lim->max_entries)
        return hutch_err_set(
            err, -E2BIG, "cannot pack \"%s\": more than %" PRIu32 " entries (limit)",
            where(p, len, &q), p->lim->max_entries);
    if (!is_dir && size > p->lim->max_bytes - p->nbytes)
        return hutch_err_set(err, -E2BIG,
                             "cannot pack \"%s\": more than %" PRIu64
                             " bytes of file data (limit)",
                             where(p, len, &q), p->lim->max_bytes);
    e = hutch_la.archive_entry_new();
    if (!e)
        return hutch_err_set(err, -ENOMEM, "out of memory packing files");
    hutch_la.archive_entry_set_pathname(e, p->path);
    hutch_la.archive_entry_set_filetype(e, is_dir ? AE_IFDIR : AE_IFREG);
    hutch_la.archive_entry_set_perm(e, perm);
    hutch_la.archive_entry_set_size(e, is_dir ? 0 : (la_int64_t)size);
    hutch_la.archive_entry_set_mtime(e, mtime, 0);
    hutch_la.archive_entry_set_uid(e, p->uid);
    hutch_la.archive_entry_set_gid(e, p->gid);
    r = hutch_la.archive_write_header(p->a, e);
    hutch_la.archive_entry_free(e);
    /* ARCHIVE_WARN: a name libarchive could not convert to UTF-8, written
     * as raw bytes with hdrcharset=BINARY, which extract reads back. */
    if (r < ARCHIVE_WARN)
        return packer_write_failed(p, len, err);
    p->nentries++;
    if (!is_dir)
        p->nbytes += size;
    if (p->record) {
        struct xent x = {0};
        x.path = strndup(p->path, len);
        if (!x.path)
            return hutch_err_set(err, -ENOMEM, "out of memory packing files");
        x.len = len;
        x.depth = path_depth(p->path, len);
        x.is_dir = is_dir;
        x.size = size;
        r = xset_push(p->record, &x);
        if (r < 0)
            return hutch_err_set(err, r, "out of memory packing files");
        p->record->nent = p->record->n;
    }
    return 0;
}

/* The regular file open at fd, as p->path[0..len). */
static int pack_file(struct packer *p, int fd, const struct stat *st, size_t len,
                     struct hutch_err *err)
{
    uint64_t left = (uint64_t)st->st_size;
    struct qbuf q;
    int r;

    r = packer_header(p, len, false, left, st->st_mtim.tv_sec,
                      (st->st_mode & 0111) ? 0755 : 0644, err);
    if (r < 0)
        return r;
    while (left > 0) {
        ssize_t n = read(fd, p->buf, left < IO_CHUNK ? (size_t)left : IO_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            p->broken = true; /* the header promised bytes we cannot give */
            return hutch_err_set(err, r, "cannot read \"%s\": %s", where(p, len, &q),
                                 strerror(-r));
        }
        if (n == 0)
            break; /* the file shrank: libarchive pads the entry with zeros */
        if (hutch_la.archive_write_data(p->a, p->buf, (size_t)n) != n)
            return packer_write_failed(p, len, err);
        left -= (uint64_t)n;
    }
    if (hutch_la.archive_write_finish_entry(p->a) < ARCHIVE_WARN)
        return packer_write_failed(p, len, err);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Everything below the directory open at fd (taken over) whose tar path is
 * p->path[0..len): regular files and directories, by name; symbolic links
 * and special files are skipped; nothing is followed. */
static int pack_walk(struct packer *p, int fd, size_t len, struct hutch_err *err)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    struct qbuf q;
    DIR *d = fdopendir(fd);
    int r = 0;

    if (!d) {
        r = -errno;
        close(fd);
        return hutch_err_set(err, r, "cannot read directory \"%s\": %s",
                             where(p, len, &q), strerror(-r));
    }
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno) {
                r = -errno;
                hutch_err_set(err, r, "cannot read directory \"%s\": %s",
                              where(p, len, &q), strerror(-r));
                goto out;
            }
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (de->d_type == DT_LNK || de->d_type == DT_FIFO || de->d_type == DT_SOCK ||
            de->d_type == DT_CHR || de->d_type == DT_BLK)
            continue;
        /* Bounded by the entries still allowed, so a huge directory fails
         * here instead of filling memory. */
        if (n >= p->lim->max_entries - p->nentries) {
            r = hutch_err_set(err, -E2BIG,
                              "cannot pack \"%s\": more than %" PRIu32
                              " entries (limit)",
                              where(p, len, &q), p->lim->max_entries);
            goto out;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            char **nn = realloc(names, ncap * sizeof(*nn));
            if (!nn) {
                r = hutch_err_set(err, -ENOMEM, "out of memory packing files");
                goto out;
            }
            names = nn;
            cap = ncap;
        }
        names[n] = strdup(de->d_name);
        if (!names[n]) {
            r = hutch_err_set(err, -ENOMEM, "out of memory packing files");
            goto out;
        }
        n++;
    }
    if (n > 1)
        qsort(names, n, sizeof(*names), name_cmp);

    for (size_t i = 0; i < n; i++) {
        struct stat st;
        size_t clen;
        int cfd;

        r = packer_path(p, len, names[i], &clen, err);
        if (r < 0)
            goto out;
        if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* gone meanwhile */
            r = -errno;
            hutch_err_set(err, r, "cannot stat \"%s\": %s", where(p, clen, &q),
                          strerror(-r));
            goto out;
        }
        if (S_ISREG(st.st_mode)) {
            /* O_NONBLOCK: should it have become a fifo meanwhile, the open
             * must not hang; fstat below then skips it. */
            cfd = openat(dirfd(d), names[i],
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        } else if (S_ISDIR(st.st_mode)) {
            cfd = openat(dirfd(d), names[i],
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        } else {
            continue;
        }
        if (cfd < 0) {
            if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                continue; /* replaced by a link or removed meanwhile */
            r = -errno;
            hutch_err_set(err, r, "cannot open \"%s\": %s", where(p, clen, &q),
                          strerror(-r));
            goto out;
        }
        if (fstat(cfd, &st) < 0) {
            r = -errno;
            close(cfd);
            hutch_err_set(err, r, "cannot stat \"%s\": %s", where(p, clen, &q),
                          strerror(-r));
            goto out;
        }
        if (S_ISREG(st.st_mode)) {
            r = pack_file(p, cfd, &st, clen, err);
            close(cfd);
        } else if (S_ISDIR(st.st_mode)) {
            r = packer_header(p, clen, true, 0, st.st_mtim.tv_sec, 0755, err);
            if (r < 0)
                close(cfd);
            else
                r = pack_walk(p, cfd, clen, err); /* takes cfd */
        } else {
            close(cfd);
        }
        if (r < 0)
            goto out;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return r;
}

/* `dir` missing: an empty tar.  `dir` a symbolic link: refused, since the
 * directory a sandbox leaves behind is untrusted down to its last
 * component.  A NULL `lim` means hutch_archive_limits_out(). */
int hutch_archive_pack_dir(const char *dir, hutch_write_fn write, void *arg,
                           const struct hutch_archive_limits *lim,
                           struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct wsink w = {write, arg, 0};
    struct archive *a = NULL;
    struct packer p = {0};
    struct stat st;
    int fd = -1, r;

    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    if (!dir || !*dir || !write)
        return hutch_err_set(err, -EINVAL, "pack: no directory or no writer given");
    if (!limits_ok(lim))
        return limits_refused(lim, err);
    lim = limits_or_default(lim, &dl);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) {
        r = -errno;
        if ((r == -ENOTDIR || r == -ELOOP) && lstat(dir, &st) == 0 &&
            S_ISLNK(st.st_mode))
            return hutch_err_set(err, -ELOOP,
                                 "cannot pack %s: it is a symbolic link (not followed)",
                                 dir);
        return hutch_err_set(err, r, "cannot pack %s: %s", dir, strerror(-r));
    }
    r = writer_new(&a, &w, err);
    if (r < 0)
        goto out;
    r = packer_init(&p, a, &w, lim);
    if (r < 0) {
        hutch_err_set(err, r, "out of memory packing %s", dir);
        goto out;
    }
    p.root = dir;
    if (fd >= 0) {
        r = pack_walk(&p, fd, 0, err);
        fd = -1; /* pack_walk took it */
        if (r < 0)
            goto out;
    }
    if (hutch_la.archive_write_close(a) != ARCHIVE_OK)
        r = packer_write_failed(&p, 0, err);
out:
    if (fd >= 0)
        close(fd);
    if (a)
        hutch_la.archive_write_free(a);
    packer_free(&p);
    return r;
}

/* Re-packs an untrusted tar the way pack_dir would have packed the tree it
 * describes: the judge, as a packer, drops links and special files and
 * normalises modes to 0644/0755, and refuses the tar for everything else it
 * refuses anywhere (paths, counts, sizes, and the rules about the set: no
 * path twice, no file used as a directory, implied parents counted, checked
 * over the headers first so nothing is written for a refused tar).  For
 * executors whose sandbox hands over its own tar (Docker's archive
 * endpoint). */
int hutch_archive_filter(const void *tar, size_t len, hutch_write_fn write, void *arg,
                         const struct hutch_archive_limits *lim, uint32_t uid,
                         uint32_t gid, struct hutch_err *err)
{
    struct hutch_archive_limits dl;
    struct wsink w = {write, arg, 0};
    struct archive *a = NULL;
    struct archive_entry *e;
    struct packer p = {0};
    struct judge j = {0};
    struct xset xs = {0};
    int r;

    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    if (!limits_ok(lim))
        return limits_refused(lim, err);
    lim = limits_or_default(lim, &dl);
    r = judge_tar(tar, len, lim, JUDGE_AS_PACKER, &xs, err);
    xset_free(&xs);
    if (r < 0)
        return r;
    r = judge_open(&j, tar, len, lim, JUDGE_AS_PACKER, err);
    if (r < 0)
        return r;
    r = writer_new(&a, &w, err);
    if (r < 0)
        goto out;
    r = packer_init(&p, a, &w, lim);
    if (r < 0) {
        hutch_err_set(err, r, "out of memory filtering a tar");
        goto out;
    }
    p.uid = uid;
    p.gid = gid;
    for (;;) {
        struct xent x;
        la_ssize_t got;

        r = judge_next(&j, &e, &x, err);
        if (r < 0)
            goto out;
        if (r == 1)
            break;
        if (!x.path)
            continue; /* the top directory, a link or a special file */
        free(p.path);
        p.path = x.path; /* the packer's now */
        p.pathcap = x.len + 1;
        r = packer_header(&p, x.len, x.is_dir, x.size, hutch_la.archive_entry_mtime(e),
                          x.mode, err);
        if (r < 0)
            goto out;
        if (x.is_dir)
            continue;
        while ((got = hutch_la.archive_read_data(j.a, p.buf, IO_CHUNK)) > 0)
            if (hutch_la.archive_write_data(a, p.buf, (size_t)got) != got) {
                r = packer_write_failed(&p, x.len, err);
                goto out;
            }
        if (got < 0) {
            r = hutch_err_set(err, -EINVAL, "tar is damaged in entry %zu: %s", j.nread,
                              hutch_la.archive_error_string(j.a));
            goto out;
        }
        if (hutch_la.archive_write_finish_entry(a) < ARCHIVE_WARN) {
            r = packer_write_failed(&p, x.len, err);
            goto out;
        }
    }
    r = 0;
    if (hutch_la.archive_write_close(a) != ARCHIVE_OK)
        r = packer_write_failed(&p, 0, err);
out:
    judge_close(&j);
    if (a)
        hutch_la.archive_write_free(a);
    packer_free(&p);
    return r;
}

/* ---------------------------------------------------------------------- */
/* In-memory builder */

struct hutch_tar {
    struct archive *a;
    struct wsink w;
    struct hutch_buf buf;
    struct hutch_archive_limits lim;
    struct packer p;
    struct xset rec;
    bool finished;
};

/* The stream is capped at max_bytes, file data too; entries, path length
 * and depth follow hutch_archive_limits_in(). */
int hutch_tar_new(struct hutch_tar **out, size_t max_bytes, struct hutch_err *err)
{
    struct hutch_tar *t;
    int r;

    *out = NULL;
    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    t = calloc(1, sizeof(*t));
    if (!t)
        return hutch_err_set(err, -ENOMEM, "out of memory creating a tar");
    hutch_buf_init(&t->buf, max_bytes);
    hutch_archive_limits_in(&t->lim);
    t->lim.max_bytes = max_bytes;
    t->w = (struct wsink){hutch_buf_write, &t->buf, 0};
    r = writer_new(&t->a, &t->w, err);
    if (r < 0)
        goto out;
    r = packer_init(&t->p, t->a, &t->w, &t->lim);
    if (r < 0) {
        hutch_err_set(err, r, "out of memory creating a tar");
        goto out;
    }
    t->p.record = &t->rec;
    *out = t;
    t = NULL; /* handed to the caller */
out:
    hutch_tar_free(t);
    return r;
}

static int tar_usable(struct hutch_tar *t, const char *dest, struct hutch_err *err)
{
    struct qbuf q;
    char why[128];
    const char *bad;

    if (!t || !dest)
        return hutch_err_set(err, -EINVAL, "tar: no tar or no destination path given");
    if (t->finished)
        return hutch_err_set(err, -EINVAL, "tar: already finished");
    if (t->p.broken)
        return hutch_err_set(err, -EIO, "tar: unusable after an earlier write error");
    bad = relpath_problem(dest, strlen(dest), &t->lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "tar destination \"%s\": %s",
                             quote(&q, dest), bad);
    return 0;
}

/* Modes are normalized as extract would: 0755 when any x bit is set, else
 * 0644. */
int hutch_tar_add_bytes(struct hutch_tar *t, const char *dest, const void *data,
                        size_t len, unsigned mode, struct hutch_err *err)
{
    size_t plen;
    int r = tar_usable(t, dest, err);

    if (r < 0)
        return r;
    if (!data && len)
        return hutch_err_set(err, -EINVAL, "tar: no data given for \"%s\"", dest);
    t->p.root = NULL;
    r = packer_path(&t->p, 0, dest, &plen, err);
    if (r < 0)
        return r;
    r = packer_header(&t->p, plen, false, len, time(NULL), (mode & 0111) ? 0755 : 0644,
                      err);
    if (r < 0)
        return r;
    if ((len && hutch_la.archive_write_data(t->a, data, len) != (la_ssize_t)len) ||
        hutch_la.archive_write_finish_entry(t->a) < ARCHIVE_WARN)
        return packer_write_failed(&t->p, plen, err);
    return 0;
}

int hutch_tar_add_path(struct hutch_tar *t, const char *src, const char *dest,
                       struct hutch_err *err)
{
    struct stat st, fst;
    size_t plen;
    uint64_t before;
    int fd = -1, r = tar_usable(t, dest, err);

    if (r < 0)
        return r;
    if (!src)
        return hutch_err_set(err, -EINVAL, "tar: no source path given");
    before = t->p.nentries;
    r = packer_path(&t->p, 0, dest, &plen, err);
    if (r < 0)
        goto out;
    t->p.root = src;
    t->p.rootlen = plen;
    /* src itself is the caller's choice and may be a link; stat() it first
     * so that a device or fifo is never opened. */
    if (stat(src, &st) < 0) {
        r = -errno;
        hutch_err_set(err, r, "cannot add %s: %s", src, strerror(-r));
        goto out;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        r = hutch_err_set(err, -EINVAL,
                          "cannot add %s: not a regular file or a directory", src);
        goto out;
    }
    fd = open(src, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                       (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    if (fd < 0) {
        r = -errno;
        hutch_err_set(err, r, "cannot open %s: %s", src, strerror(-r));
        goto out;
    }
    if (fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
        r = hutch_err_set(err, -EAGAIN, "cannot add %s: it changed while being opened",
                          src);
        goto out;
    }
    if (S_ISREG(fst.st_mode)) {
        r = pack_file(&t->p, fd, &fst, plen, err);
    } else {
        r = packer_header(&t->p, plen, true, 0, fst.st_mtim.tv_sec, 0755, err);
        if (r == 0) {
            r = pack_walk(&t->p, fd, plen, err);
            fd = -1; /* pack_walk took it */
        }
    }
out:
    if (fd >= 0)
        close(fd);
    /* Half a tree in the stream cannot be taken back. */
    if (r < 0 && t->p.nentries != before)
        t->p.broken = true;
    return r;
}

/* Also checks the entries as extract will (a path added twice, a file
 * under a file, more entries than extract takes), so that a tar this
 * builder finishes unpacks. */
int hutch_tar_finish(struct hutch_tar *t, const void **data, size_t *len,
                     struct hutch_err *err)
{
    int r;

    if (!t || !data || !len)
        return hutch_err_set(err, -EINVAL, "tar: nothing to finish");
    if (!t->finished) {
        if (t->p.broken)
            return hutch_err_set(err, -EIO,
                                 "tar: unusable after an earlier write error");
        r = xset_validate(&t->rec, &t->lim, err);
        if (r < 0) {
            t->p.broken = true; /* what was added cannot be taken back */
            return r;
        }
        if (hutch_la.archive_write_close(t->a) != ARCHIVE_OK) {
            t->p.broken = true;
            return write_failed(t->a, &t->w, "finishing the tar", err);
        }
        t->finished = true;
    }
    *data = t->buf.data;
    *len = t->buf.len;
    return 0;
}

void hutch_tar_free(struct hutch_tar *t)
{
    if (!t)
        return;
    if (t->a)
        hutch_la.archive_write_free(t->a); /* may still write the trailer into buf */
    packer_free(&t->p);
    xset_free(&t->rec);
    hutch_buf_free(&t->buf);
    free(t);
}

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
                             quote(&q, x->path));
    if (hutch_la.archive_read_data(a, rd->data, (size_t)x->size) != (la_ssize_t)x->size)
        return hutch_err_set(
            err, -EBADMSG, "reading \"%s\" from the result tar: %s", quote(&q, x->path),
            hutch_la.archive_error_string(a) ? hutch_la.archive_error_string(a)
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
    r = judge_tar(tar, len, &lim, JUDGE_STRICT, &xs, err);
    if (r == 0)
        r = judge_walk(tar, len, &lim, &xs, read_one, &rd, err);
    free(rd.data);
    xset_free(&xs);
    return r;
}
