/* curl_lib.c — loads libcurl on first use (see curl_lib.h and lazylib.h). */
#define HUTCH_LIBCURL_IMPL
#include <stddef.h>

#include "curl_lib.h"
#include "lazylib.h"

struct hutch_libcurl hutch_lc;

#define NAME(name)   #name,
#define OFFSET(name) offsetof(struct hutch_libcurl, name),
static const char *const names[] = {HUTCH_LIBCURL_FUNCS(NAME)};
static const size_t offsets[] = {HUTCH_LIBCURL_FUNCS(OFFSET)};

static struct hutch_lazylib lib = {
    .soname = HUTCH_LIBCURL_SONAME,
    .package = "libcurl4",
    .names = names,
    .offsets = offsets,
    .n = sizeof(names) / sizeof(names[0]),
    .table = &hutch_lc,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

int hutch_libcurl_load(struct hutch_err *err)
{
    return hutch_lazylib_load(&lib, err);
}
