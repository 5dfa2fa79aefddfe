/* libgoro-tls's private declarations (tls/config.c, tls/conn.c, tls/bio.c).
 * Built on goro's public API only (goro.h and goro/tls.h), as
 * runtime/pipe/ is: nothing of runtime/internal.h. */
#ifndef GORO_TLS_INTERNAL_H
#define GORO_TLS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include <openssl/ssl.h>

#include "goro.h"
#include "goro/tls.h"

#define TLS_API __attribute__((visibility("default")))

struct goro_tls_config {
    atomic_int refs;            /* the caller's, plus one per connection */
    SSL_CTX *ctx;               /* immutable once built: shared by threads */
    bool server;
    char *server_name;          /* client default; NULL: none */
    unsigned char *alpn;        /* wire form (length-prefixed), server's choice list */
    unsigned alpn_len;
};

struct goro_tls_conn {
    SSL *ssl;
    int fd;
    int sys_err;                /* errno of the BIO's last failed recv/send */
    /* The BIO's recv / send of the last OpenSSL call found the socket not
     * ready (EAGAIN): its WANT_READ / WANT_WRITE waits for what comes
     * after (GORO_AFTER_EAGAIN). A WANT_* without it checks the state. */
    bool recv_blocked, send_blocked;
    goro_tls_config_t *cfg;
    /* OpenSSL's SSL is not thread-safe: a reader and a writer in two
     * coroutines take turns through mu, held only while OpenSSL runs,
     * never while parked. */
    goro_mutex_t mu;
    bool finished;              /* the handshake ended; alpn filled */
    bool shut_sent;             /* close_notify went out */
    char *name;                 /* client: the name given (SNI/host check) */
    char alpn[256];
    char err[512];
};

void goro_tls_config_ref(goro_tls_config_t *cfg);
/* A BIO reading and writing conn->fd with recv/send(MSG_NOSIGNAL): a peer
 * gone never raises SIGPIPE, and errno lands in conn->sys_err. */
BIO *goro_tls_bio_new(struct goro_tls_conn *conn);

#endif
