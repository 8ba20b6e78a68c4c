/* hutch_archive.h — tar streams in both directions (archive.c, the judge;
 * archive_extract.c, the unpacker; archive_pack.c, the writers; on top of
 * libarchive, whose own header is <archive.h>).
 *
 * hutch_archive_extract() is the one safe unpacker: everything that comes
 * out of a sandbox goes through it, and so does what goes in. */
#ifndef HUTCH_ARCHIVE_H
#define HUTCH_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

/* Default limits for tars going into / coming out of a sandbox. */
void hutch_archive_limits_in(struct hutch_archive_limits *lim);
void hutch_archive_limits_out(struct hutch_archive_limits *lim);

/* Unpack an uncompressed tar held in memory under dest_dir (created if
 * missing, parents must exist).  Rejects: absolute paths, "..", empty or
 * over-long components, names with control characters (C0, DEL, C1),
 * symlinks, hardlinks, devices, fifos, sockets,
 * setuid/setgid/sticky bits, compressed or non-tar input, any cap in `lim`
 * exceeded, an entry that collides with a symlink or a file of another type
 * already at dest_dir.  Every entry is checked before the first byte is
 * written; data goes to a staging directory inside dest_dir and is moved
 * into place only when the whole archive unpacked.  Never follows a
 * symlink.  Does not touch the umask.  Files get 0644 (0755 when any x bit
 * was set), directories 0755.  On error err says which entry and why, and
 * dest_dir holds what it held before. */
/* More precisely (archive_extract.c): zero bytes of input is refused; a tar
 * with no entries (the 1024-byte end marker alone) is accepted and only
 * creates dest_dir.  Missing parent directories of an entry are created
 * 0755 and count against max_entries.  "./x" means "x"; a directory entry
 * "." or "./" is skipped.  A path may appear only once; a regular file
 * already in dest_dir is replaced, a directory already there is merged
 * into.  dest_dir itself may be reached through symlinks (it is the
 * caller's path).  A NULL `lim` means hutch_archive_limits_out(). */
int hutch_archive_extract(const void *tar, size_t len, const char *dest_dir,
                          const struct hutch_archive_limits *lim,
                          struct hutch_err *err);

/* Pack the tree under `dir` (regular files and directories; symlinks and
 * special files skipped with a warning through `log` when non-NULL) as an
 * uncompressed ustar/pax stream to `write`, paths relative to dir.  Never
 * follows a symlink, including for `dir` itself' s components below it. */
/* Note (archive_pack.c): there is no `log` parameter, so skipped entries
 * are skipped silently.  A missing `dir` gives an empty tar; `dir` being a
 * symlink is refused (-ELOOP).  Entries are sorted by name, without "./".
 * A NULL `lim` means hutch_archive_limits_out(). */
int hutch_archive_pack_dir(const char *dir, hutch_write_fn write, void *arg,
                           const struct hutch_archive_limits *lim,
                           struct hutch_err *err);

/* Re-pack an untrusted tar held in memory as pack_dir would have packed
 * the tree it describes: regular files and directories, "./" prefixes
 * dropped, links and special files skipped, modes 0644/0755, paths and caps
 * checked, every entry owned by uid:gid.  What it keeps obeys the judge's
 * rules about the whole set (no path twice, no file used as a directory),
 * checked before anything is written: what it writes, the judge accepts.  A NULL `lim`
 * means hutch_archive_limits_out(). */
int hutch_archive_filter(const void *tar, size_t len, hutch_write_fn write, void *arg,
                         const struct hutch_archive_limits *lim, uint32_t uid,
                         uint32_t gid, struct hutch_err *err);

/* Building an archive in memory from host files and literal buffers.
 * max_bytes caps the whole stream (headers included); entries, path length
 * and depth follow hutch_archive_limits_in().  Modes are normalized to
 * 0644/0755.  Parent directories are not added: extract creates them.
 * hutch_tar_finish() refuses what extract would (a path added twice, a file
 * used as a directory), so a finished tar unpacks. */
struct hutch_tar;
/* caller frees with hutch_tar_free */
int hutch_tar_new(struct hutch_tar **t, size_t max_bytes, struct hutch_err *err);
/* Add a literal file at relative path `dest`. */
int hutch_tar_add_bytes(struct hutch_tar *t, const char *dest, const void *data,
                        size_t len, unsigned mode, struct hutch_err *err);
/* Add the host file or directory tree `src` at relative path `dest`.  The
 * source is read with O_NOFOLLOW below `src`; only regular files and
 * directories are taken. */
int hutch_tar_add_path(struct hutch_tar *t, const char *src, const char *dest,
                       struct hutch_err *err);
/* Finish the stream; *data stays owned by t. */
int hutch_tar_finish(struct hutch_tar *t, const void **data, size_t *len,
                     struct hutch_err *err);
void hutch_tar_free(struct hutch_tar *t);

/* The one judge of an untrusted tar held in memory, shared by every reader
 * (extract, list, read_files, and filter as a packer): 0 when extract would
 * take it (the rules above, from the headers alone; nothing is written),
 * else the reason in err.  Then calls fn, when not NULL, for each entry in
 * tar order: its path (relative, without "./" or a trailing "/"), whether it
 * is a directory, and the size its header declares; fn returning non-zero
 * stops the listing.  Parent directories no entry names are not listed.  A
 * NULL `lim` means hutch_archive_limits_out(). */
typedef int (*hutch_tar_entry_fn)(void *arg, const char *path, int is_dir,
                                  uint64_t size);
int hutch_archive_list(const void *tar, size_t len,
                       const struct hutch_archive_limits *lim, hutch_tar_entry_fn fn,
                       void *arg, struct hutch_err *err);

/* Calls fn for each regular file of an untrusted tar held in memory, after
 * the judge (hutch_archive_list, default limits) accepted it: its path (as
 * listed), its bytes (NUL-terminated) and size.  Files over max_file bytes
 * are passed with data NULL.  Stops early when fn returns non-zero.  No
 * bytes (len 0) mean no files; a tar the judge refuses gives no call and
 * the reason in err. */
typedef int (*hutch_tar_file_fn)(void *arg, const char *path, const void *data,
                                 size_t size);
int hutch_archive_read_files(const void *tar, size_t len, size_t max_file,
                             hutch_tar_file_fn fn, void *arg, struct hutch_err *err);

/* A relative path acceptable inside /work: not empty, not absolute, no "."
 * or ".." components, no empty components, within the caps.  0 or -EINVAL
 * with the reason in err. */
int hutch_archive_check_relpath(const char *path,
                                const struct hutch_archive_limits *lim,
                                struct hutch_err *err);

#endif
