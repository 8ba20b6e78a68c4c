/* test_workspace.c — unit tests of src/workspace.c's lock: one execution
 * at a time per workspace, and a lock held for an instant by something
 * else (an idle sweep, a probe) is waited for, not reported as "in use".
 * Printing TAP. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
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

/* Holds `path`'s flock for `ms`, as a probe or a sweep would. */
struct holder {
    char path[512];
    int ms;
    int fd;
};

static void *release_later(void *arg)
{
    struct holder *h = arg;
    struct timespec ts = {h->ms / 1000, (long)(h->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    close(h->fd);
    return NULL;
}

static int hold(struct holder *h)
{
    h->fd = open(h->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    return h->fd >= 0 && flock(h->fd, LOCK_EX | LOCK_NB) == 0 ? 0 : -1;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
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
    hutch_ws_close(a);
    a = NULL;

    /* The lock file of "notes", taken for an instant from outside. */
    snprintf(lock, sizeof(lock), "%s/70/notes.lock", store);
    snprintf(h.path, sizeof(h.path), "%s", lock);
    /* Released as soon as the thread runs: no timing, only a thread that
     * gets the CPU within the retry window (a second). */
    h.ms = 0;
    ok(hold(&h) == 0, "an outside holder takes the lock of \"notes\"");
    pthread_create(&t, NULL, release_later, &h);
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
    close(h.fd);

    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = hutch_ws_open(store, principal, "notes", &pol, &a, &err);
    ok(r == 0 && a, "and opens once it is released (%s)", err.msg);
    hutch_ws_close(a);

    nftw(store, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
