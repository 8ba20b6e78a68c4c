/* policy_lua.c — the Lua runtime of the policy engine (policy.h,
 * hutch-policy(5)): the restricted Lua state, running it with enough C
 * stack, building a state from the policy's source, the pool of states a
 * hook borrows, and hutch.path_allowed (with its C twin,
 * hutch_policy_path_allowed).
 *
 * Not here: what the returned table may hold (policy_table.c), loading the
 * file and the decisions made with the hooks (policy.c), path
 * normalisation itself (path.c).
 *
 * Each state is restricted (ARCHITECTURE.md, "Conventions"): base without
 * dofile/loadfile/rawset/warn, `load` of text only, string without dump,
 * table, math, utf8 and the `hutch` helpers; a capped allocator; an
 * instruction-count hook checking a deadline; a traceback message handler;
 * globals and library tables read-only once the file has been loaded.  A
 * state that ran out of memory or time is closed and rebuilt from the
 * source rather than trusted again.  Any error denies.
 *
 * Threads and locks.  A policy owns a small pool of Lua states, all built
 * from the same source: a decision borrows one (pool_get), so hooks of
 * concurrent decisions run in parallel without a global lock.  p->mu
 * guards the pool (idle, nstates) and nothing else, and is never held
 * while Lua runs; p->cv wakes a decision waiting for a state.  A state is
 * used by one thread at a time.  A caller with too small a C stack runs
 * the hook on a short-lived thread of its own (with_stack), joined at
 * once. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "caps.h"
#include "log.h"
#include "path.h"
#include "policy.h"
#include "policy_int.h"
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

#define HOOK_COUNT 1000 /* VM instructions between deadline checks */

/* Registry keys (their addresses). */
static const char env_key = 0, envmt_key = 0;

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

struct lstate *pol_state_of(lua_State *L)
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
    struct lstate *st = pol_state_of(L);
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
    struct lstate *st = pol_state_of(L);
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
    struct lstate *st = pol_state_of(L);
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

/* --- building a state --- */

struct setup_ctx {
    struct lstate *st;
    struct vctx *vc; /* the first state validates; later ones only take hooks */
};

static void take_hook(lua_State *L, int t, const char *name, int expected, int *ref)
{
    pol_rawget_field(L, t, name);
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
        pol_validate(L, c->vc, t);
    else if (!lua_istable(L, t))
        luaL_error(L, "the policy returned %s on a second run", pol_type_of(L, t));
    take_hook(L, t, "on_execute", p->has_execute, &st->ref_execute);
    take_hook(L, t, "on_tool_call", p->has_tool_call, &st->ref_tool_call);
    freeze(L);
    st->loading = 0;
    return 0;
}

void pol_state_close(struct lstate *st)
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
        pol_state_close(st);
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

int pol_state_open_big(struct hutch_policy *p, struct vctx *vc, struct lstate **out,
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
        pol_state_close(st); /* rebuilt from the source on demand */
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

int pol_run_hook(struct hutch_policy *p, lua_CFunction fn, void *ctx, struct verdict *v,
                 const char *hook, const char *subject)
{
    struct hook_args h = {p, fn, ctx, v, hook, subject};
    int r = with_stack(hook_main, &h);
    if (r < 0)
        return set_reason(v->reason, sizeof(v->reason), v->code = r,
                          "policy error: cannot start a thread for %s: %s", hook,
                          strerror(-r));
    return v->code;
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
