/* good.c — a well-formed test executor named "good". */
#include "common.h"

TEST_EXECUTOR("good", HUTCH_EXECUTOR_ABI, t_probe);

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    (void)t_probe;
    return &test_executor;
}
