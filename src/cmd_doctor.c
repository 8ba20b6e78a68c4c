/* cmd_doctor.c — `hutch doctor`: what this machine offers the executors, and
 * how to fix what is missing.  Each check prints one line: ok, warn or FAIL,
 * then the fix (with --json: one JSON document instead).  Exit status 1
 * when a check the default executor needs failed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge.h"
#include "cli.h"
#include "govern.h"
#include "job.h"
#include "plugin.h"
#include "util.h"

extern char **environ;

/* One run of the checks: what failed, counted for the exit status; with
 * --json the lines are collected in `checks` rather than printed. */
struct doctor {
    int failures;
    cJSON *checks;
};

/* One line, or one {"status", "check", "detail", "essential"} object. */
static void emit(struct doctor *d, const char *status, const char *what,
                 const char *detail, bool essential)
{
    cJSON *o;

    if (!d->checks) {
        printf("%-5s %-22s %s\n", status, what, detail);
        return;
    }
    o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "status", status) ||
        !cJSON_AddStringToObject(o, "check", what) ||
        !cJSON_AddStringToObject(o, "detail", detail) ||
        !cJSON_AddBoolToObject(o, "essential", essential)) {
        cJSON_Delete(o);
        d->failures++; /* out of memory: the document would lie */
        return;
    }
    cJSON_AddItemToArray(d->checks, o);
}

static void report(struct doctor *d, const char *status, const char *what,
                   const char *detail)
{
    emit(d, status, what, detail, true);
    if (!strcmp(status, "FAIL"))
        d->failures++;
}

static void check_userns(struct doctor *d)
{
    pid_t pid = fork();
    int status = 0;
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                      CLONE_NEWIPC | CLONE_NEWUTS) < 0
                  ? 1
                  : 0);
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        report(d, "FAIL", "namespaces",
               "cannot create user/pid/mount/net/ipc/uts namespaces: run 'sysctl -w "
               "kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000'");
    else
        report(d, "ok", "namespaces", "user, pid, mount, net, ipc, uts");
}

static void check_seccomp(struct doctor *d)
{
    char buf[256] = "";
    int fd = open("/proc/sys/kernel/seccomp/actions_avail", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        close(fd);
    }
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL)
        report(d, "FAIL", "seccomp",
               "the kernel has no seccomp: build it with CONFIG_SECCOMP_FILTER");
    else
        report(d, "ok", "seccomp", buf[0] ? buf : "filter mode available");
}

static void check_cgroups(struct doctor *d)
{
    struct stat st;
    char detail[512];
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
        snprintf(
            detail, sizeof(detail), "v2 at /sys/fs/cgroup%s",
            access("/sys/fs/cgroup", W_OK) == 0
                ? ", writable: memory and pids limits apply"
                : "; not writable: limits fall back to rlimits (run as root or in a "
                  "delegated cgroup: systemd-run --user -p Delegate=yes)");
        report(d, access("/sys/fs/cgroup", W_OK) == 0 ? "ok" : "warn", "cgroups",
               detail);
    } else if (stat("/sys/fs/cgroup/memory", &st) == 0 &&
               stat("/sys/fs/cgroup/pids", &st) == 0) {
        int w = access("/sys/fs/cgroup/memory", W_OK) == 0 &&
                access("/sys/fs/cgroup/pids", W_OK) == 0;
        snprintf(detail, sizeof(detail), "v1 (memory, pids)%s",
                 w ? ", writable: memory and pids limits apply"
                   : "; not writable: limits fall back to rlimits (run hutch as root)");
        report(d, w ? "ok" : "warn", "cgroups", detail);
    } else {
        report(d, "warn", "cgroups",
               "no memory/pids controllers mounted: limits fall back to rlimits");
    }
}

/* First line of what argv prints, run with an empty environment. */
static int first_line(char *const argv[], char *out, size_t len)
{
    const char *bin = argv[0];
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    int pfd[2], status;
    pid_t pid;
    ssize_t n;

    if (pipe(pfd) < 0)
        return -errno;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    if (posix_spawn(&pid, bin, &fa, NULL, argv, envp) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[0]);
        close(pfd[1]);
        return -ENOENT;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    n = read(pfd[0], out, len - 1);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    close(pfd[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* First line of `bin --version`. */
static int version_of(const char *bin, char *out, size_t len)
{
    char *argv[] = {(char *)bin, "--version", NULL};
    return first_line(argv, out, len);
}

/* The data flavour's Python packages the local executor offers: the host's
 * (it runs /usr/bin/python3 as it is), asked of their metadata without
 * importing them. */
static void check_python_packages(struct doctor *d)
{
    static const char script[] = "import importlib.metadata as m\n"
                                 "o = []\n"
                                 "for p in ('numpy', 'pandas', 'matplotlib'):\n"
                                 "    try:\n"
                                 "        o.append(p + ' ' + m.version(p))\n"
                                 "    except Exception:\n"
                                 "        o.append('no ' + p)\n"
                                 "print(', '.join(o))\n";
    char real[PATH_MAX], out[256], detail[512];
    char *argv[] = {real, "-I", "-c", (char *)script, NULL};

    if (!realpath("/usr/bin/python3", real) || first_line(argv, out, sizeof(out)) < 0) {
        report(d, "warn", "python packages",
               "local: cannot ask /usr/bin/python3 which packages it has");
        return;
    }
    snprintf(detail, sizeof(detail), "local (the host's %s): %s%s", real, out,
             strstr(out, "no ")
                 ? " (the data flavour's packages: apt-get install -y python3-numpy "
                   "python3-pandas python3-matplotlib)"
                 : "");
    report(d, strstr(out, "no ") ? "warn" : "ok", "python packages", detail);
}

static void check_runtime(struct doctor *d, const char *lang, const char *const *cands,
                          const char *pkg)
{
    char real[PATH_MAX], ver[128], detail[PATH_MAX + 256];
    for (; *cands; cands++) {
        if (!realpath(*cands, real) || strncmp(real, "/usr/", 5) != 0)
            continue;
        if (version_of(real, ver, sizeof(ver)) < 0)
            continue;
        snprintf(detail, sizeof(detail), "%s (%s)", real, ver);
        report(d, "ok", lang, detail);
        return;
    }
    snprintf(detail, sizeof(detail),
             "no interpreter under /usr: install it with 'apt-get install -y %s'", pkg);
    report(d, "FAIL", lang, detail);
}

static void check_runners(struct doctor *d)
{
    const char *dir = hutch_runner_dir();
    char p1[PATH_MAX], p2[PATH_MAX], detail[PATH_MAX + 128];
    snprintf(p1, sizeof(p1), "%s/runner.py", dir);
    snprintf(p2, sizeof(p2), "%s/runner.js", dir);
    if (access(p1, R_OK) == 0 && access(p2, R_OK) == 0) {
        report(d, "ok", "runners", dir);
    } else {
        snprintf(detail, sizeof(detail),
                 "runner.py or runner.js missing in %s: reinstall hutch or set "
                 "HUTCH_RUNNER_DIR",
                 dir);
        report(d, "FAIL", "runners", detail);
    }
}

/* What a plugin's doctor says, about one executor: only the default
 * executor is essential, so a FAIL of another is worth saying, not an exit 1. */
struct plugin_report {
    struct doctor *d;
    int essential;
};

static void report_plugin(void *ctx, const char *status, const char *what,
                          const char *detail)
{
    struct plugin_report *pr = ctx;
    emit(pr->d, status, what, detail, pr->essential);
    if (pr->essential && !strcmp(status, "FAIL"))
        pr->d->failures++;
}

static void check_plugins(struct doctor *d, const char *dir)
{
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_err err = {0};
    char detail[HUTCH_ERR_MSG + 128];

    hutch_host_init(&host, hutch_runner_dir());
    if (hutch_plugins_load(hutch_plugin_dir(dir), &host, &ps, &err) < 0) {
        report(d, "FAIL", "plugins", err.msg);
        return;
    }
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *p = &ps->v[i];
        char what[96];
        snprintf(what, sizeof(what), "executor %s", p->name);
        snprintf(detail, sizeof(detail), "%s", p->usable ? p->path : p->reason);
        /* Only the default executor is essential. */
        report(d, p->usable ? "ok" : (strcmp(p->name, "local") == 0 ? "FAIL" : "warn"),
               what, detail);
        if (p->ex && HUTCH_HAS_MEMBER(p->ex, struct hutch_executor, doctor) &&
            p->ex->doctor) {
            struct plugin_report pr = {d, strcmp(p->name, "local") == 0};
            p->ex->doctor(&host, &pr, report_plugin);
        }
    }
    if (!hutch_plugins_find(ps, "local"))
        report(d, "FAIL", "executor local",
               "local.so not found in the plugin directory: reinstall hutch");
    hutch_plugins_free(ps);
}

/* One execution on executor `name` with a pool of one Python sandbox (or
 * none): ms from request to result, -1 when it failed (err says why).
 * *warm says whether the sandbox came from the pool. */
static double timed_run(const char *dir, const char *name, int pool, int *warm,
                        struct hutch_err *err)
{
    struct hutch_jobs_opts jo = {.plugin_dir = dir,
                                 .executor = name,
                                 .executor_from = "hutch doctor",
                                 .pools = pool,
                                 .pool_size = {pool, 0}};
    struct hutch_job_req job = {.principal = "doctor",
                                .language = "python",
                                .code = "print(1)",
                                .skip_files = 1,
                                .stream_fd_out = -1,
                                .stream_fd_err = -1};
    struct hutch_exec_result res;
    struct hutch_jobs *jobs = NULL;
    struct hutch_gov *gov = NULL;
    struct hutch_bridge *bridge = NULL;
    double ms = -1;
    uint64_t t0, until = hutch_now_ms() + 60000;

    hutch_exec_result_init(&res);
    if (hutch_gov_new(NULL, "/dev/null", &gov, err) < 0 ||
        hutch_bridge_new(NULL, &bridge, err) < 0)
        goto out;
    jo.gov = gov;
    jo.bridge = bridge;
    if (hutch_jobs_new(&jo, &jobs, err) < 0)
        goto out;
    /* Wait (generously) for the pool to hold its sandbox. */
    while (pool && hutch_now_ms() < until) {
        struct hutch_pool_status *st = NULL;
        size_t n = 0;
        int idle = 0;
        if (hutch_jobs_pool_status(jobs, &st, &n) < 0) {
            hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            idle += st[i].idle;
        free(st);
        if (idle)
            break;
        usleep(20000);
    }
    t0 = hutch_now_us();
    if (hutch_job_run(jobs, &job, &res, err) == 0 && res.exit_code == 0)
        ms = (double)(hutch_now_us() - t0) / 1000.0;
    else if (!err->msg[0])
        hutch_err_set(err, -EIO, "exit %d: %s", res.exit_code, res.message);
    *warm = res.warm;
    hutch_job_release(jobs, &job);
out:
    hutch_exec_result_free(&res);
    hutch_jobs_free(jobs);
    hutch_bridge_free(bridge);
    hutch_gov_free(gov);
    return ms;
}

/* Warm pools: one sandbox kept warm and taken, per executor that can. */
static void check_pools(struct doctor *d, const char *dir)
{
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_err err = {0};

    hutch_host_init(&host, hutch_runner_dir());
    if (hutch_plugins_load(hutch_plugin_dir(dir), &host, &ps, &err) < 0)
        return;
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *p = &ps->v[i];
        char what[96], detail[HUTCH_ERR_MSG + 160];
        double warm_ms, cold_ms;
        int warm = 0, cold = 0;
        if (!p->usable || !(p->ex->caps & HUTCH_CAP_PRESTART))
            continue;
        snprintf(what, sizeof(what), "pool %s", p->name);
        warm_ms = timed_run(dir, p->name, 1, &warm, &err);
        if (warm_ms < 0 || !warm) {
            snprintf(detail, sizeof(detail), "no warm sandbox: %s",
                     err.msg[0] ? err.msg : "the pool did not fill within 60 s");
            report(d, strcmp(p->name, "local") ? "warn" : "FAIL", what, detail);
            continue;
        }
        cold_ms = timed_run(dir, p->name, 0, &cold, &err);
        snprintf(
            detail, sizeof(detail),
            "print(1) in a pooled python sandbox: %.1f ms (pool hit); cold: %.1f ms",
            warm_ms, cold_ms);
        report(d, "ok", what, detail);
    }
    hutch_plugins_free(ps);
}

int hutch_cmd_doctor(int argc, char **argv)
{
    static const struct option opts[] = {
        {"plugins", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const py[] = {"/usr/bin/python3", "/usr/local/bin/python3",
                                     NULL};
    static const char *const js[] = {"/usr/bin/node", "/usr/local/bin/node",
                                     "/usr/bin/nodejs", NULL};
    const char *dir = NULL;
    struct doctor d = {0};
    bool json = false;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "p:jh", opts, NULL)) != -1) {
        if (c == 'p') {
            dir = optarg;
        } else if (c == 'j') {
            json = true;
        } else if (c == 'h') {
            printf(
                "Usage: hutch doctor [--plugins DIR] [--json]\n\n"
                "Checks namespaces, seccomp, cgroups, the Python and Node.js\n"
                "runtimes, the runners and the executor plugins, and says how to fix\n"
                "each problem.  Exit status 1 when the local executor cannot work.\n"
                "--json: one JSON object on stdout, {\"ok\", \"failures\", "
                "\"checks\":\n"
                "[{\"status\": \"ok\"|\"warn\"|\"FAIL\", \"check\", \"detail\",\n"
                "\"essential\"}]}; the exit status is the same.\n");
            return 0;
        } else {
            fprintf(stderr, "Usage: hutch doctor [--plugins DIR] [--json]\n");
            return 2;
        }
    }
    if (json && !(d.checks = cJSON_CreateArray())) {
        fprintf(stderr, "hutch doctor: out of memory\n");
        return 1;
    }
    check_userns(&d);
    check_seccomp(&d);
    check_cgroups(&d);
    check_runtime(&d, "python", py, "python3");
    check_python_packages(&d);
    check_runtime(&d, "javascript", js, "nodejs");
    check_runners(&d);
    check_plugins(&d, dir);
    check_pools(&d, dir);
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        char *text = NULL;
        if (doc && cJSON_AddBoolToObject(doc, "ok", d.failures == 0) &&
            cJSON_AddNumberToObject(doc, "failures", d.failures)) {
            cJSON_AddItemToObject(doc, "checks", hutch_steal(&d.checks));
            text = cJSON_Print(doc);
        }
        cJSON_Delete(doc);
        cJSON_Delete(d.checks);
        if (!text) {
            fprintf(stderr, "hutch doctor: out of memory\n");
            return 1;
        }
        printf("%s\n", text);
        free(text);
        return d.failures ? 1 : 0;
    }
    printf("%s\n", d.failures ? "some checks failed: see the lines marked FAIL"
                              : "the local executor can run here");
    return d.failures ? 1 : 0;
}
