/* probefail.c — loads fine, but its probe says it cannot work here. */
#include "common.h"

static int fail_probe(const struct hutch_host *h, struct hutch_err *e)
{
    (void)t_probe;
    return hutch_err_set(e, -ENODEV, "the frobnicator is not installed (test)");
}

TEST_EXECUTOR("probefail", HUTCH_EXECUTOR_ABI, fail_probe);

const struct hutch_executor *hutch_executor_entry(void)
{
    return &test_executor;
}
