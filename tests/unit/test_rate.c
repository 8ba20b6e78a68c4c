/* test_rate.c — per-principal rate limits with an injected clock: limits
 * per principal and per kind are independent, the window slides, the
 * retry hint is exact, no 60-second window ever holds more than the limit,
 * unlimited means unlimited, and memory stays bounded by evicting the
 * least recently used principal. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rate.h"
#include "tap.h"

static int take(struct hutch_rate *r, const char *who, const char *kind, uint32_t n,
                uint64_t now, uint64_t *retry)
{
    uint64_t dummy;
    return hutch_rate_take(r, who, kind, n, now, retry ? retry : &dummy);
}

static void test_basic(void)
{
    struct hutch_rate *r = hutch_rate_new();
    uint64_t retry = 7;
    int allowed = 0;

    ok(r != NULL, "new");
    for (int i = 0; i < 5; i++)
        allowed += take(r, "alice", "execution", 3, 1000, NULL) == 0;
    ok(allowed == 3, "3 of 5 executions allowed at a limit of 3 (%d)", allowed);
    ok(take(r, "alice", "execution", 3, 1500, &retry) == -EAGAIN && retry == 60500,
       "over the limit: -EAGAIN, retry after %llu ms (60500)",
       (unsigned long long)retry);
    ok(take(r, "bob", "execution", 3, 1500, &retry) == 0 && retry == 0,
       "another principal is not limited by alice");
    ok(take(r, "alice", "tool_call", 3, 1500, NULL) == 0,
       "another kind is not limited by executions");
    ok(take(r, "Alice", "execution", 3, 1500, NULL) == 0,
       "principal names are exact (case matters)");
    ok(take(r, "alice", "execution", 3, 61999, NULL) == -EAGAIN,
       "still limited a moment before the retry time");
    ok(take(r, "alice", "execution", 3, 62000, NULL) == 0, "allowed at the retry time");
    /* A reload raising the limit applies to the counts already made. */
    ok(take(r, "bob", "execution", 1, 1600, NULL) == -EAGAIN,
       "a lower limit applies at once to what was counted");
    ok(take(r, "bob", "execution", 10, 1600, NULL) == 0,
       "a higher limit applies at once too");
    /* Anonymous: NULL is one shared principal. */
    ok(take(r, NULL, "tool_call", 1, 0, NULL) == 0 &&
           take(r, NULL, "tool_call", 1, 0, NULL) == -EAGAIN &&
           take(r, "", "tool_call", 1, 0, NULL) == -EAGAIN,
       "NULL principal is the anonymous one, \"\"");
    ok(hutch_rate_take(r, "alice", "execution", 1, 62000, NULL) == -EAGAIN,
       "retry_after_ms may be NULL");
    hutch_rate_free(r);
}

static void test_sliding(void)
{
    struct hutch_rate *r = hutch_rate_new();
    uint64_t retry = 0;
    int good = 1;

    for (uint64_t t = 0; t < 40000; t += 10000)
        good &= take(r, "p", "tool_call", 4, t, NULL) == 0;
    ok(good, "4 calls spread over 30 s allowed");
    ok(take(r, "p", "tool_call", 4, 40000, &retry) == -EAGAIN && retry == 21000,
       "the 5th at 40 s waits for the first to leave (%llu ms)",
       (unsigned long long)retry);
    ok(take(r, "p", "tool_call", 4, 61000, NULL) == 0,
       "at 61 s the call from 0 s has left the window");
    ok(take(r, "p", "tool_call", 4, 61001, &retry) == -EAGAIN && retry == 9999,
       "then full again until the 10 s call leaves (%llu ms)",
       (unsigned long long)retry);
    ok(take(r, "p", "tool_call", 4, 71000, NULL) == 0, "and at 71 s one more");
    ok(take(r, "p", "tool_call", 4, 71000 + 3600000, NULL) == 0 &&
           take(r, "p", "tool_call", 4, 71000 + 3600000, NULL) == 0 &&
           take(r, "p", "tool_call", 4, 71000 + 3600000, NULL) == 0 &&
           take(r, "p", "tool_call", 4, 71000 + 3600000, NULL) == 0 &&
           take(r, "p", "tool_call", 4, 71000 + 3600000, NULL) == -EAGAIN,
       "an hour later the window is empty again");
    /* A clock that goes back is treated as standing still. */
    ok(take(r, "q", "execution", 1, 500000, NULL) == 0 &&
           take(r, "q", "execution", 1, 10000, &retry) == -EAGAIN && retry == 61000,
       "a clock going back does not reopen the window (retry %llu)",
       (unsigned long long)retry);
    hutch_rate_free(r);
}

/* Many requests at pseudo-random times: no 60 s window ever holds more
 * than the limit, and the retry hint is exact (denied just before it,
 * allowed at it). */
static void test_invariant(void)
{
    enum { N = 20000, LIMIT = 25 };
    struct hutch_rate *r = hutch_rate_new();
    static uint64_t allowed_at[N];
    size_t nallowed = 0, worst = 0, lo = 0;
    uint64_t t = 0, seed = 42;
    int hint_bad = 0, hints = 0;

    for (int i = 0; i < N; i++) {
        uint64_t retry = 0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t += (seed >> 33) % 1500; /* ~0.75 s apart: about 80 a minute */
        int rc = take(r, "p", "execution", LIMIT, t, &retry);
        if (rc == 0) {
            allowed_at[nallowed++] = t;
        } else if (i % 50 == 0) {
            /* Denied just before the hint (a denial counts nothing),
             * allowed at it; carry on from there. */
            hints++;
            if (retry == 0 ||
                take(r, "p", "execution", LIMIT, t + retry - 1, NULL) == 0)
                hint_bad++;
            t += retry;
            if (take(r, "p", "execution", LIMIT, t, NULL) != 0)
                hint_bad++;
            else
                allowed_at[nallowed++] = t;
        }
    }
    for (size_t hi = 0; hi < nallowed; hi++) {
        while (allowed_at[hi] - allowed_at[lo] >= 60000)
            lo++;
        if (hi - lo + 1 > worst)
            worst = hi - lo + 1;
    }
    ok(worst <= LIMIT, "no 60 s window holds more than %d allowed (worst %zu of %zu)",
       LIMIT, worst, nallowed);
    ok(worst == LIMIT, "the limit is reached (not stricter than asked)");
    ok(hints > 0 && hint_bad == 0, "retry hints exact (%d probed, %d wrong)", hints,
       hint_bad);
    hutch_rate_free(r);
}

static void test_unlimited_and_errors(void)
{
    struct hutch_rate *r = hutch_rate_new();
    uint64_t retry = 5;
    int all = 1;
    char longname[HUTCH_MAX_PRINCIPAL_NAME + 2];

    for (int i = 0; i < 100000; i++)
        all &= take(r, "u", "execution", 0, 0, &retry) == 0;
    ok(all && retry == 0, "per_minute 0: unlimited");
    ok(take(r, "u", "execution", 1, 0, NULL) == 0,
       "unlimited calls are not counted against a later limit");
    ok(take(r, "u", "files", 1, 0, NULL) == -EINVAL, "unknown kind: -EINVAL");
    ok(take(r, "u", NULL, 1, 0, NULL) == -EINVAL, "NULL kind: -EINVAL");
    ok(hutch_rate_take(NULL, "u", "execution", 1, 0, NULL) == -EINVAL,
       "NULL rate: -EINVAL");
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ok(take(r, longname, "execution", 1, 0, NULL) == -EINVAL,
       "too long a name: -EINVAL");
    longname[HUTCH_MAX_PRINCIPAL_NAME] = '\0';
    ok(take(r, longname, "execution", 1, 0, NULL) == 0,
       "a name of exactly %d bytes is fine", HUTCH_MAX_PRINCIPAL_NAME);
    hutch_rate_free(NULL);
    hutch_rate_free(r);
}

static void test_eviction(void)
{
    struct hutch_rate *r = hutch_rate_new();
    char name[32];
    int all = 1;

    for (int i = 0; i < HUTCH_RATE_MAX_PRINCIPALS; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        all &= take(r, name, "execution", 1, 0, NULL) == 0;
    }
    ok(all, "%d principals each used their one execution", HUTCH_RATE_MAX_PRINCIPALS);
    ok(take(r, "p0", "execution", 1, 0, NULL) == -EAGAIN,
       "p0 is remembered (and now most recently used)");
    ok(take(r, "new", "execution", 1, 0, NULL) == 0, "principal %d+1 is tracked",
       HUTCH_RATE_MAX_PRINCIPALS);
    ok(take(r, "p0", "execution", 1, 0, NULL) == -EAGAIN, "p0 still remembered");
    ok(take(r, "p1", "execution", 1, 0, NULL) == 0,
       "p1, least recently used, was forgotten");
    ok(take(r, "new", "execution", 1, 0, NULL) == -EAGAIN,
       "the newcomer is remembered");
    /* Churn far past the cap: still correct for the recent ones. */
    for (int i = 0; i < 20 * HUTCH_RATE_MAX_PRINCIPALS; i++) {
        snprintf(name, sizeof(name), "churn%d", i);
        all &= take(r, name, "tool_call", 2, 1000, NULL) == 0;
    }
    ok(all && take(r, name, "tool_call", 2, 1000, NULL) == 0 &&
           take(r, name, "tool_call", 2, 1000, NULL) == -EAGAIN,
       "after churning %d principals the latest is counted right",
       20 * HUTCH_RATE_MAX_PRINCIPALS);
    hutch_rate_free(r);
}

struct worker {
    struct hutch_rate *r;
    int allowed;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 2000; i++) {
        char who[8];
        snprintf(who, sizeof(who), "t%d", i % 3);
        if (take(w->r, who, "tool_call", 1000, 5000, NULL) == 0)
            w->allowed++;
    }
    return NULL;
}

static void test_threads(void)
{
    struct hutch_rate *r = hutch_rate_new();
    struct worker w[8];
    pthread_t th[8];
    int total = 0;

    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){.r = r};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        total += w[i].allowed;
    }
    ok(total == 3000, "8 threads, 3 principals x 1000: exactly 3000 allowed (%d)",
       total);
    hutch_rate_free(r);
}

int main(void)
{
    test_basic();
    test_sliding();
    test_invariant();
    test_unlimited_and_errors();
    test_eviction();
    test_threads();
    return tap_done();
}
