/* mhd_lib.h — libmicrohttpd, loaded on first use.
 *
 * It pulls in GnuTLS and its dependencies: about 2 ms at every hutch start,
 * for a library only `hutch serve --http` uses.  Same scheme as
 * archive_lib.h: include this instead of <microhttpd.h>, call
 * hutch_libmhd_load() before the first MHD_* call. */
#ifndef HUTCH_MHD_LIB_H
#define HUTCH_MHD_LIB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "hutch-executor.h"

#define HUTCH_LIBMHD_SONAME "libmicrohttpd.so.12"

#define HUTCH_LIBMHD_FUNCS(X)                                                          \
    X(MHD_start_daemon)                                                                \
    X(MHD_stop_daemon)                                                                 \
    X(MHD_add_connection)                                                              \
    X(MHD_get_daemon_info)                                                             \
    X(MHD_get_connection_info)                                                         \
    X(MHD_get_connection_values)                                                       \
    X(MHD_lookup_connection_value)                                                     \
    X(MHD_set_connection_option)                                                       \
    X(MHD_create_response_from_buffer)                                                 \
    X(MHD_create_response_from_callback)                                               \
    X(MHD_add_response_header)                                                         \
    X(MHD_queue_response)                                                              \
    X(MHD_destroy_response)

#define HUTCH_MHD_MEMBER(name) __typeof__(&name) name;
struct hutch_libmhd {
    HUTCH_LIBMHD_FUNCS(HUTCH_MHD_MEMBER)
};
#undef HUTCH_MHD_MEMBER

extern struct hutch_libmhd hutch_lm;

/* Load libmicrohttpd once (thread-safe); 0, or an error saying how to fix it. */
int hutch_libmhd_load(struct hutch_err *err);

#ifndef HUTCH_LIBMHD_IMPL
#define MHD_start_daemon                  hutch_lm.MHD_start_daemon
#define MHD_stop_daemon                   hutch_lm.MHD_stop_daemon
#define MHD_add_connection                hutch_lm.MHD_add_connection
#define MHD_get_daemon_info               hutch_lm.MHD_get_daemon_info
#define MHD_get_connection_info           hutch_lm.MHD_get_connection_info
#define MHD_get_connection_values         hutch_lm.MHD_get_connection_values
#define MHD_lookup_connection_value       hutch_lm.MHD_lookup_connection_value
#define MHD_set_connection_option         hutch_lm.MHD_set_connection_option
#define MHD_create_response_from_buffer   hutch_lm.MHD_create_response_from_buffer
#define MHD_create_response_from_callback hutch_lm.MHD_create_response_from_callback
#define MHD_add_response_header           hutch_lm.MHD_add_response_header
#define MHD_queue_response                hutch_lm.MHD_queue_response
#define MHD_destroy_response              hutch_lm.MHD_destroy_response
#endif

#endif
