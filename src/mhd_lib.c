/* mhd_lib.c — loads libmicrohttpd on first use (see mhd_lib.h and lazylib.h). */
#define HUTCH_LIBMHD_IMPL
#include <stddef.h>

#include "lazylib.h"
#include "mhd_lib.h"

struct hutch_libmhd hutch_lm;

#define NAME(name)   #name,
#define OFFSET(name) offsetof(struct hutch_libmhd, name),
static const char *const names[] = {HUTCH_LIBMHD_FUNCS(NAME)};
static const size_t offsets[] = {HUTCH_LIBMHD_FUNCS(OFFSET)};

static struct hutch_lazylib lib = {
    .soname = HUTCH_LIBMHD_SONAME,
    .package = "libmicrohttpd12",
    .names = names,
    .offsets = offsets,
    .n = sizeof(names) / sizeof(names[0]),
    .table = &hutch_lm,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

int hutch_libmhd_load(struct hutch_err *err)
{
    return hutch_lazylib_load(&lib, err);
}
