/* TLS configurations: one OpenSSL context per configuration, built once
 * and then only read, so that connections on every worker share it
 * (SSL_CTX is safe for concurrent SSL_new once set up). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls_internal.h"

/* The reason for a failure, with OpenSSL's queue appended (and drained:
 * nothing of it stays on this thread). Returns -code. */
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        unsigned long e;
        while ((e = ERR_get_error()) != 0 && n >= 0 && (size_t)n < errlen)
            n += snprintf(err + n, errlen - (size_t)n, ": %s",
                          ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "?");
    }
    ERR_clear_error();
    return -code;
}

/* -ENOENT / -EACCES for a file that cannot be read, before OpenSSL's
 * less precise "system lib" error. */
static int readable(const char *path, const char *what, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, errno, "%s %s: %s", what, path, strerror(errno));
    close(fd);
    return 0;
}

static int load_cert_pem(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (b == NULL)
        return fail(err, errlen, ENOMEM, "certificate");
    X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    int r = 0;
    if (leaf == NULL || SSL_CTX_use_certificate(ctx, leaf) != 1)
        r = fail(err, errlen, EBADMSG, "cert_pem: not a certificate");
    X509_free(leaf);
    /* The rest of the text is the chain, leaf's issuer first. */
    X509 *c;
    while (r == 0 && (c = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add0_chain_cert(ctx, c) != 1) {
            X509_free(c);
            r = fail(err, errlen, EBADMSG, "cert_pem: chain");
        }
    ERR_clear_error();              /* the end of the text reads as an error */
    BIO_free(b);
    return r;
}

static int load_key_pem(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (b == NULL)
        return fail(err, errlen, ENOMEM, "key");
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    int r = 0;
    if (k == NULL || SSL_CTX_use_PrivateKey(ctx, k) != 1)
        r = fail(err, errlen, EBADMSG, "key_pem: not a private key");
    EVP_PKEY_free(k);
    BIO_free(b);
    return r;
}

static int load_identity(SSL_CTX *ctx, const goro_tls_options_t *o, char *err, size_t errlen)
{
    int r = 0;
    if (o->cert_file != NULL) {
        if ((r = readable(o->cert_file, "cert_file", err, errlen)) < 0)
            return r;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1)
            return fail(err, errlen, EBADMSG, "cert_file %s", o->cert_file);
    } else if (o->cert_pem != NULL && (r = load_cert_pem(ctx, o->cert_pem, err, errlen)) < 0) {
        return r;
    }
    if (o->key_file != NULL) {
        if ((r = readable(o->key_file, "key_file", err, errlen)) < 0)
            return r;
        if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1)
            return fail(err, errlen, EBADMSG, "key_file %s", o->key_file);
    } else if (o->key_pem != NULL && (r = load_key_pem(ctx, o->key_pem, err, errlen)) < 0) {
        return r;
    }
    if ((o->cert_file || o->cert_pem) && SSL_CTX_check_private_key(ctx) != 1)
        return fail(err, errlen, EBADMSG, "the key does not match the certificate");
    return 0;
}

static int load_trust(SSL_CTX *ctx, const goro_tls_options_t *o, char *err, size_t errlen)
{
    int r;
    if (o->ca_file == NULL && o->ca_dir == NULL && o->ca_pem == NULL) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1)
            return fail(err, errlen, EBADMSG, "the system's CA store");
        return 0;
    }
    if (o->ca_file != NULL && (r = readable(o->ca_file, "ca_file", err, errlen)) < 0)
        return r;
    if ((o->ca_file || o->ca_dir) &&
        SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir) != 1)
        return fail(err, errlen, EBADMSG, "ca_file/ca_dir");
    if (o->ca_pem != NULL) {
        BIO *b = BIO_new_mem_buf(o->ca_pem, -1);
        if (b == NULL)
            return fail(err, errlen, ENOMEM, "ca_pem");
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        X509 *c;
        int n = 0;
        while ((c = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
            X509_STORE_add_cert(store, c);
            X509_free(c);
            n++;
        }
        ERR_clear_error();
        BIO_free(b);
        if (n == 0)
            return fail(err, errlen, EBADMSG, "ca_pem: no certificate");
    }
    return 0;
}

/* ALPN's wire form: each name prefixed by its length. */
static int alpn_wire(goro_tls_config_t *cfg, const char *const *alpn, char *err, size_t errlen)
{
    size_t len = 0;
    for (const char *const *p = alpn; *p != NULL; p++) {
        size_t n = strlen(*p);
        if (n == 0 || n > 255)
            return fail(err, errlen, EINVAL, "alpn: a name of %zu bytes", n);
        len += n + 1;
    }
    if (len == 0 || len > 65535)
        return fail(err, errlen, EINVAL, "alpn: an empty or too long list");
    if ((cfg->alpn = malloc(len)) == NULL)
        return fail(err, errlen, ENOMEM, "alpn");
    unsigned char *w = cfg->alpn;
    for (const char *const *p = alpn; *p != NULL; p++) {
        size_t n = strlen(*p);
        *w++ = (unsigned char)n;
        memcpy(w, *p, n);
        w += n;
    }
    cfg->alpn_len = (unsigned)len;
    return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    goro_tls_config_t *cfg = arg;
    unsigned char *o;
    if (SSL_select_next_proto(&o, outlen, cfg->alpn, cfg->alpn_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = o;
    return SSL_TLSEXT_ERR_OK;
}

static int verify_mode(const goro_tls_options_t *o)
{
    switch (o->verify) {
    case GORO_TLS_VERIFY_NONE:
        return SSL_VERIFY_NONE;
    case GORO_TLS_VERIFY_REQUIRE:
        return SSL_VERIFY_PEER | (o->server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    case GORO_TLS_VERIFY_PEER:
        return SSL_VERIFY_PEER;
    default:
        return o->server ? SSL_VERIFY_NONE : SSL_VERIFY_PEER;
    }
}

static int check_options(const goro_tls_options_t *o, char *err, size_t errlen)
{
    if ((o->cert_file && o->cert_pem) || (o->key_file && o->key_pem))
        return fail(err, errlen, EINVAL, "a certificate or key given both as file and as PEM");
    if (!(o->cert_file || o->cert_pem) != !(o->key_file || o->key_pem))
        return fail(err, errlen, EINVAL, "a certificate without a key or a key without one");
    if (o->server && !(o->cert_file || o->cert_pem))
        return fail(err, errlen, EINVAL, "a server needs a certificate and key");
    if (o->verify < GORO_TLS_VERIFY_DEFAULT || o->verify > GORO_TLS_VERIFY_NONE)
        return fail(err, errlen, EINVAL, "verify: %d", o->verify);
    if (o->min_version != 0 && o->min_version != GORO_TLS_1_2 && o->min_version != GORO_TLS_1_3)
        return fail(err, errlen, EINVAL, "min_version: %#x", (unsigned)o->min_version);
    return 0;
}

static int build(goro_tls_config_t *cfg, const goro_tls_options_t *o, char *err, size_t errlen)
{
    int r;
    cfg->ctx = SSL_CTX_new(o->server ? TLS_server_method() : TLS_client_method());
    if (cfg->ctx == NULL)
        return fail(err, errlen, ENOMEM, "SSL_CTX_new");
    SSL_CTX *ctx = cfg->ctx;
    SSL_CTX_set_min_proto_version(ctx, o->min_version ? o->min_version : TLS1_2_VERSION);
    /* A retried SSL_write may come back with the rest of the buffer at a
     * new address (goro_tls_write goes on from where it stopped), and
     * returns as soon as one record went out. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* One recv for as much as has come instead of two a record (header,
     * then body). Safe with the parking of conn.c: it parks only after
     * OpenSSL said WANT_READ, which it says only when what it holds is
     * less than a record, so no complete record waits in its buffer while
     * the coroutine waits for the socket. */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* A TLS 1.3 server sends one session ticket after the handshake, as
     * Go's does, not OpenSSL's two: each costs an encryption, a MAC and
     * a record of its own, and a client resuming needs one. */
    if (o->server)
        SSL_CTX_set_num_tickets(ctx, 1);
    if ((r = load_identity(ctx, o, err, errlen)) < 0)
        return r;
    int mode = verify_mode(o);
    if (mode != SSL_VERIFY_NONE && (r = load_trust(ctx, o, err, errlen)) < 0)
        return r;
    SSL_CTX_set_verify(ctx, mode, NULL);
    cfg->server = o->server;
    if (o->alpn != NULL) {
        if ((r = alpn_wire(cfg, o->alpn, err, errlen)) < 0)
            return r;
        if (o->server)
            SSL_CTX_set_alpn_select_cb(ctx, alpn_select, cfg);
        else if (SSL_CTX_set_alpn_protos(ctx, cfg->alpn, cfg->alpn_len) != 0)
            return fail(err, errlen, ENOMEM, "alpn");
    }
    if (o->server_name != NULL && (cfg->server_name = strdup(o->server_name)) == NULL)
        return fail(err, errlen, ENOMEM, "server_name");
    return 0;
}

static void destroy(goro_tls_config_t *cfg)
{
    SSL_CTX_free(cfg->ctx);
    free(cfg->alpn);
    free(cfg->server_name);
    free(cfg);
}

TLS_API int goro_tls_config_new(const goro_tls_options_t *opts, goro_tls_config_t **out,
                                char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (opts == NULL || out == NULL)
        return fail(err, errlen, EINVAL, "NULL options or result");
    *out = NULL;
    int r = check_options(opts, err, errlen);
    if (r < 0)
        return r;
    goro_tls_config_t *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL)
        return fail(err, errlen, ENOMEM, "config");
    atomic_init(&cfg->refs, 1);
    if ((r = build(cfg, opts, err, errlen)) < 0) {
        destroy(cfg);
        return r;
    }
    *out = cfg;
    return 0;
}

void goro_tls_config_ref(goro_tls_config_t *cfg)
{
    atomic_fetch_add_explicit(&cfg->refs, 1, memory_order_relaxed);
}

TLS_API void goro_tls_config_free(goro_tls_config_t *cfg)
{
    /* acq_rel: the last one out sees every other holder's use done. */
    if (cfg != NULL && atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel) == 1)
        destroy(cfg);
}
