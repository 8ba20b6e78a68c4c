/* archive_lib.h — libarchive, loaded on first use.
 *
 * Linked normally, libarchive costs every hutch process about 2.5 ms at
 * start (it pulls in libxml2, ICU and libstdc++), a sixth of a whole cold
 * execution, while most executions carry no files at all.  So the core
 * dlopen()s it the first time a tar is read or written.  Files that use
 * libarchive include this header instead of <archive.h> and call it through
 * the table by name, hutch_la.archive_read_new() and so on (no macro hides
 * the table, so grep and gdb see the calls), after a successful
 * hutch_libarchive_load(). */
#ifndef HUTCH_ARCHIVE_LIB_H
#define HUTCH_ARCHIVE_LIB_H

#include <archive.h>
#include <archive_entry.h>

#include "hutch-executor.h"

#define HUTCH_LIBARCHIVE_SONAME "libarchive.so.13"

#define HUTCH_LIBARCHIVE_FUNCS(X)                                                      \
    X(archive_error_string)                                                            \
    X(archive_set_error)                                                               \
    X(archive_read_new)                                                                \
    X(archive_read_free)                                                               \
    X(archive_read_support_format_tar)                                                 \
    X(archive_read_open_memory)                                                        \
    X(archive_read_next_header)                                                        \
    X(archive_read_data)                                                               \
    X(archive_read_data_skip)                                                          \
    X(archive_write_new)                                                               \
    X(archive_write_free)                                                              \
    X(archive_write_close)                                                             \
    X(archive_write_open)                                                              \
    X(archive_write_header)                                                            \
    X(archive_write_data)                                                              \
    X(archive_write_finish_entry)                                                      \
    X(archive_write_set_format_pax_restricted)                                         \
    X(archive_write_set_bytes_in_last_block)                                           \
    X(archive_entry_new)                                                               \
    X(archive_entry_free)                                                              \
    X(archive_entry_pathname)                                                          \
    X(archive_entry_pathname_utf8)                                                     \
    X(archive_entry_hardlink)                                                          \
    X(archive_entry_filetype)                                                          \
    X(archive_entry_mode)                                                              \
    X(archive_entry_perm)                                                              \
    X(archive_entry_mtime)                                                             \
    X(archive_entry_set_uid)                                                           \
    X(archive_entry_set_gid)                                                           \
    X(archive_entry_size)                                                              \
    X(archive_entry_set_pathname)                                                      \
    X(archive_entry_set_size)                                                          \
    X(archive_entry_set_filetype)                                                      \
    X(archive_entry_set_perm)                                                          \
    X(archive_entry_set_mtime)

#define HUTCH_LA_MEMBER(name) __typeof__(&name) name;
struct hutch_libarchive {
    HUTCH_LIBARCHIVE_FUNCS(HUTCH_LA_MEMBER)
};
#undef HUTCH_LA_MEMBER

extern struct hutch_libarchive hutch_la;

/* Load libarchive once (thread-safe); 0, or an error saying how to fix it. */
int hutch_libarchive_load(struct hutch_err *err);

#endif
