/* janitor.c — the process that sweeps after a hutch that died (see
 * janitor.h).
 *
 * What lives here: spawning the janitor and saying goodbye to it (hutch's
 * side), and the janitor's main.  What does not: what a sweep removes,
 * which is each executor's sweep() (plugin.c calls them).
 *
 * hutch's side runs once, from hutch_jobs_new (start) and hutch_jobs_free
 * (release), on the main thread; the state is two ints. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "janitor.h"
#include "log.h"
#include "plugin.h"
/* Process identity is one helper, shared with the plugins' sweeps. */
#include "../plugins/common/proc.h"

extern char **environ;

static pid_t janitor_pid = -1;
static int janitor_fd = -1; /* the pipe's write end */

int hutch_janitor_start(const char *plugin_dir, struct hutch_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    char pid_s[24], start_s[32], *dir = (char *)plugin_dir;
    char *argv[] = {"hutch", HUTCH_JANITOR_VERB, pid_s, start_s, dir, NULL};
    int pfd[2], r;

    if (janitor_fd >= 0)
        return 0;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return hutch_err_set(err, -errno, "janitor: pipe: %s", strerror(errno));
    snprintf(pid_s, sizeof(pid_s), "%d", (int)getpid());
    snprintf(start_s, sizeof(start_s), "%llu", box_proc_start(getpid()));
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    /* Its stdin is the pipe; nothing else of hutch's (the MCP client's
     * pipes on stdout, a client that waits for stderr to close). */
    posix_spawn_file_actions_adddup2(&fa, pfd[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    /* Its own session: a signal to hutch's process group (a terminal's
     * ^C, a client killing the group) does not end it too. */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    r = posix_spawn(&janitor_pid, "/proc/self/exe", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(pfd[0]);
    if (r != 0) {
        close(pfd[1]);
        janitor_pid = -1;
        return hutch_err_set(err, -r, "janitor: cannot start it: %s", strerror(r));
    }
    janitor_fd = pfd[1];
    return 0;
}

void hutch_janitor_release(void)
{
    int status;

    if (janitor_fd < 0)
        return;
    if (write(janitor_fd, "q", 1) != 1)
        hutch_debug("janitor: saying goodbye: %s", strerror(errno));
    close(janitor_fd);
    janitor_fd = -1;
    while (waitpid(janitor_pid, &status, 0) < 0 && errno == EINTR)
        ;
    janitor_pid = -1;
}

static void sweep_all(const char *plugin_dir)
{
    struct hutch_plugins *ps = NULL;
    struct hutch_host host;
    struct hutch_err err = HUTCH_ERR_INIT;

    hutch_host_init(&host, hutch_runner_dir());
    if (hutch_plugins_load(plugin_dir, &host, &ps, &err) < 0)
        return;
    hutch_plugins_sweep(ps, &host, 1);
    hutch_plugins_free(ps);
}

int hutch_janitor_main(int argc, char **argv)
{
    unsigned long long start;
    char c;
    ssize_t n;
    pid_t pid;
    int waited = 0;

    if (argc != 5 || sscanf(argv[2], "%d", &pid) != 1 ||
        sscanf(argv[3], "%llu", &start) != 1 || pid <= 0) {
        fprintf(stderr, "usage: hutch %s PID START PLUGIN_DIR (hutch starts it)\n",
                HUTCH_JANITOR_VERB);
        return 2;
    }
    /* A stop that signals every process of hutch's (a service manager
     * ending its cgroup, `pkill hutch`) must not end the janitor before
     * hutch says goodbye or, killed, cannot: it ends by itself. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    while ((n = read(0, &c, 1)) < 0 && errno == EINTR)
        ;
    if (n == 1)
        return 0; /* a clean end: hutch removed everything itself */
    /* hutch is gone, or going: the sweeps judge by its process (the start
     * time), which a zombie still has until its parent reaps it. */
    while (!box_process_gone(pid, start) && waited < HUTCH_JANITOR_REAP_MS) {
        hutch_sleep_ms(100);
        waited += 100;
    }
    if (!box_process_gone(pid, start))
        return 1;
    sweep_all(argv[4]);
    hutch_sleep_ms(HUTCH_JANITOR_AGAIN1_MS);
    sweep_all(argv[4]);
    hutch_sleep_ms(HUTCH_JANITOR_AGAIN2_MS - HUTCH_JANITOR_AGAIN1_MS);
    sweep_all(argv[4]);
    return 0;
}
