/* fair.h — CPU shared fairly between principals, not between sandboxes.
 *
 * The kernel shares contended CPUs between cgroups by weight: left alone,
 * a principal running four CPU-bound programs gets four times the CPU of
 * one running one, and with it the others' latency.  Each running
 * execution of a principal takes a seat here with a setter for its
 * sandbox's weight (the executor's cpu_weight()); the seats of a principal
 * weigh HUTCH_CPU_WEIGHT_DEFAULT together, split evenly (never below
 * HUTCH_CPU_WEIGHT_MIN), so that n principals with work each get 1/n of
 * the contended CPU whatever they run.  Uncontended CPU is not limited: a
 * weight only matters when others want the same CPU.
 *
 * job.c takes a seat when the policy lists principals (one user running
 * several programs keeps the kernel's default).  Not here: CPU limits
 * (the class's cpu_millis, a quota), the admission caps (admit.c).
 *
 * Thread-safe.  A principal's setters are called under its group's lock,
 * in the order the weights were decided: a setter must be quick and must
 * not take a seat. */
#ifndef HUTCH_FAIR_H
#define HUTCH_FAIR_H

#include <stdint.h>

struct hutch_fair_seat;

/* Sets the weight of the sandbox behind `arg`. */
typedef void (*hutch_fair_set_fn)(void *arg, uint32_t weight);

/* A seat among the running executions of `principal` (NULL: "");
 * `set(arg, w)` is called now and whenever the principal's seats change,
 * with the weight its sandbox should have (only when it differs from the
 * last one; a sandbox starts at HUTCH_CPU_WEIGHT_DEFAULT).  NULL when out
 * of memory: the sandbox keeps the default weight. */
struct hutch_fair_seat *hutch_fair_join(const char *principal, hutch_fair_set_fn set,
                                        void *arg);
/* Leaves the seat (NULL is fine); the principal's other seats get their
 * new weight.  The setter of `s` is not called again. */
void hutch_fair_leave(struct hutch_fair_seat *s);

/* The weight of each of n seats of one principal (tests, logs). */
uint32_t hutch_fair_weight(unsigned n);

#endif
