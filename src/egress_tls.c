/* egress_tls.c — the egress proxy's TLS (egress_tls.h): the deployment's
 * CA on disk, leaf certificates signed by it, the two sides' contexts, and
 * TLS I/O over non-blocking descriptors.
 *
 * Not here: deciding what to intercept, records (egress.c), HTTP
 * (egress_head.c, egress.c).
 *
 * Locks.  ca_mu guards the_ca while it is made (once: it is never freed
 * nor replaced after); ca->mu (a leaf) guards the leaf cache.  An SSL
 * object belongs to the connection thread that made it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "caps.h"
#include "egress_tls.h"
#include "knobs.h"
#include "log.h"
#include "util.h"

struct leaf {
    char host[HUTCH_EGRESS_MAX_HOST + 1];
    X509 *cert;
    time_t made;
    uint64_t used; /* the cache's clock when last handed out */
};

struct hutch_egress_ca {
    char dir[4096];
    EVP_PKEY *key;
    X509 *cert;
    EVP_PKEY *leaf_key;
    SSL_CTX *server, *client;
    char *bundle;
    size_t bundle_len;
    pthread_mutex_t mu;
    struct leaf leaf[HUTCH_EGRESS_MAX_LEAVES];
    uint64_t clock;
};

static pthread_mutex_t ca_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hutch_egress_ca *the_ca;

/* The last OpenSSL error as text, the queue cleared. */
static const char *ossl_why(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        snprintf(buf, len, "unknown error");
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

static int ca_path(char *out, size_t len, struct hutch_err *err)
{
    /* XDG_STATE_HOME and HOME are not knobs (knobs.c): the user's. */
    const char *env = hutch_knob_str(HUTCH_KNOB_EGRESS_CA_DIR),
               *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(out, len, "%s", env);
    else if (geteuid() == 0)
        n = snprintf(out, len, "/var/lib/hutch/egress-ca");
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, len, "%s/hutch/egress-ca", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, len, "%s/.local/state/hutch/egress-ca", home);
    else
        return hutch_err_set(
            err, -ENOENT,
            "no place for the egress CA: set HUTCH_EGRESS_CA_DIR or $HOME");
    if (n < 0 || (size_t)n >= len || out[0] != '/')
        return hutch_err_set(err, -EINVAL,
                             "the egress CA's directory must be an absolute path (got "
                             "\"%s\")",
                             out);
    for (char *s = out + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(out, 0700) < 0 && errno != EEXIST) {
                int e = errno;
                *s = c;
                return hutch_err_set(err, -e, "cannot create %s: %s", out, strerror(e));
            }
            *s = c;
            if (!c)
                break;
        }
    }
    return 0;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* A certificate for `key`, named cn, valid from an hour ago for `days`,
 * with a random serial; issuer NULL: self-signed. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, long days, X509 *issuer)
{
    X509 *c = X509_new();
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    X509_NAME *name;
    if (!c || RAND_bytes(serial, sizeof(serial)) != 1)
        goto fail;
    serial[0] &= 0x7f; /* positive */
    if (!(bn = BN_bin2bn(serial, sizeof(serial), NULL)) ||
        !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) || !X509_set_version(c, 2) ||
        !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(c), days * 24 * 3600) ||
        !X509_set_pubkey(c, key))
        goto fail;
    name = X509_get_subject_name(c);
    if (cn && *cn && strlen(cn) <= 64 &&
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                    (const unsigned char *)cn, -1, -1, 0))
        goto fail;
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                    (const unsigned char *)"hutch egress", -1, -1, 0) ||
        !X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name))
        goto fail;
    BN_free(bn);
    return c;
fail:
    BN_free(bn);
    X509_free(c);
    return NULL;
}

static X509 *make_ca_cert(EVP_PKEY *key)
{
    X509 *c = new_cert(key, "hutch egress CA", 3650, NULL);
    if (!c || add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
        add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        add_ext(c, c, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(c, c, NID_authority_key_identifier, "keyid:always") < 0 ||
        !X509_sign(c, key, EVP_sha256())) {
        X509_free(c);
        return NULL;
    }
    return c;
}

/* Write the PEM of key (secure memory, cleared) and cert into dir. */
static int save_ca(const char *dir, EVP_PKEY *key, X509 *cert, struct hutch_err *err)
{
    char path[4200], why[256];
    BIO *kb = BIO_new(BIO_s_secmem()), *cb = BIO_new(BIO_s_mem());
    char *kp, *cp;
    long kn, cn;
    int r = 0;
    if (!kb || !cb || !PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) ||
        !PEM_write_bio_X509(cb, cert)) {
        r = hutch_err_set(err, -ENOMEM, "egress CA: %s", ossl_why(why, sizeof(why)));
        goto out;
    }
    kn = BIO_get_mem_data(kb, &kp);
    cn = BIO_get_mem_data(cb, &cp);
    snprintf(path, sizeof(path), "%s/ca.key", dir);
    r = hutch_write_file_atomic(path, kp, (size_t)kn, err);
    if (r == 0) {
        snprintf(path, sizeof(path), "%s/ca.pem", dir);
        r = hutch_write_file_atomic(path, cp, (size_t)cn, err);
    }
out:
    BIO_free(kb);
    BIO_free(cb);
    return r;
}

static int load_ca(struct hutch_egress_ca *ca, struct hutch_err *err)
{
    char kpath[4200], cpath[4200], why[256];
    struct stat ks, cs;
    int have_k, have_c, r = 0;
    FILE *f;

    snprintf(kpath, sizeof(kpath), "%s/ca.key", ca->dir);
    snprintf(cpath, sizeof(cpath), "%s/ca.pem", ca->dir);
    have_k = stat(kpath, &ks) == 0;
    have_c = stat(cpath, &cs) == 0;
    if (!have_k && !have_c) {
        if (!(ca->key = EVP_EC_gen("P-256")) || !(ca->cert = make_ca_cert(ca->key)))
            return hutch_err_set(err, -ENOMEM, "making the egress CA: %s",
                                 ossl_why(why, sizeof(why)));
        r = save_ca(ca->dir, ca->key, ca->cert, err);
        if (r == 0)
            hutch_info("egress: made the deployment's CA in %s", ca->dir);
        return r;
    }
    if (!have_k || !have_c)
        return hutch_err_set(
            err, -ENOENT, "the egress CA in %s has %s but not %s: give both or neither",
            ca->dir, have_k ? "ca.key" : "ca.pem", have_k ? "ca.pem" : "ca.key");
    if (ks.st_mode & 0077)
        return hutch_err_set(err, -EPERM,
                             "%s may be read by others (mode %03o): chmod 600 it",
                             kpath, (unsigned)(ks.st_mode & 0777));
    if (!(f = fopen(kpath, "re")))
        return hutch_err_set(err, -errno, "cannot read %s: %s", kpath, strerror(errno));
    ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!(f = fopen(cpath, "re")))
        return hutch_err_set(err, -errno, "cannot read %s: %s", cpath, strerror(errno));
    ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!ca->key || !ca->cert)
        return hutch_err_set(err, -EINVAL, "the egress CA in %s: %s", ca->dir,
                             ossl_why(why, sizeof(why)));
    if (X509_check_private_key(ca->cert, ca->key) != 1)
        return hutch_err_set(
            err, -EINVAL, "the egress CA in %s: ca.key is not ca.pem's key", ca->dir);
    if (X509_check_ca(ca->cert) < 1)
        return hutch_err_set(err, -EINVAL, "the egress CA in %s: ca.pem is not a CA",
                             ca->dir);
    return 0;
}

/* The system's CA bundle, then ours. */
static int make_bundle(struct hutch_egress_ca *ca, struct hutch_err *err)
{
    const char *sys = X509_get_default_cert_file();
    char *data = NULL, *out, why[256];
    size_t len = 0;
    BIO *b = BIO_new(BIO_s_mem());
    char *pem;
    long pn;
    struct hutch_err e2 = HUTCH_ERR_INIT;

    if (!b || !PEM_write_bio_X509(b, ca->cert)) {
        BIO_free(b);
        return hutch_err_set(err, -ENOMEM, "egress CA: %s", ossl_why(why, sizeof(why)));
    }
    pn = BIO_get_mem_data(b, &pem);
    if (hutch_read_file(sys, HUTCH_EGRESS_MAX_BUNDLE, &data, &len, &e2) < 0) {
        hutch_warn("egress: the system's CA bundle: %s; a program trusts hutch's CA "
                   "only",
                   e2.msg);
        data = NULL;
        len = 0;
    }
    out = malloc(len + (size_t)pn + 2);
    if (!out) {
        free(data);
        BIO_free(b);
        return hutch_err_set(err, -ENOMEM, "egress CA: out of memory");
    }
    if (len)
        memcpy(out, data, len);
    if (len && out[len - 1] != '\n')
        out[len++] = '\n';
    memcpy(out + len, pem, (size_t)pn);
    ca->bundle = out;
    ca->bundle_len = len + (size_t)pn;
    out[ca->bundle_len] = '\0';
    free(data);
    BIO_free(b);
    return 0;
}

/* Only HTTP/1.1 is read inside a tunnel: a client offering h2 gets
 * http/1.1 or no ALPN at all. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned i = 0; i < inlen;) {
        unsigned n = in[i];
        if (i + 1 + n > inlen)
            break;
        if (n == 8 && !memcmp(in + i + 1, "http/1.1", 8)) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static int make_contexts(struct hutch_egress_ca *ca, struct hutch_err *err)
{
    const char *trust = hutch_knob_str(HUTCH_KNOB_EGRESS_TRUST_FILE);
    long modes = SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
    char why[256];

    ca->server = SSL_CTX_new(TLS_server_method());
    ca->client = SSL_CTX_new(TLS_client_method());
    if (!ca->server || !ca->client ||
        !SSL_CTX_set_min_proto_version(ca->server, TLS1_2_VERSION) ||
        !SSL_CTX_set_min_proto_version(ca->client, TLS1_2_VERSION) ||
        !SSL_CTX_set_default_verify_paths(ca->client))
        return hutch_err_set(err, -ENOMEM, "egress TLS: %s",
                             ossl_why(why, sizeof(why)));
    if (trust && *trust && !SSL_CTX_load_verify_locations(ca->client, trust, NULL))
        return hutch_err_set(err, -EINVAL, "HUTCH_EGRESS_TRUST_FILE %s: %s", trust,
                             ossl_why(why, sizeof(why)));
    SSL_CTX_set_mode(ca->server, modes);
    SSL_CTX_set_mode(ca->client, modes);
    /* An origin that closes without close_notify ends its response. */
    SSL_CTX_set_options(ca->client, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_options(ca->server, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
    SSL_CTX_set_verify(ca->client, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_select_cb(ca->server, alpn_select, NULL);
    return 0;
}

static void ca_free(struct hutch_egress_ca *ca)
{
    if (!ca)
        return;
    EVP_PKEY_free(ca->key);
    X509_free(ca->cert);
    EVP_PKEY_free(ca->leaf_key);
    SSL_CTX_free(ca->server);
    SSL_CTX_free(ca->client);
    free(ca->bundle);
    pthread_mutex_destroy(&ca->mu);
    free(ca);
}

int hutch_egress_ca_get(struct hutch_egress_ca **out, struct hutch_err *err)
{
    struct hutch_egress_ca *ca;
    char why[256];
    int r = 0, dfd = -1;

    pthread_mutex_lock(&ca_mu);
    if (the_ca) {
        *out = the_ca;
        pthread_mutex_unlock(&ca_mu);
        return 0;
    }
    if (!(ca = calloc(1, sizeof(*ca)))) {
        pthread_mutex_unlock(&ca_mu);
        return hutch_err_set(err, -ENOMEM, "egress CA: out of memory");
    }
    pthread_mutex_init(&ca->mu, NULL);
    r = ca_path(ca->dir, sizeof(ca->dir), err);
    if (r == 0) {
        /* Two hutch processes making the CA at once make one. */
        dfd = open(ca->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || flock(dfd, LOCK_EX) < 0)
            r = hutch_err_set(err, -errno, "the egress CA's directory %s: %s", ca->dir,
                              strerror(errno));
    }
    if (r == 0)
        r = load_ca(ca, err);
    if (dfd >= 0)
        close(dfd); /* and the lock */
    if (r == 0 && !(ca->leaf_key = EVP_EC_gen("P-256")))
        r = hutch_err_set(err, -ENOMEM, "egress CA: %s", ossl_why(why, sizeof(why)));
    if (r == 0)
        r = make_bundle(ca, err);
    if (r == 0)
        r = make_contexts(ca, err);
    if (r < 0) {
        ca_free(ca);
        pthread_mutex_unlock(&ca_mu);
        return r;
    }
    the_ca = *out = ca;
    pthread_mutex_unlock(&ca_mu);
    return 0;
}

const char *hutch_egress_ca_bundle_pem(const struct hutch_egress_ca *ca, size_t *len)
{
    *len = ca->bundle_len;
    return ca->bundle;
}

const char *hutch_egress_ca_dir(const struct hutch_egress_ca *ca)
{
    return ca->dir;
}

static X509 *make_leaf(struct hutch_egress_ca *ca, const char *host, int is_ip)
{
    char san[HUTCH_EGRESS_MAX_HOST + 8];
    X509 *c = new_cert(ca->leaf_key, host, HUTCH_EGRESS_LEAF_DAYS, ca->cert);
    snprintf(san, sizeof(san), "%s:%s", is_ip ? "IP" : "DNS", host);
    if (!c || add_ext(c, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(c, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
        add_ext(c, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
        add_ext(c, ca->cert, NID_subject_alt_name, san) < 0 ||
        add_ext(c, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(c, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
        !X509_sign(c, ca->key, EVP_sha256())) {
        X509_free(c);
        return NULL;
    }
    return c;
}

/* The leaf for host, a reference the caller frees: from the cache when one
 * is young enough, else made (and the least recently used one dropped). */
static X509 *leaf_for(struct hutch_egress_ca *ca, const char *host, int is_ip)
{
    struct leaf *slot = NULL;
    time_t now = time(NULL);
    X509 *c;

    pthread_mutex_lock(&ca->mu);
    for (size_t i = 0; i < HUTCH_EGRESS_MAX_LEAVES; i++) {
        struct leaf *l = &ca->leaf[i];
        if (l->cert && !strcmp(l->host, host) &&
            now - l->made < HUTCH_EGRESS_LEAF_RENEW_S) {
            l->used = ++ca->clock;
            X509_up_ref(l->cert);
            c = l->cert;
            pthread_mutex_unlock(&ca->mu);
            return c;
        }
    }
    /* Made under the lock: a few milliseconds, once per host and day. */
    c = make_leaf(ca, host, is_ip);
    for (size_t i = 0; c && i < HUTCH_EGRESS_MAX_LEAVES; i++) {
        struct leaf *l = &ca->leaf[i];
        if (!l->cert || !strcmp(l->host, host)) {
            slot = l; /* an empty one, or this host's old one */
            break;
        }
        if (!slot || l->used < slot->used)
            slot = l;
    }
    if (c) {
        X509_free(slot->cert);
        snprintf(slot->host, sizeof(slot->host), "%s", host);
        slot->cert = c;
        slot->made = now;
        slot->used = ++ca->clock;
        X509_up_ref(c);
    }
    pthread_mutex_unlock(&ca->mu);
    return c;
}

SSL *hutch_egress_tls_server(struct hutch_egress_ca *ca, const char *host, int is_ip,
                             int fd, char *msg, size_t len)
{
    X509 *leaf = leaf_for(ca, host, is_ip);
    SSL *ssl = leaf ? SSL_new(ca->server) : NULL;
    ERR_clear_error();
    if (!ssl || !SSL_use_certificate(ssl, leaf) ||
        !SSL_use_PrivateKey(ssl, ca->leaf_key) || !SSL_set_fd(ssl, fd)) {
        char why[256];
        snprintf(msg, len, "a certificate for %s: %s", host,
                 ossl_why(why, sizeof(why)));
        SSL_free(ssl);
        ssl = NULL;
    }
    X509_free(leaf);
    if (ssl)
        SSL_set_accept_state(ssl);
    return ssl;
}

SSL *hutch_egress_tls_client(struct hutch_egress_ca *ca, const char *host, int is_ip,
                             int fd, char *msg, size_t len)
{
    SSL *ssl = SSL_new(ca->client);
    int ok;
    ERR_clear_error();
    ok = ssl && SSL_set_fd(ssl, fd);
    if (ok && is_ip)
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    else if (ok)
        ok = SSL_set_tlsext_host_name(ssl, host) && SSL_set1_host(ssl, host);
    if (!ok) {
        char why[256];
        snprintf(msg, len, "TLS to %s: %s", host, ossl_why(why, sizeof(why)));
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* Wait for fd (to read, or to write) or wake: 1, 0 past the deadline, -1
 * woken. */
static int tls_wait(int fd, int want_write, int wake, uint64_t deadline_ms)
{
    return hutch_wait_fd(fd, want_write ? POLLOUT : POLLIN, wake, deadline_ms);
}

int hutch_egress_tls_handshake(SSL *ssl, int fd, int wake, uint64_t deadline_ms,
                               char *msg, size_t len)
{
    for (;;) {
        int r, e, w;
        ERR_clear_error();
        r = SSL_do_handshake(ssl);
        if (r == 1)
            return 0;
        e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            w = tls_wait(fd, e == SSL_ERROR_WANT_WRITE, wake, deadline_ms);
            if (w == 0) {
                snprintf(msg, len, "the TLS handshake did not end in time");
                return -ETIMEDOUT;
            }
            if (w < 0) {
                snprintf(msg, len, "the execution ended during the TLS handshake");
                return -ECANCELED;
            }
            continue;
        }
        if (!SSL_is_server(ssl) && SSL_get_verify_result(ssl) != X509_V_OK) {
            snprintf(msg, len, "its certificate does not verify: %s",
                     X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
        } else if (e == SSL_ERROR_SYSCALL && !ERR_peek_error()) {
            snprintf(msg, len,
                     "the TLS handshake failed: the peer closed the connection");
        } else {
            char why[256];
            snprintf(msg, len, "the TLS handshake failed: %s",
                     ossl_why(why, sizeof(why)));
        }
        ERR_clear_error();
        return -EPROTO;
    }
}

ssize_t hutch_egress_tls_read(SSL *ssl, void *buf, size_t n, int *want_write, char *msg,
                              size_t len)
{
    size_t got = 0;
    int r, e;
    *want_write = 0;
    ERR_clear_error();
    r = SSL_read_ex(ssl, buf, n, &got);
    if (r == 1)
        return (ssize_t)got;
    e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want_write = e == SSL_ERROR_WANT_WRITE;
        return -EAGAIN;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !ERR_peek_error())) {
        ERR_clear_error();
        return 0;
    }
    {
        char why[256];
        snprintf(msg, len, "TLS: %s", ossl_why(why, sizeof(why)));
    }
    return -EPROTO;
}

int hutch_egress_tls_write_all(SSL *ssl, int fd, const void *p, size_t n, int wake,
                               uint64_t deadline_ms)
{
    const char *c = p;
    while (n) {
        size_t w = 0;
        int r, e;
        ERR_clear_error();
        r = SSL_write_ex(ssl, c, n, &w);
        if (r == 1) {
            c += w;
            n -= w;
            continue;
        }
        e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            int k = tls_wait(fd, e == SSL_ERROR_WANT_WRITE, wake, deadline_ms);
            if (k == 0)
                return -ETIMEDOUT;
            if (k < 0)
                return -ECANCELED;
            continue;
        }
        ERR_clear_error();
        return -EPIPE;
    }
    return 0;
}
