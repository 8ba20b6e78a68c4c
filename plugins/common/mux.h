/* mux.h — the frames hutch-init and the Docker executor exchange over the
 * container's attach stream (init's stdin and stdout), so that nothing of
 * the sandbox's plumbing is a path on hutch's host and the same bytes
 * travel over a local unix socket or a remote engine's TCP+TLS connection.
 *
 *   frame = stream (1 byte) | length (4 bytes, big endian) | payload
 *
 * Streams are those of sbio.h: ctl (init's control lines, both ways), chan
 * (the runner's wire protocol, both ways), out and err (the program's
 * stdout and stderr, init to plugin).  A frame of length 0 is the end of
 * its stream in that direction.  A payload is at most MUX_MAX_PAYLOAD
 * bytes; a larger length, or an unknown stream, is a broken peer.
 *
 * init frames what the program writes, so the program cannot forge a frame
 * of another stream: it never holds init's stdout (another uid, and init is
 * not dumpable), only the socket pairs init reads.
 *
 * Only the format lives here: hutch-init (plugins/init/init.c) and the
 * Docker executor's pump (plugins/docker/attach.c) each move the bytes. */
#ifndef HUTCH_MUX_H
#define HUTCH_MUX_H

#include <stddef.h>
#include <stdint.h>

#define MUX_HDR         5
#define MUX_MAX_PAYLOAD (64u << 10)

/* The streams (the same numbers as sbio.h's SBIO_CTL … SBIO_ERR). */
enum { MUX_CTL, MUX_CHAN, MUX_OUT, MUX_ERR, MUX_NSTREAM };

/* Writes a frame header for `len` bytes of `stream` into hdr. */
void mux_header(unsigned char hdr[MUX_HDR], int stream, uint32_t len);

/* An incremental reader of frames. */
struct mux_reader {
    unsigned char hdr[MUX_HDR];
    size_t hdr_len; /* header bytes gathered */
    int stream;     /* of the frame being read, when hdr_len == MUX_HDR */
    uint32_t left;  /* payload bytes of that frame still to come */
    int broken;     /* a bad header was seen: nothing more is read */
};

/* What mux_feed found. */
struct mux_piece {
    int stream;
    const unsigned char *data; /* NULL with len 0: the end of the stream */
    size_t len;
};

/* Consumes bytes from *p (at most *n), and describes at most one piece of
 * payload (or one end of stream) in *out.  Returns 1 with *out filled, 0
 * when the bytes given are used up without a piece, -1 when the input is
 * not frames (r->broken is then set).  *p and *n advance past what was
 * consumed; call again while *n > 0. */
int mux_feed(struct mux_reader *r, const unsigned char **p, size_t *n,
             struct mux_piece *out);

#endif
