/* fuzz_tar.c — untrusted tars (archive*.c): the judge (hutch_archive_list),
 * the unpacker (hutch_archive_extract, into a fresh directory removed after
 * each input), the re-packer (hutch_archive_filter) and hutch_archive_read_files.
 *
 * Input: one byte of options (bit 0: tight limits, 4 entries of at most 64
 * bytes in all, paths of 32 bytes and 3 components, instead of the
 * defaults), then the tar.  Checked beyond "no crash": the judge and the
 * unpacker agree; a refused extract leaves the destination empty; what
 * the filter writes (it drops links and special files the judge refuses)
 * is a tar the judge accepts; read_files sees no more files than the judge
 * listed. */
#include <dirent.h>
#include <sys/stat.h>

#include "buf.h"
#include "caps.h"
#include "fuzz.h"
#include "hutch_archive.h"

static char dest[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup(1);
    snprintf(dest, sizeof(dest), "%s/out", fuzz_dir);
    return 0;
}

struct counts {
    size_t entries, files;
};

static int count_entry(void *arg, const char *path, int is_dir, uint64_t size)
{
    struct counts *c = arg;
    fuzz_assert(path && path[0] && path[0] != '/');
    (void)size;
    c->entries++;
    c->files += !is_dir;
    return 0;
}

static int count_file(void *arg, const char *path, const void *data, size_t size)
{
    struct counts *c = arg;
    fuzz_assert(path && path[0]);
    fuzz_assert(!data || ((const char *)data)[size] == '\0');
    c->files++;
    return 0;
}

static int to_buf(void *arg, const void *p, size_t n)
{
    return hutch_buf_append(arg, p, n);
}

/* 1 when dir is missing or empty. */
static int empty_or_missing(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int empty = 1;

    if (!d)
        return errno == ENOENT;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = 0;
    closedir(d);
    return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hutch_archive_limits lim;
    struct hutch_err err = {0}, xerr = {0};
    struct counts listed = {0}, read = {0};
    struct hutch_buf out;
    int judged, extracted;

    if (size < 1)
        return 0;
    hutch_archive_limits_out(&lim);
    if (data[0] & 1) {
        lim.max_entries = 4;
        lim.max_bytes = 64;
        lim.max_path = 32;
        lim.max_depth = 3;
    }
    data++;
    size--;

    judged = hutch_archive_list(data, size, &lim, count_entry, &listed, &err);
    fuzz_assert(judged <= 0 && (judged == 0 || err.msg[0]));

    extracted = hutch_archive_extract(data, size, dest, &lim, &xerr);
    if (extracted < 0)
        fuzz_assert(empty_or_missing(dest));
    if ((judged == 0) != (extracted == 0)) {
        fprintf(stderr, "judge: %d %s\nextract: %d %s\n", judged, err.msg, extracted,
                xerr.msg);
        fuzz_assert(!"the judge and the unpacker disagree");
    }
    fuzz_rm_rf(dest);

    hutch_buf_init(&out, HUTCH_TAR_MAX_STREAM);
    memset(&err, 0, sizeof(err));
    if (hutch_archive_filter(data, size, to_buf, &out, &lim, getuid(), getgid(),
                             &err) == 0) {
        struct counts again = {0};
        if (hutch_archive_list(out.data, out.len, &lim, count_entry, &again, &err) !=
            0) {
            fprintf(stderr, "the filter's tar: %s\n", err.msg);
            fuzz_assert(!"the judge refuses what the filter wrote");
        }
        fuzz_assert(judged != 0 || again.files <= listed.files);
    }
    hutch_buf_free(&out);

    memset(&err, 0, sizeof(err));
    if (hutch_archive_read_files(data, size, 1024, count_file, &read, &err) == 0)
        fuzz_assert(judged != 0 || read.files <= listed.files);
    return 0;
}
