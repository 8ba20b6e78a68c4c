/* test_admit.c — executions at once (src/admit.c): per-principal and total
 * limits, the bounded queue and its clear refusal, turns across principals
 * when a slot frees, cancellation and the total sized from the machine.
 * Threads wait in the queue; the test waits for the counts, never for
 * time.  TAP. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admit.h"
#include "caps.h"
#include "tap.h"

struct waiter {
    struct hutch_admit *a;
    const char *principal;
    unsigned running, queued;
    int has_principals;
    atomic_int cancel;
    atomic_int release; /* set: leave the slot */
    int rc;
    char msg[HUTCH_ERR_MSG];
    pthread_t th;
};

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static struct waiter *order[16];
static int norder;

static void *enter_thread(void *arg)
{
    struct waiter *w = arg;
    struct hutch_admit_req req = {.principal = w->principal,
                                  .running = w->running,
                                  .queued = w->queued,
                                  .queued_set = 1,
                                  .has_principals = w->has_principals,
                                  .cancel = &w->cancel};
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_admit_slot *slot = NULL;

    w->rc = hutch_admit_enter(w->a, &req, &slot, &err);
    snprintf(w->msg, sizeof(w->msg), "%s", err.msg);
    if (w->rc < 0)
        return NULL;
    pthread_mutex_lock(&order_mu);
    order[norder++] = w;
    pthread_mutex_unlock(&order_mu);
    while (!atomic_load(&w->release))
        usleep(2000);
    hutch_admit_leave(w->a, slot);
    return NULL;
}

static void start(struct waiter *w, struct hutch_admit *a, const char *principal,
                  unsigned running, unsigned queued)
{
    memset(w, 0, sizeof(*w));
    w->a = a;
    w->principal = principal;
    w->running = running;
    w->queued = queued;
    w->has_principals = 1;
    w->rc = 1;
    pthread_create(&w->th, NULL, enter_thread, w);
}

/* Until `principal` (NULL: all) runs and waits as many as said. */
static int until(struct hutch_admit *a, const char *principal, unsigned running,
                 unsigned queued)
{
    for (int i = 0; i < 30000; i++) {
        unsigned r, q;
        hutch_admit_counts(a, principal, &r, &q);
        if (r == running && q == queued)
            return 1;
        usleep(1000);
    }
    return 0;
}

static int until_order(int n)
{
    for (int i = 0; i < 30000; i++) {
        int k;
        pthread_mutex_lock(&order_mu);
        k = norder;
        pthread_mutex_unlock(&order_mu);
        if (k >= n)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void limits(void)
{
    struct hutch_admit *a = hutch_admit_new(4, "a test");
    struct waiter al[5], bob;

    /* alice: 2 at once, 2 waiting; the total, 4, is not what stops her.
     * Her first two run before the next two are started: threads start in
     * any order, and the two cancelled below must be the waiting ones. */
    for (int i = 0; i < 2; i++)
        start(&al[i], a, "alice", 2, 2);
    until(a, "alice", 2, 0);
    for (int i = 2; i < 4; i++)
        start(&al[i], a, "alice", 2, 2);
    ok(until(a, "alice", 2, 2), "alice: 2 running (her limit), 2 waiting");
    start(&al[4], a, "alice", 2, 2);
    pthread_join(al[4].th, NULL);
    ok(al[4].rc == -EBUSY && strstr(al[4].msg, "hutch is busy: principal \"alice\"") &&
           strstr(al[4].msg, "2 executions running") &&
           strstr(al[4].msg, "concurrency.executions") &&
           strstr(al[4].msg, "2 waiting"),
       "her fifth, past her queue, is refused at once saying why: %s", al[4].msg);
    start(&bob, a, "bob", 2, 2);
    ok(until(a, "bob", 1, 0), "bob's runs at once, beside alice's queue");
    ok(until(a, NULL, 3, 2), "in all: 3 running, 2 waiting");
    atomic_store(&al[2].cancel, 1);
    atomic_store(&al[3].cancel, 1);
    pthread_join(al[2].th, NULL);
    pthread_join(al[3].th, NULL);
    ok(al[2].rc == -ECANCELED && al[3].rc == -ECANCELED && until(a, NULL, 3, 0),
       "a waiting execution cancelled leaves the queue: %s", al[2].msg);
    atomic_store(&al[0].release, 1);
    atomic_store(&al[1].release, 1);
    atomic_store(&bob.release, 1);
    pthread_join(al[0].th, NULL);
    pthread_join(al[1].th, NULL);
    pthread_join(bob.th, NULL);
    ok(until(a, NULL, 0, 0), "all slots given back");
    hutch_admit_free(a);
}

/* One slot in all: when it frees, principals take turns, each in order. */
static void turns(void)
{
    struct hutch_admit *a = hutch_admit_new(1, "a test");
    struct waiter first, al[3], bob[2];
    const char *want[] = {"first", "alice", "bob", "alice", "bob", "alice"};
    int same = 1;

    norder = 0;
    start(&first, a, "first", 1, 10);
    ok(until(a, NULL, 1, 0), "one slot, taken");
    for (int i = 0; i < 3; i++) {
        start(&al[i], a, "alice", 8, 10);
        until(a, NULL, 1, (unsigned)i + 1);
    }
    for (int i = 0; i < 2; i++) {
        start(&bob[i], a, "bob", 8, 10);
        until(a, NULL, 1, 4 + (unsigned)i);
    }
    ok(until(a, NULL, 1, 5), "alice's three, then bob's two wait (over the total)");
    /* Each one granted leaves at once: the next is the turn's. */
    for (int k = 0; k < 6; k++) {
        struct waiter *w;
        until_order(k + 1);
        pthread_mutex_lock(&order_mu);
        w = k < norder ? order[k] : NULL;
        pthread_mutex_unlock(&order_mu);
        if (w)
            atomic_store(&w->release, 1);
    }
    pthread_join(first.th, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(al[i].th, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(bob[i].th, NULL);
    for (int i = 0; i < 6; i++)
        same &= i < norder && !strcmp(order[i]->principal, want[i]);
    ok(same && norder == 6 && order[1] == &al[0] && order[3] == &al[1] &&
           order[5] == &al[2] && order[2] == &bob[0],
       "they took turns, each in its order: %s %s %s %s %s %s (bob's first did "
       "not wait for all of alice's)",
       norder > 0 ? order[0]->principal : "", norder > 1 ? order[1]->principal : "",
       norder > 2 ? order[2]->principal : "", norder > 3 ? order[3]->principal : "",
       norder > 4 ? order[4]->principal : "", norder > 5 ? order[5]->principal : "");
    hutch_admit_free(a);
}

static void defaults(void)
{
    struct hutch_admit *a = hutch_admit_new(8, "a test");
    struct waiter w[3];
    struct hutch_err err = HUTCH_ERR_INIT;
    unsigned total;
    const char *from;

    /* Principals listed, nothing said: a quarter of the total each. */
    for (int i = 0; i < 3; i++) {
        start(&w[i], a, "carol", 0, 5);
        until(a, "carol", i < 2 ? (unsigned)i + 1 : 2, i < 2 ? 0 : 1);
    }
    ok(until(a, "carol", 2, 1), "no limit in the policy: a quarter of 8, 2 at once");
    for (int i = 0; i < 3; i++)
        atomic_store(&w[i].release, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(w[i].th, NULL);
    ok(hutch_admit_machine_total() >= 2 &&
           hutch_admit_machine_total() <= HUTCH_ADMIT_MAX_TOTAL,
       "the total sized from this machine: %u", hutch_admit_machine_total());
    setenv("HUTCH_MAX_EXECUTIONS", "3", 1);
    ok(hutch_admit_total_from(&total, &from, &err) == 0 && total == 3 &&
           !strcmp(from, "HUTCH_MAX_EXECUTIONS"),
       "HUTCH_MAX_EXECUTIONS=3 sets it");
    setenv("HUTCH_MAX_EXECUTIONS", "0", 1);
    ok(hutch_admit_total_from(&total, &from, &err) == -EINVAL &&
           strstr(err.msg, "HUTCH_MAX_EXECUTIONS=0"),
       "HUTCH_MAX_EXECUTIONS=0 is an error: %s", err.msg);
    unsetenv("HUTCH_MAX_EXECUTIONS");
    hutch_admit_free(a);
}

int main(void)
{
    limits();
    turns();
    defaults();
    return tap_done();
}
