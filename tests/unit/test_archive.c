/* test_archive.c — unit tests of src/archive*.c (the judge, the unpacker,
 * the writers), printing TAP.
 *
 * Hostile tars are crafted in memory with libarchive's write API; every
 * rejection is checked for its message and for leaving the destination
 * exactly as it was (a snapshot of names, types, modes, contents and link
 * targets, which also catches a leftover staging directory).  Everything
 * happens below one mkdtemp() directory, removed at the end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "hutch_archive.h"

#include <archive.h>
#include <archive_entry.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"

/* "d/d/…/d" with n components (p must hold 2n bytes). */
static void deep_path(char *p, int n)
{
    for (int i = 0; i < n; i++) {
        p[2 * i] = 'd';
        p[2 * i + 1] = '/';
    }
    p[2 * n - 1] = '\0';
}

static char g_root[64];
static char *g_kept[256];
static size_t g_nkept;

#define FAIL(...)                                                                      \
    do {                                                                               \
        printf("# %s:%d: ", __FILE__, __LINE__);                                       \
        printf(__VA_ARGS__);                                                           \
        printf("\n");                                                                  \
        return 1;                                                                      \
    } while (0)
#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond))                                                                   \
            FAIL("check failed: %s", #cond);                                           \
    } while (0)

/* ---------------------------------------------------------------------- */
/* Paths and files */

/* snprintf that stops the run rather than truncate a path. */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t n,
                                                      const char *f, ...)
{
    va_list ap;
    int k;

    va_start(ap, f);
    k = vsnprintf(buf, n, f, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) {
        fprintf(stderr, "path too long: %s\n", buf);
        exit(2);
    }
}

/* a/b in one of 64 rotating buffers: plenty for one check. */
static char *path_of(const char *a, const char *b)
{
    static char bufs[64][4096];
    static int next;
    char *p = bufs[next++ % 64];
    fmt(p, 4096, "%s/%s", a, b);
    return p;
}

/* A path below the test root that stays valid for the whole run. */
static char *root_path(const char *name)
{
    size_t n = strlen(g_root) + strlen(name) + 2;
    char *p = malloc(n);

    if (!p || g_nkept == 256)
        exit(2);
    fmt(p, n, "%s/%s", g_root, name);
    g_kept[g_nkept++] = p; /* still reachable at exit: no leak report */
    return p;
}

/* A fresh directory below the test root. */
static char *newdir(const char *name)
{
    char *p = root_path(name);
    if (mkdir(p, 0755) < 0) {
        perror(p);
        exit(2);
    }
    return p;
}

static void put_file(const char *path, const char *data, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data)) {
        perror(path);
        exit(2);
    }
    fchmod(fd, mode);
    close(fd);
}

static char *slurp(const char *path, size_t *len)
{
    struct hutch_buf b;
    char tmp[4096];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_NOFOLLOW);

    hutch_buf_init(&b, 1u << 30);
    if (fd < 0)
        return NULL;
    while ((n = read(fd, tmp, sizeof(tmp))) > 0)
        hutch_buf_append(&b, tmp, (size_t)n);
    close(fd);
    hutch_buf_append(&b, "", 1);
    if (len)
        *len = b.len - 1;
    return b.data;
}

static bool file_is(const char *path, const char *want, mode_t mode)
{
    struct stat st;
    size_t len;
    char *got = slurp(path, &len);
    bool ok = got && len == strlen(want) && memcmp(got, want, len) == 0 &&
              lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
              (st.st_mode & 07777) == mode;
    if (!ok)
        printf("# %s: want \"%s\" mode %o, got \"%s\" mode %o\n", path, want,
               (unsigned)mode, got ? got : "(unreadable)",
               lstat(path, &st) == 0 ? st.st_mode & 07777 : 0);
    free(got);
    return ok;
}

static bool dir_mode_is(const char *path, mode_t mode)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == mode;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(p) < 0 ? -1 : 0;
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

/* ---------------------------------------------------------------------- */
/* Snapshots: everything below a directory, as one string */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snap_rec(struct hutch_buf *out, const char *dir, const char *rel)
{
    char *names[4096];
    size_t n = 0;
    struct dirent *de;
    DIR *d = opendir(dir);

    if (!d)
        return;
    while ((de = readdir(d)) && n < 4096)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        char full[4096], r2[4096], line[8192];
        struct stat st;
        fmt(full, sizeof(full), "%s/%s", dir, names[i]);
        fmt(r2, sizeof(r2), "%s%s%s", rel, *rel ? "/" : "", names[i]);
        lstat(full, &st);
        fmt(line, sizeof(line), "%s mode=%o size=%lld\n", r2, (unsigned)st.st_mode,
            S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size);
        hutch_buf_append(out, line, strlen(line));
        if (S_ISREG(st.st_mode)) {
            size_t len;
            char *c = slurp(full, &len);
            if (c)
                hutch_buf_append(out, c, len);
            free(c);
        } else if (S_ISLNK(st.st_mode)) {
            char t[4096];
            ssize_t k = readlink(full, t, sizeof(t));
            if (k > 0)
                hutch_buf_append(out, t, (size_t)k);
        } else if (S_ISDIR(st.st_mode)) {
            snap_rec(out, full, r2);
        }
        free(names[i]);
    }
}

static struct hutch_buf snapshot(const char *dir)
{
    struct hutch_buf b;
    struct stat st;

    hutch_buf_init(&b, 1u << 30);
    if (lstat(dir, &st) < 0)
        hutch_buf_append(&b, "MISSING", 7);
    else
        snap_rec(&b, dir, "");
    return b;
}

static bool same_snap(const struct hutch_buf *a, const struct hutch_buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* ---------------------------------------------------------------------- */
/* Crafting tars */

struct tw {
    struct archive *a;
    struct hutch_buf b;
};

static la_ssize_t tw_cb(struct archive *a, void *cd, const void *p, size_t n)
{
    return hutch_buf_append(cd, p, n) < 0 ? -1 : (la_ssize_t)n;
}

enum { TW_PAX, TW_GNU, TW_GZIP };

static void tw_open(struct tw *t, int kind)
{
    hutch_buf_init(&t->b, 512u << 20);
    t->a = archive_write_new();
    if (kind == TW_GNU)
        archive_write_set_format_gnutar(t->a);
    else
        archive_write_set_format_pax_restricted(t->a);
    if (kind == TW_GZIP)
        archive_write_add_filter_gzip(t->a);
    archive_write_set_bytes_in_last_block(t->a, 1);
    if (archive_write_open(t->a, &t->b, NULL, tw_cb, NULL) != ARCHIVE_OK) {
        fprintf(stderr, "tw_open: %s\n", archive_error_string(t->a));
        exit(2);
    }
}

/* type: AE_IF*; link: symlink target, or hardlink target when hard. */
static void tw_add(struct tw *t, const char *path, unsigned type, unsigned perm,
                   const char *data, const char *link, bool hard)
{
    struct archive_entry *e = archive_entry_new();
    size_t len = data ? strlen(data) : 0;

    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, type == AE_IFREG && !hard ? (la_int64_t)len : 0);
    if (link && hard)
        archive_entry_set_hardlink(e, link);
    else if (link)
        archive_entry_set_symlink(e, link);
    if (type == AE_IFCHR || type == AE_IFBLK)
        archive_entry_set_rdev(e, makedev(1, 3));
    if (archive_write_header(t->a, e) < ARCHIVE_WARN) {
        fprintf(stderr, "tw_add %s: %s\n", path, archive_error_string(t->a));
        exit(2);
    }
    if (len && !hard && archive_write_data(t->a, data, len) != (la_ssize_t)len) {
        fprintf(stderr, "tw_add %s: %s\n", path, archive_error_string(t->a));
        exit(2);
    }
    archive_entry_free(e);
}

static void tw_file(struct tw *t, const char *path, const char *data)
{
    tw_add(t, path, AE_IFREG, 0644, data, NULL, false);
}

static void tw_close(struct tw *t)
{
    archive_write_close(t->a);
    archive_write_free(t->a);
    t->a = NULL;
}

/* Names of the entries of a tar, "\n"-separated, "ERROR" when unreadable. */
static char *tar_names(const void *tar, size_t len)
{
    struct hutch_buf b;
    struct archive_entry *e;
    struct archive *a = archive_read_new();
    int r;

    hutch_buf_init(&b, 1u << 30);
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK) {
        hutch_buf_append(&b, "ERROR", 5);
    } else {
        while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
               r == ARCHIVE_WARN) {
            hutch_buf_append(&b, archive_entry_pathname(e),
                             strlen(archive_entry_pathname(e)));
            hutch_buf_append(&b, "\n", 1);
        }
        if (r != ARCHIVE_EOF)
            hutch_buf_append(&b, "ERROR", 5);
    }
    hutch_buf_append(&b, "", 1);
    archive_read_free(a);
    return b.data;
}

/* Owner, mode and type of every entry of a tar: "name uid:gid mode type\n". */
static char *tar_meta(const void *tar, size_t len)
{
    struct hutch_buf b;
    struct archive_entry *e;
    struct archive *a = archive_read_new();
    char line[512];
    int r;

    hutch_buf_init(&b, 1u << 20);
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, tar, len) == ARCHIVE_OK)
        while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
               r == ARCHIVE_WARN) {
            int n = snprintf(line, sizeof(line), "%s %lld:%lld %o %s\n",
                             archive_entry_pathname(e), (long long)archive_entry_uid(e),
                             (long long)archive_entry_gid(e),
                             (unsigned)archive_entry_perm(e),
                             archive_entry_filetype(e) == AE_IFDIR ? "dir" : "file");
            hutch_buf_append(&b, line, (size_t)n);
        }
    hutch_buf_append(&b, "", 1);
    archive_read_free(a);
    return b.data;
}

/* ---------------------------------------------------------------------- */
/* The rejection check */

/* Extracting must fail with `needle` in the message and leave dest as it
 * was (contents and anything linked from `also`, when given). */
static int count_call(void *arg, const char *path, const void *data, size_t size)
{
    (void)path;
    (void)data;
    (void)size;
    ++*(int *)arg;
    return 0;
}

/* What extract refused for the tar itself (not for what the destination
 * holds), the one judge refuses for every reader, with the same message:
 * the listing, and read_files when the limits are the default ones. */
static int judged_alike(const void *tar, size_t len,
                        const struct hutch_archive_limits *lim,
                        const struct hutch_err *want)
{
    struct hutch_err err = {0};
    int r, calls = 0;

    if (len == 0)
        return 0; /* extract's own refusal: list and read_files take no bytes */
    r = hutch_archive_list(tar, len, lim, NULL, NULL, &err);
    if (r != want->code || strcmp(err.msg, want->msg) != 0) {
        printf("# list: %d %s\n", r, err.msg);
        return 1;
    }
    if (lim)
        return 0;
    memset(&err, 0, sizeof(err));
    r = hutch_archive_read_files(tar, len, 1u << 20, count_call, &calls, &err);
    if (r != want->code || strcmp(err.msg, want->msg) != 0 || calls) {
        printf("# read_files: %d %s (%d files)\n", r, err.msg, calls);
        return 1;
    }
    return 0;
}

static int expect_reject_lim(const void *tar, size_t len, const char *dest,
                             const struct hutch_archive_limits *lim, const char *needle,
                             const char *also)
{
    struct hutch_err err = {0};
    struct hutch_buf before = snapshot(dest), after, ab = {0}, aa = {0};
    int r, bad = 0;

    if (also)
        ab = snapshot(also);
    r = hutch_archive_extract(tar, len, dest, lim, &err);
    after = snapshot(dest);
    if (also)
        aa = snapshot(also);
    printf("# -> %d %s\n", r, err.msg);
    if (r >= 0 || err.code != r) {
        printf("# expected a failure, got %d (code %d)\n", r, err.code);
        bad = 1;
    } else if (!strstr(err.msg, needle)) {
        printf("# message lacks \"%s\"\n", needle);
        bad = 1;
    }
    if (!same_snap(&before, &after)) {
        printf("# destination changed\n");
        bad = 1;
    }
    if (r < 0 && !strstr(err.msg, "destination") && !bad)
        bad = judged_alike(tar, len, lim, &err);
    if (also && !same_snap(&ab, &aa)) {
        printf("# %s changed\n", also);
        bad = 1;
    }
    hutch_buf_free(&before);
    hutch_buf_free(&after);
    hutch_buf_free(&ab);
    hutch_buf_free(&aa);
    return bad;
}

/* A destination holding one marker file. */
static char *marked_dest(const char *name)
{
    char *d = newdir(name);
    put_file(path_of(d, "marker.txt"), "keep me\n", 0644);
    return d;
}

static int reject_one(const char *name, void (*fill)(struct tw *), const char *needle)
{
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    fill(&t);
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, marked_dest(name), NULL, needle, NULL);
    hutch_buf_free(&t.b);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Tests: small pieces */

static int t_limits(void)
{
    struct hutch_archive_limits in, out;

    hutch_archive_limits_in(&in);
    hutch_archive_limits_out(&out);
    CHECK(in.max_bytes == HUTCH_TAR_IN_MAX_BYTES &&
          out.max_bytes == HUTCH_TAR_OUT_MAX_BYTES);
    CHECK(in.max_entries == HUTCH_TAR_MAX_ENTRIES &&
          out.max_entries == HUTCH_TAR_MAX_ENTRIES);
    CHECK(in.max_path == HUTCH_TAR_MAX_PATH && out.max_depth == HUTCH_TAR_MAX_DEPTH);
    return 0;
}

static int t_relpath(void)
{
    static const char *good[] = {"a",           "a/b",          "a.b/..c",
                                 "...",         ".x",           "x y/z",
                                 "caf\xc3\xa9", "nb\xc2\xa0sp", "\xc3\x82"};
    static const struct {
        const char *p, *needle;
    } bad[] = {
        {"", "empty path"},
        {"/a", "absolute"},
        {"..", "\"..\""},
        {"a/..", "\"..\""},
        {"./a", "\".\""},
        {".", "\".\""},
        {"a//b", "empty path"},
        {"a/", "empty path"},
        {"a/../../x", "\"..\""},
        {"a\nb", "\"a\\x0ab\": control characters"},
        {"d/\x1b]52;c;aGk=\x07", "\"d/\\x1b]52;c;aGk=\\x07\": control characters"},
        {"tab\there", "control characters"},
        {"del\x7f", "control characters"},
        {"csi\xc2\x9b"
         "31m",
         "\"csi\\xc2\\x9b31m\": control characters"},
    };
    struct hutch_archive_limits lim;
    struct hutch_err err = {0};
    char p[2048];

    hutch_archive_limits_out(&lim);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (hutch_archive_check_relpath(good[i], &lim, &err) != 0)
            FAIL("\"%s\" refused: %s", good[i], err.msg);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (hutch_archive_check_relpath(bad[i].p, &lim, &err) != -EINVAL)
            FAIL("\"%s\" accepted", bad[i].p);
        if (!strstr(err.msg, bad[i].needle))
            FAIL("\"%s\": message \"%s\" lacks %s", bad[i].p, err.msg, bad[i].needle);
    }
    memset(p, 'n', 256);
    p[256] = '\0';
    CHECK(hutch_archive_check_relpath(p, &lim, &err) == -EINVAL &&
          strstr(err.msg, "255"));
    p[255] = '\0';
    CHECK(hutch_archive_check_relpath(p, &lim, &err) == 0);
    for (int i = 0; i < 5; i++) {
        memset(p + i * 206, 'm', 205);
        p[i * 206 + 205] = '/';
    }
    p[5 * 206 - 1] = '\0'; /* 1029 bytes */
    CHECK(hutch_archive_check_relpath(p, &lim, &err) == -EINVAL &&
          strstr(err.msg, "1024"));
    deep_path(p, 33);
    CHECK(hutch_archive_check_relpath(p, &lim, &err) == -EINVAL &&
          strstr(err.msg, "32"));
    CHECK(hutch_archive_check_relpath("a", NULL, &err) == 0);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Tests: hostile tars */

static void fill_abs(struct tw *t)
{
    tw_file(t, "/etc/hutch-test", "x");
}
static void fill_dotdot(struct tw *t)
{
    tw_file(t, "../x", "x");
}
static void fill_dotdot2(struct tw *t)
{
    tw_file(t, "ok.txt", "fine");
    tw_file(t, "a/../../x", "x");
}
static void fill_symlink(struct tw *t)
{
    tw_add(t, "a/l", AE_IFLNK, 0777, NULL, "/etc", false);
}
static void fill_hardlink(struct tw *t)
{
    tw_file(t, "a", "data");
    tw_add(t, "b", AE_IFREG, 0644, NULL, "a", true);
}
static void fill_chr(struct tw *t)
{
    tw_add(t, "null", AE_IFCHR, 0666, NULL, NULL, false);
}
static void fill_blk(struct tw *t)
{
    tw_add(t, "sda", AE_IFBLK, 0660, NULL, NULL, false);
}
static void fill_fifo(struct tw *t)
{
    tw_add(t, "pipe", AE_IFIFO, 0644, NULL, NULL, false);
}
static void fill_setuid(struct tw *t)
{
    tw_add(t, "su", AE_IFREG, 04755, "x", NULL, false);
}
static void fill_setgid(struct tw *t)
{
    tw_add(t, "sg", AE_IFREG, 02755, "x", NULL, false);
}
static void fill_sticky(struct tw *t)
{
    tw_add(t, "tmp", AE_IFDIR, 01777, NULL, NULL, false);
}
static void fill_dup(struct tw *t)
{
    tw_file(t, "a", "one");
    tw_file(t, "a", "two");
}
static void fill_dupdir(struct tw *t)
{
    tw_add(t, "d/", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(t, "d", AE_IFDIR, 0755, NULL, NULL, false);
}
static void fill_fileparent(struct tw *t)
{
    tw_file(t, "a", "file");
    tw_file(t, "a/b", "under a file");
}
static void fill_symlink_then_file(struct tw *t)
{
    tw_add(t, "l", AE_IFLNK, 0777, NULL, "/tmp/x", false);
    tw_file(t, "l/f", "through the link");
}
static void fill_longpath(struct tw *t)
{
    char p[1300] = "";
    for (int i = 0; i < 5; i++) {
        if (i)
            p[i * 251 - 1] = '/';
        memset(p + i * 251, 'p', 250);
        p[i * 251 + 250] = '\0';
    }
    tw_file(t, p, "x");
}
static void fill_deep(struct tw *t)
{
    char p[200];
    deep_path(p, 33);
    tw_file(t, p, "x");
}
static void fill_longname(struct tw *t)
{
    char p[300];
    memset(p, 'c', 256);
    p[256] = '\0';
    tw_file(t, p, "x");
}

/* A name that forges a listing line, one that writes the terminal's
 * clipboard (OSC 52), one with a C1 CSI. */
static void fill_newline(struct tw *t)
{
    tw_file(t, "ok.txt", "fine");
    tw_file(t, "a\nb 3 bytes\nforged.txt", "x");
}
static void fill_osc52(struct tw *t)
{
    tw_add(t, "d/", AE_IFDIR, 0755, NULL, NULL, false);
    tw_file(t, "d/\x1b]52;c;cm0gLXJmIH4=\x07.txt", "x");
}
static void fill_c1(struct tw *t)
{
    tw_file(t,
            "\xc2\x9b"
            "2J",
            "x");
}

static int t_control(void)
{
    return reject_one("control", fill_newline,
                      "tar entry \"a\\x0ab 3 bytes\\x0aforged.txt\": control "
                      "characters (a newline, a tab, an escape, U+0080 to U+009F) are "
                      "not allowed in names") ||
           reject_one("osc52", fill_osc52,
                      "tar entry \"d/\\x1b]52;c;cm0gLXJmIH4=\\x07.txt\": control") ||
           reject_one("c1", fill_c1, "tar entry \"\\xc2\\x9b2J\": control");
}

static int t_control_filter(void)
{
    struct hutch_buf out;
    struct hutch_err err = {0};
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    fill_newline(&t);
    tw_close(&t);
    hutch_buf_init(&out, 1u << 20);
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 0, 0,
                             &err);
    printf("# filter -> %d %s\n", r, err.msg);
    CHECK(r == -EINVAL && strstr(err.msg, "\"a\\x0ab 3 bytes\\x0aforged.txt\"") &&
          !strchr(err.msg, '\n') && out.len == 0);
    hutch_buf_free(&t.b);
    hutch_buf_free(&out);
    return 0;
}

static int t_abs(void)
{
    return reject_one("abs", fill_abs, "absolute paths are not allowed");
}
static int t_dotdot(void)
{
    return reject_one("dotdot", fill_dotdot,
                      "tar entry \"../x\": \"..\" is not allowed in paths");
}
static int t_dotdot2(void)
{
    return reject_one("dotdot2", fill_dotdot2, "\"a/../../x\": \"..\" is not allowed");
}
static int t_symlink(void)
{
    return reject_one("symlink", fill_symlink,
                      "\"a/l\": symbolic links are not allowed");
}
static int t_hardlink(void)
{
    return reject_one("hardlink", fill_hardlink, "\"b\": hard links are not allowed");
}
static int t_chr(void)
{
    return reject_one("chr", fill_chr, "device files are not allowed");
}
static int t_blk(void)
{
    return reject_one("blk", fill_blk, "device files are not allowed");
}
static int t_fifo(void)
{
    return reject_one("fifo", fill_fifo, "fifos are not allowed");
}
static int t_setuid(void)
{
    return reject_one("setuid", fill_setuid, "setuid");
}
static int t_setgid(void)
{
    return reject_one("setgid", fill_setgid, "setgid");
}
static int t_sticky(void)
{
    return reject_one("sticky", fill_sticky, "sticky");
}
static int t_dup(void)
{
    return reject_one("dup", fill_dup, "\"a\": appears more than once");
}
static int t_dupdir(void)
{
    return reject_one("dupdir", fill_dupdir, "appears more than once");
}
static int t_fileparent(void)
{
    return reject_one("fileparent", fill_fileparent, "\"a\" is a file in this tar");
}
static int t_symlink_then_file(void)
{
    return reject_one("symthenfile", fill_symlink_then_file, "\"l\": symbolic links");
}
static int t_longpath(void)
{
    return reject_one("longpath", fill_longpath, "longer than 1024 bytes (limit)");
}
static int t_deep(void)
{
    return reject_one("deep", fill_deep, "more than 32 components");
}
static int t_longname(void)
{
    return reject_one("longname", fill_longname, "component is longer than 255 bytes");
}

static int t_bytes_cap(void)
{
    struct hutch_archive_limits lim;
    struct tw t;
    char data[61];
    int r;

    hutch_archive_limits_out(&lim);
    lim.max_bytes = 100;
    memset(data, 'b', 60);
    data[60] = '\0';
    tw_open(&t, TW_PAX);
    tw_file(&t, "one", data);
    tw_file(&t, "two", data);
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, marked_dest("bytes"), &lim,
                          "more than 100 bytes of file data (limit)", NULL);
    hutch_buf_free(&t.b);
    return r;
}

static int t_many_entries(void)
{
    struct timespec t0, t1;
    struct tw t;
    char name[32];
    double secs;
    int r;

    tw_open(&t, TW_PAX);
    for (int i = 0; i < 100000; i++) {
        fmt(name, sizeof(name), "f%06d", i);
        tw_file(&t, name, NULL);
    }
    tw_close(&t);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = expect_reject_lim(t.b.data, t.b.len, marked_dest("many"), NULL,
                          "tar has more than 10000 entries (limit)", NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("# rejected in %.3f s\n", secs);
    hutch_buf_free(&t.b);
    if (secs > 5.0)
        FAIL("too slow: %.3f s", secs);
    return r;
}

/* A symlink dest_dir already holds, at the path of a file entry. */
static int t_dest_symlink_file(void)
{
    char *out = newdir("outside1"), *dest = marked_dest("destsym1");
    char target[4096];
    struct tw t;
    int r;

    fmt(target, sizeof(target), "%s", path_of(out, "target.txt"));
    put_file(target, "secret\n", 0644);
    CHECK(symlink(target, path_of(dest, "x")) == 0);
    tw_open(&t, TW_PAX);
    tw_file(&t, "y", "fine");
    tw_file(&t, "x", "overwritten!");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL,
                          "\"x\" in the destination is a symbolic link", out);
    hutch_buf_free(&t.b);
    CHECK(file_is(target, "secret\n", 0644));
    return r;
}

/* A symlink to a directory outside, on the way to an entry. */
static int t_dest_symlink_dir(void)
{
    char out[4096], *dest;
    struct tw t;
    int r;

    fmt(out, sizeof(out), "%s", newdir("outside2"));
    dest = marked_dest("destsym2");
    put_file(path_of(out, "present.txt"), "here\n", 0644);
    CHECK(symlink(out, path_of(dest, "l")) == 0);
    tw_open(&t, TW_PAX);
    tw_file(&t, "l/f", "escaped!");
    tw_close(&t);
    r = expect_reject_lim(
        t.b.data, t.b.len, dest, NULL,
        "tar entry \"l/f\": \"l\" in the destination is a symbolic link", out);
    hutch_buf_free(&t.b);
    CHECK(access(path_of(out, "f"), F_OK) < 0);
    return r;
}

static int t_dest_file_for_dir(void)
{
    char *dest = marked_dest("filefordir");
    struct tw t;
    int r;

    put_file(path_of(dest, "d"), "a file\n", 0644);
    tw_open(&t, TW_PAX);
    tw_file(&t, "d/x", "x");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL, "is not a directory", NULL);
    hutch_buf_free(&t.b);
    return r;
}

static int t_dest_dir_for_file(void)
{
    char *dest = marked_dest("dirforfile");
    struct tw t;
    int r;

    CHECK(mkdir(path_of(dest, "d"), 0755) == 0);
    put_file(path_of(dest, "d/inside"), "in\n", 0644);
    tw_open(&t, TW_PAX);
    tw_file(&t, "d", "x");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL,
                          "\"d\" in the destination is a directory", NULL);
    hutch_buf_free(&t.b);
    return r;
}

static int t_dest_fifo(void)
{
    char *dest = marked_dest("destfifo");
    struct tw t;
    int r;

    CHECK(mkfifo(path_of(dest, "p"), 0644) == 0);
    tw_open(&t, TW_PAX);
    tw_file(&t, "p", "x");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL, "is not a regular file", NULL);
    hutch_buf_free(&t.b);
    return r;
}

static int t_gzip(void)
{
    struct tw t;
    int r;

    tw_open(&t, TW_GZIP);
    tw_file(&t, "a", "compressed");
    tw_close(&t);
    CHECK(t.b.len > 2 && (unsigned char)t.b.data[0] == 0x1f);
    r = expect_reject_lim(
        t.b.data, t.b.len, marked_dest("gzip"), NULL,
        "input is gzip-compressed; only an uncompressed tar is accepted", NULL);
    hutch_buf_free(&t.b);
    return r;
}

static int t_garbage(void)
{
    char junk[3000];

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 7 + 13);
    return expect_reject_lim(junk, sizeof(junk), marked_dest("garbage"), NULL,
                             "input is not a tar archive", NULL);
}

static int t_empty_input(void)
{
    char *dest = root_path("empty-input-dest");
    int r =
        expect_reject_lim("", 0, dest, NULL, "empty input is not a tar archive", NULL);

    CHECK(access(dest, F_OK) < 0); /* not created */
    return r;
}

static int t_truncated(void)
{
    struct tw t;
    char big[5001];
    int r;

    memset(big, 't', 5000);
    big[5000] = '\0';
    tw_open(&t, TW_PAX);
    tw_file(&t, "first", "ok");
    tw_file(&t, "big", big);
    tw_close(&t);
    r = expect_reject_lim(t.b.data, 512 * 4 + 1000, marked_dest("truncated"), NULL,
                          "damaged", NULL);
    hutch_buf_free(&t.b);
    return r;
}

/* The rejection comes late (pass 1 read fine up to the bad entry) and the
 * destination did not exist: it must not exist afterwards either. */
static int t_reject_missing_dest(void)
{
    char *dest = root_path("never-created");
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    tw_file(&t, "fine/a", "a");
    tw_file(&t, "fine/../../b", "b");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL, "\"..\"", NULL);
    hutch_buf_free(&t.b);
    CHECK(access(dest, F_OK) < 0);
    return r;
}

static int t_dest_parent_missing(void)
{
    struct hutch_err err = {0};
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    tw_file(&t, "a", "a");
    tw_close(&t);
    r = hutch_archive_extract(t.b.data, t.b.len, root_path("no/such/dest"), NULL, &err);
    hutch_buf_free(&t.b);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -ENOENT && strstr(err.msg, "parent directory must exist"));
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Tests: tars that unpack */

static int extract_ok(const void *tar, size_t len, const char *dest)
{
    struct hutch_err err = {0};
    int r = hutch_archive_extract(tar, len, dest, NULL, &err);

    if (r != 0)
        printf("# extract failed: %d %s\n", r, err.msg);
    return r;
}

static bool no_staging_left(const char *dir)
{
    struct dirent *de;
    DIR *d = opendir(dir);
    bool ok = d != NULL;

    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, ".hutch-unpack-", 14) == 0)
            ok = false;
    if (d)
        closedir(d);
    return ok;
}

static int t_empty_tar(void)
{
    char zeros[1024] = {0};
    char *dest = root_path("empty-tar-dest");
    struct hutch_buf s;
    bool empty;

    CHECK(extract_ok(zeros, sizeof(zeros), dest) == 0);
    CHECK(dir_mode_is(dest, 0755));
    s = snapshot(dest);
    empty = s.len == 0;
    hutch_buf_free(&s);
    CHECK(empty);
    return 0;
}

static int t_nested_modes(void)
{
    char *dest = root_path("nested");
    mode_t old = umask(077); /* extract must not depend on it */
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    tw_add(&t, "top/", AE_IFDIR, 0700, NULL, NULL, false);
    tw_add(&t, "top/sub", AE_IFDIR, 0500, NULL, NULL, false);
    tw_add(&t, "top/sub/run.sh", AE_IFREG, 0700, "#!/bin/sh\n", NULL, false);
    tw_add(&t, "top/data.txt", AE_IFREG, 0600, "data\n", NULL, false);
    tw_add(&t, "top/ro", AE_IFREG, 0444, "", NULL, false);
    tw_add(&t, "top/x-only", AE_IFREG, 0100, "x", NULL, false);
    tw_close(&t);
    r = extract_ok(t.b.data, t.b.len, dest);
    umask(old);
    hutch_buf_free(&t.b);
    CHECK(r == 0);
    CHECK(dir_mode_is(dest, 0755));
    CHECK(dir_mode_is(path_of(dest, "top"), 0755));
    CHECK(dir_mode_is(path_of(dest, "top/sub"), 0755));
    CHECK(file_is(path_of(dest, "top/sub/run.sh"), "#!/bin/sh\n", 0755));
    CHECK(file_is(path_of(dest, "top/data.txt"), "data\n", 0644));
    CHECK(file_is(path_of(dest, "top/ro"), "", 0644));
    CHECK(file_is(path_of(dest, "top/x-only"), "x", 0755));
    CHECK(no_staging_left(dest));
    return 0;
}

/* What `tar -C dir -cf - .` writes. */
static int t_dot_prefix(void)
{
    char *dest = newdir("dotprefix");
    struct hutch_buf s;
    struct tw t;
    int r;

    tw_open(&t, TW_GNU);
    tw_add(&t, "./", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(&t, "./a/", AE_IFDIR, 0755, NULL, NULL, false);
    tw_file(&t, "./a/f", "f\n");
    tw_file(&t, "./g", "g\n");
    tw_close(&t);
    r = extract_ok(t.b.data, t.b.len, dest);
    hutch_buf_free(&t.b);
    CHECK(r == 0);
    CHECK(file_is(path_of(dest, "a/f"), "f\n", 0644));
    CHECK(file_is(path_of(dest, "g"), "g\n", 0644));
    s = snapshot(dest);
    r = memmem(s.data, s.len, "./", 2) != NULL;
    hutch_buf_free(&s);
    CHECK(!r);
    return 0;
}

static int t_missing_parents(void)
{
    char *dest = newdir("parents");
    mode_t old = umask(027);
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    tw_file(&t, "x/y/z.txt", "deep\n");
    tw_file(&t, "x/w.txt", "w\n");
    tw_close(&t);
    r = extract_ok(t.b.data, t.b.len, dest);
    umask(old);
    hutch_buf_free(&t.b);
    CHECK(r == 0);
    CHECK(dir_mode_is(path_of(dest, "x"), 0755));
    CHECK(dir_mode_is(path_of(dest, "x/y"), 0755));
    CHECK(file_is(path_of(dest, "x/y/z.txt"), "deep\n", 0644));
    CHECK(file_is(path_of(dest, "x/w.txt"), "w\n", 0644));
    return 0;
}

static int t_merge(void)
{
    char *dest = newdir("merge");
    struct tw t;
    int r;

    put_file(path_of(dest, "keep.txt"), "kept\n", 0600);
    CHECK(mkdir(path_of(dest, "d"), 0700) == 0);
    put_file(path_of(dest, "d/old.txt"), "old\n", 0644);
    put_file(path_of(dest, "r.txt"), "before\n", 0644);
    tw_open(&t, TW_PAX);
    tw_add(&t, "d", AE_IFDIR, 0755, NULL, NULL, false);
    tw_file(&t, "d/new.txt", "new\n");
    tw_add(&t, "r.txt", AE_IFREG, 0755, "after\n", NULL, false);
    tw_file(&t, "n/x", "x\n");
    tw_close(&t);
    r = extract_ok(t.b.data, t.b.len, dest);
    hutch_buf_free(&t.b);
    CHECK(r == 0);
    CHECK(file_is(path_of(dest, "keep.txt"), "kept\n", 0600));
    CHECK(dir_mode_is(path_of(dest, "d"), 0700)); /* existing directory left alone */
    CHECK(file_is(path_of(dest, "d/old.txt"), "old\n", 0644));
    CHECK(file_is(path_of(dest, "d/new.txt"), "new\n", 0644));
    CHECK(file_is(path_of(dest, "r.txt"), "after\n", 0755));
    CHECK(file_is(path_of(dest, "n/x"), "x\n", 0644));
    CHECK(no_staging_left(dest));
    return 0;
}

/* A rejection that only the destination check finds, after a merge-able
 * prefix: nothing of the good entries may appear. */
static int t_merge_rejected(void)
{
    char *dest = newdir("mergerej");
    struct tw t;
    int r;

    CHECK(mkdir(path_of(dest, "d"), 0755) == 0);
    put_file(path_of(dest, "d/old.txt"), "old\n", 0644);
    put_file(path_of(dest, "d/blocker"), "a file\n", 0644);
    tw_open(&t, TW_PAX);
    tw_file(&t, "d/new.txt", "new\n");
    tw_file(&t, "top.txt", "top\n");
    tw_file(&t, "d/blocker/x", "x\n");
    tw_close(&t);
    r = expect_reject_lim(t.b.data, t.b.len, dest, NULL,
                          "\"d/blocker\" in the destination", NULL);
    hutch_buf_free(&t.b);
    return r;
}

/* One ustar header block at out (512 bytes). */
static void ustar_header(unsigned char *out, const char *name, char type, size_t size)
{
    unsigned sum = 0;

    memset(out, 0, 512);
    snprintf((char *)out, 100, "%s", name);
    memcpy(out + 100, "0000644", 8);
    memcpy(out + 108, "0000000", 8);
    memcpy(out + 116, "0000000", 8);
    snprintf((char *)out + 124, 12, "%011o", (unsigned)size);
    snprintf((char *)out + 136, 12, "%011o", 0u);
    memset(out + 148, ' ', 8);
    out[156] = (unsigned char)type;
    memcpy(out + 257, "ustar", 6);
    memcpy(out + 263, "00", 2);
    for (int i = 0; i < 512; i++)
        sum += out[i];
    snprintf((char *)out + 148, 8, "%06o", sum);
}

/* As Python's tarfile or Go's archive/tar write a non-ASCII name: a pax
 * "path" record in UTF-8, no hdrcharset.  Built by hand: libarchive's own
 * writer needs a UTF-8 locale for that, and this test runs in "C". */
static int t_utf8_names(void)
{
    static const char name[] = "r\xc3\xa9sum\xc3\xa9.txt";
    unsigned char tar[512 * 6];
    char rec[128];
    size_t rlen, total;
    char *dest = newdir("utf8");

    rlen = strlen("path=") + strlen(name) + 1;
    total = rlen + 3; /* "NN " */
    fmt(rec, sizeof(rec), "%zu path=%s\n", total, name);
    CHECK(strlen(rec) == total);
    memset(tar, 0, sizeof(tar));
    ustar_header(tar, "PaxHeaders/resume.txt", 'x', total);
    memcpy(tar + 512, rec, total);
    ustar_header(tar + 1024, "resume.txt", '0', 3);
    memcpy(tar + 1536, "cv\n", 3);
    CHECK(extract_ok(tar, sizeof(tar), dest) == 0);
    CHECK(file_is(path_of(dest, name), "cv\n", 0644));
    CHECK(access(path_of(dest, "resume.txt"), F_OK) < 0);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Tests: pack_dir and the builder */

static int pack(const char *dir, struct hutch_buf *b,
                const struct hutch_archive_limits *lim, struct hutch_err *err)
{
    hutch_buf_init(b, HUTCH_TAR_MAX_STREAM);
    return hutch_archive_pack_dir(dir, hutch_buf_write, b, lim, err);
}

static int t_pack_round_trip(void)
{
    char src[4096], *dest;
    char big[100001];
    struct hutch_buf b, s1, s2;
    struct hutch_err err = {0};
    char *names;
    bool same, listed;
    int r;

    fmt(src, sizeof(src), "%s", newdir("packsrc"));
    dest = root_path("packdest");
    for (size_t i = 0; i < sizeof(big) - 1; i++)
        big[i] = (char)('a' + (i * 31) % 26);
    big[sizeof(big) - 1] = '\0';
    put_file(path_of(src, "a.txt"), "alpha\n", 0644);
    CHECK(mkdir(path_of(src, "bin"), 0755) == 0);
    put_file(path_of(src, "bin/run"), "#!/bin/sh\necho hi\n", 0755);
    CHECK(mkdir(path_of(src, "sub"), 0755) == 0);
    CHECK(mkdir(path_of(src, "sub/deeper"), 0755) == 0);
    put_file(path_of(src, "sub/deeper/big"), big, 0644);
    CHECK(mkdir(path_of(src, "empty"), 0755) == 0);
    put_file(path_of(src, "r\xc3\xa9sum\xc3\xa9.txt"), "utf8\n", 0644);
    put_file(path_of(src, "raw\xff.bin"), "not utf8\n", 0644);
    CHECK(symlink("a.txt", path_of(src, "link")) == 0);
    CHECK(symlink("/etc", path_of(src, "sub/etc")) == 0);
    CHECK(mkfifo(path_of(src, "pipe"), 0644) == 0);

    r = pack(src, &b, NULL, &err);
    if (r != 0)
        FAIL("pack_dir: %d %s", r, err.msg);
    names = tar_names(b.data, b.len);
    printf("# entries: %s", names);
    listed =
        strcmp(names,
               "a.txt\nbin/\nbin/run\nempty/\nraw\xff.bin\nr\xc3\xa9sum\xc3\xa9.txt\n"
               "sub/\nsub/deeper/\nsub/deeper/big\n") == 0;
    free(names);
    CHECK(listed);
    r = extract_ok(b.data, b.len, dest);
    hutch_buf_free(&b);
    CHECK(r == 0);
    /* The skipped entries aside, the trees are the same. */
    unlink(path_of(src, "link"));
    unlink(path_of(src, "sub/etc"));
    unlink(path_of(src, "pipe"));
    s1 = snapshot(src);
    s2 = snapshot(dest);
    same = same_snap(&s1, &s2);
    hutch_buf_free(&s1);
    hutch_buf_free(&s2);
    CHECK(same);
    return 0;
}

static int t_pack_missing(void)
{
    struct hutch_buf b;
    struct hutch_err err = {0};
    char *names, *dest = root_path("from-missing");
    bool none;
    int r;

    r = pack(root_path("does-not-exist"), &b, NULL, &err);
    if (r != 0)
        FAIL("pack_dir: %d %s", r, err.msg);
    CHECK(b.len >= 1024);
    names = tar_names(b.data, b.len);
    none = names[0] == '\0';
    free(names);
    CHECK(none);
    r = extract_ok(b.data, b.len, dest);
    hutch_buf_free(&b);
    CHECK(r == 0 && dir_mode_is(dest, 0755));
    return 0;
}

static int t_pack_symlink_dir(void)
{
    struct hutch_buf b;
    struct hutch_err err = {0};
    char *real = newdir("packreal");
    char *link = root_path("packlink");
    int r;

    put_file(path_of(real, "f"), "f", 0644);
    CHECK(symlink(real, link) == 0);
    r = pack(link, &b, NULL, &err);
    hutch_buf_free(&b);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r < 0 && strstr(err.msg, "symbolic link"));
    return 0;
}

static int t_pack_limits(void)
{
    struct hutch_archive_limits lim;
    struct hutch_buf b;
    struct hutch_err err = {0};
    char *src = newdir("packlim");
    char name[16];
    int r;

    for (int i = 0; i < 5; i++) {
        fmt(name, sizeof(name), "f%d", i);
        put_file(path_of(src, name), "0123456789", 0644);
    }
    hutch_archive_limits_out(&lim);
    lim.max_entries = 3;
    r = pack(src, &b, &lim, &err);
    hutch_buf_free(&b);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -E2BIG && strstr(err.msg, "more than 3 entries (limit)"));

    hutch_archive_limits_out(&lim);
    lim.max_bytes = 25;
    r = pack(src, &b, &lim, &err);
    hutch_buf_free(&b);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -E2BIG && strstr(err.msg, "more than 25 bytes"));

    /* The sink refusing: a 2 KiB cap on the stream. */
    hutch_buf_init(&b, 2048);
    r = hutch_archive_pack_dir(src, hutch_buf_write, &b, NULL, &err);
    hutch_buf_free(&b);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -E2BIG && strstr(err.msg, "size limit"));
    return 0;
}

static int t_builder(void)
{
    char *hostdir = newdir("buildsrc"), *dest = root_path("builddest");
    char real[4096], link[4096], tree[4096];
    struct hutch_tar *t = NULL;
    struct hutch_err err = {0};
    const void *data;
    size_t len;
    char *names;
    bool listed;
    int r;

    fmt(real, sizeof(real), "%s", path_of(hostdir, "real.csv"));
    fmt(link, sizeof(link), "%s", path_of(hostdir, "link.csv"));
    fmt(tree, sizeof(tree), "%s", path_of(hostdir, "proj"));
    put_file(real, "a,b\n1,2\n", 0640);
    CHECK(symlink(real, link) == 0);
    CHECK(mkdir(tree, 0755) == 0);
    put_file(path_of(tree, "mod.py"), "X = 1\n", 0644);
    CHECK(mkdir(path_of(tree, "pkg"), 0755) == 0);
    put_file(path_of(tree, "pkg/tool"), "tool\n", 0750);
    CHECK(symlink("/etc/passwd", path_of(tree, "pkg/passwd")) == 0);

    CHECK(hutch_tar_new(&t, 1u << 20, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "main.py", "print(1)\n", 9, 0644, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "bin/go", "go\n", 3, 0700, &err) == 0);
    r = hutch_tar_add_path(t, link, "data/in.csv", &err); /* src itself may be a link */
    if (r != 0)
        FAIL("add_path file: %s", err.msg);
    r = hutch_tar_add_path(t, tree, "proj", &err);
    if (r != 0)
        FAIL("add_path dir: %s", err.msg);
    CHECK(hutch_tar_add_bytes(t, "../x", "", 0, 0644, &err) == -EINVAL);
    CHECK(strstr(err.msg, "\"..\" is not allowed"));
    CHECK(hutch_tar_add_path(t, "/dev/null", "null", &err) == -EINVAL);
    CHECK(hutch_tar_finish(t, &data, &len, &err) == 0);
    names = tar_names(data, len);
    printf("# entries: %s", names);
    listed =
        strcmp(names, "main.py\nbin/go\ndata/in.csv\nproj/\nproj/mod.py\nproj/pkg/\n"
                      "proj/pkg/tool\n") == 0;
    free(names);
    CHECK(listed);
    r = extract_ok(data, len, dest);
    CHECK(hutch_tar_add_bytes(t, "late", "", 0, 0644, &err) == -EINVAL); /* finished */
    hutch_tar_free(t);
    CHECK(r == 0);
    CHECK(file_is(path_of(dest, "main.py"), "print(1)\n", 0644));
    CHECK(file_is(path_of(dest, "bin/go"), "go\n", 0755));
    CHECK(file_is(path_of(dest, "data/in.csv"), "a,b\n1,2\n", 0644));
    CHECK(file_is(path_of(dest, "proj/mod.py"), "X = 1\n", 0644));
    CHECK(file_is(path_of(dest, "proj/pkg/tool"), "tool\n", 0755));
    CHECK(access(path_of(dest, "proj/pkg/passwd"), F_OK) < 0);
    return 0;
}

static int t_builder_errors(void)
{
    struct hutch_tar *t = NULL;
    struct hutch_err err = {0};
    char big[4097];
    const void *data;
    size_t len;
    int r;

    CHECK(hutch_tar_new(&t, 1u << 20, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "a.py", "1", 1, 0644, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "a.py", "2", 1, 0644, &err) == 0);
    r = hutch_tar_finish(t, &data, &len, &err);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -EINVAL && strstr(err.msg, "\"a.py\": appears more than once"));
    hutch_tar_free(t);

    CHECK(hutch_tar_new(&t, 1u << 20, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "f", "1", 1, 0644, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "f/g", "2", 1, 0644, &err) == 0);
    r = hutch_tar_finish(t, &data, &len, &err);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -EINVAL && strstr(err.msg, "is a file in this tar"));
    hutch_tar_free(t);

    memset(big, 'z', 4096);
    big[4096] = '\0';
    CHECK(hutch_tar_new(&t, 2048, &err) == 0);
    r = hutch_tar_add_bytes(t, "big", big, 4096, 0644, &err);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -E2BIG);
    hutch_tar_free(t);

    /* The cap on the stream itself (headers and padding count). */
    CHECK(hutch_tar_new(&t, 3000, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "a", big, 1000, 0644, &err) == 0);
    CHECK(hutch_tar_add_bytes(t, "b", big, 1000, 0644, &err) == 0);
    r = hutch_tar_finish(t, &data, &len, &err);
    printf("# -> %d %s\n", r, err.msg);
    CHECK(r == -E2BIG && strstr(err.msg, "size limit"));
    hutch_tar_free(t);
    return 0;
}

/* ---------------------------------------------------------------------- */

/* filter: an untrusted tar (Docker's archive endpoint) re-packed as
 * pack_dir would have packed the tree. */
static int t_filter(void)
{
    struct hutch_buf out;
    struct hutch_err err = {0};
    struct tw t;
    char *meta;
    int r;

    tw_open(&t, TW_GNU);
    tw_add(&t, "./", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(&t, "./a.txt", AE_IFREG, 04755, "aaa", NULL, false);
    tw_add(&t, "./sub/", AE_IFDIR, 01777, NULL, NULL, false);
    tw_add(&t, "./sub/b.txt", AE_IFREG, 0600, "bb", NULL, false);
    tw_add(&t, "./link", AE_IFLNK, 0777, NULL, "/etc/passwd", false);
    tw_add(&t, "./hard", AE_IFREG, 0644, NULL, "./a.txt", true);
    tw_add(&t, "./dev", AE_IFCHR, 0644, NULL, NULL, false);
    tw_add(&t, "./fifo", AE_IFIFO, 0644, NULL, NULL, false);
    tw_close(&t);
    hutch_buf_init(&out, 1u << 20);
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 1000, 1000,
                             &err);
    if (r < 0)
        FAIL("filter: %s", err.msg);
    meta = tar_meta(out.data, out.len);
    r = strcmp(meta, "a.txt 1000:1000 755 file\n"
                     "sub/ 1000:1000 755 dir\n"
                     "sub/b.txt 1000:1000 644 file\n") != 0;
    if (r)
        printf("# got:\n%s", meta);
    free(meta);
    /* And what comes out unpacks. */
    if (!r) {
        char *dest = root_path("filter-dest");
        r = hutch_archive_extract(out.data, out.len, dest, NULL, &err) < 0;
        if (r)
            printf("# extract: %s\n", err.msg);
        else
            r = !file_is(path_of(dest, "sub/b.txt"), "bb", 0644);
        free(dest);
    }
    hutch_buf_free(&out);
    hutch_buf_free(&t.b);
    return r;
}

/* filter for a sandbox user: the directories the tar only implies come
 * first, owned by that user, so that an extractor running as root (Docker's
 * archive endpoint) does not make them root's (`--file x:deep/er/x` left
 * /work/deep/er unwritable for the program on docker alone); for root, the
 * tar is left as it is. */
static int t_filter_parents(void)
{
    struct hutch_buf out;
    struct hutch_err err = {0};
    struct tw t;
    char *meta = NULL;
    int r = 0;

    tw_open(&t, TW_PAX);
    tw_add(&t, "deep/er/copy.csv", AE_IFREG, 0644, "a,b", NULL, false);
    tw_add(&t, "deep/own/", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(&t, "top.txt", AE_IFREG, 0644, "t", NULL, false);
    tw_close(&t);
    for (int owner = 1000; owner >= 0 && !r; owner -= 1000) {
        hutch_buf_init(&out, 1u << 20);
        r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL,
                                 (uint32_t)owner, (uint32_t)owner, &err);
        if (r < 0) {
            printf("# filter: %s\n", err.msg);
            hutch_buf_free(&out);
            break;
        }
        meta = tar_meta(out.data, out.len);
        r = strcmp(meta, owner ? "deep/ 1000:1000 755 dir\n"
                                 "deep/er/ 1000:1000 755 dir\n"
                                 "deep/er/copy.csv 1000:1000 644 file\n"
                                 "deep/own/ 1000:1000 755 dir\n"
                                 "top.txt 1000:1000 644 file\n"
                               : "deep/er/copy.csv 0:0 644 file\n"
                                 "deep/own/ 0:0 755 dir\n"
                                 "top.txt 0:0 644 file\n") != 0;
        if (r)
            printf("# owner %d, got:\n%s", owner, meta);
        free(meta);
        /* What comes out unpacks (its parents are no longer implied). */
        if (!r && owner) {
            char *dest = root_path("filter-parents");
            r = hutch_archive_extract(out.data, out.len, dest, NULL, &err) < 0;
            if (r)
                printf("# extract: %s\n", err.msg);
            else
                r = !file_is(path_of(dest, "deep/er/copy.csv"), "a,b", 0644);
            free(dest);
        }
        hutch_buf_free(&out);
    }
    hutch_buf_free(&t.b);
    return r;
}

static int t_filter_rejects(void)
{
    struct hutch_archive_limits lim = {.struct_size = sizeof(lim),
                                       .max_bytes = 4,
                                       .max_entries = 10,
                                       .max_path = 100,
                                       .max_depth = 8};
    struct hutch_buf out;
    struct hutch_err err = {0};
    struct tw t;
    int r;

    tw_open(&t, TW_PAX);
    tw_file(&t, "../escape", "x");
    tw_close(&t);
    hutch_buf_init(&out, 1u << 20);
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 0, 0,
                             &err);
    CHECK(r < 0 && strstr(err.msg, "escape"));
    hutch_buf_free(&t.b);

    tw_open(&t, TW_PAX);
    tw_file(&t, "big", "more than four bytes");
    tw_close(&t);
    memset(&err, 0, sizeof(err));
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, &lim, 0, 0,
                             &err);
    CHECK(r < 0 && strstr(err.msg, "bytes"));
    hutch_buf_free(&t.b);

    memset(&err, 0, sizeof(err));
    r = hutch_archive_filter("not a tar at all, clearly", 25, hutch_buf_write, &out,
                             NULL, 0, 0, &err);
    CHECK(r < 0 && err.msg[0]);

    /* The rules about the whole set too, before anything is written (the
     * fuzzer found both passing: tests/fuzz/crashes/tar). */
    tw_open(&t, TW_PAX);
    tw_file(&t, "a", "1");
    tw_file(&t, "./a", "2");
    tw_close(&t);
    hutch_buf_reset(&out);
    memset(&err, 0, sizeof(err));
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 0, 0,
                             &err);
    CHECK(r < 0 && strstr(err.msg, "more than once") && out.len == 0);
    hutch_buf_free(&t.b);

    tw_open(&t, TW_PAX);
    tw_file(&t, "a", "1");
    tw_file(&t, "a/b", "2");
    tw_close(&t);
    memset(&err, 0, sizeof(err));
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 0, 0,
                             &err);
    CHECK(r < 0 && strstr(err.msg, "not a directory") && out.len == 0);
    hutch_buf_free(&t.b);

    /* A link the filter drops collides with nothing. */
    tw_open(&t, TW_PAX);
    tw_add(&t, "a", AE_IFLNK, 0777, NULL, "b", false);
    tw_file(&t, "a", "1");
    tw_close(&t);
    memset(&err, 0, sizeof(err));
    r = hutch_archive_filter(t.b.data, t.b.len, hutch_buf_write, &out, NULL, 0, 0,
                             &err);
    CHECK(r == 0 && out.len > 0);
    hutch_buf_free(&t.b);
    hutch_buf_free(&out);
    return 0;
}

static int list_cat(void *arg, const char *path, int is_dir, uint64_t size)
{
    char line[256];
    snprintf(line, sizeof(line), "%s %s %llu\n", path, is_dir ? "dir" : "file",
             (unsigned long long)size);
    return hutch_buf_appends(arg, line) < 0;
}

static int read_cat(void *arg, const char *path, const void *data, size_t size)
{
    char line[256];
    snprintf(line, sizeof(line), "%s=%.*s\n", path, (int)size,
             data ? (const char *)data : "(big)");
    return hutch_buf_appends(arg, line) < 0;
}

/* The readers of the judge name entries as extract creates them. */
static int t_list_and_read(void)
{
    struct hutch_err err = {0};
    struct hutch_buf out;
    struct tw t;
    int r;

    tw_open(&t, TW_GNU);
    tw_add(&t, "./", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(&t, "./a.txt", AE_IFREG, 0644, "aaa", NULL, false);
    tw_add(&t, "sub/", AE_IFDIR, 0755, NULL, NULL, false);
    tw_add(&t, "sub/b", AE_IFREG, 0600, "bb", NULL, false);
    tw_add(&t, "big", AE_IFREG, 0600, "0123456789", NULL, false);
    tw_close(&t);
    hutch_buf_init(&out, 1u << 20);
    r = hutch_archive_list(t.b.data, t.b.len, NULL, list_cat, &out, &err);
    printf("# list -> %d %s\n%s", r, err.msg, hutch_buf_str(&out));
    CHECK(r == 0 && !strcmp(hutch_buf_str(&out), "a.txt file 3\n"
                                                 "sub dir 0\n"
                                                 "sub/b file 2\n"
                                                 "big file 10\n"));
    hutch_buf_reset(&out);
    r = hutch_archive_read_files(t.b.data, t.b.len, 5, read_cat, &out, &err);
    printf("# read_files -> %d %s\n%s", r, err.msg, hutch_buf_str(&out));
    CHECK(r == 0 && !strcmp(hutch_buf_str(&out), "a.txt=aaa\nsub/b=bb\nbig=(big)\n"));
    hutch_buf_free(&out);
    hutch_buf_free(&t.b);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} tests[] = {
    {"default limits come from caps.h", t_limits},
    {"list and read_files name entries as extract does", t_list_and_read},
    {"check_relpath accepts and refuses", t_relpath},
    {"names with control characters rejected, named escaped", t_control},
    {"filter refuses a name with a control character too", t_control_filter},
    {"absolute path rejected", t_abs},
    {"\"../x\" rejected", t_dotdot},
    {"\"a/../../x\" rejected", t_dotdot2},
    {"symlink entry rejected", t_symlink},
    {"hardlink entry rejected", t_hardlink},
    {"char device rejected", t_chr},
    {"block device rejected", t_blk},
    {"fifo rejected", t_fifo},
    {"setuid file rejected", t_setuid},
    {"setgid file rejected", t_setgid},
    {"sticky directory rejected", t_sticky},
    {"path longer than max_path rejected", t_longpath},
    {"depth over max_depth rejected", t_deep},
    {"component over 255 bytes rejected", t_longname},
    {"file data over the byte cap rejected", t_bytes_cap},
    {"100000 tiny entries rejected by the entry cap, quickly", t_many_entries},
    {"symlink entry then a file through it rejected", t_symlink_then_file},
    {"existing symlink at a file entry not followed", t_dest_symlink_file},
    {"existing symlink on the way to an entry not followed", t_dest_symlink_dir},
    {"existing file where a directory is needed rejected", t_dest_file_for_dir},
    {"existing directory where a file is needed rejected", t_dest_dir_for_file},
    {"existing fifo where a file is needed rejected", t_dest_fifo},
    {"duplicate file entries rejected", t_dup},
    {"duplicate directory entries rejected", t_dupdir},
    {"file used as a parent rejected", t_fileparent},
    {"gzip-compressed tar rejected", t_gzip},
    {"garbage rejected", t_garbage},
    {"empty input rejected", t_empty_input},
    {"truncated tar rejected", t_truncated},
    {"rejection leaves a missing destination missing", t_reject_missing_dest},
    {"destination whose parent is missing rejected", t_dest_parent_missing},
    {"conflict found in the destination leaves it untouched", t_merge_rejected},
    {"tar with no entries unpacks to an empty directory", t_empty_tar},
    {"nested directories and modes, whatever the umask", t_nested_modes},
    {"\"./\"-prefixed names", t_dot_prefix},
    {"missing parent directories created 0755", t_missing_parents},
    {"merge into an existing destination", t_merge},
    {"UTF-8 pax names", t_utf8_names},
    {"pack_dir round trip skips links and fifos", t_pack_round_trip},
    {"pack_dir of a missing directory is an empty tar", t_pack_missing},
    {"pack_dir refuses a symlinked directory", t_pack_symlink_dir},
    {"pack_dir enforces its limits", t_pack_limits},
    {"tar builder round trip", t_builder},
    {"tar builder errors", t_builder_errors},
    {"filter re-packs as pack_dir would: links, devices, fifos dropped", t_filter},
    {"filter for a sandbox user writes the implied parents, owned by it",
     t_filter_parents},
    {"filter refuses .., caps, non-tar, a path twice, a file as a directory",
     t_filter_rejects},
};

int main(void)
{
    size_t n = sizeof(tests) / sizeof(tests[0]);
    int failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    fmt(g_root, sizeof(g_root), "/tmp/hutch-test-archive-XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 99;
    }
    printf("1..%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        int bad = tests[i].fn();
        printf("%s %zu - %s\n", bad ? "not ok" : "ok", i + 1, tests[i].name);
        failed += bad != 0;
    }
    rm_rf(g_root);
    return failed ? 1 : 0;
}
