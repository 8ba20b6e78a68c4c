/* admit.c — executions at once, per principal and in all, and the fair
 * queue for the rest (the rule: admit.h).
 *
 * One mutex over: the principals that run or wait (a list; a principal
 * with nothing running and nothing waiting is freed), each with its FIFO
 * of waiters, and the turn list, the principals that have a waiter in the
 * order they take turns.  A slot is given by the thread that frees one
 * (or by the one that arrives, when a slot is free): it marks the waiter
 * granted and counts it as running before waking it, so a slot is never
 * free and taken by a newcomer in between.  A waiter sleeps on its own
 * condition, at most a tick at a time (cancellation is a flag, not a
 * wake-up). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admit.h"
#include "caps.h"
#include "knobs.h"
#include "util.h"

#define TICK_MS   1000 /* tick() while waiting */
#define CANCEL_MS 100  /* cancellation is looked at this often */

struct waiter {
    struct waiter *next;
    pthread_cond_t cv;
    int granted;
    unsigned running_max; /* its principal's limit, as its policy says */
};

struct prin {
    struct prin *next;      /* a->all */
    struct prin *turn_next; /* a->turns, while it has a waiter */
    char *name;
    unsigned running, nwait;
    struct waiter *head, *tail;
};

struct hutch_admit {
    pthread_mutex_t mu;
    unsigned total;
    const char *from;
    unsigned running, queued;
    struct prin *all;
    struct prin *turns; /* whose turn is next first */
};

unsigned hutch_admit_machine_total(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    unsigned cpus = hutch_cpus(), by_mem = HUTCH_ADMIT_MAX_TOTAL, total;

    if (pages > 0 && page > 0) {
        unsigned long long mem = (unsigned long long)pages * (unsigned long long)page;
        unsigned long long n =
            mem / ((unsigned long long)HUTCH_DEFAULT_MEMORY_MB << 20);
        by_mem = n < HUTCH_ADMIT_MAX_TOTAL ? (unsigned)n : HUTCH_ADMIT_MAX_TOTAL;
    }
    total = cpus * HUTCH_ADMIT_PER_CPU;
    if (total > by_mem)
        total = by_mem;
    if (total > HUTCH_ADMIT_MAX_TOTAL)
        total = HUTCH_ADMIT_MAX_TOTAL;
    return total < 2 ? 2 : total;
}

int hutch_admit_total_from(unsigned *out, const char **from, struct hutch_err *err)
{
    uint64_t v;
    int r = hutch_knob_uint(HUTCH_KNOB_MAX_EXECUTIONS, &v, err);

    if (r < 0)
        return r;
    if (r > 0) {
        *out = (unsigned)v;
        *from = "HUTCH_MAX_EXECUTIONS";
        return 0;
    }
    *out = hutch_admit_machine_total();
    *from = "sized from this machine's CPUs and memory; HUTCH_MAX_EXECUTIONS sets it";
    return 0;
}

struct hutch_admit *hutch_admit_new(unsigned total, const char *from)
{
    struct hutch_admit *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    a->total = total ? total : 1;
    a->from = from ? from : "";
    return a;
}

void hutch_admit_free(struct hutch_admit *a)
{
    if (!a)
        return;
    /* Nothing runs or waits any more (the caller's executions ended). */
    while (a->all) {
        struct prin *p = a->all;
        a->all = p->next;
        free(p->name);
        free(p);
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

unsigned hutch_admit_total(const struct hutch_admit *a)
{
    return a->total;
}

/* --- under a->mu ------------------------------------------------------------ */

static struct prin *prin_find(struct hutch_admit *a, const char *name)
{
    for (struct prin *p = a->all; p; p = p->next)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}

static struct prin *prin_get(struct hutch_admit *a, const char *name)
{
    struct prin *p = prin_find(a, name);
    if (p)
        return p;
    p = calloc(1, sizeof(*p));
    if (p && !(p->name = strdup(name))) {
        free(p);
        return NULL;
    }
    if (p) {
        p->next = a->all;
        a->all = p;
    }
    return p;
}

/* A principal with nothing running and nothing waiting is forgotten. */
static void prin_prune(struct hutch_admit *a, struct prin *p)
{
    if (p->running || p->nwait)
        return;
    for (struct prin **pp = &a->all; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            free(p->name);
            free(p);
            return;
        }
}

static void turns_remove(struct hutch_admit *a, struct prin *p)
{
    for (struct prin **pp = &a->turns; *pp; pp = &(*pp)->turn_next)
        if (*pp == p) {
            *pp = p->turn_next;
            p->turn_next = NULL;
            return;
        }
}

static void turns_append(struct hutch_admit *a, struct prin *p)
{
    struct prin **pp = &a->turns;
    while (*pp)
        pp = &(*pp)->turn_next;
    *pp = p;
    p->turn_next = NULL;
}

/* Free slots to waiters, principals taking turns. */
static void dispatch(struct hutch_admit *a)
{
    while (a->running < a->total) {
        struct prin *p = a->turns;
        struct waiter *w;
        while (p && p->running >= p->head->running_max)
            p = p->turn_next; /* at its own limit: passed over */
        if (!p)
            return;
        turns_remove(a, p);
        w = p->head;
        p->head = w->next;
        if (!p->head)
            p->tail = NULL;
        p->nwait--;
        a->queued--;
        p->running++;
        a->running++;
        w->granted = 1;
        pthread_cond_signal(&w->cv);
        if (p->head)
            turns_append(a, p); /* its next waiter: after the others' turns */
    }
}

/* A waiter that gives up leaves its queue. */
static void waiter_remove(struct hutch_admit *a, struct prin *p, struct waiter *w)
{
    for (struct waiter **pp = &p->head; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    p->tail = NULL;
    for (struct waiter *x = p->head; x; x = x->next)
        p->tail = x;
    p->nwait--;
    a->queued--;
    if (!p->head)
        turns_remove(a, p);
    dispatch(a); /* it may have stood before one that can run */
}

/* --- entering, leaving ------------------------------------------------------ */

int hutch_admit_enter(struct hutch_admit *a, const struct hutch_admit_req *req,
                      struct hutch_admit_slot **slot, struct hutch_err *err)
{
    const char *name = req->principal ? req->principal : "";
    unsigned running_max = req->running ? req->running
                           : req->has_principals
                               ? a->total / HUTCH_ADMIT_PRINCIPAL_SHARE
                               : a->total;
    unsigned queued_max = req->queued_set ? req->queued : HUTCH_ADMIT_DEFAULT_QUEUED;
    const char *rfrom = req->running ? "the policy's concurrency.executions"
                        : req->has_principals
                            ? "a quarter of hutch's total; the "
                              "policy's concurrency.executions sets it"
                            : "hutch's total";
    uint64_t t0 = hutch_now_ms(), deadline = t0 + HUTCH_ADMIT_WAIT_MS,
             next_tick = t0 + TICK_MS;
    struct waiter w = {.running_max = running_max ? running_max : 1};
    struct prin *p;
    int r = 0;

    *slot = NULL;
    pthread_mutex_lock(&a->mu);
    if (!(p = prin_get(a, name))) {
        pthread_mutex_unlock(&a->mu);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    if (!p->head && p->running < w.running_max && a->running < a->total) {
        p->running++;
        a->running++;
        pthread_mutex_unlock(&a->mu);
        *slot = (struct hutch_admit_slot *)p; /* the principal's record */
        return 0;
    }
    if (p->nwait >= queued_max) {
        r = hutch_err_set(
            err, -EBUSY,
            "hutch is busy: principal \"%s\" has %u executions running (at most %u "
            "at once: %s) and %u waiting (at most %u: the policy's "
            "concurrency.queued%s); try again when one ends",
            name, p->running, w.running_max, rfrom, p->nwait, queued_max,
            req->queued_set ? "" : " sets it");
        prin_prune(a, p);
        pthread_mutex_unlock(&a->mu);
        return r;
    }
    if (a->queued >= HUTCH_ADMIT_MAX_QUEUED) {
        r = hutch_err_set(
            err, -EBUSY,
            "hutch is busy: it runs %u executions (at most %u at once: %s) and "
            "%u wait, as many as it keeps waiting; try again when one ends",
            a->running, a->total, a->from, a->queued);
        prin_prune(a, p);
        pthread_mutex_unlock(&a->mu);
        return r;
    }
    hutch_cond_init_mono(&w.cv);
    if (p->tail)
        p->tail->next = &w;
    else
        p->head = &w;
    p->tail = &w;
    if (p->nwait++ == 0)
        turns_append(a, p);
    a->queued++;
    dispatch(a);
    while (!w.granted) {
        uint64_t now = hutch_now_ms(), until;
        if (req->cancel && atomic_load(req->cancel)) {
            r = hutch_err_set(err, -ECANCELED, "cancelled while it waited to run");
            break;
        }
        if (now >= deadline) {
            r = hutch_err_set(err, -ETIMEDOUT,
                              "waited %u s to run: principal \"%s\" has %u executions "
                              "running (at most %u at once) and hutch %u (at most %u: "
                              "%s); try again later",
                              HUTCH_ADMIT_WAIT_MS / 1000, name, p->running,
                              w.running_max, a->running, a->total, a->from);
            break;
        }
        if (req->tick && now >= next_tick) {
            pthread_mutex_unlock(&a->mu);
            req->tick(req->tick_arg, now - t0);
            pthread_mutex_lock(&a->mu);
            next_tick = now + TICK_MS;
            continue;
        }
        until = next_tick < deadline ? next_tick : deadline;
        if (req->cancel && until > now + CANCEL_MS)
            until = now + CANCEL_MS;
        hutch_cond_wait_until(&w.cv, &a->mu, until);
    }
    if (!w.granted)
        waiter_remove(a, p, &w);
    else
        r = 0; /* granted as it gave up: the slot is taken, the job sees why */
    if (r < 0)
        prin_prune(a, p);
    pthread_mutex_unlock(&a->mu);
    pthread_cond_destroy(&w.cv);
    if (r == 0)
        *slot = (struct hutch_admit_slot *)p;
    return r;
}

void hutch_admit_leave(struct hutch_admit *a, struct hutch_admit_slot *slot)
{
    struct prin *p = (struct prin *)slot;
    if (!slot)
        return;
    pthread_mutex_lock(&a->mu);
    p->running--;
    a->running--;
    dispatch(a);
    prin_prune(a, p);
    pthread_mutex_unlock(&a->mu);
}

void hutch_admit_counts(struct hutch_admit *a, const char *principal, unsigned *running,
                        unsigned *queued)
{
    pthread_mutex_lock(&a->mu);
    if (principal) {
        struct prin *p = prin_find(a, principal);
        *running = p ? p->running : 0;
        *queued = p ? p->nwait : 0;
    } else {
        *running = a->running;
        *queued = a->queued;
    }
    pthread_mutex_unlock(&a->mu);
}
