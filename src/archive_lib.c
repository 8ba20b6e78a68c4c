/* archive_lib.c — loads libarchive on first use (see archive_lib.h). */
#define HUTCH_LIBARCHIVE_IMPL
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "archive_lib.h"

struct hutch_libarchive hutch_la;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void)
{
    void *h = dlopen(HUTCH_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(
            load_error, sizeof(load_error),
            "cannot load %s (%s): install it with 'apt-get install -y libarchive13'",
            HUTCH_LIBARCHIVE_SONAME, e ? e : "dlopen failed");
        return;
    }
#define HUTCH_LA_LOAD(name)                                                            \
    if (!load_error[0] && !(*(void **)&hutch_la.name = dlsym(h, #name)))               \
        snprintf(load_error, sizeof(load_error), "%s lacks %s: libarchive is too old", \
                 HUTCH_LIBARCHIVE_SONAME, #name);
    HUTCH_LIBARCHIVE_FUNCS(HUTCH_LA_LOAD)
#undef HUTCH_LA_LOAD
}

int hutch_libarchive_load(struct hutch_err *err)
{
    pthread_once(&once, load);
    if (load_error[0])
        return hutch_err_set(err, -ELIBACC, "%s", load_error);
    return 0;
}
