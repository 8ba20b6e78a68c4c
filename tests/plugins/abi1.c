/* abi1.c — a plugin built against ABI 1, which this core no longer loads.
 * Its struct is laid out as ABI 1's was (no version, no assign); the loader
 * must read nothing but `abi` before refusing it. */
#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

struct abi1_executor {
    uint32_t abi;
    uint32_t struct_size;
    const char *name;
    const char *summary;
    uint64_t caps;
    void *ops[11]; /* probe … close, doctor */
};

static const struct abi1_executor abi1_executor = {
    .abi = 1,
    .struct_size = sizeof(struct abi1_executor),
    .name = "abi1",
    .summary = "built against ABI 1",
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return (const struct hutch_executor *)(const void *)&abi1_executor;
}
