/* test_path.c — path normalisation and symlink resolution: every spelling
 * of a way out of an allowed directory must normalise or resolve to where
 * it really points, and hutch_path_within must compare components, not
 * bytes. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path.h"
#include "tap.h"

static char base[PATH_MAX]; /* realpath of the scratch directory */

static void norm_is(const char *in, const char *want)
{
    char out[PATH_MAX];
    struct hutch_err e = {0};
    int r = hutch_path_normalize(in, out, sizeof(out), &e);
    ok(r == 0 && !strcmp(out, want), "normalize \"%s\" -> \"%s\" (got %s)", in, want,
       r == 0 ? out : e.msg);
}

static void norm_fails(const char *in, const char *why)
{
    char out[PATH_MAX];
    struct hutch_err e = {0};
    int r = hutch_path_normalize(in, out, sizeof(out), &e);
    ok(r == -EINVAL && e.code == -EINVAL && e.msg[0], "normalize refuses %s (%s)", why,
       r == 0 ? out : e.msg);
}

/* Resolve base + rel, expect base + want (want NULL: an error, code). */
static void resolve_is(const char *rel, const char *want)
{
    char in[2 * PATH_MAX], exp[PATH_MAX], out[PATH_MAX];
    struct hutch_err e = {0};
    snprintf(in, sizeof(in), "%s%s", base, rel);
    if (want[0] == '/' && strncmp(want, "/B", 2))
        snprintf(exp, sizeof(exp), "%s", want);
    else
        snprintf(exp, sizeof(exp), "%s%s", base, want + 2); /* "/B..." = base... */
    int r = hutch_path_resolve(in, out, sizeof(out), &e);
    ok(r == 0 && !strcmp(out, exp), "resolve B%s -> %s (got %s)", rel, want,
       r == 0 ? out : e.msg);
}

static void resolve_fails(const char *rel, int code, const char *why)
{
    char in[2 * PATH_MAX], out[PATH_MAX];
    struct hutch_err e = {0};
    snprintf(in, sizeof(in), "%s%s", base, rel);
    int r = hutch_path_resolve(in, out, sizeof(out), &e);
    ok(r == code && e.msg[0], "resolve refuses %s: %d (got %d: %s)", why, code, r,
       r == 0 ? out : e.msg);
}

static void mklink(const char *target, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s%s", base, rel);
    if (symlink(target, p) < 0) {
        printf("# symlink %s -> %s: %s\n", p, target, strerror(errno));
        exit(2);
    }
}

static void mk(const char *rel, int dir)
{
    char p[PATH_MAX];
    int fd = 0;
    snprintf(p, sizeof(p), "%s%s", base, rel);
    if (dir ? mkdir(p, 0700) : (fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
        printf("# create %s: %s\n", p, strerror(errno));
        exit(2);
    }
    if (!dir)
        close(fd);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

static void test_normalize(void)
{
    char big[PATH_MAX + 64], out[PATH_MAX];
    struct hutch_err e = {0};

    norm_is("/", "/");
    norm_is("/srv/data", "/srv/data");
    norm_is("/srv/data/", "/srv/data");
    norm_is("/srv/data///", "/srv/data");
    norm_is("//srv//data", "/srv/data");
    norm_is("/srv/./data/.", "/srv/data");
    norm_is("/srv/data/../etc/passwd", "/srv/etc/passwd");
    norm_is("/srv/data/../../../../etc", "/etc");
    norm_is("/..", "/");
    norm_is("/../..//../", "/");
    norm_is("/a/b/../../..", "/");
    norm_is("/srv/data/.../x", "/srv/data/.../x");
    norm_is("/srv/data/..x/.x", "/srv/data/..x/.x");
    /* Percent-encoding of "." and "/", any case, any layering. */
    norm_is("/srv/data/%2e%2e/etc", "/srv/etc");
    norm_is("/srv/data/%2E%2e/%2e%2E/etc", "/etc");
    norm_is("/srv/data/.%2e/etc", "/srv/etc");
    norm_is("/srv/data/%2e/x", "/srv/data/x");
    norm_is("/srv/data/..%2f..%2fetc", "/etc");
    norm_is("/srv/data/..%2F..%2Fetc", "/etc");
    norm_is("/srv/data%2f..%2f..%2fetc", "/etc");
    norm_is("/srv/data/%252e%252e/%252e%252e/etc", "/etc");
    norm_is("/srv/data/%25252e%25252e", "/srv");
    norm_is("/srv/data/%252f..%252f..", "/");
    norm_is("/srv%2F%2Fdata%2F%2E%2F", "/srv/data");
    norm_is("/a%2fb/..", "/a");
    norm_is("/%41%62c", "/Abc");
    /* Backslashes are ordinary characters, encoded or not. */
    norm_is("/srv/data\\..\\etc", "/srv/data\\..\\etc");
    norm_is("/srv/data/..%5c..%5cetc", "/srv/data/..\\..\\etc");

    norm_fails("srv/data", "a relative path");
    norm_fails("", "an empty path");
    norm_fails("./srv", "a dot-relative path");
    norm_fails("%2fetc/passwd", "an encoded leading slash");
    norm_fails("/srv/a%", "a bare %");
    norm_fails("/srv/a%2", "a truncated %2");
    norm_fails("/srv/a%zz", "non-hex %zz");
    norm_fails("/srv/a%2g", "non-hex %2g");
    norm_fails("/srv/a%00b", "an encoded NUL");
    norm_fails("/srv/a%2500b", "a doubly encoded NUL");
    norm_fails("/srv/100%", "a literal % (decoded to a fixed point)");
    norm_fails("/srv/%25252525252525252e", "more layers than rounds allowed");
    ok(hutch_path_normalize(NULL, out, sizeof(out), &e) == -EINVAL, "NULL refused");

    /* Too long: for the caller's buffer, for PATH_MAX, for the input cap. */
    ok(hutch_path_normalize("/srv/data", out, 9, &e) == -EINVAL,
       "result longer than the buffer refused");
    ok(hutch_path_normalize("/srv/data", out, 10, &e) == 0 && !strcmp(out, "/srv/data"),
       "result exactly fitting the buffer accepted");
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    ok(hutch_path_normalize(big, out, sizeof(out), &e) == -EINVAL,
       "path longer than PATH_MAX refused (%s)", e.msg);
    {
        size_t n = 5 * PATH_MAX;
        char *huge = malloc(n + 1);
        memset(huge, '/', n);
        huge[n] = '\0';
        ok(hutch_path_normalize(huge, out, sizeof(out), &e) == -EINVAL,
           "input over the raw cap refused even when it would normalise short");
        /* Long but shrinking to something short: accepted. */
        memset(huge, '/', 3 * PATH_MAX);
        huge[3 * PATH_MAX] = '\0';
        ok(hutch_path_normalize(huge, out, sizeof(out), &e) == 0 && !strcmp(out, "/"),
           "a long run of slashes normalises to /");
        free(huge);
    }

    /* Idempotent. */
    {
        const char *samples[] = {"/srv/data/%252e%252e/x", "//a/./b/../c/", "/x%2fy"};
        for (size_t i = 0; i < sizeof(samples) / sizeof(*samples); i++) {
            char a[PATH_MAX], b[PATH_MAX];
            int r1 = hutch_path_normalize(samples[i], a, sizeof(a), &e);
            int r2 = hutch_path_normalize(a, b, sizeof(b), &e);
            ok(r1 == 0 && r2 == 0 && !strcmp(a, b), "normalize is idempotent on %s",
               samples[i]);
        }
    }
}

static void test_resolve(void)
{
    char tmpl[] = "/tmp/hutch-path-XXXXXX", p[PATH_MAX], out[PATH_MAX];
    struct hutch_err e = {0};

    if (!mkdtemp(tmpl) || !realpath(tmpl, base)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    mk("/allowed", 1);
    mk("/allowed/file", 0);
    mk("/allowed/sub", 1);
    mk("/outside", 1);
    mk("/outside/secret", 0);
    mklink("../outside", "/allowed/escape");
    snprintf(p, sizeof(p), "%s/outside", base);
    mklink(p, "/allowed/abs");
    mklink("../../outside/secret", "/allowed/sub/up");
    mklink("chain2", "/allowed/chain1");
    mklink("./sub/../chain3", "/allowed/chain2");
    mklink("file", "/allowed/chain3");
    mklink("loop2", "/allowed/loop1");
    mklink("loop1", "/allowed/loop2");
    mklink("self", "/allowed/self");
    mklink("../outside/newfile", "/allowed/dangling");
    mklink("/nonexistent-hutch-dir/x", "/allowed/dangling_dir");
    mklink("nothere/../escape", "/allowed/trick");
    mklink("/", "/allowed/root");
    mklink("sub", "/allowed/subl");

    /* Things that exist, with no link. */
    resolve_is("", "/B");
    resolve_is("/allowed", "/B/allowed");
    resolve_is("/allowed/file", "/B/allowed/file");
    resolve_is("//allowed/./sub/", "/B/allowed/sub");
    /* Lexical escapes are gone before anything touches the disk. */
    resolve_is("/allowed/../outside/secret", "/B/outside/secret");
    resolve_is("/allowed/%2e%2e/outside", "/B/outside");
    resolve_is("/allowed/..%2foutside", "/B/outside");
    resolve_is("/allowed/%252e%252e/outside", "/B/outside");
    /* Links inside pointing out: resolved to where they point. */
    resolve_is("/allowed/escape", "/B/outside");
    resolve_is("/allowed/escape/secret", "/B/outside/secret");
    resolve_is("/allowed/%65scape/secret", "/B/outside/secret");
    resolve_is("/allowed/abs/secret", "/B/outside/secret");
    resolve_is("/allowed/sub/up", "/B/outside/secret");
    resolve_is("/allowed/subl/up", "/B/outside/secret");
    resolve_is("/allowed/root/etc", "/etc");
    /* ".." is lexical: it cancels the component before it, not the link
     * target's parent. */
    resolve_is("/allowed/escape/../file", "/B/allowed/file");
    /* A chain, with "." and ".." in the middle target. */
    resolve_is("/allowed/chain1", "/B/allowed/file");
    /* Dangling: the target's missing tail is appended, not trusted. */
    resolve_is("/allowed/dangling", "/B/outside/newfile");
    resolve_is("/allowed/dangling_dir/y/z", "/nonexistent-hutch-dir/x/y/z");
    /* A missing component followed by ".." (only possible from a link
     * target) must not skip over a link that does exist. */
    resolve_is("/allowed/trick/secret", "/B/outside/secret");
    /* Not existing: appended as is, nothing followed. */
    resolve_is("/allowed/new/deeper/file", "/B/allowed/new/deeper/file");
    resolve_is("/allowed/new/../escape", "/B/outside");
    resolve_is("/allowed/file/below", "/B/allowed/file/below");
    /* Loops and too many links. */
    resolve_fails("/allowed/loop1", -ELOOP, "a two-link loop");
    resolve_fails("/allowed/self/x", -ELOOP, "a link to itself");
    {
        char name[64], target[64];
        for (int i = 0; i < 41; i++) {
            snprintf(name, sizeof(name), "/allowed/c%d", i);
            snprintf(target, sizeof(target), i == 40 ? "file" : "c%d", i + 1);
            mklink(target, name);
        }
        resolve_is("/allowed/c1", "/B/allowed/file"); /* 40 links */
        resolve_fails("/allowed/c0", -ELOOP, "a chain of 41 links");
    }
    /* Too long, before and after following links. */
    {
        char longt[PATH_MAX], rel[PATH_MAX];
        memset(longt, 'x', 4000);
        longt[0] = '/';
        longt[4000] = '\0';
        mklink(longt, "/allowed/long");
        snprintf(rel, sizeof(rel), "/allowed/long/%0200d", 0);
        resolve_fails(rel, -ENAMETOOLONG,
                      "a link whose target makes the path too long");
        char big[PATH_MAX + 16];
        memset(big, 'a', sizeof(big) - 1);
        big[0] = '/';
        big[sizeof(big) - 1] = '\0';
        ok(hutch_path_resolve(big, out, sizeof(out), &e) == -EINVAL,
           "resolve refuses a path longer than PATH_MAX");
    }
    ok(hutch_path_resolve("relative/x", out, sizeof(out), &e) == -EINVAL,
       "resolve refuses a relative path");
    ok(hutch_path_resolve("/a%zz", out, sizeof(out), &e) == -EINVAL,
       "resolve refuses bad encoding");
    snprintf(p, sizeof(p), "%s/allowed/file", base);
    ok(hutch_path_resolve(p, out, 8, &e) == -EINVAL, "resolve: result longer than len");

    /* A file created after the check: the resolved string names the same
     * place, and resolving it again (at use) sees the new link. */
    {
        char in[PATH_MAX], first[PATH_MAX], again[PATH_MAX];
        snprintf(in, sizeof(in), "%s/allowed/later", base);
        int r1 = hutch_path_resolve(in, first, sizeof(first), &e);
        mklink("../outside", "/allowed/later");
        int r2 = hutch_path_resolve(first, again, sizeof(again), &e);
        snprintf(p, sizeof(p), "%s/outside", base);
        ok(r1 == 0 && !strcmp(first, in) && r2 == 0 && !strcmp(again, p),
           "a link planted after the check is seen when resolving again (%s)", again);
    }

    /* The decision the policy makes on these. */
    {
        char dir[PATH_MAX], in[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/allowed", base);
        const char *bad[] = {"/allowed/escape/secret", "/allowed/dangling",
                             "/allowed/trick/x",       "/allowed/%2e%2e/outside",
                             "/allowed/abs",           "/allowed/root/etc/passwd"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
            snprintf(in, sizeof(in), "%s%s", base, bad[i]);
            int r = hutch_path_resolve(in, out, sizeof(out), &e);
            ok(r == 0 && !hutch_path_within(out, dir), "B%s is not within B/allowed",
               bad[i]);
        }
        snprintf(in, sizeof(in), "%s/allowed/chain1", base);
        ok(hutch_path_resolve(in, out, sizeof(out), &e) == 0 &&
               hutch_path_within(out, dir),
           "B/allowed/chain1 is within B/allowed");
    }

    if (nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
        printf("# could not remove %s\n", base);
}

static void test_within(void)
{
    ok(hutch_path_within("/srv/data", "/srv/data") == 1, "equal is within");
    ok(hutch_path_within("/srv/data/x", "/srv/data") == 1, "child is within");
    ok(hutch_path_within("/srv/data/x/y/z", "/srv/data") == 1, "descendant is within");
    ok(hutch_path_within("/srv/data2", "/srv/data") == 0, "/srv/data2 not within");
    ok(hutch_path_within("/srv/database/x", "/srv/data") == 0,
       "/srv/database not within");
    ok(hutch_path_within("/srv/dat", "/srv/data") == 0, "a prefix of dir not within");
    ok(hutch_path_within("/srv", "/srv/data") == 0, "the parent not within");
    ok(hutch_path_within("/", "/srv/data") == 0, "/ not within /srv/data");
    ok(hutch_path_within("/anything/at/all", "/") == 1, "everything within /");
    ok(hutch_path_within("/", "/") == 1, "/ within /");
    ok(hutch_path_within("/srv/data/../etc", "/srv/data") == 0,
       "an unnormalised path fails closed");
    ok(hutch_path_within("/srv/data/./x", "/srv/data") == 0,
       "a . component fails closed");
    ok(hutch_path_within("/srv/data//x", "/srv/data") == 0, "// fails closed");
    ok(hutch_path_within("/srv/data/", "/srv/data") == 0, "trailing / fails closed");
    ok(hutch_path_within("/srv/data/x", "/srv/data/") == 0,
       "a dir with / fails closed");
    ok(hutch_path_within("srv/data/x", "srv/data") == 0, "relative paths fail closed");
    ok(hutch_path_within(NULL, "/srv") == 0 && hutch_path_within("/srv", NULL) == 0,
       "NULL fails closed");
    ok(hutch_path_within("/srv/data\\..\\x", "/srv/data") == 0,
       "a backslash is not a separator (\"data\\..\\x\" is a sibling)");
    ok(hutch_path_within("/srv/data/a\\..\\..", "/srv/data") == 1,
       "a name with backslashes below dir is within");
}

int main(void)
{
    test_normalize();
    test_resolve();
    test_within();
    return tap_done();
}
