/* mux.c — the frame format of mux.h. */
#include "mux.h"

void mux_header(unsigned char hdr[MUX_HDR], int stream, uint32_t len)
{
    hdr[0] = (unsigned char)stream;
    hdr[1] = (unsigned char)(len >> 24);
    hdr[2] = (unsigned char)(len >> 16);
    hdr[3] = (unsigned char)(len >> 8);
    hdr[4] = (unsigned char)len;
}

int mux_feed(struct mux_reader *r, const unsigned char **p, size_t *n,
             struct mux_piece *out)
{
    if (r->broken)
        return -1;
    while (*n > 0) {
        if (r->hdr_len < MUX_HDR) {
            r->hdr[r->hdr_len++] = **p;
            (*p)++;
            (*n)--;
            if (r->hdr_len < MUX_HDR)
                continue;
            r->stream = r->hdr[0];
            r->left = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 |
                      (uint32_t)r->hdr[3] << 8 | r->hdr[4];
            if (r->stream >= MUX_NSTREAM || r->left > MUX_MAX_PAYLOAD) {
                r->broken = 1;
                return -1;
            }
            if (r->left == 0) {
                r->hdr_len = 0;
                *out = (struct mux_piece){r->stream, NULL, 0};
                return 1;
            }
            continue;
        }
        {
            size_t take = *n < r->left ? *n : r->left;
            *out = (struct mux_piece){r->stream, *p, take};
            *p += take;
            *n -= take;
            r->left -= (uint32_t)take;
            if (r->left == 0)
                r->hdr_len = 0;
            return 1;
        }
    }
    return 0;
}
