/* archive_extract.c — the one safe unpacker of a tar: hutch_archive_extract.
 *
 * Here: the staging-directory extract, in phases.  The judge (archive.c)
 * accepts or refuses the whole tar from its headers; check_dest refuses
 * every entry that would meet a symbolic link, a mount point or a file of
 * another type in the destination; make_dirs and unpack build the tree in a
 * staging directory inside the destination, reading the data through the
 * judge's second pass (ar_judge_walk); move_into_place renames it into
 * place, and move_back undoes that when a step fails.  Not here: reading
 * tar headers or deciding what a tar may hold (archive.c), writing tars
 * (archive_pack.c).
 *
 * Rules a reader must know: every byte that reaches the file system is
 * written here through *at() calls on directory fds opened with O_NOFOLLOW
 * (the dcache below), never by archive_write_disk (it calls umask(),
 * CVE-2023-30571, and makes its own decisions about links), and never
 * before the judge has accepted the whole tar.  Nothing is written outside
 * the staging directory until every entry is unpacked.  No locks: each call
 * works on its own fds and set of entries. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE, memrchr */
#endif

#include "hutch_archive.h"

/* libarchive's <archive.h>; every call goes through the lazily loaded
 * library's table, hutch_la, by name. */
#include "archive_lib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive_int.h"
#include "caps.h"

/* ---------------------------------------------------------------------- */
/* The tree of entries: an entry's parent and its own name */

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
    return ar_xset_find(xs, x->path, parent_len(x));
}

/* For messages about an implied directory: the entry that needs it. */
static const char *entry_name(const struct xent *x)
{
    return x->implied ? x->origin : x->path;
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
    static atomic_uint counter; /* extracts run on many threads */
    unsigned char rnd[10];
    size_t o = sizeof(STAGE_PREFIX) - 1;

    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        /* Unpredictability is a nicety here (the name only has to be new,
         * and mkdirat checks that), so a weak fallback is fine. */
        struct timespec ts;
        uint64_t x;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
            ((uint64_t)getpid() << 40) ^
            (uint64_t)(atomic_fetch_add(&counter, 1) + 1) * 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < sizeof(rnd); i++, x = x * 6364136223846793005ull + 1)
            rnd[i] = (unsigned char)(x >> 56);
    }
    memcpy(buf, STAGE_PREFIX, o);
    for (size_t i = 0; i < sizeof(rnd); i++)
        buf[o++] = cs[rnd[i] % (sizeof(cs) - 1)];
    buf[o] = '\0';
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
                ar_quote(&q1, entry_name(x)), strerror(-r));
            goto out;
        }
        if (fstatat(pfd, leaf_name(x), &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            r = -errno;
            hutch_err_set(err, r, "tar entry \"%s\": checking the destination: %s",
                          ar_quote(&q1, entry_name(x)), strerror(-r));
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
            r = hutch_err_set(
                err, -EEXIST, "tar entry \"%s\": \"%s\" in the destination %s",
                ar_quote(&q1, entry_name(x)), ar_quote(&q2, x->path), why);
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
                          ar_quote(&q, entry_name(x)), strerror(-r));
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
                      ar_quote(&q, x->path), strerror(-r));
        goto out;
    }
    fd = openat(pfd, leaf_name(x), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd < 0) {
        r = -errno;
        hutch_err_set(err, r, "tar entry \"%s\": creating the file: %s",
                      ar_quote(&q, x->path), strerror(-r));
        goto out;
    }
    for (;;) {
        la_ssize_t n = hutch_la.archive_read_data(a, buf, IO_CHUNK);
        if (n < 0) {
            r = hutch_err_set(err, -EINVAL, "tar entry \"%s\": reading its data: %s",
                              ar_quote(&q, x->path),
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
                              ar_quote(&q, x->path));
            goto out;
        }
        if ((uint64_t)n > lim->max_bytes - *total) {
            r = hutch_err_set(err, -E2BIG,
                              "tar entry \"%s\": tar holds more than %" PRIu64
                              " bytes of file data (limit)",
                              ar_quote(&q, x->path), lim->max_bytes);
            goto out;
        }
        *total += (uint64_t)n;
        r = write_all(fd, buf, (size_t)n);
        if (r < 0) {
            hutch_err_set(err, r, "tar entry \"%s\": writing: %s",
                          ar_quote(&q, x->path), strerror(-r));
            goto out;
        }
    }
    if (fchmod(fd, x->mode) < 0) {
        r = -errno;
        hutch_err_set(err, r, "tar entry \"%s\": setting its mode: %s",
                      ar_quote(&q, x->path), strerror(-r));
        goto out;
    }
    r = close(fd) < 0 ? -errno : 0;
    fd = -1;
    if (r < 0)
        hutch_err_set(err, r, "tar entry \"%s\": writing: %s", ar_quote(&q, x->path),
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
        r = ar_judge_walk(tar, len, lim, xs, unpack_one, &u, err);
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
                          ar_quote(&q, entry_name(x)), strerror(-r));
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
    if (!ar_limits_ok(lim))
        return ar_limits_refused(lim, err);
    lim = ar_limits_or_default(lim, &dl);
    if (len == 0)
        return hutch_err_set(
            err, -EINVAL,
            "empty input is not a tar archive (an empty tar is 1024 zero bytes)");

    r = hutch_libarchive_load(err);
    if (r < 0)
        return r;
    r = ar_judge_tar(tar, len, lim, JUDGE_STRICT, &xs, err);
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
    ar_xset_free(&xs);
    return r;
}
