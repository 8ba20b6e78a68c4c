/* rate.c — per-principal rate limits (see rate.h for the counting rule).
 *
 * One mutex over a hash table of principals kept in LRU order; each
 * principal holds, per kind, a ring of per-second counters.  The limits
 * themselves are not stored: each call passes the current policy's value,
 * so a reload applies at once to the counts already made.  Who the
 * principal is (bearer token → name) is the policy's business, not this
 * file's. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "rate.h"

#define RATE_SLOTS  64 /* a power of two >= RATE_WINDOW */
#define RATE_WINDOW 61 /* seconds counted: this one and the 60 before */
#define RATE_KINDS  2

struct rate_ring {
    uint64_t last_ms; /* latest time seen: the clock never goes back here */
    uint32_t count[RATE_SLOTS];
    int used;
};

struct rate_entry {
    char *name;
    uint32_t hash;
    struct rate_entry *hnext;       /* hash chain */
    struct rate_entry *prev, *next; /* LRU: head is most recent */
    struct rate_ring ring[RATE_KINDS];
};

struct hutch_rate {
    pthread_mutex_t lock;
    struct rate_entry *bucket[HUTCH_RATE_BUCKETS];
    struct rate_entry *head, *tail;
    size_t n;
};

static int kind_index(const char *kind)
{
    if (!kind)
        return -1;
    if (!strcmp(kind, "execution"))
        return 0;
    if (!strcmp(kind, "tool_call"))
        return 1;
    return -1;
}

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

struct hutch_rate *hutch_rate_new(void)
{
    struct hutch_rate *r = calloc(1, sizeof(*r));
    if (r)
        pthread_mutex_init(&r->lock, NULL);
    return r;
}

void hutch_rate_free(struct hutch_rate *r)
{
    if (!r)
        return;
    for (struct rate_entry *e = r->head, *next; e; e = next) {
        next = e->next;
        free(e->name);
        free(e);
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void lru_unlink(struct hutch_rate *r, struct rate_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        r->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        r->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(struct hutch_rate *r, struct rate_entry *e)
{
    e->next = r->head;
    e->prev = NULL;
    if (r->head)
        r->head->prev = e;
    r->head = e;
    if (!r->tail)
        r->tail = e;
}

static void hash_unlink(struct hutch_rate *r, struct rate_entry *e)
{
    struct rate_entry **pp = &r->bucket[e->hash % HUTCH_RATE_BUCKETS];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    e->hnext = NULL;
}

/* The entry for name, most recent in LRU order; created (evicting the
 * least recently used one when full) if missing.  NULL: out of memory. */
static struct rate_entry *lookup(struct hutch_rate *r, const char *name)
{
    uint32_t h = hash_name(name);
    struct rate_entry *e;
    char *copy;

    for (e = r->bucket[h % HUTCH_RATE_BUCKETS]; e; e = e->hnext) {
        if (e->hash == h && !strcmp(e->name, name)) {
            lru_unlink(r, e);
            lru_push(r, e);
            return e;
        }
    }
    copy = strdup(name);
    if (!copy)
        return NULL;
    if (r->n >= HUTCH_RATE_MAX_PRINCIPALS) {
        e = r->tail; /* reuse the least recently used entry */
        lru_unlink(r, e);
        hash_unlink(r, e);
        free(e->name);
        memset(e, 0, sizeof(*e));
    } else {
        e = calloc(1, sizeof(*e));
        if (!e) {
            free(copy);
            return NULL;
        }
        r->n++;
    }
    e->name = copy;
    e->hash = h;
    e->hnext = r->bucket[h % HUTCH_RATE_BUCKETS];
    r->bucket[h % HUTCH_RATE_BUCKETS] = e;
    lru_push(r, e);
    return e;
}

/* Bring the ring to `now` (clearing the seconds that passed) and return
 * the time to use: never earlier than one already seen. */
static uint64_t advance(struct rate_ring *g, uint64_t now)
{
    uint64_t last_sec, sec;

    if (!g->used) {
        g->used = 1;
        g->last_ms = now;
        return now;
    }
    if (now <= g->last_ms)
        return g->last_ms;
    last_sec = g->last_ms / 1000;
    sec = now / 1000;
    if (sec - last_sec >= RATE_SLOTS)
        memset(g->count, 0, sizeof(g->count));
    else
        for (uint64_t s = last_sec + 1; s <= sec; s++)
            g->count[s % RATE_SLOTS] = 0;
    g->last_ms = now;
    return now;
}

int hutch_rate_take(struct hutch_rate *r, const char *principal, const char *kind,
                    uint32_t per_minute, uint64_t now_ms, uint64_t *retry_after_ms)
{
    int k = kind_index(kind), ret = 0;
    const char *name = principal ? principal : "";
    struct rate_entry *e;
    struct rate_ring *g;
    uint64_t now, sec, first, sum = 0;

    if (retry_after_ms)
        *retry_after_ms = 0;
    if (!r || k < 0 ||
        strnlen(name, HUTCH_MAX_PRINCIPAL_NAME + 1) > HUTCH_MAX_PRINCIPAL_NAME)
        return -EINVAL;
    if (per_minute == 0)
        return 0;

    pthread_mutex_lock(&r->lock);
    e = lookup(r, name);
    if (!e) {
        ret = -ENOMEM;
        goto out;
    }
    g = &e->ring[k];
    now = advance(g, now_ms);
    sec = now / 1000;
    first = sec >= RATE_WINDOW - 1 ? sec - (RATE_WINDOW - 1) : 0;
    for (uint64_t s = first; s <= sec; s++)
        sum += g->count[s % RATE_SLOTS];
    if (sum < per_minute) {
        g->count[sec % RATE_SLOTS]++;
        goto out;
    }
    ret = -EAGAIN;
    if (retry_after_ms) {
        /* The oldest counts leave the window first: second s leaves it at
         * (s + RATE_WINDOW) * 1000; find when enough have left. */
        uint64_t need = sum - per_minute + 1, gone = 0;
        for (uint64_t s = first; s <= sec; s++) {
            gone += g->count[s % RATE_SLOTS];
            if (gone >= need) {
                *retry_after_ms = (s + RATE_WINDOW) * 1000 - now;
                break;
            }
        }
    }
out:
    pthread_mutex_unlock(&r->lock);
    return ret;
}
