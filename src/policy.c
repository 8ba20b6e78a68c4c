/* policy.c — the Lua policy engine (policy.h, hutch-policy(5)): loading
 * the policy file, the built-in default, the getters, and the decisions
 * (tool globs, on_execute, on_tool_call, principals, secret argument
 * names).
 *
 * Not here: the restricted Lua state, its pool and hutch.path_allowed
 * (policy_lua.c); what the returned table may hold (policy_table.c); path
 * normalisation itself (path.c); rate limiting and the audit log (the
 * server asks these functions and writes what they say); the command line
 * (cmd_policy.c).  What the three files share is in policy_int.h.
 *
 * A loaded policy is immutable but for its pool of Lua states
 * (policy_lua.c says how that is locked) and the reference count
 * (atomic): decisions may be asked from many threads at once.  Any error
 * in a hook denies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>

#include "caps.h"
#include "egress.h"
#include "log.h"
#include "policy.h"
#include "policy_int.h"
#include "util.h"

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

/* --- loading --- */

static void policy_free(struct hutch_policy *p)
{
    struct lstate *st;
    if (!p)
        return;
    while ((st = p->idle)) {
        p->idle = st->next;
        pol_state_close(st);
    }
    for (size_t i = 0; i < p->npaths; i++) {
        free((char *)p->paths[i].host);
        free((char *)p->paths[i].sandbox);
    }
    free(p->paths);
    for (size_t i = 0; i < p->nxopts; i++) {
        for (size_t k = 0; k < p->xopts[i].n; k++)
            free(p->xopts[i].kv[k].value);
        free(p->xopts[i].json);
    }
    for (size_t i = 0; i < p->nprincipals; i++) {
        free(p->principals[i].name);
        if (p->principals[i].token)
            explicit_bzero(p->principals[i].token, p->principals[i].token_len);
        free(p->principals[i].token);
        hutch_egress_rules_free(p->principals[i].egress);
    }
    free(p->principals);
    struct glob *lists[] = {p->allow, p->deny, p->secret, p->sources, p->sinks};
    size_t counts[] = {p->nallow, p->ndeny, p->nsecret, p->nsources, p->nsinks};
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < counts[k]; i++) {
            free(lists[k][i].pat);
            free(lists[k][i].orig);
        }
        free(lists[k]);
    }
    hutch_egress_rules_free(p->egress);
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
    r = pol_state_open_big(p, &vc, &st, msg, sizeof(msg));
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
        const char *have;
        int r;
        for (i = 0; i < p->nxopts && strcmp(p->xopts[i].name, flavoured[e]); i++)
            ;
        if (i == p->nxopts) {
            if (p->nxopts == HUTCH_POLICY_MAX_EXECUTORS)
                return hutch_err_set(err, -E2BIG,
                                     "--flavour: the policy's executor_options name "
                                     "%d executors already",
                                     HUTCH_POLICY_MAX_EXECUTORS);
            snprintf(p->xopts[i].name, sizeof(p->xopts[i].name), "%s", flavoured[e]);
            p->xopts[i].n = 0;
            p->xopts[i].json = NULL;
            p->nxopts++;
        }
        have = pol_xopts_get(p, i, "flavour");
        if (have && strcmp(have, flavour) != 0)
            return hutch_err_set(err, -EINVAL,
                                 "--flavour %s and the policy's "
                                 "executor_options.%s.flavour \"%.64s\" differ: name "
                                 "one flavour",
                                 flavour, flavoured[e], have);
        if (!have) {
            /* kv has a row beyond HUTCH_POLICY_MAX_OPTIONS for this one. */
            size_t k = p->xopts[i].n;
            if (!(p->xopts[i].kv[k].value = strdup(flavour)))
                return hutch_err_set(err, -ENOMEM, "out of memory");
            snprintf(p->xopts[i].kv[k].key, sizeof(p->xopts[i].kv[k].key), "flavour");
            p->xopts[i].n++;
        }
        if ((r = pol_xopts_render(p, i)) < 0)
            return hutch_err_set(err, r, "out of memory");
    }
    return 0;
}

const char *hutch_policy_flavour(const struct hutch_policy *p, const char *executor,
                                 char *buf, size_t len)
{
    const char *v = NULL;
    for (size_t i = 0; p && executor && i < p->nxopts && !v; i++)
        if (strcmp(p->xopts[i].name, executor) == 0)
            v = pol_xopts_get(p, i, "flavour");
    snprintf(buf, len, "%s", v && *v ? v : "base");
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

const char *hutch_policy_executor_options_name(const struct hutch_policy *p, size_t i)
{
    return p && i < p->nxopts ? p->xopts[i].name : NULL;
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
    for (int i = 0; pol_pool_langs[i]; i++)
        if (!strcmp(language, pol_pool_langs[i]))
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

const struct hutch_egress_rules *hutch_policy_egress(const struct hutch_policy *p)
{
    return p ? p->egress : NULL;
}

const struct hutch_egress_rules *hutch_policy_egress_of(const struct hutch_policy *p,
                                                        const char *principal)
{
    for (size_t i = 0; p && principal && i < p->nprincipals; i++) {
        if (strcmp(p->principals[i].name, principal))
            continue;
        if (p->principals[i].egress_off)
            return NULL;
        if (p->principals[i].egress)
            return p->principals[i].egress;
        break;
    }
    return hutch_policy_egress(p);
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
               lua_isnone(L, i) || lua_isnil(L, i) ? "nil" : pol_type_of(L, i),
               expected);
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
    struct lstate *st = pol_state_of(L);
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

/* The first of `n` globs that matches server.tool, as written; NULL. */
static const char *first_glob(const struct glob *g, size_t n, const char *server,
                              const char *tool)
{
    char full[HUTCH_MAX_QUALIFIED_NAME + 1];
    size_t dot;
    if (!n || canon_tool(server, tool, full, sizeof(full), &dot) < 0)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (glob_match(g[i].pat, full))
            return g[i].orig;
    return NULL;
}

static int has_egress(const struct glob *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(g[i].pat, "egress"))
            return 1;
    return 0;
}

void hutch_policy_taint_egress(const struct hutch_policy *p, int *source, int *sink,
                               int *ask)
{
    *source = p && has_egress(p->sources, p->nsources);
    *sink = p && has_egress(p->sinks, p->nsinks);
    *ask = p && p->taint_ask;
}

const char *hutch_policy_taint_source(const struct hutch_policy *p, const char *server,
                                      const char *tool)
{
    return p ? first_glob(p->sources, p->nsources, server, tool) : NULL;
}

const char *hutch_policy_taint_sink(const struct hutch_policy *p, const char *server,
                                    const char *tool, int *ask)
{
    if (ask)
        *ask = p && p->taint_ask;
    return p ? first_glob(p->sinks, p->nsinks, server, tool) : NULL;
}

/* The words of a taint decision, for a tool call and a connection alike:
 * -EPERM naming the source and the sink rule, or under on_sink = "ask"
 * HUTCH_POLICY_ASK with the question.  `what` is the sink ("mail.send", "a
 * connection to host:port"), `act` what the program would do ("call
 * mail.send"). */
static int taint_verdict(char *reason, size_t len, int ask, const char *tainted_by,
                         const char *what, const char *act, const char *rule)
{
    if (!ask)
        return set_reason(reason, len, -EPERM,
                          "denied by the policy's taint rule: this program has read "
                          "untrusted data from %s (taint.sources), and %s may send "
                          "data out (taint.sinks rule \"%s\")",
                          tainted_by, what, rule);
    return set_reason(reason, len, HUTCH_POLICY_ASK,
                      "This program has read untrusted data from %s, which may carry "
                      "instructions from others. Allow it to %s, which may send data "
                      "out?",
                      tainted_by, act);
}

int hutch_policy_check_taint_egress(const struct hutch_policy *p, const char *host,
                                    unsigned port, const char *tainted_by, char *reason,
                                    size_t reason_len)
{
    char what[HUTCH_EGRESS_MAX_HOST + 32], act[HUTCH_EGRESS_MAX_HOST + 32];
    int source, sink, ask;

    hutch_policy_taint_egress(p, &source, &sink, &ask);
    if (!sink || !tainted_by)
        return 0;
    snprintf(what, sizeof(what), "a connection to %s:%u", host, port);
    snprintf(act, sizeof(act), "connect to %s:%u", host, port);
    return taint_verdict(reason, reason_len, ask, tainted_by, what, act, "egress");
}

int hutch_policy_check_taint(const struct hutch_policy *p, const char *server,
                             const char *tool, const char *tainted_by, int r,
                             char *reason, size_t reason_len, const char **sink_out)
{
    char act[HUTCH_MAX_QUALIFIED_NAME + 8];
    char full[HUTCH_MAX_QUALIFIED_NAME + 1];
    const char *sink;
    size_t dot;
    int ask;

    if (sink_out)
        *sink_out = NULL;
    if (r < 0 || !tainted_by ||
        !(sink = hutch_policy_taint_sink(p, server, tool, &ask)) ||
        canon_tool(server, tool, full, sizeof(full), &dot) < 0)
        return r;
    if (sink_out)
        *sink_out = sink;
    if (ask && r == HUTCH_POLICY_ASK) {
        size_t n = strlen(reason);
        snprintf(reason + n, reason_len - n,
                 " (this program has read untrusted data from %s)", tainted_by);
        return r;
    }
    snprintf(act, sizeof(act), "call %s", full);
    return taint_verdict(reason, reason_len, ask, tainted_by, full, act, sink);
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
    pol_run_hook(p, tool_tramp, &c, &c.v, "on_tool_call", full);
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
    static const char *const fields[] = {"executor", "limits", "egress", NULL};
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
                       "(expected executor, limits, egress)",
                       k ? k : "?");
            lua_pop(L, 1);
            return;
        }
    }
    if (pol_rawget_field(L, t, "executor") != LUA_TNIL) {
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!s || !pol_valid_executor(s)) {
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
    /* egress = false: none for this execution (never more than the
     * principal's: a hook can only take it away). */
    if (pol_rawget_field(L, t, "egress") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TBOOLEAN || lua_toboolean(L, -1)) {
            set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                       "policy error: on_execute returned egress other than false "
                       "(a hook may only take egress away)");
            return;
        }
        c->out->egress_off = 1;
    }
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "limits") != LUA_TNIL) {
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
            for (f = pol_limit_fields; k && *f && strcmp(*f, k); f++)
                ;
            if (!k || !*f) {
                set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                           "policy error: on_execute returned an unknown limit \"%s\"",
                           k ? k : "?");
                return;
            }
            if (pol_parse_limit(L, -1, *f, &val, msg, sizeof(msg)) < 0) {
                set_reason(v->reason, sizeof(v->reason), v->code = -EPROTO,
                           "policy error: on_execute returned limits.%s: %s", *f, msg);
                return;
            }
            pol_set_limit(&c->out->limits, *f,
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
    struct lstate *st = pol_state_of(L);
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
        pol_run_hook(p, exec_tramp, &c, &c.v, "on_execute",
                     req->execution ? req->execution : "-");
        if (c.v.code)
            return set_reason(reason, reason_len, c.v.code, "%s", c.v.reason);
    }
    *out = d;
    return 0;
}
