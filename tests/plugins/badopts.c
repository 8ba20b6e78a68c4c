/* badopts.c — a test executor whose options table the core cannot take
 * (an option name that is not [a-z0-9_]): listed unusable, with why. */
#include "common.h"

static const struct hutch_option t_options[] = {
    {sizeof(struct hutch_option), HUTCH_OPTION_STRING, "Bad-Name", NULL, "A typo.", 0},
    {sizeof(struct hutch_option), 0, NULL, NULL, NULL, 0},
};

static const struct hutch_executor badopts_executor = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "badopts",
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
    .options = t_options,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &badopts_executor;
}
