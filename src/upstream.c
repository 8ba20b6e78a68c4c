/* upstream.c — hutch as an MCP client of the user's own servers
 * ("upstreams"): the servers file, stdio children, streamable HTTP through
 * libcurl, the initialize / tools/list lifecycle, restarts with backoff, and
 * tools/call multiplexed by JSON-RPC id.
 *
 * Threads.  Every server has a supervisor thread: it spawns or connects,
 * initializes, re-reads tools on list_changed, and restarts with backoff.
 * A stdio call costs no thread hop on the way out: the caller's thread
 * writes its request to the child's stdin itself, as much as the pipe takes
 * without blocking, and waits on its own condition variable.  A stdio child
 * also has an I/O thread, the only reader of its stdout and stderr: it
 * hands each response straight to the caller waiting for it, and writes
 * what the pipe did not take at once, so a child that stops reading its
 * stdin cannot block a caller past its timeout.  HTTP calls are plain
 * blocking POSTs in the caller's thread.  Our threads block every signal
 * (hutch's main thread takes them); a write to a child's stdin raises no
 * SIGPIPE in any thread (writev_quiet).
 *
 * Locks: u->lock only guards start-up progress and is never held while a
 * server's lock is taken; a server's lock guards its state, tools, child,
 * pending calls and HTTP session.  A child's wlock guards its stdin and the
 * bytes queued for it; it is taken alone or inside the server's lock, never
 * the other way round.  A writer takes it before leaving the server's lock
 * under which it found s->child, and a teardown takes it once after
 * unpublishing the child, so a child is never freed under a writer.
 *
 * The parser of HTTP responses is also reachable alone, without curl or a
 * server, through upstream_parse.h (for the fuzz harness).
 *
 * Not here: what hutch serves to agents (mcp_server.c), searching tools
 * (catalog.c). */
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
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "curl_lib.h"
#include "log.h"
#include "upstream.h"
#include "upstream_parse.h"
#include "util.h"

extern char **environ;

#define PROTOCOL_VERSION "2025-11-25"
#define READ_CHUNK       65536
#define SNIPPET          200 /* bytes of an unexpected body quoted in an error */

enum transport { TR_STDIO, TR_HTTP };
/* disabled, skipped: never started ("disabled": true, an unsupported type). */
enum state { ST_STARTING, ST_READY, ST_FAILED, ST_RESTARTING, ST_DISABLED, ST_SKIPPED };

static const char *const state_names[] = {"starting",   "ready",    "failed",
                                          "restarting", "disabled", "skipped"};

struct outmsg {
    struct outmsg *next;
    size_t len, off;
    char buf[];
};

/* A request waiting for its response; lives on the caller's stack. */
struct pending {
    struct pending *next;
    int64_t id;
    bool done;
    int code;     /* 0 with reply, or negative */
    cJSON *reply; /* the whole response message */
    char why[256];
    pthread_cond_t cond;
};

/* One incarnation of a stdio server.  pid, the fds and the thread are set
 * before the child is published; the write side is under wlock, the rest
 * under the server's lock. */
struct child {
    struct server *s;
    pid_t pid;
    bool reaped;
    int out_fd, err_fd, wake_fd; /* out/err: the I/O thread's */
    pthread_t io;
    bool io_started;
    pthread_mutex_t wlock; /* in_fd's writes and close, and the queue */
    int in_fd;
    struct outmsg *q_head, *q_tail; /* what the pipe did not take at once */
    size_t q_bytes;
    bool in_failed;   /* a write failed: the I/O thread reports it */
    bool close_in;    /* close stdin (graceful stop) */
    uint64_t quit_at; /* the I/O thread ends at this time (0: not asked) */
    bool dead;        /* stdout closed */
    int broken;       /* negative: a protocol violation, it must go */
    char broken_why[160];
    uint64_t garbage; /* lines that were not JSON-RPC */
    char last_err[256];
};

/* An easy handle and the multi handle that drives it; the connection cache
 * lives in the multi handle, so the pair is pooled together. */
struct hconn {
    CURL *h;
    CURLM *m;
};

struct server {
    struct hutch_upstreams *u;
    char name[HUTCH_MAX_SERVER_NAME + 1];
    char who[HUTCH_MAX_SERVER_NAME + 16];
    enum transport tr;
    /* stdio */
    char *command;
    char **argv; /* command, args..., NULL */
    char **env;  /* "K=V" overrides, NULL-terminated */
    char *cwd;
    /* http */
    char *url;
    char **headers; /* "Name: value", NULL-terminated */
    int call_ms;    /* the entry's "timeout_ms" per tools/call; 0: u->call_ms */

    pthread_t sup;
    bool sup_started;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* wakes the supervisor */
    enum state state;
    bool settled; /* left "starting" once */
    char error[HUTCH_ERR_MSG];
    cJSON *tools; /* array, kept while ready */
    bool list_changed;
    uint64_t ready_since;
    int64_t next_id;
    struct child *child;
    struct pending *pending;
    /* http, under lock */
    char *session;
    char proto[32];
    uint64_t session_gen;
    struct hconn pool[HUTCH_UPSTREAM_HTTP_POOL];
    int npool;
    pthread_mutex_t reinit_lock; /* one (re-)initialize at a time */
};

struct hutch_upstreams {
    struct server *srv;
    size_t n;
    int call_ms, start_ms;
    char *client_name;
    bool stop;           /* atomic */
    uint64_t generation; /* atomic */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t settled; /* servers that left "starting" */
};

/* --- small helpers ------------------------------------------------------ */

static bool stopping(const struct hutch_upstreams *u)
{
    return __atomic_load_n(&u->stop, __ATOMIC_ACQUIRE);
}

static void gen_bump(struct hutch_upstreams *u)
{
    __atomic_add_fetch(&u->generation, 1, __ATOMIC_ACQ_REL);
}

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* Wait until deadline_ms on hutch_now_ms()'s clock; ETIMEDOUT once passed. */
static int cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
                          .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    return pthread_cond_timedwait(c, m, &ts);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static unsigned ms_left(uint64_t deadline)
{
    uint64_t now = hutch_now_ms();
    return deadline > now ? (unsigned)(deadline - now) : 0;
}

/* Untrusted text made fit for a log line or an error message: control
 * characters become '?', at most cap - 1 bytes, never a cut UTF-8
 * sequence. */
static void clean_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = 0;

    if (!cap)
        return;
    if (len > cap - 1) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[n++] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? '?' : (char)ch;
    }
    dst[n] = '\0';
}

static char **strv_new(size_t n)
{
    return calloc(n + 1, sizeof(char *));
}

static void strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

/* Not strchr(" \t\r\n", ch): that matches a NUL byte too. */
static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static const cJSON *get(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* A JSON-RPC id we could have sent: a positive integer. */
static bool rpc_id(const cJSON *id, int64_t *out)
{
    double d;

    if (!cJSON_IsNumber(id))
        return false;
    d = id->valuedouble;
    if (!(d >= 1 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
        return false;
    *out = (int64_t)d;
    return true;
}

/* {"jsonrpc": "2.0", "id"?: id, "method"?: method, "params"?: dup(params)} */
static cJSON *rpc_new(int64_t id, const char *method, const cJSON *params)
{
    cJSON *m = cJSON_CreateObject(), *p = NULL;

    if (!m || !cJSON_AddStringToObject(m, "jsonrpc", "2.0") ||
        (id > 0 && !cJSON_AddNumberToObject(m, "id", (double)id)) ||
        (method && !cJSON_AddStringToObject(m, "method", method)))
        goto fail;
    if (params) {
        p = cJSON_Duplicate(params, true);
        if (!p)
            goto fail;
        cJSON_AddItemToObject(m, "params", p);
    }
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

static bool version_ok(const char *v)
{
    return !strcmp(v, "2025-11-25") || !strcmp(v, "2025-06-18") ||
           !strcmp(v, "2025-03-26");
}

/* --- the servers file --------------------------------------------------- */

static bool name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len < 1 || len > HUTCH_MAX_SERVER_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

static bool header_name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len < 1 || len > 256)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return true;
}

/* Headers hutch sets itself. */
static bool header_reserved(const char *n)
{
    static const char *const reserved[] = {"content-type",   "accept",
                                           "mcp-session-id", "mcp-protocol-version",
                                           "content-length", "transfer-encoding"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (!strcasecmp(n, reserved[i]))
            return true;
    return false;
}

static bool text_has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* http:// or https://, a host, no spaces or control characters. */
static bool url_ok(const cJSON *url)
{
    const char *v = cJSON_IsString(url) ? url->valuestring : NULL;
    size_t skip;

    if (!v || strlen(v) > HUTCH_UPSTREAM_MAX_URL || text_has_ctl(v) ||
        strpbrk(v, " \"<>\\^`{|}"))
        return false;
    if (!strncasecmp(v, "http://", 7))
        skip = 7;
    else if (!strncasecmp(v, "https://", 8))
        skip = 8;
    else
        return false;
    return v[skip] && v[skip] != '/';
}

__attribute__((format(printf, 4, 5))) static int cfg_err(struct hutch_err *err,
                                                         const char *where,
                                                         const char *name,
                                                         const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return hutch_err_set(err, -EINVAL, "%s: server \"%s\": %s", where, name, what);
}

/* --- ${VAR} in the servers file ------------------------------------------
 *
 * Claude Code's syntax in .mcp.json: ${VAR} is the variable's value (an
 * error when it is unset), ${VAR:-default} is default when VAR is unset or
 * empty (as in the shell).  VS Code's ${env:VAR} is read as ${VAR}.  $${
 * is a literal "${"; any other $ is itself.  Expanded in "command",
 * "args", "env" values, "cwd", "url" and "headers" values, never in names.
 * Values come from hutch's own environment when the file is loaded. */

static bool var_char(char ch, bool first)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* 0 and *out (caller frees); -ENOENT unset (var names it), -EINVAL
 * malformed (var holds what was written), -E2BIG, -ENOMEM. */
static int expand_text(const char *in, char **out, char *var, size_t var_cap)
{
    struct hutch_buf b;
    const char *p = in;
    int r = 0;

    hutch_buf_init(&b, HUTCH_UPSTREAM_MAX_EXPANDED);
    var[0] = '\0';
    while (*p && r == 0) {
        const char *dollar = strchr(p, '$'), *name, *close, *val;
        size_t nlen;
        if (!dollar) {
            r = hutch_buf_appends(&b, p);
            break;
        }
        r = hutch_buf_append(&b, p, (size_t)(dollar - p));
        if (r < 0)
            break;
        if (!strncmp(dollar, "$${", 3)) {
            r = hutch_buf_appends(&b, "${");
            p = dollar + 3;
            continue;
        }
        if (dollar[1] != '{') {
            r = hutch_buf_append(&b, "$", 1);
            p = dollar + 1;
            continue;
        }
        name = dollar + 2;
        if (!strncmp(name, "env:", 4))
            name += 4;
        for (nlen = 0; var_char(name[nlen], nlen == 0); nlen++)
            ;
        close = strchr(name + nlen, '}');
        if (!nlen || !close || (name[nlen] != '}' && strncmp(name + nlen, ":-", 2))) {
            clean_text(var, var_cap, dollar,
                       close ? (size_t)(close - dollar + 1) : strnlen(dollar, 16));
            r = -EINVAL;
            break;
        }
        clean_text(var, var_cap, name, nlen);
        val = nlen < var_cap - 1 ? getenv(var) : NULL;
        if (name[nlen] == ':' && (!val || !*val))
            r = hutch_buf_append(&b, name + nlen + 2,
                                 (size_t)(close - name - nlen - 2));
        else if (!val)
            r = -ENOENT;
        else
            r = hutch_buf_appends(&b, val);
        p = close + 1;
    }
    if (r == 0) {
        *out = hutch_buf_steal(&b, NULL);
        r = *out ? 0 : -ENOMEM;
    }
    hutch_buf_free(&b);
    return r;
}

/* Expand one string item in place; `field` names it in errors. */
static int expand_item(const char *where, const char *name, const char *field,
                       cJSON *item, struct hutch_err *err)
{
    char var[80], *v = NULL;
    int r;

    if (!cJSON_IsString(item) || !strstr(item->valuestring, "${"))
        return 0; /* the checks that follow name a wrong type */
    r = expand_text(item->valuestring, &v, var, sizeof(var));
    if (r == -ENOENT)
        return cfg_err(err, where, name,
                       "%s: ${%s} is not set (set it, or give a default: "
                       "${%s:-value})",
                       field, var, var);
    if (r == -EINVAL)
        return cfg_err(err, where, name,
                       "%s: \"%s\" is not a variable: write ${NAME} or "
                       "${NAME:-default}, or $${ for a literal \"${\"",
                       field, var);
    if (r == -E2BIG)
        return cfg_err(err, where, name, "%s is longer than %u bytes once expanded",
                       field, HUTCH_UPSTREAM_MAX_EXPANDED);
    if (r < 0)
        return hutch_err_set(err, r, "out of memory");
    r = cJSON_SetValuestring(item, v) ? 0
                                      : hutch_err_set(err, -ENOMEM, "out of memory");
    free(v);
    return r;
}

/* A copy of entry e with its variables expanded (caller frees). */
static int expand_entry(const char *where, const char *name, const cJSON *e,
                        cJSON **out, struct hutch_err *err)
{
    static const char *const scalars[] = {"command", "cwd", "url"};
    static const char *const maps[] = {"env", "headers"};
    cJSON *x = cJSON_Duplicate(e, true), *it;
    char field[HUTCH_MAX_SERVER_NAME + 300];
    int r = 0, i;

    *out = NULL;
    if (!x)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    for (size_t k = 0; k < 3 && r == 0; k++) {
        snprintf(field, sizeof(field), "\"%s\"", scalars[k]);
        r = expand_item(where, name, field,
                        cJSON_GetObjectItemCaseSensitive(x, scalars[k]), err);
    }
    i = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(x, "args"))
    {
        if (r < 0 || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(x, "args")))
            break;
        snprintf(field, sizeof(field), "\"args\"[%d]", i++);
        r = expand_item(where, name, field, it, err);
    }
    for (size_t k = 0; k < 2 && r == 0; k++) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(x, maps[k]);
        if (!cJSON_IsObject(m))
            continue;
        cJSON_ArrayForEach(it, m)
        {
            char key[256];
            clean_text(key, sizeof(key), it->string, strlen(it->string));
            snprintf(field, sizeof(field), "\"%s\".\"%s\"", maps[k], key);
            r = expand_item(where, name, field, it, err);
            if (r < 0)
                break;
        }
    }
    if (r < 0) {
        cJSON_Delete(x);
        return r;
    }
    *out = x;
    return 0;
}

/* --- what an entry is --------------------------------------------------- */

/* Keys hutch reads, then keys other clients write that hutch leaves alone
 * (README, "The servers file"). */
static const char *const entry_keys[] = {"type", "command", "args", "env", "cwd", "url",
                                         "headers", "timeout_ms", "disabled",
                                         "transportType",
                                         /* ignored: */
                                         "alwaysAllow", "autoApprove", "disabledTools",
                                         "timeout", "watchPaths", "description", NULL};
#define ENTRY_KEYS_READ 10

enum entry_kind { ENTRY_RUN, ENTRY_DISABLED, ENTRY_SKIPPED };

/* The entry's "type" (or Cline's older "transportType"), or NULL. */
static const cJSON *entry_type(const cJSON *e)
{
    const cJSON *t = get(e, "type");
    return t ? t : get(e, "transportType");
}

static bool type_http(const char *t)
{
    return !strcmp(t, "http") || !strcmp(t, "streamable-http") ||
           !strcmp(t, "streamableHttp");
}

/* Whether entry e runs; why: for a skipped entry, the reason. */
static int entry_kind(const char *where, const char *name, const cJSON *e, char *why,
                      size_t why_cap, struct hutch_err *err)
{
    const cJSON *d, *t;

    why[0] = '\0';
    if (!cJSON_IsObject(e))
        return cfg_err(err, where, name, "must be an object");
    d = get(e, "disabled");
    if (d && !cJSON_IsBool(d))
        return cfg_err(err, where, name, "\"disabled\" must be true or false");
    if (cJSON_IsTrue(d))
        return ENTRY_DISABLED;
    t = entry_type(e);
    if (!t || !cJSON_IsString(t) || !strcmp(t->valuestring, "stdio") ||
        type_http(t->valuestring))
        return ENTRY_RUN; /* a wrong type is parse_entry's error */
    if (!strcmp(t->valuestring, "sse")) {
        snprintf(why, why_cap,
                 "\"type\": \"sse\" (the old HTTP+SSE transport) is not supported; "
                 "if the server also speaks streamable HTTP, use \"type\": \"http\"");
    } else {
        char shown[64];
        clean_text(shown, sizeof(shown), t->valuestring, strlen(t->valuestring));
        snprintf(why, why_cap,
                 "unknown \"type\" \"%s\" (hutch runs \"stdio\" and \"http\")", shown);
    }
    return ENTRY_SKIPPED;
}

/* Warn about the keys of e that nobody reads. */
static void warn_keys(const char *where, const char *name, const cJSON *e)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, e)
    {
        const char *const *k;
        const char *near;
        char shown[80];
        size_t i = 0;
        for (k = entry_keys; *k && strcmp(*k, it->string); k++)
            i++;
        if (*k) {
            if (i >= ENTRY_KEYS_READ)
                hutch_info("%s: server \"%s\": \"%s\" (another client's setting) is "
                           "ignored",
                           where, name, *k);
            continue;
        }
        clean_text(shown, sizeof(shown), it->string, strlen(it->string));
        near = hutch_suggest(it->string, entry_keys);
        hutch_warn("%s: server \"%s\": unknown key \"%s\" is ignored%s%s%s", where,
                   name, shown, near ? " (did you mean \"" : "", near ? near : "",
                   near ? "\"?)" : "");
    }
}

/* Check one entry (its variables expanded) that runs; with s, also fill
 * its configuration. */
static int parse_fields(const char *where, const char *name, const cJSON *e,
                        struct server *s, struct hutch_err *err)
{
    const cJSON *type, *cmd, *url, *args, *env, *cwd, *hdrs, *it, *tmo;
    enum transport tr;
    size_t n, i;

    if (!cJSON_IsObject(e))
        return cfg_err(err, where, name, "must be an object");
    /* The time one tools/call may take (README, "Tool calls that hang").
     * Not "timeout": Cline reads it in seconds, Gemini CLI in ms. */
    tmo = get(e, "timeout_ms");
    if (tmo && (!cJSON_IsNumber(tmo) || tmo->valuedouble < 1 ||
                tmo->valuedouble > (double)HUTCH_MAX_TIMEOUT_MS ||
                tmo->valuedouble != (double)(int)tmo->valuedouble))
        return cfg_err(
            err, where, name,
            "\"timeout_ms\" must be a whole number of milliseconds from 1 to %u",
            HUTCH_MAX_TIMEOUT_MS);
    if (s && tmo)
        s->call_ms = (int)tmo->valuedouble;
    type = entry_type(e);
    cmd = get(e, "command");
    url = get(e, "url");
    if (type) {
        /* entry_kind skipped the other types */
        if (!cJSON_IsString(type))
            return cfg_err(err, where, name, "\"type\" must be a string");
        tr = type_http(type->valuestring) ? TR_HTTP : TR_STDIO;
    } else {
        tr = !cmd && url ? TR_HTTP : TR_STDIO;
    }

    if (tr == TR_STDIO) {
        if (!cmd)
            return cfg_err(err, where, name,
                           "\"command\" is missing (or use \"type\": \"http\" with "
                           "\"url\")");
        if (!cJSON_IsString(cmd) || !cmd->valuestring[0] ||
            strlen(cmd->valuestring) >= PATH_MAX)
            return cfg_err(err, where, name, "\"command\" must be a non-empty string");
        args = get(e, "args");
        n = 0;
        if (args) {
            if (!cJSON_IsArray(args))
                return cfg_err(err, where, name,
                               "\"args\" must be an array of strings");
            cJSON_ArrayForEach(it, args)
            {
                if (!cJSON_IsString(it))
                    return cfg_err(err, where, name,
                                   "\"args\" must be an array of strings");
                n++;
            }
            if (n > HUTCH_UPSTREAM_MAX_ARGS)
                return cfg_err(err, where, name, "\"args\" has %zu entries, at most %d",
                               n, HUTCH_UPSTREAM_MAX_ARGS);
        }
        env = get(e, "env");
        if (env) {
            size_t ne = 0;
            if (!cJSON_IsObject(env))
                return cfg_err(err, where, name,
                               "\"env\" must be an object of strings");
            cJSON_ArrayForEach(it, env)
            {
                if (!cJSON_IsString(it))
                    return cfg_err(err, where, name,
                                   "\"env\" must be an object of strings");
                if (!it->string[0] || strchr(it->string, '=') ||
                    text_has_ctl(it->string))
                    return cfg_err(err, where, name,
                                   "\"env\" has an invalid variable name");
                ne++;
            }
            if (ne > HUTCH_UPSTREAM_MAX_ENV)
                return cfg_err(err, where, name, "\"env\" has %zu entries, at most %d",
                               ne, HUTCH_UPSTREAM_MAX_ENV);
        }
        cwd = get(e, "cwd");
        if (cwd && (!cJSON_IsString(cwd) || !cwd->valuestring[0]))
            return cfg_err(err, where, name, "\"cwd\" must be a non-empty string");
        if (!s)
            return 0;

        s->tr = TR_STDIO;
        s->command = strdup(cmd->valuestring);
        s->argv = strv_new(n + 1);
        if (!s->command || !s->argv)
            return -ENOMEM;
        s->argv[0] = strdup(cmd->valuestring);
        if (!s->argv[0])
            return -ENOMEM;
        i = 1;
        cJSON_ArrayForEach(it, args)
        {
            if (!(s->argv[i++] = strdup(it->valuestring)))
                return -ENOMEM;
        }
        s->env = strv_new((size_t)cJSON_GetArraySize(env));
        if (!s->env)
            return -ENOMEM;
        i = 0;
        cJSON_ArrayForEach(it, env)
        {
            if (asprintf(&s->env[i], "%s=%s", it->string, it->valuestring) < 0) {
                s->env[i] = NULL;
                return -ENOMEM;
            }
            i++;
        }
        if (cwd && !(s->cwd = strdup(cwd->valuestring)))
            return -ENOMEM;
        return 0;
    }

    if (!url)
        return cfg_err(err, where, name, "\"url\" is missing");
    if (!url_ok(url))
        return cfg_err(err, where, name, "\"url\" must be an http:// or https:// URL");
    hdrs = get(e, "headers");
    n = 0;
    if (hdrs) {
        if (!cJSON_IsObject(hdrs))
            return cfg_err(err, where, name,
                           "\"headers\" must be an object of strings");
        cJSON_ArrayForEach(it, hdrs)
        {
            if (!cJSON_IsString(it))
                return cfg_err(err, where, name,
                               "\"headers\" must be an object of strings");
            if (!header_name_ok(it->string))
                return cfg_err(err, where, name,
                               "\"headers\" has an invalid header name");
            if (header_reserved(it->string))
                return cfg_err(err, where, name,
                               "\"headers\": \"%s\" is set by hutch and cannot be "
                               "configured",
                               it->string);
            if (text_has_ctl(it->valuestring) || strlen(it->valuestring) > 8192)
                return cfg_err(
                    err, where, name,
                    "\"headers\": the value of \"%s\" has control characters "
                    "or is too long",
                    it->string);
            n++;
        }
        if (n > HUTCH_UPSTREAM_MAX_HEADERS)
            return cfg_err(err, where, name, "\"headers\" has %zu entries, at most %d",
                           n, HUTCH_UPSTREAM_MAX_HEADERS);
    }
    if (!s)
        return 0;

    s->tr = TR_HTTP;
    s->url = strdup(url->valuestring);
    s->headers = strv_new(n);
    if (!s->url || !s->headers)
        return -ENOMEM;
    i = 0;
    cJSON_ArrayForEach(it, hdrs)
    {
        if (asprintf(&s->headers[i], "%s: %s", it->string, it->valuestring) < 0) {
            s->headers[i] = NULL;
            return -ENOMEM;
        }
        i++;
    }
    return 0;
}

/* Check one entry that runs: its variables expanded, then its fields; with
 * s, also fill its configuration. */
static int parse_entry(const char *where, const char *name, const cJSON *e,
                       struct server *s, struct hutch_err *err)
{
    cJSON *x = NULL;
    int r = expand_entry(where, name, e, &x, err);

    if (r < 0)
        return r;
    r = parse_fields(where, name, x, s, err);
    cJSON_Delete(x);
    return r;
}

/* Check every entry of `servers` (the file's `key` object).  warn: say
 * which entries are disabled or skipped and which keys nobody reads (once,
 * when the file is loaded). */
static int check_servers(const char *where, const char *key, const cJSON *servers,
                         bool warn, struct hutch_err *err)
{
    const cJSON *e, *o;
    char why[256];
    int n = 0, r;

    if (!cJSON_IsObject(servers))
        return hutch_err_set(err, -EINVAL, "%s: \"%s\" must be an object", where, key);
    cJSON_ArrayForEach(e, servers)
    {
        if (++n > HUTCH_UPSTREAM_MAX_SERVERS)
            return hutch_err_set(err, -EINVAL, "%s: more than %d servers in \"%s\"",
                                 where, HUTCH_UPSTREAM_MAX_SERVERS, key);
        if (!name_ok(e->string)) {
            char shown[80];
            clean_text(shown, sizeof(shown), e->string, strlen(e->string));
            return hutch_err_set(
                err, -EINVAL,
                "%s: server name \"%s\" is invalid: use 1-%d characters "
                "of A-Z a-z 0-9 _ . -",
                where, shown, HUTCH_MAX_SERVER_NAME);
        }
        for (o = servers->child; o != e; o = o->next)
            if (!strcmp(o->string, e->string))
                return hutch_err_set(err, -EINVAL, "%s: server \"%s\" is defined twice",
                                     where, e->string);
        r = entry_kind(where, e->string, e, why, sizeof(why), err);
        if (r < 0)
            return r;
        if (r == ENTRY_DISABLED && warn)
            hutch_info("%s: server \"%s\" is disabled: not started", where, e->string);
        if (r == ENTRY_SKIPPED && warn)
            hutch_warn("%s: server \"%s\" is skipped: %s", where, e->string, why);
        if (r != ENTRY_RUN)
            continue;
        if (warn)
            warn_keys(where, e->string, e);
        r = parse_entry(where, e->string, e, NULL, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int hutch_upstreams_load(const char *path, cJSON **config, struct hutch_err *err)
{
    char *data = NULL;
    size_t len = 0;
    cJSON *root = NULL, *servers, *vscode;
    const char *end = NULL, *key = "mcpServers";
    int r;

    if (!path || !config)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_load: bad arguments");
    *config = NULL;
    r = hutch_read_file(path, HUTCH_UPSTREAM_MAX_CONFIG, &data, &len, err);
    if (r < 0)
        return r;
    root = cJSON_ParseWithLengthOpts(data, len, &end, false);
    if (root && end) {
        while (end < data + len && is_space(*end))
            end++;
    }
    if (!root || end != data + len) {
        unsigned line = 1, col = 1;
        for (const char *p = data; end && p < end && p < data + len; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        r = hutch_err_set(
            err, -EINVAL, "%s: %s at line %u, column %u", path,
            root ? "unexpected data after the JSON value" : "invalid JSON", line, col);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: expected a JSON object with \"mcpServers\"", path);
        goto out;
    }
    /* Claude Desktop, Claude Code, Cline, Roo Code: "mcpServers"; VS Code's
     * .vscode/mcp.json: "servers", the same entries. */
    servers = cJSON_GetObjectItemCaseSensitive(root, "mcpServers");
    vscode = cJSON_GetObjectItemCaseSensitive(root, "servers");
    if (servers && vscode) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: both \"mcpServers\" and \"servers\" (VS Code's name): "
                          "keep one",
                          path);
        goto out;
    }
    if (vscode) {
        servers = vscode;
        key = "servers";
    }
    if (!servers) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: no \"mcpServers\" object (or VS Code's \"servers\")",
                          path);
        goto out;
    }
    r = check_servers(path, key, servers, true, err);
    if (r < 0)
        goto out;
    *config = cJSON_DetachItemViaPointer(root, servers);
out:
    cJSON_Delete(root);
    free(data);
    return r;
}

/* --- state -------------------------------------------------------------- */

static void note_settled(struct server *s, bool first)
{
    if (!first)
        return;
    pthread_mutex_lock(&s->u->lock);
    s->u->settled++;
    pthread_cond_broadcast(&s->u->cond);
    pthread_mutex_unlock(&s->u->lock);
}

/* Leave "ready" (or stay out of it) with a reason. */
static void set_down(struct server *s, enum state st, const char *why)
{
    bool was_ready, first;

    pthread_mutex_lock(&s->lock);
    was_ready = s->state == ST_READY;
    /* A server that keeps failing to come back stays "failed". */
    if (st == ST_RESTARTING && s->state == ST_FAILED)
        st = ST_FAILED;
    s->state = st;
    snprintf(s->error, sizeof(s->error), "%s", why);
    cJSON_Delete(s->tools);
    s->tools = NULL;
    first = !s->settled && st == ST_FAILED;
    if (first)
        s->settled = true;
    pthread_mutex_unlock(&s->lock);
    if (was_ready)
        gen_bump(s->u);
    note_settled(s, first);
}

static void set_ready(struct server *s, cJSON *tools)
{
    bool first;

    pthread_mutex_lock(&s->lock);
    cJSON_Delete(s->tools);
    s->tools = tools;
    s->state = ST_READY;
    s->error[0] = '\0';
    s->ready_since = hutch_now_ms();
    first = !s->settled;
    s->settled = true;
    pthread_mutex_unlock(&s->lock);
    gen_bump(s->u);
    note_settled(s, first);
}

/* Sleep the backoff, or less when hutch stops. */
static void wait_backoff(struct server *s, unsigned ms)
{
    uint64_t deadline = hutch_now_ms() + ms;

    pthread_mutex_lock(&s->lock);
    while (!stopping(s->u) &&
           cond_wait_until(&s->cond, &s->lock, deadline) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&s->lock);
}

/* --- what upstreams send us, whatever the transport --------------------- */

static void on_notification(struct server *s, const char *method, const cJSON *params)
{
    if (!strcmp(method, "notifications/tools/list_changed")) {
        pthread_mutex_lock(&s->lock);
        s->list_changed = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    } else if (!strcmp(method, "notifications/message")) {
        const cJSON *level = get(params, "level"), *logger = get(params, "logger");
        const cJSON *data = get(params, "data");
        enum hutch_log_level lv = HUTCH_LOG_WARN;
        char text[1000], from[64] = "";
        char *printed = NULL;
        size_t flen;

        if (cJSON_IsString(level)) {
            if (!strcmp(level->valuestring, "debug"))
                lv = HUTCH_LOG_DEBUG;
            else if (!strcmp(level->valuestring, "info") ||
                     !strcmp(level->valuestring, "notice"))
                lv = HUTCH_LOG_INFO;
        }
        if (lv > hutch_log_get_level())
            return;
        if (cJSON_IsString(logger))
            clean_text(from, sizeof(from) - 2, logger->valuestring,
                       strlen(logger->valuestring));
        flen = strlen(from);
        if (flen)
            snprintf(from + flen, sizeof(from) - flen, ": ");
        if (cJSON_IsString(data)) {
            clean_text(text, sizeof(text), data->valuestring,
                       strlen(data->valuestring));
        } else {
            printed = data ? cJSON_PrintUnformatted(data) : NULL;
            clean_text(text, sizeof(text), printed ? printed : "",
                       printed ? strlen(printed) : 0);
            free(printed);
        }
        hutch_log(lv, s->who, "%s%s", from, text);
    } else {
        char m[80];
        clean_text(m, sizeof(m), method, strlen(method));
        hutch_log(HUTCH_LOG_DEBUG, s->who, "ignoring notification %s", m);
    }
}

/* Our answer to a request from the server: ping gets {}, the rest -32601
 * (we declare no client capabilities).  NULL when there is nothing to
 * answer. */
static cJSON *answer_request(struct server *s, const char *method, const cJSON *id)
{
    cJSON *m, *e;
    char shown[80];

    if (!cJSON_IsString(id) && !cJSON_IsNumber(id))
        return NULL;
    m = cJSON_CreateObject();
    if (!m || !cJSON_AddStringToObject(m, "jsonrpc", "2.0"))
        goto fail;
    cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, false));
    if (!strcmp(method, "ping")) {
        if (!cJSON_AddObjectToObject(m, "result"))
            goto fail;
        return m;
    }
    clean_text(shown, sizeof(shown), method, strlen(method));
    hutch_log(HUTCH_LOG_DEBUG, s->who, "refusing request %s", shown);
    e = cJSON_AddObjectToObject(m, "error");
    if (!e || !cJSON_AddNumberToObject(e, "code", -32601) ||
        !cJSON_AddStringToObject(e, "message", "Method not found"))
        goto fail;
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

/* Turn a response into the result object, or an error. */
static int take_result(struct server *s, const char *what, cJSON *reply, cJSON **result,
                       struct hutch_err *err)
{
    cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
    cJSON *res = cJSON_GetObjectItemCaseSensitive(reply, "result");
    int r = 0;

    if (e) {
        const cJSON *msg = get(e, "message"), *code = get(e, "code");
        char text[HUTCH_ERR_MSG];
        if (cJSON_IsString(msg) && msg->valuestring[0]) {
            clean_text(text, sizeof(text), msg->valuestring, strlen(msg->valuestring));
            r = hutch_err_set(err, -EREMOTEIO, "%s", text);
        } else {
            r = hutch_err_set(err, -EREMOTEIO, "upstream %s answered %s with error %d",
                              s->name, what,
                              cJSON_IsNumber(code) ? (int)code->valuedouble : 0);
        }
    } else if (!cJSON_IsObject(res)) {
        r = hutch_err_set(err, -EPROTO,
                          "upstream %s answered %s with a result that is not an object",
                          s->name, what);
    } else {
        *result = cJSON_DetachItemViaPointer(reply, res);
    }
    cJSON_Delete(reply);
    return r;
}

/* --- stdio: children ---------------------------------------------------- */

static void poke(struct child *c)
{
    uint64_t one = 1;
    if (write(c->wake_fd, &one, sizeof(one)) < 0)
        return; /* the counter is full: it is awake anyway */
}

/* writev(2) that raises no SIGPIPE in the calling thread, whatever its
 * signal mask: callers' threads write to a child's stdin too. */
static ssize_t writev_quiet(int fd, const struct iovec *iov, int n)
{
    sigset_t pipe_set, old;
    ssize_t w;
    int e;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    w = writev(fd, iov, n);
    e = errno;
    if (w < 0 && e == EPIPE && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero); /* the one this write raised */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

/* Send one line to the child, under c->wlock.  The caller's thread writes
 * it when nothing is queued before it, as much as the pipe takes without
 * blocking; the rest is queued for the I/O thread, so a child that stops
 * reading its stdin never blocks a caller.  0, -ENOBUFS when the queue is
 * full, -ECONNRESET when stdin is closed or broken (the I/O thread reports
 * why and fails the pending calls). */
static int send_wlocked(struct child *c, const char *text, size_t len)
{
    size_t done = 0, rest;
    struct outmsg *m;

    if (c->in_fd < 0 || c->in_failed)
        return -ECONNRESET;
    if (c->q_bytes + len + 1 > HUTCH_UPSTREAM_MAX_OUTQ)
        return -ENOBUFS;
    if (!c->q_head) {
        struct iovec iov[2] = {{(void *)text, len}, {"\n", 1}};
        for (;;) {
            ssize_t w = writev_quiet(c->in_fd, iov, 2);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno != EAGAIN) {
                c->in_failed = true;
                poke(c);
                return -ECONNRESET;
            }
            done = w < 0 ? 0 : (size_t)w;
            break;
        }
        if (done == len + 1)
            return 0;
    }
    rest = len + 1 - done;
    m = malloc(sizeof(*m) + rest);
    if (!m)
        return -ENOMEM;
    if (done < len) {
        memcpy(m->buf, text + done, len - done);
        m->buf[len - done] = '\n';
    } else {
        m->buf[0] = '\n';
    }
    m->len = rest;
    m->off = 0;
    m->next = NULL;
    if (c->q_tail)
        c->q_tail->next = m;
    else
        c->q_head = m;
    c->q_tail = m;
    c->q_bytes += m->len;
    poke(c);
    return 0;
}

/* Under the server's lock, with c its child: takes c->wlock inside it. */
static int send_msg_locked(struct child *c, const cJSON *msg)
{
    char *text = cJSON_PrintUnformatted(msg);
    int r;

    if (!text)
        return -ENOMEM;
    pthread_mutex_lock(&c->wlock);
    r = send_wlocked(c, text, strlen(text));
    pthread_mutex_unlock(&c->wlock);
    free(text);
    return r;
}

/* Under the server's lock. */
static void fail_pending_locked(struct server *s, int code, const char *why)
{
    for (struct pending *p = s->pending; p; p = p->next) {
        if (p->done)
            continue;
        p->done = true;
        p->code = code;
        snprintf(p->why, sizeof(p->why), "%s", why);
        pthread_cond_signal(&p->cond);
    }
}

/* The child is gone or must go: out of "ready" at once, so that no caller
 * sees "ready" while the supervisor has yet to notice.  Under the lock;
 * true when the generation must be bumped. */
static bool leave_ready_locked(struct server *s, const char *why)
{
    if (s->state != ST_READY)
        return false;
    s->state = ST_RESTARTING;
    snprintf(s->error, sizeof(s->error), "%s; restarting", why);
    cJSON_Delete(s->tools);
    s->tools = NULL;
    return true;
}

static void mark_dead(struct server *s, struct child *c)
{
    const char *why = "closed its stdout (it exited or crashed)";
    bool bump;

    pthread_mutex_lock(&s->lock);
    c->dead = true;
    fail_pending_locked(s, -ECONNRESET, why);
    bump = leave_ready_locked(s, why);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (bump)
        gen_bump(s->u);
}

/* Under the lock; true when the generation must be bumped. */
static bool mark_broken_locked(struct server *s, struct child *c, int code,
                               const char *why)
{
    bool bump = false;

    if (!c->broken) {
        c->broken = code;
        snprintf(c->broken_why, sizeof(c->broken_why), "%s", why);
        fail_pending_locked(s, code, why);
        bump = leave_ready_locked(s, why);
        pthread_cond_broadcast(&s->cond);
    }
    return bump;
}

static void mark_broken(struct server *s, struct child *c, int code, const char *why)
{
    bool bump;

    pthread_mutex_lock(&s->lock);
    bump = mark_broken_locked(s, c, code, why);
    pthread_mutex_unlock(&s->lock);
    if (bump)
        gen_bump(s->u);
}

/* line may be NULL. */
static void count_garbage(struct server *s, struct child *c, const char *what,
                          const char *line, size_t len)
{
    const char *more = " (further ones are only counted)";
    char shown[120];
    uint64_t n;

    pthread_mutex_lock(&s->lock);
    n = ++c->garbage;
    pthread_mutex_unlock(&s->lock);
    if (n > HUTCH_UPSTREAM_GARBAGE_LOGGED)
        return;
    if (!line) {
        hutch_log(HUTCH_LOG_WARN, s->who, "ignoring %s%s", what,
                  n == HUTCH_UPSTREAM_GARBAGE_LOGGED ? more : "");
        return;
    }
    clean_text(shown, sizeof(shown), line, len);
    hutch_log(HUTCH_LOG_WARN, s->who, "ignoring %s (%zu bytes): %s%s", what, len, shown,
              n == HUTCH_UPSTREAM_GARBAGE_LOGGED ? more : "");
}

/* One message from a child; takes msg. */
static void stdio_message(struct server *s, struct child *c, cJSON *msg)
{
    const cJSON *method = get(msg, "method"), *id = get(msg, "id");
    int64_t rid;

    if (cJSON_IsString(method)) {
        if (id && !cJSON_IsNull(id)) {
            cJSON *ans = answer_request(s, method->valuestring, id);
            pthread_mutex_lock(&s->lock);
            if (ans && !c->dead && !c->broken)
                send_msg_locked(c, ans);
            pthread_mutex_unlock(&s->lock);
            cJSON_Delete(ans);
        } else {
            on_notification(s, method->valuestring, get(msg, "params"));
        }
    } else if (get(msg, "result") || get(msg, "error")) {
        if (rpc_id(id, &rid)) {
            pthread_mutex_lock(&s->lock);
            for (struct pending *p = s->pending; p; p = p->next) {
                if (p->id == rid && !p->done) {
                    p->reply = msg;
                    msg = NULL;
                    p->done = true;
                    pthread_cond_signal(&p->cond);
                    break;
                }
            }
            pthread_mutex_unlock(&s->lock);
            if (msg)
                hutch_log(HUTCH_LOG_DEBUG, s->who,
                          "ignoring a response to unknown id %lld", (long long)rid);
        } else {
            const cJSON *e = get(msg, "error"), *em = get(e, "message");
            char shown[200] = "";
            if (cJSON_IsString(em))
                clean_text(shown, sizeof(shown), em->valuestring,
                           strlen(em->valuestring));
            hutch_log(HUTCH_LOG_WARN, s->who,
                      "ignoring a response without a valid id%s%s",
                      shown[0] ? ": " : "", shown);
        }
    } else {
        count_garbage(s, c, "a JSON value that is not JSON-RPC", NULL, 0);
    }
    cJSON_Delete(msg);
}

static void stdio_line(struct server *s, struct child *c, const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *msg;

    while (len && is_space(line[len - 1]))
        len--;
    if (!len)
        return;
    if (hutch_json_text_cost(line, len) > HUTCH_JSON_MAX_TREE) {
        count_garbage(s, c, "a message that would take too much memory to parse", NULL,
                      0);
        return;
    }
    msg = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!msg || end != line + len || (!cJSON_IsObject(msg) && !cJSON_IsArray(msg))) {
        cJSON_Delete(msg);
        count_garbage(s, c, "a line that is not JSON-RPC", line, len);
        return;
    }
    if (cJSON_IsArray(msg)) { /* a batch (2025-03-26) */
        cJSON *m;
        while ((m = msg->child)) {
            cJSON_DetachItemViaPointer(msg, m);
            if (cJSON_IsObject(m))
                stdio_message(s, c, m);
            else {
                cJSON_Delete(m);
                count_garbage(s, c, "a batch entry that is not an object", NULL, 0);
            }
        }
        cJSON_Delete(msg);
        return;
    }
    stdio_message(s, c, msg);
}

struct linebuf {
    struct hutch_buf b;
    size_t scanned; /* bytes of b already searched for a newline */
};
/* Room for the longest message, its newline, and one read beyond it. */
#define LINEBUF_INIT                                                                   \
    {                                                                                  \
        .b = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 1 + READ_CHUNK }                     \
    }

/* Read stdout once.  1: more to come, 0: EOF, -EPROTO: a message over the
 * cap, other negative: read error. */
static int io_read_out(struct server *s, struct child *c, struct linebuf *lb)
{
    size_t start = 0;
    ssize_t n;

    n = hutch_buf_read(&lb->b, c->out_fd, READ_CHUNK);
    if (n < 0)
        return n == -EAGAIN || n == -EINTR ? 1 : (int)n;
    if (n == 0)
        return 0;
    for (;;) {
        char *buf = lb->b.data;
        char *nl = memchr(buf + lb->scanned, '\n', lb->b.len - lb->scanned);
        if (!nl)
            break;
        if ((size_t)(nl - (buf + start)) > HUTCH_UPSTREAM_MAX_MESSAGE)
            return -EPROTO;
        stdio_line(s, c, buf + start, (size_t)(nl - (buf + start)));
        start = (size_t)(nl - buf) + 1;
        lb->scanned = start;
    }
    hutch_buf_consume(&lb->b, start);
    lb->scanned = lb->b.len;
    if (lb->b.len > HUTCH_UPSTREAM_MAX_MESSAGE)
        return -EPROTO;
    if (!lb->b.len && lb->b.cap > 4 * READ_CHUNK) /* after a big message */
        hutch_buf_free(&lb->b);
    return 1;
}

static void err_line(struct server *s, struct child *c, const char *line, size_t len,
                     bool truncated)
{
    char shown[HUTCH_UPSTREAM_STDERR_LINE + 1];

    while (len && is_space(line[len - 1]))
        len--;
    if (!len)
        return;
    clean_text(shown, sizeof(shown), line, len);
    hutch_log(HUTCH_LOG_INFO, s->who, "%s%s", shown, truncated ? " [truncated]" : "");
    pthread_mutex_lock(&s->lock);
    clean_text(c->last_err, sizeof(c->last_err), line, len);
    pthread_mutex_unlock(&s->lock);
}

struct errbuf {
    char line[HUTCH_UPSTREAM_STDERR_LINE];
    size_t len;
    bool skip; /* the rest of a line that was too long */
};

/* Read stderr once and log whole lines.  1: more to come, 0: EOF. */
static int io_read_err(struct server *s, struct child *c, struct errbuf *eb)
{
    char buf[4096];
    ssize_t n = read(c->err_fd, buf, sizeof(buf));

    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 1 : 0;
    if (n == 0) {
        if (eb->len && !eb->skip)
            err_line(s, c, eb->line, eb->len, false);
        return 0;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            if (!eb->skip)
                err_line(s, c, eb->line, eb->len, false);
            eb->len = 0;
            eb->skip = false;
        } else if (!eb->skip) {
            if (eb->len == sizeof(eb->line)) {
                err_line(s, c, eb->line, eb->len, true);
                eb->len = 0;
                eb->skip = true;
            } else {
                eb->line[eb->len++] = buf[i];
            }
        }
    }
    return 1;
}

/* Write queued lines until the pipe is full.  Closes stdin when a write
 * fails.  0 or -errno. */
static int io_flush(struct child *c)
{
    int r = 0;

    pthread_mutex_lock(&c->wlock);
    while (c->q_head && c->in_fd >= 0) {
        struct outmsg *m = c->q_head;
        ssize_t n = write(c->in_fd, m->buf + m->off, m->len - m->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN) {
                r = -errno;
                close(c->in_fd);
                c->in_fd = -1;
            }
            break;
        }
        m->off += (size_t)n;
        if (m->off < m->len)
            continue;
        c->q_head = m->next;
        if (!c->q_head)
            c->q_tail = NULL;
        c->q_bytes -= m->len;
        free(m);
    }
    pthread_mutex_unlock(&c->wlock);
    return r;
}

/* The I/O thread of one child: the only reader and writer of its pipes. */
static void *stdio_io_main(void *arg)
{
    struct child *c = arg;
    struct server *s = c->s;
    struct linebuf lb = LINEBUF_INIT;
    struct errbuf *eb = calloc(1, sizeof(*eb));
    uint64_t drain_until = 0;
    char why[160];

    if (!eb) {
        mark_broken(s, c, -ENOMEM, "out of memory");
        return NULL;
    }
    for (;;) {
        struct pollfd pfd[4];
        int n = 0, io = -1, ie = -1, iw = -1, timeout = -1, r;
        uint64_t quit_at, now = hutch_now_ms();
        bool want_write, close_in, in_failed;

        pthread_mutex_lock(&s->lock);
        close_in = c->close_in;
        quit_at = c->quit_at;
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_lock(&c->wlock);
        in_failed = c->in_failed && c->in_fd >= 0;
        if ((close_in || in_failed) && c->in_fd >= 0) {
            close(c->in_fd);
            c->in_fd = -1;
        }
        want_write = c->q_head && c->in_fd >= 0;
        pthread_mutex_unlock(&c->wlock);
        if (in_failed)
            mark_broken(s, c, -ECONNRESET, "closed its stdin");
        if (quit_at && now >= quit_at)
            break;
        if (c->out_fd < 0 && (c->err_fd < 0 || now >= drain_until))
            break;
        if (quit_at)
            timeout = (int)(quit_at - now);
        if (c->out_fd < 0 && (timeout < 0 || drain_until - now < (uint64_t)timeout))
            timeout = (int)(drain_until - now);

        pfd[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
        if (c->out_fd >= 0) {
            io = n;
            pfd[n++] = (struct pollfd){.fd = c->out_fd, .events = POLLIN};
        }
        if (c->err_fd >= 0) {
            ie = n;
            pfd[n++] = (struct pollfd){.fd = c->err_fd, .events = POLLIN};
        }
        if (want_write) {
            iw = n;
            pfd[n++] = (struct pollfd){.fd = c->in_fd, .events = POLLOUT};
        }
        if (poll(pfd, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            snprintf(why, sizeof(why), "poll: %s", strerror(errno));
            mark_broken(s, c, -EIO, why);
            break;
        }
        if (pfd[0].revents) {
            uint64_t v;
            if (read(c->wake_fd, &v, sizeof(v)) < 0)
                v = 0; /* EAGAIN: someone else's wake-up was already counted */
        }
        if (iw >= 0 && pfd[iw].revents && io_flush(c) < 0)
            mark_broken(s, c, -ECONNRESET, "closed its stdin");
        if (io >= 0 && pfd[io].revents) {
            r = io_read_out(s, c, &lb);
            if (r <= 0) {
                close(c->out_fd);
                c->out_fd = -1;
                drain_until = hutch_now_ms() + HUTCH_UPSTREAM_DRAIN_MS;
                if (r == -EPROTO) {
                    snprintf(why, sizeof(why), "sent a message over %u bytes",
                             HUTCH_UPSTREAM_MAX_MESSAGE);
                    mark_broken(s, c, -EPROTO, why);
                } else if (r < 0 && r != -EIO) {
                    snprintf(why, sizeof(why), "reading its stdout: %s", strerror(-r));
                    mark_broken(s, c, r, why);
                } else {
                    mark_dead(s, c);
                }
            }
        }
        if (ie >= 0 && pfd[ie].revents && io_read_err(s, c, eb) == 0) {
            close(c->err_fd);
            c->err_fd = -1;
        }
    }
    hutch_buf_free(&lb.b);
    free(eb);
    return NULL;
}

/* Look `cmd` up in PATH like execvp.  *out is malloc'ed. */
static int resolve_command(const char *cmd, const char *path, char **out)
{
    int r = -ENOENT;

    if (strchr(cmd, '/'))
        return (*out = strdup(cmd)) ? 0 : -ENOMEM;
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        char *cand = NULL;
        struct stat st;

        if (asprintf(&cand, "%.*s%s%s", (int)dlen, dlen ? path : ".", dlen ? "/" : "",
                     cmd) < 0)
            return -ENOMEM;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) {
                *out = cand;
                return 0;
            }
            r = -EACCES;
        }
        free(cand);
        path += dlen;
        if (*path == ':')
            path++;
    }
    return r;
}

/* What a stdio child inherits of hutch's environment: the names the MCP
 * reference SDK passes on POSIX (getDefaultEnvironment), nothing else.
 * hutch's own settings (HUTCH_TOKEN, the principals' tokens a wrapper put
 * in the environment, cloud credentials…) never reach an upstream, which
 * a program can ask to print its environment.  README, "Environments". */
static const char *const inherited_env[] = {"HOME",  "LOGNAME", "PATH",
                                            "SHELL", "TERM",    "USER"};

/* The inherited names present in hutch's environment, then the entry's
 * "env" (which wins).  The strings are borrowed. */
static char **build_env(struct server *s)
{
    size_t n = sizeof(inherited_env) / sizeof(inherited_env[0]), k = 0;
    char **envp;

    for (char **e = s->env; *e; e++)
        n++;
    envp = calloc(n + 1, sizeof(char *));
    if (!envp)
        return NULL;
    for (size_t i = 0; i < sizeof(inherited_env) / sizeof(inherited_env[0]); i++) {
        const char *name = inherited_env[i];
        size_t klen = strlen(name);
        bool overridden = false;
        char **e;

        for (char **o = s->env; *o && !overridden; o++)
            overridden = !strncmp(*o, name, klen) && (*o)[klen] == '=';
        for (e = environ; e && *e; e++)
            if (!strncmp(*e, name, klen) && (*e)[klen] == '=')
                break;
        /* A value starting "()" is an exported shell function, as the SDK
         * says: not a setting, and a known attack surface. */
        if (!overridden && e && *e && strncmp(*e + klen + 1, "()", 2))
            envp[k++] = *e;
    }
    for (char **e = s->env; *e; e++)
        envp[k++] = *e;
    return envp;
}

static const char *env_get(char **envp, const char *key)
{
    size_t klen = strlen(key);
    for (; *envp; envp++)
        if (!strncmp(*envp, key, klen) && (*envp)[klen] == '=')
            return *envp + klen + 1;
    return NULL;
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

enum { STAGE_CHDIR, STAGE_EXEC, STAGE_SETUP };

/* In the child after fork: async-signal-safe calls only. */
__attribute__((noreturn)) static void child_exec(const char *path, char *const argv[],
                                                 char *const envp[], const char *cwd,
                                                 const int fds[3], int ep, pid_t parent)
{
    struct sigaction sa;
    sigset_t none;
    int info[2] = {STAGE_SETUP, 0}, d[3];

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Its own process group, so stopping it reaches what it spawned. */
    if (setpgid(0, 0) < 0)
        goto fail;
    /* Dies with the thread that started it (the supervisor lives as long
     * as the server).  */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
        goto fail;
    for (int i = 0; i < 3; i++)
        if ((d[i] = fcntl(fds[i], F_DUPFD, 3)) < 0)
            goto fail;
    for (int i = 0; i < 3; i++)
        if (dup2(d[i], i) < 0)
            goto fail;
    for (int i = 0; i < 3; i++)
        close(d[i]);
#ifdef SYS_close_range
    syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
#endif
    info[0] = STAGE_CHDIR;
    if (cwd && chdir(cwd) < 0)
        goto fail;
    info[0] = STAGE_EXEC;
    execve(path, argv, envp);
fail:
    info[1] = errno;
    if (write(ep, info, sizeof(info)) < 0)
        _exit(127);
    _exit(127);
}

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0) {
            close(p[i]);
            p[i] = -1;
        }
}

static void child_free(struct child *c)
{
    struct outmsg *m;

    if (!c)
        return;
    while ((m = c->q_head)) {
        c->q_head = m->next;
        free(m);
    }
    if (c->in_fd >= 0)
        close(c->in_fd);
    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->err_fd >= 0)
        close(c->err_fd);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    pthread_mutex_destroy(&c->wlock);
    free(c);
}

static int stdio_spawn(struct server *s, struct child **out, struct hutch_err *err)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, ep[2] = {-1, -1};
    char **envp = NULL, *path = NULL;
    struct child *c = NULL;
    pid_t parent = getpid(), pid;
    int info[2], r;
    ssize_t n;

    envp = build_env(s);
    if (!envp) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = resolve_command(s->command, env_get(envp, "PATH"), &path);
    if (r == -ENOENT) {
        r = hutch_err_set(err, r, "command not found: %s", s->command);
        goto out;
    } else if (r < 0) {
        r = hutch_err_set(err, r, "cannot run %s: %s", s->command, strerror(-r));
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    c->s = s;
    c->pid = -1;
    pthread_mutex_init(&c->wlock, NULL);
    c->in_fd = c->out_fd = c->err_fd = -1;
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0 || pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
        pipe2(perr, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
        r = hutch_err_set(err, -errno, "cannot create pipes: %s", strerror(errno));
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        r = hutch_err_set(err, -errno, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int fds[3] = {pin[0], pout[1], perr[1]};
        child_exec(path, s->argv, envp, s->cwd, fds, ep[1], parent);
    }
    c->pid = pid;
    setpgid(pid, pid); /* the child does it too: whoever is first wins */
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    close(ep[1]);
    pin[0] = pout[1] = perr[1] = ep[1] = -1;
    /* The error pipe closes at a successful exec. */
    do
        n = read(ep[0], info, sizeof(info));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(info)) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        c->pid = -1;
        if (info[0] == STAGE_CHDIR)
            r = hutch_err_set(err, -info[1], "cannot change to directory %s: %s",
                              s->cwd, strerror(info[1]));
        else if (info[0] == STAGE_EXEC)
            r = hutch_err_set(err, -info[1], "cannot execute %s: %s", path,
                              strerror(info[1]));
        else
            r = hutch_err_set(err, -info[1], "cannot set up the child for %s: %s", path,
                              strerror(info[1]));
        goto out;
    }
    c->in_fd = pin[1];
    c->out_fd = pout[0];
    c->err_fd = perr[0];
    pin[1] = pout[0] = perr[0] = -1;
    if (hutch_set_nonblock(c->in_fd) < 0 || hutch_set_nonblock(c->out_fd) < 0 ||
        hutch_set_nonblock(c->err_fd) < 0) {
        r = hutch_err_set(err, -errno, "fcntl: %s", strerror(errno));
        goto out;
    }
    r = -pthread_create(&c->io, NULL, stdio_io_main, c);
    if (r < 0) {
        r = hutch_err_set(err, r, "cannot create a thread: %s", strerror(-r));
        goto out;
    }
    c->io_started = true;
    hutch_log(HUTCH_LOG_DEBUG, s->who, "started %s (pid %d)", path, (int)pid);
    *out = c;
    c = NULL;
out:
    if (c && c->pid > 0) {
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    child_free(c);
    close_pair(pin);
    close_pair(pout);
    close_pair(perr);
    close_pair(ep);
    free(envp);
    free(path);
    return r;
}

/* true once pid exited (not reaped: its process group stays ours). */
static bool wait_exit(struct child *c, unsigned ms)
{
    uint64_t deadline = hutch_now_ms() + ms;

    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            c->reaped = true; /* ECHILD: someone reaped it (SIGCHLD ignored?) */
            return true;
        }
        if (si.si_pid == c->pid)
            return true;
        if (hutch_now_ms() >= deadline)
            return false;
        sleep_ms(5);
    }
}

static void signal_child(struct child *c, int sig)
{
    if (c->reaped)
        return;
    if (kill(-c->pid, sig) < 0)
        kill(c->pid, sig);
}

struct exit_info {
    bool alone; /* it exited before we sent a signal */
    char text[80];
    char last_err[256];
};

/* Stop a child and free it: fail its calls, close its stdin, wait `grace`,
 * SIGTERM, wait, SIGKILL, reap, collect its I/O thread. */
static void child_teardown(struct server *s, struct child *c, unsigned grace, int code,
                           const char *why, struct exit_info *x)
{
    int status = 0;

    pthread_mutex_lock(&s->lock);
    if (s->child == c)
        s->child = NULL;
    fail_pending_locked(s, code, why);
    c->close_in = true;
    pthread_mutex_unlock(&s->lock);
    poke(c);

    x->alone = wait_exit(c, grace);
    if (!x->alone) {
        signal_child(c, SIGTERM);
        if (!wait_exit(c, HUTCH_UPSTREAM_TERM_GRACE_MS)) {
            hutch_log(HUTCH_LOG_DEBUG, s->who, "pid %d ignored SIGTERM, killing it",
                      (int)c->pid);
            signal_child(c, SIGKILL);
        }
    }
    /* What it left behind in its process group goes too, while the group
     * id is still held by the unreaped leader. */
    signal_child(c, SIGKILL);
    if (!c->reaped) {
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->reaped = true;
    }
    if (WIFEXITED(status))
        snprintf(x->text, sizeof(x->text), "exited with status %d",
                 WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(x->text, sizeof(x->text), "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(x->text, sizeof(x->text), "exited");

    pthread_mutex_lock(&s->lock);
    c->quit_at = hutch_now_ms() + HUTCH_UPSTREAM_DRAIN_MS;
    pthread_mutex_unlock(&s->lock);
    poke(c);
    if (c->io_started)
        pthread_join(c->io, NULL);
    /* A caller that took c->wlock before s->child changed may still hold
     * it: no one can take it after. */
    pthread_mutex_lock(&c->wlock);
    pthread_mutex_unlock(&c->wlock);
    snprintf(x->last_err, sizeof(x->last_err), "%s", c->last_err);
    child_free(c);
}

/* --- stdio: requests ---------------------------------------------------- */

static int stdio_request(struct server *s, const char *method, const cJSON *params,
                         uint64_t deadline, unsigned budget, const char *what,
                         cJSON **reply, struct hutch_err *err)
{
    struct pending p = {0};
    struct child *c;
    cJSON *m = NULL;
    char *text = NULL;
    uint64_t garbage0 = 0;
    size_t queued;
    int r = 0;

    cond_init_mono(&p.cond);
    pthread_mutex_lock(&s->lock);
    p.id = ++s->next_id;
    pthread_mutex_unlock(&s->lock);
    m = rpc_new(p.id, method, params);
    text = m ? cJSON_PrintUnformatted(m) : NULL;
    if (!text) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (strlen(text) > HUTCH_UPSTREAM_MAX_MESSAGE) {
        r = hutch_err_set(err, -E2BIG, "%s for upstream %s is larger than %u bytes",
                          what, s->name, HUTCH_UPSTREAM_MAX_MESSAGE);
        goto out;
    }

    pthread_mutex_lock(&s->lock);
    c = s->child;
    if (!c || c->dead || c->broken) {
        pthread_mutex_unlock(&s->lock);
        r = hutch_err_set(err, -ECONNRESET, "upstream %s is not running", s->name);
        goto out;
    }
    /* Pending before it is written: the answer may come back at once. */
    p.next = s->pending;
    s->pending = &p;
    garbage0 = c->garbage;
    /* This thread writes the request itself.  c->wlock is taken before the
     * server's lock is left, so a teardown waits for the write to end. */
    pthread_mutex_lock(&c->wlock);
    pthread_mutex_unlock(&s->lock);
    r = send_wlocked(c, text, strlen(text));
    queued = c->q_bytes;
    pthread_mutex_unlock(&c->wlock);
    pthread_mutex_lock(&s->lock);
    if (r < 0) {
        bool bump = false;
        for (struct pending **pp = &s->pending; *pp; pp = &(*pp)->next)
            if (*pp == &p) {
                *pp = p.next;
                break;
            }
        /* Its stdin is gone: out of "ready" now, not when the I/O thread
         * gets to it.  A teardown would have failed p. */
        if (r == -ECONNRESET && !p.done)
            bump = mark_broken_locked(s, c, r, "closed its stdin");
        pthread_mutex_unlock(&s->lock);
        if (bump)
            gen_bump(s->u);
        if (p.done && p.code < 0) /* the child broke meanwhile: say why */
            r = hutch_err_set(err, p.code, "upstream %s %s during %s", s->name, p.why,
                              what);
        else if (r == -ECONNRESET)
            r = hutch_err_set(err, r, "upstream %s closed its stdin", s->name);
        else if (r == -ENOBUFS)
            r = hutch_err_set(err, r,
                              "upstream %s is not reading its input (%zu bytes queued)",
                              s->name, queued);
        else
            r = hutch_err_set(err, r, "sending %s to upstream %s: %s", what, s->name,
                              strerror(-r));
        goto out;
    }
    while (!p.done)
        if (cond_wait_until(&p.cond, &s->lock, deadline) == ETIMEDOUT)
            break;
    for (struct pending **pp = &s->pending; *pp; pp = &(*pp)->next)
        if (*pp == &p) {
            *pp = p.next;
            break;
        }
    if (!p.done) {
        /* No answer.  The child is still s->child: a teardown would have
         * failed this call. */
        uint64_t garbage = s->child == c ? c->garbage - garbage0 : 0;
        if (s->child == c && strcmp(method, "initialize")) {
            cJSON *cm = rpc_new(0, "notifications/cancelled", NULL);
            cJSON *cp = cm ? cJSON_AddObjectToObject(cm, "params") : NULL;
            if (cp && cJSON_AddNumberToObject(cp, "requestId", (double)p.id) &&
                cJSON_AddStringToObject(cp, "reason", "timed out"))
                send_msg_locked(c, cm);
            cJSON_Delete(cm);
        }
        pthread_mutex_unlock(&s->lock);
        if (garbage)
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s sent %llu lines that are not JSON-RPC and no "
                "answer to %s within %u ms",
                s->name, (unsigned long long)garbage, what, budget);
        else
            r = hutch_err_set(err, -ETIMEDOUT,
                              "upstream %s did not answer %s within %u ms", s->name,
                              what, budget);
        goto out;
    }
    pthread_mutex_unlock(&s->lock);
    if (p.code < 0) {
        r = hutch_err_set(err, p.code, "upstream %s %s during %s", s->name, p.why,
                          what);
        goto out;
    }
    *reply = p.reply;
    p.reply = NULL;
out:
    cJSON_Delete(p.reply);
    pthread_cond_destroy(&p.cond);
    cJSON_Delete(m);
    free(text);
    return r;
}

static int stdio_notify(struct server *s, const char *method, struct hutch_err *err)
{
    cJSON *m = rpc_new(0, method, NULL);
    int r = 0;

    if (!m)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&s->lock);
    if (!s->child || s->child->dead || s->child->broken)
        r = hutch_err_set(err, -ECONNRESET, "upstream %s is not running", s->name);
    else if ((r = send_msg_locked(s->child, m)) < 0)
        r = hutch_err_set(err, r, "cannot send %s: %s", method, strerror(-r));
    pthread_mutex_unlock(&s->lock);
    cJSON_Delete(m);
    return r;
}

/* --- HTTP ---------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct xfer {
    struct server *s;
    CURL *h;
    CURLM *m;
    int64_t want_id; /* 0: nothing to wait for */
    int depth;       /* 1 inside an answer to a server request */
    bool stop_aborts;
    int mode;              /* 0 not yet known, 1 JSON or other, 2 SSE */
    struct hutch_buf body; /* mode 1 */
    struct hutch_buf line; /* mode 2: the current line */
    struct hutch_buf data; /* mode 2: the current event's data */
    char event[32];
    bool cr;
    cJSON *reply;
    bool done;
    uint64_t done_at;
    int err;
    char why[200];
    char session[HUTCH_UPSTREAM_MAX_SESSION_ID + 1];
    bool got_session;
};

static int http_post(struct server *s, const char *body, int64_t want_id, unsigned ms,
                     bool initialize, int depth, cJSON **reply, char *session_out,
                     struct hutch_err *err);

/* The caps of struct xfer's buffers: a body or an event's data holds one
 * message (data has a newline after each line), an SSE line a little more
 * for its "data: ". */
#define XFER_BUFS                                                                      \
    .body = {.max = HUTCH_UPSTREAM_MAX_MESSAGE},                                       \
    .line = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 16},                                  \
    .data = {.max = HUTCH_UPSTREAM_MAX_MESSAGE + 1}

static void xfer_free_bufs(struct xfer *x)
{
    hutch_buf_free(&x->body);
    hutch_buf_free(&x->line);
    hutch_buf_free(&x->data);
}

/* One JSON-RPC message of an HTTP response body; takes msg. */
static void http_message(struct xfer *x, cJSON *msg)
{
    struct server *s = x->s;
    const cJSON *method = get(msg, "method"), *id = get(msg, "id");
    int64_t rid;

    if (!cJSON_IsObject(msg)) {
        hutch_log(HUTCH_LOG_WARN, s->who, "ignoring a JSON value that is not JSON-RPC");
    } else if (cJSON_IsString(method)) {
        if (id && !cJSON_IsNull(id)) {
            cJSON *ans = answer_request(s, method->valuestring, id);
            char *text = ans && !x->depth ? cJSON_PrintUnformatted(ans) : NULL;
            if (text)
                http_post(s, text, 0, HUTCH_UPSTREAM_NOTE_MS, false, 1, NULL, NULL,
                          NULL);
            free(text);
            cJSON_Delete(ans);
        } else {
            on_notification(s, method->valuestring, get(msg, "params"));
        }
    } else if (rpc_id(id, &rid) && rid == x->want_id && !x->done &&
               (get(msg, "result") || get(msg, "error"))) {
        x->reply = msg;
        x->done = true;
        x->done_at = hutch_now_ms();
        return;
    } else {
        hutch_log(HUTCH_LOG_DEBUG, s->who, "ignoring a response that is not ours");
    }
    cJSON_Delete(msg);
}

/* A whole body or SSE event: one message or a batch. */
static void http_payload(struct xfer *x, const char *text, size_t len)
{
    struct hutch_err jerr = HUTCH_ERR_INIT;
    const char *end = NULL;
    cJSON *msg;

    while (len && is_space(text[len - 1]))
        len--;
    if (!len)
        return;
    if (hutch_json_check_text(text, len, HUTCH_JSON_MAX_TREE, "a body", &jerr) < 0) {
        hutch_log(HUTCH_LOG_WARN, x->s->who, "ignoring %s", jerr.msg);
        return;
    }
    msg = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!msg || end != text + len) {
        char shown[120];
        cJSON_Delete(msg);
        clean_text(shown, sizeof(shown), text, len);
        hutch_log(HUTCH_LOG_WARN, x->s->who, "ignoring a body that is not JSON: %s",
                  shown);
        return;
    }
    if (cJSON_IsArray(msg)) {
        cJSON *m;
        while ((m = msg->child)) {
            cJSON_DetachItemViaPointer(msg, m);
            http_message(x, m);
        }
        cJSON_Delete(msg);
        return;
    }
    http_message(x, msg);
}

static void sse_dispatch(struct xfer *x)
{
    if (x->data.len && (!x->event[0] || !strcmp(x->event, "message")))
        http_payload(x, x->data.data, x->data.len);
    hutch_buf_reset(&x->data);
    x->event[0] = '\0';
}

static int sse_line(struct xfer *x, const char *line, size_t len)
{
    const char *colon, *val;
    size_t flen, vlen;
    int r;

    if (!len) {
        sse_dispatch(x);
        return 0;
    }
    if (line[0] == ':')
        return 0;
    colon = memchr(line, ':', len);
    flen = colon ? (size_t)(colon - line) : len;
    val = colon ? colon + 1 : line + len;
    vlen = (size_t)(line + len - val);
    if (vlen && *val == ' ') {
        val++;
        vlen--;
    }
    if (flen == 4 && !memcmp(line, "data", 4)) {
        if (vlen + 1 > x->data.max - x->data.len)
            return -E2BIG;
        r = hutch_buf_append(&x->data, val, vlen);
        if (r == 0)
            r = hutch_buf_append(&x->data, "\n", 1);
        if (r < 0)
            return r;
    } else if (flen == 5 && !memcmp(line, "event", 5)) {
        clean_text(x->event, sizeof(x->event), val, vlen);
    }
    return 0;
}

/* Feed SSE bytes: lines end in CRLF, LF or CR. */
static int sse_feed(struct xfer *x, const char *p, size_t n)
{
    for (size_t i = 0; i < n && !x->done; i++) {
        char ch = p[i];
        int r;
        if (x->cr && ch == '\n') {
            x->cr = false;
            continue;
        }
        x->cr = ch == '\r';
        if (ch == '\r' || ch == '\n') {
            r = sse_line(x, hutch_buf_str(&x->line), x->line.len);
            hutch_buf_reset(&x->line);
            if (r < 0)
                return r;
            continue;
        }
        r = hutch_buf_append(&x->line, &ch, 1);
        if (r < 0)
            return r;
    }
    return 0;
}

static size_t http_write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb;
    int r;

    if (x->done) /* the rest of a stream after our response: let it end */
        return n;
    if (!x->mode) {
        char *ct = NULL;
        curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
        x->mode = ct && !strncasecmp(ct, "text/event-stream", 17) ? 2 : 1;
    }
    if (x->mode == 2) {
        r = sse_feed(x, ptr, n);
    } else {
        r = hutch_buf_append(&x->body, ptr, n);
    }
    if (r == -E2BIG)
        r = -EPROTO;
    if (r < 0) {
        x->err = r == -EPROTO ? -EPROTO : r;
        snprintf(x->why, sizeof(x->why), "%s",
                 r == -EPROTO ? "sent a message over the size limit" : "out of memory");
        return 0;
    }
    return n;
}

static size_t http_header_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb, vlen;
    const char *v;

    if (n > 15 && !strncasecmp(ptr, "mcp-session-id:", 15)) {
        v = ptr + 15;
        vlen = n - 15;
        while (vlen && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        while (vlen && is_space(v[vlen - 1]))
            vlen--;
        x->got_session = vlen > 0 && vlen <= HUTCH_UPSTREAM_MAX_SESSION_ID;
        for (size_t i = 0; i < vlen && x->got_session; i++)
            if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
                x->got_session = false;
        if (x->got_session) {
            memcpy(x->session, v, vlen);
            x->session[vlen] = '\0';
        }
    }
    return n;
}

static void hconn_free(struct hconn *c)
{
    if (c->m)
        curl_multi_cleanup(c->m);
    if (c->h)
        curl_easy_cleanup(c->h);
    c->h = NULL;
    c->m = NULL;
}

/* 0, or -ENOMEM. */
static int pool_get(struct server *s, struct xfer *x)
{
    struct hconn c = {0};

    pthread_mutex_lock(&s->lock);
    if (s->npool)
        c = s->pool[--s->npool];
    pthread_mutex_unlock(&s->lock);
    if (c.h) {
        curl_easy_reset(c.h);
    } else {
        c.h = curl_easy_init();
        c.m = curl_multi_init();
        if (!c.h || !c.m) {
            hconn_free(&c);
            return -ENOMEM;
        }
    }
    x->h = c.h;
    x->m = c.m;
    return 0;
}

static void pool_put(struct server *s, struct xfer *x)
{
    struct hconn c = {.h = x->h, .m = x->m};

    if (!c.h)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->npool < HUTCH_UPSTREAM_HTTP_POOL) {
        s->pool[s->npool++] = c;
        c = (struct hconn){0};
    }
    pthread_mutex_unlock(&s->lock);
    hconn_free(&c);
    x->h = NULL;
    x->m = NULL;
}

/* Run the transfer.  Our own loop rather than curl_easy_perform: a stream
 * left open after our response is cut off HUTCH_UPSTREAM_SSE_LINGER_MS later (servers
 * SHOULD close it; those that do keep the connection reusable), and
 * hutch stopping is noticed within HUTCH_UPSTREAM_POLL_MS. */
static CURLcode http_perform(struct xfer *x)
{
    CURLcode rc = CURLE_OK;
    int running = 1, left;
    CURLMsg *msg;

    if (curl_multi_add_handle(x->m, x->h) != CURLM_OK)
        return CURLE_FAILED_INIT;
    for (;;) {
        int wait = HUTCH_UPSTREAM_POLL_MS;
        if (curl_multi_perform(x->m, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        if (!running)
            break;
        if (x->done) {
            uint64_t since = hutch_now_ms() - x->done_at;
            if (since >= HUTCH_UPSTREAM_SSE_LINGER_MS)
                break;
            wait = (int)(HUTCH_UPSTREAM_SSE_LINGER_MS - since);
        }
        if (x->stop_aborts && stopping(x->s->u)) {
            rc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        if (curl_multi_poll(x->m, NULL, 0, wait, NULL) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
    }
    while (!running && (msg = curl_multi_info_read(x->m, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == x->h)
            rc = msg->data.result;
    curl_multi_remove_handle(x->m, x->h);
    return rc;
}

static struct curl_slist *http_headers(struct server *s, bool with_session, bool *sent)
{
    struct curl_slist *l = NULL, *t;
    char line[HUTCH_UPSTREAM_MAX_SESSION_ID + 64];

    *sent = false;
#define ADD(str)                                                                       \
    do {                                                                               \
        if (!(t = curl_slist_append(l, (str))))                                        \
            goto fail;                                                                 \
        l = t;                                                                         \
    } while (0)
    ADD("Content-Type: application/json");
    ADD("Accept: application/json, text/event-stream");
    for (char **h = s->headers; *h; h++)
        ADD(*h);
    if (with_session) {
        pthread_mutex_lock(&s->lock);
        line[0] = '\0';
        if (s->session) {
            snprintf(line, sizeof(line), "Mcp-Session-Id: %s", s->session);
            *sent = true;
        }
        t = line[0] ? curl_slist_append(l, line) : l;
        if (t && s->proto[0]) {
            snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", s->proto);
            t = curl_slist_append(t, line);
        }
        pthread_mutex_unlock(&s->lock);
        if (!t)
            goto fail;
        l = t;
    }
#undef ADD
    return l;
fail:
    curl_slist_free_all(l);
    return NULL;
}

static void http_setup(struct server *s, CURL *h, struct xfer *x, unsigned ms)
{
    curl_easy_setopt(h, CURLOPT_URL, s->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(ms ? ms : 1));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(ms && ms < 10000 ? ms : 10000));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_USERAGENT, "hutch/" PACKAGE_VERSION);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, http_write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, http_header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
}

/* POST one JSON-RPC message.  want_id > 0: return the response with that
 * id in *reply.  -ESTALE: the server forgot our session (HTTP 404). */
static int http_post(struct server *s, const char *body, int64_t want_id, unsigned ms,
                     bool initialize, int depth, cJSON **reply, char *session_out,
                     struct hutch_err *err)
{
    struct xfer x = {
        .s = s, .want_id = want_id, .depth = depth, .stop_aborts = true, XFER_BUFS};
    struct curl_slist *hl = NULL;
    bool sent_session = false;
    long status = 0;
    CURLcode rc;
    int r = 0;

    hl = pool_get(s, &x) == 0 ? http_headers(s, !initialize, &sent_session) : NULL;
    if (!hl) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    http_setup(s, x.h, &x, ms);
    curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    rc = http_perform(&x);
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &status);
    if (!x.done && rc == CURLE_OK && x.mode == 2) {
        sse_feed(&x, "\n\n", 2); /* an event without its blank line */
    }
    if (x.done) {
        r = 0;
    } else if (rc == CURLE_ABORTED_BY_CALLBACK) {
        r = hutch_err_set(err, -ECANCELED, "hutch is stopping");
    } else if (x.err) {
        r = hutch_err_set(err, x.err, "upstream %s %s", s->name, x.why);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        r = hutch_err_set(err, -ETIMEDOUT, "upstream %s did not answer within %u ms",
                          s->name, ms);
    } else if (rc != CURLE_OK) {
        r = hutch_err_set(
            err, rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -ECONNRESET,
            "upstream %s at %s: %s", s->name, s->url, curl_easy_strerror(rc));
    } else if (status == 404 && sent_session) {
        r = hutch_err_set(err, -ESTALE, "upstream %s forgot our session", s->name);
    } else if (status >= 200 && status < 300) {
        if (x.mode != 2 && want_id)
            http_payload(&x, hutch_buf_str(&x.body), x.body.len);
        if (want_id && !x.done)
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s answered with HTTP %ld but no JSON-RPC response", s->name,
                status);
    } else {
        char shown[SNIPPET] = "";
        cJSON *msg = NULL;
        const cJSON *e, *em;
        if (x.mode != 2 && x.body.data &&
            hutch_json_text_cost(x.body.data, x.body.len) <= HUTCH_JSON_MAX_TREE)
            msg = cJSON_ParseWithLength(x.body.data, x.body.len);
        e = get(msg, "error");
        em = get(e, "message");
        if (cJSON_IsString(em))
            clean_text(shown, sizeof(shown), em->valuestring, strlen(em->valuestring));
        else if (x.mode != 2 && x.body.data)
            clean_text(shown, sizeof(shown), x.body.data, x.body.len);
        cJSON_Delete(msg);
        r = hutch_err_set(err, status == 401 || status == 403 ? -EACCES : -EREMOTEIO,
                          "upstream %s answered with HTTP %ld%s%s%s", s->name, status,
                          shown[0] ? ": " : "", shown,
                          status == 401 || status == 403 ? " (check its \"headers\")"
                                                         : "");
    }
    if (r == 0 && x.done && reply) {
        *reply = x.reply;
        x.reply = NULL;
    }
    if (r == 0 && initialize && session_out)
        snprintf(session_out, HUTCH_UPSTREAM_MAX_SESSION_ID + 1, "%s",
                 x.got_session ? x.session : "");
out:
    curl_slist_free_all(hl);
    pool_put(s, &x);
    cJSON_Delete(x.reply);
    xfer_free_bufs(&x);
    return r;
}

/* http_post's parsing without curl (upstream_parse.h): depth 1, so a
 * request in the body is answered by nobody. */
int hutch_upstream_parse_http(const char *body, size_t len, int sse, size_t chunk,
                              int64_t want_id, cJSON **reply)
{
    struct server s = {.tr = TR_HTTP, .name = "fuzz", .who = "upstream fuzz"};
    struct xfer x = {
        .s = &s, .want_id = want_id, .depth = 1, .mode = sse ? 2 : 1, XFER_BUFS};
    int r = 0;

    *reply = NULL;
    pthread_mutex_init(&s.lock, NULL);
    cond_init_mono(&s.cond);
    for (size_t off = 0, n; off < len && !r; off += n) {
        n = chunk && chunk < len - off ? chunk : len - off;
        if (http_write_cb((char *)body + off, 1, n, &x) != n)
            r = x.err ? x.err : -EPROTO;
    }
    if (!r && !x.done && x.mode == 2)
        sse_feed(&x, "\n\n", 2);
    if (!r && x.mode != 2 && want_id)
        http_payload(&x, hutch_buf_str(&x.body), x.body.len);
    if (!r && want_id && !x.done)
        r = -EPROTO;
    if (!r && x.done)
        *reply = hutch_steal(&x.reply);
    cJSON_Delete(x.reply);
    xfer_free_bufs(&x);
    pthread_cond_destroy(&s.cond);
    pthread_mutex_destroy(&s.lock);
    return r;
}

static int http_reinit(struct server *s, uint64_t gen, struct hutch_err *err);

static int http_request(struct server *s, const char *method, const cJSON *params,
                        uint64_t deadline, unsigned budget, const char *what,
                        bool may_reinit, cJSON **reply, struct hutch_err *err)
{
    bool initialize = !strcmp(method, "initialize");
    char session[HUTCH_UPSTREAM_MAX_SESSION_ID + 1];
    uint64_t gen;
    int r, attempt = 0;

again:
    pthread_mutex_lock(&s->lock);
    int64_t id = ++s->next_id;
    gen = s->session_gen;
    pthread_mutex_unlock(&s->lock);
    {
        cJSON *m = rpc_new(id, method, params);
        char *text = m ? cJSON_PrintUnformatted(m) : NULL;
        cJSON_Delete(m);
        if (!text)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        r = http_post(s, text, id, ms_left(deadline), initialize, 0, reply, session,
                      err);
        free(text);
    }
    if (r == -ETIMEDOUT) {
        if (!initialize) {
            cJSON *cm = rpc_new(0, "notifications/cancelled", NULL);
            cJSON *cp = cm ? cJSON_AddObjectToObject(cm, "params") : NULL;
            char *text = NULL;
            if (cp && cJSON_AddNumberToObject(cp, "requestId", (double)id) &&
                cJSON_AddStringToObject(cp, "reason", "timed out"))
                text = cJSON_PrintUnformatted(cm);
            if (text)
                http_post(s, text, 0, HUTCH_UPSTREAM_NOTE_MS, false, 1, NULL, NULL,
                          NULL);
            free(text);
            cJSON_Delete(cm);
        }
        return hutch_err_set(err, -ETIMEDOUT,
                             "upstream %s did not answer %s within %u ms", s->name,
                             what, budget);
    }
    if (r == -ESTALE && may_reinit && attempt++ == 0) {
        hutch_log(HUTCH_LOG_INFO, s->who, "session expired, initializing again");
        r = http_reinit(s, gen, err);
        if (r == 0)
            goto again;
        return r;
    }
    if (r == -ESTALE)
        return hutch_err_set(err, -ECONNRESET, "upstream %s lost its session during %s",
                             s->name, what);
    if (r < 0)
        return r;
    if (initialize) {
        pthread_mutex_lock(&s->lock);
        free(s->session);
        s->session = session[0] ? strdup(session) : NULL;
        s->proto[0] = '\0';
        s->session_gen++;
        pthread_mutex_unlock(&s->lock);
    }
    return 0;
}

static int http_notify(struct server *s, const char *method, uint64_t deadline,
                       struct hutch_err *err)
{
    cJSON *m = rpc_new(0, method, NULL);
    char *text = m ? cJSON_PrintUnformatted(m) : NULL;
    int r;

    cJSON_Delete(m);
    if (!text)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = http_post(s, text, 0, ms_left(deadline), false, 0, NULL, NULL, err);
    free(text);
    return r;
}

/* Best effort: tell the server we are done with the session. */
static void http_end_session(struct server *s)
{
    struct xfer x = {.s = s, XFER_BUFS};
    struct curl_slist *hl = NULL;
    bool sent = false;

    if (pool_get(s, &x) < 0)
        return;
    hl = http_headers(s, true, &sent);
    if (hl && sent) {
        http_setup(s, x.h, &x, HUTCH_UPSTREAM_NOTE_MS);
        curl_easy_setopt(x.h, CURLOPT_CUSTOMREQUEST, "DELETE");
        curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hl);
        http_perform(&x);
    }
    curl_slist_free_all(hl);
    pool_put(s, &x);
    xfer_free_bufs(&x);
    cJSON_Delete(x.reply);
}

/* --- the lifecycle, whatever the transport ------------------------------ */

static int srv_request(struct server *s, const char *method, const cJSON *params,
                       uint64_t deadline, unsigned budget, const char *what,
                       bool may_reinit, cJSON **result, struct hutch_err *err)
{
    cJSON *reply = NULL;
    int r;

    if (s->tr == TR_STDIO)
        r = stdio_request(s, method, params, deadline, budget, what, &reply, err);
    else
        r = http_request(s, method, params, deadline, budget, what, may_reinit, &reply,
                         err);
    if (r < 0)
        return r;
    return take_result(s, what, reply, result, err);
}

/* The same, for hutch's own requests: a JSON-RPC error gets context. */
static int own_request(struct server *s, const char *method, const cJSON *params,
                       uint64_t deadline, unsigned budget, bool may_reinit,
                       cJSON **result, struct hutch_err *err)
{
    char msg[HUTCH_ERR_MSG];
    int r = srv_request(s, method, params, deadline, budget, method, may_reinit, result,
                        err);

    if (r == -EREMOTEIO) {
        snprintf(msg, sizeof(msg), "%s", err->msg);
        hutch_err_set(err, r, "upstream %s refused %s: %s", s->name, method, msg);
    }
    return r;
}

static bool has_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        if (!strcmp(get(t, "name")->valuestring, name))
            return true;
    }
    return false;
}

static int fetch_tools(struct server *s, uint64_t deadline, unsigned budget,
                       bool may_reinit, cJSON **out, struct hutch_err *err)
{
    cJSON *tools = cJSON_CreateArray(), *res = NULL, *params = NULL;
    char *cursor = NULL;
    int r = 0, n = 0, invalid = 0, dups = 0, page;
    bool capped = false;

    if (!tools)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    for (page = 0; page < HUTCH_UPSTREAM_MAX_PAGES; page++) {
        cJSON *list, *t, *next_t;
        const cJSON *next;

        params = cJSON_CreateObject();
        if (!params || (cursor && !cJSON_AddStringToObject(params, "cursor", cursor))) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        r = own_request(s, "tools/list", params, deadline, budget, may_reinit, &res,
                        err);
        cJSON_Delete(params);
        params = NULL;
        if (r < 0)
            goto out;
        list = cJSON_GetObjectItemCaseSensitive(res, "tools");
        if (!cJSON_IsArray(list)) {
            r = hutch_err_set(
                err, -EPROTO,
                "upstream %s answered tools/list without a \"tools\" array", s->name);
            goto out;
        }
        for (t = list->child; t && !capped; t = next_t) {
            const cJSON *name = get(t, "name");
            next_t = t->next;
            if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !name->valuestring[0] ||
                strlen(name->valuestring) > HUTCH_MAX_TOOL_NAME ||
                text_has_ctl(name->valuestring)) {
                invalid++;
            } else if (has_tool(tools, name->valuestring)) {
                dups++;
            } else if (n == HUTCH_UPSTREAM_MAX_TOOLS) {
                capped = true;
            } else {
                cJSON_AddItemToArray(tools, cJSON_DetachItemViaPointer(list, t));
                n++;
            }
        }
        next = get(res, "nextCursor");
        free(cursor);
        cursor = NULL;
        if (!capped && cJSON_IsString(next) && next->valuestring[0] &&
            strlen(next->valuestring) <= HUTCH_UPSTREAM_MAX_CURSOR &&
            !(cursor = strdup(next->valuestring))) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        cJSON_Delete(res);
        res = NULL;
        if (!cursor)
            break;
    }
    if (cursor)
        hutch_log(HUTCH_LOG_WARN, s->who,
                  "tools/list has more than %d pages; using the first %d",
                  HUTCH_UPSTREAM_MAX_PAGES, HUTCH_UPSTREAM_MAX_PAGES);
    if (capped)
        hutch_log(HUTCH_LOG_WARN, s->who, "more than %d tools; using the first %d",
                  HUTCH_UPSTREAM_MAX_TOOLS, HUTCH_UPSTREAM_MAX_TOOLS);
    if (invalid)
        hutch_log(HUTCH_LOG_WARN, s->who,
                  "skipped %d tools that are not objects with a valid string \"name\"",
                  invalid);
    if (dups)
        hutch_log(HUTCH_LOG_WARN, s->who, "skipped %d tools listed twice", dups);
    *out = tools;
    tools = NULL;
out:
    cJSON_Delete(tools);
    cJSON_Delete(res);
    cJSON_Delete(params);
    free(cursor);
    return r;
}

/* initialize, notifications/initialized, tools/list. */
static int handshake(struct server *s, uint64_t deadline, cJSON **tools,
                     struct hutch_err *err)
{
    unsigned budget = ms_left(deadline);
    cJSON *params = cJSON_CreateObject(), *res = NULL, *ci;
    const cJSON *pv, *si;
    char shown[64], sname[64] = "", sver[32] = "";
    int r;

    ci = params ? cJSON_AddObjectToObject(params, "clientInfo") : NULL;
    if (!ci || !cJSON_AddStringToObject(params, "protocolVersion", PROTOCOL_VERSION) ||
        !cJSON_AddObjectToObject(params, "capabilities") ||
        !cJSON_AddStringToObject(ci, "name", s->u->client_name) ||
        !cJSON_AddStringToObject(ci, "version", PACKAGE_VERSION)) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = own_request(s, "initialize", params, deadline, budget, false, &res, err);
    if (r < 0)
        goto out;
    pv = get(res, "protocolVersion");
    if (!cJSON_IsString(pv) || !version_ok(pv->valuestring)) {
        clean_text(shown, sizeof(shown), cJSON_IsString(pv) ? pv->valuestring : "",
                   cJSON_IsString(pv) ? strlen(pv->valuestring) : 0);
        r = hutch_err_set(err, -EPROTO,
                          "upstream %s wants protocol version \"%s\"; hutch speaks "
                          "2025-11-25, 2025-06-18 and 2025-03-26",
                          s->name, shown);
        goto out;
    }
    if (s->tr == TR_HTTP) {
        pthread_mutex_lock(&s->lock);
        snprintf(s->proto, sizeof(s->proto), "%s", pv->valuestring);
        pthread_mutex_unlock(&s->lock);
        r = http_notify(s, "notifications/initialized", deadline, err);
    } else {
        r = stdio_notify(s, "notifications/initialized", err);
    }
    if (r < 0)
        goto out;
    si = get(res, "serverInfo");
    if (cJSON_IsString(get(si, "name")))
        clean_text(sname, sizeof(sname), get(si, "name")->valuestring,
                   strlen(get(si, "name")->valuestring));
    if (cJSON_IsString(get(si, "version")))
        clean_text(sver, sizeof(sver), get(si, "version")->valuestring,
                   strlen(get(si, "version")->valuestring));
    r = fetch_tools(s, deadline, budget, false, tools, err);
    if (r < 0)
        goto out;
    hutch_log(HUTCH_LOG_INFO, s->who, "ready: %s %s, protocol %s, %d tools",
              sname[0] ? sname : "(unnamed)", sver, pv->valuestring,
              cJSON_GetArraySize(*tools));
out:
    cJSON_Delete(params);
    cJSON_Delete(res);
    return r;
}

/* Re-read the tool list (after list_changed). */
static void refresh_tools(struct server *s)
{
    cJSON *tools = NULL;
    struct hutch_err e = {0};
    bool changed = false;
    int r;

    r = fetch_tools(s, hutch_now_ms() + (unsigned)s->u->call_ms,
                    (unsigned)s->u->call_ms, true, &tools, &e);
    if (r < 0) {
        if (!stopping(s->u))
            hutch_log(HUTCH_LOG_WARN, s->who, "re-reading tools after list_changed: %s",
                      e.msg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (s->state == ST_READY) {
        changed = !cJSON_Compare(s->tools, tools, true);
        cJSON_Delete(s->tools);
        s->tools = tools;
        tools = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    cJSON_Delete(tools);
    if (changed) {
        gen_bump(s->u);
        hutch_log(HUTCH_LOG_INFO, s->who, "tool list changed");
    }
}

/* Initialize a new HTTP session after the old one expired, unless another
 * thread already did. */
static int http_reinit(struct server *s, uint64_t gen, struct hutch_err *err)
{
    cJSON *tools = NULL;
    bool fresh, changed = false;
    int r = 0;

    pthread_mutex_lock(&s->reinit_lock);
    pthread_mutex_lock(&s->lock);
    fresh = s->session_gen != gen;
    pthread_mutex_unlock(&s->lock);
    if (!fresh) {
        r = handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, err);
        if (r == 0) {
            pthread_mutex_lock(&s->lock);
            if (s->state == ST_READY) {
                changed = !cJSON_Compare(s->tools, tools, true);
                cJSON_Delete(s->tools);
                s->tools = tools;
                tools = NULL;
            }
            pthread_mutex_unlock(&s->lock);
        }
    }
    pthread_mutex_unlock(&s->reinit_lock);
    cJSON_Delete(tools);
    if (changed)
        gen_bump(s->u);
    return r;
}

/* Serve a ready server until it dies (stdio), or hutch stops. */
static void serve(struct server *s, struct child *c)
{
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!stopping(s->u) && !s->list_changed && !(c && (c->dead || c->broken)))
            pthread_cond_wait(&s->cond, &s->lock);
        if (stopping(s->u) || (c && (c->dead || c->broken)))
            break;
        s->list_changed = false;
        pthread_mutex_unlock(&s->lock);
        refresh_tools(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

/* One life of a stdio child: spawn, handshake, serve, teardown. */
static void stdio_run_once(struct server *s, unsigned *backoff)
{
    struct hutch_err e = {0};
    struct exit_info x;
    struct child *c = NULL;
    cJSON *tools = NULL;
    char why[HUTCH_ERR_MSG + 300];
    int r, broken;

    r = stdio_spawn(s, &c, &e);
    if (r < 0) {
        hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
        set_down(s, ST_FAILED, e.msg);
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->child = c;
    s->list_changed = false;
    pthread_mutex_unlock(&s->lock);

    r = handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, &e);
    if (r < 0) {
        if (stopping(s->u)) {
            child_teardown(s, c, HUTCH_UPSTREAM_STDIN_GRACE_MS, -ECONNRESET,
                           "was stopped", &x);
            return;
        }
        if (r != -ECONNRESET) { /* no answer or a bad one: it will not get better */
            hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
            set_down(s, ST_FAILED, e.msg);
            child_teardown(s, c, 0, -ECONNRESET, "was stopped", &x);
            return;
        }
        child_teardown(s, c, HUTCH_UPSTREAM_DEAD_GRACE_MS, -ECONNRESET, "exited", &x);
        snprintf(why, sizeof(why), "%s before initialize%s%s", x.text,
                 x.last_err[0] ? ": " : "", x.last_err);
        hutch_log(HUTCH_LOG_WARN, s->who, "%s", why);
        set_down(s, ST_FAILED, why);
        return;
    }
    set_ready(s, tools);

    serve(s, c);

    pthread_mutex_lock(&s->lock);
    broken = c->broken;
    snprintf(why, sizeof(why), "%s", c->broken_why);
    pthread_mutex_unlock(&s->lock);
    if (stopping(s->u)) {
        child_teardown(s, c, HUTCH_UPSTREAM_STDIN_GRACE_MS, -ECONNRESET, "was stopped",
                       &x);
        return;
    }
    /* mark_dead or mark_broken already left "ready". */
    child_teardown(s, c, broken ? 0 : HUTCH_UPSTREAM_DEAD_GRACE_MS,
                   broken ? broken : -ECONNRESET, broken ? why : "exited", &x);
    if (broken)
        snprintf(why + strlen(why), sizeof(why) - strlen(why), " (killed it)");
    else
        snprintf(why, sizeof(why), "%s%s%s", x.text, x.last_err[0] ? ": " : "",
                 x.last_err);
    pthread_mutex_lock(&s->lock);
    if (hutch_now_ms() - s->ready_since >= HUTCH_UPSTREAM_STABLE_MS)
        *backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;
    if (s->state == ST_RESTARTING)
        snprintf(s->error, sizeof(s->error), "%s; restarting", why);
    pthread_mutex_unlock(&s->lock);
    hutch_log(HUTCH_LOG_WARN, s->who, "%s; restarting in %u ms", why, *backoff);
}

static void http_run_once(struct server *s, unsigned *backoff)
{
    struct hutch_err e = {0};
    cJSON *tools = NULL;
    int r;

    pthread_mutex_lock(&s->reinit_lock);
    r = handshake(s, hutch_now_ms() + (unsigned)s->u->start_ms, &tools, &e);
    pthread_mutex_unlock(&s->reinit_lock);
    if (r < 0) {
        if (!stopping(s->u)) {
            hutch_log(HUTCH_LOG_WARN, s->who, "%s", e.msg);
            set_down(s, ST_FAILED, e.msg);
        }
        return;
    }
    set_ready(s, tools);
    *backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;
    serve(s, NULL);
}

static void *supervisor_main(void *arg)
{
    struct server *s = arg;
    unsigned backoff = HUTCH_UPSTREAM_BACKOFF_MIN_MS;

    while (!stopping(s->u)) {
        if (s->tr == TR_STDIO)
            stdio_run_once(s, &backoff);
        else
            http_run_once(s, &backoff);
        if (stopping(s->u))
            break;
        wait_backoff(s, backoff);
        backoff = backoff * 2 > HUTCH_UPSTREAM_BACKOFF_MAX_MS
                      ? HUTCH_UPSTREAM_BACKOFF_MAX_MS
                      : backoff * 2;
    }
    if (s->tr == TR_HTTP)
        http_end_session(s);
    return NULL;
}

/* --- the public API ----------------------------------------------------- */

static void server_free(struct server *s)
{
    free(s->command);
    strv_free(s->argv);
    strv_free(s->env);
    free(s->cwd);
    free(s->url);
    strv_free(s->headers);
    cJSON_Delete(s->tools);
    free(s->session);
    for (int i = 0; i < s->npool; i++)
        hconn_free(&s->pool[i]);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->reinit_lock);
    pthread_cond_destroy(&s->cond);
}

void hutch_upstreams_stop(struct hutch_upstreams *u)
{
    if (!u)
        return;
    __atomic_store_n(&u->stop, true, __ATOMIC_RELEASE);
    for (size_t i = 0; i < u->n; i++) {
        pthread_mutex_lock(&u->srv[i].lock);
        /* A handshake waiting for a server that hangs ends now, not at
         * the start timeout (a hutch told to stop took 30 s). */
        fail_pending_locked(&u->srv[i], -ECANCELED,
                            "was not answered: hutch is stopping");
        pthread_cond_broadcast(&u->srv[i].cond);
        pthread_mutex_unlock(&u->srv[i].lock);
    }
    pthread_mutex_lock(&u->lock);
    pthread_cond_broadcast(&u->cond);
    pthread_mutex_unlock(&u->lock);
}

void hutch_upstreams_wait_settled(struct hutch_upstreams *u, uint64_t deadline_ms)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    while (u->settled < u->n && !stopping(u) &&
           cond_wait_until(&u->cond, &u->lock, deadline_ms) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&u->lock);
}

int hutch_upstreams_wait_started(struct hutch_upstreams *u, const char *name,
                                 size_t len, uint64_t deadline_ms)
{
    struct server *s = NULL;
    bool settled;

    for (size_t i = 0; u && i < u->n && !s; i++)
        if (strlen(u->srv[i].name) == len && !strncasecmp(u->srv[i].name, name, len))
            s = &u->srv[i];
    if (!s)
        return 0;
    /* u->settled counts up after a server's own flag is set: a change of
     * the count seen before reading the flag is never missed. */
    pthread_mutex_lock(&u->lock);
    for (;;) {
        size_t seen = u->settled;
        pthread_mutex_unlock(&u->lock);
        pthread_mutex_lock(&s->lock);
        settled = s->settled;
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_lock(&u->lock);
        if (settled)
            break;
        while (u->settled == seen && !stopping(u) &&
               cond_wait_until(&u->cond, &u->lock, deadline_ms) != ETIMEDOUT)
            ;
        if (u->settled == seen)
            break; /* the deadline, or hutch stops */
    }
    pthread_mutex_unlock(&u->lock);
    return 1;
}

void hutch_upstreams_free(struct hutch_upstreams *u)
{
    if (!u)
        return;
    hutch_upstreams_stop(u);
    for (size_t i = 0; i < u->n; i++)
        if (u->srv[i].sup_started)
            pthread_join(u->srv[i].sup, NULL);
    for (size_t i = 0; i < u->n; i++)
        server_free(&u->srv[i]);
    free(u->srv);
    free(u->client_name);
    pthread_mutex_destroy(&u->lock);
    pthread_cond_destroy(&u->cond);
    free(u);
}

int hutch_upstreams_start(const cJSON *config, const struct hutch_upstream_opts *opts,
                          struct hutch_upstreams **out, struct hutch_err *err)
{
    struct hutch_upstreams *u = NULL;
    const cJSON *e;
    sigset_t all, old;
    bool any_http = false;
    size_t i = 0;
    int r;

    if (!out || !config)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_start: bad arguments");
    *out = NULL;
    if (opts && (opts->call_timeout_ms < 0 || opts->start_timeout_ms < 0))
        return hutch_err_set(err, -EINVAL, "upstream timeouts cannot be negative");
    r = check_servers("mcpServers", "mcpServers", config, false, err);
    if (r < 0)
        return r;

    u = calloc(1, sizeof(*u));
    if (!u)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&u->lock, NULL);
    cond_init_mono(&u->cond);
    u->call_ms =
        opts && opts->call_timeout_ms ? opts->call_timeout_ms : HUTCH_UPSTREAM_CALL_MS;
    u->start_ms = opts && opts->start_timeout_ms ? opts->start_timeout_ms
                                                 : HUTCH_UPSTREAM_START_MS;
    u->client_name = strdup(opts && opts->client_name ? opts->client_name : "hutch");
    u->n = (size_t)cJSON_GetArraySize(config);
    u->srv = calloc(u->n ? u->n : 1, sizeof(*u->srv));
    if (!u->client_name || !u->srv) {
        u->n = 0;
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        s->u = u;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->reinit_lock, NULL);
        cond_init_mono(&s->cond);
        s->state = ST_STARTING;
    }
    i = 0;
    cJSON_ArrayForEach(e, config)
    {
        struct server *s = &u->srv[i++];
        snprintf(s->name, sizeof(s->name), "%s", e->string);
        snprintf(s->who, sizeof(s->who), "upstream %s", e->string);
        r = entry_kind("mcpServers", e->string, e, s->error, sizeof(s->error), err);
        if (r == ENTRY_DISABLED || r == ENTRY_SKIPPED) {
            /* Listed with their state, never started: settled already. */
            s->state = r == ENTRY_DISABLED ? ST_DISABLED : ST_SKIPPED;
            s->tr = get(e, "url") && !get(e, "command") ? TR_HTTP : TR_STDIO;
            s->settled = true;
            u->settled++;
            continue;
        }
        if (r == 0)
            r = parse_entry("mcpServers", e->string, e, s, err);
        if (r < 0) {
            if (r == -ENOMEM)
                hutch_err_set(err, r, "out of memory");
            goto out;
        }
        any_http |= s->tr == TR_HTTP;
    }
    if (any_http) {
        r = hutch_libcurl_load(err);
        if (r < 0)
            goto out;
        pthread_once(&curl_once, curl_init);
        if (curl_init_rc != CURLE_OK) {
            r = hutch_err_set(err, -EIO, "cannot initialize libcurl: %s",
                              curl_easy_strerror(curl_init_rc));
            goto out;
        }
    }

    /* Our threads take no signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (i = 0; i < u->n; i++) {
        if (u->srv[i].state == ST_DISABLED || u->srv[i].state == ST_SKIPPED)
            continue;
        r = -pthread_create(&u->srv[i].sup, NULL, supervisor_main, &u->srv[i]);
        if (r < 0)
            break;
        u->srv[i].sup_started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        r = hutch_err_set(err, r, "cannot create a thread: %s", strerror(-r));
        goto out;
    }

    if (!(opts && opts->no_wait))
        hutch_upstreams_wait_settled(u, hutch_now_ms() + (unsigned)u->start_ms + 250);
    *out = u;
    return 0;
out:
    hutch_upstreams_free(u);
    return r;
}

cJSON *hutch_upstreams_tools(struct hutch_upstreams *u)
{
    cJSON *arr = cJSON_CreateArray();

    if (!u || !arr)
        return arr;
    for (size_t i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        const cJSON *t;
        pthread_mutex_lock(&s->lock);
        if (s->state == ST_READY) {
            cJSON_ArrayForEach(t, s->tools)
            {
                cJSON *o = cJSON_CreateObject(), *d = cJSON_Duplicate(t, true);
                if (!o || !d || !cJSON_AddStringToObject(o, "server", s->name)) {
                    cJSON_Delete(o);
                    cJSON_Delete(d);
                    pthread_mutex_unlock(&s->lock);
                    cJSON_Delete(arr);
                    return NULL;
                }
                cJSON_AddItemToObject(o, "tool", d);
                cJSON_AddItemToArray(arr, o);
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    return arr;
}

uint64_t hutch_upstreams_generation(struct hutch_upstreams *u)
{
    return u ? __atomic_load_n(&u->generation, __ATOMIC_ACQUIRE) : 0;
}

cJSON *hutch_upstreams_status(struct hutch_upstreams *u)
{
    cJSON *arr = cJSON_CreateArray();

    if (!u || !arr)
        return arr;
    for (size_t i = 0; i < u->n; i++) {
        struct server *s = &u->srv[i];
        cJSON *o = cJSON_CreateObject();
        bool ok;
        if (!o) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, o);
        pthread_mutex_lock(&s->lock);
        ok = cJSON_AddStringToObject(o, "server", s->name) &&
             cJSON_AddStringToObject(o, "transport",
                                     s->state == ST_SKIPPED ? "none"
                                     : s->tr == TR_STDIO    ? "stdio"
                                                            : "http") &&
             cJSON_AddStringToObject(o, "state", state_names[s->state]) &&
             (s->state == ST_READY || !s->error[0] ||
              cJSON_AddStringToObject(o, "error", s->error)) &&
             cJSON_AddNumberToObject(
                 o, "tools", s->state == ST_READY ? cJSON_GetArraySize(s->tools) : 0);
        pthread_mutex_unlock(&s->lock);
        if (!ok) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

int hutch_upstreams_call(struct hutch_upstreams *u, const char *server,
                         const char *tool, const cJSON *args, int timeout_ms,
                         cJSON **result, struct hutch_err *err)
{
    struct server *s = NULL;
    cJSON *params = NULL;
    char tname[HUTCH_MAX_TOOL_NAME + 1], what[HUTCH_MAX_TOOL_NAME + 16],
        state[HUTCH_ERR_MSG];
    bool ready;
    unsigned ms;
    int r;

    if (!u || !server || !tool || !result)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_call: bad arguments");
    *result = NULL;
    if (args && !cJSON_IsObject(args))
        return hutch_err_set(err, -EINVAL, "the arguments of %s must be an object",
                             tool);
    for (size_t i = 0; i < u->n && !s; i++)
        if (!strcmp(u->srv[i].name, server))
            s = &u->srv[i];
    if (!s) {
        char shown[80];
        clean_text(shown, sizeof(shown), server, strlen(server));
        return hutch_err_set(err, -ENOENT, "no upstream server named %s", shown);
    }
    pthread_mutex_lock(&s->lock);
    ready = s->state == ST_READY;
    snprintf(state, sizeof(state), "%s%s%s", state_names[s->state],
             s->error[0] ? ": " : "", s->error);
    pthread_mutex_unlock(&s->lock);
    if (!ready && (s->state == ST_DISABLED || s->state == ST_SKIPPED))
        return hutch_err_set(err, -EHOSTDOWN, "upstream %s is %s in the servers file",
                             s->name, state);
    if (!ready)
        return hutch_err_set(err, -EHOSTDOWN, "upstream %s is not ready (%s)", s->name,
                             state);

    /* The server's own limit, lowered to the caller's (what is left of an
     * execution's time, less the share the program keeps for itself). */
    ms = (unsigned)(s->call_ms ? s->call_ms : u->call_ms);
    if (timeout_ms > 0 && (unsigned)timeout_ms < ms)
        ms = (unsigned)timeout_ms;
    clean_text(tname, sizeof(tname), tool, strlen(tool));
    snprintf(what, sizeof(what), "tools/call %s", tname);
    params = cJSON_CreateObject();
    if (!params || !cJSON_AddStringToObject(params, "name", tool) ||
        !cJSON_AddItemToObject(params, "arguments",
                               args ? cJSON_Duplicate(args, true)
                                    : cJSON_CreateObject())) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = srv_request(s, "tools/call", params, hutch_now_ms() + ms, ms, what, true,
                    result, err);
out:
    cJSON_Delete(params);
    return r;
}
