/* archive_lib.c — loads libarchive on first use (see archive_lib.h and lazylib.h). */
#include <stddef.h>

#include "archive_lib.h"
#include "lazylib.h"

struct hutch_libarchive hutch_la;

#define NAME(name)   #name,
#define OFFSET(name) offsetof(struct hutch_libarchive, name),
static const char *const names[] = {HUTCH_LIBARCHIVE_FUNCS(NAME)};
static const size_t offsets[] = {HUTCH_LIBARCHIVE_FUNCS(OFFSET)};

static struct hutch_lazylib lib = {
    .soname = HUTCH_LIBARCHIVE_SONAME,
    .package = "libarchive13",
    .names = names,
    .offsets = offsets,
    .n = sizeof(names) / sizeof(names[0]),
    .table = &hutch_la,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

int hutch_libarchive_load(struct hutch_err *err)
{
    return hutch_lazylib_load(&lib, err);
}
