/* fuzz_sse.c — an upstream's HTTP response body as hutch parses it
 * (upstream_http.c through upstream_parse.h): Server-Sent Events cut into lines
 * (CRLF, LF or CR) and events, or one JSON body; each payload a JSON-RPC
 * message or batch; notifications handled, server requests refused; the
 * response with id 1 kept.  No network: nothing is answered.
 *
 * Input: one byte of options (bit 0: text/event-stream, else JSON; bits
 * 1-7: the size of the pieces libcurl would hand over, 0 for all at once),
 * then the body.  Checked beyond "no crash": a response taken is an object
 * with id 1 and a result or an error. */
#include "fuzz.h"
#include "upstream_parse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *reply = NULL;
    int r;

    if (size < 1)
        return 0;
    r = hutch_upstream_parse_http((const char *)data + 1, size - 1, data[0] & 1,
                                  data[0] >> 1, 1, &reply);
    if (r == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(reply, "id");
        fuzz_assert(cJSON_IsObject(reply));
        fuzz_assert(cJSON_IsNumber(id) && id->valuedouble == 1);
        fuzz_assert(cJSON_GetObjectItemCaseSensitive(reply, "result") ||
                    cJSON_GetObjectItemCaseSensitive(reply, "error"));
    } else {
        fuzz_assert(!reply && r < 0);
    }
    cJSON_Delete(reply);
    return 0;
}
