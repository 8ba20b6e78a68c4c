/* attach.c — the pump between a container's attach stream and the four
 * socket pairs the core sees (see attach.h).
 *
 * One thread per sandbox owns the connection.  Inbound, the engine's
 * frames (8 bytes: stream, 0, 0, 0, length) carry init's stdout, which
 * holds mux frames for ctl, chan, out and err, and init's stderr, kept as
 * a diagnostic.  Outbound, what the core writes on ctl and chan becomes
 * mux frames on init's stdin (raw: the engine does not frame stdin).
 *
 * Back pressure, not memory: at most DK_PUMP_IN bytes wait per stream for
 * the core and DK_PUMP_OUT for the engine; beyond that the pump stops
 * reading the other side, which the kernel (or the engine) then holds
 * back, down to the program's own writes blocking.
 *
 * Thread rules: after dk_attach_open returns, only the pump touches the
 * connection, the buffers and the pump's ends; dk_attach_diag reads the
 * diagnostic under `mu`; dk_attach_close wakes the pump through a pipe
 * and joins it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attach.h"
#include "curl_lib.h"
#include "mux.h"

#define DK_PUMP_IN   (1u << 20)                        /* per stream, for the core */
#define DK_PUMP_OUT  (4 * (MUX_MAX_PAYLOAD + MUX_HDR)) /* for the engine */
#define DK_DIAG      2048                              /* init's stderr kept */
#define DK_FRAME_HDR 8                                 /* the engine's frame header */

struct dk_attach {
    struct dk_hijack h;
    int pump[SBIO_NSOCK]; /* the pump's ends of the socket pairs, -1 when done */
    int wake[2];          /* a byte on wake[1]: stop */
    pthread_t thread;
    int running;

    struct hutch_buf in[SBIO_NSOCK]; /* for the core, per stream */
    int in_end[SBIO_NSOCK];          /* init ended that stream */
    struct hutch_buf out;            /* frames for init's stdin */
    int out_end[SBIO_NSOCK];         /* the core closed its end (ctl, chan) */
    int conn_end;                    /* the connection is over */

    /* The engine's framing, then ours. */
    unsigned char fh[DK_FRAME_HDR];
    size_t fh_len, f_left;
    int f_stream;
    struct mux_reader mr;

    pthread_mutex_t mu;
    char diag[DK_DIAG];
    size_t diag_len;
};

static void add_diag(struct dk_attach *a, const unsigned char *p, size_t n)
{
    pthread_mutex_lock(&a->mu);
    if (n > sizeof(a->diag) - 1 - a->diag_len)
        n = sizeof(a->diag) - 1 - a->diag_len;
    memcpy(a->diag + a->diag_len, p, n);
    a->diag_len += n;
    a->diag[a->diag_len] = '\0';
    pthread_mutex_unlock(&a->mu);
}

/* The connection ended (or spoke nonsense): every stream ends for the
 * core, which then sees init as gone. */
static void conn_over(struct dk_attach *a)
{
    a->conn_end = 1;
    for (int i = 0; i < SBIO_NSOCK; i++)
        a->in_end[i] = 1;
}

/* Init's stdout: mux frames. */
static void on_stdout(struct dk_attach *a, const unsigned char *p, size_t n)
{
    struct mux_piece pc;
    int r;
    while (n && (r = mux_feed(&a->mr, &p, &n, &pc)) != 0) {
        if (r < 0) {
            add_diag(
                a, (const unsigned char *)"(hutch: the sandbox's init sent no frames)",
                42);
            conn_over(a);
            return;
        }
        if (!pc.data)
            a->in_end[pc.stream] = 1;
        else if (!a->in_end[pc.stream] &&
                 hutch_buf_append(&a->in[pc.stream], pc.data, pc.len) < 0) {
            /* Cannot happen: reading stops before DK_PUMP_IN is reached by
             * more than one read's worth, and the buffer's room is twice it. */
            conn_over(a);
            return;
        }
    }
}

/* Bytes from the connection, in the engine's frames. */
static void on_bytes(struct dk_attach *a, const unsigned char *p, size_t n)
{
    while (n && !a->conn_end) {
        if (a->fh_len < DK_FRAME_HDR) {
            size_t take = DK_FRAME_HDR - a->fh_len < n ? DK_FRAME_HDR - a->fh_len : n;
            memcpy(a->fh + a->fh_len, p, take);
            a->fh_len += take;
            p += take;
            n -= take;
            if (a->fh_len == DK_FRAME_HDR) {
                a->f_stream = a->fh[0];
                a->f_left = (size_t)a->fh[4] << 24 | (size_t)a->fh[5] << 16 |
                            (size_t)a->fh[6] << 8 | a->fh[7];
                if (a->f_left == 0)
                    a->fh_len = 0;
            }
            continue;
        }
        {
            size_t take = n < a->f_left ? n : a->f_left;
            if (a->f_stream == 1)
                on_stdout(a, p, take);
            else if (a->f_stream == 2)
                add_diag(a, p, take);
            p += take;
            n -= take;
            a->f_left -= take;
            if (a->f_left == 0)
                a->fh_len = 0;
        }
    }
}

static int inbound_full(const struct dk_attach *a)
{
    for (int i = 0; i < SBIO_NSOCK; i++)
        if (a->in[i].len >= DK_PUMP_IN)
            return 1;
    return 0;
}

/* Reads the connection until it would block, the core's side is full, or
 * it ends. */
static void read_conn(struct dk_attach *a)
{
    unsigned char buf[64 << 10];
    while (!a->conn_end && !inbound_full(a)) {
        size_t got = 0;
        CURLcode cc = curl_easy_recv(a->h.curl, buf, sizeof(buf), &got);
        if (cc == CURLE_AGAIN)
            return;
        if (cc != CURLE_OK || got == 0) {
            conn_over(a);
            return;
        }
        on_bytes(a, buf, got);
    }
}

static void write_conn(struct dk_attach *a)
{
    while (a->out.len && !a->conn_end) {
        size_t sent = 0;
        CURLcode cc = curl_easy_send(a->h.curl, a->out.data, a->out.len, &sent);
        if (cc == CURLE_AGAIN)
            return;
        if (cc != CURLE_OK) {
            conn_over(a);
            return;
        }
        hutch_buf_consume(&a->out, sent);
    }
}

/* What waits for the core goes to the pump's ends; an ended stream whose
 * bytes are all delivered is shut for writing, so the core reads its end. */
static void deliver(struct dk_attach *a)
{
    /* ctl last, and only once the others are delivered: init says "exit"
     * after the runner's last bytes, and the core, told of the exit, takes
     * what the pipes hold as all the program wrote. */
    static const int order[SBIO_NSOCK] = {SBIO_CHAN, SBIO_OUT, SBIO_ERR, SBIO_CTL};
    for (int k = 0; k < SBIO_NSOCK; k++) {
        int i = order[k];
        if (a->pump[i] < 0)
            continue;
        if (i == SBIO_CTL &&
            (a->in[SBIO_CHAN].len || a->in[SBIO_OUT].len || a->in[SBIO_ERR].len))
            continue;
        while (a->in[i].len) {
            ssize_t w = send(a->pump[i], a->in[i].data, a->in[i].len,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno == EAGAIN)
                break;
            if (w <= 0) {
                hutch_buf_reset(&a->in[i]); /* the core closed its end */
                break;
            }
            hutch_buf_consume(&a->in[i], (size_t)w);
        }
        if (a->in_end[i] && !a->in[i].len && a->in_end[i] != 2) {
            shutdown(a->pump[i], SHUT_WR);
            a->in_end[i] = 2;
        }
    }
}

/* What the core wrote on ctl or chan, framed for init. */
static void take_outbound(struct dk_attach *a, int i)
{
    unsigned char buf[MUX_MAX_PAYLOAD], hdr[MUX_HDR];
    ssize_t n = recv(a->pump[i], buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        a->out_end[i] = 1; /* the core is done writing: init's stream ends */
        n = 0;
    }
    mux_header(hdr, i, (uint32_t)n);
    hutch_buf_append(&a->out, hdr, sizeof(hdr));
    if (n)
        hutch_buf_append(&a->out, buf, (size_t)n);
}

static void *pump(void *arg)
{
    struct dk_attach *a = arg;

    if (a->h.extra_len)
        on_bytes(a, (const unsigned char *)a->h.extra, a->h.extra_len);
    for (;;) {
        struct pollfd p[2 + SBIO_NSOCK];
        int idx[2 + SBIO_NSOCK], n = 0;
        short conn_ev = 0;

        read_conn(a);
        deliver(a);
        write_conn(a);

        idx[n] = -1;
        p[n++] = (struct pollfd){a->wake[0], POLLIN, 0};
        if (!a->conn_end && !inbound_full(a))
            conn_ev |= POLLIN;
        if (!a->conn_end && a->out.len)
            conn_ev |= POLLOUT;
        if (conn_ev) {
            idx[n] = -2;
            p[n++] = (struct pollfd){a->h.sock, conn_ev, 0};
        }
        for (int i = 0; i < SBIO_NSOCK; i++) {
            short ev = 0;
            if (a->pump[i] < 0)
                continue;
            if (a->in[i].len)
                ev |= POLLOUT;
            if ((i == SBIO_CTL || i == SBIO_CHAN) && !a->out_end[i] &&
                a->out.len + MUX_HDR + MUX_MAX_PAYLOAD <= DK_PUMP_OUT)
                ev |= POLLIN;
            if (ev) {
                idx[n] = i;
                p[n++] = (struct pollfd){a->pump[i], ev, 0};
            }
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break; /* dk_attach_close */
        for (int k = 1; k < n; k++)
            if (idx[k] >= 0 && (p[k].revents & (POLLIN | POLLHUP | POLLERR)) &&
                !a->out_end[idx[k]] && (idx[k] == SBIO_CTL || idx[k] == SBIO_CHAN))
                take_outbound(a, idx[k]);
    }
    return NULL;
}

int dk_attach_open(struct dk_attach **out, const struct dk_api *api, const char *id,
                   struct sbio *io, struct hutch_err *err)
{
    struct dk_attach *a = calloc(1, sizeof(*a));
    int core[SBIO_NSOCK];
    char path[160];
    int r;

    *out = NULL;
    if (!a)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&a->mu, NULL);
    a->wake[0] = a->wake[1] = -1;
    for (int i = 0; i < SBIO_NSOCK; i++) {
        a->pump[i] = core[i] = -1;
        /* Room for what one read adds beyond the mark where reading stops. */
        hutch_buf_init(&a->in[i], 2 * DK_PUMP_IN + (64u << 10));
    }
    hutch_buf_init(&a->out, DK_PUMP_OUT + MUX_HDR);
    for (int i = 0; i < SBIO_NSOCK; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
            r = hutch_err_set(err, -errno, "socketpair: %s", strerror(errno));
            goto fail;
        }
        core[i] = sv[0];
        a->pump[i] = sv[1];
        fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    }
    if (pipe2(a->wake, O_CLOEXEC) < 0) {
        r = hutch_err_set(err, -errno, "pipe: %s", strerror(errno));
        goto fail;
    }
    snprintf(path, sizeof(path),
             "/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1", id);
    r = dk_api_hijack(api, path, &a->h, err);
    if (r < 0)
        goto fail;
    r = -pthread_create(&a->thread, NULL, pump, a);
    if (r < 0) {
        hutch_err_set(err, r, "starting the attach pump: %s", strerror(-r));
        goto fail;
    }
    a->running = 1;
    sbio_adopt(io, core);
    *out = a;
    return 0;
fail:
    for (int i = 0; i < SBIO_NSOCK; i++)
        if (core[i] >= 0)
            close(core[i]);
    dk_attach_close(a);
    return r;
}

void dk_attach_diag(struct dk_attach *a, char *out, size_t len)
{
    out[0] = '\0';
    if (!a || !len)
        return;
    pthread_mutex_lock(&a->mu);
    snprintf(out, len, "%s", a->diag);
    pthread_mutex_unlock(&a->mu);
    /* Trailing line ends say nothing. */
    for (size_t n = strlen(out); n && (out[n - 1] == '\n' || out[n - 1] == '\r');)
        out[--n] = '\0';
}

void dk_attach_close(struct dk_attach *a)
{
    if (!a)
        return;
    if (a->running) {
        char b = 1;
        while (write(a->wake[1], &b, 1) < 0 && errno == EINTR)
            ;
        pthread_join(a->thread, NULL);
    }
    dk_api_hijack_close(&a->h);
    for (int i = 0; i < SBIO_NSOCK; i++) {
        if (a->pump[i] >= 0)
            close(a->pump[i]);
        hutch_buf_free(&a->in[i]);
    }
    hutch_buf_free(&a->out);
    if (a->wake[0] >= 0)
        close(a->wake[0]);
    if (a->wake[1] >= 0)
        close(a->wake[1]);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
