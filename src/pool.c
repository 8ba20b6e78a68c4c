/* pool.c — warm pools of single-use sandboxes (see pool.h).
 *
 * A class is a (plugin, sandbox class) with a size and a FIFO of idle
 * boxes, oldest first.  It keeps `size + grown` boxes warm: a take that
 * finds it empty (demand outran the refills) adds one to `grown`, up to
 * HUTCH_POOL_GROW_FACTOR times the size; each shrink_ms without such a
 * take gives one back, and the oldest idle box past the target goes.
 * Refill threads do all the work: each loops over the classes under the
 * mutex, takes out what must be destroyed (boxes too old or no longer
 * pristine, past the target, classes drained), picks a class below its
 * target, and starts one sandbox for it outside the mutex.  They wake on a
 * condition variable (a take, a want, a commit) and at least once a second
 * to look at the idle boxes.  HUTCH_POOL_REFILL_THREADS always run; a
 * thread that takes a start while more sandboxes are missing than threads
 * wait wakes one, or starts one more, up to `max_workers`
 * ($HUTCH_POOL_REFILL_MAX): a pool that ran dry refills in parallel.  Such
 * an extra thread ends after HUTCH_POOL_REFILL_LINGER_MS with nothing to
 * do.
 *
 * Shares: where the policy lists principals, the pool counts each one's
 * jobs under way (take to discard, warm or cold) and when it last took.  A
 * take by `who` gets a warm box only if more are idle than the principals
 * that took within share_ms and have fewer jobs under way than `who`: each
 * of those is left one.  So a principal flooding executions starts cold
 * while the others' next executions find a warm box, and the lightest
 * user never waits on a reserve.  A take refused so is a miss: the class
 * grows, the demand is real.
 *
 * A start under way is cancelled (start() polls cancelled()) when its class
 * is drained or the pool is freed.  A class is freed only when it has no
 * idle box and no start under way.
 *
 * Threads and locks: `mu` guards the class list and everything in a class
 * except `draining` (atomic: read by cancelled() without the lock).  Boxes
 * are started and destroyed without `mu` held. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "caps.h"
#include "knobs.h"
#include "log.h"
#include "pool.h"
#include "util.h"

struct klass {
    struct klass *next;
    struct hutch_pool *pool;
    struct hutch_plugin *pl;
    struct hutch_sandbox_class cls; /* language and options point below */
    char language[16];
    char *options;
    int size;      /* configured; 0: drain */
    int grown;     /* kept warm beyond size, for demand (see above) */
    int wanted;    /* named in the current configuration round */
    int on_demand; /* added by a miss, not by the configuration */
    atomic_int draining;
    struct hutch_box *idle[HUTCH_POOL_MAX_SIZE];
    int nidle;
    int starting;
    uint64_t hits, misses, failures, recycled;
    uint64_t last_take_ms, backoff_until_ms, backoff_ms;
    uint64_t last_dry_ms;    /* a take found it empty, or it last shrank */
    uint64_t short_since_ms; /* below its target since (0: full) */
    int failing;             /* the last refill failed: logged once until it recovers */
    char last_error[300];
};

/* A refill thread's slot (under mu). */
struct worker {
    struct hutch_pool *pool;
    pthread_t th;
    int state; /* W_FREE, W_RUNNING, or W_ENDED (to be joined) */
    int extra; /* ends when idle (see above) */
};
enum { W_FREE, W_RUNNING, W_ENDED };

/* A principal in the shares (see above; under mu). */
struct share {
    char who[64]; /* "" : a free slot */
    int held;     /* jobs between take and discard */
    uint64_t last_take_ms;
};

struct hutch_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct klass *classes;
    int nclasses;
    int in_round;
    int busy;                /* jobs between take and discard */
    struct hutch_box *spent; /* discarded boxes to destroy */
    atomic_int stopping;
    uint64_t seq;
    uint64_t max_idle_ms; /* HUTCH_POOL_MAX_IDLE_MS, or $HUTCH_POOL_MAX_IDLE_MS */
    uint64_t shrink_ms;   /* HUTCH_POOL_SHRINK_MS, or $HUTCH_POOL_SHRINK_MS */
    uint64_t share_ms;    /* HUTCH_POOL_SHARE_MS, or $HUTCH_POOL_SHARE_MS */
    struct share shares[HUTCH_POOL_SHARE_SLOTS];
    struct worker workers[HUTCH_POOL_REFILL_MAX_THREADS];
    int max_workers; /* $HUTCH_POOL_REFILL_MAX, or the CPUs */
    int nrunning;    /* workers W_RUNNING */
    int nwaiting;    /* of them, waiting on cv */
};

/* A batch of boxes to destroy once the mutex is released. */
struct doomed {
    struct hutch_box *v[HUTCH_POOL_MAX_SIZE * 2];
    int n;
};

static void doom(struct doomed *d, struct hutch_box *b)
{
    if (d->n < (int)(sizeof(d->v) / sizeof(d->v[0])))
        d->v[d->n++] = b;
    else
        hutch_box_destroy(b); /* never happens: the batch holds a class */
}

static void destroy_doomed(struct doomed *d)
{
    for (int i = 0; i < d->n; i++)
        hutch_box_destroy(d->v[i]);
    d->n = 0;
}

static struct klass *find(struct hutch_pool *p, struct hutch_plugin *pl,
                          const struct hutch_sandbox_class *cls)
{
    for (struct klass *k = p->classes; k; k = k->next)
        if (k->pl == pl && hutch_class_equal(&k->cls, cls))
            return k;
    return NULL;
}

/* How many boxes `k` keeps warm now (under mu). */
static int target(const struct klass *k)
{
    return k->size > 0 ? k->size + k->grown : 0;
}

/* The most it may grow to. */
static int ceiling(const struct klass *k)
{
    int c = k->size * HUTCH_POOL_GROW_FACTOR;
    return c > HUTCH_POOL_MAX_SIZE ? HUTCH_POOL_MAX_SIZE : c;
}

static void klass_free(struct klass *k)
{
    free(k->options);
    free(k);
}

static int start_cancelled(void *arg)
{
    struct klass *k = arg;
    return atomic_load(&k->draining) || atomic_load(&k->pool->stopping);
}

/* Under mu: take the idle boxes out of `k` (all, or only the stale ones
 * and the oldest past its target). */
static void take_idle(struct klass *k, int all, uint64_t now, struct doomed *d)
{
    int keep = 0, past = k->nidle - target(k); /* the oldest `past` go */
    for (int i = 0; i < k->nidle; i++) {
        struct hutch_box *b = k->idle[i];
        int stale = now - b->t_ready_us / 1000 > k->pool->max_idle_ms;
        if (i < past) {
            doom(d, b); /* the class shrank: not a replacement */
        } else if (all || stale || !hutch_box_idle_ok(b)) {
            if (!all) {
                k->recycled++;
                hutch_debug("pool: %s %s sandbox replaced (%s)", k->pl->name,
                            k->language,
                            stale ? "idle too long" : "changed while idle");
            }
            doom(d, b);
        } else {
            k->idle[keep++] = b;
        }
    }
    k->nidle = keep;
}

/* Under mu: housekeeping, then the class most in need of a sandbox (or
 * NULL).  Boxes to destroy go to `d`. */
static struct klass *next_job(struct hutch_pool *p, struct doomed *d, int *deferred,
                              int *missing)
{
    uint64_t now = hutch_now_ms();
    struct klass *best = NULL, **kp = &p->classes;
    int best_gap = 0;

    while (*kp) {
        struct klass *k = *kp;
        if (k->on_demand && k->size > 0 &&
            now - k->last_take_ms > HUTCH_POOL_CLASS_IDLE_MS) {
            k->size = 0;
            atomic_store(&k->draining, 1);
        }
        if (k->grown > 0 && now - k->last_dry_ms >= p->shrink_ms) {
            k->grown--;
            k->last_dry_ms = now;
            hutch_debug("pool: %s %s keeps %d warm (no demand beyond it lately)",
                        k->pl->name, k->language, target(k));
        }
        if (d->n + k->nidle <= (int)(sizeof(d->v) / sizeof(d->v[0])))
            take_idle(k, k->size == 0, now, d);
        if (k->size == 0 && k->nidle == 0 && k->starting == 0) {
            *kp = k->next;
            p->nclasses--;
            klass_free(k);
            continue;
        }
        if (k->size > 0 && now >= k->backoff_until_ms) {
            int gap = target(k) - k->nidle - k->starting;
            if (gap <= 0)
                k->short_since_ms = 0;
            else if (!k->short_since_ms)
                k->short_since_ms = now;
            /* A start competes for the CPU with the jobs running: while a
             * class still has a sandbox idle, its refill waits for them
             * (at most HUTCH_POOL_REFILL_DEFER_MS). */
            if (gap > 0 && p->busy > 0 && k->nidle > 0 &&
                now - k->short_since_ms < HUTCH_POOL_REFILL_DEFER_MS) {
                *deferred = 1;
            } else if (gap > 0) {
                *missing += gap;
                if (gap > best_gap) {
                    best = k;
                    best_gap = gap;
                }
            }
        }
        kp = &k->next;
    }
    return best;
}

static void refill_one(struct hutch_pool *p, struct klass *k, struct doomed *d)
{
    struct hutch_err err = {0};
    struct hutch_box *b = NULL;
    char label[32];
    int r;

    snprintf(label, sizeof(label), "pool-%llu", (unsigned long long)++p->seq);
    k->starting++;
    pthread_mutex_unlock(&p->mu);
    r = hutch_box_start(k->pl, &k->cls, label, 1, start_cancelled, k, &b, &err);
    pthread_mutex_lock(&p->mu);
    k->starting--;
    if (r == 0) {
        if (k->failing)
            hutch_warn("pool: %s %s sandboxes start again; executions are warm again",
                       k->pl->name, k->language);
        k->failing = 0;
        k->backoff_ms = 0;
        if (!atomic_load(&p->stopping) && !atomic_load(&k->draining) &&
            k->nidle + k->starting < target(k))
            k->idle[k->nidle++] = b;
        else
            doom(d, b);
        return;
    }
    if (r == -ECANCELED)
        return;
    k->failures++;
    k->backoff_ms = k->backoff_ms ? k->backoff_ms * 2 : HUTCH_POOL_BACKOFF_MIN_MS;
    if (k->backoff_ms > HUTCH_POOL_BACKOFF_MAX_MS)
        k->backoff_ms = HUTCH_POOL_BACKOFF_MAX_MS;
    k->backoff_until_ms = hutch_now_ms() + k->backoff_ms;
    snprintf(k->last_error, sizeof(k->last_error), "%s", err.msg);
    if (!k->failing)
        hutch_warn("pool: starting a %s %s sandbox failed, executions start cold until "
                   "it works again (retrying with backoff): %s",
                   k->pl->name, k->language, err.msg);
    k->failing = 1;
}

static void *refill_main(void *arg);

/* Under mu: one more refill thread, when there is room for it (0), else
 * -EAGAIN.  A slot whose thread ended is joined first (it has left the
 * mutex for good: joining it is quick). */
static int spawn_worker(struct hutch_pool *p, int extra)
{
    struct worker *w = NULL;
    pthread_attr_t attr;
    int r;

    if (atomic_load(&p->stopping) || p->nrunning >= p->max_workers)
        return -EAGAIN;
    for (int i = 0; i < HUTCH_POOL_REFILL_MAX_THREADS && !w; i++)
        if (p->workers[i].state != W_RUNNING)
            w = &p->workers[i];
    if (!w)
        return -EAGAIN;
    if (w->state == W_ENDED)
        pthread_join(w->th, NULL);
    w->state = W_FREE;
    w->pool = p;
    w->extra = extra;
    pthread_attr_init(&attr);
    /* A start may run set-up code of its executor on this thread. */
    pthread_attr_setstacksize(&attr, 1u << 20);
    r = pthread_create(&w->th, &attr, refill_main, w);
    pthread_attr_destroy(&attr);
    if (r != 0)
        return -r;
    w->state = W_RUNNING;
    p->nrunning++;
    return 0;
}

/* Under mu, where demand grows (a take, a want): enough refill threads for
 * what is missing.  A refill thread decides to add one only when it picks a
 * start; if every thread is already inside a start (a slow one), a box
 * taken meanwhile found nobody to wake and waited for one of them to end:
 * under load, 4 missing got 1 to 3 starts at once.  Here each missing box
 * no waiting thread will pick gets a thread, up to the ceiling; one too
 * many finds nothing to do and ends after HUTCH_POOL_REFILL_LINGER_MS. */
static void more_hands(struct hutch_pool *p)
{
    uint64_t now = hutch_now_ms();
    int missing = 0;

    for (struct klass *k = p->classes; k; k = k->next) {
        int gap = target(k) - k->nidle - k->starting;
        if (k->size > 0 && now >= k->backoff_until_ms && gap > 0)
            missing += gap;
    }
    for (int n = missing - p->nwaiting; n > 0; n--)
        if (spawn_worker(p, 1) < 0)
            break;
}

static void *refill_main(void *arg)
{
    struct worker *w = arg;
    struct hutch_pool *p = w->pool;
    struct doomed d = {.n = 0};
    uint64_t idle_since = hutch_now_ms();

    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stopping)) {
        struct klass *k;
        int deferred = 0, missing = 0;
        if (p->spent) {
            /* Spent boxes first: they hold what new ones need. */
            struct hutch_box *list = p->spent;
            p->spent = NULL;
            pthread_mutex_unlock(&p->mu);
            while (list) {
                struct hutch_box *b = list;
                list = b->next;
                hutch_box_destroy(b);
            }
            pthread_mutex_lock(&p->mu);
            continue;
        }
        k = next_job(p, &d, &deferred, &missing);
        if (d.n) {
            pthread_mutex_unlock(&p->mu);
            destroy_doomed(&d);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (k) {
            /* More missing than this start and the threads waiting: one
             * more thread, up to the ceiling. */
            if (missing - 1 > p->nwaiting)
                (void)spawn_worker(p, 1);
            else if (missing > 1)
                pthread_cond_signal(&p->cv);
            refill_one(p, k, &d);
            idle_since = hutch_now_ms();
            continue;
        }
        if (w->extra && hutch_now_ms() - idle_since >= HUTCH_POOL_REFILL_LINGER_MS)
            break;
        p->nwaiting++;
        hutch_cond_wait_until(&p->cv, &p->mu, hutch_now_ms() + (deferred ? 20 : 1000));
        p->nwaiting--;
    }
    w->state = W_ENDED;
    p->nrunning--;
    pthread_mutex_unlock(&p->mu);
    destroy_doomed(&d);
    return NULL;
}

int hutch_pool_default_refill_max(void)
{
    int n = (int)hutch_cpus();

    if (n < HUTCH_POOL_REFILL_THREADS)
        n = HUTCH_POOL_REFILL_THREADS;
    return n > HUTCH_POOL_REFILL_MAX_THREADS ? HUTCH_POOL_REFILL_MAX_THREADS : n;
}

int hutch_pool_new(struct hutch_pool **out, struct hutch_err *err)
{
    struct hutch_pool *p;
    uint64_t idle_ms, shrink_ms, share_ms, max_workers;
    /* $HUTCH_POOL_MAX_IDLE_MS may shorten the idle age (tests, operators
     * who want fresher sandboxes), never lengthen it (its max). */
    int r = hutch_knob_uint(HUTCH_KNOB_POOL_MAX_IDLE_MS, &idle_ms, err);
    if (r < 0)
        return r;
    r = hutch_knob_uint(HUTCH_KNOB_POOL_SHRINK_MS, &shrink_ms, err);
    if (r < 0)
        return r;
    r = hutch_knob_uint(HUTCH_KNOB_POOL_SHARE_MS, &share_ms, err);
    if (r < 0)
        return r;
    r = hutch_knob_uint(HUTCH_KNOB_POOL_REFILL_MAX, &max_workers, err);
    if (r < 0)
        return r;
    if (r == 0)
        max_workers = hutch_pool_default_refill_max();
    p = calloc(1, sizeof(*p));
    if (!p)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    p->max_idle_ms = idle_ms;
    p->shrink_ms = shrink_ms;
    p->share_ms = share_ms;
    p->max_workers = (int)max_workers;
    pthread_mutex_init(&p->mu, NULL);
    hutch_cond_init_mono(&p->cv);
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < HUTCH_POOL_REFILL_THREADS; i++)
        (void)spawn_worker(p, 0);
    pthread_mutex_unlock(&p->mu);
    if (p->nrunning == 0) {
        hutch_pool_free(p);
        return hutch_err_set(err, -EAGAIN, "cannot start the pool's threads");
    }
    *out = p;
    return 0;
}

/* The boxes left at exit, destroyed by several threads at once: each
 * destroy waits on its executor (a container removed, a runsc sandbox
 * reaped), and a client gives a server that closed its stdin a few seconds
 * before it kills it (the official SDKs: 2 s, then SIGTERM, 2 s more). */
struct exit_list {
    pthread_mutex_t mu;
    struct hutch_box *head;
};

static void *exit_destroyer(void *arg)
{
    struct exit_list *l = arg;
    for (;;) {
        struct hutch_box *b;
        pthread_mutex_lock(&l->mu);
        b = l->head;
        if (b)
            l->head = b->next;
        pthread_mutex_unlock(&l->mu);
        if (!b)
            return NULL;
        hutch_box_destroy(b);
    }
}

static void destroy_at_exit(struct hutch_box *head, int n)
{
    struct exit_list l = {.mu = PTHREAD_MUTEX_INITIALIZER, .head = head};
    pthread_t th[HUTCH_POOL_EXIT_THREADS];
    int nth = 0;
    while (nth < n - 1 && nth < HUTCH_POOL_EXIT_THREADS &&
           pthread_create(&th[nth], NULL, exit_destroyer, &l) == 0)
        nth++;
    exit_destroyer(&l); /* this thread too; alone when threads cannot start */
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&l.mu);
}

void hutch_pool_stop(struct hutch_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stopping, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Shutdown is short, because a client gives hutch a few seconds before it
 * kills it: the idle and spent boxes are taken out and destroyed (several
 * at once) while the refill threads wind down, not after them — a start
 * under way is cancelled at its next step (start_cancelled) and a box that
 * comes up anyway is destroyed by its thread — and the threads are joined
 * last. */
void hutch_pool_free(struct hutch_pool *p)
{
    struct klass *k;
    struct hutch_box *left;
    int n = 0;
    if (!p)
        return;
    hutch_pool_stop(p);
    pthread_mutex_lock(&p->mu);
    left = p->spent;
    p->spent = NULL;
    for (struct hutch_box *b = left; b; b = b->next)
        n++;
    for (k = p->classes; k; k = k->next) {
        for (int i = 0; i < k->nidle; i++) {
            k->idle[i]->next = left;
            left = k->idle[i];
            n++;
        }
        k->nidle = 0;
    }
    pthread_mutex_unlock(&p->mu);
    destroy_at_exit(left, n);
    /* No thread starts once stopping is set (spawn_worker): the slots are
     * read under mu, the threads joined without it. */
    {
        pthread_t th[HUTCH_POOL_REFILL_MAX_THREADS];
        int nth = 0;
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < HUTCH_POOL_REFILL_MAX_THREADS; i++)
            if (p->workers[i].state != W_FREE) {
                th[nth++] = p->workers[i].th;
                p->workers[i].state = W_FREE;
            }
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < nth; i++)
            pthread_join(th[i], NULL);
    }
    /* What a refill brought up after stopping was set its thread
     * destroyed; a box discarded since (a job ending late) is here. */
    n = 0;
    for (struct hutch_box *b = p->spent; b; b = b->next)
        n++;
    destroy_at_exit(p->spent, n);
    p->spent = NULL;
    while ((k = p->classes)) {
        p->classes = k->next;
        klass_free(k);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

void hutch_pool_begin(struct hutch_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->in_round = 1;
    for (struct klass *k = p->classes; k; k = k->next)
        k->wanted = 0;
    pthread_mutex_unlock(&p->mu);
}

void hutch_pool_commit(struct hutch_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->in_round = 0;
    for (struct klass *k = p->classes; k; k = k->next)
        if (!k->wanted) {
            k->size = 0;
            atomic_store(&k->draining, 1);
        }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void hutch_pool_want(struct hutch_pool *p, struct hutch_plugin *pl,
                     const struct hutch_sandbox_class *cls, int size)
{
    struct klass *k;
    if (size > HUTCH_POOL_MAX_SIZE)
        size = HUTCH_POOL_MAX_SIZE;
    pthread_mutex_lock(&p->mu);
    k = find(p, pl, cls);
    if (!k) {
        if (p->nclasses >= HUTCH_POOL_MAX_CLASSES || size <= 0 ||
            strlen(cls->language) >= sizeof(k->language) ||
            !(k = calloc(1, sizeof(*k)))) {
            pthread_mutex_unlock(&p->mu);
            return;
        }
        k->pool = p;
        k->pl = pl;
        k->cls = *cls;
        k->cls.struct_size = sizeof(k->cls);
        snprintf(k->language, sizeof(k->language), "%s", cls->language);
        k->cls.language = k->language;
        if (cls->options && !(k->options = strdup(cls->options))) {
            free(k);
            pthread_mutex_unlock(&p->mu);
            return;
        }
        k->cls.options = k->options;
        k->on_demand = !p->in_round;
        k->last_take_ms = hutch_now_ms();
        k->next = p->classes;
        p->classes = k;
        p->nclasses++;
        hutch_debug("pool: keeping %d %s %s sandbox(es) warm (%llu MB, %u pids)%s",
                    size, pl->name, k->language,
                    (unsigned long long)(cls->memory_bytes >> 20), cls->pids_max,
                    k->on_demand ? " on demand" : "");
    }
    if (p->in_round) {
        k->wanted = 1;
        k->on_demand = 0;
    }
    k->size = size;
    if (k->size + k->grown > ceiling(k))
        k->grown = ceiling(k) > k->size ? ceiling(k) - k->size : 0;
    atomic_store(&k->draining, size == 0);
    pthread_cond_broadcast(&p->cv);
    more_hands(p);
    pthread_mutex_unlock(&p->mu);
}

/* Under mu: `who`'s slot in the shares, claimed when it has none (a free
 * slot, else the one that took least recently with no job under way);
 * NULL for `who` NULL or too long, or when every slot has jobs under way. */
static struct share *share_of(struct hutch_pool *p, const char *who)
{
    struct share *free_slot = NULL;

    if (!who || !who[0] || strlen(who) >= sizeof(p->shares[0].who))
        return NULL;
    for (int i = 0; i < HUTCH_POOL_SHARE_SLOTS; i++) {
        struct share *s = &p->shares[i];
        if (!strcmp(s->who, who))
            return s;
        if (s->held == 0 &&
            (!free_slot || !s->who[0] ||
             (free_slot->who[0] && s->last_take_ms < free_slot->last_take_ms)))
            free_slot = s;
    }
    if (free_slot) {
        snprintf(free_slot->who, sizeof(free_slot->who), "%s", who);
        free_slot->held = 0;
        free_slot->last_take_ms = 0;
    }
    return free_slot;
}

/* Under mu: how many idle boxes of a class `me` leaves to the others (see
 * the top of the file). */
static int share_reserve(const struct hutch_pool *p, const struct share *me,
                         uint64_t now)
{
    int n = 0;

    if (!me)
        return 0;
    for (int i = 0; i < HUTCH_POOL_SHARE_SLOTS; i++) {
        const struct share *s = &p->shares[i];
        if (s != me && s->who[0] && s->held < me->held &&
            now - s->last_take_ms < p->share_ms)
            n++;
    }
    return n;
}

struct hutch_box *hutch_pool_take(struct hutch_pool *p, struct hutch_plugin *pl,
                                  const struct hutch_sandbox_class *cls,
                                  const char *who)
{
    struct doomed d = {.n = 0};
    struct hutch_box *b = NULL;
    struct share *me;
    struct klass *k;

    pthread_mutex_lock(&p->mu);
    p->busy++;
    me = share_of(p, who);
    k = find(p, pl, cls);
    if (k) {
        int reserve;
        k->last_take_ms = hutch_now_ms();
        reserve = share_reserve(p, me, k->last_take_ms);
        while (!b && k->nidle > reserve) {
            struct hutch_box *c = k->idle[0];
            memmove(&k->idle[0], &k->idle[1], (size_t)(k->nidle - 1) * sizeof(c));
            k->nidle--;
            if (hutch_box_idle_ok(c)) {
                b = c;
            } else {
                k->recycled++;
                doom(&d, c);
            }
        }
        if (b) {
            k->hits++;
        } else {
            k->misses++;
            if (reserve > 0 && k->nidle > 0)
                hutch_debug("pool: %s starts a %s %s sandbox cold, leaving %d idle to "
                            "%d principal(s) with fewer executions under way",
                            who, k->pl->name, k->language, k->nidle, reserve);
            /* Demand outran the refills: keep one more warm. */
            k->last_dry_ms = k->last_take_ms;
            if (k->size > 0 && !k->failing && target(k) < ceiling(k)) {
                k->grown++;
                hutch_debug("pool: %s %s ran dry, keeps %d warm", k->pl->name,
                            k->language, target(k));
            }
        }
        pthread_cond_broadcast(&p->cv); /* refill what was taken */
        more_hands(p);
    }
    if (me) {
        me->held++;
        me->last_take_ms = hutch_now_ms();
    }
    pthread_mutex_unlock(&p->mu);
    destroy_doomed(&d);
    return b;
}

void hutch_pool_discard(struct hutch_pool *p, struct hutch_box *b, const char *who)
{
    pthread_mutex_lock(&p->mu);
    if (p->busy > 0)
        p->busy--;
    if (who && who[0]) {
        for (int i = 0; i < HUTCH_POOL_SHARE_SLOTS; i++)
            if (p->shares[i].held > 0 && !strcmp(p->shares[i].who, who)) {
                p->shares[i].held--;
                break;
            }
    }
    if (b) {
        b->next = p->spent;
        p->spent = b;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int hutch_pool_snapshot(struct hutch_pool *p, struct hutch_pool_status **rows,
                        size_t *n)
{
    struct hutch_pool_status *a;
    size_t i = 0;

    *rows = NULL;
    *n = 0;
    pthread_mutex_lock(&p->mu);
    for (struct klass *k = p->classes; k; k = k->next)
        i++;
    a = calloc(i ? i : 1, sizeof(*a));
    if (!a) {
        pthread_mutex_unlock(&p->mu);
        return -ENOMEM;
    }
    i = 0;
    for (struct klass *k = p->classes; k; k = k->next) {
        struct hutch_pool_status *o = &a[i++];
        snprintf(o->executor, sizeof(o->executor), "%s", k->pl->name);
        snprintf(o->language, sizeof(o->language), "%s", k->language);
        o->memory_mb = k->cls.memory_bytes >> 20;
        o->pids = k->cls.pids_max;
        o->size = k->size;
        o->target = target(k);
        o->idle = k->nidle;
        o->starting = k->starting;
        o->hits = k->hits;
        o->misses = k->misses;
        o->failures = k->failures;
        o->recycled = k->recycled;
        o->on_demand = k->on_demand;
        o->failing = k->failing;
        if (k->failing)
            snprintf(o->last_error, sizeof(o->last_error), "%s", k->last_error);
    }
    pthread_mutex_unlock(&p->mu);
    *rows = a;
    *n = i;
    return 0;
}
