/* test_plugin.c — the plugin loader against broken plugins: wrong ABI,
 * missing entry symbol, failing probe, a file that is not ELF, a duplicate
 * name, a directory named like a plugin.  None may crash the core; each is
 * listed with its reason.  And the start's sweep: when it asks a plugin to
 * remove what gone processes left. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../plugins/common/proc.h"
#include "plugin.h"
#include "tap.h"

static void link_plugin(const char *from_dir, const char *name, const char *dir,
                        const char *as)
{
    char src[PATH_MAX], dst[PATH_MAX];
    snprintf(src, sizeof(src), "%s/%s.so", from_dir, name);
    snprintf(dst, sizeof(dst), "%s/%s", dir, as);
    if (symlink(src, dst) < 0)
        perror(dst);
}

int main(void)
{
    const char *tp = getenv("HUTCH_TEST_PLUGINS");
    char dir[] = "/tmp/hutch-test-plugins-XXXXXX", path[PATH_MAX],
         state_dir[PATH_MAX] = "";
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_plugin *p;
    struct hutch_err err = {0};
    FILE *f;
    int r;

    if (!tp) {
        printf("1..0 # SKIP HUTCH_TEST_PLUGINS not set (run through make check)\n");
        return 0;
    }
    if (!mkdtemp(dir))
        return 1;
    link_plugin(tp, "good", dir, "good.so");
    link_plugin(tp, "good", dir, "zz-good.so");
    link_plugin(tp, "wrongabi", dir, "wrongabi.so");
    link_plugin(tp, "nosym", dir, "nosym.so");
    link_plugin(tp, "probefail", dir, "probefail.so");
    link_plugin(tp, "abi1", dir, "abi1.so");
    link_plugin(tp, "badopts", dir, "badopts.so");
    snprintf(path, sizeof(path), "%s/notelf.so", dir);
    f = fopen(path, "w");
    fputs("#!/bin/sh\necho this is not a shared object\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/adir.so", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/README", dir);
    f = fopen(path, "w");
    fputs("not a plugin\n", f);
    fclose(f);

    hutch_host_init(&host, "/nonexistent");
    r = hutch_plugins_load(dir, &host, &ps, &err);
    ok(r == 0, "loading a directory of broken plugins succeeds (%s)", err.msg);
    if (r < 0)
        return tap_done();
    ok(ps->n == 9, "every *.so is listed, README is not (%zu)", ps->n);

    p = hutch_plugins_find(ps, "good");
    ok(p && p->usable && !strcmp(p->ex->name, "good"), "a good plugin is usable");
    p = hutch_plugins_find(ps, "zz-good");
    ok(p && !p->usable && strstr(p->reason, "already provided"),
       "a second plugin with the same name is skipped: %s", p ? p->reason : "-");
    p = hutch_plugins_find(ps, "wrongabi");
    ok(p && !p->usable && strstr(p->reason, "ABI 42") && strstr(p->reason, "rebuild"),
       "wrong ABI is refused with the versions and the fix: %s", p ? p->reason : "-");
    p = hutch_plugins_find(ps, "abi1");
    ok(p && !p->usable && !p->ex && strstr(p->reason, "ABI 1") &&
           strstr(p->reason, "ABI 1 is no longer loaded") &&
           strstr(p->reason, "rebuild") && strstr(p->reason, "hutch-executor.h"),
       "an ABI 1 plugin is refused: ABI 1 is no longer loaded, rebuild it: %s",
       p ? p->reason : "-");
    p = hutch_plugins_find(ps, "good");
    ok(p && p->ex && p->ex->version && !strcmp(p->ex->version, "0.0-test"),
       "a good plugin's version is there for hutch plugins");
    p = hutch_plugins_find(ps, "nosym");
    ok(p && !p->usable && strstr(p->reason, "hutch_executor_entry"),
       "missing entry symbol is named: %s", p ? p->reason : "-");
    p = hutch_plugins_find(ps, "probefail");
    ok(p && !p->usable && strstr(p->reason, "frobnicator"),
       "a failing probe gives the plugin's reason: %s", p ? p->reason : "-");
    p = hutch_plugins_find(ps, "notelf");
    ok(p && !p->usable && strstr(p->reason, "cannot load"),
       "a file that is not ELF is refused: %s", p ? p->reason : "-");
    p = hutch_plugins_find(ps, "badopts");
    ok(p && !p->usable && !p->ex && strstr(p->reason, "\"Bad-Name\"") &&
           strstr(p->reason, "malformed"),
       "an options table the core cannot read makes the plugin unusable: %s",
       p ? p->reason : "-");

    /* executor_options against what "good" declares (hutch policy check). */
    p = hutch_plugins_find(ps, "good");
    {
        static const struct {
            const char *json, *want;
        } cases[] = {
            {"{\"colour\":\"red\",\"count\":\"-3\",\"loud\":\"true\"}", NULL},
            {"{}", NULL},
            {"{\"color\":\"red\"}",
             "the policy's executor_options.good.color: the good executor has no such "
             "option (it knows colour, count, loud)"},
            {"{\"home\":\"/x\"}",
             "executor_options.good.home: a setting of the whole "
             "hutch process, not of a policy: set HUTCH_TEST_HOME"},
            {"{\"count\":\"3x\"}", "executor_options.good.count: expected an integer"},
            {"{\"count\":\"\"}", "executor_options.good.count: expected an integer"},
            {"{\"loud\":\"yes\"}", "executor_options.good.loud: expected a boolean"},
            {"[1]", "executor_options.good is not an object"},
        };
        const struct hutch_option *o =
            p && p->ex ? hutch_plugin_option(p->ex, 3) : NULL;
        ok(o && !strcmp(o->name, "home") && o->flags == HUTCH_OPTION_ENV_ONLY &&
               !hutch_plugin_option(p->ex, 4),
           "the declared options are read row by row, to the end");
        for (size_t i = 0; p && p->ex && i < sizeof(cases) / sizeof(cases[0]); i++) {
            struct hutch_err e = {0};
            int rc = hutch_plugin_check_options(p->ex, cases[i].json, &e);
            if (!cases[i].want)
                ok(rc == 0, "options %s are accepted (%s)", cases[i].json, e.msg);
            else
                ok(rc == -EINVAL && strstr(e.msg, cases[i].want),
                   "options %s are refused: %s", cases[i].json, e.msg);
        }
    }
    p = hutch_plugins_find(ps, "probefail");
    {
        struct hutch_err e = {0};
        ok(p && p->ex && hutch_plugin_check_options(p->ex, "{\"x\":\"y\"}", &e) == 0,
           "a plugin that declares no options: nothing is checked");
    }
    p = hutch_plugins_find(ps, "adir");
    ok(p && !p->usable && strstr(p->reason, "not a regular file"),
       "a directory named *.so is refused: %s", p ? p->reason : "-");

    memset(&err, 0, sizeof(err));
    p = hutch_plugins_find(ps, "good");
    r = hutch_plugin_open(p, &host, &err);
    ok(r == 0 && p->state_dir, "a good plugin opens with a state directory (%s)",
       r == 0 ? p->state_dir : err.msg);
    if (r == 0 && p->state_dir) {
        struct stat st;
        char want[64];
        const char *base = strrchr(p->state_dir, '/');
        snprintf(want, sizeof(want), "/%d.", (int)getpid());
        snprintf(state_dir, sizeof(state_dir), "%s", p->state_dir);
        ok(stat(state_dir, &st) == 0 && S_ISDIR(st.st_mode) &&
               (st.st_mode & 0777) == 0700 && st.st_uid == geteuid(),
           "the state directory exists, is ours, mode 0700");
        ok(base && !strncmp(base, want, strlen(want)) && strstr(state_dir, "/good/"),
           "it is named EXECUTOR/PID.START: %s", state_dir);
        snprintf(path, sizeof(path), "%s/left", state_dir);
        f = fopen(path, "w");
        if (f)
            fclose(f);
    }

    memset(&err, 0, sizeof(err));
    p = hutch_plugins_find(ps, "probefail");
    r = hutch_plugin_open(p, &host, &err);
    ok(r < 0 && strstr(err.msg, "not usable"), "opening an unusable plugin fails: %s",
       err.msg);
    ok(hutch_plugins_find(ps, "nothere") == NULL, "an absent executor is not found");
    hutch_plugins_free(ps);
    if (state_dir[0]) {
        ok(access(state_dir, F_OK) < 0,
           "closing the plugin removed its state directory and what was left in it");
        /* The executor's directory (…/good) is shared by processes: left. */
    }

    /* The sweep of every hutch's start: an executor's sweep() is called,
     * with the directory of its state directories, when one of them names
     * a process that is gone, and never for a live process's; the core
     * then removes the gone one if the sweep left it empty. */
    if (state_dir[0]) {
        char log[] = "/tmp/hutch-test-sweep-XXXXXX", exdir[PATH_MAX],
             live[PATH_MAX + 32], gone[PATH_MAX + 64], line[PATH_MAX] = "";
        int fd = mkstemp(log), pfd[2];
        pid_t child = -1;
        unsigned long long start = 0;

        snprintf(exdir, sizeof(exdir), "%s", state_dir);
        *strrchr(exdir, '/') = '\0';
        setenv("HUTCH_TEST_SWEEP_LOG", log, 1);
        memset(&err, 0, sizeof(err));
        ps = NULL;
        r = hutch_plugins_load(dir, &host, &ps, &err);
        ok(r == 0 && fd >= 0, "the plugins load again (%s)", err.msg);
        if (r == 0 && fd >= 0) {
            hutch_plugins_sweep(ps, &host, 0); /* what earlier runs left */
            if (ftruncate(fd, 0) < 0)
                perror(log);
            snprintf(live, sizeof(live), "%s/%d.%llu.7", exdir, (int)getpid(),
                     box_proc_start(getpid()));
            mkdir(live, 0700);
            hutch_plugins_sweep(ps, &host, 0);
            ok(lseek(fd, 0, SEEK_END) == 0,
               "a live process's state directory starts no sweep");
            hutch_plugins_sweep(ps, &host, 1);
            ok(lseek(fd, 0, SEEK_END) > 0, "the janitor's (always) starts it even so");
            ok(access(live, F_OK) == 0, "and the live one stays");
            if (ftruncate(fd, 0) < 0)
                perror(log);
            /* A process that is gone: a child, seen alive, then reaped. */
            child = pipe(pfd) == 0 ? fork() : -1;
            if (child == 0) {
                char c;
                close(pfd[1]);
                _exit(read(pfd[0], &c, 1) < 0);
            }
            if (child > 0) {
                close(pfd[0]);
                start = box_proc_start(child);
                close(pfd[1]);
                waitpid(child, NULL, 0);
            }
            snprintf(gone, sizeof(gone), "%s/%d.%llu", exdir, (int)child, start);
            ok(start && mkdir(gone, 0700) == 0, "a gone process's state directory: %s",
               gone);
            hutch_plugins_sweep(ps, &host, 0);
            if (pread(fd, line, sizeof(line) - 1, 0) < 0)
                line[0] = '\0';
            line[strcspn(line, "\n")] = '\0';
            ok(!strcmp(line, exdir),
               "it starts the executor's sweep, given %s (\"%s\")", exdir, line);
            ok(access(gone, F_OK) < 0, "and goes once the sweep left it empty");
            ok(access(live, F_OK) == 0, "the live one stays");
            rmdir(live);
            rmdir(gone);
            hutch_plugins_free(ps);
        }
        if (fd >= 0)
            close(fd);
        unlink(log);
        unsetenv("HUTCH_TEST_SWEEP_LOG");
    }

    memset(&err, 0, sizeof(err));
    ps = NULL;
    r = hutch_plugins_load("/nonexistent/hutch-plugins", &host, &ps, &err);
    ok(r < 0 && strstr(err.msg, "HUTCH_PLUGIN_DIR"),
       "a missing plugin directory is an error that says how to fix it: %s", err.msg);

    {
        static const char *const names[] = {"good.so",  "zz-good.so",   "wrongabi.so",
                                            "nosym.so", "probefail.so", "notelf.so",
                                            "abi1.so",  "badopts.so",   "README"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            unlink(path);
        }
        snprintf(path, sizeof(path), "%s/adir.so", dir);
        rmdir(path);
        rmdir(dir);
    }
    return tap_done();
}
