/* test_budget.c — hutch's memory budget per execution (src/budget.c): the
 * charges, and the estimate from text that every parser of untrusted JSON
 * checks first, which must never be below what the parse then holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "tap.h"
#include "util.h"

static void test_charges(void)
{
    struct hutch_budget b;
    hutch_budget_init(&b, 1000);
    ok(hutch_budget_take(&b, 600) == 0, "take 600 of 1000");
    ok(hutch_budget_take(&b, 500) == -ENOMEM, "500 more does not fit");
    ok(atomic_load(&b.used) == 600, "a failed take charges nothing");
    ok(hutch_budget_take(&b, 400) == 0, "exactly up to the budget");
    ok(hutch_budget_take(&b, (size_t)-1) == -ENOMEM, "a huge take does not wrap");
    hutch_budget_give(&b, 1000);
    ok(atomic_load(&b.used) == 0 && atomic_load(&b.peak) == 1000,
       "given back; peak 1000");
    ok(hutch_budget_take(NULL, 1u << 30) == 0, "no budget: anything");
}

/* Executions each within their budget cannot together pass hutch's. */
static void test_parent(void)
{
    struct hutch_budget all, a, b;
    char why[200];
    hutch_budget_init(&all, 1000);
    hutch_budget_init(&a, 700);
    hutch_budget_init(&b, 700);
    a.parent = b.parent = &all;
    ok(hutch_budget_take(&a, 600) == 0, "a takes 600 (all: 600 of 1000)");
    ok(hutch_budget_take(&b, 500) == -ENOSPC, "b's 500 fits its own, not hutch's");
    ok(atomic_load(&b.used) == 0 && atomic_load(&all.used) == 600,
       "the failed take charged neither");
    ok(strstr(hutch_budget_why(&b, -ENOSPC, why, sizeof(why)), "all executions") !=
           NULL,
       "the message names hutch's budget for all executions");
    ok(hutch_budget_take(&a, 200) == -ENOMEM, "a's own budget is still its own");
    ok(strstr(hutch_budget_why(&a, -ENOMEM, why, sizeof(why)), "this execution") !=
           NULL,
       "the message names the execution's budget");
    ok(hutch_budget_take(&b, 400) == 0, "b takes 400 (all: 1000 of 1000)");
    hutch_budget_give(&a, 600);
    ok(atomic_load(&all.used) == 400, "giving back gives back to hutch's too");
    ok(hutch_budget_take(&b, 300) == 0, "b takes 300 more once a gave back");
    ok(hutch_budget_process() == hutch_budget_process() &&
           hutch_budget_process()->max >= (1u << 20),
       "one process budget");
}

/* Principals' shares of hutch's budget (the rule in budget.h): alice may
 * use what is idle, never what another principal's modest request needs
 * (issue: while alice's executions held the process budget, bob's 39 MiB
 * failed too_large). */
static void test_shares(void)
{
    struct hutch_budget all, a1, a2, b1, c1;
    struct hutch_budget_share *alice, *bob, *carol;
    char why[600];

    hutch_budget_init(&all, 1000);
    hutch_budget_init(&a1, 1000);
    hutch_budget_init(&a2, 1000);
    hutch_budget_init(&b1, 1000);
    hutch_budget_init(&c1, 1000);
    a1.parent = a2.parent = b1.parent = c1.parent = &all;
    /* Three principals in the policy; alice alone is active. */
    alice = hutch_budget_join("alice", 3);
    a1.share = a2.share = alice;
    ok(hutch_budget_take(&a1, 400) == 0, "alice takes 400 of 1000 (her floor: 500)");
    ok(hutch_budget_take(&a2, 200) == -EDQUOT && atomic_load(&all.used) == 400 &&
           atomic_load(&a2.used) == 0,
       "past her floor, 200 more would leave less than a newcomer's floor: refused, "
       "nothing charged");
    ok(strstr(hutch_budget_why(&a2, -EDQUOT, why, sizeof(why)),
              "principal \"alice\"") != NULL,
       "the message names her share: %s", why);
    ok(hutch_budget_take(&a2, 100) == 0, "up to her floor she takes what she likes");
    bob = hutch_budget_join("bob", 3);
    b1.share = bob;
    ok(hutch_budget_take(&b1, 300) == 0,
       "bob's 300 fits while alice holds all she may (his floor: 333)");
    ok(hutch_budget_share_used(alice) == 500 && hutch_budget_share_used(bob) == 300,
       "each share counts its own (alice 500, bob 300)");
    ok(hutch_budget_take(&a1, 10) == -EDQUOT,
       "alice, past the floor of three, may not take what carol would be owed");
    hutch_budget_give(&a1, 400);
    hutch_budget_give(&a2, 100);
    hutch_budget_give(&b1, 300);
    hutch_budget_leave(bob);
    ok(atomic_load(&all.used) == 0, "all given back");

    /* Alone in a policy of one: everything. */
    hutch_budget_leave(alice);
    alice = hutch_budget_join("alice", 1);
    a1.share = a2.share = alice;
    ok(hutch_budget_take(&a1, 1000) == 0,
       "the only principal the policy lists may use the whole budget");
    hutch_budget_give(&a1, 1000);
    hutch_budget_leave(alice);

    /* Idle capacity is lent, not the others' floors: alice borrows, carol
     * arrives and still gets her floor. */
    alice = hutch_budget_join("alice", 3);
    carol = hutch_budget_join("carol", 3);
    c1.share = carol;
    a1.share = a2.share = alice;
    ok(hutch_budget_take(&a1, 333) == 0 && hutch_budget_take(&a2, 1) == 0 &&
           hutch_budget_take(&a2, 1) == -EDQUOT,
       "with carol active, alice borrows only until what stays free covers carol's "
       "floor and a newcomer's");
    ok(hutch_budget_take(&c1, 333) == 0, "carol gets her floor");
    hutch_budget_give(&a1, 333);
    hutch_budget_give(&a2, 1);
    hutch_budget_give(&c1, 333);
    hutch_budget_leave(alice);
    hutch_budget_leave(carol);
    ok(atomic_load(&all.used) == 0, "all given back, every share left");
}

/* The text estimate is an upper bound of the tree's cost, for shapes that
 * make cJSON hold the most per byte. */
static void test_estimate(void)
{
    const char *samples[] = {
        "{}",
        "[]",
        "0",
        "\"\"",
        "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]",
        "[[],[],[],[],[],[],[],[],[],[],[],[]]",
        "[{},{},{},{},{},{},{},{},{},{},{},{}]",
        "{\"a\":1,\"b\":[1,2,{\"c\":\"d\"}],\"e\":\"f\\\"g,[{\"}",
        "[\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\"]",
        "{\"\":{\"\":{\"\":{\"\":[null,true,false,1e308,-0.5]}}}}",
        "  [ 1 , 2 , [ 3 , [ 4 ] ] ]  ",
    };
    int good = 1;
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        cJSON *j = cJSON_Parse(samples[i]);
        size_t est = hutch_json_text_cost(samples[i], strlen(samples[i]));
        size_t got = hutch_json_cost(j);
        if (!j || est < got) {
            printf("# %s: estimate %zu < held %zu\n", samples[i], est, got);
            good = 0;
        }
        cJSON_Delete(j);
    }
    ok(good, "the estimate from text is never below the tree's cost");
}

static void test_check(void)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    size_t n = 4000000, len = 2 * n + 1;
    char *text = malloc(len + 1);
    text[0] = '[';
    for (size_t i = 0; i < n; i++) {
        text[1 + 2 * i] = '0';
        text[2 + 2 * i] = i + 1 < n ? ',' : ']';
    }
    text[len] = '\0';
    ok(hutch_json_check_text(text, len, 64u << 20, "a message", &err) == -E2BIG &&
           strstr(err.msg, "a message of 8000001 bytes") &&
           strstr(err.msg, "at most 64 MiB"),
       "4M zeros (8 MB) are refused before parsing: %s", err.msg);
    ok(hutch_json_check_text("{\"a\":\"b\"}", 9, 64u << 20, "a message", &err) == 0,
       "a small message passes");
    free(text);
}

/* The heap trimmer is asked once per quiet spell, not woken per give: a
 * tool call gives several times, and a wake-up each cost more than the
 * call's own work (bench-mcp).  It still trims once the process holds
 * nothing for HUTCH_MALLOC_TRIM_DELAY_MS. */
static void test_trimmer(void)
{
    struct hutch_budget b;
    unsigned long w0, t0, w, t;
    uint64_t until;

    hutch_budget_init(&b, 1u << 20);
    b.parent = hutch_budget_process();
    hutch_budget_trim_stats(&w0, &t0);
    for (int i = 0; i < 1000; i++) {
        hutch_budget_take(&b, 100);
        hutch_budget_give(&b, 100);
    }
    hutch_budget_trim_stats(&w, &t);
    /* Once, and once more only after each trim the loop itself waited for
     * (a machine busy enough to stall it for the delay). */
    ok(w - w0 >= 1 && w - w0 <= 1 + (t - t0),
       "1000 gives that empty the budget woke the trimmer %lu times (%lu trims "
       "between)",
       w - w0, t - t0);
    until = hutch_now_ms() + 30000;
    do {
        hutch_budget_trim_stats(&w, &t);
        if (t > t0)
            break;
        usleep(20000);
    } while (hutch_now_ms() < until);
    ok(t > t0, "and it trimmed once they stopped (%lu trims)", t - t0);
}

int main(void)
{
    test_charges();
    test_parent();
    test_shares();
    test_estimate();
    test_check();
    test_trimmer();
    return tap_done();
}
