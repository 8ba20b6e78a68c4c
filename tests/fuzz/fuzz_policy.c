/* fuzz_policy.c — the policy loader (policy.c): the input is a policy file,
 * written to the scratch directory and loaded; a policy that loads is then
 * asked every kind of decision once (on_execute and on_tool_call with fixed
 * requests, a host path, a bearer token, a secret argument name).
 *
 * The file's top-level code and its hooks run under the engine's own
 * budgets (HUTCH_POLICY_LOAD_MS, HUTCH_POLICY_HOOK_MS of CPU time, a 16 MiB
 * allocator cap), so an input that loops costs at most those. */
#include "fuzz.h"
#include "policy.h"

static char file[4200];
static cJSON *args;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(1);
    snprintf(file, sizeof(file), "%s/policy.lua", fuzz_dir);
    args = cJSON_Parse("{\"path\":\"/srv/data/a.txt\",\"password\":\"x\",\"n\":[1,2,"
                       "{\"deep\":true}]}");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_policy_exec req = {.principal = "alice",
                                    .execution = "e-1",
                                    .language = "python",
                                    .code_bytes = 10,
                                    .nfiles = 1};
    struct hutch_policy_decision d;
    struct hutch_policy *p = NULL;
    struct hutch_err err = {0};
    char reason[512], resolved[4096];
    int r;

    fuzz_write_file(file, data, size);
    r = hutch_policy_load(file, &p, &err);
    if (r < 0) {
        fuzz_assert(err.msg[0] && !p);
        return 0;
    }
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    if (r == 0) {
        const struct hutch_policy_limits *lim = hutch_policy_limits(p);
        fuzz_assert(d.executor[0]);
        /* A hook tightens, never loosens. */
        fuzz_assert(d.limits.timeout_ms <= lim->timeout_ms);
        fuzz_assert(d.limits.memory_mb <= lim->memory_mb);
        fuzz_assert(d.limits.output_bytes <= lim->output_bytes);
    }
    hutch_policy_check_tool(p, "alice", "e-1", "fs", "read_file", args, reason,
                            sizeof(reason));
    hutch_policy_check_tool(p, NULL, "e-1", "web", "fetch", NULL, reason,
                            sizeof(reason));
    hutch_policy_path_allowed(p, "/srv/data/../data/a.txt", "ro", resolved,
                              sizeof(resolved));
    hutch_policy_principal(p, "0123456789abcdef0123");
    hutch_policy_is_secret(p, "password");
    hutch_policy_pool_size(p, "local", "python");
    hutch_policy_executor_options(p, "docker");
    for (size_t i = 0; i < hutch_policy_npaths(p); i++)
        fuzz_assert(hutch_policy_path_at(p, i)->host[0] == '/');
    hutch_policy_unref(p);
    return 0;
}
