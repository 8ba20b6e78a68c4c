/* proc.c — process identity by pid and start time (see proc.h). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

unsigned long long box_proc_start(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: count fields from
     * its closing parenthesis (field 2's end); the state is field 3. */
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return 0;
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (p)
        sscanf(p + 1, "%llu", &start);
    return start;
}

int box_process_gone(pid_t pid, unsigned long long start)
{
    return pid <= 0 || box_proc_start(pid) != start;
}
