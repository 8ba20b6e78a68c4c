/* budget.c — what one execution may make hutch hold (see budget.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "caps.h"

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
}

static struct hutch_budget process;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

static void process_init(void)
{
    size_t max = HUTCH_PROCESS_MEMORY_BUDGET;
    const char *env = getenv("HUTCH_MEMORY_BUDGET_MB");
    char *end;
    unsigned long long mb;
    if (env && *env) {
        errno = 0;
        mb = strtoull(env, &end, 10);
        /* Out of range or not a number: the default (a budget is never
         * switched off by a typo). */
        if (errno == 0 && *end == '\0' && mb >= 1 && mb <= (1ull << 20))
            max = (size_t)(mb << 20);
    }
    hutch_budget_init(&process, max);
}

struct hutch_budget *hutch_budget_process(void)
{
    pthread_once(&process_once, process_init);
    return &process;
}

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
    return 0;
}

int hutch_budget_take(struct hutch_budget *b, size_t n)
{
    if (!b)
        return 0;
    if (take_one(b, n) < 0)
        return -ENOMEM;
    if (b->parent && take_one(b->parent, n) < 0) {
        atomic_fetch_sub(&b->used, n);
        return -ENOSPC;
    }
    return 0;
}

void hutch_budget_give(struct hutch_budget *b, size_t n)
{
    if (!b || !n)
        return;
    atomic_fetch_sub(&b->used, n);
    if (b->parent)
        atomic_fetch_sub(&b->parent->used, n);
}

const char *hutch_budget_why(const struct hutch_budget *b, int rc, char *buf,
                             size_t len)
{
    if (rc == -ENOSPC && b->parent)
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
