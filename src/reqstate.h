/* reqstate.h — the requestState of a question hutch asks in the 2026-07-28
 * era (an input_required result): the token a client hands back with its
 * answer, which names the execution waiting for that answer.  It is signed
 * (HMAC-SHA256 under a key of this process, never written anywhere), so a
 * client can neither forge nor alter one; bound to the principal it was
 * issued to; and it expires.  It also names the hutch process that issued
 * it: a parked execution lives in that process only, and a replica that
 * receives another's token says so precisely.
 *
 * The token is "<payload>.<mac>", both base64url without padding; the
 * payload is JSON {v, i (instance), p (principal), e (execution), q
 * (question number), x (expiry, ms since the epoch)}.  Replays are the
 * caller's to refuse: a question once answered is gone from its registry.
 *
 * Thread rules: the key is made once (pthread_once); every function may be
 * called from any thread. */
#ifndef HUTCH_REQSTATE_H
#define HUTCH_REQSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

/* Room for any token hutch makes. */
#define HUTCH_REQSTATE_MAX 512

/* A token for question `q` of `execution`, issued to `principal`, valid
 * for ttl_ms.  0, or -ENAMETOOLONG when the names do not fit, -ENOMEM. */
int hutch_reqstate_make(const char *principal, const char *execution, uint64_t q,
                        unsigned ttl_ms, char *out, size_t len, struct hutch_err *err);

/* Check a token from a client (untrusted) presented by `principal`.  0 with
 * the execution and question it names; else the reason in err and:
 *   -EBADMSG   not a token of ours, or altered (the signature fails);
 *   -EXDEV     issued by another hutch process (a replica, or hutch before
 *              a restart): the question can only be answered there;
 *   -EACCES    issued to another principal;
 *   -ETIMEDOUT expired. */
int hutch_reqstate_check(const char *token, const char *principal, char *execution,
                         size_t elen, uint64_t *q, struct hutch_err *err);

#endif
