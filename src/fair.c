/* fair.c — a principal's running sandboxes weigh one sandbox (see fair.h).
 *
 * groups_mu guards the list of groups and their reference counts; a
 * group's mu guards its seats and orders the calls to their setters.
 * Lock order: a group's mu is never held while taking groups_mu's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fair.h"
#include "hutch-executor.h"

struct fair_group {
    char *name;
    unsigned refs; /* seats, under groups_mu */
    pthread_mutex_t mu;
    struct hutch_fair_seat *seats; /* under mu */
    unsigned n;                    /* under mu */
    struct fair_group *next;
};

struct hutch_fair_seat {
    struct fair_group *g;
    hutch_fair_set_fn set;
    void *arg;
    uint32_t weight; /* the last one set */
    struct hutch_fair_seat *next;
};

static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fair_group *groups;

uint32_t hutch_fair_weight(unsigned n)
{
    uint32_t w = n ? HUTCH_CPU_WEIGHT_DEFAULT / n : HUTCH_CPU_WEIGHT_DEFAULT;
    return w < HUTCH_CPU_WEIGHT_MIN ? HUTCH_CPU_WEIGHT_MIN : w;
}

/* Under g->mu. */
static void reweigh(struct fair_group *g)
{
    uint32_t w = hutch_fair_weight(g->n);
    for (struct hutch_fair_seat *s = g->seats; s; s = s->next)
        if (s->weight != w) {
            s->weight = w;
            s->set(s->arg, w);
        }
}

static struct fair_group *group_get(const char *name)
{
    struct fair_group *g;

    pthread_mutex_lock(&groups_mu);
    for (g = groups; g; g = g->next)
        if (!strcmp(g->name, name))
            break;
    if (!g && (g = calloc(1, sizeof(*g)))) {
        if (!(g->name = strdup(name))) {
            free(g);
            g = NULL;
        } else {
            pthread_mutex_init(&g->mu, NULL);
            g->next = groups;
            groups = g;
        }
    }
    if (g)
        g->refs++;
    pthread_mutex_unlock(&groups_mu);
    return g;
}

static void group_put(struct fair_group *g)
{
    pthread_mutex_lock(&groups_mu);
    if (--g->refs == 0) {
        for (struct fair_group **pp = &groups; *pp; pp = &(*pp)->next)
            if (*pp == g) {
                *pp = g->next;
                break;
            }
        pthread_mutex_destroy(&g->mu);
        free(g->name);
        free(g);
    }
    pthread_mutex_unlock(&groups_mu);
}

struct hutch_fair_seat *hutch_fair_join(const char *principal, hutch_fair_set_fn set,
                                        void *arg)
{
    struct hutch_fair_seat *s = calloc(1, sizeof(*s));
    struct fair_group *g;

    if (!s)
        return NULL;
    if (!(g = group_get(principal ? principal : ""))) {
        free(s);
        return NULL;
    }
    s->g = g;
    s->set = set;
    s->arg = arg;
    s->weight = HUTCH_CPU_WEIGHT_DEFAULT;
    pthread_mutex_lock(&g->mu);
    s->next = g->seats;
    g->seats = s;
    g->n++;
    reweigh(g);
    pthread_mutex_unlock(&g->mu);
    return s;
}

void hutch_fair_leave(struct hutch_fair_seat *s)
{
    struct fair_group *g;

    if (!s)
        return;
    g = s->g;
    pthread_mutex_lock(&g->mu);
    for (struct hutch_fair_seat **pp = &g->seats; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    g->n--;
    reweigh(g);
    pthread_mutex_unlock(&g->mu);
    free(s);
    group_put(g);
}
