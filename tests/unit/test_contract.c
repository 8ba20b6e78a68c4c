/* test_contract.c — every executor plugin of the plugin directory driven
 * through the whole ABI by hand, without the core's execution code:
 * start() and the runner's "ready", assign(), put_archive(), a job over the
 * wire protocol, reap(), get_archive(), kill() of a running job (reap()
 * says killed), destroy(); a sandbox
 * started for a pool long before its job; a start() cancelled through the
 * callback (-ECANCELED, nothing left); four start()s on four threads.
 *
 * An executor that is not usable here is skipped, except under CI=true,
 * where docker and gvisor must be usable (as tests/lib/executor.sh says).
 * Time budgets are generous: nothing here measures the machine's speed.
 * HUTCH_CONTRACT_EXECUTORS="local docker" limits the run to those. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "caps.h"
#include "hutch_archive.h"
#include "plugin.h"
#include "tap.h"
#include "util.h"

#define BUDGET_MS  180000 /* any one wait: generous, never a timing assertion */
#define POOL_WAIT  5      /* seconds a pooled sandbox waits for its job */
#define NTHREADS   4
#define MAX_OUTPUT (1u << 20)

static struct hutch_host host;
static const char *who; /* the executor under test, for messages */

/* --- one sandbox's conversation ----------------------------------------- */

struct conv {
    const struct hutch_executor *ex;
    void *state;
    struct hutch_sandbox *sb;
    struct hutch_buf chan, out, err, files;
    int chan_eof, out_eof, err_eof, exited, got_done, done_ok;
    struct hutch_exit exit;
    char why[512]; /* what went wrong, for the TAP line */
};

static void conv_init(struct conv *c, struct hutch_plugin *p)
{
    memset(c, 0, sizeof(*c));
    c->ex = p->ex;
    c->state = p->state;
    hutch_buf_init(&c->chan, MAX_OUTPUT);
    hutch_buf_init(&c->out, MAX_OUTPUT);
    hutch_buf_init(&c->err, MAX_OUTPUT);
    hutch_buf_init(&c->files, MAX_OUTPUT);
    c->exit.struct_size = sizeof(c->exit);
}

static void conv_free(struct conv *c)
{
    if (c->sb)
        c->ex->destroy(c->state, c->sb);
    c->sb = NULL;
    hutch_buf_free(&c->chan);
    hutch_buf_free(&c->out);
    hutch_buf_free(&c->err);
    hutch_buf_free(&c->files);
}

/* Appends what fd has now; sets *eof at end of file. */
static void drain(int fd, struct hutch_buf *b, int *eof)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            if (hutch_buf_append(b, buf, (size_t)n) < 0)
                *eof = 1;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            *eof = 1;
        return;
    }
}

/* The first complete line on chan, removed from the buffer (caller frees),
 * or NULL. */
static char *take_line(struct conv *c)
{
    char *nl = c->chan.data ? memchr(c->chan.data, '\n', c->chan.len) : NULL, *line;
    size_t n;
    if (!nl)
        return NULL;
    n = (size_t)(nl - c->chan.data);
    line = strndup(c->chan.data, n);
    memmove(c->chan.data, nl + 1, c->chan.len - n - 1);
    c->chan.len -= n + 1;
    return line;
}

/* Waits for the runner's first message: 0 when it is {"t":"ready",...}. */
static int wait_ready(struct conv *c)
{
    uint64_t end = hutch_now_ms() + BUDGET_MS;
    hutch_set_nonblock(c->sb->chan_fd);
    hutch_set_nonblock(c->sb->stdout_fd);
    hutch_set_nonblock(c->sb->stderr_fd);
    while (hutch_now_ms() < end) {
        struct pollfd p = {c->sb->chan_fd, POLLIN, 0};
        char *line = take_line(c);
        if (line) {
            cJSON *j = cJSON_Parse(line);
            const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "t"));
            int ok_ =
                t && !strcmp(t, "ready") && !strncmp(line, "{\"t\":\"ready\"", 12);
            snprintf(c->why, sizeof(c->why), "first line: %.200s", line);
            cJSON_Delete(j);
            free(line);
            return ok_ ? 0 : -EPROTO;
        }
        if (c->chan_eof) {
            snprintf(c->why, sizeof(c->why), "the channel closed before ready");
            return -EPIPE;
        }
        if (poll(&p, 1, 200) > 0)
            drain(c->sb->chan_fd, &c->chan, &c->chan_eof);
    }
    snprintf(c->why, sizeof(c->why), "no ready within %d s", BUDGET_MS / 1000);
    return -ETIMEDOUT;
}

static int send_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 200);
            continue;
        }
        if (n <= 0)
            return -errno;
        s += n;
        len -= (size_t)n;
    }
    return 0;
}

/* {"t":"run",...} on chan_fd. */
static int send_run(struct conv *c, const char *lang, const char *code)
{
    cJSON *m = cJSON_CreateObject();
    char *s;
    int r;

    cJSON_AddStringToObject(m, "t", "run");
    cJSON_AddStringToObject(m, "lang", lang);
    cJSON_AddStringToObject(m, "code", code);
    cJSON_AddStringToObject(m, "cwd", "/work");
    s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    r = send_all(c->sb->chan_fd, s, strlen(s));
    if (r == 0)
        r = send_all(c->sb->chan_fd, "\n", 1);
    free(s);
    if (r < 0)
        snprintf(c->why, sizeof(c->why), "sending run: %s", strerror(-r));
    return r;
}

/* {"t":"run",...}, then everything until done, event_fd and reap(). */
static int run_job(struct conv *c, const char *lang, const char *code)
{
    uint64_t end = hutch_now_ms() + BUDGET_MS;
    int r;

    r = send_run(c, lang, code);
    if (r < 0)
        return r;
    while (hutch_now_ms() < end && !(c->exited && c->out_eof && c->err_eof)) {
        struct pollfd p[4];
        int n = 0, iev;
        char *line;
        if (!c->chan_eof)
            p[n++] = (struct pollfd){c->sb->chan_fd, POLLIN, 0};
        if (!c->out_eof)
            p[n++] = (struct pollfd){c->sb->stdout_fd, POLLIN, 0};
        if (!c->err_eof)
            p[n++] = (struct pollfd){c->sb->stderr_fd, POLLIN, 0};
        iev = n;
        if (!c->exited)
            p[n++] = (struct pollfd){c->sb->event_fd, POLLIN, 0};
        if (poll(p, (nfds_t)n, 200) < 0 && errno != EINTR)
            break;
        if (!c->chan_eof)
            drain(c->sb->chan_fd, &c->chan, &c->chan_eof);
        if (!c->out_eof)
            drain(c->sb->stdout_fd, &c->out, &c->out_eof);
        if (!c->err_eof)
            drain(c->sb->stderr_fd, &c->err, &c->err_eof);
        while ((line = take_line(c))) {
            cJSON *j = cJSON_Parse(line);
            const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "t"));
            if (t && !strcmp(t, "done")) {
                c->got_done = 1;
                c->done_ok = cJSON_IsTrue(cJSON_GetObjectItem(j, "ok"));
            }
            cJSON_Delete(j);
            free(line);
        }
        if (!c->exited && iev < n && (p[iev].revents & (POLLIN | POLLHUP | POLLERR))) {
            struct hutch_err err = HUTCH_ERR_INIT;
            r = c->ex->reap(c->state, c->sb, &c->exit, &err);
            if (r == 0)
                c->exited = 1;
            else if (r != -EAGAIN) {
                snprintf(c->why, sizeof(c->why), "reap: %s", err.msg);
                return r;
            }
        }
        /* Once the runner ended, output not at EOF yet (a process of the
         * program may hold the pipes) is not waited for: as the core. */
        if (c->exited && c->got_done) {
            drain(c->sb->stdout_fd, &c->out, &c->out_eof);
            drain(c->sb->stderr_fd, &c->err, &c->err_eof);
            break;
        }
    }
    if (!c->exited || !c->got_done) {
        snprintf(c->why, sizeof(c->why), "%s within %d s (stderr: %.300s)",
                 c->exited ? "no done" : "the runner did not end", BUDGET_MS / 1000,
                 c->err.data ? c->err.data : "");
        return -ETIMEDOUT;
    }
    return 0;
}

static int start_opts(struct conv *c, const char *lang, const char *options,
                      const char *label, int pooled, int (*cancelled)(void *),
                      void *arg, struct hutch_err *err)
{
    struct hutch_sandbox_class cls = {
        .struct_size = sizeof(cls), .language = lang, .options = options};
    struct hutch_start how = {.struct_size = sizeof(how),
                              .pooled = (uint32_t)pooled,
                              .label = label,
                              .cancelled = cancelled,
                              .cancel_arg = arg};
    return c->ex->start(c->state, &cls, &how, &c->sb, err);
}

static int start_one(struct conv *c, const char *lang, const char *label, int pooled,
                     int (*cancelled)(void *), void *arg, struct hutch_err *err)
{
    return start_opts(c, lang, NULL, label, pooled, cancelled, arg, err);
}

static int assign_one(struct conv *c, const char *label, struct hutch_err *err)
{
    struct hutch_job job = {.struct_size = sizeof(job),
                            .label = label,
                            .deadline_ms = hutch_now_ms() + BUDGET_MS};
    return c->ex->assign(c->state, c->sb, &job, err);
}

static int put_file(struct conv *c, const char *name, const char *text,
                    struct hutch_err *err)
{
    struct hutch_tar *t = NULL;
    const void *data;
    size_t len;
    int r = hutch_tar_new(&t, 1u << 20, err);
    if (r == 0)
        r = hutch_tar_add_bytes(t, name, text, strlen(text), 0644, err);
    if (r == 0)
        r = hutch_tar_finish(t, &data, &len, err);
    if (r == 0)
        r = c->ex->put_archive(c->state, c->sb, data, len, err);
    hutch_tar_free(t);
    return r;
}

struct found {
    char path[256];
    char data[256];
    int n;
};

static int on_file(void *arg, const char *path, const void *data, size_t size)
{
    struct found *f = arg;
    f->n++;
    snprintf(f->path, sizeof(f->path), "%s", path);
    snprintf(f->data, sizeof(f->data), "%.*s", (int)(size < 255 ? size : 255),
             data ? (const char *)data : "");
    return 0;
}

static int contains(const struct hutch_buf *b, const char *needle)
{
    return b->data && memmem(b->data, b->len, needle, strlen(needle)) != NULL;
}

/* --- leftovers ------------------------------------------------------------ */

/* Names in dir, sorted, joined by spaces ("" when empty or missing). */
static void list_dir(const char *dir, char *out, size_t len)
{
    struct dirent **v = NULL;
    int n = scandir(dir, &v, NULL, alphasort);
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, "..") && o < len)
            o += (size_t)snprintf(out + o, len - o, "%s ", v[i]->d_name);
        free(v[i]);
    }
    free(v);
}

/* The parent of `pid`, its state letter (state may be NULL) and its
 * command line (NULs as spaces) into cmd. */
static int proc_info(int pid, int *ppid, char *state, char *cmd, size_t len)
{
    char path[64], buf[8192], st = '?';
    int fd;
    ssize_t n;
    *ppid = 0;
    cmd[0] = '\0';
    if (state)
        *state = '?';
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
        char *p;
        buf[n] = '\0';
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%c %d", &st, ppid) != 2)
            *ppid = 0;
        else if (state)
            *state = st;
    }
    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, cmd, len - 1);
        close(fd);
        for (ssize_t i = 0; i < n; i++)
            if (!cmd[i])
                cmd[i] = ' ';
        cmd[n > 0 ? n : 0] = '\0';
    }
    return 0;
}

/* Processes whose parent is this process or an executor's helper process
 * of this process (the local executor's sandbox factory: its children are
 * sandboxes; the helper itself lives as long as the plugin is open), or
 * whose command line contains `needle` (when not NULL): a space-separated
 * list of pids, each with its state letter. */
static void processes_now(const char *needle, char *out, size_t len)
{
    DIR *d = opendir("/proc");
    int helpers[16], nh = 0;
    size_t o = 0;
    char cmd[8192];
    out[0] = '\0';
    for (struct dirent *de; d && (de = readdir(d));) {
        int pid = atoi(de->d_name), ppid;
        if (pid > 0 && nh < 16 && proc_info(pid, &ppid, NULL, cmd, sizeof(cmd)) == 0 &&
            ppid == getpid() && strstr(cmd, " " HUTCH_HELPER_VERB " "))
            helpers[nh++] = pid;
    }
    if (d)
        rewinddir(d);
    for (struct dirent *de; d && (de = readdir(d));) {
        int pid = atoi(de->d_name), ppid, hit = 0, helper = 0;
        char state;
        if (pid <= 0 || pid == getpid() ||
            proc_info(pid, &ppid, &state, cmd, sizeof(cmd)) < 0)
            continue;
        for (int i = 0; i < nh; i++) {
            helper |= pid == helpers[i];
            hit |= ppid == helpers[i];
        }
        if (helper)
            continue;
        if (ppid == getpid() || (needle && strstr(cmd, needle)))
            hit = 1;
        if (hit && o < len)
            o += (size_t)snprintf(out + o, len - o, "%d(%c) ", pid, state);
    }
    if (d)
        closedir(d);
}

/* processes_now(), once what is on its way out has gone: a sandbox's C1
 * has exited when destroy() returns, but its parent (the local factory)
 * reaps it a moment later, and a zombie until then is no leftover.  A
 * process still alive, or a zombie never reaped, is there after the
 * budget too. */
static void processes_of(const char *needle, char *out, size_t len)
{
    uint64_t end = hutch_now_ms() + 10000;
    for (;;) {
        processes_now(needle, out, len);
        if (!out[0] || hutch_now_ms() >= end)
            return;
        hutch_sleep_ms(20);
    }
}

/* GET `path` from the Docker daemon over its socket: the body's first line
 * (out says "(docker did not answer)" when it did not). */
static void docker_get(const char *path, char *out, size_t len)
{
    const char *h = getenv("DOCKER_HOST");
    const char *sock = h && !strncmp(h, "unix://", 7) ? h + 7 : "/var/run/docker.sock";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char req[1024], buf[65536];
    size_t got = 0;
    char *body;
    int fd;

    snprintf(out, len, "(docker did not answer)");
    if (strlen(sock) >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: docker\r\n\r\n", path);
    if (send_all(fd, req, strlen(req)) == 0)
        for (ssize_t n; got < sizeof(buf) - 1 &&
                        (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0;)
            got += (size_t)n;
    close(fd);
    buf[got] = '\0';
    body = strstr(buf, "\r\n\r\n");
    if (body) {
        body += 4;
        body[strcspn(body, "\r\n")] = '\0';
        snprintf(out, len, "%s", body);
    }
}

/* Docker's containers labelled hutch.execution=label, as the raw JSON list
 * ("[]" when none), asked over the daemon's socket. */
static void docker_containers(const char *label, char *out, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path),
             "/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22"
             "hutch.execution%%3D%s%%22%%5D%%7D",
             label);
    docker_get(path, out, len);
}

/* --- the checks ------------------------------------------------------------ */

static const char *code_for(const char *lang, int which)
{
    static const char *const py[] = {
        "import sys, os\n"
        "data = open('/work/in.txt').read()\n"
        "print('out:' + data)\n"
        "print('err:' + data, file=sys.stderr)\n"
        "os.makedirs('/work/out', exist_ok=True)\n"
        "open('/work/out/x.txt', 'w').write('x:' + data)\n",
        "import sys\nprint('leaving')\nsys.exit(7)\n",
    };
    static const char *const js[] = {
        "const fs = require('fs');\n"
        "const data = fs.readFileSync('/work/in.txt', 'utf8');\n"
        "console.log('out:' + data);\n"
        "console.error('err:' + data);\n"
        "fs.mkdirSync('/work/out', {recursive: true});\n"
        "fs.writeFileSync('/work/out/x.txt', 'x:' + data);\n",
        "console.log('leaving');\nprocess.exit(7);\n",
    };
    return strcmp(lang, "python") == 0 ? py[which] : js[which];
}

/* start, ready, assign, put, run, reap, get, kill, destroy. */
static void whole_life(struct hutch_plugin *p, const char *lang, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    struct found f = {0};
    int r;

    conv_init(&c, p);
    r = start_one(&c, lang, label, 0, NULL, NULL, &err);
    ok(r == 0 && c.sb, "%s %s: start() makes a sandbox (%s)", who, lang,
       r ? err.msg : "ok");
    if (r < 0 || !c.sb)
        goto out;
    ok(c.sb->struct_size >= sizeof(struct hutch_sandbox) && c.sb->chan_fd >= 0 &&
           c.sb->stdout_fd >= 0 && c.sb->stderr_fd >= 0 && c.sb->event_fd >= 0,
       "%s %s: the sandbox has its four descriptors", who, lang);
    r = wait_ready(&c);
    ok(r == 0, "%s %s: the runner says {\"t\":\"ready\",...} on chan_fd (%s)", who,
       lang, c.why);
    if (r < 0)
        goto out;
    r = assign_one(&c, label, &err);
    ok(r == 0, "%s %s: assign() takes the job (%s)", who, lang, r ? err.msg : "ok");
    r = put_file(&c, "in.txt", "hello-contract", &err);
    ok(r == 0, "%s %s: put_archive() puts in.txt under /work (%s)", who, lang,
       r ? err.msg : "ok");
    r = run_job(&c, lang, code_for(lang, 0));
    ok(r == 0 && c.got_done && c.done_ok, "%s %s: the job runs to done (%s)", who, lang,
       r ? c.why : "ok");
    ok(c.exited && c.exit.exit_code == 0 && c.exit.signal == 0 && !c.exit.oom &&
           c.exit.struct_size == sizeof(c.exit),
       "%s %s: reap() says exit 0 (%d, signal %d, oom %d) and leaves struct_size", who,
       lang, c.exit.exit_code, c.exit.signal, c.exit.oom);
    ok(contains(&c.out, "out:hello-contract"),
       "%s %s: stdout has what the program printed from the file put in", who, lang);
    ok(contains(&c.err, "err:hello-contract"),
       "%s %s: stderr has what it printed there", who, lang);
    r = c.ex->get_archive(c.state, c.sb, hutch_buf_write, &c.files, 1u << 20, &err);
    ok(r == 0 && c.files.len > 0, "%s %s: get_archive() returns a tar (%s)", who, lang,
       r ? err.msg : "ok");
    if (r == 0 && c.files.len) {
        struct hutch_err ferr = HUTCH_ERR_INIT;
        r = hutch_archive_read_files(c.files.data, c.files.len, 4096, on_file, &f,
                                     &ferr);
        /* The core lists these paths as the result files: relative to
         * /work/out. */
        ok(r == 0 && f.n == 1 && !strcmp(f.path, "x.txt") &&
               !strcmp(f.data, "x:hello-contract"),
           "%s %s: the tar holds /work/out/x.txt as x.txt with its bytes (%d files, "
           "%s: %s) %s",
           who, lang, f.n, f.path, f.data, r ? ferr.msg : "");
    }
    /* After the end there is nothing to kill: it only must not fail or
     * block (killed_running() kills a running job). */
    c.ex->kill(c.state, c.sb);
out:
    conv_free(&c);
}

/* Ending one sandbox leaves every other one running, whatever their
 * names: the first sandbox of the executor's state is destroyed while the
 * tenth waits for its job, which must then run.  runsc takes an id it does
 * not find as the prefix of one it does, and gVisor's delete of its first
 * sandbox (hutch-P.S.1, already gone) took the tenth (hutch-P.S.10) with
 * it.  Run first after open(), so that the numbers are those. */
#define NEIGHBOURS 10
static void neighbours(struct hutch_plugin *p, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv first, last;
    int r, i;

    conv_init(&first, p);
    conv_init(&last, p);
    r = start_one(&first, "python", label, 1, NULL, NULL, &err);
    for (i = 2; r == 0 && i < NEIGHBOURS; i++) {
        struct conv mid;
        conv_init(&mid, p);
        r = start_one(&mid, "python", label, 1, NULL, NULL, &err);
        conv_free(&mid);
    }
    if (r == 0)
        r = start_one(&last, "python", label, 1, NULL, NULL, &err);
    if (r == 0 && (r = wait_ready(&last)) < 0)
        snprintf(err.msg, sizeof(err.msg), "%s", last.why);
    ok(r == 0, "%s: %d sandboxes started, the first and the last kept (%s)", who,
       NEIGHBOURS, r ? err.msg : "ok");
    if (r < 0)
        goto out;
    first.ex->destroy(first.state, first.sb);
    first.sb = NULL;
    r = assign_one(&last, label, &err);
    if (r == 0)
        r = run_job(&last, "python", "print('still here')\n");
    ok(r == 0 && last.got_done && last.done_ok && last.exit.exit_code == 0 &&
           contains(&last.out, "still here"),
       "%s: destroying the first sandbox left the %dth running: its job ran (%s)", who,
       NEIGHBOURS, r ? (last.why[0] ? last.why : err.msg) : "ok");
out:
    conv_free(&first);
    conv_free(&last);
}

/* An executor's helper processes (children of this process running
 * HUTCH_HELPER_VERB), killed with SIGKILL: the next sandbox still starts,
 * runs and gives its files back (the plugin starts its helper again). */
static void helper_killed(struct hutch_plugin *p, const char *label)
{
    DIR *d = opendir("/proc");
    char cmd[8192];
    int killed = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        int pid = atoi(de->d_name), ppid;
        if (pid > 0 && proc_info(pid, &ppid, NULL, cmd, sizeof(cmd)) == 0 &&
            ppid == getpid() && strstr(cmd, " " HUTCH_HELPER_VERB " ") &&
            kill(pid, SIGKILL) == 0)
            killed++;
    }
    if (d)
        closedir(d);
    if (!killed)
        return; /* this executor has no helper */
    ok(1, "%s: its helper process killed (%d)", who, killed);
    whole_life(p, "python", label);
}

/* kill() of a running job: a program that sleeps long, killed once it has
 * said so; reap() then reports it killed (SIGKILL, 137, no OOM). */
static void killed_running(struct hutch_plugin *p, const char *lang, const char *label)
{
    static const char py[] = "import time\nprint('sleeping', flush=True)\n"
                             "time.sleep(3600)\n";
    static const char js[] =
        "console.log('sleeping');\n"
        "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, "
        "3600000);\n";
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    uint64_t end;
    int r, running = 0;

    conv_init(&c, p);
    r = start_one(&c, lang, label, 0, NULL, NULL, &err);
    if (r == 0)
        r = wait_ready(&c) < 0 ? -EIO : 0;
    if (r == 0)
        r = assign_one(&c, label, &err);
    if (r == 0)
        r = send_run(&c, lang, strcmp(lang, "python") == 0 ? py : js);
    /* Until the program says it sleeps (it runs), within the budget. */
    for (end = hutch_now_ms() + BUDGET_MS;
         r == 0 && !running && hutch_now_ms() < end;) {
        struct pollfd pf[2] = {{c.sb->stdout_fd, POLLIN, 0},
                               {c.sb->chan_fd, POLLIN, 0}};
        if (poll(pf, 2, 200) < 0 && errno != EINTR)
            break;
        drain(c.sb->stdout_fd, &c.out, &c.out_eof);
        drain(c.sb->chan_fd, &c.chan, &c.chan_eof);
        running = contains(&c.out, "sleeping");
    }
    ok(running, "%s %s: a program that sleeps long runs (%s)", who, lang,
       r         ? (err.msg[0] ? err.msg : c.why)
       : running ? "ok"
                 : "it never said so");
    if (!running)
        goto out;
    c.ex->kill(c.state, c.sb);
    /* reap() once event_fd says the runner ended: within the budget, not
     * after the program's hour. */
    for (end = hutch_now_ms() + BUDGET_MS; !c.exited && hutch_now_ms() < end;) {
        struct pollfd pf = {c.sb->event_fd, POLLIN, 0};
        if (poll(&pf, 1, 200) < 0 && errno != EINTR)
            break;
        err = (struct hutch_err)HUTCH_ERR_INIT;
        r = c.ex->reap(c.state, c.sb, &c.exit, &err);
        if (r == 0)
            c.exited = 1;
        else if (r != -EAGAIN)
            break;
    }
    ok(c.exited && c.exit.signal == SIGKILL && c.exit.exit_code == 128 + SIGKILL &&
           !c.exit.oom,
       "%s %s: kill() of the running job: reap() says killed (exited %d, exit %d, "
       "signal %d, oom %d%s%s)",
       who, lang, c.exited, c.exit.exit_code, c.exit.signal, c.exit.oom,
       err.msg[0] ? ": " : "", err.msg);
out:
    conv_free(&c);
}

static void nonzero_exit(struct hutch_plugin *p, const char *lang, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    int r;

    conv_init(&c, p);
    r = start_one(&c, lang, label, 0, NULL, NULL, &err);
    if (r == 0)
        r = wait_ready(&c) < 0 ? -EIO : 0;
    if (r == 0)
        r = assign_one(&c, label, &err);
    if (r == 0)
        r = run_job(&c, lang, code_for(lang, 1));
    ok(r == 0 && c.exited && c.exit.exit_code == 7 && c.exit.signal == 0,
       "%s %s: a program that exits 7: reap() says 7 (%d) %s", who, lang,
       c.exit.exit_code, r ? (err.msg[0] ? err.msg : c.why) : "");
    ok(contains(&c.out, "leaving"), "%s %s: ... after its output", who, lang);
    conv_free(&c);
}

static void pooled(struct hutch_plugin *p, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    char job[128];
    int r;

    conv_init(&c, p);
    r = start_one(&c, "python", label, 1, NULL, NULL, &err);
    ok(r == 0, "%s: a pooled start() before any job (%s)", who, r ? err.msg : "ok");
    if (r < 0)
        goto out;
    sleep(POOL_WAIT); /* a warm pool's sandbox waits: not a timing check */
    r = wait_ready(&c);
    ok(r == 0, "%s: after %d s the pooled runner is ready (%s)", who, POOL_WAIT, c.why);
    snprintf(job, sizeof(job), "%s-job", label);
    if (r == 0)
        r = assign_one(&c, job, &err);
    if (r == 0)
        r = put_file(&c, "in.txt", "pooled", &err);
    if (r == 0)
        r = run_job(&c, "python", code_for("python", 0));
    ok(r == 0 && c.exit.exit_code == 0 && contains(&c.out, "out:pooled"),
       "%s: the job assigned to it later runs (%s)", who,
       r ? (err.msg[0] ? err.msg : c.why) : "ok");
out:
    conv_free(&c);
}

/* The weight, on cgroup v2's scale (v1's cpu.shares / 10.24), of the cpu
 * cgroup of a process whose cpu cgroup is named for this test's process
 * (the local executor's hutch-PID.START-…, gVisor's …/hutch-PID.START.N-box):
 * one of this test's sandboxes.  0 when none is found. */
static unsigned sandbox_weight(char *where, size_t len)
{
    char marker[32], line[512], file[1200];
    unsigned w = 0;
    DIR *d = opendir("/proc");

    snprintf(marker, sizeof(marker), "/hutch-%d.", (int)getpid());
    where[0] = '\0';
    for (struct dirent *de; d && (de = readdir(d)) && !where[0];) {
        char path[300];
        FILE *f;
        if (atoi(de->d_name) <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cgroup", de->d_name);
        if (!(f = fopen(path, "re")))
            continue;
        while (fgets(line, sizeof(line), f) && !where[0]) {
            char *c = strchr(line, ':'), *g = c ? strchr(c + 1, ':') : NULL;
            int v2 = c && !strncmp(c, "::", 2);
            if (!g || !strstr(g, marker))
                continue;
            g[strcspn(g, "\n")] = '\0';
            if (v2)
                snprintf(file, sizeof(file), "/sys/fs/cgroup%s/cpu.weight", g + 1);
            else if (strstr(c, ":cpu,") || strstr(c, ",cpu:") ||
                     !strncmp(c, ":cpu:", 5))
                snprintf(file, sizeof(file), "/sys/fs/cgroup/cpu%s/cpu.shares", g + 1);
            else
                continue;
            snprintf(where, len, "pid %s: %s", de->d_name, file);
        }
        fclose(f);
    }
    if (d)
        closedir(d);
    if (where[0]) {
        FILE *f = fopen(file, "re");
        if (f && fscanf(f, "%u", &w) == 1 && strstr(file, "cpu.shares"))
            w = (unsigned)(w * 100u / 1024u);
        if (f)
            fclose(f);
    }
    return w;
}

/* The weight Docker holds for the container labelled `label`
 * (HostConfig.CpuShares / 10.24; the daemon sets its cgroup's cpu.shares
 * from it). */
static unsigned docker_weight(const char *label, char *where, size_t len)
{
    char list[65536], path[256];
    cJSON *l, *c;
    unsigned w = 0;

    docker_containers(label, list, sizeof(list));
    snprintf(where, len, "containers %.200s", list);
    l = cJSON_Parse(list);
    if (cJSON_GetArraySize(l) == 1 &&
        cJSON_IsString(cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "Id"))) {
        snprintf(path, sizeof(path), "/containers/%s/json",
                 cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "Id")->valuestring);
        docker_get(path, list, sizeof(list));
        c = cJSON_Parse(list);
        {
            cJSON *shares =
                cJSON_GetObjectItem(cJSON_GetObjectItem(c, "HostConfig"), "CpuShares");
            if (cJSON_IsNumber(shares)) {
                w = (unsigned)(shares->valuedouble * 100 / 1024);
                snprintf(where, len, "container %s: CpuShares %.0f", path,
                         shares->valuedouble);
            }
        }
        cJSON_Delete(c);
    }
    cJSON_Delete(l);
    return w;
}

/* cpu_weight(): a sandbox's processes get the weight it is given (fair.h:
 * a principal's sandboxes weigh one together), and a weight out of range
 * is refused. */
static void cpu_weight_op(struct hutch_plugin *p, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    char where[1400];
    unsigned seen = 0;
    int r;

    if (!HUTCH_HAS_MEMBER(p->ex, struct hutch_executor, cpu_weight) ||
        !p->ex->cpu_weight)
        return;
    conv_init(&c, p);
    r = start_one(&c, "python", label, 0, NULL, NULL, &err);
    if (r == 0)
        r = wait_ready(&c);
    ok(r == 0, "%s: a sandbox to weigh (%s)", who,
       r ? (err.msg[0] ? err.msg : c.why) : "ok");
    if (r < 0)
        goto out;
    r = p->ex->cpu_weight(c.state, c.sb, 25, &err);
    if (r == -ENOTSUP) {
        printf("ok %d - %s: cpu_weight # SKIP %s\n", ++tap_n, who, err.msg);
        goto out;
    }
    ok(r == 0, "%s: cpu_weight(25) (%s)", who, r ? err.msg : "ok");
    if (!strcmp(who, "docker"))
        seen = docker_weight(label, where, sizeof(where));
    else
        seen = sandbox_weight(where, sizeof(where));
    /* v1's shares round: 256 reads back as 25. */
    ok(seen == 25, "%s: the sandbox's cpu cgroup weighs 25 (%u; %s)", who, seen,
       where[0] ? where : "no process in a cgroup of this test's sandboxes");
    ok(p->ex->cpu_weight(c.state, c.sb, 0, &err) == -EINVAL &&
           p->ex->cpu_weight(c.state, c.sb, HUTCH_CPU_WEIGHT_MAX + 1, &err) == -EINVAL,
       "%s: cpu_weight refuses 0 and %u", who, HUTCH_CPU_WEIGHT_MAX + 1);
out:
    conv_free(&c);
}

struct cancel_at {
    int after; /* say "cancelled" from this call on */
    int calls;
    int said;
};

static int cancel_cb(void *arg)
{
    struct cancel_at *a = arg;
    if (++a->calls >= a->after)
        a->said = 1;
    return a->said;
}

static void cancelled(struct hutch_plugin *p, const char *label, int after)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    struct cancel_at a = {after, 0, 0};
    struct conv c;
    char before[4096], left[4096], procs[1024], needle[PATH_MAX + 8];
    int r;

    list_dir(p->state_dir, before, sizeof(before));
    conv_init(&c, p);
    r = start_one(&c, "python", label, 1, cancel_cb, &a, &err);
    if (a.said) {
        ok(r == -ECANCELED && !c.sb,
           "%s: a start() cancelled at the callback's call %d returns -ECANCELED (%d: "
           "%s)",
           who, after, r, err.msg);
    } else {
        /* It was ready before the callback's answer changed: fine. */
        ok(r == 0, "%s: start() done before call %d of the callback (%s)", who, after,
           r ? err.msg : "ok");
    }
    if (after == 1)
        ok(a.calls >= 1, "%s: start() asks cancelled() while it waits (%d calls)", who,
           a.calls);
    conv_free(&c);
    list_dir(p->state_dir, left, sizeof(left));
    ok(!strcmp(before, left), "%s: nothing left in the state directory ([%s] vs [%s])",
       who, before, left);
    snprintf(needle, sizeof(needle), "%s/", p->state_dir);
    processes_of(needle, procs, sizeof(procs));
    ok(!procs[0], "%s: no process of it left (%s)", who, procs);
    if (!strcmp(who, "docker")) {
        char list[4096];
        docker_containers(label, list, sizeof(list));
        ok(!strcmp(list, "[]"), "docker: no container labelled hutch.execution=%s (%s)",
           label, list);
    }
}

struct worker {
    struct hutch_plugin *p;
    char label[64];
    int r;
    char why[600];
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct conv c;
    char want[96];

    conv_init(&c, w->p);
    w->r = start_one(&c, "python", w->label, 0, NULL, NULL, &err);
    if (w->r == 0)
        w->r = wait_ready(&c);
    if (w->r == 0)
        w->r = assign_one(&c, w->label, &err);
    if (w->r == 0)
        w->r = put_file(&c, "in.txt", w->label, &err);
    if (w->r == 0)
        w->r = run_job(&c, "python", code_for("python", 0));
    snprintf(want, sizeof(want), "out:%s", w->label);
    if (w->r == 0 && (c.exit.exit_code != 0 || !contains(&c.out, want))) {
        w->r = -EIO;
        snprintf(c.why, sizeof(c.why), "exit %d, stdout %.100s", c.exit.exit_code,
                 c.out.data ? c.out.data : "");
    }
    if (w->r == 0) {
        c.ex->kill(c.state, c.sb);
    }
    snprintf(w->why, sizeof(w->why), "%s", err.msg[0] ? err.msg : c.why);
    conv_free(&c);
    return NULL;
}

static void concurrent(struct hutch_plugin *p, const char *label)
{
    pthread_t t[NTHREADS];
    struct worker w[NTHREADS];
    int all = 1;
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.p = p};
        snprintf(w[i].label, sizeof(w[i].label), "%s-%d", label, i);
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].r != 0) {
            all = 0;
            printf("# %s thread %d: %s\n", who, i, w[i].why);
        }
    }
    ok(all, "%s: %d sandboxes started and run from %d threads at once", who, NTHREADS,
       NTHREADS);
}

/* runtime(): the line it gives is the runtime a sandbox of this executor
 * really runs (the program prints its own version in the same form); an
 * unknown language is refused; a small buffer is cut, not overrun. */
static void runtime_op(struct hutch_plugin *p, const char *lang, const char *label)
{
    static const char *const code[] = {
        "import platform\nprint('<' + 'Python ' + platform.python_version() + '>')\n",
        "console.log('<' + 'Node.js ' + process.version + '>')\n"};
    struct hutch_err err = HUTCH_ERR_INIT;
    char rt[HUTCH_RUNTIME_MAX] = "", want[HUTCH_RUNTIME_MAX + 2], small[8];
    struct conv c;
    int r, js = strcmp(lang, "javascript") == 0;

    if (!HUTCH_HAS_MEMBER(p->ex, struct hutch_executor, runtime) || !p->ex->runtime) {
        ok(0, "%s: has runtime()", who);
        return;
    }
    r = p->ex->runtime(p->state, lang, rt, sizeof(rt), &err);
    ok(r == 0 && !strncmp(rt, js ? "Node.js v" : "Python ", js ? 9 : 7),
       "%s: runtime(%s) says \"%s\" (%s)", who, lang, rt, r ? err.msg : "ok");
    conv_init(&c, p);
    r = start_one(&c, lang, label, 0, NULL, NULL, &err);
    if (r == 0)
        r = wait_ready(&c);
    if (r == 0)
        r = assign_one(&c, label, &err);
    if (r == 0)
        r = run_job(&c, lang, code[js]);
    snprintf(want, sizeof(want), "<%s>", rt);
    ok(r == 0 && rt[0] && contains(&c.out, want),
       "%s: a %s sandbox runs what runtime() says (%s; stdout %.100s)", who, lang,
       r ? (err.msg[0] ? err.msg : c.why) : "ran", c.out.data ? c.out.data : "");
    conv_free(&c);

    memset(small, 'x', sizeof(small));
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = p->ex->runtime(p->state, lang, small, 5, &err);
    ok(r == 0 && strlen(small) == 4 && small[5] == 'x',
       "%s: runtime() cuts its line to the buffer it is given", who);
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = p->ex->runtime(p->state, "cobol", rt, sizeof(rt), &err);
    ok(r < 0 && err.msg[0], "%s: runtime() refuses an unknown language (%s)", who,
       err.msg);
}

/* packages(): what it lists for a flavour, a sandbox of that flavour
 * imports at those versions; an unknown flavour or language is refused.
 * With nothing listed, numpy does not import there. */
static void packages_op(struct hutch_plugin *p, const char *flavour, const char *label)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    char pk[HUTCH_PACKAGES_MAX] = "", code[2048], want[HUTCH_PACKAGES_MAX + 8],
         opts[64];
    size_t o = 0;
    struct conv c;
    int r;

    if (!HUTCH_HAS_MEMBER(p->ex, struct hutch_executor, packages) || !p->ex->packages) {
        ok(0, "%s: has packages()", who);
        return;
    }
    r = p->ex->packages(p->state, "python", flavour, pk, sizeof(pk), &err);
    ok(r == 0, "%s: packages(python, %s) says \"%s\" (%s)", who, flavour, pk,
       r ? err.msg : "ok");
    if (r < 0)
        return;
    /* "numpy 1.24.2, pandas 1.5.3" -> import each, print its version. */
    o += (size_t)snprintf(code, sizeof(code), "out = []\n");
    if (!pk[0])
        o += (size_t)snprintf(code + o, sizeof(code) - o,
                              "try:\n    import numpy\n    out.append('numpy')\n"
                              "except ImportError:\n    pass\n");
    for (char *s = pk, *save = NULL, *it; (it = strtok_r(s, ",", &save)); s = NULL) {
        char name[64];
        while (*it == ' ')
            it++;
        if (sscanf(it, "%63[A-Za-z0-9_]", name) != 1)
            continue;
        o += (size_t)snprintf(code + o, sizeof(code) - o,
                              "import %s\nout.append('%s ' + %s.__version__)\n", name,
                              name, name);
    }
    snprintf(code + o, sizeof(code) - o, "print('<' + ', '.join(out) + '>')\n");
    r = p->ex->packages(p->state, "python", flavour, pk, sizeof(pk), &err);
    snprintf(want, sizeof(want), "<%s>", pk);
    snprintf(opts, sizeof(opts), "{\"flavour\":\"%s\"}", flavour);
    conv_init(&c, p);
    r = start_opts(&c, "python", opts, label, 0, NULL, NULL, &err);
    if (r == 0)
        r = wait_ready(&c);
    if (r == 0)
        r = assign_one(&c, label, &err);
    if (r == 0)
        r = run_job(&c, "python", code);
    ok(r == 0 && contains(&c.out, want),
       "%s: a %s sandbox imports what packages() says (%s; stdout %.200s)", who,
       flavour, r ? (err.msg[0] ? err.msg : c.why) : "ran",
       c.out.data ? c.out.data : "");
    conv_free(&c);
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = p->ex->packages(p->state, "python", "bogus", pk, sizeof(pk), &err);
    ok(r < 0 && err.msg[0], "%s: packages() refuses an unknown flavour (%s)", who,
       err.msg);
    err = (struct hutch_err)HUTCH_ERR_INIT;
    r = p->ex->packages(p->state, "cobol", flavour, pk, sizeof(pk), &err);
    ok(r < 0 && err.msg[0], "%s: packages() refuses an unknown language (%s)", who,
       err.msg);
}

/* --- main -------------------------------------------------------------------- */

static int wanted(const char *name)
{
    const char *only = getenv("HUTCH_CONTRACT_EXECUTORS");
    char list[256];
    if (!only || !*only)
        return 1;
    snprintf(list, sizeof(list), " %s ", only);
    for (char *c = list; *c; c++)
        if (*c == ',')
            *c = ' ';
    {
        char pat[80];
        snprintf(pat, sizeof(pat), " %s ", name);
        return strstr(list, pat) != NULL;
    }
}

static int in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "false") != 0 && strcmp(ci, "0") != 0;
}

/* The shared locks tests/lib/executor.sh takes, so that docker's and
 * gvisor's fault tests (which stop dockerd, kill hutch) run alone. */
static int test_lock(const char *name)
{
    const char *file = !strcmp(name, "docker")   ? "/tmp/hutch-docker-tests.lock"
                       : !strcmp(name, "gvisor") ? "/tmp/hutch-gvisor-tests.lock"
                                                 : NULL;
    int fd;
    if (!file)
        return -1;
    fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0)
        flock(fd, LOCK_SH);
    return fd;
}

int main(void)
{
    const char *dir = getenv("HUTCH_PLUGIN_DIR"), *runners = getenv("HUTCH_RUNNER_DIR");
    struct hutch_plugins *ps = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    int tested = 0;

    if (!dir || !runners) {
        printf("1..0 # SKIP HUTCH_PLUGIN_DIR or HUTCH_RUNNER_DIR not set (run through "
               "make check)\n");
        return 0; /* the TAP driver counts a plan of 0 as a skip */
    }
    signal(SIGPIPE, SIG_IGN);
    hutch_host_init(&host, runners);
    /* This test is not hutch: an executor's helper process is the hutch
     * binary of this build (hutch-executor.h, "Processes"). */
    if (getenv("HUTCH_BUILDDIR")) {
        static char exe[4096];
        snprintf(exe, sizeof(exe), "%s/hutch", getenv("HUTCH_BUILDDIR"));
        host.helper_exe = exe;
    }
    if (hutch_plugins_load(dir, &host, &ps, &err) < 0) {
        printf("not ok 1 - loading the plugins of %s: %s\n1..1\n", dir, err.msg);
        return 1;
    }
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *p = &ps->v[i];
        char label[64];
        int lock;

        who = p->name;
        if (!wanted(p->name))
            continue;
        if (!p->usable) {
            /* CI provides every executor: an unusable one is a failure. */
            if (in_ci())
                ok(0, "%s: the executor is usable (%s)", who, p->reason);
            else
                printf("ok %d - # SKIP %s: not usable here: %s\n", ++tap_n, who,
                       p->reason);
            continue;
        }
        lock = test_lock(p->name);
        err = (struct hutch_err)HUTCH_ERR_INIT;
        if (hutch_plugin_open(p, &host, &err) < 0) {
            ok(0, "%s: open() (%s)", who, err.msg);
            if (lock >= 0)
                close(lock);
            continue;
        }
        tested++;
        ok(p->ex->version && *p->ex->version, "%s: has a version (%s)", who,
           p->ex->version ? p->ex->version : "NULL");
        ok((p->ex->caps & (HUTCH_CAP_PRESTART | HUTCH_CAP_CONCURRENT)) ==
               (HUTCH_CAP_PRESTART | HUTCH_CAP_CONCURRENT),
           "%s: says PRESTART and CONCURRENT", who);
        snprintf(label, sizeof(label), "contract-%d-%s", (int)getpid(), who);
        neighbours(p, label);
        whole_life(p, "python", label);
        whole_life(p, "javascript", label);
        nonzero_exit(p, "python", label);
        killed_running(p, "python", label);
        killed_running(p, "javascript", label);
        snprintf(label, sizeof(label), "contract-%d-%s-rt", (int)getpid(), who);
        runtime_op(p, "python", label);
        runtime_op(p, "javascript", label);
        snprintf(label, sizeof(label), "contract-%d-%s-pk", (int)getpid(), who);
        packages_op(p, "base", label);
        packages_op(p, "data", label);
        snprintf(label, sizeof(label), "contract-%d-%s-pool", (int)getpid(), who);
        pooled(p, label);
        snprintf(label, sizeof(label), "contract-%d-%s-cpu", (int)getpid(), who);
        cpu_weight_op(p, label);
        for (int after = 1; after <= 3; after++) {
            snprintf(label, sizeof(label), "contract-%d-%s-cancel%d", (int)getpid(),
                     who, after);
            cancelled(p, label, after);
        }
        snprintf(label, sizeof(label), "contract-%d-%s-thr", (int)getpid(), who);
        concurrent(p, label);
        snprintf(label, sizeof(label), "contract-%d-%s-helper", (int)getpid(), who);
        helper_killed(p, label);
        {
            char procs[1024];
            processes_of(NULL, procs, sizeof(procs));
            ok(!procs[0], "%s: every sandbox destroyed left no child process (%s)", who,
               procs);
        }
        if (lock >= 0)
            close(lock);
    }
    hutch_plugins_free(ps);
    if (!tested && !tap_failed) {
        printf("1..0 # SKIP no usable executor here\n");
        return 0;
    }
    return tap_done();
}
