/* fuzz_wire.c — the runner wire protocol as the core reads it from a
 * sandbox (wire.c): a byte stream cut into NDJSON lines by the reader, in
 * pieces of a size the input chooses, each line parsed and validated.
 *
 * Input: one byte of framing (bit 7: a 64-byte line cap instead of the real
 * one; bits 0-6: the size of the pieces fed, 1-128), then the stream.
 * Checked beyond "no crash": every accepted message carries what its type
 * promises, and re-encodes (hutch_wire_encode) to one line that parses
 * again as the same type. */
#include <math.h>

#include "caps.h"
#include "fuzz.h"
#include "wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(0);
    return 0;
}

static void check_msg(const struct hutch_msg *m)
{
    switch (m->type) {
    case HUTCH_MSG_READY:
        fuzz_assert(m->lang && m->version);
        break;
    case HUTCH_MSG_TOOL_CALL:
        fuzz_assert(m->id >= 1 && m->tool && m->tool[0]);
        fuzz_assert(!m->args || cJSON_IsObject(m->args));
        break;
    case HUTCH_MSG_SEARCH:   /* tools.search: no tool name */
    case HUTCH_MSG_DESCRIBE: /* dir(), help(): no tool name */
        fuzz_assert(m->id >= 1 && !m->tool);
        fuzz_assert(!m->args || cJSON_IsObject(m->args));
        break;
    case HUTCH_MSG_DONE:
        fuzz_assert(m->ok || cJSON_IsObject(m->error));
        fuzz_assert(m->status >= -1 && m->status <= 255);
        fuzz_assert(m->status < 0 || (m->status == 0) == m->ok);
        break;
    default:
        fuzz_assert(!"a message of no known type was accepted");
    }
}

static void round_trip(const struct hutch_msg *m)
{
    struct hutch_err err = {0};
    struct hutch_msg again;
    size_t len = 0;
    char *line = hutch_wire_encode(m->root, &len);

    fuzz_assert(line && len >= 1 && line[len - 1] == '\n');
    fuzz_assert(memchr(line, '\n', len) == line + len - 1);
    fuzz_assert(hutch_wire_parse(line, len - 1, &again, &err) == 0);
    fuzz_assert(again.type == m->type);
    hutch_msg_free(&again);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_wire_reader rd;
    size_t piece;
    const char *line;
    size_t len;
    int r = 0;

    if (size < 1)
        return 0;
    piece = (size_t)(data[0] & 0x7f) + 1;
    hutch_wire_reader_init(&rd, data[0] & 0x80 ? 64 : HUTCH_WIRE_MAX_LINE);
    data++;
    size--;
    for (size_t off = 0; off < size && r == 0; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        r = hutch_wire_feed(&rd, data + off, n);
        while (r == 0 && hutch_wire_next(&rd, &line, &len) == 1) {
            struct hutch_err err = {0};
            struct hutch_msg m;
            fuzz_assert(len <= rd.max_line);
            fuzz_assert(!memchr(line, '\n', len));
            if (hutch_wire_parse(line, len, &m, &err) == 0) {
                check_msg(&m);
                round_trip(&m);
                hutch_msg_free(&m);
            } else {
                fuzz_assert(err.msg[0] && !m.root);
            }
        }
    }
    hutch_wire_reader_free(&rd);
    return 0;
}
