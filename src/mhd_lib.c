/* mhd_lib.c — loads libmicrohttpd on first use (see mhd_lib.h). */
#define HUTCH_LIBMHD_IMPL
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "mhd_lib.h"

struct hutch_libmhd hutch_lm;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void)
{
    void *h = dlopen(HUTCH_LIBMHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(
            load_error, sizeof(load_error),
            "cannot load %s (%s): install it with 'apt-get install -y libmicrohttpd12'",
            HUTCH_LIBMHD_SONAME, e ? e : "dlopen failed");
        return;
    }
#define HUTCH_LM_LOAD(name)                                                            \
    if (!load_error[0] && !(*(void **)&hutch_lm.name = dlsym(h, #name)))               \
        snprintf(load_error, sizeof(load_error),                                       \
                 "%s lacks %s: libmicrohttpd is too old", HUTCH_LIBMHD_SONAME, #name);
    HUTCH_LIBMHD_FUNCS(HUTCH_LM_LOAD)
#undef HUTCH_LM_LOAD
}

int hutch_libmhd_load(struct hutch_err *err)
{
    pthread_once(&once, load);
    if (load_error[0])
        return hutch_err_set(err, -ELIBACC, "%s", load_error);
    return 0;
}
