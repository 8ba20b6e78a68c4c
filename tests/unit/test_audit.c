/* test_audit.c — the audit log: every line is one valid JSON object with
 * the same keys, concurrent lines never interleave, secrets and long
 * strings are redacted at any depth, and a log that cannot be written
 * costs a bounded wait and a counted drop, never a hang. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "tap.h"

#define NTHREADS 8
#define NLINES   1000

static char dir[PATH_MAX];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, r;

    if (!f)
        return NULL;
    do {
        if (n + 65536 > cap) {
            cap = (cap ? cap * 2 : 65536) + 65536;
            buf = realloc(buf, cap + 1);
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Split text into lines (in place); every line must end with '\n'.
 * Returns the count, or -1 if the text does not end with a newline. */
static int split_lines(char *text, size_t len, char ***lines)
{
    int n = 0, cap = 16;
    *lines = malloc(sizeof(char *) * (size_t)cap);
    if (len > 0 && text[len - 1] != '\n')
        return -1;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        if (n == cap)
            *lines = realloc(*lines, sizeof(char *) * (size_t)(cap *= 2));
        (*lines)[n++] = p;
        p = nl + 1;
    }
    return n;
}

static int valid_utf8(const unsigned char *s)
{
    while (*s) {
        int n = *s < 0x80             ? 1
                : (*s & 0xe0) == 0xc0 ? 2
                : (*s & 0xf0) == 0xe0 ? 3
                : (*s & 0xf8) == 0xf0 ? 4
                                      : 0;
        if (!n)
            return 0;
        for (int i = 1; i < n; i++)
            if ((s[i] & 0xc0) != 0x80)
                return 0;
        s += n;
    }
    return 1;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int time_ok(const char *t)
{
    /* 2025-01-02T03:04:05.678Z */
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (!t || strlen(t) != sizeof(shape) - 1)
        return 0;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != shape[i])
            return 0;
    return 1;
}

static void test_open_errors(void)
{
    struct hutch_audit *a = (void *)1;
    struct hutch_err e = {0};
    char p[PATH_MAX + 32];
    int r;

    r = hutch_audit_open("/nonexistent-hutch-dir/audit.log", &a, &e);
    ok(r == -ENOENT && a == NULL && strstr(e.msg, "/nonexistent-hutch-dir/audit.log") &&
           strstr(e.msg, "No such file"),
       "missing directory: clear error (%s)", e.msg);
    r = hutch_audit_open(dir, &a, &e);
    ok(r == -EISDIR && strstr(e.msg, dir), "a directory: clear error (%s)", e.msg);
    snprintf(p, sizeof(p), "%s/fifo", dir);
    if (mkfifo(p, 0600) == 0) {
        uint64_t t0 = now_ms();
        r = hutch_audit_open(p, &a, &e);
        /* ENXIO is the cause (an open that does not wait for a reader); the
         * time only guards against a blocking open, generously for a loaded
         * machine. */
        ok(r == -ENXIO && strstr(e.msg, "FIFO") && now_ms() - t0 < 30000,
           "a FIFO nobody reads fails at once (%s)", e.msg);
        unlink(p);
    } else {
        ok(0, "mkfifo: %s", strerror(errno));
    }
}

static void test_lines(void)
{
    struct hutch_audit *a;
    struct hutch_err e = {0};
    char p[PATH_MAX + 32], *text, **lines = NULL;
    size_t len;
    struct stat st;
    cJSON *extra, *o;
    int r, n;

    snprintf(p, sizeof(p), "%s/audit.log", dir);
    r = hutch_audit_open(p, &a, &e);
    ok(r == 0 && stat(p, &st) == 0 && (st.st_mode & 0777) == 0600,
       "opened and created 0600 (%s)", r ? e.msg : "ok");
    if (r)
        return;
    extra = cJSON_Parse("{\"exit_code\": 3, \"decision\": \"forged\", \"time\": 1,"
                        " \"args\": {\"q\": \"x\"}}");
    ok(hutch_audit_log(a, "tool_call", "alice", "e1", "github.search", "allow", NULL,
                       0.25, extra) == 0,
       "log a tool call");
    ok(hutch_audit_log(a, "execution", NULL, NULL, NULL, NULL, NULL, -1, NULL) == 0,
       "log with every optional field empty");
    ok(hutch_audit_log(a, "auth", "bob", NULL, NULL, "deny",
                       "bad\nnewline \"quote\" \xff\xfe tab\t", 12.3456789, NULL) == 0,
       "log a reason with a newline, quotes and invalid UTF-8");
    cJSON *notobj = cJSON_CreateString("plain");
    ok(hutch_audit_log(a, "policy_reload", NULL, NULL, NULL, "ok", NULL, 1, notobj) ==
           0,
       "log with a non-object extra");
    cJSON_Delete(notobj);
    ok(hutch_audit_log(a, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL) == -EINVAL,
       "no event: -EINVAL");
    cJSON_Delete(extra);
    hutch_audit_close(a);

    text = slurp(p, &len);
    n = text ? split_lines(text, len, &lines) : -1;
    ok(n == 4, "one line per call (%d)", n);
    if (n != 4) {
        free(lines);
        free(text);
        return;
    }
    for (int i = 0; i < n; i++) {
        o = cJSON_Parse(lines[i]);
        ok(cJSON_IsObject(o) && valid_utf8((unsigned char *)lines[i]),
           "line %d is a JSON object in valid UTF-8", i + 1);
        static const char *keys[] = {"time", "event",    "principal", "execution",
                                     "tool", "decision", "reason",    "duration_ms"};
        int all = 1;
        for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++)
            all &= cJSON_HasObjectItem(o, keys[k]);
        ok(all && time_ok(str(o, "time")), "line %d has every key, time %s", i + 1,
           str(o, "time") ? str(o, "time") : "?");
        if (i == 0) {
            cJSON *ec = cJSON_GetObjectItem(o, "exit_code");
            ok(!strcmp(str(o, "event"), "tool_call") &&
                   !strcmp(str(o, "principal"), "alice") &&
                   !strcmp(str(o, "tool"), "github.search") &&
                   cJSON_IsNull(cJSON_GetObjectItem(o, "reason")) &&
                   cJSON_GetObjectItem(o, "duration_ms")->valuedouble == 0.25 &&
                   cJSON_IsNumber(ec) && ec->valueint == 3 &&
                   !strcmp(str(cJSON_GetObjectItem(o, "args"), "q"), "x"),
               "fields and extra members are there");
            ok(!strcmp(str(o, "decision"), "allow") && time_ok(str(o, "time")),
               "extra cannot override decision or time");
        } else if (i == 1) {
            ok(cJSON_IsNull(cJSON_GetObjectItem(o, "principal")) &&
                   cJSON_IsNull(cJSON_GetObjectItem(o, "duration_ms")),
               "NULL and negative duration are null");
        } else if (i == 2) {
            const char *rs = str(o, "reason");
            ok(rs &&
                   strstr(rs, "bad\nnewline \"quote\" \xef\xbf\xbd\xef\xbf\xbd tab\t"),
               "reason round-trips, invalid bytes replaced");
            ok(cJSON_GetObjectItem(o, "duration_ms")->valuedouble == 12.346,
               "duration rounded to microseconds");
        } else {
            ok(!strcmp(str(o, "extra"), "plain"),
               "a non-object extra lands in \"extra\"");
        }
        cJSON_Delete(o);
    }
    free(lines);
    free(text);
    unlink(p);
}

struct worker {
    struct hutch_audit *a;
    int id, failures;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    char pad[3001];
    memset(pad, 'a' + w->id, sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < NLINES; i++) {
        cJSON *extra = cJSON_CreateObject();
        cJSON_AddNumberToObject(extra, "thread", w->id);
        cJSON_AddNumberToObject(extra, "seq", i);
        cJSON_AddStringToObject(extra, "pad", pad);
        if (hutch_audit_log(w->a, "tool_call", "p", "e", "s.t", "allow", NULL, 1.0,
                            extra))
            w->failures++;
        cJSON_Delete(extra);
    }
    return NULL;
}

static void test_threads(void)
{
    struct hutch_audit *a;
    struct hutch_err e = {0};
    struct worker w[NTHREADS];
    pthread_t th[NTHREADS];
    static unsigned char seen[NTHREADS][NLINES];
    char p[PATH_MAX + 32], *text, **lines = NULL;
    size_t len;
    int n, bad = 0, failures = 0, dup = 0;

    snprintf(p, sizeof(p), "%s/threads.log", dir);
    if (hutch_audit_open(p, &a, &e) < 0) {
        ok(0, "open: %s", e.msg);
        return;
    }
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.a = a, .id = i};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    ok(failures == 0 && hutch_audit_dropped(a) == 0, "%d x %d lines logged", NTHREADS,
       NLINES);
    hutch_audit_close(a);

    text = slurp(p, &len);
    n = text ? split_lines(text, len, &lines) : -1;
    ok(n == NTHREADS * NLINES, "%d lines in the file", n);
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_Parse(lines[i]);
        cJSON *t = cJSON_GetObjectItem(o, "thread"), *s = cJSON_GetObjectItem(o, "seq");
        const char *pad = str(o, "pad");
        if (!o || !cJSON_IsNumber(t) || !cJSON_IsNumber(s) || t->valueint < 0 ||
            t->valueint >= NTHREADS || s->valueint < 0 || s->valueint >= NLINES ||
            !pad || strlen(pad) != 3000 || pad[0] != 'a' + t->valueint ||
            pad[2999] != 'a' + t->valueint) {
            bad++;
        } else if (seen[t->valueint][s->valueint]++) {
            dup++;
        }
        cJSON_Delete(o);
    }
    ok(n == NTHREADS * NLINES && bad == 0 && dup == 0,
       "every line whole and seen once (%d bad, %d duplicate)", bad, dup);
    free(lines);
    free(text);
    unlink(p);
}

static const char *secret_keys[] = {"token", "password", "api_key", NULL};
static int secret_calls;

static int is_secret(const void *arg, const char *key)
{
    secret_calls++;
    if (arg != (const void *)secret_keys)
        return -1;
    for (const char **k = secret_keys; *k; k++)
        if (!strcasecmp(*k, key))
            return 1;
    return 0;
}

static void test_redact(void)
{
    cJSON *in, *out, *deep, *cur;
    char *s;
    char longs[1001], euro[301], eacute[401];

    in = cJSON_Parse(
        "{\"q\": \"hello\", \"token\": \"sk-123\","
        " \"opts\": {\"Password\": {\"nested\": \"p\"}, \"n\": 5,"
        "  \"list\": [{\"api_key\": \"k\", \"ok\": true}, [\"token\"], null]},"
        " \"num\": 1.5}");
    secret_calls = 0;
    out = hutch_audit_redact(in, is_secret, secret_keys);
    s = cJSON_PrintUnformatted(out);
    ok(s && !strcmp(s,
                    "{\"q\":\"hello\",\"token\":\"[redacted]\",\"opts\":{\"Password\":"
                    "\"[redacted]\",\"n\":5,\"list\":[{\"api_key\":\"[redacted]\","
                    "\"ok\":true},[\"token\"],null]},\"num\":1.5}"),
       "secrets redacted at every depth, everything else kept: %s", s ? s : "NULL");
    ok(secret_calls > 0 && !strstr(s, "sk-123") && !strstr(s, "\"p\"") &&
           !strstr(s, "\"k\""),
       "no secret value left");
    free(s);
    s = cJSON_PrintUnformatted(in);
    ok(strstr(s, "sk-123") != NULL, "the input is untouched");
    free(s);
    cJSON_Delete(out);

    out = hutch_audit_redact(in, NULL, NULL);
    ok(cJSON_Compare(in, out, 1), "no is_secret: an equal copy");
    cJSON_Delete(out);
    cJSON_Delete(in);
    ok(hutch_audit_redact(NULL, is_secret, NULL) == NULL, "NULL args: NULL");

    /* Long strings, cut at a character boundary. */
    memset(longs, 'x', 1000);
    longs[1000] = '\0';
    for (int i = 0; i < 100; i++)
        memcpy(euro + 3 * i, "\xe2\x82\xac", 3);
    euro[300] = '\0';
    for (int i = 0; i < 200; i++)
        memcpy(eacute + 2 * i, "\xc3\xa9", 2);
    eacute[400] = '\0';
    in = cJSON_CreateObject();
    cJSON_AddStringToObject(in, "long", longs);
    cJSON_AddStringToObject(in, "euro", euro);
    cJSON_AddStringToObject(in, "eacute", eacute);
    cJSON_AddStringToObject(in, "exact", longs + 1000 - 256);
    cJSON_AddStringToObject(in, "bad", "a\xff\xc0\x80z\xed\xa0\x80");
    out = hutch_audit_redact(in, is_secret, secret_keys);
    const char *l = str(out, "long"), *eu = str(out, "euro"), *ea = str(out, "eacute");
    ok(l && strlen(l) == 256 + 3 && !strncmp(l, longs, 256) && !strcmp(l + 256, "…"),
       "1000 bytes cut to 256 + …");
    ok(eu && strlen(eu) == 255 + 3 && valid_utf8((const unsigned char *)eu) &&
           !strcmp(eu + 255, "…"),
       "3-byte characters cut at a boundary (%zu bytes)", eu ? strlen(eu) : 0);
    ok(ea && strlen(ea) == 256 + 3 && valid_utf8((const unsigned char *)ea),
       "2-byte characters cut at a boundary");
    ok(!strcmp(str(out, "exact"), longs + 1000 - 256), "exactly 256 bytes: not cut");
    ok(!strcmp(str(out, "bad"), "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef"
                                "\xbf\xbd\xef\xbf\xbd"),
       "invalid bytes, overlongs and surrogates become U+FFFD");
    cJSON_Delete(out);
    cJSON_Delete(in);

    /* Depth: 100 nested objects, a secret at the bottom. */
    deep = cJSON_CreateObject();
    cur = deep;
    for (int i = 0; i < 100; i++) {
        cJSON *next = cJSON_CreateObject();
        cJSON_AddItemToObject(cur, "d", next);
        cur = next;
    }
    cJSON_AddStringToObject(cur, "token", "deep-secret");
    out = hutch_audit_redact(deep, is_secret, secret_keys);
    s = cJSON_PrintUnformatted(out);
    ok(s && strstr(s, "[too deep]") && !strstr(s, "deep-secret"),
       "values below the depth cap are summarised");
    free(s);
    cJSON_Delete(out);
    cJSON_Delete(deep);

    /* A secret key at the first level just above the cap. */
    deep = cJSON_CreateObject();
    cur = deep;
    for (int i = 0; i < HUTCH_AUDIT_MAX_DEPTH - 1; i++) {
        cJSON *next = cJSON_CreateObject();
        cJSON_AddItemToObject(cur, "d", next);
        cur = next;
    }
    cJSON_AddStringToObject(cur, "token", "deep-secret");
    cJSON_AddStringToObject(cur, "visible", "v");
    out = hutch_audit_redact(deep, is_secret, secret_keys);
    s = cJSON_PrintUnformatted(out);
    ok(s && strstr(s, "\"token\":\"[redacted]\"") && strstr(s, "\"visible\":\"v\"") &&
           !strstr(s, "deep-secret"),
       "redaction at depth %d", HUTCH_AUDIT_MAX_DEPTH - 1);
    free(s);
    cJSON_Delete(out);
    cJSON_Delete(deep);
}

/* What the log shows of a tool call's arguments: by default their names
 * and what each value is; with values on, hutch_audit_redact's copy. */
static void test_args(void)
{
    struct hutch_audit *a = NULL;
    struct hutch_err e = {0};
    char path[PATH_MAX + 16];
    cJSON *in, *out;
    char *s;

    snprintf(path, sizeof(path), "%s/args.jsonl", dir);
    ok(hutch_audit_open(path, &a, &e) == 0, "open for args");
    in = cJSON_Parse("{\"to\": \"alice@example.com\", \"token\": \"sk-123\", \"n\": 5,"
                     " \"ok\": true, \"none\": null, \"tags\": [\"a\", \"b\", \"c\"],"
                     " \"by\": {\"bob@example.com\": 1, \"x\": 2}}");
    out = hutch_audit_args(a, in, is_secret, secret_keys);
    s = cJSON_PrintUnformatted(out);
    ok(s && !strcmp(s, "{\"to\":\"<string, 17 bytes>\",\"token\":\"[redacted]\","
                       "\"n\":\"<number>\",\"ok\":\"<boolean>\",\"none\":null,"
                       "\"tags\":\"<array, 3 items>\",\"by\":\"<object, 2 members>\"}"),
       "by default: each argument's name and what its value is, nothing of the "
       "value: %s",
       s ? s : "NULL");
    ok(s && !strstr(s, "example.com") && !strstr(s, "sk-123"),
       "no value, and no key below the arguments' own names");
    free(s);
    cJSON_Delete(out);
    {
        cJSON *arr = cJSON_Parse("[1, 2]");
        out = hutch_audit_args(a, arr, is_secret, secret_keys);
        ok(out && cJSON_IsString(out) && !strcmp(out->valuestring, "<array, 2 items>"),
           "arguments that are not an object: described whole");
        cJSON_Delete(out);
        cJSON_Delete(arr);
    }
    hutch_audit_set_values(a, 1);
    out = hutch_audit_args(a, in, is_secret, secret_keys);
    s = cJSON_PrintUnformatted(out);
    ok(s && strstr(s, "\"to\":\"alice@example.com\"") &&
           strstr(s, "\"token\":\"[redacted]\"") && strstr(s, "bob@example.com"),
       "values on: the values, secrets still redacted");
    free(s);
    cJSON_Delete(out);
    ok(hutch_audit_args(a, NULL, is_secret, secret_keys) == NULL, "NULL args: NULL");
    cJSON_Delete(in);
    hutch_audit_close(a);
    unlink(path);
}

static void test_limits(void)
{
    struct hutch_audit *a;
    struct hutch_err e = {0};
    char p[PATH_MAX + 32], q[PATH_MAX + 40], *text, **lines = NULL, big[1001];
    size_t len;
    int r, n;

    /* A full disk: dropped and counted, not fatal. */
    r = hutch_audit_open("/dev/full", &a, &e);
    if (r == 0) {
        r = hutch_audit_log(a, "auth", "p", NULL, NULL, "deny", "x", 0, NULL);
        ok(r == -ENOSPC && hutch_audit_dropped(a) == 1, "full disk: -ENOSPC, counted");
        hutch_audit_close(a);
    } else {
        ok(1, "# SKIP /dev/full: %s", e.msg);
    }

    /* A line over the cap: extra dropped, core kept. */
    snprintf(p, sizeof(p), "%s/big.log", dir);
    if (hutch_audit_open(p, &a, &e) < 0) {
        ok(0, "open: %s", e.msg);
        return;
    }
    memset(big, 'b', 1000);
    big[1000] = '\0';
    cJSON *extra = cJSON_CreateObject();
    for (int i = 0; i < 100; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        cJSON_AddStringToObject(extra, k, big);
    }
    ok(hutch_audit_log(a, "execution", "p", "e", NULL, "ok", NULL, 1, extra) == 0,
       "log a line over the cap");
    cJSON_Delete(extra);

    /* Rotation: move the file away, reopen, the next line lands in a new
     * file. */
    snprintf(q, sizeof(q), "%s.1", p);
    ok(rename(p, q) == 0 && hutch_audit_reopen(a) == 0, "rotated and reopened");
    ok(hutch_audit_log(a, "policy_reload", NULL, NULL, NULL, "ok", NULL, 2, NULL) == 0,
       "log after reopen");
    hutch_audit_close(a);

    text = slurp(q, &len);
    n = text ? split_lines(text, len, &lines) : -1;
    if (n == 1) {
        cJSON *o = cJSON_Parse(lines[0]);
        ok(len <= HUTCH_AUDIT_MAX_LINE &&
               cJSON_IsTrue(cJSON_GetObjectItem(o, "extra_dropped")) &&
               !cJSON_HasObjectItem(o, "k0") && !strcmp(str(o, "principal"), "p"),
           "oversized line: core kept, extra dropped (%zu bytes)", len);
        cJSON_Delete(o);
    } else {
        ok(0, "old file has one line (%d)", n);
    }
    free(lines);
    lines = NULL;
    free(text);
    text = slurp(p, &len);
    n = text ? split_lines(text, len, &lines) : -1;
    ok(n == 1 && strstr(lines[0], "policy_reload"),
       "new file has the line after reopen");
    free(lines);
    free(text);
    unlink(p);
    unlink(q);
}

/* stderr on a pipe nobody reads: bounded wait, then drops without waiting,
 * then recovery once the reader drains it. */
static void test_stderr_pipe(void)
{
    struct hutch_audit *a;
    struct hutch_err e = {0};
    int pfd[2], saved, r = 0, logged = 0;
    char pad[1001], buf[65536];
    uint64_t t0, t_first, t_second;

    memset(pad, 'z', 1000);
    pad[1000] = '\0';
    if (pipe(pfd) < 0)
        return;
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    dup2(pfd[1], STDERR_FILENO);
    r = hutch_audit_open(NULL, &a, &e);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(pfd[1]); /* the audit log has its own description of the pipe */
    ok(r == 0, "audit log on stderr (a pipe)");
    if (r < 0)
        return;
    cJSON *extra = cJSON_CreateObject();
    cJSON_AddStringToObject(extra, "pad", pad);
    t0 = now_ms();
    while ((r = hutch_audit_log(a, "execution", "p", "e", NULL, "ok", NULL, 1,
                                extra)) == 0 &&
           logged < 10000)
        logged++;
    t_first = now_ms() - t0;
    ok(r == -EAGAIN && t_first >= HUTCH_AUDIT_WRITE_MS - 50 &&
           t_first < HUTCH_AUDIT_WRITE_MS + 2000,
       "a full pipe: %d lines, then a drop after %llu ms", logged,
       (unsigned long long)t_first);
    t0 = now_ms();
    r = hutch_audit_log(a, "execution", "p", "e", NULL, "ok", NULL, 1, extra);
    t_second = now_ms() - t0;
    ok(r == -EAGAIN && t_second < 100 && hutch_audit_dropped(a) == 2,
       "the next drop does not wait (%llu ms)", (unsigned long long)t_second);

    /* Drain, then the next line gets through. */
    int fl = fcntl(pfd[0], F_GETFL);
    fcntl(pfd[0], F_SETFL, fl | O_NONBLOCK);
    size_t total = 0;
    ssize_t n;
    char *all = NULL;
    while ((n = read(pfd[0], buf, sizeof(buf))) > 0) {
        all = realloc(all, total + (size_t)n + 1);
        memcpy(all + total, buf, (size_t)n);
        total += (size_t)n;
    }
    r = hutch_audit_log(a, "auth", "p", NULL, NULL, "allow", NULL, 1, NULL);
    ok(r == 0, "after draining, lines flow again");
    while ((n = read(pfd[0], buf, sizeof(buf))) > 0) {
        all = realloc(all, total + (size_t)n + 1);
        memcpy(all + total, buf, (size_t)n);
        total += (size_t)n;
    }
    if (all)
        all[total] = '\0';
    char **lines = NULL;
    int nl = all ? split_lines(all, total, &lines) : -1, bad = 0;
    for (int i = 0; i < nl; i++) {
        cJSON *o = cJSON_Parse(lines[i]);
        bad += !o;
        cJSON_Delete(o);
    }
    ok(nl == logged + 1 && bad == 0, "every line read is whole JSON (%d lines, %d bad)",
       nl, bad);
    free(lines);
    free(all);
    cJSON_Delete(extra);
    hutch_audit_close(a);
    close(pfd[0]);
}

/* Arguments of a million values are not copied whole for the audit log
 * (the copy was as large as the arguments, outside the execution's memory
 * budget, and then dropped for being longer than a line). */
static void test_redact_bounded(void)
{
    cJSON *in = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(in, "pad"), *out,
          *last;
    char *text;
    for (int i = 0; i < 1000000; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(0));
    cJSON_AddStringToObject(in, "to", "someone");
    out = hutch_audit_redact(in, NULL, NULL);
    text = out ? cJSON_PrintUnformatted(out) : NULL;
    last = cJSON_GetArrayItem(cJSON_GetObjectItem(out, "pad"),
                              cJSON_GetArraySize(cJSON_GetObjectItem(out, "pad")) - 1);
    ok(text && strlen(text) < 2 * HUTCH_AUDIT_MAX_LINE,
       "a million values: the copy stays within about a line (%zu bytes)",
       text ? strlen(text) : 0);
    ok(cJSON_IsString(last) && strstr(last->valuestring, "more items left out"),
       "and says how many it left out: %s",
       cJSON_IsString(last) ? last->valuestring : "");
    ok(cJSON_IsString(cJSON_GetObjectItem(out, "…")),
       "members past the room are counted under \"…\"");
    free(text);
    cJSON_Delete(out);
    cJSON_Delete(in);
}

int main(void)
{
    char tmpl[] = "/tmp/hutch-audit-XXXXXX";

    if (!mkdtemp(tmpl)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    snprintf(dir, sizeof(dir), "%s", tmpl);
    test_open_errors();
    test_lines();
    test_threads();
    test_redact();
    test_args();
    test_redact_bounded();
    test_limits();
    test_stderr_pipe();
    rmdir(dir);
    return tap_done();
}
