/* fuzz_servers.c — the servers file (hutch_upstreams_load in upstream_servers.c):
 * the input is a servers.json, written to the scratch directory and loaded.
 * Nothing is started.  Checked beyond "no crash": a file that loads gives
 * the "mcpServers" object, and one that does not says why naming the file.
 * The JSONC preprocessor (jsonc.c) is checked on the same input: it only
 * blanks bytes, keeps every newline, leaves no comment for a second pass,
 * and leaves JSON as it is. */
#include <cjson/cJSON.h>

#include "fuzz.h"
#include "jsonc.h"
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

static void check_jsonc(const uint8_t *data, size_t size)
{
    char *a = malloc(size + 1), *b = malloc(size + 1);
    const char *end = NULL;
    unsigned line = 0, col = 0;
    cJSON *strict;
    int r;

    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    memcpy(a, data, size);
    a[size] = '\0';
    r = hutch_jsonc_strip(a, size, &line, &col);
    for (size_t i = 0; i < size; i++) {
        fuzz_assert(a[i] == (char)data[i] || a[i] == ' ');
        fuzz_assert((data[i] == '\n') == (a[i] == '\n'));
    }
    fuzz_assert(r == 0 || (r == -EINVAL && line >= 1 && col >= 1));
    if (r == 0) {
        /* No comment is left; a second pass may only blank the comma
         * that was before a trailing one ("[1,,]": one trailing comma is
         * JSONC, two are not). */
        memcpy(b, a, size + 1);
        fuzz_assert(hutch_jsonc_strip(b, size, NULL, NULL) == 0);
        for (size_t i = 0; i < size; i++)
            fuzz_assert(b[i] == a[i] || (a[i] == ',' && b[i] == ' '));
    }
    /* JSON, whole: nothing in it is a comment or a trailing comma.  cJSON
     * skips a UTF-8 byte order mark as the preprocessor blanks it; after
     * the mark the text is left as it is. */
    strict = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
    if (strict && end == (const char *)data + size) {
        size_t bom = size >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3) ? 3 : 0;
        fuzz_assert(r == 0 && !memcmp(a, "   ", bom) &&
                    !memcmp(a + bom, data + bom, size - bom));
    }
    cJSON_Delete(strict);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_err err = {0};
    cJSON *config = NULL;

    check_jsonc(data, size);
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
