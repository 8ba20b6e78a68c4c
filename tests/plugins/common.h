/* common.h — a do-nothing executor for the loader tests; each test plugin
 * breaks it in its own way. */
#include <errno.h>
#include <string.h>

#include "hutch-executor.h"

static int t_probe(const struct hutch_host *h, struct hutch_err *e)
{
    return 0;
}
static int t_open(const struct hutch_host *h, const struct hutch_config *c, void **s,
                  struct hutch_err *e)
{
    *s = NULL;
    return 0;
}
static int t_start(void *s, const struct hutch_sandbox_class *c,
                   const struct hutch_start *how, struct hutch_sandbox **sb,
                   struct hutch_err *e)
{
    return hutch_err_set(e, -ENOSYS, "test plugin cannot start sandboxes");
}
static int t_assign(void *s, struct hutch_sandbox *sb, const struct hutch_job *j,
                    struct hutch_err *e)
{
    return -ENOSYS;
}
static int t_put(void *s, struct hutch_sandbox *sb, const void *t, size_t l,
                 struct hutch_err *e)
{
    return -ENOSYS;
}
static int t_reap(void *s, struct hutch_sandbox *sb, struct hutch_exit *x,
                  struct hutch_err *e)
{
    return -ENOSYS;
}
static int t_get(void *s, struct hutch_sandbox *sb, hutch_write_fn w, void *a,
                 uint64_t m, struct hutch_err *e)
{
    return -ENOSYS;
}
static void t_kill(void *s, struct hutch_sandbox *sb)
{
}
static void t_destroy(void *s, struct hutch_sandbox *sb)
{
}
static void t_close(void *s)
{
}

#define TEST_EXECUTOR(NAME, ABI, PROBE)                                                \
    static const struct hutch_executor test_executor = {                               \
        .abi = (ABI),                                                                  \
        .struct_size = sizeof(struct hutch_executor),                                  \
        .name = (NAME),                                                                \
        .summary = "test plugin",                                                      \
        .version = "0.0-test",                                                         \
        .probe = (PROBE),                                                              \
        .open = t_open,                                                                \
        .start = t_start,                                                              \
        .assign = t_assign,                                                            \
        .put_archive = t_put,                                                          \
        .reap = t_reap,                                                                \
        .get_archive = t_get,                                                          \
        .kill = t_kill,                                                                \
        .destroy = t_destroy,                                                          \
        .close = t_close,                                                              \
    }
