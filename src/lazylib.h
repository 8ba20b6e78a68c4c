/* lazylib.h — dlopen() a shared library on first use and fill a table of
 * its functions.  archive_lib, curl_lib and mhd_lib describe their library
 * with one of these; the loading, the locking and the error messages live
 * here once. */
#ifndef HUTCH_LAZYLIB_H
#define HUTCH_LAZYLIB_H

#include <pthread.h>
#include <stddef.h>

#include "hutch-executor.h"

struct hutch_lazylib {
    const char *soname;       /* "libarchive.so.13" */
    const char *package;      /* the Debian package that ships it */
    const char *const *names; /* symbols, in table order */
    const size_t *offsets;    /* where each pointer goes in `table` */
    size_t n;
    void *table;        /* a struct of function pointers */
    pthread_mutex_t mu; /* PTHREAD_MUTEX_INITIALIZER */
    int state;          /* 0 not tried, 1 loaded, -1 failed (atomic) */
    char error[512];
};

/* Load once (thread-safe; later calls cost an atomic read).  0, or the
 * same error every time, saying which package to install. */
int hutch_lazylib_load(struct hutch_lazylib *lib, struct hutch_err *err);

#endif
