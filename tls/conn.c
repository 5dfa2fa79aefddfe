/* TLS connections: OpenSSL on a socket, parking on the socket's readiness
 * whenever OpenSSL asks for it.
 *
 * Every OpenSSL call goes through step(): under the connection's mutex
 * (OpenSSL's SSL is not thread-safe, and a reader and a writer may run in
 * two coroutines) and inside a no-preempt section, it clears the thread's
 * error queue, makes the call, and drains the queue into conn->err before
 * leaving. The invariant: the thread's OpenSSL error queue is empty
 * whenever a coroutine can switch (a park, a preemption), so no coroutine
 * reads another's errors and none loses its own by moving to another
 * thread. Then, outside the lock, a WANT_READ / WANT_WRITE parks with
 * goro_wait_fd and the same call is made again with the same arguments. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls_internal.h"

enum op { OP_HANDSHAKE, OP_READ, OP_WRITE, OP_SHUTDOWN };

/* One OpenSSL call's outcome, read inside the section. */
struct outcome {
    int ret;            /* the call's return */
    int ssl_err;        /* SSL_get_error */
    size_t done;        /* bytes read or written */
    unsigned long first;/* the first queued error (0: none) */
    int code;           /* a failure's negative errno */
    bool after_eagain;  /* the WANT_* came from the socket's EAGAIN */
};

static void append(struct goro_tls_conn *c, const char *s)
{
    size_t n = strlen(c->err);
    if (n + 3 < sizeof c->err)
        snprintf(c->err + n, sizeof c->err - n, "%s%s", n ? ": " : "", s);
}

/* Empties this thread's error queue into c->err. */
static unsigned long drain(struct goro_tls_conn *c)
{
    unsigned long e, first = 0;
    const char *data;
    int flags;
    while ((e = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0) {
        if (first == 0)
            first = e;
        const char *r = ERR_reason_error_string(e);
        char buf[160];
        snprintf(buf, sizeof buf, "%s%s%s", r ? r : "unknown error",
                 (flags & ERR_TXT_STRING) && data && *data ? " " : "",
                 (flags & ERR_TXT_STRING) && data ? data : "");
        append(c, buf);
    }
    return first;
}

static void call(struct goro_tls_conn *c, enum op op, void *buf, size_t len, struct outcome *o)
{
    o->done = 0;
    switch (op) {
    case OP_HANDSHAKE:
        o->ret = SSL_do_handshake(c->ssl);
        break;
    case OP_READ:
        o->ret = SSL_read_ex(c->ssl, buf, len, &o->done);
        break;
    case OP_WRITE:
        o->ret = SSL_write_ex(c->ssl, buf, len, &o->done);
        break;
    case OP_SHUTDOWN:
        o->ret = SSL_shutdown(c->ssl);
        if (o->ret == 0)
            o->ret = 1;     /* ours is out; the peer's is read by goro_tls_read */
        break;
    }
}

static int failure(struct goro_tls_conn *c, const struct outcome *o)
{
    if (o->ssl_err == SSL_ERROR_SYSCALL) {
        if (c->sys_err != 0) {
            append(c, strerror(c->sys_err));
            return -c->sys_err;
        }
        append(c, "the peer closed the connection without close_notify");
        return -ECONNRESET;
    }
    int reason = ERR_GET_REASON(o->first);
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
        return -EKEYREJECTED;
    if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        return -ECONNRESET;
    }
    if (c->sys_err != 0)
        return -c->sys_err;
    if (c->err[0] == '\0')
        append(c, "TLS failure");
    return -EPROTO;
}

/* Empties this thread's error queue. It is empty here unless code other
 * than this file's left errors on the thread, and SSL_get_error needs it
 * empty. ERR_clear_error resets all of the queue's 16 slots whether they
 * hold anything or not: 184 ns here, against 22 ns for ERR_peek_error,
 * and each TLS round trip of an echo passes here six times. The oldest
 * entry may have the code 0 (ERR_raise(0, 0)): the newest is looked at
 * too. (A queue of nothing but such entries stays: SSL_get_error, which
 * peeks the same way, does not see it either.) */
static void clear_errors(void)
{
    if (ERR_peek_error() != 0 || ERR_peek_last_error() != 0)
        ERR_clear_error();
}

/* The section: see the top of the file. */
static int step(struct goro_tls_conn *c, enum op op, void *buf, size_t len, int64_t deadline,
                struct outcome *o)
{
    int r = goro_mutex_lock_until(&c->mu, deadline);
    if (r < 0)
        return r;
    goro_preempt_disable();
    clear_errors();
    c->sys_err = 0;
    c->recv_blocked = c->send_blocked = false;
    call(c, op, buf, len, o);
    o->ssl_err = o->ret > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, o->ret);
    o->after_eagain = o->ssl_err == SSL_ERROR_WANT_READ ? c->recv_blocked
                    : o->ssl_err == SSL_ERROR_WANT_WRITE && c->send_blocked;
    o->first = 0;
    o->code = -EPROTO;          /* an SSL_ERROR_* not handled below */
    if (o->ssl_err == SSL_ERROR_SSL || o->ssl_err == SSL_ERROR_SYSCALL) {
        c->err[0] = '\0';
        o->first = drain(c);
        long v = SSL_get_verify_result(c->ssl);
        if (v != X509_V_OK)
            append(c, X509_verify_cert_error_string(v));
        /* Here, under the lock: c->err is written by one side at a time. */
        o->code = failure(c, o);
    }
    clear_errors();
    if (!c->finished && SSL_is_init_finished(c->ssl)) {
        const unsigned char *p;
        unsigned n;
        SSL_get0_alpn_selected(c->ssl, &p, &n);
        if (n > 0)                  /* none agreed: p is NULL */
            memcpy(c->alpn, p, n);
        c->alpn[n] = '\0';
        c->finished = true;
    }
    goro_preempt_enable();
    goro_mutex_unlock(&c->mu);
    return 0;
}

/* Runs op until it succeeds or fails, parking in between. Returns the
 * bytes done (read, write), 0 (handshake, shutdown, a read at
 * close_notify), or a negative errno. */
static ssize_t run(struct goro_tls_conn *c, enum op op, void *buf, size_t len, int64_t deadline)
{
    for (;;) {
        struct outcome o;
        int r = step(c, op, buf, len, deadline, &o);
        if (r < 0)
            return r;
        int events;
        switch (o.ssl_err) {
        case SSL_ERROR_NONE:
            return (ssize_t)o.done;
        case SSL_ERROR_ZERO_RETURN:
            return 0;
        case SSL_ERROR_WANT_READ:
            events = GORO_READABLE;
            break;
        case SSL_ERROR_WANT_WRITE:
            events = GORO_WRITABLE;
            break;
        default:
            return o.code;
        }
        /* After the BIO's own EAGAIN the socket's state is known: wait
         * for what comes next, without a poll to learn it again. */
        if (o.after_eagain)
            events |= GORO_AFTER_EAGAIN;
        if ((r = goro_wait_fd(c->fd, events, deadline)) < 0)
            return r;
    }
}

static int make(int fd, goro_tls_config_t *cfg, bool server, goro_tls_conn_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (fd < 0 || cfg == NULL || cfg->server != server)
        return -EINVAL;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    struct goro_tls_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->fd = fd;
    goro_mutex_init(&c->mu);
    c->ssl = SSL_new(cfg->ctx);
    BIO *b = c->ssl ? goro_tls_bio_new(c) : NULL;
    ERR_clear_error();
    if (b == NULL) {
        SSL_free(c->ssl);
        free(c);
        return -ENOMEM;
    }
    SSL_set_bio(c->ssl, b, b);
    goro_tls_config_ref(cfg);
    c->cfg = cfg;
    if (server)
        SSL_set_accept_state(c->ssl);
    else
        SSL_set_connect_state(c->ssl);
    *out = c;
    return 0;
}

/* The name's two uses: SNI (host names only) and the certificate check
 * (a host name, or an address literal as an address). */
static int set_name(struct goro_tls_conn *c, const char *name)
{
    if ((c->name = strdup(name)) == NULL)
        return -ENOMEM;
    unsigned char addr[16];
    bool ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), name)
                : SSL_set_tlsext_host_name(c->ssl, name) == 1 && SSL_set1_host(c->ssl, name) == 1;
    ERR_clear_error();
    return ok ? 0 : -EINVAL;
}

TLS_API int goro_tls_client(int fd, goro_tls_config_t *cfg, const char *server_name,
                            goro_tls_conn_t **conn)
{
    int r = make(fd, cfg, false, conn);
    if (r < 0)
        return r;
    const char *name = server_name ? server_name : cfg->server_name;
    if (name != NULL && (r = set_name(*conn, name)) < 0) {
        goro_tls_free(*conn);
        *conn = NULL;
    }
    return r;
}

TLS_API int goro_tls_server(int fd, goro_tls_config_t *cfg, goro_tls_conn_t **conn)
{
    return make(fd, cfg, true, conn);
}

TLS_API int goro_tls_handshake_until(goro_tls_conn_t *c, int64_t deadline)
{
    if (c == NULL)
        return -EINVAL;
    return (int)run(c, OP_HANDSHAKE, NULL, 0, deadline);
}

TLS_API int goro_tls_handshake(goro_tls_conn_t *c)
{
    return goro_tls_handshake_until(c, GORO_FOREVER);
}

TLS_API ssize_t goro_tls_read_until(goro_tls_conn_t *c, void *buf, size_t len, int64_t deadline)
{
    if (c == NULL || (buf == NULL && len > 0))
        return -EINVAL;
    if (len == 0)
        return 0;
    return run(c, OP_READ, buf, len, deadline);
}

TLS_API ssize_t goro_tls_read(goro_tls_conn_t *c, void *buf, size_t len)
{
    return goro_tls_read_until(c, buf, len, GORO_FOREVER);
}

TLS_API ssize_t goro_tls_write_until(goro_tls_conn_t *c, const void *buf, size_t len,
                                     size_t *written, int64_t deadline)
{
    size_t done = 0;
    if (written != NULL)
        *written = 0;
    if (c == NULL || (buf == NULL && len > 0) || len > SSIZE_MAX)
        return -EINVAL;
    while (done < len) {
        /* Partial writes on: each call returns after a record or more. */
        ssize_t n = run(c, OP_WRITE, (char *)buf + done, len - done, deadline);
        if (n < 0) {
            if (written != NULL)
                *written = done;
            return n;
        }
        done += (size_t)n;
    }
    if (written != NULL)
        *written = done;
    return (ssize_t)len;
}

TLS_API ssize_t goro_tls_write(goro_tls_conn_t *c, const void *buf, size_t len)
{
    return goro_tls_write_until(c, buf, len, NULL, GORO_FOREVER);
}

TLS_API int goro_tls_shutdown_until(goro_tls_conn_t *c, int64_t deadline)
{
    if (c == NULL)
        return -EINVAL;
    if (c->shut_sent)
        return 0;
    int r = goro_tls_handshake_until(c, deadline);
    if (r == 0 && (r = (int)run(c, OP_SHUTDOWN, NULL, 0, deadline)) == 0)
        c->shut_sent = true;
    return r;
}

TLS_API int goro_tls_shutdown(goro_tls_conn_t *c)
{
    return goro_tls_shutdown_until(c, GORO_FOREVER);
}

TLS_API void goro_tls_free(goro_tls_conn_t *c)
{
    if (c == NULL)
        return;
    SSL_free(c->ssl);               /* and the BIO */
    ERR_clear_error();
    goro_mutex_destroy(&c->mu);
    goro_tls_config_free(c->cfg);
    free(c->name);
    free(c);
}

TLS_API const char *goro_tls_alpn(const goro_tls_conn_t *c)
{
    return c != NULL && c->alpn[0] ? c->alpn : NULL;
}

TLS_API const char *goro_tls_server_name(const goro_tls_conn_t *c)
{
    if (c == NULL)
        return NULL;
    if (!c->cfg->server)
        return c->name;
    return SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
}

TLS_API long goro_tls_verify_result(const goro_tls_conn_t *c)
{
    return c != NULL ? SSL_get_verify_result(c->ssl) : X509_V_OK;
}

TLS_API int goro_tls_version(const goro_tls_conn_t *c)
{
    return c != NULL && c->finished ? SSL_version(c->ssl) : 0;
}

TLS_API const char *goro_tls_error(const goro_tls_conn_t *c)
{
    return c != NULL ? c->err : "";
}
