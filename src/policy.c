/* policy.c — the Lua policy engine (policy.h, hutch-policy(5)): loading and
 * validating the policy file, the restricted Lua states its hooks run in,
 * and the decisions (tool globs, on_execute, on_tool_call, host paths,
 * principals, secret argument names).
 *
 * Not here: path normalisation itself (path.c), rate limiting and the audit
 * log (the server asks these functions and writes what they say), the
 * command line (cmd_policy.c).
 *
 * Lua states.  A policy owns a small pool of Lua states, all built from the
 * same source: a decision borrows one, so hooks of concurrent decisions run
 * in parallel without a global lock.  Each state is restricted
 * (ARCHITECTURE.md, "Conventions"): base without
 * dofile/loadfile/rawset/warn, `load` of text only, string without dump,
 * table, math, utf8 and the `hutch` helpers; a capped allocator; an
 * instruction-count hook checking a deadline; a traceback message handler;
 * globals and library tables read-only once the file has been loaded.  A
 * state that ran out of memory or time is closed and rebuilt from the
 * source rather than trusted again.  Any error denies. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "caps.h"
#include "log.h"
#include "path.h"
#include "policy.h"
#include "util.h"

/* C stack a Lua state may need: Lua allows 200 nested C calls (gsub with a
 * function calling gsub…), about 500 KiB at worst; sanitizers triple it.
 * A caller with less runs the hook on a short-lived thread (slower). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define POLICY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define POLICY_SANITIZED 1
#endif
#endif
#ifndef HUTCH_POLICY_STACK
#ifdef POLICY_SANITIZED
#define HUTCH_POLICY_STACK (6u << 20)
#else
#define HUTCH_POLICY_STACK (1u << 20)
#endif
#endif

#define HOOK_COUNT     1000 /* VM instructions between deadline checks */
#define TOKEN_SENTINEL "CHANGE-ME"

struct glob {
    char *pat;  /* lower-cased, trimmed */
    char *orig; /* as written, for messages */
};

struct principal {
    char *name;
    char *token;
    size_t token_len;
    struct hutch_policy_concurrency conc; /* its own; 0: the policy's */
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
    /* executor_options: per executor name, its options as a JSON object of
     * strings, handed to the plugin with every sandbox it starts. */
    struct {
        char name[64];
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
    int allow_all; /* the built-in default: no allow list */
    int has_execute, has_tool_call;
    int direct_tools; /* -1: not said; 0 or 1 (hutch_policy_direct_tools) */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct lstate *idle;
    unsigned nstates;
};

/* Argument names hidden from the audit log when the policy has no `audit`. */
static const char *const default_secrets[] = {
    "password", "passwd", "*token*",       "*secret*", "*api_key*",
    "*apikey*", "cookie", "authorization", NULL,
};

static const struct hutch_policy_limits default_limits = {
    .timeout_ms = HUTCH_DEFAULT_TIMEOUT_MS,
    .memory_mb = HUTCH_DEFAULT_MEMORY_MB,
    .cpus_milli = 0,
    .pids = HUTCH_DEFAULT_PIDS,
    .output_bytes = HUTCH_OUTPUT_MAX_BYTES,
    .files_bytes = HUTCH_MAX_INPUT_BYTES,
};

/* Registry keys (their addresses). */
static const char env_key = 0, envmt_key = 0;

/* --- small helpers --- */

/* A hook's budget is CPU time of the thread running it, not wall-clock
 * time: Lua here cannot sleep or wait, so a hook that spends its budget
 * is looping, while one that a busy machine merely keeps off the CPU has
 * done nothing wrong and must not be denied for it. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Trimmed view of s: *start, returns its length. */
static size_t trim(const char *s, const char **start)
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
static int glob_match(const char *p, const char *s)
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
__attribute__((format(printf, 4, 5))) static int
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

/* The line where `name = ` appears in the source, when it appears exactly
 * once (a table constructor does not keep lines; this is a good guess). */
static int find_line(const char *src, size_t len, const char *name)
{
    size_t nl = strlen(name), i;
    int line = 1, found = 0, count = 0;
    if (!src || !nl)
        return 0;
    for (const char *c = name; *c; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9')))
            return 0;
    for (i = 0; i + nl <= len; i++) {
        if (src[i] == '\n') {
            line++;
            continue;
        }
        if (memcmp(src + i, name, nl) != 0)
            continue;
        if (i > 0 && (src[i - 1] == '_' || src[i - 1] == '.' ||
                      (src[i - 1] >= 'a' && src[i - 1] <= 'z') ||
                      (src[i - 1] >= 'A' && src[i - 1] <= 'Z') ||
                      (src[i - 1] >= '0' && src[i - 1] <= '9')))
            continue;
        size_t j = i + nl;
        while (j < len && (src[j] == ' ' || src[j] == '\t'))
            j++;
        if (j < len && src[j] == '=' && (j + 1 >= len || src[j + 1] != '=')) {
            if (!count++)
                found = line;
        }
    }
    return count == 1 ? found : 0;
}

static void first_line(const char *msg, char *out, size_t len)
{
    size_t n = strcspn(msg, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(out, msg, n);
    out[n] = '\0';
}

/* A multi-line Lua traceback as one log line. */
static void one_line(const char *msg, char *out, size_t len)
{
    size_t o = 0;
    for (const char *c = msg; *c && o + 3 < len; c++) {
        if (*c == '\n') {
            out[o++] = ';';
            out[o++] = ' ';
            while (c[1] == '\t' || c[1] == ' ')
                c++;
        } else {
            out[o++] = (unsigned char)*c < 0x20 ? ' ' : *c;
        }
    }
    out[o] = '\0';
}

/* --- enough C stack --- */

static __thread uintptr_t stack_low;
static __thread int stack_probed;

static size_t stack_left(void)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (!stack_probed) {
        pthread_attr_t a;
        void *addr;
        size_t size;
        stack_probed = 1;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &addr, &size) == 0)
                stack_low = (uintptr_t)addr;
            pthread_attr_destroy(&a);
        }
    }
    return stack_low && sp > stack_low ? sp - stack_low : 0;
}

struct on_stack {
    void (*fn)(void *);
    void *arg;
};

static void *on_stack_main(void *a)
{
    struct on_stack *o = a;
    o->fn(o->arg);
    return NULL;
}

/* fn(arg) with at least HUTCH_POLICY_STACK bytes of C stack: here, or on a
 * thread of its own when the caller's stack is smaller (exec's tool-call
 * workers, for one).  0, or a negative errno when no thread could start. */
static int with_stack(void (*fn)(void *), void *arg)
{
    struct on_stack o = {fn, arg};
    pthread_attr_t attr;
    pthread_t th;
    int r;
    if (stack_left() >= HUTCH_POLICY_STACK) {
        fn(arg);
        return 0;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, HUTCH_POLICY_STACK + (256u << 10));
    r = pthread_create(&th, &attr, on_stack_main, &o);
    pthread_attr_destroy(&attr);
    if (r)
        return -r;
    pthread_join(th, NULL);
    return 0;
}

/* --- the restricted Lua state --- */

static struct lstate *state_of(lua_State *L)
{
    return *(struct lstate **)lua_getextraspace(L);
}

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct lstate *st = ud;
    size_t old = ptr ? osize : 0;
    void *np;
    if (nsize == 0) {
        free(ptr);
        st->mem -= old;
        return NULL;
    }
    if (nsize > old && st->mem - old + nsize > st->mem_cap)
        return NULL;
    np = realloc(ptr, nsize);
    if (!np)
        return NULL;
    st->mem = st->mem - old + nsize;
    return np;
}

static int l_panic(lua_State *L)
{
    const char *m = lua_tostring(L, -1);
    hutch_error("policy: unprotected Lua error (a bug in hutch): %s", m ? m : "?");
    abort();
    return 0;
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
    struct lstate *st = state_of(L);
    const char *what;
    if (!st->killed && now_ns() < st->deadline_ns)
        return;
    st->killed = 1;
    what =
        st->loading ? "the policy took too long to load" : "policy hook ran too long";
    if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
        lua_pushfstring(L, "%s:%d: %s (more than %d ms of CPU time)", ar->short_src,
                        ar->currentline, what, (int)st->budget_ms);
    else
        lua_pushfstring(L, "%s (more than %d ms of CPU time)", what,
                        (int)st->budget_ms);
    lua_error(L);
}

/* Message handler: the error as a string, with a traceback. */
static int msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg =
                lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* pcall and xpcall that cannot swallow the deadline or the memory cap. */
static int finish_pcall(lua_State *L, int status, int extra)
{
    struct lstate *st = state_of(L);
    if (status == LUA_OK)
        return lua_gettop(L) - extra;
    if (status == LUA_ERRMEM)
        st->oom = 1;
    if (st->killed || st->oom)
        return lua_error(L);
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
}

static int l_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    return finish_pcall(L, lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0), 0);
}

static int l_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);
    return finish_pcall(L, lua_pcall(L, n - 2, LUA_MULTRET, 2), 2);
}

/* load(chunk [, chunkname [, mode [, env]]]): strings only, text only, and
 * without env the policy's (read-only) globals, never the raw table.  The
 * parser runs no instructions the count hook could see: its input is
 * capped instead. */
static int l_load(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "=(load)");
    int has_env = !lua_isnone(L, 4);
    if (len > HUTCH_POLICY_MAX_LOAD)
        return luaL_error(L, "load: at most %d bytes of source in a policy",
                          (int)HUTCH_POLICY_MAX_LOAD);
    if (luaL_loadbufferx(L, s, len, name, "t") != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (has_env)
        lua_pushvalue(L, 4);
    else
        lua_rawgetp(L, LUA_REGISTRYINDEX, &env_key);
    if (!lua_setupvalue(L, -2, 1))
        lua_pop(L, 1);
    return 1;
}

static void log_args(lua_State *L, int from, enum hutch_log_level level)
{
    luaL_Buffer b;
    int n = lua_gettop(L);
    luaL_buffinit(L, &b);
    for (int i = from; i <= n; i++) {
        if (i > from)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    hutch_log(level, "policy", "%.1024s", lua_tostring(L, -1));
}

static int l_print(lua_State *L)
{
    log_args(L, 1, HUTCH_LOG_INFO);
    return 0;
}

static int l_log(lua_State *L)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    int level = luaL_checkoption(L, 2, "info", levels);
    lua_settop(L, 1);
    log_args(L, 1, (enum hutch_log_level)level);
    return 0;
}

static int l_glob(lua_State *L)
{
    size_t plen;
    const char *pat = luaL_checklstring(L, 1, &plen), *s = luaL_checkstring(L, 2), *ts;
    size_t n = trim(s, &ts);
    char buf[HUTCH_POLICY_MAX_NAME + 1];
    if (plen > HUTCH_POLICY_MAX_GLOB)
        return luaL_error(L, "hutch.glob: a pattern has at most %d bytes",
                          HUTCH_POLICY_MAX_GLOB);
    if (n > HUTCH_POLICY_MAX_NAME) {
        lua_pushboolean(L, 0);
        return 1;
    }
    memcpy(buf, ts, n);
    buf[n] = '\0';
    lua_pushboolean(L, glob_match(pat, buf));
    return 1;
}

static int path_check(struct hutch_policy *p, const char *path, int rw, char *resolved,
                      size_t resolved_len, char *why, size_t why_len);

static int l_path_allowed(lua_State *L)
{
    static const char *const modes[] = {"ro", "rw", NULL};
    struct lstate *st = state_of(L);
    int rw = luaL_checkoption(L, 2, "ro", modes);
    char resolved[PATH_MAX], why[PATH_MAX + 128];
    size_t n;
    const char *s;
    /* Every copy of the state must decide alike: while the file runs, the
     * first copy does not know the paths yet. */
    if (st->loading)
        return luaL_error(L, "hutch.path_allowed works in hooks only, not while the "
                             "file loads");
    if (lua_type(L, 1) != LUA_TSTRING) {
        lua_pushboolean(L, 0);
        lua_pushfstring(L, "no path given (got %s)", luaL_typename(L, 1));
        return 2;
    }
    s = lua_tolstring(L, 1, &n);
    if (strlen(s) != n) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, "the path contains a NUL byte");
        return 2;
    }
    if (path_check(st->p, s, rw, resolved, sizeof(resolved), why, sizeof(why)) == 1) {
        lua_pushboolean(L, 1);
        lua_pushstring(L, resolved);
    } else {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
    }
    return 2;
}

/* setmetatable without finalizers: Lua runs __gc with the count hook
 * switched off, so a finalizer that loops could never be stopped. */
static int l_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not available to policies");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static int ro_global(lua_State *L)
{
    return luaL_error(L,
                      "cannot assign global \"%s\": policy globals are read-only after "
                      "load (use a local variable)",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int ro_library(lua_State *L)
{
    return luaL_error(L, "cannot modify a library table: libraries are read-only");
}

/* Replace G[name] with an empty proxy reading through to it. */
static void protect_library(lua_State *L, int g, const char *name)
{
    lua_newtable(L);          /* proxy */
    lua_createtable(L, 0, 3); /* its metatable */
    lua_getfield(L, g, name);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_library);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_setfield(L, g, name);
}

static void open_sandbox(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL},
    };
    static const char *const removed[] = {"dofile", "loadfile", "rawset", "warn", NULL};
    static const luaL_Reg replaced[] = {
        {"load", l_load},
        {"print", l_print},
        {"pcall", l_pcall},
        {"xpcall", l_xpcall},
        {"setmetatable", l_setmetatable},
        {NULL, NULL},
    };
    static const luaL_Reg hutch_lib[] = {
        {"path_allowed", l_path_allowed},
        {"log", l_log},
        {"glob", l_glob},
        {NULL, NULL},
    };
    static const char *const protected_libs[] = {LUA_STRLIBNAME,  LUA_TABLIBNAME,
                                                 LUA_MATHLIBNAME, LUA_UTF8LIBNAME,
                                                 "hutch",         NULL};
    int g;

    for (const luaL_Reg *l = libs; l->name; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);
    g = lua_gettop(L);
    for (const char *const *r = removed; *r; r++) {
        lua_pushnil(L);
        lua_setfield(L, g, *r);
    }
    luaL_setfuncs(L, replaced, 0);
    lua_getfield(L, g, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);

    luaL_newlib(L, hutch_lib);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    lua_setfield(L, g, "hutch");

    for (const char *const *n = protected_libs; *n; n++)
        protect_library(L, g, *n);
    /* The string metatable (s:upper()) stays, but out of reach. */
    lua_pushliteral(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    /* The environment the file and every hook see: an empty proxy over the
     * globals.  While the file runs, assignments go through to the globals
     * (helper functions); freeze() makes them errors. */
    lua_newtable(L);
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, g);
    lua_setfield(L, -2, "__index");
    lua_pushvalue(L, g);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &envmt_key);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, g, "_G");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &env_key);
    lua_settop(L, g - 1);
}

static void freeze(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &envmt_key);
    lua_pushcfunction(L, ro_global);
    lua_setfield(L, -2, "__newindex");
    lua_pop(L, 1);
}

/* --- validation of the returned table --- */

struct vctx {
    struct hutch_policy *p;
    char field[64]; /* the key the error is about, for the line guess */
    char msg[768];
    int failed;
};

__attribute__((format(printf, 4, 5))) static int
verr(lua_State *L, struct vctx *vc, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vc->msg, sizeof(vc->msg), fmt, ap);
    va_end(ap);
    snprintf(vc->field, sizeof(vc->field), "%s", key ? key : "");
    vc->failed = 1;
    lua_pushstring(L, vc->msg);
    return lua_error(L);
}

static const char *const top_fields[] = {
    "executor",   "executor_options", "limits", "tools",
    "paths",      "principals",       "rate",   "audit",
    "on_execute", "on_tool_call",     "pool",   "direct_tools",
    "workspaces", "concurrency",      NULL};
static const char *const limit_fields[] = {
    "timeout_ms", "memory_mb", "cpus", "pids", "output_bytes", "files_bytes", NULL};
static const char *const tools_fields[] = {"allow", "deny", NULL};
static const char *const path_fields[] = {"host", "sandbox", "mode", NULL};
static const char *const principal_fields[] = {"name", "token", "concurrency", NULL};
static const char *const concurrency_fields[] = {"executions", "queued", NULL};
static const char *const rate_fields[] = {"executions_per_minute",
                                          "tool_calls_per_minute", NULL};
static const char *const audit_fields[] = {"secret", NULL};
static const char *const workspace_fields[] = {"allow", "max_bytes", "max_count",
                                               "idle_s", NULL};

static const char *join(char *buf, size_t len, const char *where, const char *key)
{
    snprintf(buf, len, "%s%s%s", where, *where ? "." : "", key);
    return buf;
}

/* Every key of the table at t is a string naming a known field. */
static void v_fields(lua_State *L, struct vctx *vc, int t, const char *where,
                     const char *const *known)
{
    char full[256], hint[300];
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            if (lua_isinteger(L, -1))
                verr(L, vc, NULL, "%s%sunknown field [%lld] (fields have names)", where,
                     *where ? ": " : "", (long long)lua_tointeger(L, -1));
            verr(L, vc, NULL, "%s%sunknown field (a %s key; fields have names)", where,
                 *where ? ": " : "", luaL_typename(L, -1));
        }
        const char *k = lua_tostring(L, -1);
        const char *const *f;
        for (f = known; *f && strcmp(*f, k); f++)
            ;
        if (!*f) {
            const char *s = hutch_suggest(k, known);
            hint[0] = '\0';
            if (s)
                snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)",
                         join(full, sizeof(full), where, s));
            verr(L, vc, k, "unknown field \"%s\"%s", join(full, sizeof(full), where, k),
                 hint);
        }
    }
}

static int rawget_field(lua_State *L, int t, const char *key)
{
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

static const char *type_of(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TNUMBER && !lua_isinteger(L, idx))
        return "a fractional number";
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return "nil";
    case LUA_TBOOLEAN:
        return "a boolean";
    case LUA_TNUMBER:
        return "a number";
    case LUA_TSTRING:
        return "a string";
    case LUA_TTABLE:
        return "a table";
    case LUA_TFUNCTION:
        return "a function";
    default:
        return luaL_typename(L, idx);
    }
}

/* A plain table: no metatable, whose lookups would be invisible here. */
static void v_table(lua_State *L, struct vctx *vc, int idx, const char *name,
                    const char *key)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        verr(L, vc, key, "%s: expected a table, got %s", name, type_of(L, idx));
    if (lua_getmetatable(L, idx))
        verr(L, vc, key, "%s: has a metatable; give a plain table", name);
}

/* A sequence 1..n and nothing else; returns n. */
static size_t v_list(lua_State *L, struct vctx *vc, int idx, const char *name,
                     const char *key, size_t max)
{
    size_t n, count = 0;
    v_table(L, vc, idx, name, key);
    n = lua_rawlen(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING)
            verr(L, vc, key, "%s: expected a list, found the key \"%s\"", name,
                 lua_tostring(L, -1));
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
            (size_t)lua_tointeger(L, -1) > n)
            verr(L, vc, key, "%s: expected a list, found a %s key", name,
                 luaL_typename(L, -1));
        count++;
    }
    if (count != n)
        verr(L, vc, key, "%s: expected a list without holes", name);
    if (n > max)
        verr(L, vc, key, "%s: %zu entries, at most %zu", name, n, max);
    return n;
}

static const char *v_string(lua_State *L, struct vctx *vc, int idx, const char *name,
                            const char *key, size_t maxlen)
{
    size_t n;
    const char *s;
    if (lua_type(L, idx) != LUA_TSTRING)
        verr(L, vc, key, "%s: expected a string, got %s", name, type_of(L, idx));
    s = lua_tolstring(L, idx, &n);
    if (n == 0)
        verr(L, vc, key, "%s: must not be empty", name);
    if (n > maxlen)
        verr(L, vc, key, "%s: longer than %zu bytes", name, maxlen);
    if (strlen(s) != n)
        verr(L, vc, key, "%s: contains a NUL byte", name);
    return s;
}

/* An integer limit, or cpus.  Used by validation (msg -> verr) and by
 * on_execute adjustments (msg -> deny reason). */
static int parse_limit(lua_State *L, int idx, const char *key, uint64_t *out, char *msg,
                       size_t len)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"timeout_ms", 1, HUTCH_MAX_TIMEOUT_MS},
        {"memory_mb", 1, HUTCH_MAX_MEMORY_MB},
        {"pids", 1, HUTCH_POLICY_MAX_PIDS},
        {"output_bytes", 1, HUTCH_OUTPUT_MAX_BYTES},
        {"files_bytes", 1, HUTCH_MAX_INPUT_BYTES},
    };
    if (!strcmp(key, "cpus")) {
        double v;
        if (lua_type(L, idx) != LUA_TNUMBER) {
            snprintf(msg, len, "expected a number of CPUs (like 0.5), got %s",
                     type_of(L, idx));
            return -1;
        }
        v = lua_tonumber(L, idx);
        if (!(v == 0 || (v >= 0.001 && v <= HUTCH_POLICY_MAX_CPUS))) {
            snprintf(msg, len, "%g is out of range (0 for no limit, or 0.001 to %d)", v,
                     HUTCH_POLICY_MAX_CPUS);
            return -1;
        }
        *out = (uint64_t)(v * 1000.0 + 0.5);
        return 0;
    }
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        if (strcmp(spec[i].name, key))
            continue;
        if (lua_type(L, idx) == LUA_TNUMBER)
            v = lua_tointegerx(L, idx, &isint);
        if (!isint) {
            snprintf(msg, len, "expected an integer, got %s", type_of(L, idx));
            return -1;
        }
        if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max) {
            snprintf(msg, len, "%lld is out of range (%llu to %llu)", (long long)v,
                     (unsigned long long)spec[i].min, (unsigned long long)spec[i].max);
            return -1;
        }
        *out = (uint64_t)v;
        return 0;
    }
    snprintf(msg, len, "unknown limit");
    return -1;
}

static void set_limit(struct hutch_policy_limits *l, const char *key, uint64_t v)
{
    if (!strcmp(key, "timeout_ms"))
        l->timeout_ms = v;
    else if (!strcmp(key, "memory_mb"))
        l->memory_mb = v;
    else if (!strcmp(key, "cpus"))
        l->cpus_milli = (uint32_t)v;
    else if (!strcmp(key, "pids"))
        l->pids = (uint32_t)v;
    else if (!strcmp(key, "output_bytes"))
        l->output_bytes = v;
    else if (!strcmp(key, "files_bytes"))
        l->files_bytes = v;
}

static void v_limits(lua_State *L, struct vctx *vc, int t)
{
    char msg[256];
    v_table(L, vc, t, "limits", "limits");
    v_fields(L, vc, t, "limits", limit_fields);
    for (const char *const *f = limit_fields; *f; f++) {
        uint64_t v;
        if (rawget_field(L, t, *f) != LUA_TNIL) {
            if (parse_limit(L, -1, *f, &v, msg, sizeof(msg)) < 0)
                verr(L, vc, *f, "limits.%s: %s", *f, msg);
            set_limit(&vc->p->limits, *f, v);
        }
        lua_pop(L, 1);
    }
}

static void v_globs(lua_State *L, struct vctx *vc, int t, const char *name,
                    struct glob **out, size_t *nout)
{
    char item[64];
    size_t n = v_list(L, vc, t, name, strchr(name, '.') + 1, HUTCH_POLICY_MAX_RULES);
    *out = calloc(n ? n : 1, sizeof(**out));
    if (!*out)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        const char *s, *ts;
        size_t tn;
        struct glob *gl = &(*out)[*nout];
        snprintf(item, sizeof(item), "%s[%zu]", name, i);
        lua_rawgeti(L, t, (lua_Integer)i);
        s = v_string(L, vc, -1, item, NULL, HUTCH_POLICY_MAX_GLOB);
        tn = trim(s, &ts);
        if (!tn)
            verr(L, vc, NULL, "%s: must not be blank", item);
        gl->orig = strdup(s);
        gl->pat = strndup(ts, tn);
        if (!gl->orig || !gl->pat) {
            free(gl->orig);
            free(gl->pat);
            verr(L, vc, NULL, "out of memory");
        }
        for (char *c = gl->pat; *c; c++)
            *c = (char)lower((unsigned char)*c);
        (*nout)++;
        lua_pop(L, 1);
    }
}

static void v_tools(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "tools", "tools");
    v_fields(L, vc, t, "tools", tools_fields);
    if (rawget_field(L, t, "allow") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "tools.allow", &p->allow, &p->nallow);
    lua_pop(L, 1);
    if (rawget_field(L, t, "deny") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "tools.deny", &p->deny, &p->ndeny);
    lua_pop(L, 1);
}

/* Sandbox paths a host directory may not appear at: the root and /work
 * themselves (they would hide the program), /work/out and below (what the
 * program writes for the caller), and the system's directories.  Below
 * /work is fine: inputs are copied there. */
static const char *reserved_sandbox(const char *s)
{
    static const char *const reserved[] = {
        "/work/out", "/bin",   "/boot",   "/dev",  "/etc", "/lib",
        "/lib32",    "/lib64", "/libx32", "/proc", "/run", "/sbin",
        "/sys",      "/tmp",   "/usr",    "/var",  NULL,
    };
    if (!strcmp(s, "/") || !strcmp(s, "/work"))
        return s;
    for (const char *const *r = reserved; *r; r++)
        if (hutch_path_within(s, *r))
            return *r;
    return NULL;
}

static void v_paths(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    size_t n = v_list(L, vc, t, "paths", "paths", HUTCH_POLICY_MAX_PATHS);
    char name[64], full[96], buf[PATH_MAX];
    struct hutch_err e = {0};
    struct stat sb;

    p->paths = calloc(n ? n : 1, sizeof(*p->paths));
    if (!p->paths)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        struct hutch_policy_path *pp = &p->paths[p->npaths];
        const char *host, *sandbox, *mode, *r;
        int e_top = lua_gettop(L) + 1;
        snprintf(name, sizeof(name), "paths[%zu]", i);
        lua_rawgeti(L, t, (lua_Integer)i);
        v_table(L, vc, e_top, name, NULL);
        v_fields(L, vc, e_top, name, path_fields);
        for (const char *const *f = path_fields; *f; f++) {
            if (rawget_field(L, e_top, *f) == LUA_TNIL)
                verr(L, vc, NULL,
                     "%s: \"%s\" is missing (every entry has host, sandbox "
                     "and mode)",
                     name, *f);
        }
        /* stack: entry, host, sandbox, mode */
        host = v_string(L, vc, e_top + 1, join(full, sizeof(full), name, "host"), NULL,
                        PATH_MAX - 1);
        sandbox = v_string(L, vc, e_top + 2, join(full, sizeof(full), name, "sandbox"),
                           NULL, PATH_MAX - 1);
        mode =
            v_string(L, vc, e_top + 3, join(full, sizeof(full), name, "mode"), NULL, 2);
        if (strcmp(mode, "ro") && strcmp(mode, "rw"))
            verr(L, vc, NULL, "%s.mode: \"%s\" is not \"ro\" or \"rw\"", name, mode);
        if (host[0] != '/')
            verr(L, vc, NULL, "%s.host: \"%s\" is not an absolute path", name, host);
        if (hutch_path_resolve(host, buf, sizeof(buf), &e) < 0)
            verr(L, vc, NULL, "%s.host: \"%s\": %s", name, host, e.msg);
        if (stat(buf, &sb) < 0 && errno == ENOENT)
            verr(L, vc, NULL, "%s.host: \"%s\" does not exist", name, host);
        if (stat(buf, &sb) < 0)
            verr(L, vc, NULL, "%s.host: \"%s\": %s", name, host, strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            verr(L, vc, NULL, "%s.host: \"%s\" is not a directory", name, host);
        pp->rw = !strcmp(mode, "rw");
        pp->host = strdup(buf);
        p->npaths++; /* owned by p from here on, even if a check below fails */
        if (!pp->host)
            verr(L, vc, NULL, "out of memory");
        if (sandbox[0] != '/')
            verr(L, vc, NULL, "%s.sandbox: \"%s\" is not an absolute path", name,
                 sandbox);
        if (hutch_path_normalize(sandbox, buf, sizeof(buf), &e) < 0)
            verr(L, vc, NULL, "%s.sandbox: \"%s\": %s", name, sandbox, e.msg);
        if ((r = reserved_sandbox(buf)))
            verr(L, vc, NULL,
                 "%s.sandbox: \"%s\" is reserved (%s belongs to the sandbox itself; "
                 "use a directory like /data or /work/NAME)",
                 name, sandbox, r);
        pp->sandbox = strdup(buf);
        if (!pp->sandbox)
            verr(L, vc, NULL, "out of memory");
        for (size_t j = 0; j + 1 < p->npaths; j++) {
            const char *o = p->paths[j].sandbox;
            if (hutch_path_within(pp->sandbox, o) || hutch_path_within(o, pp->sandbox))
                verr(L, vc, NULL,
                     "%s.sandbox: \"%s\" overlaps paths[%zu].sandbox \"%s\"", name,
                     pp->sandbox, j + 1, o);
        }
        lua_settop(L, e_top - 1);
    }
}

static int valid_name(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || strchr("_.@+-", *s)))
            return 0;
    return 1;
}

/* concurrency = {executions, queued} at `where` ("concurrency", or a
 * principal's). */
static void v_concurrency(lua_State *L, struct vctx *vc, int t, const char *where,
                          struct hutch_policy_concurrency *c)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"executions", 1, HUTCH_ADMIT_MAX_TOTAL},
        {"queued", 0, HUTCH_ADMIT_MAX_QUEUED},
    };
    char full[128];
    v_table(L, vc, t, where, "concurrency");
    v_fields(L, vc, t, where, concurrency_fields);
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        join(full, sizeof(full), where, spec[i].name);
        if (rawget_field(L, t, spec[i].name) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, spec[i].name, "%s: expected an integer, got %s", full,
                     type_of(L, -1));
            if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max)
                verr(L, vc, spec[i].name, "%s: %lld is out of range (%llu to %llu)",
                     full, (long long)v, (unsigned long long)spec[i].min,
                     (unsigned long long)spec[i].max);
            if (i == 0) {
                c->executions = (uint32_t)v;
            } else {
                c->queued = (uint32_t)v;
                c->queued_set = 1;
            }
        }
        lua_pop(L, 1);
    }
}

static void v_principals(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    size_t n =
        v_list(L, vc, t, "principals", "principals", HUTCH_POLICY_MAX_PRINCIPALS);
    char name[64], full[96];

    p->principals = calloc(n ? n : 1, sizeof(*p->principals));
    if (!p->principals)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        struct principal *pr = &p->principals[p->nprincipals];
        const char *pname, *token;
        size_t tlen;
        int e_top = lua_gettop(L) + 1;
        snprintf(name, sizeof(name), "principals[%zu]", i);
        lua_rawgeti(L, t, (lua_Integer)i);
        v_table(L, vc, e_top, name, NULL);
        v_fields(L, vc, e_top, name, principal_fields);
        rawget_field(L, e_top, "name");
        rawget_field(L, e_top, "token");
        if (lua_isnil(L, e_top + 1) || lua_isnil(L, e_top + 2))
            verr(L, vc, NULL, "%s: needs both name and token", name);
        pname = v_string(L, vc, e_top + 1, join(full, sizeof(full), name, "name"), NULL,
                         HUTCH_MAX_PRINCIPAL_NAME);
        if (!valid_name(pname))
            verr(L, vc, NULL,
                 "%s.name: \"%s\" may only hold letters, digits and _ . @ + -", name,
                 pname);
        /* Never echo a token in a message. */
        if (lua_type(L, e_top + 2) != LUA_TSTRING)
            verr(L, vc, NULL, "%s.token: expected a string, got %s", name,
                 type_of(L, e_top + 2));
        token = lua_tolstring(L, e_top + 2, &tlen);
        if (tlen < HUTCH_POLICY_MIN_TOKEN || tlen > HUTCH_POLICY_MAX_TOKEN)
            verr(L, vc, NULL, "%s.token: must be %d to %d characters (it has %zu)",
                 name, HUTCH_POLICY_MIN_TOKEN, HUTCH_POLICY_MAX_TOKEN, tlen);
        for (size_t k = 0; k < tlen; k++)
            if ((unsigned char)token[k] <= 0x20 || (unsigned char)token[k] >= 0x7f)
                verr(
                    L, vc, NULL,
                    "%s.token: only printable ASCII without spaces (it goes in an HTTP "
                    "header)",
                    name);
        if (strstr(token, TOKEN_SENTINEL))
            verr(L, vc, NULL,
                 "%s.token: still the example's placeholder (" TOKEN_SENTINEL
                 "…); put a long random secret there, e.g. from `openssl rand -hex 32`",
                 name);
        for (size_t j = 0; j < p->nprincipals; j++) {
            if (!strcmp(p->principals[j].name, pname))
                verr(L, vc, NULL, "%s.name: \"%s\" is also the name of principals[%zu]",
                     name, pname, j + 1);
            if (p->principals[j].token_len == tlen &&
                !memcmp(p->principals[j].token, token, tlen))
                verr(L, vc, NULL, "%s.token: the same token as principals[%zu]", name,
                     j + 1);
        }
        pr->name = strdup(pname);
        pr->token = strdup(token);
        pr->token_len = tlen;
        p->nprincipals++;
        if (!pr->name || !pr->token)
            verr(L, vc, NULL, "out of memory");
        if (rawget_field(L, e_top, "concurrency") != LUA_TNIL)
            v_concurrency(L, vc, e_top + 3,
                          join(full, sizeof(full), name, "concurrency"), &pr->conc);
        lua_settop(L, e_top - 1);
    }
}

static void v_rate(lua_State *L, struct vctx *vc, int t)
{
    v_table(L, vc, t, "rate", "rate");
    v_fields(L, vc, t, "rate", rate_fields);
    for (const char *const *f = rate_fields; *f; f++) {
        lua_Integer v = 0;
        int isint = 0;
        if (rawget_field(L, t, *f) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, *f, "rate.%s: expected an integer, got %s", *f,
                     type_of(L, -1));
            if (v < 0 || v > HUTCH_POLICY_MAX_RATE)
                verr(L, vc, *f,
                     "rate.%s: %lld is out of range (0 for no limit, up to %d)", *f,
                     (long long)v, HUTCH_POLICY_MAX_RATE);
            if (f == rate_fields)
                vc->p->rate.executions_per_minute = (uint32_t)v;
            else
                vc->p->rate.tool_calls_per_minute = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
}

static void v_workspaces(lua_State *L, struct vctx *vc, int t)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"max_bytes", 1, HUTCH_WORKSPACE_MAX_BYTES},
        {"max_count", 1, HUTCH_WORKSPACE_MAX_COUNT},
        {"idle_s", 1, HUTCH_WORKSPACE_MAX_IDLE_S},
    };
    struct hutch_policy_workspaces *w = &vc->p->ws;
    v_table(L, vc, t, "workspaces", "workspaces");
    v_fields(L, vc, t, "workspaces", workspace_fields);
    if (rawget_field(L, t, "allow") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            verr(L, vc, "allow", "workspaces.allow: expected a boolean, got %s",
                 type_of(L, -1));
        w->allow = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        if (rawget_field(L, t, spec[i].name) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, spec[i].name, "workspaces.%s: expected an integer, got %s",
                     spec[i].name, type_of(L, -1));
            if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max)
                verr(L, vc, spec[i].name,
                     "workspaces.%s: %lld is out of range (%llu to %llu)", spec[i].name,
                     (long long)v, (unsigned long long)spec[i].min,
                     (unsigned long long)spec[i].max);
            if (i == 0)
                w->max_bytes = (uint64_t)v;
            else if (i == 1)
                w->max_count = (uint32_t)v;
            else
                w->idle_s = (uint64_t)v;
        }
        lua_pop(L, 1);
    }
}

static void v_audit(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "audit", "audit");
    v_fields(L, vc, t, "audit", audit_fields);
    if (rawget_field(L, t, "secret") != LUA_TNIL) {
        int s = lua_gettop(L);
        size_t n = v_list(L, vc, s, "audit.secret", "secret", HUTCH_POLICY_MAX_SECRETS);
        char item[64];
        /* The file's list replaces the default one. */
        for (size_t i = 0; i < p->nsecret; i++) {
            free(p->secret[i].pat);
            free(p->secret[i].orig);
        }
        free(p->secret);
        p->nsecret = 0;
        p->secret = calloc(n ? n : 1, sizeof(*p->secret));
        if (!p->secret)
            verr(L, vc, NULL, "out of memory");
        for (size_t i = 1; i <= n; i++) {
            const char *str;
            snprintf(item, sizeof(item), "audit.secret[%zu]", i);
            lua_rawgeti(L, s, (lua_Integer)i);
            str = v_string(L, vc, -1, item, NULL, HUTCH_POLICY_MAX_GLOB);
            p->secret[p->nsecret].pat = strdup(str);
            p->secret[p->nsecret].orig = strdup(str);
            p->nsecret++;
            if (!p->secret[p->nsecret - 1].pat || !p->secret[p->nsecret - 1].orig)
                verr(L, vc, NULL, "out of memory");
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

static int valid_executor(const char *s)
{
    if (!*s || strlen(s) >= sizeof(((struct hutch_policy *)0)->executor))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-'))
            return 0;
    return 1;
}

/* executor_options = { gvisor = { platform = "kvm" }, docker = {...} }:
 * names of executors, each a table of string options.  Which options an
 * executor knows is its own business: it refuses unknown ones when it
 * starts a sandbox. */
static void v_executor_options(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "executor_options", "executor_options");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        int o = lua_gettop(L);
        const char *name;
        cJSON *obj;
        size_t n = 0;
        if (lua_type(L, -2) != LUA_TSTRING || !valid_executor(lua_tostring(L, -2)))
            verr(L, vc, "executor_options",
                 "executor_options: keys are executor names (lower-case letters, "
                 "digits, _ and -), found %s",
                 lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2)
                                                : luaL_typename(L, -2));
        name = lua_tostring(L, -2);
        if (p->nxopts == HUTCH_POLICY_MAX_EXECUTORS)
            verr(L, vc, "executor_options",
                 "executor_options: options for more than %d executors",
                 HUTCH_POLICY_MAX_EXECUTORS);
        if (lua_type(L, o) != LUA_TTABLE)
            verr(L, vc, name, "executor_options.%s: expected a table, got %s", name,
                 type_of(L, o));
        v_table(L, vc, o, "executor_options", name);
        obj = cJSON_CreateObject();
        if (!obj)
            verr(L, vc, NULL, "out of memory");
        lua_pushnil(L);
        while (lua_next(L, o)) {
            const char *k, *v;
            size_t klen, vlen;
            if (lua_type(L, -2) != LUA_TSTRING) {
                cJSON_Delete(obj);
                verr(L, vc, name, "executor_options.%s: option names are strings",
                     name);
            }
            k = lua_tolstring(L, -2, &klen);
            if (lua_type(L, -1) != LUA_TSTRING || klen == 0 ||
                klen > HUTCH_POLICY_MAX_OPT_NAME || strlen(k) != klen ||
                ++n > HUTCH_POLICY_MAX_OPTIONS) {
                int type = lua_type(L, -1);
                cJSON_Delete(obj);
                if (n > HUTCH_POLICY_MAX_OPTIONS)
                    verr(L, vc, name, "executor_options.%s: more than %d options", name,
                         HUTCH_POLICY_MAX_OPTIONS);
                if (type != LUA_TSTRING)
                    verr(L, vc, name,
                         "executor_options.%s.%s: expected a string, got %s", name, k,
                         type_of(L, -1));
                verr(L, vc, name,
                     "executor_options.%s: an option name is empty, longer than %d "
                     "bytes "
                     "or holds a NUL byte",
                     name, HUTCH_POLICY_MAX_OPT_NAME);
            }
            v = lua_tolstring(L, -1, &vlen);
            if (vlen > HUTCH_POLICY_MAX_OPT_VALUE || strlen(v) != vlen) {
                cJSON_Delete(obj);
                verr(L, vc, name,
                     "executor_options.%s.%s: longer than %d bytes or holds a NUL byte",
                     name, k, HUTCH_POLICY_MAX_OPT_VALUE);
            }
            cJSON_AddStringToObject(obj, k, v);
            lua_pop(L, 1);
        }
        snprintf(p->xopts[p->nxopts].name, sizeof(p->xopts[0].name), "%s", name);
        p->xopts[p->nxopts].json = cJSON_PrintUnformatted(obj);
        cJSON_Delete(obj);
        if (!p->xopts[p->nxopts].json)
            verr(L, vc, NULL, "out of memory");
        p->nxopts++;
        lua_pop(L, 1);
    }
}

/* pool = { python = N, javascript = N, docker = { python = N, ... } }. */
static const char *const pool_langs[] = {"python", "javascript", NULL};

static int v_pool_size(lua_State *L, struct vctx *vc, int idx, const char *where)
{
    if (!lua_isinteger(L, idx) || lua_tointeger(L, idx) < 0 ||
        lua_tointeger(L, idx) > HUTCH_POOL_MAX_SIZE)
        verr(L, vc, NULL, "%s: expected a whole number from 0 to %d, got %s", where,
             HUTCH_POOL_MAX_SIZE,
             lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : type_of(L, idx));
    return (int)lua_tointeger(L, idx);
}

static void v_pool(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    char where[160];
    v_table(L, vc, t, "pool", "pool");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int lang = -1;
        for (int i = 0; k && pool_langs[i]; i++)
            if (!strcmp(k, pool_langs[i]))
                lang = i;
        if (!k)
            verr(L, vc, NULL, "pool: keys are languages or executor names");
        if (lang >= 0) {
            snprintf(where, sizeof(where), "pool.%s", k);
            p->pool_any[lang] = v_pool_size(L, vc, -1, where);
        } else if (lua_type(L, -1) == LUA_TTABLE && valid_executor(k)) {
            int e = lua_gettop(L);
            if (p->npools == HUTCH_POLICY_MAX_EXECUTORS)
                verr(L, vc, NULL, "pool: sizes for more than %d executors",
                     HUTCH_POLICY_MAX_EXECUTORS);
            snprintf(p->pools[p->npools].name, sizeof(p->pools[0].name), "%s", k);
            p->pools[p->npools].size[0] = p->pools[p->npools].size[1] = -1;
            snprintf(where, sizeof(where), "pool.%s", k);
            v_fields(L, vc, e, where, pool_langs);
            for (int i = 0; pool_langs[i]; i++) {
                if (rawget_field(L, e, pool_langs[i]) != LUA_TNIL) {
                    snprintf(where, sizeof(where), "pool.%s.%s", k, pool_langs[i]);
                    p->pools[p->npools].size[i] = v_pool_size(L, vc, -1, where);
                }
                lua_pop(L, 1);
            }
            p->npools++;
        } else {
            verr(L, vc, NULL,
                 "pool.%s: expected python = N, javascript = N, or an executor name "
                 "with a table of those",
                 k);
        }
        lua_pop(L, 1);
    }
}

static void validate(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    if (lua_type(L, t) != LUA_TTABLE)
        verr(L, vc, NULL, "the file must return a table of settings (it returned %s)",
             type_of(L, t));
    v_table(L, vc, t, "the returned table", NULL);
    v_fields(L, vc, t, "", top_fields);

    if (rawget_field(L, t, "executor") != LUA_TNIL) {
        const char *s = v_string(L, vc, -1, "executor", "executor", 63);
        if (!valid_executor(s))
            verr(
                L, vc, "executor",
                "executor: \"%s\" is not an executor name (lower-case letters, digits, "
                "_ and -; see hutch plugins)",
                s);
        snprintf(p->executor, sizeof(p->executor), "%s", s);
        p->executor_explicit = 1;
    }
    lua_pop(L, 1);
    if (rawget_field(L, t, "pool") != LUA_TNIL)
        v_pool(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "executor_options") != LUA_TNIL)
        v_executor_options(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "limits") != LUA_TNIL)
        v_limits(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "tools") != LUA_TNIL)
        v_tools(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "paths") != LUA_TNIL)
        v_paths(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "principals") != LUA_TNIL)
        v_principals(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "rate") != LUA_TNIL)
        v_rate(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "audit") != LUA_TNIL)
        v_audit(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    p->direct_tools = -1;
    if (rawget_field(L, t, "direct_tools") != LUA_TNIL) {
        if (!lua_isboolean(L, -1))
            verr(L, vc, "direct_tools", "direct_tools: expected true or false, got %s",
                 type_of(L, -1));
        p->direct_tools = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    if (rawget_field(L, t, "workspaces") != LUA_TNIL)
        v_workspaces(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (rawget_field(L, t, "concurrency") != LUA_TNIL)
        v_concurrency(L, vc, lua_gettop(L), "concurrency", &p->conc);
    lua_pop(L, 1);
    if (rawget_field(L, t, "on_execute") != LUA_TNIL && !lua_isfunction(L, -1))
        verr(L, vc, "on_execute", "on_execute: expected a function, got %s",
             type_of(L, -1));
    p->has_execute = lua_isfunction(L, -1);
    lua_pop(L, 1);
    if (rawget_field(L, t, "on_tool_call") != LUA_TNIL && !lua_isfunction(L, -1))
        verr(L, vc, "on_tool_call", "on_tool_call: expected a function, got %s",
             type_of(L, -1));
    p->has_tool_call = lua_isfunction(L, -1);
    lua_pop(L, 1);
}

/* --- building a state --- */

struct setup_ctx {
    struct lstate *st;
    struct vctx *vc; /* the first state validates; later ones only take hooks */
};

static void take_hook(lua_State *L, int t, const char *name, int expected, int *ref)
{
    rawget_field(L, t, name);
    if (lua_isfunction(L, -1) != expected)
        luaL_error(L, "the policy returned a different %s on a second run", name);
    if (expected)
        *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
}

static int setup_tramp(lua_State *L)
{
    struct setup_ctx *c = lua_touserdata(L, 1);
    struct lstate *st = c->st;
    struct hutch_policy *p = st->p;
    int t;

    lua_settop(L, 0);
    open_sandbox(L);
    if (luaL_loadbufferx(L, p->text, p->text_len, p->chunkname, "t") != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        if (m && strstr(m, "binary chunk"))
            luaL_error(L,
                       "binary (precompiled) chunks are refused; give the Lua source");
        return lua_error(L);
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &env_key);
    lua_setupvalue(L, -2, 1);
    lua_call(L, 0, 1);
    t = lua_gettop(L);
    if (c->vc)
        validate(L, c->vc, t);
    else if (!lua_istable(L, t))
        luaL_error(L, "the policy returned %s on a second run", type_of(L, t));
    take_hook(L, t, "on_execute", p->has_execute, &st->ref_execute);
    take_hook(L, t, "on_tool_call", p->has_tool_call, &st->ref_tool_call);
    freeze(L);
    st->loading = 0;
    return 0;
}

static void state_close(struct lstate *st)
{
    if (!st)
        return;
    if (st->L) {
        /* Finalizers run by lua_close stop at their first count hook. */
        st->killed = 1;
        st->deadline_ns = 0;
        lua_close(st->L);
    }
    free(st);
}

/* Build one state from p's source.  On error `msg` is the first line of
 * the Lua error (or of the validation message, with vc->field set). */
static int state_open(struct hutch_policy *p, struct vctx *vc, struct lstate **out,
                      char *msg, size_t len)
{
    struct lstate *st = calloc(1, sizeof(*st));
    struct setup_ctx c = {st, vc};
    int status;

    if (!st) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    st->p = p;
    st->mem_cap = HUTCH_POLICY_MEM_CAP;
    st->ref_execute = st->ref_tool_call = LUA_NOREF;
    st->L = lua_newstate(l_alloc, st);
    if (!st->L) {
        free(st);
        snprintf(msg, len, "cannot create a Lua state: out of memory");
        return -ENOMEM;
    }
    *(struct lstate **)lua_getextraspace(st->L) = st;
    lua_atpanic(st->L, l_panic);
    st->loading = 1;
    st->budget_ms = HUTCH_POLICY_LOAD_MS;
    st->deadline_ns = now_ns() + (uint64_t)HUTCH_POLICY_LOAD_MS * 1000000u;
    lua_sethook(st->L, count_hook, LUA_MASKCOUNT, HOOK_COUNT);

    lua_pushcfunction(st->L, msgh);
    lua_pushcfunction(st->L, setup_tramp);
    lua_pushlightuserdata(st->L, &c);
    status = lua_pcall(st->L, 1, 0, 1);
    if (status != LUA_OK) {
        int r = -EINVAL;
        if (status == LUA_ERRMEM || st->oom) {
            snprintf(msg, len,
                     "the policy ran out of memory while loading (a policy's Lua state "
                     "may use %u MiB)",
                     HUTCH_POLICY_MEM_CAP >> 20);
            r = -ENOMEM;
        } else if (vc && vc->failed) {
            snprintf(msg, len, "%s", vc->msg);
        } else {
            const char *m = lua_tostring(st->L, -1);
            first_line(m ? m : "unknown error", msg, len);
            if (st->killed)
                r = -ETIMEDOUT;
        }
        state_close(st);
        return r;
    }
    lua_settop(st->L, 0);
    *out = st;
    return 0;
}

struct open_args {
    struct hutch_policy *p;
    struct vctx *vc;
    struct lstate **out;
    char *msg;
    size_t len;
    int r;
};

static void open_main(void *a)
{
    struct open_args *o = a;
    o->r = state_open(o->p, o->vc, o->out, o->msg, o->len);
}

static int state_open_big(struct hutch_policy *p, struct vctx *vc, struct lstate **out,
                          char *msg, size_t len)
{
    struct open_args o = {p, vc, out, msg, len, 0};
    int r = with_stack(open_main, &o);
    if (r < 0) {
        snprintf(msg, len, "cannot start a thread to load the policy: %s",
                 strerror(-r));
        return r;
    }
    return o.r;
}

/* --- loading --- */

static void policy_free(struct hutch_policy *p)
{
    struct lstate *st;
    if (!p)
        return;
    while ((st = p->idle)) {
        p->idle = st->next;
        state_close(st);
    }
    for (size_t i = 0; i < p->npaths; i++) {
        free((char *)p->paths[i].host);
        free((char *)p->paths[i].sandbox);
    }
    free(p->paths);
    for (size_t i = 0; i < p->nxopts; i++)
        free(p->xopts[i].json);
    for (size_t i = 0; i < p->nprincipals; i++) {
        free(p->principals[i].name);
        if (p->principals[i].token)
            explicit_bzero(p->principals[i].token, p->principals[i].token_len);
        free(p->principals[i].token);
    }
    free(p->principals);
    struct glob *lists[] = {p->allow, p->deny, p->secret};
    size_t counts[] = {p->nallow, p->ndeny, p->nsecret};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < counts[k]; i++) {
            free(lists[k][i].pat);
            free(lists[k][i].orig);
        }
        free(lists[k]);
    }
    if (p->text)
        explicit_bzero(p->text, p->text_len); /* it may hold tokens */
    free(p->text);
    free(p->source);
    free(p->chunkname);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

static struct hutch_policy *policy_new(const char *source)
{
    struct hutch_policy *p = calloc(1, sizeof(*p));
    size_t n = 0;
    if (!p)
        return NULL;
    p->refs = 1;
    pthread_mutex_init(&p->mu, NULL);
    hutch_cond_init_mono(&p->cv);
    snprintf(p->executor, sizeof(p->executor), "local");
    p->pool_any[0] = p->pool_any[1] = -1;
    p->limits = default_limits;
    p->ws.allow = 1;
    p->ws.max_bytes = HUTCH_WORKSPACE_DEFAULT_MAX_BYTES;
    p->ws.max_count = HUTCH_WORKSPACE_DEFAULT_MAX_COUNT;
    p->ws.idle_s = HUTCH_WORKSPACE_DEFAULT_IDLE_S;
    p->source = strdup(source);
    while (default_secrets[n])
        n++;
    p->secret = calloc(n, sizeof(*p->secret));
    if (!p->source || !p->secret) {
        policy_free(p);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        p->secret[i].pat = strdup(default_secrets[i]);
        p->secret[i].orig = strdup(default_secrets[i]);
        p->nsecret++;
        if (!p->secret[i].pat || !p->secret[i].orig) {
            policy_free(p);
            return NULL;
        }
    }
    return p;
}

int hutch_policy_default(struct hutch_policy **out, struct hutch_err *err)
{
    struct hutch_policy *p = policy_new("built-in");
    if (!p)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    p->allow_all = 1;
    p->builtin = 1;
    p->direct_tools = -1;
    *out = p;
    return 0;
}

int hutch_policy_load(const char *file, struct hutch_policy **out,
                      struct hutch_err *err)
{
    struct hutch_policy *p;
    struct lstate *st = NULL;
    struct vctx vc = {0};
    const char *base;
    char msg[1024];
    size_t blen;
    int r, line = 0;

    p = policy_new(file);
    if (!p)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = hutch_read_file(file, HUTCH_POLICY_MAX_SOURCE, &p->text, &p->text_len, err);
    if (r < 0) {
        policy_free(p);
        return r;
    }
    base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    blen = strnlen(base, 40);
    if (asprintf(&p->chunkname, "@%.*s", (int)blen, base) < 0) {
        p->chunkname = NULL;
        policy_free(p);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    vc.p = p;
    r = state_open_big(p, &vc, &st, msg, sizeof(msg));
    if (r < 0) {
        if (vc.failed && vc.field[0])
            line = find_line(p->text, p->text_len, vc.field);
        if (line)
            hutch_err_set(err, r, "%s:%d: %s", file, line, msg);
        else if (!strncmp(msg, p->chunkname + 1, blen) && msg[blen] == ':')
            hutch_err_set(err, r, "%s%s", file, msg + blen); /* Lua's "base:LINE: …" */
        else
            hutch_err_set(err, r, "%s: %s", file, msg);
        policy_free(p);
        return r;
    }
    st->next = NULL;
    p->idle = st;
    p->nstates = 1;
    if (p->nprincipals) {
        struct stat sb;
        if (stat(file, &sb) == 0 && (sb.st_mode & S_IROTH))
            hutch_warn("%s holds bearer tokens and everyone may read it (chmod o-r %s)",
                       file, file);
    }
    *out = p;
    return 0;
}

struct hutch_policy *hutch_policy_ref(struct hutch_policy *p)
{
    if (p)
        __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

void hutch_policy_unref(struct hutch_policy *p)
{
    if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
        policy_free(p);
}

const char *hutch_policy_source(const struct hutch_policy *p)
{
    return p->source;
}

int hutch_policy_apply_flavour(struct hutch_policy *p, const char *flavour,
                               struct hutch_err *err)
{
    static const char *const flavoured[] = {"local", "docker", "gvisor"};

    if (!flavour)
        return 0;
    if (strcmp(flavour, "base") != 0 && strcmp(flavour, "data") != 0)
        return hutch_err_set(
            err, -EINVAL,
            "--flavour %.64s: a flavour is \"base\" or \"data\" (Python "
            "with numpy, pandas and matplotlib)",
            flavour);
    for (size_t e = 0; e < sizeof(flavoured) / sizeof(flavoured[0]); e++) {
        size_t i;
        cJSON *o, *have;
        char *json;
        for (i = 0; i < p->nxopts && strcmp(p->xopts[i].name, flavoured[e]); i++)
            ;
        if (i == p->nxopts) {
            if (p->nxopts == HUTCH_POLICY_MAX_EXECUTORS)
                return hutch_err_set(err, -E2BIG,
                                     "--flavour: the policy's executor_options name "
                                     "%d executors already",
                                     HUTCH_POLICY_MAX_EXECUTORS);
            snprintf(p->xopts[i].name, sizeof(p->xopts[i].name), "%s", flavoured[e]);
            p->xopts[i].json = NULL;
            p->nxopts++;
        }
        o = p->xopts[i].json ? cJSON_Parse(p->xopts[i].json) : cJSON_CreateObject();
        if (!o)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        have = cJSON_GetObjectItemCaseSensitive(o, "flavour");
        if (cJSON_IsString(have) && strcmp(have->valuestring, flavour) != 0) {
            int r = hutch_err_set(err, -EINVAL,
                                  "--flavour %s and the policy's "
                                  "executor_options.%s.flavour \"%.64s\" differ: name "
                                  "one flavour",
                                  flavour, flavoured[e], have->valuestring);
            cJSON_Delete(o);
            return r;
        }
        if (!have)
            cJSON_AddStringToObject(o, "flavour", flavour);
        json = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!json)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        free(p->xopts[i].json);
        p->xopts[i].json = json;
    }
    return 0;
}

const char *hutch_policy_flavour(const struct hutch_policy *p, const char *executor,
                                 char *buf, size_t len)
{
    const char *json = hutch_policy_executor_options(p, executor);
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    const char *v =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "flavour"));
    snprintf(buf, len, "%s", v && *v ? v : "base");
    cJSON_Delete(o);
    return buf;
}

const char *hutch_policy_executor_options(const struct hutch_policy *p,
                                          const char *executor)
{
    for (size_t i = 0; p && executor && i < p->nxopts; i++)
        if (strcmp(p->xopts[i].name, executor) == 0)
            return p->xopts[i].json;
    return NULL;
}

const char *hutch_policy_executor(const struct hutch_policy *p)
{
    return p->executor;
}

int hutch_policy_builtin(const struct hutch_policy *p)
{
    return p->builtin;
}

int hutch_policy_executor_explicit(const struct hutch_policy *p)
{
    return p->executor_explicit;
}

int hutch_policy_pool_size(const struct hutch_policy *p, const char *executor,
                           const char *language)
{
    int lang = -1;
    for (int i = 0; pool_langs[i]; i++)
        if (!strcmp(language, pool_langs[i]))
            lang = i;
    if (lang < 0)
        return -1;
    for (size_t i = 0; i < p->npools; i++)
        if (!strcmp(p->pools[i].name, executor) && p->pools[i].size[lang] >= 0)
            return p->pools[i].size[lang];
    return p->pool_any[lang];
}

const struct hutch_policy_limits *hutch_policy_limits(const struct hutch_policy *p)
{
    return &p->limits;
}

const struct hutch_policy_rate *hutch_policy_rate(const struct hutch_policy *p)
{
    return &p->rate;
}

const struct hutch_policy_workspaces *
hutch_policy_workspaces(const struct hutch_policy *p)
{
    return &p->ws;
}

size_t hutch_policy_npaths(const struct hutch_policy *p)
{
    return p->npaths;
}

const struct hutch_policy_path *hutch_policy_path_at(const struct hutch_policy *p,
                                                     size_t i)
{
    return i < p->npaths ? &p->paths[i] : NULL;
}

int hutch_policy_direct_tools(const struct hutch_policy *p)
{
    return p->direct_tools;
}

void hutch_policy_concurrency(const struct hutch_policy *p, const char *principal,
                              struct hutch_policy_concurrency *out)
{
    *out = p->conc;
    for (size_t i = 0; principal && i < p->nprincipals; i++) {
        const struct hutch_policy_concurrency *c = &p->principals[i].conc;
        if (strcmp(p->principals[i].name, principal))
            continue;
        if (c->executions)
            out->executions = c->executions;
        if (c->queued_set) {
            out->queued = c->queued;
            out->queued_set = 1;
        }
        break;
    }
}

int hutch_policy_has_principals(const struct hutch_policy *p)
{
    return p->nprincipals > 0;
}

unsigned hutch_policy_nprincipals(const struct hutch_policy *p)
{
    return (unsigned)p->nprincipals;
}

const char *hutch_policy_principal(const struct hutch_policy *p, const char *token)
{
    const char *found = NULL;
    size_t tl;
    if (!p || !token)
        return NULL;
    tl = strlen(token);
    /* Every principal, every byte of its token: the time depends on the
     * stored tokens' lengths only. */
    for (size_t i = 0; i < p->nprincipals; i++) {
        const struct principal *pr = &p->principals[i];
        unsigned diff = tl != pr->token_len;
        for (size_t k = 0; k < pr->token_len; k++)
            diff |=
                (unsigned char)pr->token[k] ^ (unsigned char)(k < tl ? token[k] : 0);
        if (!diff)
            found = pr->name;
    }
    return found;
}

int hutch_policy_is_secret(const struct hutch_policy *p, const char *arg_name)
{
    const char *s;
    char buf[HUTCH_POLICY_MAX_NAME + 1];
    size_t n;
    if (!p || !arg_name)
        return 0;
    n = trim(arg_name, &s);
    if (n > HUTCH_POLICY_MAX_NAME)
        return 1; /* absurd names: hide rather than guess */
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < p->nsecret; i++)
        if (glob_match(p->secret[i].pat, buf))
            return 1;
    return 0;
}

/* --- the pool of states --- */

static int pool_get(struct hutch_policy *p, struct lstate **out, char *msg, size_t len)
{
    struct lstate *st;
    uint64_t until = hutch_now_ms() + HUTCH_POLICY_WAIT_MS;
    int r;
    pthread_mutex_lock(&p->mu);
    while (!p->idle && p->nstates >= HUTCH_POLICY_MAX_STATES) {
        /* Every state busy, for a second: hooks are stuck somewhere the
         * deadline cannot reach (a long C call); deny rather than queue. */
        if (hutch_cond_wait_until(&p->cv, &p->mu, until) == ETIMEDOUT) {
            pthread_mutex_unlock(&p->mu);
            snprintf(msg, len, "all %d Lua states of the policy are busy",
                     HUTCH_POLICY_MAX_STATES);
            return -EBUSY;
        }
    }
    if ((st = p->idle)) {
        p->idle = st->next;
        pthread_mutex_unlock(&p->mu);
        *out = st;
        return 0;
    }
    p->nstates++;
    pthread_mutex_unlock(&p->mu);
    r = state_open(p, NULL, &st, msg, len);
    if (r < 0) {
        pthread_mutex_lock(&p->mu);
        p->nstates--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return r;
    }
    *out = st;
    return 0;
}

static void pool_put(struct hutch_policy *p, struct lstate *st)
{
    int broken = st->killed || st->oom;
    if (broken)
        state_close(st); /* rebuilt from the source on demand */
    pthread_mutex_lock(&p->mu);
    if (broken) {
        p->nstates--;
    } else {
        st->next = p->idle;
        p->idle = st;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* What a hook trampoline reports. */
struct verdict {
    int code; /* 0 allowed, negative denied, HUTCH_POLICY_ASK: ask the user */
    char reason[512];
};

/* Run `fn(ctx)` protected in a borrowed state within the hook deadline.
 * Errors become denials with "policy error: …", logged with the traceback. */
static int run_hook_here(struct hutch_policy *p, lua_CFunction fn, void *ctx,
                         struct verdict *v, const char *hook, const char *subject)
{
    struct lstate *st;
    char msg[512], text[512], logline[1536];
    lua_State *L;
    int status, r;

    r = pool_get(p, &st, msg, sizeof(msg));
    if (r < 0) {
        hutch_warn("policy %s: cannot build a Lua state for %s: %s", p->source, hook,
                   msg);
        return set_reason(v->reason, sizeof(v->reason), v->code = r, "policy error: %s",
                          msg);
    }
    L = st->L;
    st->killed = st->oom = 0;
    st->budget_ms = HUTCH_POLICY_HOOK_MS;
    st->deadline_ns = now_ns() + (uint64_t)HUTCH_POLICY_HOOK_MS * 1000000u;
    lua_settop(L, 0);
    lua_pushcfunction(L, msgh);
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, ctx);
    status = lua_pcall(L, 1, 0, 1);
    if (status != LUA_OK) {
        const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (status == LUA_ERRMEM || st->oom) {
            r = -ENOMEM;
            snprintf(text, sizeof(text),
                     "not enough memory (a policy hook may use %u MiB)",
                     HUTCH_POLICY_MEM_CAP >> 20);
        } else if (status == LUA_ERRERR) {
            r = -EIO;
            snprintf(text, sizeof(text), "error while handling an error");
        } else {
            r = st->killed ? -ETIMEDOUT : -EIO;
            first_line(m ? m : "unknown error", text, sizeof(text));
        }
        one_line(m && status != LUA_ERRMEM ? m : text, logline, sizeof(logline));
        hutch_warn("policy %s: %s(%s) failed, denied: %s", p->source, hook, subject,
                   logline);
        set_reason(v->reason, sizeof(v->reason), v->code = r, "policy error: %s", text);
    }
    lua_settop(L, 0);
    pool_put(p, st);
    return v->code;
}

struct hook_args {
    struct hutch_policy *p;
    lua_CFunction fn;
    void *ctx;
    struct verdict *v;
    const char *hook, *subject;
};

static void hook_main(void *a)
{
    struct hook_args *h = a;
    run_hook_here(h->p, h->fn, h->ctx, h->v, h->hook, h->subject);
}

static int run_hook(struct hutch_policy *p, lua_CFunction fn, void *ctx,
                    struct verdict *v, const char *hook, const char *subject)
{
    struct hook_args h = {p, fn, ctx, v, hook, subject};
    int r = with_stack(hook_main, &h);
    if (r < 0)
        return set_reason(v->reason, sizeof(v->reason), v->code = r,
                          "policy error: cannot start a thread for %s: %s", hook,
                          strerror(-r));
    return v->code;
}

static void set_string_field(lua_State *L, const char *k, const char *v)
{
    if (!v)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

/* true | false [, reason] from a hook at stack index i (and i+1). */
static void read_verdict(lua_State *L, int i, struct verdict *v, const char *hook,
                         const char *expected)
{
    if (lua_type(L, i) == LUA_TBOOLEAN && lua_toboolean(L, i)) {
        v->code = 0;
        return;
    }
    if (lua_type(L, i) == LUA_TBOOLEAN) {
        int t = lua_type(L, i + 1);
        size_t n = 0;
        const char *s =
            (t == LUA_TSTRING || t == LUA_TNUMBER) ? lua_tolstring(L, i + 1, &n) : NULL;
        if (s && n)
            set_reason(v->reason, sizeof(v->reason), v->code = -EPERM, "%s", s);
        else
            set_reason(v->reason, sizeof(v->reason), v->code = -EPERM, "denied by %s",
                       hook);
        return;
    }
    set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
               "policy error: %s returned %s; expected %s", hook,
               lua_isnone(L, i) || lua_isnil(L, i) ? "nil" : type_of(L, i), expected);
}

/* --- on_tool_call --- */

struct tool_ctx {
    struct verdict v;
    const char *tool, *server, *name, *principal, *execution;
    const cJSON *args;
    char dup[128];
};

static int json_measure(const cJSON *j, int depth, size_t *nodes, size_t *bytes)
{
    if (depth > HUTCH_POLICY_ARGS_MAX_DEPTH || ++*nodes > HUTCH_POLICY_ARGS_MAX_NODES)
        return -1;
    if (j->string)
        *bytes += strlen(j->string);
    if (cJSON_IsString(j) && j->valuestring)
        *bytes += strlen(j->valuestring);
    if (*bytes > HUTCH_POLICY_ARGS_MAX_BYTES)
        return -1;
    for (const cJSON *it = j->child; it; it = it->next)
        if (json_measure(it, depth + 1, nodes, bytes) < 0)
            return -1;
    return 0;
}

/* Push j as a Lua value (null is hutch.null).  -1 when an object repeats a
 * key: the policy and the upstream could see different values. */
static int push_json(lua_State *L, const cJSON *j, struct tool_ctx *c)
{
    const cJSON *it;
    lua_Integer i = 0;
    luaL_checkstack(L, 4, "tool arguments nest too deeply");
    if (cJSON_IsTrue(j) || cJSON_IsFalse(j)) {
        lua_pushboolean(L, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d > -9007199254740992.0 && d < 9007199254740992.0 &&
            d == (double)(int64_t)d)
            lua_pushinteger(L, (lua_Integer)d);
        else
            lua_pushnumber(L, d);
    } else if (cJSON_IsString(j) || cJSON_IsRaw(j)) {
        lua_pushstring(L, j->valuestring ? j->valuestring : "");
    } else if (cJSON_IsArray(j)) {
        lua_createtable(L, cJSON_GetArraySize(j), 0);
        cJSON_ArrayForEach(it, j)
        {
            if (push_json(L, it, c) < 0)
                return -1;
            lua_rawseti(L, -2, ++i);
        }
    } else if (cJSON_IsObject(j)) {
        lua_createtable(L, 0, cJSON_GetArraySize(j));
        cJSON_ArrayForEach(it, j)
        {
            const char *k = it->string ? it->string : "";
            lua_pushstring(L, k);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                snprintf(c->dup, sizeof(c->dup), "%s", k);
                return -1;
            }
            lua_pop(L, 1);
            lua_pushstring(L, k);
            if (push_json(L, it, c) < 0)
                return -1;
            lua_rawset(L, -3);
        }
    } else {
        lua_pushlightuserdata(L, NULL);
    }
    return 0;
}

static int tool_tramp(lua_State *L)
{
    struct tool_ctx *c = lua_touserdata(L, 1);
    struct lstate *st = state_of(L);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->ref_tool_call);
    lua_createtable(L, 0, 7);
    set_string_field(L, "tool", c->tool);
    set_string_field(L, "server", c->server);
    set_string_field(L, "name", c->name);
    set_string_field(L, "principal", c->principal);
    set_string_field(L, "execution", c->execution);
    if (c->args) {
        if (push_json(L, c->args, c) < 0) {
            set_reason(c->v.reason, sizeof(c->v.reason), c->v.code = -EINVAL,
                       "the tool arguments repeat the key \"%s\"", c->dup);
            return 0;
        }
    } else {
        lua_newtable(L);
    }
    lua_setfield(L, -2, "args");
    lua_call(L, 1, 2);
    /* "ask", question: the user decides (govern.c asks through the
     * client).  The question is the agent's and the user's to read: text,
     * cut at the reason's size. */
    if (lua_type(L, 1) == LUA_TSTRING && !strcmp(lua_tostring(L, 1), "ask")) {
        size_t n = 0;
        const char *q = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &n) : NULL;
        if (q && n)
            set_reason(c->v.reason, sizeof(c->v.reason), c->v.code = HUTCH_POLICY_ASK,
                       "%s", q);
        else
            set_reason(c->v.reason, sizeof(c->v.reason), c->v.code = -EPROTO,
                       "policy error: on_tool_call returned \"ask\" without a "
                       "question (a non-empty string)");
        return 0;
    }
    read_verdict(L, 1, &c->v, "on_tool_call",
                 "true, false and a reason, or \"ask\" and a question");
    return 0;
}

/* "server.tool", trimmed and lower-cased; *dot: where the server ends (or
 * the length when there is no dot). */
static int canon_tool(const char *server, const char *tool, char *out, size_t len,
                      size_t *dot)
{
    const char *ts = "", *tt = "";
    size_t ns = server ? trim(server, &ts) : 0, nt = tool ? trim(tool, &tt) : 0, n;
    if (!nt)
        return -EINVAL;
    if (ns) {
        n = ns + 1 + nt;
        if (n >= len)
            return -ENAMETOOLONG;
        memcpy(out, ts, ns);
        out[ns] = '.';
        memcpy(out + ns + 1, tt, nt);
        *dot = ns;
    } else {
        const char *d;
        n = nt;
        if (n >= len)
            return -ENAMETOOLONG;
        memcpy(out, tt, nt);
        d = memchr(out, '.', nt);
        *dot = d ? (size_t)(d - out) : nt;
    }
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        out[i] = (char)lower((unsigned char)out[i]);
    return 0;
}

/* The first half of a tool-call decision, the one that needs no arguments:
 * tools.deny globs, then tools.allow globs.  `full` receives the canonical
 * name and *dot where its tool part starts. */
static int check_globs(const struct hutch_policy *p, const char *server,
                       const char *tool, char *full, size_t full_len, size_t *dot,
                       char *reason, size_t reason_len)
{
    int r = canon_tool(server, tool, full, full_len, dot);
    if (r < 0)
        return set_reason(reason, reason_len, r,
                          r == -EINVAL ? "no tool named" : "the tool name is too long");
    for (size_t i = 0; i < p->ndeny; i++)
        if (glob_match(p->deny[i].pat, full))
            return set_reason(reason, reason_len, -EPERM,
                              "denied by tools.deny rule \"%s\"", p->deny[i].orig);
    if (!p->allow_all) {
        size_t i;
        for (i = 0; i < p->nallow && !glob_match(p->allow[i].pat, full); i++)
            ;
        if (i == p->nallow)
            return set_reason(reason, reason_len, -EPERM,
                              "no tools.allow rule names %s", full);
    }
    return 0;
}

/* A glob (lower-cased, trimmed) that matches every "server.tool": stars
 * alone, or stars, a dot, stars. */
static int matches_all(const char *pat)
{
    size_t lead = strspn(pat, "*");
    if (!lead)
        return 0;
    if (!pat[lead])
        return 1;
    return pat[lead] == '.' && strspn(pat + lead + 1, "*") > 0 &&
           !pat[lead + 1 + strspn(pat + lead + 1, "*")];
}

int hutch_policy_denies_every_tool(const struct hutch_policy *p, char *why, size_t len)
{
    if (!p)
        return 0;
    for (size_t i = 0; i < p->ndeny; i++) {
        if (matches_all(p->deny[i].pat)) {
            snprintf(why, len,
                     "every tool call is denied: tools.deny rule \"%s\" matches every "
                     "tool",
                     p->deny[i].orig);
            return 1;
        }
    }
    if (!p->allow_all && p->nallow == 0) {
        snprintf(
            why, len,
            "every tool call is denied: the policy has no tools.allow glob (with a "
            "policy file, a tool is allowed only when a tools.allow glob names it; "
            "tools = { allow = { \"*\" } } allows every tool)");
        return 1;
    }
    return 0;
}

int hutch_policy_tool_listed(const struct hutch_policy *p, const char *server,
                             const char *tool)
{
    char full[HUTCH_MAX_QUALIFIED_NAME + 1];
    size_t dot;
    return p && check_globs(p, server, tool, full, sizeof(full), &dot, NULL, 0) == 0;
}

int hutch_policy_check_tool(struct hutch_policy *p, const char *principal,
                            const char *execution, const char *server, const char *tool,
                            const cJSON *args, char *reason, size_t reason_len)
{
    char full[HUTCH_MAX_QUALIFIED_NAME + 1], srv[HUTCH_MAX_QUALIFIED_NAME + 1];
    struct tool_ctx c = {0};
    size_t dot, nodes = 0, bytes = 0;
    int r;

    if (reason && reason_len)
        reason[0] = '\0';
    if (!p)
        return set_reason(reason, reason_len, -EINVAL,
                          "policy error: no policy loaded");
    r = check_globs(p, server, tool, full, sizeof(full), &dot, reason, reason_len);
    if (r < 0)
        return r;
    if (!p->has_tool_call)
        return 0;
    if (args && json_measure(args, 0, &nodes, &bytes) < 0)
        return set_reason(
            reason, reason_len, -E2BIG,
            "the tool arguments are too large or too deep for the policy's "
            "on_tool_call (at most %u values, %u MiB of text, depth %d)",
            HUTCH_POLICY_ARGS_MAX_NODES, HUTCH_POLICY_ARGS_MAX_BYTES >> 20,
            HUTCH_POLICY_ARGS_MAX_DEPTH);
    memcpy(srv, full, dot);
    srv[dot] = '\0';
    c.tool = full;
    c.server = srv;
    c.name = full[dot] ? full + dot + 1 : full;
    c.principal = principal;
    c.execution = execution;
    c.args = args;
    run_hook(p, tool_tramp, &c, &c.v, "on_tool_call", full);
    if (c.v.code)
        set_reason(reason, reason_len, c.v.code, "%s", c.v.reason);
    return c.v.code;
}

/* --- on_execute --- */

struct exec_ctx {
    struct verdict v;
    struct hutch_policy *p;
    const struct hutch_policy_exec *req;
    struct hutch_policy_decision *out;
};

static void push_limits(lua_State *L, const struct hutch_policy_limits *l)
{
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)l->timeout_ms);
    lua_setfield(L, -2, "timeout_ms");
    lua_pushinteger(L, (lua_Integer)l->memory_mb);
    lua_setfield(L, -2, "memory_mb");
    lua_pushnumber(L, l->cpus_milli / 1000.0);
    lua_setfield(L, -2, "cpus");
    lua_pushinteger(L, l->pids);
    lua_setfield(L, -2, "pids");
    lua_pushinteger(L, (lua_Integer)l->output_bytes);
    lua_setfield(L, -2, "output_bytes");
    lua_pushinteger(L, (lua_Integer)l->files_bytes);
    lua_setfield(L, -2, "files_bytes");
}

/* Never looser than the policy: a smaller value wins; cpus 0 means "no
 * limit", so it is the loosest. */
static uint64_t tighter(const char *key, uint64_t asked, uint64_t policy)
{
    if (!strcmp(key, "cpus")) {
        if (!policy)
            return asked;
        return asked && asked < policy ? asked : policy;
    }
    return asked < policy ? asked : policy;
}

static uint64_t get_limit(const struct hutch_policy_limits *l, const char *key)
{
    if (!strcmp(key, "timeout_ms"))
        return l->timeout_ms;
    if (!strcmp(key, "memory_mb"))
        return l->memory_mb;
    if (!strcmp(key, "cpus"))
        return l->cpus_milli;
    if (!strcmp(key, "pids"))
        return l->pids;
    if (!strcmp(key, "output_bytes"))
        return l->output_bytes;
    return l->files_bytes;
}

/* {executor = "...", limits = {...}}: adjustments, checked like the file. */
static void read_adjustments(lua_State *L, int t, struct exec_ctx *c)
{
    static const char *const fields[] = {"executor", "limits", NULL};
    struct verdict *v = &c->v;
    char msg[256];

    if (lua_getmetatable(L, t)) {
        set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                   "policy error: on_execute returned a table with a metatable");
        return;
    }
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k;
        const char *const *f;
        lua_pop(L, 1);
        k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        for (f = fields; k && *f && strcmp(*f, k); f++)
            ;
        if (!k || !*f) {
            set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                       "policy error: on_execute returned an unknown field \"%s\" "
                       "(expected executor, limits)",
                       k ? k : "?");
            lua_pop(L, 1);
            return;
        }
    }
    if (rawget_field(L, t, "executor") != LUA_TNIL) {
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!s || !valid_executor(s)) {
            set_reason(
                v->reason, sizeof(v->reason), v->code = -EPROTO,
                "policy error: on_execute returned an invalid executor (expected "
                "a name like \"local\")");
            return;
        }
        snprintf(c->out->executor, sizeof(c->out->executor), "%s", s);
        c->out->executor_from_hook = 1;
    }
    lua_pop(L, 1);
    if (rawget_field(L, t, "limits") != LUA_TNIL) {
        int lt = lua_gettop(L);
        if (lua_type(L, lt) != LUA_TTABLE || lua_getmetatable(L, lt)) {
            set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                       "policy error: on_execute returned limits that are not a plain "
                       "table");
            return;
        }
        lua_pushnil(L);
        while (lua_next(L, lt)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            const char *const *f;
            uint64_t val;
            for (f = limit_fields; k && *f && strcmp(*f, k); f++)
                ;
            if (!k || !*f) {
                set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                           "policy error: on_execute returned an unknown limit \"%s\"",
                           k ? k : "?");
                return;
            }
            if (parse_limit(L, -1, *f, &val, msg, sizeof(msg)) < 0) {
                set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                           "policy error: on_execute returned limits.%s: %s", *f, msg);
                return;
            }
            set_limit(&c->out->limits, *f,
                      tighter(*f, val, get_limit(&c->p->limits, *f)));
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    v->code = 0;
}

static int exec_tramp(lua_State *L)
{
    struct exec_ctx *c = lua_touserdata(L, 1);
    struct lstate *st = state_of(L);
    const struct hutch_policy_exec *req = c->req;
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->ref_execute);
    lua_createtable(L, 0, 8);
    set_string_field(L, "principal", req->principal);
    set_string_field(L, "execution", req->execution);
    set_string_field(L, "language", req->language);
    lua_pushinteger(L, (lua_Integer)req->code_bytes);
    lua_setfield(L, -2, "code_bytes");
    lua_pushinteger(L, (lua_Integer)req->nfiles);
    lua_setfield(L, -2, "files");
    if (req->workspace)
        set_string_field(L, "workspace", req->workspace);
    set_string_field(L, "executor", c->p->executor);
    push_limits(L, &c->p->limits);
    lua_setfield(L, -2, "limits");
    lua_call(L, 1, 2);
    if (lua_type(L, 1) == LUA_TTABLE)
        read_adjustments(L, 1, c);
    else
        read_verdict(L, 1, &c->v, "on_execute",
                     "true, false and a reason, or a table of adjustments");
    return 0;
}

int hutch_policy_check_execute(struct hutch_policy *p,
                               const struct hutch_policy_exec *req,
                               struct hutch_policy_decision *out, char *reason,
                               size_t reason_len)
{
    struct exec_ctx c = {0};
    struct hutch_policy_decision d = {0};
    if (!p || !req || !out)
        return set_reason(reason, reason_len, -EINVAL,
                          "policy error: no policy loaded");
    snprintf(d.executor, sizeof(d.executor), "%s", p->executor);
    d.limits = p->limits;
    if (p->has_execute) {
        c.p = p;
        c.req = req;
        c.out = &d;
        run_hook(p, exec_tramp, &c, &c.v, "on_execute",
                 req->execution ? req->execution : "-");
        if (c.v.code)
            return set_reason(reason, reason_len, c.v.code, "%s", c.v.reason);
    }
    *out = d;
    return 0;
}

/* --- paths --- */

/* The path as the kernel would read it (no percent-decoding; symlinks
 * before ".."), for the existing part: realpath() of the longest existing
 * prefix, the rest appended lexically. */
static int literal_resolve(const char *in, char *out, size_t len)
{
    char buf[PATH_MAX], rp[PATH_MAX], rest[PATH_MAX];
    size_t cut, n = strlen(in), o;
    if (in[0] != '/' || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, in, n + 1);
    cut = n;
    for (;;) {
        buf[cut] = '\0';
        if (realpath(cut ? buf : "/", rp))
            break;
        if (!cut)
            return -ENOENT;
        while (cut > 0 && in[cut - 1] != '/')
            cut--;
        while (cut > 0 && in[cut - 1] == '/')
            cut--;
    }
    /* rp, then the remaining components of `in` with "." and ".." applied. */
    o = strlen(rp);
    if (o >= len)
        return -ENAMETOOLONG;
    memcpy(out, rp, o + 1);
    snprintf(rest, sizeof(rest), "%s", in + cut);
    for (char *save = NULL, *c = strtok_r(rest, "/", &save); c;
         c = strtok_r(NULL, "/", &save)) {
        size_t cl = strlen(c);
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            while (o > 1 && out[o - 1] != '/')
                o--;
            if (o > 1)
                o--;
            out[o] = '\0';
            continue;
        }
        if (o + 1 + cl >= len)
            return -ENAMETOOLONG;
        if (o > 1)
            out[o++] = '/';
        memcpy(out + o, c, cl + 1);
        o += cl;
    }
    return 0;
}

/* 1 allowed (resolved filled), 0 not (why filled). */
static int path_check(struct hutch_policy *p, const char *path, int rw, char *resolved,
                      size_t resolved_len, char *why, size_t why_len)
{
    char a[PATH_MAX], b[PATH_MAX];
    struct hutch_err e = {0};
    int in_a = 0, in_b = 0, wrong_mode = 0;

    if (!p || !path || !*path)
        return set_reason(why, why_len, 0, "no path given");
    if (path[0] != '/')
        return set_reason(why, why_len, 0, "\"%.*s\" is not an absolute path", 256,
                          path);
    if (strlen(path) >= PATH_MAX)
        return set_reason(why, why_len, 0, "the path is too long");
    if (hutch_path_resolve(path, a, sizeof(a), &e) < 0)
        return set_reason(why, why_len, 0, "invalid path \"%.*s\": %s", 256, path,
                          e.msg);
    /* Hooks cannot rewrite the arguments, so the original string goes on to
     * the tool: it must land inside too, read the way the kernel reads it. */
    if (literal_resolve(path, b, sizeof(b)) < 0)
        return set_reason(why, why_len, 0, "invalid path \"%.*s\"", 256, path);
    for (size_t i = 0; i < p->npaths; i++) {
        const struct hutch_policy_path *pp = &p->paths[i];
        int wa = hutch_path_within(a, pp->host), wb = hutch_path_within(b, pp->host);
        if (rw && !pp->rw) {
            wrong_mode |= wa;
            continue;
        }
        in_a |= wa;
        in_b |= wb;
    }
    if (in_a && in_b) {
        if (resolved && resolved_len) {
            if (strlen(a) >= resolved_len)
                return set_reason(why, why_len, 0, "the resolved path is too long");
            memcpy(resolved, a, strlen(a) + 1);
        }
        return 1;
    }
    if (in_a)
        return set_reason(
            why, why_len, 0,
            "\"%.*s\" is ambiguous (it names a different file when its %% "
            "escapes or .. are read literally)",
            256, path);
    if (wrong_mode)
        return set_reason(why, why_len, 0, "%.*s may only be read, not written", 512,
                          a);
    return set_reason(why, why_len, 0, "%.*s is outside the policy's paths", 512, a);
}

int hutch_policy_path_allowed(struct hutch_policy *p, const char *path,
                              const char *mode, char *resolved, size_t resolved_len)
{
    char why[PATH_MAX + 128];
    int rw;
    if (!mode || !strcmp(mode, "ro"))
        rw = 0;
    else if (!strcmp(mode, "rw"))
        rw = 1;
    else
        return 0;
    return path_check(p, path, rw, resolved, resolved_len, why, sizeof(why));
}
