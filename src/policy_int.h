/* policy_int.h — what the policy_*.c files share, and nobody else: the
 * policy's structure, a Lua state's, the small string helpers, and each
 * file's functions the others call.  Not an API (that is policy.h).
 *
 *   policy_table.c  the judge of the table a policy file returns: every
 *                   field checked, and copied into struct hutch_policy
 *   policy_lua.c    the Lua runtime: the restricted state, enough C stack,
 *                   building a state from the source, the pool of states a
 *                   hook borrows, and hutch.path_allowed
 *   policy.c        loading, the getters, and the decisions (tool globs,
 *                   on_tool_call, on_execute, principals, secrets)
 *
 * Each file calls only the ones listed before it (no cycle among them).
 * The thread and lock rules are at the top of policy_lua.c (the pool of
 * Lua states is a policy's only mutable state besides its count). */
#ifndef HUTCH_POLICY_INT_H
#define HUTCH_POLICY_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <lua.h>

#include "caps.h"
#include "egress.h"
#include "policy.h"

struct glob {
    char *pat;  /* lower-cased, trimmed */
    char *orig; /* as written, for messages */
};

struct principal {
    char *name;
    char *token;
    size_t token_len;
    struct hutch_policy_concurrency conc; /* its own; 0: the policy's */
    struct hutch_egress_rules *egress;    /* its own; NULL: the policy's */
    int egress_off;                       /* egress = false: none for it */
};

struct lstate {
    lua_State *L;
    struct hutch_policy *p;
    size_t mem, mem_cap;
    uint64_t deadline_ns;
    unsigned budget_ms;
    int loading; /* running the file rather than a hook */
    int killed;  /* the deadline passed: every later count hook raises */
    int oom;     /* a memory error happened (maybe caught by pcall) */
    int ref_execute, ref_tool_call;
    struct lstate *next;
};

struct hutch_policy {
    int refs;
    char *source;    /* the file as given, or "built-in" */
    char *chunkname; /* "@" + the file's base name */
    char *text;
    size_t text_len;
    char executor[64];
    int executor_explicit; /* the file names `executor` */
    int builtin;           /* the built-in default, not a file */
    /* pool sizes per language ([0] python, [1] javascript; -1: not said),
     * for any executor, and per executor name. */
    int pool_any[2];
    struct {
        char name[64];
        int size[2];
    } pools[HUTCH_POLICY_MAX_EXECUTORS];
    size_t npools;
    /* executor_options: per executor name, its options as typed pairs in
     * the policy's order (one more for the flavour --flavour adds), and
     * rendered from them (pol_xopts_render) as the JSON object of strings
     * handed to the plugin with every sandbox it starts. */
    struct {
        char name[64];
        struct {
            char key[HUTCH_POLICY_MAX_OPT_NAME + 1];
            char *value;
        } kv[HUTCH_POLICY_MAX_OPTIONS + 1];
        size_t n;
        char *json;
    } xopts[HUTCH_POLICY_MAX_EXECUTORS];
    size_t nxopts;
    struct hutch_policy_limits limits;
    struct hutch_policy_rate rate;
    struct hutch_policy_concurrency conc;
    struct hutch_policy_workspaces ws;
    struct hutch_policy_path *paths;
    size_t npaths;
    struct principal *principals;
    size_t nprincipals;
    struct glob *allow, *deny, *secret;
    size_t nallow, ndeny, nsecret;
    /* taint: untrusted sources and sinks (globs over "server.tool", as
     * tools.allow), and what a sink call of a tainted execution gets. */
    struct glob *sources, *sinks;
    size_t nsources, nsinks;
    int taint_ask; /* taint.on_sink = "ask" (else "deny") */
    int allow_all; /* the built-in default: no allow list */
    int has_execute, has_tool_call;
    int direct_tools; /* -1: not said; 0 or 1 (hutch_policy_direct_tools) */
    struct hutch_egress_rules *egress; /* NULL: no `egress` field, egress off */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct lstate *idle;
    unsigned nstates;
};

/* Validation's context: the policy being filled and the first error. */
struct vctx {
    struct hutch_policy *p;
    char field[64]; /* the key the error is about, for the line guess */
    char msg[768];
    int failed;
};

/* What a hook trampoline reports. */
struct verdict {
    int code; /* 0 allowed, negative denied, HUTCH_POLICY_ASK: ask the user */
    char reason[512];
};

/* --- small helpers --- */

static inline int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static inline int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Trimmed view of s: *start, returns its length. */
static inline size_t trim(const char *s, const char **start)
{
    size_t n;
    while (*s && is_space((unsigned char)*s))
        s++;
    n = strlen(s);
    while (n && is_space((unsigned char)s[n - 1]))
        n--;
    *start = s;
    return n;
}

/* `*` any run (dots included), `?` one character; case-insensitive (ASCII).
 * Iterative with one backtrack point: O(len(p) * len(s)) at worst. */
static inline int glob_match(const char *p, const char *s)
{
    const char *star = NULL, *retry = NULL;
    while (*s) {
        if (*p == '*') {
            while (*p == '*')
                p++;
            if (!*p)
                return 1;
            star = p;
            retry = s;
        } else if (*p == '?' ||
                   (*p && lower((unsigned char)*p) == lower((unsigned char)*s))) {
            p++;
            s++;
        } else if (star) {
            p = star;
            s = ++retry;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return !*p;
}

/* Fill the caller's reason (control characters become spaces: reasons go
 * to the agent and into one-line logs) and return code. */
__attribute__((format(printf, 4, 5))) static inline int
set_reason(char *reason, size_t len, int code, const char *fmt, ...)
{
    va_list ap;
    if (!reason || !len)
        return code;
    va_start(ap, fmt);
    vsnprintf(reason, len, fmt, ap);
    va_end(ap);
    for (char *c = reason; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    return code;
}

/* policy_table.c */
extern const char *const pol_limit_fields[];
extern const char *const pol_pool_langs[]; /* [0] python, [1] javascript */
/* Check the table at t (the file's result) and fill vc->p; raises a Lua
 * error with vc->failed set on the first problem. */
void pol_validate(lua_State *L, struct vctx *vc, int t);
const char *pol_type_of(lua_State *L, int idx);
int pol_rawget_field(lua_State *L, int t, const char *key);
int pol_parse_limit(lua_State *L, int idx, const char *key, uint64_t *out, char *msg,
                    size_t len);
void pol_set_limit(struct hutch_policy_limits *l, const char *key, uint64_t v);
int pol_valid_executor(const char *s);

/* policy_lua.c */
struct lstate *pol_state_of(lua_State *L);
/* Build one state from p's source on a thread with enough C stack (vc:
 * validate the returned table; NULL for the copies).  On error `msg` is the
 * first line of the Lua error or the validation message. */
int pol_state_open_big(struct hutch_policy *p, struct vctx *vc, struct lstate **out,
                       char *msg, size_t len);
void pol_state_close(struct lstate *st);
/* Run `fn(ctx)` in a state borrowed from p's pool, within the hook's
 * deadline and with enough C stack; errors deny (v filled).  Returns
 * v->code. */
int pol_run_hook(struct hutch_policy *p, lua_CFunction fn, void *ctx, struct verdict *v,
                 const char *hook, const char *subject);

/* policy_table.c: xopts[i]'s JSON from its pairs (0, or -ENOMEM); the value of
 * one of its options, NULL when it has none. */
int pol_xopts_render(struct hutch_policy *p, size_t i);
const char *pol_xopts_get(const struct hutch_policy *p, size_t i, const char *key);

#endif
