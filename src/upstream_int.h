/* upstream_int.h — what the upstream_*.c files share, and nobody else:
 * the server and child structures, the small helpers, and each file's
 * functions the others call.  Not an API (that is upstream.h).
 *
 *   upstream.c          a server's state, the lifecycle (supervisor,
 *                       initialize, tools/list, restarts) and the public API
 *   upstream_servers.c  the servers file: what an entry is, ${VAR}
 *   upstream_stdio.c    stdio children: spawn, the I/O thread, requests
 *   upstream_http.c     streamable HTTP through libcurl, its SSE parser
 *   upstream_xheader.c  SEP-2243's x-mcp-header: Mcp-Param-* of a tools/call
 *   upstream_rpc.c      the JSON-RPC they all speak, what upstreams send
 *                       whatever the transport, the small helpers
 *
 * The arrows run one way: upstream.c calls the others, the transports call
 * upstream_servers.c's and upstream_xheader.c's functions, and every file
 * calls upstream_rpc.c, which calls none of them.  What a transport hands
 * up to upstream.c goes through struct up_events (u->ev).
 *
 * The thread and lock rules are at the top of upstream.c. */
#ifndef HUTCH_UPSTREAM_INT_H
#define HUTCH_UPSTREAM_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "caps.h"
#include "curl_lib.h"
#include "upstream.h"
#include "util.h"

#define PROTOCOL_VERSION  "2025-11-25" /* the newest 2025-era (initialize) revision */
#define MODERN_VERSION    "2026-07-28" /* the stateless revision (server/discover) */
#define META_VERSION      "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT_INFO  "io.modelcontextprotocol/clientInfo"
#define READ_CHUNK        65536
#define SNIPPET           200 /* bytes of an unexpected body quoted in an error */

enum transport { TR_STDIO, TR_HTTP };
/* Which MCP a server speaks (upstream.c's probe_era decides, at each
 * start): not known yet (the server/discover probe is under way; its
 * request already carries the 2026 _meta and headers), the 2025 era
 * (initialize, sessions), or 2026-07-28 (stateless: _meta on every
 * request, no session).  Read with era_of(). */
enum era { ERA_PROBE, ERA_LEGACY, ERA_MODERN };
/* disabled, skipped: never started ("disabled": true, an unsupported type). */
/* The values are status.h's, so that a snapshot copies the state as it is. */
enum state {
    ST_STARTING = HUTCH_UPSTREAM_STARTING,
    ST_READY = HUTCH_UPSTREAM_READY,
    ST_FAILED = HUTCH_UPSTREAM_FAILED,
    ST_RESTARTING = HUTCH_UPSTREAM_RESTARTING,
    ST_DISABLED = HUTCH_UPSTREAM_DISABLED,
    ST_SKIPPED = HUTCH_UPSTREAM_SKIPPED
};

/* One entry of the servers file that runs, as upstream_servers.c read it. */
struct up_entry {
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
};

struct outmsg {
    struct outmsg *next;
    size_t len, off;
    char buf[];
};

/* What an asynchronous request's owner is told, once: r 0 with the whole
 * response message (the callee's), or negative with err saying why.
 * Called on the child's I/O thread with no lock held, or on the thread
 * that started the request before up_stdio_start returns. */
typedef void (*up_done_fn)(void *arg, int r, cJSON *reply, struct hutch_err *err);

/* A request waiting for its response: on the caller's stack when a thread
 * waits for it (cond), on the heap when it is asynchronous (done set). */
struct pending {
    struct pending *next;
    int64_t id;
    bool done;
    int code;     /* 0 with reply, or negative */
    cJSON *reply; /* the whole response message */
    char why[256];
    pthread_cond_t cond;
    /* Asynchronous (up_stdio_start) only. */
    up_done_fn done_fn;
    void *done_arg;
    struct child *child; /* whose I/O thread completes it */
    bool starting;       /* its starter still holds it: nobody completes it */
    uint64_t garbage0;   /* the child's count of garbage lines at the start */
    uint64_t garbage;    /* those it sent until it timed out */
    uint64_t deadline;
    unsigned budget;
    char what[HUTCH_MAX_TOOL_NAME + 16];
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
    uint64_t io_wake; /* when the I/O thread wakes for a deadline (0: never) */
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
    struct up_entry cfg; /* what the servers file says */
    int era;             /* enum era; atomic: set by the supervisor only */
    bool legacy_only;    /* the probe killed it: initialize from now on */

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

/* What a transport hands up to upstream.c, which sets it (u->ev) when it
 * makes the servers: the transports call nothing of upstream.c by name. */
struct up_events {
    /* An HTTP session expired (-ESTALE): initialize a new one unless
     * another thread already did since generation `gen`. */
    int (*http_reinit)(struct server *s, uint64_t gen, struct hutch_err *err);
};

struct hutch_upstreams {
    const struct up_events *ev;
    struct server *srv;
    size_t n;
    int call_ms, start_ms;
    char *client_name;
    bool stop;           /* atomic */
    uint64_t generation; /* atomic */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t settled; /* servers that left "starting" */
    /* Until when searches wait for servers still starting: set by the
     * first search that found one (0: none has); under lock. */
    uint64_t search_until_ms;
};

/* How a stdio child ended (up_child_teardown). */
struct exit_info {
    bool alone; /* it exited before we sent a signal */
    char text[80];
    char last_err[256];
};

/* --- small helpers ------------------------------------------------------ */

static inline bool stopping(const struct hutch_upstreams *u)
{
    return __atomic_load_n(&u->stop, __ATOMIC_ACQUIRE);
}
static inline void gen_bump(struct hutch_upstreams *u)
{
    __atomic_add_fetch(&u->generation, 1, __ATOMIC_ACQ_REL);
}
static inline unsigned ms_left(uint64_t deadline)
{
    uint64_t now = hutch_now_ms();
    return deadline > now ? (unsigned)(deadline - now) : 0;
}
static inline char **strv_new(size_t n)
{
    return calloc(n + 1, sizeof(char *));
}
/* Not strchr(" \t\r\n", ch): that matches a NUL byte too. */
static inline bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}
static inline const cJSON *get(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}
static inline int era_of(const struct server *s)
{
    return __atomic_load_n(&s->era, __ATOMIC_ACQUIRE);
}

/* Wakes a child's I/O thread: it writes what is queued and looks at its
 * asynchronous requests. */
static inline void up_child_poke(struct child *c)
{
    uint64_t one = 1;
    if (write(c->wake_fd, &one, sizeof(one)) < 0)
        return; /* the counter is full: it is awake anyway */
}

static inline bool version_ok(const char *v)
{
    return !strcmp(v, "2025-11-25") || !strcmp(v, "2025-06-18") ||
           !strcmp(v, "2025-03-26");
}

/* --- upstream_rpc.c ------------------------------------------------------ */

/* This thread's answerer of upstream questions, or NULL. */
const struct hutch_elicitor *up_elicitor(void);
void up_clean_text(char *dst, size_t cap, const char *src, size_t len);
void up_strv_free(char **v);
bool up_rpc_id(const cJSON *id, int64_t *out);
cJSON *up_rpc_new(int64_t id, const char *method, const cJSON *params);
/* Charges the text of a request to the budget of the tool call this thread
 * runs (budget.h), if any: 0 with *charged set (give it back once the text
 * is freed), or -E2BIG with err saying why. */
int up_charge_text(const struct server *s, const char *what, const char *text,
                   size_t *charged, struct hutch_err *err);
/* A request to s: up_rpc_new, plus the 2026 _meta unless s speaks 2025. */
cJSON *up_request_msg(struct server *s, int64_t id, const char *method,
                      const cJSON *params);
/* What a request names, for 2026's Mcp-Name header: tools/call's and
 * prompts/get's "name", resources/read's "uri"; NULL for the rest. */
const char *up_request_name(const char *method, const cJSON *params);

/* Our answer to a request from a server (ping {}, the rest -32601); NULL
 * when there is nothing to answer. */
cJSON *up_answer_request(struct server *s, const char *method, const cJSON *id);
/* Under the server's lock: every call waiting on s ends with code, why. */
void up_fail_pending_locked(struct server *s, int code, const char *why);
/* A notification from s: list_changed wakes its supervisor, a log message
 * is logged, the rest ignored. */
void up_on_notification(struct server *s, const char *method, const cJSON *params);

/* --- upstream_servers.c --------------------------------------------------- */

/* SKIPPED: a type hutch does not run; BROKEN: an error of the entry's
 * own.  Neither is started; both are listed as "skipped". */
enum entry_kind { ENTRY_RUN, ENTRY_DISABLED, ENTRY_SKIPPED, ENTRY_BROKEN };
int up_check_servers(const char *where, const char *key, const cJSON *servers,
                     bool warn, struct hutch_err *err);
int up_entry_kind(const char *where, const char *name, const cJSON *e, char *why,
                  size_t why_cap, struct hutch_err *err);
int up_parse_entry(const char *where, const char *name, const cJSON *e,
                   struct up_entry *c, struct hutch_err *err);
bool up_text_has_ctl(const char *s);
void up_entry_free(struct up_entry *c);

/* --- upstream_stdio.c ----------------------------------------------------- */

void up_child_teardown(struct server *s, struct child *c, unsigned grace, int code,
                       const char *why, struct exit_info *x);
int up_stdio_notify(struct server *s, const char *method, struct hutch_err *err);
int up_stdio_request(struct server *s, const char *method, const cJSON *params,
                     uint64_t deadline, unsigned budget, const char *what,
                     cJSON **reply, struct hutch_err *err);
int up_stdio_spawn(struct server *s, struct child **out, struct hutch_err *err);
/* up_stdio_request without a waiting thread: 0 when the request is on its
 * way (done is then called exactly once, by the child's I/O thread or by
 * this thread before it returns), negative with err when it is not (done
 * is never called).  Its timeout is the I/O thread's to watch. */
int up_stdio_start(struct server *s, const char *method, const cJSON *params,
                   uint64_t deadline, unsigned budget, const char *what,
                   up_done_fn done, void *arg, struct hutch_err *err);

/* --- upstream_http.c ------------------------------------------------------ */

int up_http_global_init(struct hutch_err *err);
void up_hconn_free(struct hconn *c);
void up_http_end_session(struct server *s);
int up_http_notify(struct server *s, const char *method, uint64_t deadline,
                   struct hutch_err *err);
int up_http_request(struct server *s, const char *method, const cJSON *params,
                    uint64_t deadline, unsigned budget, const char *what,
                    bool may_reinit, cJSON **reply, struct hutch_err *err);

/* --- upstream_xheader.c --------------------------------------------------- */

/* The Mcp-Param-* lines of a tools/call (params: its params) from the
 * listed tool's inputSchema, or *lines NULL; takes s->lock. */
int up_xheader_call(struct server *s, const cJSON *params, char ***lines,
                    struct hutch_err *err);

#endif
