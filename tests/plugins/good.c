/* good.c — a well-formed test executor named "good", with a sweep() that
 * says where it was called ($HUTCH_TEST_SWEEP_LOG, a line each). */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void t_sweep(const struct hutch_host *h, const char *state_parent)
{
    const char *log = getenv("HUTCH_TEST_SWEEP_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    (void)h;
    if (f) {
        fprintf(f, "%s\n", state_parent);
        fclose(f);
    }
}

static const struct hutch_executor good_executor = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "good",
    .summary = "test plugin",
    .version = "0.0-test",
    .probe = t_probe,
    .open = t_open,
    .start = t_start,
    .assign = t_assign,
    .put_archive = t_put,
    .reap = t_reap,
    .get_archive = t_get,
    .kill = t_kill,
    .destroy = t_destroy,
    .close = t_close,
    .sweep = t_sweep,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &good_executor;
}
