/* lazylib.c — loading a library on first use (see lazylib.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "lazylib.h"

static int load(struct hutch_lazylib *lib)
{
    void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib->error, sizeof(lib->error),
                 "cannot load %s (%s): install it with 'apt-get install -y %s'",
                 lib->soname, e ? e : "dlopen failed", lib->package);
        return -1;
    }
    for (size_t i = 0; i < lib->n; i++) {
        void *f = dlsym(h, lib->names[i]);
        if (!f) {
            snprintf(lib->error, sizeof(lib->error),
                     "%s lacks %s: the installed %s is too old", lib->soname,
                     lib->names[i], lib->package);
            return -1;
        }
        *(void **)((char *)lib->table + lib->offsets[i]) = f;
    }
    return 1;
}

int hutch_lazylib_load(struct hutch_lazylib *lib, struct hutch_err *err)
{
    int state = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);
    if (state == 0) {
        pthread_mutex_lock(&lib->mu);
        state = lib->state;
        if (state == 0) {
            state = load(lib);
            __atomic_store_n(&lib->state, state, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lib->mu);
    }
    if (state < 0)
        return hutch_err_set(err, -ELIBACC, "%s", lib->error);
    return 0;
}
