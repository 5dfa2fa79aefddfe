/* The socket BIO of a TLS connection: recv and send on the connection's
 * descriptor. OpenSSL's own socket BIO writes with write(), which raises
 * SIGPIPE when the peer is gone; goro's I/O never does (goro.h), so this
 * one sends with MSG_NOSIGNAL. A call that would block sets the retry flag
 * and returns -1: OpenSSL then reports SSL_ERROR_WANT_READ/WRITE and the
 * connection parks (conn.c). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "tls_internal.h"

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static int bio_read(BIO *b, char *buf, int len)
{
    struct goro_tls_conn *conn = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t n = recv(conn->fd, buf, (size_t)len, 0);
        if (n >= 0)
            return (int)n;          /* 0: end of stream */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            BIO_set_retry_read(b);
            conn->recv_blocked = true;
        } else
            conn->sys_err = errno;
        return -1;
    }
}

static int bio_write(BIO *b, const char *buf, int len)
{
    struct goro_tls_conn *conn = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t n = send(conn->fd, buf, (size_t)len, MSG_NOSIGNAL);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            BIO_set_retry_write(b);
            conn->send_blocked = true;
        } else
            conn->sys_err = errno;
        return -1;
    }
}

static int bio_puts(BIO *b, const char *s)
{
    return bio_write(b, s, (int)strlen(s));
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    /* Nothing is buffered here: a flush has nothing to do. Every other
     * request (kTLS, pending counts, descriptors) is not supported. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void make_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "goro socket");
    if (m == NULL)
        return;
    if (!BIO_meth_set_read(m, bio_read) || !BIO_meth_set_write(m, bio_write) ||
        !BIO_meth_set_puts(m, bio_puts) || !BIO_meth_set_ctrl(m, bio_ctrl) ||
        !BIO_meth_set_create(m, bio_create)) {
        BIO_meth_free(m);
        return;
    }
    method = m;
}

BIO *goro_tls_bio_new(struct goro_tls_conn *conn)
{
    pthread_once(&method_once, make_method);
    if (method == NULL)
        return NULL;
    BIO *b = BIO_new(method);
    if (b != NULL)
        BIO_set_data(b, conn);
    return b;
}
