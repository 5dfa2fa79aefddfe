/* goro/tls.h - TLS streams over goro descriptors, on OpenSSL 3.
 *
 * A separate library, libgoro-tls (pkg-config goro-tls): a program that
 * does not include this header does not link OpenSSL. goro.h does not
 * include it. docs/tls.md has the guide; every call is documented here.
 *
 * The model: a configuration (goro_tls_config_t) holds what every
 * connection of one role shares - certificate and key, trusted CAs,
 * verification, ALPN, the lowest protocol version - built once into an
 * OpenSSL context and shared by any number of connections on any worker.
 * A connection (goro_tls_conn_t) runs TLS directly on a connected socket:
 * the handshake, reads, writes and shutdown park the coroutine with
 * goro_wait_fd whenever OpenSSL waits for the socket, like any goro I/O.
 *
 * Errors are negative errno values:
 *   -ETIMEDOUT     the deadline passed;
 *   -ECANCELED     the coroutine was cancelled (goro_cancel);
 *   -EKEYREJECTED  the peer's certificate failed verification (wrong CA,
 *                  expired, wrong host name): goro_tls_verify_result()
 *                  gives OpenSSL's X509_V_ERR_* code and goro_tls_error()
 *                  its text;
 *   -EPROTO        any other TLS failure: a record that is not TLS, an
 *                  alert from the peer (it rejected our certificate, no
 *                  common protocol or ALPN), a handshake failure;
 *                  goro_tls_error() says which;
 *   -ECONNRESET    the peer closed the TCP connection without sending
 *                  close_notify (the data may have been cut short), or
 *                  reset it;
 *   -EPIPE         writing after the peer closed;
 *   -EINVAL        bad arguments; -ENOMEM; -EBADF;
 *   other socket errors as the system gives them.
 * After any error but -ETIMEDOUT and -ECANCELED the connection is broken:
 * only goro_tls_error(), the accessors and goro_tls_free() remain useful.
 * After -ETIMEDOUT or -ECANCELED it may be tried again with the same
 * arguments (OpenSSL keeps its progress) or freed.
 *
 * OpenSSL's error queue is per thread and a coroutine may move between
 * threads at any goro call: every call here drains the queue into the
 * connection's own error text before it parks, and nothing of OpenSSL's
 * per-thread error state survives a switch. goro_tls_error() is the only
 * place to read errors from; ERR_get_error() after these calls finds
 * nothing.
 */
#include "../goro.h"    /* first, as every goro/ header: goro.h, then its own */
#ifndef GORO_TLS_H
#define GORO_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Who checks whose certificate. */
enum goro_tls_verify {
    GORO_TLS_VERIFY_DEFAULT,  /* client: verify the server (as _PEER);
                                 server: ask for no client certificate */
    GORO_TLS_VERIFY_PEER,     /* client: verify the server; server: ask for a
                                 client certificate, verify it if one comes */
    GORO_TLS_VERIFY_REQUIRE,  /* as _PEER; a server also fails a client
                                 that sends no certificate */
    GORO_TLS_VERIFY_NONE,     /* no verification at all (tests, load tools);
                                 never for a client that talks to the world */
};

/* Protocol versions for min_version. */
enum goro_tls_version {
    GORO_TLS_1_2 = 0x0303,
    GORO_TLS_1_3 = 0x0304,
};

/* What a configuration is built from. Zero fields mean "the default".
 * Every string is copied by goro_tls_config_new; none need outlive it. */
typedef struct goro_tls_options {
    bool server;               /* the server role (default: client) */
    /* Our certificate (chain) and private key, PEM: as files or as text in
     * memory (not both). A server needs one; a client sends one if it has
     * it and the server asks. */
    const char *cert_file, *key_file;
    const char *cert_pem, *key_pem;
    /* Whom to trust: a CA bundle file, a hashed CA directory (c_rehash),
     * and/or PEM text. None of them: the system's store (OpenSSL's default
     * paths, /etc/ssl/certs on Debian). */
    const char *ca_file, *ca_dir, *ca_pem;
    int verify;                /* enum goro_tls_verify */
    /* Client: the name sent as SNI and checked against the server's
     * certificate, unless goro_tls_client is given one. An IP address
     * literal is checked as an address and sent as no SNI. */
    const char *server_name;
    /* ALPN protocols, most wanted first, NULL-terminated ("h2",
     * "http/1.1", NULL), each 1..255 bytes. A client offers them; a server
     * picks the first of its own list the client offers, and fails the
     * handshake (no_application_protocol) when the client offers ALPN and
     * none matches. NULL: no ALPN. */
    const char *const *alpn;
    int min_version;           /* enum goro_tls_version; default GORO_TLS_1_2 */
} goro_tls_options_t;

typedef struct goro_tls_config goro_tls_config_t;
typedef struct goro_tls_conn goro_tls_conn_t;

/* Builds a configuration (an OpenSSL context) from opts: loads the
 * certificate, key and CAs now, so that a bad file shows here. Never
 * switches. Returns 0 and *cfg, or -EINVAL (NULL arguments, both a file
 * and PEM text for one thing, a server without a certificate, a bad ALPN
 * list or version), -ENOENT / -EACCES (a file that cannot be opened),
 * -EBADMSG (a file or PEM text that is not a certificate or key, or a key
 * that does not match the certificate), -ENOMEM. On failure, when err is
 * not NULL, the reason is written to err (errlen bytes, NUL-terminated).
 * A configuration may be used by any number of connections on any thread
 * at once; it is immutable. */
int goro_tls_config_new(const goro_tls_options_t *opts, goro_tls_config_t **cfg,
                        char *err, size_t errlen);

/* Drops the caller's reference. Connections made from cfg keep it alive
 * until they are freed, so it may be freed while they run. NULL is fine. */
void goro_tls_config_free(goro_tls_config_t *cfg);

/* A TLS connection on fd, a connected stream socket, as the client
 * (cfg must be a client configuration) or as the server (a server one).
 * server_name (client only; NULL: cfg's) is the SNI sent and the name
 * the certificate must carry; with verification on and no name at all
 * the certificate is checked against the CAs only. Nothing is sent yet:
 * the handshake happens at goro_tls_handshake or at the first read or
 * write. Never switches. Returns 0 and *conn, or -EINVAL (NULL arguments,
 * a configuration of the other role, fd < 0), -ENOMEM.
 *
 * Ownership: fd stays the caller's. The connection uses it (and makes it
 * non-blocking, as goro I/O does) until goro_tls_free; the caller closes
 * it (goro_close) after that. At most one coroutine reads and at most one
 * writes at a time; once the handshake is done, a read and a write may
 * run at once in two coroutines (OpenSSL's state is shared between them,
 * so they take turns inside OpenSSL; each parks on its own readiness). */
int goro_tls_client(int fd, goro_tls_config_t *cfg, const char *server_name,
                    goro_tls_conn_t **conn);
int goro_tls_server(int fd, goro_tls_config_t *cfg, goro_tls_conn_t **conn);

/* Runs the handshake to its end (may switch). Returns 0 (also when it is
 * already done), or -ETIMEDOUT, -ECANCELED, -EKEYREJECTED, -EPROTO,
 * -ECONNRESET (the peer closed during the handshake), a socket error. */
int goro_tls_handshake(goro_tls_conn_t *conn);
int goro_tls_handshake_until(goro_tls_conn_t *conn, int64_t deadline);

/* Reads up to len decrypted bytes, parking until at least one is there
 * (runs the handshake first if needed). Returns the count; 0 when the
 * peer sent close_notify (a clean end); or a negative errno, -ECONNRESET
 * when the TCP stream ended without close_notify. len 0 returns 0. */
ssize_t goro_tls_read(goro_tls_conn_t *conn, void *buf, size_t len);
ssize_t goro_tls_read_until(goro_tls_conn_t *conn, void *buf, size_t len, int64_t deadline);

/* Writes all len bytes (runs the handshake first if needed), parking as
 * often as needed. Returns len, or a negative errno; then *written (if
 * not NULL) says how many bytes OpenSSL took (they may still be in
 * flight). A write after -ETIMEDOUT or -ECANCELED must go on from buf +
 * *written. */
ssize_t goro_tls_write(goro_tls_conn_t *conn, const void *buf, size_t len);
ssize_t goro_tls_write_until(goro_tls_conn_t *conn, const void *buf, size_t len,
                             size_t *written, int64_t deadline);

/* Sends close_notify (the TLS end of stream; runs the handshake first if
 * needed, with its errors) and returns once it is out;
 * does not wait for the peer's (read until 0 for that). Reading stays
 * possible. Returns 0 (also the second time), or a negative errno as
 * write. Does not close fd. */
int goro_tls_shutdown(goro_tls_conn_t *conn);
int goro_tls_shutdown_until(goro_tls_conn_t *conn, int64_t deadline);

/* Frees the connection without sending anything and without closing fd
 * (call goro_tls_shutdown first for a clean end, goro_close(fd) after).
 * Never switches. NULL is fine. No other call on conn may be running. */
void goro_tls_free(goro_tls_conn_t *conn);

/* The ALPN protocol agreed on ("h2"), or NULL: none, or no handshake yet.
 * Valid until goro_tls_free. */
const char *goro_tls_alpn(const goro_tls_conn_t *conn);

/* Server: the name the client sent as SNI, or NULL. Client: the name it
 * sent. Valid until goro_tls_free. */
const char *goro_tls_server_name(const goro_tls_conn_t *conn);

/* The peer certificate's verification result: 0 (X509_V_OK) when it was
 * verified or not asked for, else OpenSSL's X509_V_ERR_* code. */
long goro_tls_verify_result(const goro_tls_conn_t *conn);

/* The negotiated protocol version (enum goro_tls_version), 0 before the
 * handshake. */
int goro_tls_version(const goro_tls_conn_t *conn);

/* What went wrong last: OpenSSL's reasons and the verification error, as
 * one line ("" when nothing did). Owned by conn; valid until its next
 * call. */
const char *goro_tls_error(const goro_tls_conn_t *conn);

#ifdef __cplusplus
}
#endif

#endif /* GORO_TLS_H */
