/* test_plan.c — the plan of an execution (govern.h): the executor rule and
 * the limits rule resolved from one policy (a file here, or the built-in
 * default) and the operator's settings, the warm pool sizes, the class
 * options, the principal's facts, and whether a plan is of the current
 * policy after a reload. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "govern.h"
#include "log.h"
#include "policy.h"
#include "tap.h"

static char root[PATH_MAX];
static int nfile;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(2);
    }
}

/* A policy file holding `text`, loaded; exits when it does not load. */
static struct hutch_policy *load(const char *text, char *path, size_t len)
{
    struct hutch_policy *p = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    char own[PATH_MAX];
    if (!path) {
        path = own;
        len = sizeof(own);
    }
    snprintf(path, len, "%s/p%d.lua", root, nfile++);
    write_file(path, text);
    chmod(path, 0600); /* some hold tokens */
    if (hutch_policy_load(path, &p, &err) < 0) {
        printf("# %s does not load: %s\n", text, err.msg);
        exit(2);
    }
    return p;
}

/* on_execute's decision under p for principal "local", python. */
static void decide(struct hutch_policy *p, struct hutch_policy_decision *d)
{
    struct hutch_policy_exec req = {
        .principal = "local", .execution = "x1", .language = "python", .code_bytes = 1};
    char reason[256];
    if (hutch_policy_check_execute(p, &req, d, reason, sizeof(reason)) < 0) {
        printf("# on_execute refused: %s\n", reason);
        exit(2);
    }
}

static struct hutch_plan_operator none(void)
{
    struct hutch_plan_operator op = {.pool_size = {-1, -1}};
    return op;
}

static void builtin(void)
{
    struct hutch_policy *p = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_plan_operator op = none();
    struct hutch_plan plan;

    hutch_policy_default(&p, &err);
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "local"),
       "built-in, no operator: executor local (%s)", plan.executor);
    ok(!strcmp(plan.source, "built-in"), "the plan names its source (%s)", plan.source);
    ok(plan.cls.memory_bytes == (uint64_t)HUTCH_DEFAULT_MEMORY_MB << 20 &&
           plan.cls.pids_max == HUTCH_DEFAULT_PIDS && plan.cls.options == NULL &&
           plan.cls.language == NULL && plan.cls.struct_size == sizeof(plan.cls),
       "hutch's defaults in the class, no options, the language left to the job");
    ok(plan.timeout_ms == HUTCH_DEFAULT_TIMEOUT_MS &&
           plan.output_max == HUTCH_OUTPUT_MAX_BYTES &&
           plan.output_default == HUTCH_OUTPUT_MAX_BYTES,
       "timeout and output at hutch's defaults");
    ok(plan.pool_size[0] == HUTCH_POOL_DEFAULT_SIZE &&
           plan.pool_size[1] == HUTCH_POOL_DEFAULT_SIZE,
       "the default executor keeps %d warm per language", HUTCH_POOL_DEFAULT_SIZE);
    ok(!strcmp(plan.flavour, "base"), "flavour base when nothing names one");
    ok(!plan.has_principals && plan.nprincipals == 0, "no principals");
    hutch_plan_release(&plan);
    ok(plan.policy == NULL && plan.source == NULL, "release drops the reference");
    hutch_plan_release(&plan); /* twice is harmless */

    /* The built-in policy's limits are defaults: the operator may raise
     * them; the front's output default stays under the ceiling. */
    op.memory_mb = 1024;
    op.timeout_ms = 60000;
    op.pids = 512;
    op.output_default = HUTCH_OUTPUT_MODEL_BYTES;
    op.executor = "docker";
    op.executor_from = "HUTCH_EXECUTOR";
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.cls.memory_bytes == (uint64_t)1024 << 20 && plan.cls.pids_max == 512 &&
           plan.timeout_ms == 60000,
       "the operator raises the built-in's defaults");
    ok(plan.output_default == HUTCH_OUTPUT_MODEL_BYTES &&
           plan.output_max == HUTCH_OUTPUT_MAX_BYTES,
       "the front's output default, below the ceiling");
    ok(plan.rc == 0 && !strcmp(plan.executor, "docker"),
       "the operator's executor wins over the built-in's (%s)", plan.executor);
    hutch_plan_release(&plan);
    hutch_policy_unref(p);
}

static void limits(void)
{
    struct hutch_policy *p =
        load("return { limits = { timeout_ms = 10000, memory_mb = 256, pids = 64,\n"
             "  cpus = 2, output_bytes = 4096, files_bytes = 5000 } }",
             NULL, 0);
    struct hutch_plan_operator op = none();
    struct hutch_plan plan;

    op.timeout_ms = 20000;
    op.memory_mb = 1024;
    op.output_default = HUTCH_OUTPUT_MODEL_BYTES;
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.timeout_ms == 10000 && plan.cls.memory_bytes == (uint64_t)256 << 20 &&
           plan.cls.pids_max == 64 && plan.cls.cpu_millis == 2000,
       "a policy file's limits are ceilings under the operator's");
    ok(plan.output_max == 4096 && plan.output_default == 4096,
       "output: the policy's 4096 caps the ceiling and the default");
    ok(plan.files_bytes == 5000, "files_bytes from the policy");
    hutch_plan_release(&plan);

    op.timeout_ms = 5000;
    op.memory_mb = 128;
    op.output_bytes = 1000;
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.timeout_ms == 5000 && plan.cls.memory_bytes == (uint64_t)128 << 20 &&
           plan.output_max == 1000 && plan.output_default == 1000,
       "the operator's lower flags win");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    /* output_bytes at hutch's maximum (its default) leaves the front's. */
    p = load("return { limits = { output_bytes = 1048576 } }", NULL, 0);
    op = none();
    op.output_default = HUTCH_OUTPUT_MODEL_BYTES;
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.output_max == HUTCH_OUTPUT_MAX_BYTES &&
           plan.output_default == HUTCH_OUTPUT_MODEL_BYTES,
       "a policy's output_bytes at the maximum keeps the model-sized default");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    /* on_execute tightens; the plan follows its decision. */
    p = load("return { limits = { timeout_ms = 10000 },\n"
             "  on_execute = function(req) return { limits = { timeout_ms = 2000,\n"
             "    files_bytes = 100 } } end }",
             NULL, 0);
    {
        struct hutch_policy_decision d;
        op = none();
        decide(p, &d);
        hutch_plan_resolve(p, &d, NULL, &op, &plan);
        ok(plan.timeout_ms == 2000 && plan.files_bytes == 100,
           "on_execute's tighter limits are the plan's (%llu ms, %llu bytes)",
           (unsigned long long)plan.timeout_ms, (unsigned long long)plan.files_bytes);
        hutch_plan_release(&plan);
        hutch_plan_resolve(p, NULL, NULL, &op, &plan);
        ok(plan.timeout_ms == 10000, "without a decision, the policy's own limits");
        hutch_plan_release(&plan);
    }
    hutch_policy_unref(p);
}

static void executor(void)
{
    char path[PATH_MAX];
    struct hutch_policy *p =
        load("return { executor = \"docker\" }", path, sizeof(path));
    struct hutch_plan_operator op = none();
    struct hutch_policy_decision d;
    struct hutch_plan plan;

    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "docker"), "the policy file's executor");
    hutch_plan_release(&plan);
    op.executor = "docker";
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "docker"), "operator and policy agree");
    hutch_plan_release(&plan);
    op.executor = "local";
    op.executor_from = "HUTCH_EXECUTOR";
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.rc == -EINVAL && plan.executor[0] == '\0' &&
           strstr(plan.error, "HUTCH_EXECUTOR asks for executor \"local\"") &&
           strstr(plan.error, path) && strstr(plan.error, "make them agree"),
       "operator and policy differ: an error naming both (%s)", plan.error);
    ok(plan.pool_size[0] == 0 && plan.pool_size[1] == 0,
       "a plan without an executor keeps nothing warm");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    /* on_execute's picks: stronger yes, weaker or unknown no. */
    p = load("return { executor = \"docker\",\n"
             "  on_execute = function(req) return { executor = \"gvisor\" } end }",
             NULL, 0);
    op = none();
    decide(p, &d);
    hutch_plan_resolve(p, &d, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "gvisor"),
       "on_execute may pick a stronger executor (%s)", plan.executor);
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    p = load("return { executor = \"docker\",\n"
             "  on_execute = function(req) return { executor = \"local\" } end }",
             NULL, 0);
    decide(p, &d);
    hutch_plan_resolve(p, &d, NULL, &op, &plan);
    ok(plan.rc == -EPERM &&
           strstr(plan.error, "does not isolate as well as \"docker\"") &&
           strstr(plan.error, "(the policy's executor)"),
       "a weaker pick is refused (%s)", plan.error);
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    p = load("return { on_execute = function(req) return { executor = \"good\" } end }",
             NULL, 0);
    decide(p, &d);
    op.executor = "local";
    op.executor_from = "--executor";
    hutch_plan_resolve(p, &d, NULL, &op, &plan);
    ok(plan.rc == -EPERM && strstr(plan.error, "\"good\" is not one of hutch's") &&
           strstr(plan.error, "(--executor)"),
       "a pick of a third-party plugin is refused (%s)", plan.error);
    hutch_plan_release(&plan);
    op.executor = "good";
    hutch_plan_resolve(p, &d, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "good"),
       "a hook picking the default itself is no conflict");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);
}

static void pools_and_options(void)
{
    struct hutch_policy *p =
        load("return { executor = \"docker\",\n"
             "  pool = { python = 4, javascript = 1, gvisor = { javascript = 3 } },\n"
             "  executor_options = { gvisor = { platform = \"kvm\", flavour = \"data\" "
             "} },\n"
             "  on_execute = function(req) return { executor = \"gvisor\" } end }",
             NULL, 0);
    struct hutch_plan_operator op = none();
    struct hutch_policy_decision d;
    struct hutch_plan plan;

    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.pool_size[0] == 4 && plan.pool_size[1] == 1,
       "the policy's pool sizes for its executor");
    ok(plan.cls.options == NULL && !strcmp(plan.flavour, "base"),
       "no options for docker");
    hutch_plan_release(&plan);
    op.pool_size[1] = 7;
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.pool_size[0] == 4 && plan.pool_size[1] == 7, "--pool overrides the policy");
    hutch_plan_release(&plan);

    /* An execution on gvisor, picked by on_execute, when hutch opened
     * docker at start: --pool is docker's; gvisor keeps the policy's. */
    decide(p, &d);
    op.pool_executor = "docker";
    hutch_plan_resolve(p, &d, NULL, &op, &plan);
    ok(plan.rc == 0 && !strcmp(plan.executor, "gvisor"), "on gvisor");
    ok(plan.pool_size[0] == 4 && plan.pool_size[1] == 3,
       "the per-executor table refines the plain one; --pool is not for it");
    ok(plan.cls.options && strstr(plan.cls.options, "kvm") &&
           !strcmp(plan.flavour, "data"),
       "gvisor's executor_options and flavour (%s)", plan.flavour);
    hutch_plan_release(&plan);
    hutch_policy_unref(p);

    p = load("return { pool = { gvisor = { python = 1 } } }", NULL, 0);
    op = none();
    op.executor = "gvisor";
    op.pool_executor = "local";
    hutch_plan_resolve(p, NULL, NULL, &op, &plan);
    ok(plan.pool_size[0] == 1 && plan.pool_size[1] == 0,
       "an executor other than the default is pooled only with a size");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);
}

static void principals(void)
{
    struct hutch_policy *p =
        load("return { concurrency = { executions = 3, queued = 5 },\n"
             "  workspaces = { max_count = 3 },\n"
             "  principals = {\n"
             "    { name = 'alice', token = 'a-token-0123456789abcdef' },\n"
             "    { name = 'carol', token = 'c-token-0123456789abcdef',\n"
             "      concurrency = { executions = 8 } } } }",
             NULL, 0);
    struct hutch_plan_operator op = none();
    struct hutch_plan plan;

    hutch_plan_resolve(p, NULL, "carol", &op, &plan);
    ok(plan.has_principals && plan.nprincipals == 2, "two principals");
    ok(plan.concurrency.executions == 8 && plan.concurrency.queued == 5 &&
           plan.concurrency.queued_set,
       "carol's concurrency: her own executions, the policy's queue");
    ok(plan.workspaces.max_count == 3, "the policy's workspaces settings");
    hutch_plan_release(&plan);
    hutch_plan_resolve(p, NULL, "alice", &op, &plan);
    ok(plan.concurrency.executions == 3, "alice's: the policy's");
    hutch_plan_release(&plan);
    hutch_policy_unref(p);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

/* A plan of the current policy knows when a reload replaced it. */
static void current(void)
{
    char path[PATH_MAX];
    struct hutch_gov *g = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_plan_operator op = none();
    struct hutch_plan plan, after;

    snprintf(path, sizeof(path), "%s/current.lua", root);
    write_file(path, "return { executor = \"docker\" }");
    if (hutch_gov_new(path, "/dev/null", &g, &err) < 0) {
        printf("# gov: %s\n", err.msg);
        exit(2);
    }
    hutch_gov_plan(g, &op, &plan);
    ok(!strcmp(plan.executor, "docker") && hutch_gov_plan_current(g, &plan),
       "the current policy's plan is current");
    write_file(path, "return { executor = \"gvisor\" }");
    ok(hutch_gov_reload(g, &err) == 0, "reload");
    ok(!hutch_gov_plan_current(g, &plan), "after a reload it is not");
    ok(!strcmp(plan.executor, "docker"), "and still holds what it was resolved from");
    hutch_gov_plan(g, &op, &after);
    ok(!strcmp(after.executor, "gvisor") && hutch_gov_plan_current(g, &after),
       "the new plan follows the reload");
    hutch_plan_release(&after);
    hutch_plan_release(&plan);
    hutch_gov_free(g);
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/hutch-test-plan-XXXXXX");
    if (!mkdtemp(root))
        return 2;
    builtin();
    limits();
    executor();
    pools_and_options();
    principals();
    current();
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
