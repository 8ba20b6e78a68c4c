/* curl_lib.c — loads libcurl on first use (see curl_lib.h). */
#define HUTCH_LIBCURL_IMPL
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "curl_lib.h"

struct hutch_libcurl hutch_lc;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void load(void)
{
    void *h = dlopen(HUTCH_LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_error, sizeof(load_error),
                 "cannot load %s (%s): install it with 'apt-get install -y libcurl4'",
                 HUTCH_LIBCURL_SONAME, e ? e : "dlopen failed");
        return;
    }
#define HUTCH_LC_LOAD(name)                                                            \
    if (!load_error[0] && !(*(void **)&hutch_lc.name = dlsym(h, #name)))               \
        snprintf(load_error, sizeof(load_error), "%s lacks %s: libcurl is too old",    \
                 HUTCH_LIBCURL_SONAME, #name);
    HUTCH_LIBCURL_FUNCS(HUTCH_LC_LOAD)
#undef HUTCH_LC_LOAD
}

int hutch_libcurl_load(struct hutch_err *err)
{
    pthread_once(&once, load);
    if (load_error[0])
        return hutch_err_set(err, -ELIBACC, "%s", load_error);
    return 0;
}
