/* box.c — see box.h. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "box.h"
#include "env.h"

int box_find_init(const struct hutch_option *table, char *out, size_t len,
                  struct hutch_err *err)
{
    const char *env = opt_env(table, "init");
    Dl_info info;

    if (env && *env) {
        snprintf(out, len, "%s", env);
    } else {
        char *slash;
        size_t n;
        if (!dladdr((void *)box_find_init, &info) || !info.dli_fname)
            return hutch_err_set(err, -ENOENT, "cannot tell where the plugin lives");
        snprintf(out, len, "%s", info.dli_fname);
        for (int i = 0; i < 2; i++) {
            slash = strrchr(out, '/');
            if (!slash)
                return hutch_err_set(err, -ENOENT,
                                     "cannot tell where the plugin lives");
            *slash = '\0';
        }
        n = strlen(out);
        if (n + sizeof("/hutch-init") > len)
            return hutch_err_set(err, -ENAMETOOLONG, "plugin path too long");
        memcpy(out + n, "/hutch-init", sizeof("/hutch-init"));
    }
    if (access(out, X_OK) < 0)
        return hutch_err_set(
            err, -ENOENT,
            "hutch-init is missing at %s (%s): reinstall hutch, or set "
            "HUTCH_INIT to its path",
            out, strerror(errno));
    return 0;
}

static int remove_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)f;
    return (type == FTW_DP ? rmdir(p) : unlink(p)) < 0 ? -1 : 0;
}

int box_remove_tree(const char *path)
{
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

ssize_t box_read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

int box_runtime_line(const char *raw, char *out, size_t len)
{
    size_t n = raw ? strcspn(raw, "\r\n") : 0;
    if (!len)
        return -ENOENT;
    if (n >= len)
        n = len - 1;
    memcpy(out, raw ? raw : "", n);
    out[n] = '\0';
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    while (n && out[n - 1] == ' ')
        out[--n] = '\0';
    return n ? 0 : -ENOENT;
}

uint64_t box_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

cJSON *box_str_array(const char *const *v)
{
    cJSON *a = cJSON_CreateArray();
    for (; a && *v; v++)
        cJSON_AddItemToArray(a, cJSON_CreateString(*v));
    return a;
}

unsigned long long box_work_bytes(const struct hutch_sandbox_class *cls)
{
    return cls->work_bytes ? cls->work_bytes : 256ull << 20;
}

unsigned long long box_tmp_bytes(const struct hutch_sandbox_class *cls)
{
    return cls->tmp_bytes ? cls->tmp_bytes : 64ull << 20;
}

cJSON *box_command(const struct hutch_sandbox_class *cls, unsigned uid, unsigned gid,
                   const char *const *flags, int preload)
{
    unsigned long long work = box_work_bytes(cls), tmp = box_tmp_bytes(cls);
    char user[32], nofile[24], fsize[32];
    const char *py[] = {BOX_INIT,
                        user,
                        nofile,
                        fsize,
                        "/usr/bin/python3",
                        "-I",
                        "-S",
                        BOX_RUNNER "/runner.py",
                        preload ? "--preload" : NULL,
                        NULL};
    const char *js[] = {
        BOX_INIT, user, nofile, fsize, "/usr/bin/node", BOX_RUNNER "/runner.js", NULL};

    snprintf(user, sizeof(user), "%u:%u", uid, gid);
    snprintf(nofile, sizeof(nofile), "%u", cls->open_files ? cls->open_files : 256);
    /* Above the tmpfs sizes, so a full /work says ENOSPC, not EFBIG. */
    snprintf(fsize, sizeof(fsize), "%llu", (work > tmp ? work : tmp) + (1u << 20));
    const char *const *v = strcmp(cls->language, "python") == 0 ? py : js;
    cJSON *cmd = cJSON_CreateArray();

    /* The flags go right after hutch-init's path. */
    for (size_t i = 0; cmd && v[i]; i++) {
        cJSON_AddItemToArray(cmd, cJSON_CreateString(v[i]));
        for (size_t j = 0; i == 0 && flags && flags[j]; j++)
            cJSON_AddItemToArray(cmd, cJSON_CreateString(flags[j]));
    }
    return cmd;
}

cJSON *box_environment(void)
{
    return box_str_array(hutch_sandbox_env);
}

int box_flavour(const char *value, const char *executor, struct hutch_err *err)
{
    if (!value[0] || !strcmp(value, "base"))
        return 0;
    if (!strcmp(value, "data"))
        return 1;
    return hutch_err_set(err, -EINVAL,
                         "the policy's executor_options.%s.flavour \"%.64s\" is not a "
                         "flavour: \"base\" or \"data\" (Python with numpy, pandas and "
                         "matplotlib)",
                         executor, value);
}

int box_cpu_weight_check(uint32_t weight, struct hutch_err *err)
{
    if (weight < HUTCH_CPU_WEIGHT_MIN || weight > HUTCH_CPU_WEIGHT_MAX)
        return hutch_err_set(err, -EINVAL, "CPU weight %u out of range", weight);
    return 0;
}

int box_write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;
    int e = 0;

    if (fd < 0)
        return -errno;
    n = write(fd, s, strlen(s));
    if (n < 0)
        e = -errno;
    else if ((size_t)n != strlen(s))
        e = -EIO;
    close(fd);
    return e;
}

uint32_t box_cpu_shares(uint32_t weight)
{
    uint32_t shares = weight * 1024u / 100u;
    return shares < 2 ? 2 : shares;
}

int box_cpu_weight_parse(const char *value, uint32_t *weight, struct hutch_err *err)
{
    char *end;
    unsigned long w;

    errno = 0;
    w = strtoul(value, &end, 10);
    if (errno || end == value || *end || value[0] == '-' || w < HUTCH_CPU_WEIGHT_MIN ||
        w > HUTCH_CPU_WEIGHT_MAX)
        return hutch_err_set(
            err, -EINVAL,
            "HUTCH_SANDBOXES_CPU_WEIGHT=%.32s: want a weight from %u to "
            "%u (the kernel's default is %u)",
            value, HUTCH_CPU_WEIGHT_MIN, HUTCH_CPU_WEIGHT_MAX,
            HUTCH_CPU_WEIGHT_DEFAULT);
    *weight = (uint32_t)w;
    return 0;
}

int box_cpu_root(char *out, size_t len)
{
    static const char *const v1[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct",
                                     "/sys/fs/cgroup/cpuacct,cpu"};
    char file[PATH_MAX];

    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
        snprintf(out, len, "/sys/fs/cgroup");
        return 2;
    }
    for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
        snprintf(file, sizeof(file), "%s/cpu.shares", v1[i]);
        if (access(file, F_OK) == 0) {
            snprintf(out, len, "%s", v1[i]);
            return 1;
        }
    }
    return -ENOENT;
}

/* `weight` into the cpu cgroup directory `dir`, on the hierarchy of version
 * v (box_cpu_root's answer). */
static int write_cpu_weight(const char *dir, int v, uint32_t weight,
                            struct hutch_err *err)
{
    char file[PATH_MAX + 32], val[32];
    int r;

    if (v == 2) {
        snprintf(file, sizeof(file), "%s/cpu.weight", dir);
        snprintf(val, sizeof(val), "%u", weight);
    } else {
        snprintf(file, sizeof(file), "%s/cpu.shares", dir);
        snprintf(val, sizeof(val), "%u", box_cpu_shares(weight));
    }
    if ((r = box_write_str(file, val)) < 0)
        return hutch_err_set(err, r, "cannot write %s to %s: %s", val, file,
                             strerror(-r));
    return 0;
}

int box_cgroup_cpu_weight(const char *cgroup, uint32_t weight, struct hutch_err *err)
{
    char root[64], dir[PATH_MAX];
    int v;

    if ((v = box_cpu_root(root, sizeof(root))) < 0)
        return hutch_err_set(err, v,
                             "no cpu controller is mounted below /sys/fs/cgroup");
    snprintf(dir, sizeof(dir), "%s%s%s", root, cgroup[0] == '/' ? "" : "/", cgroup);
    return write_cpu_weight(dir, v, weight, err);
}

int box_parent_cpu_weight(const char *parent, uint32_t weight, char *dir, size_t len,
                          struct hutch_err *err)
{
    char root[64];
    int v;

    if (!parent[0] || strstr(parent, "..") || strlen(parent) > 200)
        return hutch_err_set(
            err, -EINVAL, "the cgroup parent \"%.64s\" is not a cgroup path", parent);
    if ((v = box_cpu_root(root, sizeof(root))) < 0)
        return hutch_err_set(err, v,
                             "no cpu controller is mounted below /sys/fs/cgroup");
    snprintf(dir, len, "%s%s%s", root, parent[0] == '/' ? "" : "/", parent);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        (void)mkdir(dir, 0755);
        *p = '/';
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return hutch_err_set(err, -errno, "cannot make the cgroup %s: %s", dir,
                             strerror(errno));
    return write_cpu_weight(dir, v, weight, err);
}
