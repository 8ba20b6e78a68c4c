/* fuzz_servers.c — the servers file (hutch_upstreams_load in upstream_servers.c):
 * the input is a servers.json, written to the scratch directory and loaded.
 * Nothing is started.  Checked beyond "no crash": a file that loads gives
 * the "mcpServers" object, and one that does not says why naming the file. */
#include "fuzz.h"
#include "upstream.h"

static char file[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(1);
    snprintf(file, sizeof(file), "%s/servers.json", fuzz_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_err err = {0};
    cJSON *config = NULL;

    fuzz_write_file(file, data, size);
    if (hutch_upstreams_load(file, &config, &err) == 0) {
        fuzz_assert(cJSON_IsObject(config));
        fuzz_assert(cJSON_GetArraySize(config) <= 64);
    } else {
        fuzz_assert(!config && strstr(err.msg, file));
    }
    cJSON_Delete(config);
    return 0;
}
