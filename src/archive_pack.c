/* archive_pack.c — writing tar streams: hutch_archive_pack_dir,
 * hutch_archive_filter and the in-memory builder (hutch_tar_*).
 *
 * Here: the sink libarchive writes through (wsink), and the packer that
 * all three share: it walks a host tree, or takes the entries the judge
 * keeps, and writes each as a ustar/pax header plus its data, checking the
 * path rule and the limits on the way.  Not here: reading or judging a tar
 * (archive.c; the filter reads its input through the judge as a packer),
 * unpacking one (archive_extract.c), the bounded buffer the builder writes
 * into (buf.c).
 *
 * Rules a reader must know: what the packer writes is what the judge
 * accepts, so that a tar written here unpacks.  Only regular files and
 * directories are written, modes normalized to 0644/0755, owned by one uid
 * and gid; symbolic links and special files are skipped and never
 * followed, and a tree is walked through fds opened with O_NOFOLLOW.  Once
 * a write fails the stream is broken (packer.broken) and every later call
 * on it fails.  No locks: a struct hutch_tar belongs to one thread at a
 * time. */
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive_int.h"
#include "buf.h"

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
        return ar_quote_n(q, rel, len);
    if (len <= p->rootlen)
        return ar_quote(q, p->root);
    snprintf(tmp, sizeof(tmp), "%s/%.*s", p->root, (int)(len - skip), rel + skip);
    return ar_quote(q, tmp);
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
    const char *bad = ar_relpath_problem(p->path, len, p->lim, why, sizeof(why));
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
        x.depth = ar_path_depth(p->path, len);
        x.is_dir = is_dir;
        x.size = size;
        r = ar_xset_push(p->record, &x);
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
    if (!ar_limits_ok(lim))
        return ar_limits_refused(lim, err);
    lim = ar_limits_or_default(lim, &dl);
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
 * endpoint), and for those whose engine unpacks one as root: given an
 * owner other than root, the directories the tar only implies are written
 * too, first, owned by it (0755), as extract makes them; an extractor
 * that makes them itself makes them root's, and the program could not
 * write in /work/a/b after `--file x:a/b/x`. */
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
    if (!ar_limits_ok(lim))
        return ar_limits_refused(lim, err);
    lim = ar_limits_or_default(lim, &dl);
    r = ar_judge_tar(tar, len, lim, JUDGE_AS_PACKER, &xs, err);
    if (r < 0)
        goto out;
    r = ar_judge_open(&j, tar, len, lim, JUDGE_AS_PACKER, err);
    if (r < 0)
        goto out;
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
    /* xs is sorted (ar_xset_validate): a parent before what it holds. */
    for (size_t i = 0; (uid || gid) && i < xs.n; i++) {
        const struct xent *x = xs.sorted[i];
        size_t plen;
        if (!x->implied)
            continue;
        r = packer_path(&p, 0, x->path, &plen, err);
        if (r == 0)
            r = packer_header(&p, plen, true, 0, time(NULL), 0755, err);
        if (r < 0)
            goto out;
    }
    for (;;) {
        struct xent x;
        la_ssize_t got;

        r = ar_judge_next(&j, &e, &x, err);
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
    ar_judge_close(&j);
    if (a)
        hutch_la.archive_write_free(a);
    packer_free(&p);
    ar_xset_free(&xs);
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
    bad = ar_relpath_problem(dest, strlen(dest), &t->lim, why, sizeof(why));
    if (bad)
        return hutch_err_set(err, -EINVAL, "tar destination \"%s\": %s",
                             ar_quote(&q, dest), bad);
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
        r = ar_xset_validate(&t->rec, &t->lim, err);
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
    ar_xset_free(&t->rec);
    hutch_buf_free(&t->buf);
    free(t);
}
