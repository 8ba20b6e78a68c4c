/* engines.h — the Docker endpoints one docker executor places sandboxes
 * on, and their health.
 *
 * The deployment names them in HUTCH_DOCKER_ENDPOINTS, whitespace
 * separated, each "[NAME=]URL[,tls=/DIR]" (unix:// or tcp://; DIR holds
 * ca.pem, cert.pem and key.pem), or else DOCKER_HOST names the one (the
 * Docker CLI's variables, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH with it).
 * A policy may give a class its own list, same syntax, in
 * executor_options.docker.endpoints; such engines join the registry the
 * first time a class names them.
 *
 * Placement: the engine of the list that is up with the fewest containers
 * of this hutch on it (running or pooled, so pool occupancy counts too).
 * An engine is down from the moment a call to it fails as a connection
 * failure (the caller says so), and is asked again (GET /version) at most
 * every DK_ENGINE_REPROBE_MS when a placement considers it: it comes back
 * by itself once it answers.  Nothing here runs in the background.
 *
 * Thread rules: the registry's mutex guards the list and each engine's up,
 * why and next_probe; `live` is atomic; an engine's api is written before
 * the engine is first up and only read after (calls run unlocked). */
#ifndef HUTCH_DOCKER_ENGINES_H
#define HUTCH_DOCKER_ENGINES_H

#include <pthread.h>
#include <stdint.h>

#include "api.h"

#define DK_ENGINE_REPROBE_MS 1000

struct dk_engine {
    struct dk_engine *next;
    char name[64];
    char spec[PATH_MAX + 400]; /* as given: how a policy's list finds it again */
    struct dk_api api;
    char version[32]; /* the Engine's, once up */
    int up;
    int ever_up;
    uint64_t next_probe_ms;
    char why[HUTCH_ERR_MSG]; /* why it is down */
    unsigned live;           /* containers of this hutch on it (atomic) */
    unsigned comebacks;      /* times it answered again after it was down */
    unsigned swept;          /* … of which dk_engine_came_back said so */
    /* The cgroup parent of its containers, decided at its first container
     * (docker.c, engine_cgroup_parent; under the state's cg_mu). */
    int cg_decided;
    char cg_parent[256]; /* "": the daemon's default */
};

struct dk_engines {
    pthread_mutex_t mu;
    struct dk_engine *list; /* the environment's first, in their order */
    int n_env;
};

/* The environment's engines (no I/O): 0, or what is wrong with the list. */
int dk_engines_init(struct dk_engines *es, struct hutch_err *err);
void dk_engines_free(struct dk_engines *es);

/* Asks every environment engine now.  0 when one at least is up; else the
 * first one's error (all of them down). */
int dk_engines_probe(struct dk_engines *es, struct hutch_err *err);

/* Places a container: the up engine of `list` (a class's endpoints, NULL
 * or "" for the environment's) with the fewest live containers, not
 * `avoid`; its live count is taken (dk_engine_release gives it back).  An
 * error names every engine of the list and why it is down; -ENODEV (err
 * untouched) when the list has no engine but `avoid`. */
int dk_engines_pick(struct dk_engines *es, const char *list,
                    const struct dk_engine *avoid, struct dk_engine **out,
                    struct hutch_err *err);
void dk_engine_release(struct dk_engine *e);

/* Asks e now whether it is up (GET /version), and records the answer:
 * 0 when it answered. */
int dk_engine_check(struct dk_engines *es, struct dk_engine *e);

/* 1 once for each time e came back up after it was down (a daemon that
 * was killed and restarted): what this hutch lost on it meanwhile (a
 * container whose removal failed, one created as the daemon died) is to
 * be swept.  0 otherwise. */
int dk_engine_came_back(struct dk_engines *es, struct dk_engine *e);

/* A call to e failed as a connection failure (why): e is down. */
void dk_engine_down(struct dk_engines *es, struct dk_engine *e, const char *why);

/* 1 when an error from a call is the engine's absence (refused, reset,
 * timed out, gone), not an answer. */
int dk_engine_failure(int code);

/* Each engine in order, under the lock (doctor, sweeps at open/close). */
void dk_engines_each(struct dk_engines *es, void (*fn)(void *arg, struct dk_engine *e),
                     void *arg);

#endif
