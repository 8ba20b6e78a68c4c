/* test_buf.c — unit tests of src/buf.c (the bounded buffer), printing TAP. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "tap.h"

static void strict(void)
{
    struct hutch_buf b;

    hutch_buf_init(&b, 10);
    ok(hutch_buf_append(&b, "abcdef", 6) == 0, "append within max");
    ok(hutch_buf_append(&b, "ghijk", 5) == -E2BIG && b.len == 6,
       "append past max: -E2BIG, nothing appended");
    ok(hutch_buf_append(&b, "ghij", 4) == 0 && b.len == 10 &&
           !strcmp(b.data, "abcdefghij"),
       "append up to max exactly, NUL-terminated");
    ok(hutch_buf_append(&b, "x", 1) == -E2BIG, "at max: one more byte refused");
    ok(hutch_buf_append(&b, "", 0) == 0, "at max: nothing is still fine");
    ok(hutch_buf_write(&b, "x", 1) == -E2BIG, "the write adapter refuses too");
    ok(hutch_buf_appendf(&b, "%d", 1) == -E2BIG && b.len == 10,
       "appendf past max: -E2BIG, nothing appended");
    hutch_buf_free(&b);
    ok(b.data == NULL && b.len == 0 && b.max == 10, "free: empty, same max");
    ok(!strcmp(hutch_buf_str(&b), ""), "an empty buffer reads as \"\"");
}

static void formatted(void)
{
    struct hutch_buf b;
    char big[3000];
    size_t len;
    char *s;

    hutch_buf_init(&b, 1u << 20);
    ok(hutch_buf_appendf(&b, "%s=%d;", "a", 1) == 0 &&
           hutch_buf_appends(&b, "b") == 0 && !strcmp(b.data, "a=1;b"),
       "appendf and appends");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ok(hutch_buf_appendf(&b, "[%s]", big) == 0 && b.len == 5 + 2 + 2999,
       "appendf of more than 1024 bytes");
    s = hutch_buf_steal(&b, &len);
    ok(s && len == 5 + 2 + 2999 && s[len] == '\0' && b.data == NULL && b.len == 0,
       "steal hands the bytes over and empties the buffer");
    free(s);
    s = hutch_buf_steal(&b, &len);
    ok(s && len == 0 && !strcmp(s, ""), "steal of an empty buffer gives \"\"");
    free(s);
    hutch_buf_appends(&b, "line one\nline two");
    hutch_buf_consume(&b, 9);
    ok(b.len == 8 && !strcmp(b.data, "line two"), "consume drops a prefix");
    hutch_buf_reset(&b);
    ok(b.len == 0 && b.data && b.data[0] == '\0', "reset keeps the memory");
    hutch_buf_free(&b);
}

static void cut(void)
{
    struct hutch_buf b;

    hutch_buf_init_cut(&b, 8, "[cut]");
    ok(hutch_buf_appends(&b, "abcde") == 0, "cut mode: append within max");
    ok(hutch_buf_appends(&b, "fghij") == -E2BIG && b.cut &&
           !strcmp(b.data, "abcdefgh[cut]"),
       "cut mode: what fits, then the marker");
    ok(hutch_buf_appends(&b, "more") == -E2BIG && !strcmp(b.data, "abcdefgh[cut]"),
       "cut mode: later appends are dropped");
    hutch_buf_free(&b);

    hutch_buf_init_cut(&b, 8, "~");
    ok(hutch_buf_appendf(&b, "%s", "0123456789") == -E2BIG &&
           !strcmp(b.data, "01234567~"),
       "cut mode: appendf keeps the part that fits");
    hutch_buf_reset(&b);
    ok(!b.cut && hutch_buf_appends(&b, "12345678") == 0 && !strcmp(b.data, "12345678"),
       "cut mode: exactly max is not cut; reset undoes a cut");
    hutch_buf_free(&b);
}

static void reading(void)
{
    struct hutch_buf b;
    int p[2];
    ssize_t n;

    if (pipe(p) < 0) {
        ok(0, "pipe: %s", strerror(errno));
        return;
    }
    (void)!write(p[1], "0123456789", 10);
    close(p[1]);
    hutch_buf_init(&b, 6);
    n = hutch_buf_read(&b, p[0], 100);
    ok(n == 6 && b.len == 6 && !strcmp(b.data, "012345"), "read stops at max: %zd", n);
    ok(hutch_buf_read(&b, p[0], 100) == -E2BIG, "read at max: -E2BIG");
    hutch_buf_consume(&b, 6);
    ok(hutch_buf_read(&b, p[0], 100) == 4 && !strcmp(b.data, "6789"),
       "read after consume");
    ok(hutch_buf_read(&b, p[0], 100) == 0, "read at end of file: 0");
    ok(hutch_buf_read(&b, -1, 1) == -EBADF, "read error: -errno");
    close(p[0]);
    hutch_buf_free(&b);
}

int main(void)
{
    strict();
    formatted();
    cut();
    reading();
    return tap_done();
}
