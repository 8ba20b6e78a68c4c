/* workspace.c — the workspace store (see workspace.h for the rules).
 *
 * Every tar read from the store or from a sandbox goes through archive.c's
 * judge (hutch_archive_extract / _list) before it is used; the store's own
 * files are opened with O_NOFOLLOW below the store directory.  Temporary
 * trees live in the principal's directory under names no workspace can
 * have (they start with "."), and are removed before returning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "knobs.h"
#include "log.h"
#include "util.h"
#include "workspace.h"

struct hutch_ws {
    char dir[PATH_MAX];  /* the principal's directory */
    char tar[PATH_MAX];  /* <name>.tar */
    char lock[PATH_MAX]; /* <name>.lock */
    char mark[PATH_MAX]; /* <name>.taint */
    char name[HUTCH_WORKSPACE_NAME_MAX + 1];
    char taint[HUTCH_WORKSPACE_TAINT_MAX + 1]; /* what <name>.taint says, or "" */
    uint64_t max_bytes;
    int lock_fd;
};

int hutch_ws_check_name(const char *name, struct hutch_err *err)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0)
        return hutch_err_set(err, -EINVAL, "a workspace name must not be empty");
    if (n > HUTCH_WORKSPACE_NAME_MAX)
        return hutch_err_set(err, -EINVAL,
                             "workspace name is longer than %d characters",
                             HUTCH_WORKSPACE_NAME_MAX);
    if (name[0] == '.' || name[0] == '-')
        return hutch_err_set(
            err, -EINVAL, "workspace name \"%.*s\" must not start with \".\" or \"-\"",
            HUTCH_WORKSPACE_NAME_MAX, name);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.'))
            return hutch_err_set(
                err, -EINVAL,
                "workspace name \"%.*s\" may only hold letters, digits, "
                "\"_\", \"-\" and \".\"",
                HUTCH_WORKSPACE_NAME_MAX, name);
    return 0;
}

static int mkdirs(char *path, struct hutch_err *err)
{
    for (char *s = path + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                int e = errno;
                *s = c;
                return hutch_err_set(err, -e, "cannot create %s: %s", path,
                                     strerror(e));
            }
            *s = c;
            if (!c)
                break;
        }
    }
    return 0;
}

int hutch_ws_store(const char *flag, int create, char *out, size_t len,
                   struct hutch_err *err)
{
    /* XDG_STATE_HOME and HOME are not knobs (knobs.c): the user's. */
    const char *env = hutch_knob_str(HUTCH_KNOB_WORKSPACES),
               *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n;
    if (flag && *flag)
        n = snprintf(out, len, "%s", flag);
    else if (env)
        n = snprintf(out, len, "%s", env);
    else if (geteuid() == 0)
        n = snprintf(out, len, "/var/lib/hutch/workspaces");
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, len, "%s/hutch/workspaces", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.local/state/hutch/workspaces", home);
    else
        return hutch_err_set(err, -ENOENT,
                             "no place for workspaces: set --workspaces DIR, "
                             "$HUTCH_WORKSPACES or $HOME");
    if (n < 0 || (size_t)n >= len || out[0] != '/')
        return hutch_err_set(err, -EINVAL,
                             "the workspaces directory must be an absolute path "
                             "(got \"%s\")",
                             out);
    return create ? mkdirs(out, err) : 0;
}

/* DIR/<hex of principal> */
static int principal_dir(const char *store, const char *principal, char *out,
                         size_t len, struct hutch_err *err)
{
    size_t o = 0, n = strlen(principal);
    int w = snprintf(out, len, "%s/", store);
    if (n == 0 || n > HUTCH_MAX_PRINCIPAL_NAME)
        return hutch_err_set(err, -EINVAL, "workspace owner \"%s\" is not a principal",
                             principal);
    if (w < 0 || (size_t)w + 2 * n + 1 > len)
        return hutch_err_set(err, -ENAMETOOLONG, "workspaces directory path too long");
    o = (size_t)w;
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, len - o, "%02x", (unsigned char)principal[i]);
    return 0;
}

/* The principal a directory name stands for, or -1. */
static int unhex(const char *s, char *out, size_t len)
{
    size_t n = strlen(s);
    if (n == 0 || n % 2 || n / 2 >= len)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1 || v == 0)
            return -1;
        out[i] = (char)v;
    }
    out[n / 2] = '\0';
    return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT ? -1 : 0;
}

static void rm_tree(const char *dir)
{
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        hutch_warn("workspace: cannot remove %s: %s", dir, strerror(errno));
}

/* The lock of a workspace has two halves.  Between processes (replicas
 * sharing a store, `hutch workspace delete`) it is a POSIX record lock on
 * <name>.lock; within this process it is the path's entry in `held`.
 * Not flock(): a flock belongs to the open file, so every process forked
 * while one was held (a sandbox's init, a runsc not yet exec'd, a fork
 * stuck in a sanitizer's allocator) held it too, for as long as it lived:
 * an execution that had answered still "held" its workspace, and the next
 * one was refused.  A record lock is the process's and is not inherited.
 * Its catch, that closing any fd of the file drops it, is why `held` is
 * asked first: this process opens a lock file only when no execution of
 * its own holds it. */
struct held {
    struct held *next;
    char path[];
};
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *held;

static struct held **held_find(const char *path)
{
    struct held **h = &held;
    while (*h && strcmp((*h)->path, path) != 0)
        h = &(*h)->next;
    return h;
}

/* This process's claim on `path`: 0, -EBUSY (one of ours holds it), or
 * -ENOMEM. */
static int held_claim(const char *path)
{
    size_t n = strlen(path) + 1;
    struct held *h;
    int r;

    pthread_mutex_lock(&held_mu);
    if (*held_find(path)) {
        r = -EBUSY;
    } else if (!(h = malloc(sizeof(*h) + n))) {
        r = -ENOMEM;
    } else {
        memcpy(h->path, path, n);
        h->next = held;
        held = h;
        r = 0;
    }
    pthread_mutex_unlock(&held_mu);
    return r;
}

static void held_drop(const char *path)
{
    struct held **h, *gone;

    pthread_mutex_lock(&held_mu);
    h = held_find(path);
    gone = *h;
    if (gone)
        *h = gone->next;
    pthread_mutex_unlock(&held_mu);
    free(gone);
}

/* Lock <name>.lock without waiting; the fd, or -EBUSY.  release_lock()
 * undoes it. */
static int take_lock(const char *lock, struct hutch_err *err)
{
    int r = held_claim(lock);

    if (r == -ENOMEM)
        return hutch_err_set(err, r, "out of memory");
    if (r < 0)
        return r;
    for (int tries = 0; tries < 8; tries++) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        struct stat a, b;
        int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            r = hutch_err_set(err, -errno, "cannot open %s: %s", lock, strerror(errno));
            break;
        }
        if (fcntl(fd, F_SETLK, &fl) < 0) {
            int e = errno;
            close(fd);
            r = e == EAGAIN || e == EACCES
                    ? -EBUSY
                    : hutch_err_set(err, -e, "cannot lock %s: %s", lock, strerror(e));
            break;
        }
        /* A delete may have unlinked the file we opened: lock the one that
         * is there now. */
        if (fstat(fd, &a) == 0 && stat(lock, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd);
    }
    if (r == 0) /* every try found the file replaced */
        r = hutch_err_set(err, -EBUSY, "cannot lock %s: it keeps changing", lock);
    held_drop(lock);
    return r;
}

static void release_lock(const char *lock, int fd)
{
    close(fd);
    held_drop(lock);
}

/* Remove workspace files of `pdir` unused for idle_s (not the one locked
 * by the caller: its lock makes take_lock fail). */
static void sweep_dir(const char *pdir, uint64_t idle_s)
{
    DIR *d = opendir(pdir);
    struct dirent *e;
    time_t now = time(NULL);
    char path[PATH_MAX], lock[PATH_MAX];

    if (!d)
        return;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        struct stat st;
        int fd;
        struct hutch_err err = HUTCH_ERR_INIT;
        if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 4, ".tar"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", pdir, e->d_name);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if ((uint64_t)(now - st.st_mtime) < idle_s || st.st_mtime > now)
            continue;
        snprintf(lock, sizeof(lock), "%s/%.*s.lock", pdir, (int)(n - 4), e->d_name);
        fd = take_lock(lock, &err);
        if (fd < 0)
            continue; /* in use: not idle */
        if (lstat(path, &st) == 0 && (uint64_t)(now - st.st_mtime) >= idle_s) {
            char mark[PATH_MAX];
            snprintf(mark, sizeof(mark), "%s/%.*s.taint", pdir, (int)(n - 4),
                     e->d_name);
            unlink(path);
            unlink(mark);
            unlink(lock);
            hutch_info("workspace %s removed: unused for %llu s or more", path,
                       (unsigned long long)idle_s);
        }
        release_lock(lock, fd);
    }
    closedir(d);
}

static void sweep(const char *store, uint64_t idle_s)
{
    DIR *d;
    struct dirent *e;
    char pdir[PATH_MAX];
    if (!idle_s || !(d = opendir(store)))
        return;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(pdir, sizeof(pdir), "%s/%s", store, e->d_name);
            sweep_dir(pdir, idle_s);
        }
    closedir(d);
}

static size_t count_tars(const char *pdir)
{
    DIR *d = opendir(pdir);
    struct dirent *e;
    size_t c = 0;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] != '.' && n > 4 && !strcmp(e->d_name + n - 4, ".tar"))
            c++;
    }
    closedir(d);
    return c;
}

/* What <name>.taint says into out ("" when there is none).  A mark that
 * cannot be read fails the open: a workspace whose taint is unknown is not
 * handed out as clean. */
static int read_taint(const char *mark, char *out, size_t len, struct hutch_err *err)
{
    char *data = NULL;
    size_t n = 0;
    int r = hutch_read_file(mark, HUTCH_WORKSPACE_TAINT_MAX, &data, &n, err);
    out[0] = '\0';
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return hutch_err_set(err, r, "cannot read the workspace's taint mark %s: %s",
                             mark, err->msg);
    /* Shown in messages: control characters become '?'. */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)data[i] < 0x20 || data[i] == 0x7f)
            data[i] = '?';
    snprintf(out, len, "%s", n ? data : "an untrusted source");
    free(data);
    return 0;
}

int hutch_ws_open(const char *store, const char *principal, const char *name,
                  const struct hutch_policy_workspaces *pol, struct hutch_ws **out,
                  struct hutch_err *err)
{
    struct hutch_ws *w;
    char tmp[PATH_MAX];
    struct stat st;
    int r;

    *out = NULL;
    if ((r = hutch_ws_check_name(name, err)) < 0)
        return r;
    snprintf(tmp, sizeof(tmp), "%s", store);
    if ((r = mkdirs(tmp, err)) < 0)
        return r;
    sweep(store, pol->idle_s);
    w = calloc(1, sizeof(*w));
    if (!w)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    w->lock_fd = -1;
    w->max_bytes = pol->max_bytes;
    snprintf(w->name, sizeof(w->name), "%s", name);
    if ((r = principal_dir(store, principal, w->dir, sizeof(w->dir), err)) < 0 ||
        (r = mkdirs(w->dir, err)) < 0)
        goto fail;
    snprintf(w->tar, sizeof(w->tar), "%s/%s.tar", w->dir, name);
    snprintf(w->lock, sizeof(w->lock), "%s/%s.lock", w->dir, name);
    snprintf(w->mark, sizeof(w->mark), "%s/%s.taint", w->dir, name);
    r = take_lock(w->lock, err);
    for (int waited = 0; r == -EBUSY && waited < HUTCH_WORKSPACE_BUSY_RETRY_MS;
         waited += 10) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        r = take_lock(w->lock, err);
    }
    if (r == -EBUSY)
        r = hutch_err_set(err, -EBUSY,
                          "workspace \"%s\" is in use by another execution; one "
                          "execution at a time may use a workspace (try again when "
                          "it has ended)",
                          name);
    if (r < 0)
        goto fail;
    w->lock_fd = r;
    if ((r = read_taint(w->mark, w->taint, sizeof(w->taint), err)) < 0)
        goto fail;
    if (lstat(w->tar, &st) < 0 && errno == ENOENT &&
        count_tars(w->dir) >= pol->max_count) {
        r = hutch_err_set(err, -EDQUOT,
                          "workspace \"%s\" cannot be created: there are already %u "
                          "workspaces (the policy's workspaces.max_count); delete one "
                          "first",
                          name, pol->max_count);
        goto fail;
    }
    *out = w;
    return 0;
fail:
    hutch_ws_close(w);
    return r;
}

const char *hutch_ws_taint(const struct hutch_ws *w)
{
    return w && w->taint[0] ? w->taint : NULL;
}

void hutch_ws_close(struct hutch_ws *w)
{
    struct stat st;
    if (!w)
        return;
    /* A workspace never saved leaves no lock file behind (unlinked while
     * locked: take_lock's inode check sends a waiter to a fresh one). */
    if (w->lock_fd >= 0 && lstat(w->tar, &st) < 0 && errno == ENOENT)
        unlink(w->lock);
    if (w->lock_fd >= 0)
        release_lock(w->lock, w->lock_fd);
    free(w);
}

/* A fresh private directory in the principal's directory. */
static int temp_dir(const struct hutch_ws *w, const char *what, char *out, size_t len,
                    struct hutch_err *err)
{
    snprintf(out, len, "%s/.%s-XXXXXX", w->dir, what);
    if (!mkdtemp(out))
        return hutch_err_set(err, -errno, "cannot create a directory in %s: %s", w->dir,
                             strerror(errno));
    return 0;
}

int hutch_ws_load(struct hutch_ws *w, struct hutch_tar **tar, size_t tar_max,
                  struct hutch_err *err)
{
    char tmp[PATH_MAX], ws[PATH_MAX + 32], *data = NULL;
    size_t len = 0;
    int r;

    if ((r = temp_dir(w, "load", tmp, sizeof(tmp), err)) < 0)
        return r;
    snprintf(ws, sizeof(ws), "%s/" HUTCH_WORKSPACE_DIR_IN_SANDBOX, tmp);
    r = hutch_read_file(w->tar, HUTCH_TAR_MAX_STREAM, &data, &len, err);
    if (r == -ENOENT)
        r = 0; /* new: an empty folder, so that the program finds it */
    else if (r == 0)
        /* Opened by an execution: used now (the idle clock restarts). */
        utimensat(AT_FDCWD, w->tar, NULL, AT_SYMLINK_NOFOLLOW);
    if (r == 0) {
        char out[PATH_MAX + 8];
        snprintf(out, sizeof(out), "%s/out", tmp);
        if (mkdir(out, 0755) < 0 || mkdir(ws, 0755) < 0)
            r = hutch_err_set(err, -errno, "cannot create %s: %s", ws, strerror(errno));
    }
    if (r == 0 && len)
        r = hutch_archive_extract(data, len, ws, NULL, err);
    free(data);
    if (r == 0 && !*tar)
        r = hutch_tar_new(tar, tar_max, err);
    if (r == 0) {
        char out[PATH_MAX + 8];
        snprintf(out, sizeof(out), "%s/out", tmp);
        r = hutch_tar_add_path(*tar, out, "out", err);
    }
    rm_tree(tmp);
    if (r < 0) {
        char msg[HUTCH_ERR_MSG];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        return hutch_err_set(err, r, "loading workspace \"%s\": %s", w->name, msg);
    }
    return 0;
}

struct tally {
    uint64_t bytes; /* file data */
    size_t files;   /* entries, folders included */
};

static int tally(void *arg, const char *path, int is_dir, uint64_t size)
{
    struct tally *t = arg;
    (void)path;
    t->files++;
    if (!is_dir)
        t->bytes += size;
    return 0;
}

/* Pack `dir` into <name>.tar, replaced atomically (util.h).  max_bytes is
 * what is stored: the tar, its headers, padding and end blocks included (an
 * empty file takes a 512-byte header; counting file data alone let 3000
 * empty files store 1.5 MB under a 256 KB limit).  Over it: -E2BIG,
 * nothing changed. */
static int save_dir(struct hutch_ws *w, const char *dir, const char *taint,
                    struct hutch_err *err)
{
    struct hutch_buf b = HUTCH_BUF_INIT(HUTCH_TAR_MAX_STREAM);
    struct tally t = {0};
    int r;

    r = hutch_archive_pack_dir(dir, hutch_buf_write, &b, NULL, err);
    if (r == 0 && b.len > w->max_bytes) {
        if (hutch_archive_list(b.data, b.len, NULL, tally, &t, err) < 0)
            t = (struct tally){0};
        r = hutch_err_set(err, -E2BIG,
                          "it would take %zu bytes (%llu bytes of data in %zu files "
                          "and folders, with their tar headers), over the policy's "
                          "workspaces.max_bytes (%llu)",
                          b.len, (unsigned long long)t.bytes, t.files,
                          (unsigned long long)w->max_bytes);
    }
    /* The mark before the content: a crash between the two leaves the old
     * content marked (too careful), never new content unmarked. */
    if (r == 0 && taint) {
        char mark[HUTCH_WORKSPACE_TAINT_MAX + 1];
        snprintf(mark, sizeof(mark), "%s", taint);
        r = hutch_write_file_atomic(w->mark, mark, strlen(mark), err);
    }
    if (r == 0)
        r = hutch_write_file_atomic(w->tar, b.data, b.len, err);
    hutch_buf_free(&b);
    return r;
}

int hutch_ws_split(struct hutch_ws *w, struct hutch_buf *out_tar,
                   struct hutch_file_list *files, int save, const char *taint,
                   const char *out_dir, struct hutch_err *err)
{
    char tmp[PATH_MAX], ws[PATH_MAX + 16];
    struct hutch_err e2 = HUTCH_ERR_INIT;
    struct stat st;
    int r, r2;

    if ((r = temp_dir(w, "split", tmp, sizeof(tmp), err)) < 0)
        return r;
    snprintf(ws, sizeof(ws), "%s/workspace", tmp);
    if (out_tar->len)
        r = hutch_archive_extract(out_tar->data, out_tar->len, tmp, NULL, err);
    if (r < 0) {
        /* Nothing of it can be told apart: no result files either. */
        out_tar->len = 0;
        hutch_file_list_clear(files);
        goto out;
    }
    if (save) {
        if (lstat(ws, &st) == 0 && !S_ISDIR(st.st_mode))
            r = hutch_err_set(err, -ENOTDIR,
                              "/work/" HUTCH_WORKSPACE_DIR_IN_SANDBOX
                              " is not a folder");
        else
            r = save_dir(w, ws, taint, err);
    }
    /* The rest is the result, whatever happened to the workspace. */
    if (lstat(ws, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            rm_tree(ws);
        else
            unlink(ws);
    }
    out_tar->len = 0;
    r2 = hutch_archive_pack_dir(tmp, hutch_buf_write, out_tar, NULL, &e2);
    if (r2 == 0 && out_dir)
        r2 = hutch_archive_extract(out_tar->data, out_tar->len, out_dir, NULL, &e2);
    if (r2 < 0 && r == 0)
        r = hutch_err_set(err, r2, "the result files: %s", e2.msg);
    for (size_t i = files->n; i-- > 0;) {
        const char *p = files->v[i].path;
        if (!strcmp(p, "workspace") || !strncmp(p, "workspace/", 10))
            hutch_file_list_remove(files, i);
    }
out:
    rm_tree(tmp);
    if (r < 0) {
        char msg[HUTCH_ERR_MSG];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        return hutch_err_set(err, r,
                             "workspace \"%s\" not saved (it keeps what it held "
                             "before): %s",
                             w->name, msg);
    }
    return 0;
}

int hutch_ws_list(const char *store, const char *principal, uint64_t idle_s,
                  hutch_ws_fn fn, void *arg, struct hutch_err *err)
{
    DIR *d, *pd;
    struct dirent *e, *pe;
    char pdir[PATH_MAX], path[PATH_MAX], who[HUTCH_MAX_PRINCIPAL_NAME + 1];
    char want[PATH_MAX];
    int r;

    sweep(store, idle_s);
    if (principal && (r = principal_dir(store, principal, want, sizeof(want), err)) < 0)
        return r;
    if (!(d = opendir(store)))
        return errno == ENOENT ? 0
                               : hutch_err_set(err, -errno, "cannot read %s: %s", store,
                                               strerror(errno));
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || unhex(e->d_name, who, sizeof(who)) < 0)
            continue;
        snprintf(pdir, sizeof(pdir), "%s/%s", store, e->d_name);
        if (principal && strcmp(pdir, want))
            continue;
        if (!(pd = opendir(pdir)))
            continue;
        while ((pe = readdir(pd))) {
            size_t n = strlen(pe->d_name);
            struct stat st;
            char name[HUTCH_WORKSPACE_NAME_MAX + 1];
            if (pe->d_name[0] == '.' || n < 5 || strcmp(pe->d_name + n - 4, ".tar") ||
                n - 4 > HUTCH_WORKSPACE_NAME_MAX)
                continue;
            snprintf(name, sizeof(name), "%.*s", (int)(n - 4), pe->d_name);
            snprintf(path, sizeof(path), "%s/%s", pdir, pe->d_name);
            if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                struct stat ms;
                snprintf(path, sizeof(path), "%s/%s.taint", pdir, name);
                fn(arg, who, name, (uint64_t)st.st_size, (int64_t)st.st_mtime,
                   lstat(path, &ms) == 0);
            }
        }
        closedir(pd);
    }
    closedir(d);
    return 0;
}

static int paths_of(const char *store, const char *principal, const char *name,
                    char *pdir, char *tar, char *lock, struct hutch_err *err)
{
    int r;
    if ((r = hutch_ws_check_name(name, err)) < 0 ||
        (r = principal_dir(store, principal, pdir, PATH_MAX, err)) < 0)
        return r;
    snprintf(tar, PATH_MAX, "%s/%s.tar", pdir, name);
    snprintf(lock, PATH_MAX, "%s/%s.lock", pdir, name);
    return 0;
}

int hutch_ws_delete(const char *store, const char *principal, const char *name,
                    struct hutch_err *err)
{
    char pdir[PATH_MAX], tar[PATH_MAX], lock[PATH_MAX];
    struct stat st;
    int r = paths_of(store, principal, name, pdir, tar, lock, err), fd;

    if (r < 0)
        return r;
    if (lstat(tar, &st) < 0)
        return hutch_err_set(err, -ENOENT, "%s has no workspace \"%s\"", principal,
                             name);
    fd = take_lock(lock, err);
    if (fd == -EBUSY)
        return hutch_err_set(err, -EBUSY,
                             "workspace \"%s\" is in use by an execution; try again "
                             "when it has ended",
                             name);
    if (fd < 0)
        return fd;
    r = unlink(tar) < 0
            ? hutch_err_set(err, -errno, "cannot delete %s: %s", tar, strerror(errno))
            : 0;
    if (r == 0) {
        char mark[PATH_MAX + 8];
        snprintf(mark, sizeof(mark), "%.*s.taint", (int)(strlen(tar) - 4), tar);
        unlink(mark);
    }
    unlink(lock);
    release_lock(lock, fd);
    return r;
}

int hutch_ws_read(const char *store, const char *principal, const char *name,
                  char **tar, size_t *len, struct hutch_err *err)
{
    char pdir[PATH_MAX], path[PATH_MAX], lock[PATH_MAX];
    int r = paths_of(store, principal, name, pdir, path, lock, err);
    if (r < 0)
        return r;
    r = hutch_read_file(path, HUTCH_TAR_MAX_STREAM, tar, len, err);
    if (r == -ENOENT)
        return hutch_err_set(err, -ENOENT, "%s has no workspace \"%s\"", principal,
                             name);
    return r;
}
