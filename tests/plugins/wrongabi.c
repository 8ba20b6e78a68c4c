/* wrongabi.c — claims an ABI version this core does not speak. */
#include "common.h"

TEST_EXECUTOR("wrongabi", HUTCH_EXECUTOR_ABI + 41, t_probe);

const struct hutch_executor *hutch_executor_entry(void)
{
    return &test_executor;
}
