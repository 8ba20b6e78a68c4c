/* test_workspace.c — unit tests of src/workspace.c's lock: one execution
 * at a time per workspace, a lock held for an instant by another process
 * (an idle sweep or a delete of a replica) is waited for, not reported as
 * "in use", and a process forked while a workspace was held (a sandbox's
 * init, a runsc not yet exec'd) does not keep holding it; and its size
 * limit: workspaces.max_bytes counts what is stored, tar headers included
 * (3000 empty files are 1.5 MB of tar).  Printing TAP. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "caps.h"
#include "hutch_archive.h"
#include "policy.h"
#include "util.h"
#include "workspace.h"

#include "tap.h"

static const struct hutch_policy_workspaces pol = {
    .allow = 1,
    .max_bytes = HUTCH_WORKSPACE_DEFAULT_MAX_BYTES,
    .max_count = HUTCH_WORKSPACE_DEFAULT_MAX_COUNT,
    .idle_s = 0,
};

/* Another process holding `path`'s record lock, as another hutch's sweep
 * or `hutch workspace delete` would, until `go` is closed; with path ""
 * it holds nothing but what fork gave it, as a sandbox's init would. */
struct holder {
    char path[512];
    pid_t pid;
    int go; /* closing it lets the holder end */
};

static int hold(struct holder *h)
{
    int ready[2], go[2];
    char c = 'x';

    if (pipe(ready) < 0 || pipe(go) < 0)
        return -1;
    h->pid = fork();
    if (h->pid == 0) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int fd = h->path[0] ? open(h->path, O_RDWR | O_CREAT, 0600) : -1;
        if (!h->path[0] || (fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0))
            c = 'y';
        (void)!write(ready[1], &c, 1);
        close(go[1]);
        (void)!read(go[0], &c, 1);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    h->go = go[1];
    if (h->pid < 0 || read(ready[0], &c, 1) != 1)
        c = 'x';
    close(ready[0]);
    return c == 'y' ? 0 : -1;
}

static void unhold(struct holder *h)
{
    int st;
    close(h->go);
    waitpid(h->pid, &st, 0);
}

static void *release_now(void *arg)
{
    unhold(arg);
    return NULL;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

/* The tar of /work/out as a sandbox would leave it: `n` files of `size`
 * bytes under workspace/; into out (0, or -1). */
static int out_tar(struct hutch_buf *out, int n, size_t size)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_tar *t = NULL;
    const void *data;
    size_t len;
    char path[64], *bytes = calloc(1, size + 1);
    int r = bytes ? hutch_tar_new(&t, HUTCH_TAR_MAX_STREAM, &err) : -1;

    for (int i = 0; r == 0 && i < n; i++) {
        snprintf(path, sizeof(path), "workspace/f%04d", i);
        r = hutch_tar_add_bytes(t, path, bytes, size, 0644, &err);
    }
    if (r == 0)
        r = hutch_tar_finish(t, &data, &len, &err);
    if (r == 0)
        r = hutch_buf_append(out, data, len);
    if (r < 0)
        printf("# building the tar: %s\n", err.msg);
    hutch_tar_free(t);
    free(bytes);
    return r < 0 ? -1 : 0;
}

/* Saves `n` files of `size` bytes into workspace `name` under a limit of
 * max_bytes; the split's return, its message in err. */
static int save(const char *store, const char *name, uint64_t max_bytes, int n,
                size_t size, struct hutch_err *err)
{
    struct hutch_policy_workspaces small = pol;
    struct hutch_buf b = HUTCH_BUF_INIT(HUTCH_TAR_MAX_STREAM);
    struct hutch_ws *w = NULL;
    struct hutch_file_list files = {0};
    int r;

    small.max_bytes = max_bytes;
    r = hutch_ws_open(store, "p", name, &small, &w, err);
    if (r == 0)
        r = out_tar(&b, n, size) < 0 ? -EIO : 0;
    if (r == 0)
        r = hutch_ws_split(w, &b, &files, 1, NULL, NULL, err);
    hutch_ws_close(w);
    hutch_buf_free(&b);
    hutch_file_list_clear(&files);
    return r;
}

static off_t stored(const char *store, const char *name)
{
    char path[600];
    struct stat st;
    snprintf(path, sizeof(path), "%s/70/%s.tar", store, name);
    return stat(path, &st) == 0 ? st.st_size : -1;
}

int main(void)
{
    char store[] = "/tmp/hutch-ws-unit-XXXXXX", lock[600];
    struct hutch_ws *a = NULL, *b = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct holder h;
    pthread_t t;
    const char *principal = "p";
    int r;

    if (!mkdtemp(store)) {
        perror("mkdtemp");
        return 1;
    }

    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == 0 && a, "a workspace opens (%s)", err.msg);

    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &b, &err);
    ok(r == -EBUSY && !b, "a second open of the same workspace is refused (%d)", r);
    ok(strstr(err.msg, "in use by another execution") != NULL, "and says why: %s",
       err.msg);

    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "other", &pol, &b, &err);
    ok(r == 0 && b, "another workspace of the principal opens meanwhile (%s)", err.msg);
    hutch_ws_close(b);
    b = NULL;

    /* A process forked while "notes" is held, and still alive when the
     * execution that held it ends: the next execution is not refused.
     * "notes" has a saved tar, so its lock file stays. */
    snprintf(lock, sizeof(lock), "%s/70/notes.tar", store);
    {
        FILE *f = fopen(lock, "w");
        ok(f != NULL, "\"notes\" gets a saved tar");
        if (f)
            fclose(f);
    }
    h.path[0] = '\0';
    ok(hold(&h) == 0, "a process is forked while \"notes\" is held");
    hutch_ws_close(a);
    a = NULL;
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == 0 && a, "\"notes\" opens again while that process lives (%s)", err.msg);
    unhold(&h);
    hutch_ws_close(a);
    a = NULL;

    /* The lock file of "notes", taken for an instant from outside. */
    snprintf(lock, sizeof(lock), "%s/70/notes.lock", store);
    snprintf(h.path, sizeof(h.path), "%s", lock);
    /* Released as soon as the thread runs: no timing, only a holder that
     * gets the CPU within the retry window (a second). */
    ok(hold(&h) == 0, "an outside holder takes the lock of \"notes\"");
    pthread_create(&t, NULL, release_now, &h);
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == 0 && a, "a lock held for an instant is waited for, not \"in use\" (%s)",
       err.msg);
    pthread_join(t, NULL);
    hutch_ws_close(a);
    a = NULL;

    /* Held for good: refused once the short wait is over. */
    ok(hold(&h) == 0, "an outside holder takes it again and keeps it");
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == -EBUSY && !a, "a lock that stays held is \"in use\" (%d: %s)", r, err.msg);
    unhold(&h);

    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == 0 && a, "and opens once it is released (%s)", err.msg);
    hutch_ws_close(a);

    /* workspaces.max_bytes counts what is stored.  3000 empty files: no
     * file data, but 3000 headers of 512 bytes. */
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = save(store, "many", 256 * 1024, 3000, 0, &err);
    ok(r == -E2BIG, "3000 empty files do not fit 256 KiB (%d: %s)", r, err.msg);
    ok(strstr(err.msg, "workspaces.max_bytes (262144)") &&
           strstr(err.msg, "0 bytes of data in 3000 files and folders"),
       "the message says what it would take and why");
    ok(stored(store, "many") < 0, "and nothing was stored");

    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = save(store, "few", 256 * 1024, 100, 0, &err);
    ok(r == 0, "100 empty files fit 256 KiB (%s)", err.msg);
    ok(stored(store, "few") > 0 && stored(store, "few") <= 256 * 1024,
       "and are stored in at most that (%lld bytes)", (long long)stored(store, "few"));

    /* The limit is the stored size, exactly: one byte under it is refused,
     * the size itself fits. */
    {
        off_t need = stored(store, "few");
        err = (struct hutch_err)HUTCH_ERR_INIT;
        r = save(store, "edge", (uint64_t)need - 1, 100, 0, &err);
        ok(r == -E2BIG, "a limit one byte under the tar refuses it (%d)", r);
        err = (struct hutch_err)HUTCH_ERR_INIT;
        r = save(store, "edge", (uint64_t)need, 100, 0, &err);
        ok(r == 0 && stored(store, "edge") == need,
           "a limit of exactly the tar's size takes it (%s)", err.msg);
    }

    /* A refused save keeps the previous content. */
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = save(store, "few", 256 * 1024, 3000, 0, &err);
    ok(r == -E2BIG && stored(store, "few") > 0,
       "a save over the limit keeps what the workspace held (%d)", r);

    nftw(store, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
