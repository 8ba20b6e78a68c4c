/* fuzz_exec_args.c — execute_code's arguments (exec_args.c): checked and
 * parsed into the typed request, and the inputSchema generated from the
 * same table.
 *
 * Input: JSON text, the `arguments` of a tools/call of execute_code (an
 * object; anything else is refused).  Checked beyond "no crash, no leak":
 * a refusal has a message naming the tool and leaves nothing allocated; an
 * acceptance holds a language among those offered, code within its cap,
 * numbers at least 1 and at most HUTCH_EXEC_ARG_COUNT_MAX, at most
 * HUTCH_MAX_INPUT_FILES files and inputs, a valid workspace name, and an
 * argument of the request's that the schema with host folders shows. */
#include "caps.h"
#include "exec_args.h"
#include "fuzz.h"
#include "workspace.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *doc = cJSON_ParseWithLength((const char *)data, size);
    struct hutch_exec_args_offer offer = {1, HUTCH_DEFAULT_TIMEOUT_MS,
                                          HUTCH_OUTPUT_MAX_BYTES};
    struct hutch_exec_args a;
    struct hutch_err err = {0};
    cJSON *schema = hutch_exec_args_schema(&offer);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");

    fuzz_assert(cJSON_IsObject(props));
    if (hutch_exec_args_parse(doc, &a, &err) < 0) {
        fuzz_assert(!strncmp(err.msg, "execute_code: ", 14) && err.msg[14]);
        fuzz_assert(!a.job.files && !a.job.inputs);
    } else {
        const cJSON *it;
        fuzz_assert(a.job.language && (!strcmp(a.job.language, "python") ||
                                       !strcmp(a.job.language, "javascript") ||
                                       !strcmp(a.job.language, "typescript")));
        fuzz_assert(a.job.code && strlen(a.job.code) <= HUTCH_MAX_CODE_BYTES);
        fuzz_assert(a.job.timeout_ms <= HUTCH_EXEC_ARG_COUNT_MAX);
        fuzz_assert(a.job.output_bytes <= HUTCH_EXEC_ARG_COUNT_MAX);
        fuzz_assert(a.job.nfiles <= HUTCH_MAX_INPUT_FILES &&
                    a.job.ninputs <= HUTCH_MAX_INPUT_FILES);
        fuzz_assert(!a.job.nfiles || a.job.files);
        fuzz_assert(!a.job.ninputs || a.job.inputs);
        fuzz_assert(!a.job.workspace ||
                    hutch_ws_check_name(a.job.workspace, NULL) == 0);
        fuzz_assert(a.trace == 0 || a.trace == 1);
        cJSON_ArrayForEach(it, doc)
        {
            fuzz_assert(cJSON_GetObjectItemCaseSensitive(props, it->string));
        }
        hutch_exec_args_free(&a);
    }
    cJSON_Delete(schema);
    cJSON_Delete(doc);
    return 0;
}
