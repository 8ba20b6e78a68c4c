/* proc.h — whether a process is still the one that started at a given time,
 * for every plugin (the local one too: nothing here needs cJSON).  A
 * leftover sweep names its owner by pid and start time (field 22 of
 * /proc/PID/stat), so a reused pid is not mistaken for the owner. */
#ifndef HUTCH_PLUGIN_PROC_H
#define HUTCH_PLUGIN_PROC_H

#include <sys/types.h>

/* The start time of `pid`, 0 when it is gone or a zombie (it runs no more:
 * its parent has not read its status yet; a hutch killed with -9 stays one
 * until then). */
unsigned long long box_proc_start(pid_t pid);
/* 1 when the process pid, started at `start`, no longer runs (its pid may
 * have been reused since). */
int box_process_gone(pid_t pid, unsigned long long start);

#endif
