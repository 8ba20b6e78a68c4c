/* test_pool.c — the pool's refill threads (src/pool.c) over an executor of
 * this test's own whose start() waits at a gate the test opens: how many
 * sandboxes start at once is then counted, not timed.
 *   - a pool that misses four sandboxes starts four at once under
 *     HUTCH_POOL_REFILL_MAX=4 (two refill threads alone never could), and
 *     the extra threads end once idle (HUTCH_POOL_REFILL_LINGER_MS);
 *   - HUTCH_POOL_REFILL_MAX=1: one at a time;
 *   - the default is the CPUs, within its bounds; a bad value is refused
 *     with its name and range.
 * The sandboxes are socket pairs whose runner end says "ready" at once.
 * Budgets are generous: nothing here depends on the machine's speed. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caps.h"
#include "exec.h"
#include "plugin.h"
#include "pool.h"
#include "tap.h"
#include "util.h"

#define BUDGET_MS 60000 /* any one wait; never a timing assertion */

struct fake_sb {
    struct hutch_sandbox pub;
    int peer[4]; /* the runner's ends: chan, stdout, stderr, event */
};

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int inflight, peak, open_gate;

static int f_start(void *state, const struct hutch_sandbox_class *cls,
                   const struct hutch_start *how, struct hutch_sandbox **out,
                   struct hutch_err *err)
{
    static const char ready[] =
        "{\"t\":\"ready\",\"lang\":\"python\",\"version\":\"t\"}\n";
    struct fake_sb *sb;
    int *pub[4], sv[2];
    (void)state;
    (void)cls;
    (void)how;

    pthread_mutex_lock(&gate_mu);
    inflight++;
    if (inflight > peak)
        peak = inflight;
    pthread_cond_broadcast(&gate_cv);
    {
        uint64_t end = hutch_now_ms() + BUDGET_MS;
        while (!open_gate && hutch_now_ms() < end) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&gate_cv, &gate_mu, &ts);
        }
    }
    inflight--;
    pthread_mutex_unlock(&gate_mu);

    sb = calloc(1, sizeof(*sb));
    if (!sb)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    sb->pub.struct_size = sizeof(sb->pub);
    pub[0] = &sb->pub.chan_fd;
    pub[1] = &sb->pub.stdout_fd;
    pub[2] = &sb->pub.stderr_fd;
    pub[3] = &sb->pub.event_fd;
    for (int i = 0; i < 4; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
            return hutch_err_set(err, -errno, "socketpair: %s", strerror(errno));
        *pub[i] = sv[0];
        sb->peer[i] = sv[1];
    }
    if (write(sb->peer[0], ready, sizeof(ready) - 1) != (ssize_t)sizeof(ready) - 1)
        return hutch_err_set(err, -EIO, "writing ready");
    *out = &sb->pub;
    return 0;
}

static void f_destroy(void *state, struct hutch_sandbox *pub)
{
    struct fake_sb *sb = (struct fake_sb *)pub;
    (void)state;
    close(pub->chan_fd);
    close(pub->stdout_fd);
    close(pub->stderr_fd);
    close(pub->event_fd);
    for (int i = 0; i < 4; i++)
        close(sb->peer[i]);
    free(sb);
}

static const struct hutch_executor fake_ex = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "fake",
    .start = f_start,
    .destroy = f_destroy,
};

static struct hutch_plugin fake = {
    .name = "fake", .ex = &fake_ex, .usable = 1, .opened = 1};

static const struct hutch_sandbox_class cls = {
    .struct_size = sizeof(struct hutch_sandbox_class),
    .language = "python",
    .memory_bytes = 64u << 20,
    .pids_max = 16,
};

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int idle_of(struct hutch_pool *p)
{
    struct hutch_pool_status *rows;
    size_t n;
    int idle = -1;
    if (hutch_pool_snapshot(p, &rows, &n) == 0) {
        idle = n ? rows[0].idle : 0;
        free(rows);
    }
    return idle;
}

static int until_idle(struct hutch_pool *p, int want)
{
    uint64_t end = hutch_now_ms() + BUDGET_MS;
    while (idle_of(p) != want && hutch_now_ms() < end)
        hutch_sleep_ms(20);
    return idle_of(p) == want;
}

/* Waits until `want` starts are at the gate at once (or the budget ends). */
static int until_inflight(int want)
{
    uint64_t end = hutch_now_ms() + BUDGET_MS;
    int got;
    pthread_mutex_lock(&gate_mu);
    while (inflight < want && hutch_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&gate_cv, &gate_mu, &ts);
    }
    got = inflight;
    pthread_mutex_unlock(&gate_mu);
    return got;
}

static void gate(int open)
{
    pthread_mutex_lock(&gate_mu);
    open_gate = open;
    if (!open)
        peak = 0;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void parallel(void)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_pool *p = NULL;
    int base = threads_now(), got, n;

    setenv("HUTCH_POOL_REFILL_MAX", "4", 1);
    gate(0);
    ok(hutch_pool_new(&p, &err) == 0, "a pool with HUTCH_POOL_REFILL_MAX=4 (%s)",
       err.msg);
    if (!p)
        return;
    ok(threads_now() == base + HUTCH_POOL_REFILL_THREADS,
       "it runs %d refill threads while nothing is missing (%d)",
       HUTCH_POOL_REFILL_THREADS, threads_now() - base);
    hutch_pool_want(p, &fake, &cls, 4);
    got = until_inflight(4);
    ok(got == 4, "four sandboxes missing: four start at once (%d at the gate)", got);
    gate(1);
    ok(until_idle(p, 4), "all four come up (%d idle)", idle_of(p));
    {
        uint64_t end = hutch_now_ms() + BUDGET_MS + HUTCH_POOL_REFILL_LINGER_MS;
        while ((n = threads_now()) > base + HUTCH_POOL_REFILL_THREADS &&
               hutch_now_ms() < end)
            hutch_sleep_ms(100);
    }
    ok(n == base + HUTCH_POOL_REFILL_THREADS,
       "the extra refill threads end once idle (%d above the base, want %d)", n - base,
       HUTCH_POOL_REFILL_THREADS);
    /* Taken, so missing again: the extra threads come back. */
    gate(0);
    for (int i = 0; i < 4; i++) {
        struct hutch_box *b = hutch_pool_take(p, &fake, &cls, NULL);
        ok(b != NULL, "take %d is warm", i + 1);
        hutch_pool_discard(p, b, NULL);
    }
    got = until_inflight(4);
    ok(got >= 4, "taken again: four start at once again (%d)", got);
    gate(1);
    ok(until_idle(p, 4), "the pool is full again (%d idle)", idle_of(p));

    /* Taken one at a time, each start held at the gate before the next
     * take: once both base threads are inside a start, the third take
     * finds no thread waiting.  It must get one of its own (it waited for
     * a start to end: under CI's load this gave 1 to 3 starts at once).
     * First the extra threads of the takes above end. */
    {
        uint64_t end = hutch_now_ms() + BUDGET_MS + HUTCH_POOL_REFILL_LINGER_MS;
        while ((n = threads_now()) > base + HUTCH_POOL_REFILL_THREADS &&
               hutch_now_ms() < end)
            hutch_sleep_ms(100);
    }
    ok(n == base + HUTCH_POOL_REFILL_THREADS,
       "the extra threads ended again (%d above)", n - base);
    gate(0);
    for (int i = 0; i < 4; i++) {
        struct hutch_box *b = hutch_pool_take(p, &fake, &cls, NULL);
        hutch_pool_discard(p, b, NULL);
        got = until_inflight(i + 1);
        ok(got == i + 1, "taken one by one: take %d has its start (%d at the gate)",
           i + 1, got);
    }
    gate(1);
    ok(until_idle(p, 4), "the pool is full again (%d idle)", idle_of(p));
    hutch_pool_free(p);
    ok(threads_now() == base, "freed: no refill thread left (%d)",
       threads_now() - base);
}

static void one_at_a_time(void)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_pool *p = NULL;

    setenv("HUTCH_POOL_REFILL_MAX", "1", 1);
    gate(0);
    gate(1); /* starts pass at once; the peak is what is counted */
    ok(hutch_pool_new(&p, &err) == 0, "a pool with HUTCH_POOL_REFILL_MAX=1 (%s)",
       err.msg);
    if (!p)
        return;
    hutch_pool_want(p, &fake, &cls, 3);
    ok(until_idle(p, 3), "three come up (%d idle)", idle_of(p));
    pthread_mutex_lock(&gate_mu);
    ok(peak == 1, "never more than one at once (peak %d)", peak);
    pthread_mutex_unlock(&gate_mu);
    hutch_pool_free(p);
}

static void knob(void)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_pool *p = NULL;
    static const char *const bad[] = {"0", "17", "two", "-1"};
    int d = hutch_pool_default_refill_max();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    ok(d >= HUTCH_POOL_REFILL_THREADS && d <= HUTCH_POOL_REFILL_MAX_THREADS &&
           (d == HUTCH_POOL_REFILL_THREADS || d == HUTCH_POOL_REFILL_MAX_THREADS ||
            d <= cpus),
       "the default is the CPUs within [%d, %d] (%d, %ld online)",
       HUTCH_POOL_REFILL_THREADS, HUTCH_POOL_REFILL_MAX_THREADS, d, cpus);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = (struct hutch_err)HUTCH_ERR_INIT;
        setenv("HUTCH_POOL_REFILL_MAX", bad[i], 1);
        p = NULL;
        ok(hutch_pool_new(&p, &err) == -EINVAL && !p &&
               strstr(err.msg, "HUTCH_POOL_REFILL_MAX") &&
               strstr(err.msg, "from 1 to 16"),
           "HUTCH_POOL_REFILL_MAX=%s is refused (%s)", bad[i], err.msg);
        hutch_pool_free(p);
    }
    unsetenv("HUTCH_POOL_REFILL_MAX");
}

int main(void)
{
    parallel();
    one_at_a_time();
    knob();
    return tap_done();
}
