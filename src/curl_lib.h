/* curl_lib.h — libcurl, loaded on first use.
 *
 * libcurl and what it links (TLS, HTTP/2, SSH, LDAP, Kerberos…) cost every
 * hutch process about 3 ms at start, yet only HTTP upstreams use it.  Same
 * scheme as archive_lib.h: include this instead of <curl/curl.h>, call
 * hutch_libcurl_load() before the first curl_* call. */
#ifndef HUTCH_CURL_LIB_H
#define HUTCH_CURL_LIB_H

/* The type-checking macros would wrap our function pointers. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "hutch-executor.h"

#define HUTCH_LIBCURL_SONAME "libcurl.so.4"

#define HUTCH_LIBCURL_FUNCS(X)                                                         \
    X(curl_global_init)                                                                \
    X(curl_easy_init)                                                                  \
    X(curl_easy_cleanup)                                                               \
    X(curl_easy_reset)                                                                 \
    X(curl_easy_setopt)                                                                \
    X(curl_easy_perform)                                                               \
    X(curl_easy_getinfo)                                                               \
    X(curl_easy_strerror)                                                              \
    X(curl_easy_send)                                                                  \
    X(curl_easy_recv)                                                                  \
    X(curl_multi_init)                                                                 \
    X(curl_multi_cleanup)                                                              \
    X(curl_multi_add_handle)                                                           \
    X(curl_multi_remove_handle)                                                        \
    X(curl_multi_perform)                                                              \
    X(curl_multi_poll)                                                                 \
    X(curl_multi_info_read)                                                            \
    X(curl_slist_append)                                                               \
    X(curl_slist_free_all)

#define HUTCH_CURL_MEMBER(name) __typeof__(&name) name;
struct hutch_libcurl {
    HUTCH_LIBCURL_FUNCS(HUTCH_CURL_MEMBER)
};
#undef HUTCH_CURL_MEMBER

extern struct hutch_libcurl hutch_lc;

/* Load libcurl once (thread-safe); 0, or an error saying how to fix it. */
int hutch_libcurl_load(struct hutch_err *err);

#ifndef HUTCH_LIBCURL_IMPL
/* curl.h's argument-count guards, replaced by the pointers below. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init         hutch_lc.curl_global_init
#define curl_easy_init           hutch_lc.curl_easy_init
#define curl_easy_cleanup        hutch_lc.curl_easy_cleanup
#define curl_easy_reset          hutch_lc.curl_easy_reset
#define curl_easy_setopt         hutch_lc.curl_easy_setopt
#define curl_easy_perform        hutch_lc.curl_easy_perform
#define curl_easy_getinfo        hutch_lc.curl_easy_getinfo
#define curl_easy_strerror       hutch_lc.curl_easy_strerror
#define curl_easy_send           hutch_lc.curl_easy_send
#define curl_easy_recv           hutch_lc.curl_easy_recv
#define curl_multi_init          hutch_lc.curl_multi_init
#define curl_multi_cleanup       hutch_lc.curl_multi_cleanup
#define curl_multi_add_handle    hutch_lc.curl_multi_add_handle
#define curl_multi_remove_handle hutch_lc.curl_multi_remove_handle
#define curl_multi_perform       hutch_lc.curl_multi_perform
#define curl_multi_poll          hutch_lc.curl_multi_poll
#define curl_multi_info_read     hutch_lc.curl_multi_info_read
#define curl_slist_append        hutch_lc.curl_slist_append
#define curl_slist_free_all      hutch_lc.curl_slist_free_all
#endif

#endif
