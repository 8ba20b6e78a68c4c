/* budget.c — what one execution may make hutch hold (see budget.h).
 *
 * Charges to an execution's own budget are atomic.  Charges to the process
 * budget through a principal's share take shares.mu, which guards the
 * shares and makes the rule's check and the charge one step; charges
 * without a share stay atomic (hutch run, tests). */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "caps.h"
#include "knobs.h"
#include "util.h"

/* What one cJSON value and one malloc'd string cost, with glibc malloc's
 * chunk overhead (16 bytes, 16-byte granularity). */
#define NODE_COST   (sizeof(cJSON) + 16)
#define STRING_COST 32

void hutch_budget_init(struct hutch_budget *b, size_t max)
{
    b->max = max;
    atomic_init(&b->used, 0);
    atomic_init(&b->peak, 0);
    b->parent = NULL;
    b->share = NULL;
}

static struct hutch_budget process;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;
/* The process budget passed HUTCH_MALLOC_TRIM_AFTER since the last trim
 * (burst); anything was charged to it since (charged). */
static atomic_int burst, charged;

/* After a charge to p. */
static void note_burst(const struct hutch_budget *p, size_t used)
{
    if (p != &process)
        return;
    atomic_store(&charged, 1);
    if (used > HUTCH_MALLOC_TRIM_AFTER)
        atomic_store(&burst, 1);
}

/* The trimmer: a thread, started the first time all executions came to
 * hold nothing, that trims the heap HUTCH_MALLOC_TRIM_DELAY_MS after they
 * last did (no new work meanwhile): late enough that what their requests
 * still held (a response on its way out, a spent sandbox's buffers) is
 * freed too.  A give only moves trim_at (under trim_mu) and wakes the
 * trimmer only when it was not already waiting for a time: a tool call
 * gives several times, and waking a thread for each one cost more than
 * the call's own work (bench-mcp). */
static pthread_mutex_t trim_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t trim_cv;
static int trim_started;
static uint64_t trim_at;                /* ms; 0: no trim wanted */
static unsigned long trim_wakes, trims; /* hutch_budget_trim_stats */

static void *trimmer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&trim_mu);
    for (;;) {
        uint64_t at = trim_at;
        if (!at) {
            pthread_cond_wait(&trim_cv, &trim_mu);
            continue;
        }
        if (hutch_now_ms() < at) {
            /* A later give moves trim_at on: looked at again at wake-up. */
            hutch_cond_wait_until(&trim_cv, &trim_mu, at);
            continue;
        }
        trim_at = 0;
        pthread_mutex_unlock(&trim_mu);
        malloc_trim(0);
        pthread_mutex_lock(&trim_mu);
        trims++;
    }
    return NULL;
}

/* After a give to p: once all executions hold nothing after a burst, the
 * heap's free pages go back to the system (every arena's), now and after
 * the delay; after smaller work, only after the delay (the trimmer's: a
 * trim walks every arena, too much for the end of each execution, and a
 * host that goes idle still gets its pages back: the soak measured 0.4
 * MiB of 0.8 that 75 s of executions left in the heap). */
static void after_give(const struct hutch_budget *p)
{
    int idle;

    if (p != &process || atomic_load(&process.used) != 0 ||
        !atomic_exchange(&charged, 0))
        return;
    if (atomic_exchange(&burst, 0))
        malloc_trim(0);
    pthread_mutex_lock(&trim_mu);
    if (!trim_started) {
        pthread_attr_t attr;
        pthread_t th;
        sigset_t all, old;
        hutch_cond_init_mono(&trim_cv);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* Signals are the main thread's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        trim_started = pthread_create(&th, &attr, trimmer, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    idle = trim_at == 0;
    trim_at = hutch_now_ms() + HUTCH_MALLOC_TRIM_DELAY_MS;
    if (idle) {
        trim_wakes++;
        pthread_cond_signal(&trim_cv);
    }
    pthread_mutex_unlock(&trim_mu);
}

void hutch_budget_trim_stats(unsigned long *wakes, unsigned long *done)
{
    pthread_mutex_lock(&trim_mu);
    *wakes = trim_wakes;
    *done = trims;
    pthread_mutex_unlock(&trim_mu);
}

static void process_init(void)
{
    uint64_t mb;
    /* serve and run refused a bad value when they started (knobs.c); a
     * caller that did not check gets the default for it (a budget is never
     * switched off by a typo). */
    if (hutch_knob_uint(HUTCH_KNOB_MEMORY_BUDGET_MB, &mb, NULL) < 0)
        mb = HUTCH_PROCESS_MEMORY_BUDGET_MB;
    hutch_budget_init(&process, (size_t)mb << 20);
}

struct hutch_budget *hutch_budget_process(void)
{
    pthread_once(&process_once, process_init);
    return &process;
}

/* --- principals' shares of the process budget ----------------------------- */

struct hutch_budget_share {
    struct hutch_budget_share *next;
    char *name;
    unsigned execs; /* executions holding it */
    size_t used;    /* of the process budget */
};

static struct {
    pthread_mutex_t mu;
    struct hutch_budget_share *list;
    unsigned listed;
} shares = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

struct hutch_budget_share *hutch_budget_join(const char *principal, unsigned listed)
{
    struct hutch_budget_share *s;
    const char *name = principal ? principal : "";

    pthread_mutex_lock(&shares.mu);
    shares.listed = listed;
    for (s = shares.list; s; s = s->next)
        if (!strcmp(s->name, name))
            break;
    if (!s && (s = calloc(1, sizeof(*s))) && !(s->name = strdup(name))) {
        free(s);
        s = NULL;
    }
    if (s && !s->execs && !s->used) {
        s->next = shares.list;
        shares.list = s;
    }
    if (s)
        s->execs++;
    pthread_mutex_unlock(&shares.mu);
    return s;
}

/* An inactive share (no execution, nothing held) leaves the list.  Under
 * shares.mu. */
static void share_prune(struct hutch_budget_share *s)
{
    if (s->execs || s->used)
        return;
    for (struct hutch_budget_share **pp = &shares.list; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            free(s->name);
            free(s);
            return;
        }
}

void hutch_budget_leave(struct hutch_budget_share *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&shares.mu);
    s->execs--;
    share_prune(s);
    pthread_mutex_unlock(&shares.mu);
}

size_t hutch_budget_share_used(const struct hutch_budget_share *s)
{
    size_t u;
    pthread_mutex_lock(&shares.mu);
    u = s->used;
    pthread_mutex_unlock(&shares.mu);
    return u;
}

/* The floor of each active principal now.  Under shares.mu. */
static size_t share_floor(const struct hutch_budget *all, unsigned *nactive,
                          unsigned *spare)
{
    unsigned n = 0;
    size_t f;
    for (const struct hutch_budget_share *s = shares.list; s; s = s->next)
        n++;
    *nactive = n;
    *spare = shares.listed > n ? 1 : 0;
    f = all->max / (n + *spare ? n + *spare : 1);
    return f < HUTCH_EXEC_MEMORY_BUDGET ? f : HUTCH_EXEC_MEMORY_BUDGET;
}

/* Charges n bytes of the process budget `p` to share `s`, under the rule
 * (budget.h): 0, -ENOSPC (p is full) or -EDQUOT (past s's share). */
static int take_shared(struct hutch_budget *p, struct hutch_budget_share *s, size_t n)
{
    size_t used, peak, floor, reserve = 0;
    unsigned nactive, spare;
    int r = 0;

    pthread_mutex_lock(&shares.mu);
    used = atomic_load(&p->used);
    if (n > p->max || used > p->max - n) {
        r = -ENOSPC;
        goto out;
    }
    floor = share_floor(p, &nactive, &spare);
    if (s->used + n > floor) {
        reserve = spare * floor;
        for (const struct hutch_budget_share *q = shares.list; q; q = q->next)
            if (q != s && q->used < floor)
                reserve += floor - q->used;
        if (p->max - used - n < reserve) {
            r = -EDQUOT;
            goto out;
        }
    }
    /* Others may charge p without a share (atomically): add, not store. */
    used = atomic_fetch_add(&p->used, n) + n;
    if (used > p->max) {
        atomic_fetch_sub(&p->used, n);
        r = -ENOSPC;
        goto out;
    }
    s->used += n;
    peak = atomic_load(&p->peak);
    while (used > peak && !atomic_compare_exchange_weak(&p->peak, &peak, used))
        ;
    note_burst(p, used);
out:
    pthread_mutex_unlock(&shares.mu);
    return r;
}

static void give_shared(struct hutch_budget *p, struct hutch_budget_share *s, size_t n)
{
    pthread_mutex_lock(&shares.mu);
    s->used -= n;
    atomic_fetch_sub(&p->used, n);
    share_prune(s);
    pthread_mutex_unlock(&shares.mu);
    after_give(p);
}

/* --- charges ------------------------------------------------------------------ */

static int take_one(struct hutch_budget *b, size_t n)
{
    size_t used, peak;
    used = atomic_load(&b->used);
    do {
        if (n > b->max || used > b->max - n)
            return -ENOMEM;
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
    used += n;
    peak = atomic_load(&b->peak);
    while (used > peak && !atomic_compare_exchange_weak(&b->peak, &peak, used))
        ;
    note_burst(b, used);
    return 0;
}

int hutch_budget_take(struct hutch_budget *b, size_t n)
{
    int r = 0;
    if (!b)
        return 0;
    if (take_one(b, n) < 0)
        return -ENOMEM;
    if (b->parent && b->share)
        r = take_shared(b->parent, b->share, n);
    else if (b->parent && take_one(b->parent, n) < 0)
        r = -ENOSPC;
    if (r < 0)
        atomic_fetch_sub(&b->used, n);
    return r;
}

void hutch_budget_give(struct hutch_budget *b, size_t n)
{
    if (!b || !n)
        return;
    atomic_fetch_sub(&b->used, n);
    if (b->parent && b->share) {
        give_shared(b->parent, b->share, n);
    } else if (b->parent) {
        atomic_fetch_sub(&b->parent->used, n);
        after_give(b->parent);
    }
}

void hutch_budget_move(struct hutch_budget *to, struct hutch_budget *from)
{
    size_t n = atomic_exchange(&from->used, 0);
    hutch_budget_init(to, from->max);
    to->parent = from->parent;
    to->share = from->share;
    atomic_store(&to->used, n);
}

static _Thread_local struct hutch_budget *current;

void hutch_budget_set_current(struct hutch_budget *b)
{
    current = b;
}

struct hutch_budget *hutch_budget_current(void)
{
    return current;
}

const char *hutch_budget_why(const struct hutch_budget *b, int rc, char *buf,
                             size_t len)
{
    if (rc == -EDQUOT && b->parent && b->share) {
        unsigned nactive, spare;
        size_t floor, held;
        pthread_mutex_lock(&shares.mu);
        floor = share_floor(b->parent, &nactive, &spare);
        held = b->share->used;
        snprintf(buf, len,
                 "more than principal \"%s\" may hold of the %zu MiB hutch holds for "
                 "all executions while other principals may need theirs (it holds "
                 "%zu MiB; each principal is sure of %zu MiB, and one that holds more "
                 "only borrows what nobody else is owed): try again when its other "
                 "executions hold less",
                 b->share->name, b->parent->max >> 20, held >> 20, floor >> 20);
        pthread_mutex_unlock(&shares.mu);
    } else if (rc == -ENOSPC && b->parent)
        snprintf(buf, len,
                 "more than hutch has left of the %zu MiB it holds for all executions "
                 "at once (HUTCH_MEMORY_BUDGET_MB): try again when fewer run",
                 b->parent->max >> 20);
    else
        snprintf(buf, len, "more than this execution has left of its %zu MiB budget",
                 b->max >> 20);
    return buf;
}

size_t hutch_json_text_cost(const char *text, size_t len)
{
    size_t opens = 0, commas = 0, strings = 0;
    int in_str = 0;

    /* Outside strings, every value is one node: a container's first
     * element follows its bracket, every other one a comma (a colon
     * separates a key, which is a string on its member's node). */
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
            strings++;
        } else if (c == '[' || c == '{') {
            opens++;
        } else if (c == ',') {
            commas++;
        }
    }
    return (2 * opens + commas + 1) * NODE_COST + strings * STRING_COST + len;
}

size_t hutch_json_cost(const cJSON *j)
{
    size_t cost = 0;
    for (; j; j = j->next) {
        cost += NODE_COST;
        if (j->string)
            cost += STRING_COST + strlen(j->string);
        if (j->valuestring)
            cost += STRING_COST + strlen(j->valuestring);
        if (j->child)
            cost += hutch_json_cost(j->child);
    }
    return cost;
}

int hutch_json_check_text(const char *text, size_t len, size_t max, const char *what,
                          struct hutch_err *err)
{
    size_t cost = hutch_json_text_cost(text, len);
    if (cost <= max)
        return 0;
    return hutch_err_set(
        err, -E2BIG,
        "%s of %zu bytes would take about %zu MiB of hutch's memory to "
        "parse (it holds at most %zu MiB for one)",
        what, len, (cost + (1u << 20) - 1) >> 20, max >> 20);
}
