/* good.c — a well-formed test executor named "good", with a sweep() that
 * says where it was called ($HUTCH_TEST_SWEEP_LOG, a line each), and an
 * option of each type and kind for the core's checks of executor_options. */
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

static const struct hutch_option t_options[] = {
    {sizeof(struct hutch_option), HUTCH_OPTION_STRING, "colour", "HUTCH_TEST_COLOUR",
     "A string.", 0},
    {sizeof(struct hutch_option), HUTCH_OPTION_INT, "count", NULL, "An integer.", 0},
    {sizeof(struct hutch_option), HUTCH_OPTION_BOOL, "loud", NULL, "A boolean.", 0},
    {sizeof(struct hutch_option), HUTCH_OPTION_STRING, "home", "HUTCH_TEST_HOME",
     "A setting of the process.", HUTCH_OPTION_ENV_ONLY},
    {sizeof(struct hutch_option), 0, NULL, NULL, NULL, 0},
};

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
    .options = t_options,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &good_executor;
}
