/* egress_tls.h — TLS for the egress proxy's intercepted tunnels (egress.h,
 * "Secrets"): the deployment's certificate authority, the leaf
 * certificates it signs for the names programs ask for, the TLS contexts
 * of both sides, and non-blocking TLS reads and writes bounded by a
 * deadline and a wake descriptor.
 *
 * The CA is one per deployment, kept in a directory (HUTCH_EGRESS_CA_DIR;
 * else /var/lib/hutch/egress-ca for root, $XDG_STATE_HOME/hutch/egress-ca,
 * ~/.local/state/hutch/egress-ca): ca.pem and ca.key (mode 0600; a key
 * group or others may read is refused).  Made there the first time it is
 * needed (an EC P-256 key, ten years), under a lock on the directory so
 * that two hutch processes make one.  Leaf certificates (EC P-256, one key
 * in memory for all of them, HUTCH_EGRESS_LEAF_DAYS long) are made on
 * first use and kept, at most HUTCH_EGRESS_MAX_LEAVES.
 *
 * The origin's side verifies the peer's certificate against the system's
 * trust store and the certificates of HUTCH_EGRESS_TRUST_FILE, for the
 * name the program asked for (SNI and host name check; an IP literal's
 * address), TLS 1.2 at least.
 *
 * Not here: what is intercepted and why, the records (egress.c), the
 * requests (egress_head.c, egress.c).  Threads: every function may be
 * called from any thread; the CA is made once and lives as long as the
 * process. */
#ifndef HUTCH_EGRESS_TLS_H
#define HUTCH_EGRESS_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "hutch-executor.h"

struct hutch_egress_ca;

/* The deployment's CA, loaded or made on the first call (a failure is not
 * kept: the next call tries again).  0, or negative with err. */
int hutch_egress_ca_get(struct hutch_egress_ca **out, struct hutch_err *err);
/* The PEM a program trusts: the system's CA bundle, then the CA's
 * certificate.  Valid for the process's life. */
const char *hutch_egress_ca_bundle_pem(const struct hutch_egress_ca *ca, size_t *len);
/* Where the CA is kept (its directory). */
const char *hutch_egress_ca_dir(const struct hutch_egress_ca *ca);

/* An SSL object over fd (non-blocking): the program's side, with a leaf
 * certificate for host (a name, or an IP literal when is_ip), or the
 * origin's side, verifying host.  NULL with msg when it cannot be made. */
SSL *hutch_egress_tls_server(struct hutch_egress_ca *ca, const char *host, int is_ip,
                             int fd, char *msg, size_t len);
SSL *hutch_egress_tls_client(struct hutch_egress_ca *ca, const char *host, int is_ip,
                             int fd, char *msg, size_t len);

/* The handshake, within deadline_ms (hutch_now_ms's clock): 0; -ETIMEDOUT;
 * -ECANCELED when `wake` became readable; -EPROTO with msg saying why (for
 * a client, the certificate's verification error when it failed). */
int hutch_egress_tls_handshake(SSL *ssl, int fd, int wake, uint64_t deadline_ms,
                               char *msg, size_t len);
/* One read: > 0 bytes; 0 at the end (close_notify, or the peer closed);
 * -EAGAIN nothing yet (*want_write: it waits to write, else to read);
 * -EPROTO with msg. */
ssize_t hutch_egress_tls_read(SSL *ssl, void *buf, size_t n, int *want_write, char *msg,
                              size_t len);
/* All of p: 0, -ETIMEDOUT, -ECANCELED, or -EPIPE (the peer is gone). */
int hutch_egress_tls_write_all(SSL *ssl, int fd, const void *p, size_t n, int wake,
                               uint64_t deadline_ms);

#endif
