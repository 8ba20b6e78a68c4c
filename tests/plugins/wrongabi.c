/* wrongabi.c — claims an ABI version this core does not speak (42, one no
 * hutch ever had). */
#include "common.h"

TEST_EXECUTOR("wrongabi", 42, t_probe);

const struct hutch_executor *hutch_executor_entry(void)
{
    return &test_executor;
}
