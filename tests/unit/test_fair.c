/* test_fair.c — fair.c: a principal's running sandboxes weigh one sandbox
 * together, whatever the other principals run. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fair.h"
#include "hutch-executor.h"
#include "tap.h"

struct box {
    uint32_t weight; /* as the executor would hold it */
    unsigned sets;
};

static void set(void *arg, uint32_t w)
{
    struct box *b = arg;
    b->weight = w;
    b->sets++;
}

static void *churn(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        struct box b = {HUTCH_CPU_WEIGHT_DEFAULT, 0};
        struct hutch_fair_seat *s = hutch_fair_join(i % 2 ? "p" : "q", set, &b);
        hutch_fair_leave(s);
    }
    return NULL;
}

int main(void)
{
    struct box a[4], b = {HUTCH_CPU_WEIGHT_DEFAULT, 0},
                     solo = {HUTCH_CPU_WEIGHT_DEFAULT, 0};
    struct hutch_fair_seat *sa[4], *sb, *ss;
    pthread_t t[4];

    ok(hutch_fair_weight(1) == 100 && hutch_fair_weight(2) == 50 &&
           hutch_fair_weight(3) == 33 && hutch_fair_weight(4) == 25,
       "n seats weigh 100/n each");
    ok(hutch_fair_weight(1000) == HUTCH_CPU_WEIGHT_MIN, "never below the minimum (%u)",
       hutch_fair_weight(1000));

    for (int i = 0; i < 4; i++)
        a[i] = (struct box){HUTCH_CPU_WEIGHT_DEFAULT, 0};
    sb = hutch_fair_join("bob", set, &b);
    sa[0] = hutch_fair_join("mallory", set, &a[0]);
    ok(sb && sa[0] && b.sets == 0 && a[0].sets == 0,
       "one seat each: the default weight, nothing set");
    for (int i = 1; i < 4; i++)
        sa[i] = hutch_fair_join("mallory", set, &a[i]);
    ok(a[0].weight == 25 && a[1].weight == 25 && a[2].weight == 25 && a[3].weight == 25,
       "mallory's four sandboxes weigh 25 each (%u %u %u %u)", a[0].weight, a[1].weight,
       a[2].weight, a[3].weight);
    ok(b.weight == 100 && b.sets == 0, "bob's one keeps 100 (%u)", b.weight);
    ss = hutch_fair_join(NULL, set, &solo);
    ok(ss && solo.weight == 100 && a[0].weight == 25,
       "no principal is a group of its own (\"\")");

    hutch_fair_leave(sa[1]);
    hutch_fair_leave(sa[2]);
    ok(a[0].weight == 50 && a[3].weight == 50,
       "two of mallory's leave: 50 each (%u %u)", a[0].weight, a[3].weight);
    {
        unsigned before = a[1].sets;
        hutch_fair_leave(sa[3]);
        ok(a[0].weight == 100 && a[1].sets == before,
           "the last left alone weighs 100 again; a seat gone is not set again");
    }
    hutch_fair_leave(sa[0]);
    hutch_fair_leave(sb);
    hutch_fair_leave(ss);
    hutch_fair_leave(NULL);

    /* A group emptied and joined again from several threads. */
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    {
        struct box x = {HUTCH_CPU_WEIGHT_DEFAULT, 0};
        struct hutch_fair_seat *s = hutch_fair_join("p", set, &x);
        ok(s && x.sets == 0 && x.weight == 100,
           "after 8000 joins and leaves from 4 threads, a seat alone weighs 100");
        hutch_fair_leave(s);
    }
    return tap_done();
}
