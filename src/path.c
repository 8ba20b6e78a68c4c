/* path.c — path normalisation for policy decisions (see path.h).
 *
 * Lexical work (percent-decoding, ".", "..", "//", a trailing "/") runs to a
 * fixed point; symlink resolution walks the host one component at a time
 * with lstat/readlink, the way the kernel does, and never follows anything
 * below the first component that does not exist.  What a path is *allowed*
 * to be is not decided here: that is policy.c's job (hutch_path_within is
 * the only comparison offered). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "path.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One layer of percent-decoding of in into out (at least strlen(in) + 1
 * bytes).  A '%' not followed by two hex digits, or one decoding to NUL, is
 * invalid: there is no literal '%' in a policy path. */
static int percent_decode(const char *in, char *out, struct hutch_err *err)
{
    const char *p = in;
    char *o = out;

    while (*p) {
        if (*p != '%') {
            *o++ = *p++;
            continue;
        }
        int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
        if (hi < 0 || lo < 0)
            return hutch_err_set(err, -EINVAL,
                                 "path has an invalid percent sequence at offset %zu",
                                 (size_t)(p - in));
        if (hi == 0 && lo == 0)
            return hutch_err_set(err, -EINVAL, "path has an encoded NUL byte (%%00)");
        *o++ = (char)(hi << 4 | lo);
        p += 3;
    }
    *o = '\0';
    return 0;
}

/* Lexical normalisation of an absolute path in place: "." dropped, ".."
 * removes the previous component (at "/" it stays at "/"), empty
 * components (repeated or trailing slashes) dropped.  The result is never
 * longer than the input, or "/" for an empty one. */
static void lexical(char *path)
{
    char *r = path, *w = path;

    while (*r) {
        while (*r == '/')
            r++;
        if (!*r)
            break;
        char *start = r;
        while (*r && *r != '/')
            r++;
        size_t n = (size_t)(r - start);
        if (n == 1 && start[0] == '.')
            continue;
        if (n == 2 && start[0] == '.' && start[1] == '.') {
            while (w > path && *--w != '/')
                ;
            continue;
        }
        *w++ = '/';
        memmove(w, start, n); /* w <= start: moves left or stays */
        w += n;
    }
    if (w == path)
        *w++ = '/';
    *w = '\0';
}

int hutch_path_normalize(const char *in, char *out, size_t len, struct hutch_err *err)
{
    char *cur = NULL, *next = NULL;
    size_t n;
    int r = 0, round;

    if (!in || in[0] != '/')
        return hutch_err_set(err, -EINVAL, "path \"%.200s\" is not absolute",
                             in ? in : "(null)");
    n = strnlen(in, HUTCH_PATH_MAX_INPUT + 1);
    if (n > HUTCH_PATH_MAX_INPUT)
        return hutch_err_set(err, -EINVAL, "path is longer than %d bytes",
                             HUTCH_PATH_MAX_INPUT);
    cur = malloc(n + 2);
    next = malloc(n + 2);
    if (!cur || !next) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    memcpy(cur, in, n + 1);
    /* Decode before the lexical pass, so "a%2fb/.." is "/a", as anything
     * that decodes first would read it. */
    for (round = 0; round < HUTCH_PATH_MAX_ROUNDS; round++) {
        r = percent_decode(cur, next, err);
        if (r < 0)
            goto out;
        lexical(next);
        if (!strcmp(next, cur))
            break;
        char *t = cur;
        cur = next;
        next = t;
    }
    if (round == HUTCH_PATH_MAX_ROUNDS) {
        r = hutch_err_set(err, -EINVAL,
                          "path is still changing after %d rounds of decoding",
                          HUTCH_PATH_MAX_ROUNDS);
        goto out;
    }
    n = strlen(cur);
    if (n >= PATH_MAX || n >= len) {
        r = hutch_err_set(err, -EINVAL, "normalised path is too long (%zu bytes)", n);
        goto out;
    }
    memcpy(out, cur, n + 1);
out:
    free(cur);
    free(next);
    return r;
}

/* Symlink resolution state: `done` holds the resolved prefix ("" for "/"),
 * its last `missing` components do not exist on the host; `todo` holds
 * what is left to walk (components separated by slashes, possibly "." and
 * ".." from link targets). */
struct walk {
    char done[PATH_MAX];
    size_t done_len;
    unsigned missing;
    char todo[PATH_MAX];
    unsigned links;
};

/* Replace todo with target + "/" + rest, where rest may point into todo
 * (hence the copy). */
static int splice_link(struct walk *w, const char *target, size_t tlen,
                       const char *rest, struct hutch_err *err)
{
    char tmp[PATH_MAX];
    size_t rlen = strlen(rest);

    if (tlen + 1 + rlen >= sizeof(tmp))
        return hutch_err_set(err, -ENAMETOOLONG,
                             "path is longer than %d bytes once symlinks are followed",
                             PATH_MAX);
    memcpy(tmp, target, tlen);
    tmp[tlen] = '/';
    memcpy(tmp + tlen + 1, rest, rlen + 1);
    memcpy(w->todo, tmp, tlen + 1 + rlen + 1);
    return 0;
}

static void pop(struct walk *w)
{
    while (w->done_len > 0 && w->done[--w->done_len] != '/')
        ;
    w->done[w->done_len] = '\0';
    if (w->missing > 0)
        w->missing--;
}

int hutch_path_resolve(const char *in, char *out, size_t len, struct hutch_err *err)
{
    struct walk *w;
    const char *p;
    int r;

    w = calloc(1, sizeof(*w));
    if (!w)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = hutch_path_normalize(in, w->todo, sizeof(w->todo), err);
    if (r < 0)
        goto out;

    p = w->todo;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *start = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - start);
        if (n == 1 && start[0] == '.')
            continue;
        if (n == 2 && start[0] == '.' && start[1] == '.') {
            pop(w);
            continue;
        }
        if (w->done_len + 1 + n >= sizeof(w->done)) {
            r = hutch_err_set(err, -ENAMETOOLONG,
                              "path is longer than %d bytes once symlinks are followed",
                              PATH_MAX);
            goto out;
        }
        size_t before = w->done_len;
        w->done[w->done_len++] = '/';
        memcpy(w->done + w->done_len, start, n);
        w->done_len += n;
        w->done[w->done_len] = '\0';
        if (w->missing > 0) {
            /* Below something that does not exist: nothing to follow. */
            w->missing++;
            continue;
        }

        struct stat st;
        if (lstat(w->done, &st) < 0) {
            if (errno == ENOENT || errno == ENOTDIR) {
                w->missing = 1;
                continue;
            }
            r = hutch_err_set(err, -errno, "resolving path: %.200s: %s", w->done,
                              strerror(errno));
            goto out;
        }
        if (!S_ISLNK(st.st_mode))
            continue;

        if (++w->links > HUTCH_PATH_MAX_LINKS) {
            r = hutch_err_set(err, -ELOOP, "path \"%.200s\": more than %d symlinks", in,
                              HUTCH_PATH_MAX_LINKS);
            goto out;
        }
        char target[PATH_MAX];
        ssize_t tl = readlink(w->done, target, sizeof(target));
        if (tl < 0) {
            r = hutch_err_set(err, -errno, "reading symlink %.200s: %s", w->done,
                              strerror(errno));
            goto out;
        }
        if ((size_t)tl >= sizeof(target)) {
            r = hutch_err_set(err, -ENAMETOOLONG, "symlink %.200s: target too long",
                              w->done);
            goto out;
        }
        /* The link itself is replaced by its target, read relative to the
         * link's directory, or to "/" when absolute. */
        w->done_len = before;
        w->done[before] = '\0';
        if (tl > 0 && target[0] == '/') {
            w->done_len = 0;
            w->done[0] = '\0';
        }
        r = splice_link(w, target, (size_t)tl, p, err);
        if (r < 0)
            goto out;
        p = w->todo;
    }

    if (w->done_len == 0) {
        w->done[0] = '/';
        w->done[1] = '\0';
        w->done_len = 1;
    }
    /* Built component by component, so already lexically normal.  It is
     * not percent-decoded again: names on the host are literal. */
    if (w->done_len >= len) {
        r = hutch_err_set(err, -EINVAL, "resolved path is too long (%zu bytes)",
                          w->done_len);
        goto out;
    }
    memcpy(out, w->done, w->done_len + 1);
out:
    free(w);
    return r;
}

/* A normalised absolute path: no ".", "..", or empty component. */
static int is_normal(const char *p)
{
    if (p[0] != '/')
        return 0;
    if (!p[1])
        return 1;
    for (const char *c = p; *c == '/';) {
        const char *s = ++c;
        while (*c && *c != '/')
            c++;
        size_t n = (size_t)(c - s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
    }
    return 1;
}

int hutch_path_within(const char *path, const char *dir)
{
    size_t dl;

    /* Fail closed on anything not normalised: a caller who forgot to
     * normalise gets "no", never a lexical prefix match on "a/../b". */
    if (!path || !dir || !is_normal(path) || !is_normal(dir))
        return 0;
    if (!strcmp(dir, "/"))
        return 1;
    dl = strlen(dir);
    return !strncmp(path, dir, dl) && (path[dl] == '\0' || path[dl] == '/');
}
