/* fuzz_mux.c — the frames hutch-init sends the Docker executor over the
 * attach stream (plugins/common/mux.c), as the pump reads them: in pieces
 * of any size.
 *
 * Input: one byte, the size of the pieces the connection hands over (0:
 * all at once), then the stream.  Checked beyond "no crash": what the
 * reader makes of the stream does not depend on how it was cut (each
 * stream's bytes and ends, and where it stops being frames, equal those of
 * a reading in one piece); a piece is never empty, never larger than a
 * frame's payload, never of an unknown stream; and a broken reader stays
 * broken. */
#include "fuzz.h"
#include "mux.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

struct seen {
    uint64_t sum[MUX_NSTREAM]; /* a checksum of each stream's bytes, in order */
    size_t bytes[MUX_NSTREAM];
    unsigned ends[MUX_NSTREAM];
    size_t consumed; /* input bytes taken before the reader broke (or all) */
    int broken;
};

static void read_all(const uint8_t *data, size_t size, size_t piece, struct seen *s)
{
    struct mux_reader r = {0};
    size_t off = 0;

    memset(s, 0, sizeof(*s));
    while (off < size) {
        size_t n = piece && size - off > piece ? piece : size - off;
        const unsigned char *p = data + off;
        size_t left = n;
        struct mux_piece pc;
        int f;
        while (left && (f = mux_feed(&r, &p, &left, &pc)) != 0) {
            if (f < 0) {
                s->broken = 1;
                s->consumed = off + (n - left);
                fuzz_assert(r.broken && mux_feed(&r, &p, &left, &pc) < 0);
                return;
            }
            fuzz_assert(pc.stream >= 0 && pc.stream < MUX_NSTREAM);
            if (!pc.data) {
                fuzz_assert(pc.len == 0);
                s->ends[pc.stream]++;
                continue;
            }
            fuzz_assert(pc.len > 0 && pc.len <= MUX_MAX_PAYLOAD);
            for (size_t i = 0; i < pc.len; i++)
                s->sum[pc.stream] = s->sum[pc.stream] * 1099511628211u + pc.data[i] + 1;
            s->bytes[pc.stream] += pc.len;
        }
        off += n;
    }
    s->consumed = size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen whole, cut;
    size_t total = 0;

    if (size < 1)
        return 0;
    read_all(data + 1, size - 1, 0, &whole);
    read_all(data + 1, size - 1, data[0], &cut);
    fuzz_assert(whole.broken == cut.broken);
    /* The header that broke it is found at the same place, however cut. */
    fuzz_assert(whole.consumed == cut.consumed);
    for (int i = 0; i < MUX_NSTREAM; i++) {
        fuzz_assert(whole.sum[i] == cut.sum[i] && whole.bytes[i] == cut.bytes[i]);
        fuzz_assert(whole.ends[i] == cut.ends[i]);
        total += whole.bytes[i] + MUX_HDR * whole.ends[i];
    }
    /* Payload never exceeds what came in. */
    fuzz_assert(total <= size - 1);
    return 0;
}
