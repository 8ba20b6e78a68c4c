/* budget.c — what one execution may make hutch hold (see budget.h). */
#include <errno.h>
#include <string.h>

#include "budget.h"

/* What one cJSON value and one malloc'd string cost, with glibc malloc's
 * chunk overhead (16 bytes, 16-byte granularity). */
#define NODE_COST   (sizeof(cJSON) + 16)
#define STRING_COST 32

void hutch_budget_init(struct hutch_budget *b, size_t max)
{
    b->max = max;
    atomic_init(&b->used, 0);
    atomic_init(&b->peak, 0);
}

int hutch_budget_take(struct hutch_budget *b, size_t n)
{
    size_t used, peak;
    if (!b)
        return 0;
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

void hutch_budget_give(struct hutch_budget *b, size_t n)
{
    if (b && n)
        atomic_fetch_sub(&b->used, n);
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
