/* libgoro-tls (include/goro/tls.h): goro against goro, against the
 * `openssl s_server` and `s_client` commands, verification failures,
 * deadlines and cancellation mid-handshake, garbage records, the end of a
 * stream, large transfers both ways, many connections on two workers, and
 * bad input. Certificates (ECDSA P-256) are made at start by
 * tests/tls/mkcerts.sh in a temporary directory.
 *
 * A test binary of its own: it links OpenSSL, which goro_tests must not.
 * The rules of tests/helpers.h hold: coroutines never ck_assert, they
 * record a failure with tfail() and the test asserts failed() == NULL. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>

#include "goro.h"
#include "goro/tls.h"

extern char **environ;

static char dir[256];               /* the certificates */
static char failmsg[512];
static atomic_int failed_flag;

static void tfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tfail(const char *fmt, ...)
{
    if (atomic_exchange(&failed_flag, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failmsg, sizeof failmsg, fmt, ap);
    va_end(ap);
}

static const char *failed(void)
{
    return atomic_load(&failed_flag) ? failmsg : NULL;
}

#define CHECK(cond, ...) do { if (!(cond)) { tfail(__VA_ARGS__); return -1; } } while (0)

static bool slow(void)
{
    return getenv("GORO_TEST_SLOW") != NULL || getenv("GORO_TEST_VALGRIND") != NULL;
}

static const char *path(const char *name)
{
    static __thread char buf[4][320];
    static __thread int i;
    char *p = buf[i++ % 4];
    snprintf(p, 320, "%s/%s", dir, name);
    return p;
}

static void setup(void)
{
    atomic_store(&failed_flag, 0);
    ck_assert_int_eq(goro_start(&(goro_config_t){ .workers = 2 }), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(goro_shutdown(), 0);
}

/* ---- sockets ---- */

static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 512) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0)
        return -errno;
    int r = goro_connect(fd, (struct sockaddr *)&a, sizeof a);
    if (r < 0) {
        goro_close(fd);
        return r;
    }
    return fd;
}

/* ---- configurations ---- */

static const char *const alpn_server[] = { "h2", "http/1.1", NULL };
static const char *const alpn_client[] = { "http/1.1", "h2", NULL };

static goro_tls_config_t *server_cfg(int verify)
{
    goro_tls_config_t *cfg = NULL;
    char err[256];
    int r = goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_file = path("server.pem"), .key_file = path("server.key"),
        .ca_file = path("ca.pem"), .verify = verify, .alpn = alpn_server }, &cfg, err, sizeof err);
    ck_assert_msg(r == 0, "server config: %d %s", r, err);
    return cfg;
}

static goro_tls_config_t *client_cfg(const char *ca, bool with_cert)
{
    goro_tls_config_t *cfg = NULL;
    char err[256];
    int r = goro_tls_config_new(&(goro_tls_options_t){
        .ca_file = path(ca), .alpn = alpn_client, .server_name = "localhost",
        .cert_file = with_cert ? path("client.pem") : NULL,
        .key_file = with_cert ? path("client.key") : NULL }, &cfg, err, sizeof err);
    ck_assert_msg(r == 0, "client config: %d %s", r, err);
    return cfg;
}

/* ---- a goro echo server: one connection, echoes until the end ---- */

struct served {
    char sni[64];
    char alpn[16];
    int result;                 /* the handshake's, or the echo's first error */
    char err[512];
};

static long echo_one(int lfd, goro_tls_config_t *cfg, struct served *s)
{
    int fd = goro_accept(lfd, NULL, NULL);
    if (fd < 0) {
        s->result = fd;
        return fd;
    }
    goro_tls_conn_t *c;
    int r = goro_tls_server(fd, cfg, &c);
    if (r == 0 && (r = goro_tls_handshake(c)) == 0) {
        snprintf(s->sni, sizeof s->sni, "%s", goro_tls_server_name(c) ?: "");
        snprintf(s->alpn, sizeof s->alpn, "%s", goro_tls_alpn(c) ?: "");
        char buf[16384];
        ssize_t n;
        while ((n = goro_tls_read(c, buf, sizeof buf)) > 0)
            if ((n = goro_tls_write(c, buf, (size_t)n)) < 0)
                break;
        r = n < 0 ? (int)n : goro_tls_shutdown(c);
    }
    s->result = r;
    if (c != NULL)
        snprintf(s->err, sizeof s->err, "%s", goro_tls_error(c));
    goro_tls_free(c);
    goro_close(fd);
    return r;
}

static long echo_detached(int lfd, goro_tls_config_t *cfg)
{
    struct served s = { 0 };
    long r = echo_one(lfd, cfg, &s);
    if (r < 0)
        tfail("server: %ld %s", r, s.err);
    return r;
}

static long echo_many(int lfd, goro_tls_config_t *cfg, int n)
{
    for (int i = 0; i < n; i++)
        if (goro_go(NULL, NULL, echo_detached, lfd, cfg) != 0)
            tfail("spawn");
    return 0;
}

/* A client: connects, writes msg, reads it back, closes cleanly. */
static long echo_client(int port, goro_tls_config_t *cfg, const char *name, const char *msg,
                        int rounds)
{
    int fd = dial(port);
    CHECK(fd >= 0, "dial: %d", fd);
    goro_tls_conn_t *c;
    int r = goro_tls_client(fd, cfg, name, &c);
    CHECK(r == 0, "goro_tls_client: %d", r);
    size_t len = strlen(msg);
    for (int i = 0; i < rounds && r == 0; i++) {
        char buf[256];
        ssize_t n = goro_tls_write(c, msg, len);
        if (n != (ssize_t)len) {
            tfail("write: %zd %s", n, goro_tls_error(c));
            r = -1;
            break;
        }
        size_t got = 0;
        while (got < len && (n = goro_tls_read(c, buf + got, sizeof buf - got)) > 0)
            got += (size_t)n;
        if (got != len || memcmp(buf, msg, len) != 0) {
            tfail("read back %zu of %zu (%zd %s)", got, len, n, goro_tls_error(c));
            r = -1;
        }
    }
    if (r == 0 && (r = goro_tls_shutdown(c)) != 0)
        tfail("shutdown: %d %s", r, goro_tls_error(c));
    char b;
    ssize_t end = r == 0 ? goro_tls_read(c, &b, 1) : 0;
    if (r == 0 && end != 0)
        tfail("after our close_notify the server's: %zd %s", end, goro_tls_error(c));
    goro_tls_free(c);
    goro_close(fd);
    return r;
}

START_TEST(echo_goro)
{
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    goro_t *cli = go(echo_client, port, ccfg, NULL, "hello over TLS", 3);
    long r;
    ck_assert_int_eq(goro_join(cli, &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_msg(s.result == 0, "server: %d %s", s.result, s.err);
    ck_assert_str_eq(s.sni, "localhost");       /* from the config's server_name */
    ck_assert_str_eq(s.alpn, "h2");             /* the server's preference */
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
    goro_close(lfd);
}
END_TEST

/* ---- verification ---- */

static long verify_client(int port, goro_tls_config_t *cfg, const char *name, long *vr,
                          char *err)
{
    int fd = dial(port);
    CHECK(fd >= 0, "dial: %d", fd);
    goro_tls_conn_t *c;
    int r = goro_tls_client(fd, cfg, name, &c);
    CHECK(r == 0, "goro_tls_client: %d", r);
    r = goro_tls_handshake(c);
    *vr = goro_tls_verify_result(c);
    snprintf(err, 512, "%s", goro_tls_error(c));
    goro_tls_free(c);
    goro_close(fd);
    return r;
}

static void expect_rejected(const char *ca, const char *name, long want_vr)
{
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg(ca, false);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    long vr = 0, r;
    char err[512] = "";
    goro_t *cli = go(verify_client, port, ccfg, name, &vr, err);
    ck_assert_int_eq(goro_join(cli, &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_msg(r == -EKEYREJECTED, "client: %ld (%s)", r, err);
    ck_assert_int_eq(vr, want_vr);
    ck_assert_msg(strstr(err, "certificate verify failed") != NULL, "error text: %s", err);
    ck_assert_int_eq(goro_join(srv, &r), 0);
    /* The server hears the client's alert. */
    ck_assert_msg(s.result == -EPROTO, "server: %d (%s)", s.result, s.err);
    ck_assert_msg(s.err[0] != '\0', "the server's error text is empty");
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
    goro_close(lfd);
}

START_TEST(verify_wrong_ca)
{
    expect_rejected("other-ca.pem", NULL, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}
END_TEST

START_TEST(verify_wrong_host)
{
    expect_rejected("ca.pem", "example.org", X509_V_ERR_HOSTNAME_MISMATCH);
}
END_TEST

START_TEST(verify_ip_name)
{
    /* An address as the name: checked against the certificate's IP SAN. */
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    goro_t *cli = go(echo_client, port, ccfg, "127.0.0.1", "by address", 1);
    long r;
    ck_assert_int_eq(goro_join(cli, &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_msg(s.result == 0, "server: %d %s", s.result, s.err);
    ck_assert_str_eq(s.sni, "");                /* no SNI for an address */
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
    goro_close(lfd);
}
END_TEST

START_TEST(client_cert_required)
{
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_REQUIRE);
    goro_tls_config_t *with = client_cfg("ca.pem", true);
    goro_tls_config_t *without = client_cfg("ca.pem", false);
    struct served s1 = { 0 }, s2 = { 0 };
    long r;
    goro_t *srv = go(echo_one, lfd, scfg, &s1);
    goro_t *cli = go(echo_client, port, with, NULL, "with a certificate", 1);
    ck_assert_int_eq(goro_join(cli, &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_msg(s1.result == 0, "server: %d %s", s1.result, s1.err);
    /* Without one: the server fails the handshake; in TLS 1.3 the client
     * learns it at its first read. */
    srv = go(echo_one, lfd, scfg, &s2);
    cli = go(echo_client, port, without, NULL, "without", 1);
    ck_assert_int_eq(goro_join(cli, &r), 0);
    ck_assert_int_eq(r, -1);
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_msg(s2.result == -EPROTO, "server: %d %s", s2.result, s2.err);
    ck_assert_msg(strstr(s2.err, "certificate") != NULL, "server's error: %s", s2.err);
    goro_tls_config_free(scfg);
    goro_tls_config_free(with);
    goro_tls_config_free(without);
    goro_close(lfd);
}
END_TEST

/* ---- deadlines, cancellation, garbage ---- */

/* A client handshake against a peer that accepted TCP (the backlog did)
 * and never speaks. in_handshake: set as the handshake begins. */
static atomic_int in_handshake;

static long silent_handshake(int port, int64_t deadline)
{
    goro_tls_config_t *cfg = client_cfg("ca.pem", false);
    int fd = dial(port);
    CHECK(fd >= 0, "dial: %d", fd);
    goro_tls_conn_t *c;
    int r = goro_tls_client(fd, cfg, NULL, &c);
    CHECK(r == 0, "goro_tls_client: %d", r);
    goro_tls_config_free(cfg);         /* the connection keeps it */
    atomic_store(&in_handshake, 1);
    r = goro_tls_handshake_until(c, deadline);
    goro_tls_free(c);
    goro_close(fd);
    return r;
}

START_TEST(handshake_deadline)
{
    int port, lfd = listener(&port);
    int64_t t0 = goro_now();
    long r;
    ck_assert_int_eq(goro_join(go(silent_handshake, port, t0 + 100 * GORO_MSEC), &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(r, -ETIMEDOUT);
    ck_assert(goro_now() - t0 >= 100 * GORO_MSEC);
    close(lfd);
}
END_TEST

START_TEST(handshake_cancel)
{
    int port, lfd = listener(&port);
    atomic_store(&in_handshake, 0);
    goro_t *h = go(silent_handshake, port, GORO_FOREVER);
    /* Cancelled in the handshake, not before: loading the CA and dialling
     * took more than the 50 ms this once slept, under TSan (the dial then
     * said -ECANCELED). A cancel that comes just before the handshake
     * parks ends that park all the same (cancellation is sticky). */
    int64_t give_up = goro_now() + 30 * GORO_SEC;
    while (!atomic_load(&in_handshake) && goro_now() < give_up)
        goro_sleep(GORO_MSEC);
    ck_assert_msg(atomic_load(&in_handshake), "the handshake never began");
    goro_sleep(10 * GORO_MSEC);        /* most often parked by now */
    ck_assert_int_eq(goro_cancel(h), 0);
    long r;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(r, -ECANCELED);
    close(lfd);
}
END_TEST

/* A peer that answers a ClientHello with bytes that are not TLS. */
static long garbage_peer(int lfd, const char *junk)
{
    int fd = goro_accept(lfd, NULL, NULL);
    CHECK(fd >= 0, "accept: %d", fd);
    char buf[4096];
    goro_read(fd, buf, sizeof buf);
    goro_write_all(fd, junk, strlen(junk));
    goro_sleep(200 * GORO_MSEC);
    goro_close(fd);
    return 0;
}

static long garbage_client(int port, const char *junk)
{
    int fd = dial(port);
    CHECK(fd >= 0, "dial: %d", fd);
    goro_write_all(fd, junk, strlen(junk));
    goro_sleep(200 * GORO_MSEC);
    goro_close(fd);
    return 0;
}

START_TEST(garbage_records)
{
    int port, lfd = listener(&port);
    const char *junk = "HTTP/1.1 400 Bad Request\r\n\r\n\x16\x03\x03\xff\xff garbage";
    /* The client meets garbage. */
    goro_t *peer = go(garbage_peer, lfd, junk);
    long vr, r;
    char err[512];
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    ck_assert_int_eq(goro_join(go(verify_client, port, ccfg, NULL, &vr, err), &r), 0);
    ck_assert_msg(r == -EPROTO, "client: %ld %s", r, err);
    ck_assert_msg(err[0] != '\0', "no error text");
    ck_assert_int_eq(goro_join(peer, NULL), 0);
    /* The server meets garbage. */
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    ck_assert_int_eq(goro_join(go(garbage_client, port, junk), NULL), 0);
    ck_assert_int_eq(goro_join(srv, NULL), 0);
    ck_assert_msg(s.result == -EPROTO, "server: %d %s", s.result, s.err);
    ck_assert_msg(failed() == NULL, "%s", failed());
    goro_tls_config_free(ccfg);
    goro_tls_config_free(scfg);
    goro_close(lfd);
}
END_TEST

/* ---- the end of a stream ---- */

/* Serves one connection: handshake, write "bye", then a clean close
 * (close_notify) or a bare TCP close. */
static long closer(int lfd, goro_tls_config_t *cfg, bool clean)
{
    int fd = goro_accept(lfd, NULL, NULL);
    CHECK(fd >= 0, "accept: %d", fd);
    goro_tls_conn_t *c;
    goro_tls_server(fd, cfg, &c);
    int r = goro_tls_handshake(c);
    if (r == 0)
        r = (int)goro_tls_write(c, "bye", 3);
    if (r >= 0 && clean)
        r = goro_tls_shutdown(c);
    goro_tls_free(c);
    goro_close(fd);
    return r < 0 ? r : 0;
}

static long read_to_end(int port, goro_tls_config_t *cfg, long *end)
{
    int fd = dial(port);
    CHECK(fd >= 0, "dial: %d", fd);
    goro_tls_conn_t *c;
    goro_tls_client(fd, cfg, NULL, &c);
    char buf[64];
    size_t got = 0;
    ssize_t n;
    while ((n = goro_tls_read(c, buf + got, sizeof buf - got)) > 0)
        got += (size_t)n;
    *end = n;
    if (got != 3 || memcmp(buf, "bye", 3) != 0)
        tfail("read %zu bytes before the end (%zd %s)", got, n, goro_tls_error(c));
    /* A read after the end says the same again. */
    if (n == 0 && goro_tls_read(c, buf, 1) != 0)
        tfail("a second read after close_notify");
    goro_tls_free(c);
    goro_close(fd);
    return 0;
}

START_TEST(end_of_stream)
{
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    long end, r;
    goro_t *srv = go(closer, lfd, scfg, true);
    ck_assert_int_eq(goro_join(go(read_to_end, port, ccfg, &end), NULL), 0);
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(end, 0);                   /* close_notify: a clean end */
    srv = go(closer, lfd, scfg, false);
    ck_assert_int_eq(goro_join(go(read_to_end, port, ccfg, &end), NULL), 0);
    ck_assert_int_eq(goro_join(srv, &r), 0);
    ck_assert_int_eq(end, -ECONNRESET);         /* cut short */
    ck_assert_msg(failed() == NULL, "%s", failed());
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
    goro_close(lfd);
}
END_TEST

/* ---- large transfers, both ways at once ---- */

#define BIG (1 << 20)

static long pump_out(goro_tls_conn_t *c, unsigned seed)
{
    /* On the heap: a thread's variable would be another coroutine's after
     * a park moved this one. */
    enum { CHUNK = 65536 };
    unsigned char *chunk = malloc(CHUNK);
    CHECK(chunk != NULL, "malloc");
    for (size_t off = 0; off < BIG; off += CHUNK) {
        for (size_t i = 0; i < CHUNK; i++)
            chunk[i] = (unsigned char)((off + i) * 31 + seed);
        ssize_t n = goro_tls_write(c, chunk, CHUNK);
        if (n != CHUNK) {
            tfail("write: %zd %s", n, goro_tls_error(c));
            break;
        }
    }
    free(chunk);
    return failed() ? -1 : 0;
}

static long pump_in(goro_tls_conn_t *c, unsigned seed)
{
    unsigned char buf[20000];
    size_t got = 0;
    while (got < BIG) {
        ssize_t n = goro_tls_read(c, buf, sizeof buf);
        CHECK(n > 0, "read at %zu: %zd %s", got, n, goro_tls_error(c));
        for (ssize_t i = 0; i < n; i++)
            CHECK(buf[i] == (unsigned char)((got + (size_t)i) * 31 + seed),
                  "byte %zu differs", got + (size_t)i);
        got += (size_t)n;
    }
    return 0;
}

static long both_ways(int fd, goro_tls_config_t *cfg, bool server)
{
    goro_tls_conn_t *c;
    int r = server ? goro_tls_server(fd, cfg, &c) : goro_tls_client(fd, cfg, NULL, &c);
    CHECK(r == 0, "conn: %d", r);
    r = goro_tls_handshake(c);
    CHECK(r == 0, "handshake: %d %s", r, goro_tls_error(c));
    goro_t *out = go(pump_out, c, server ? 7u : 11u);
    goro_t *in = go(pump_in, c, server ? 11u : 7u);
    long a, b;
    goro_join(out, &a);
    goro_join(in, &b);
    goro_tls_free(c);
    goro_close(fd);
    return a | b;
}

START_TEST(large_both_ways)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    goro_t *a = go(both_ways, sv[0], scfg, true);
    goro_t *b = go(both_ways, sv[1], ccfg, false);
    long ra, rb;
    ck_assert_int_eq(goro_join(a, &ra), 0);
    ck_assert_int_eq(goro_join(b, &rb), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(ra | rb, 0);
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
}
END_TEST

/* ---- an error another library left on the thread ---- */

/* OpenSSL reads a failure from the thread's error queue: an entry left
 * there by the program's own use of OpenSSL must not turn a read that has
 * to wait into a TLS failure. */
static long read_with_a_stale_error(int fd, goro_tls_config_t *cfg, bool server)
{
    goro_tls_conn_t *c;
    int r = server ? goro_tls_server(fd, cfg, &c) : goro_tls_client(fd, cfg, NULL, &c);
    CHECK(r == 0, "conn: %d", r);
    r = goro_tls_handshake(c);
    CHECK(r == 0, "handshake: %d %s", r, goro_tls_error(c));
    char buf[16];
    if (server) {
        /* nothing comes before the client hears "go": the read waits */
        ERR_raise(ERR_LIB_USER, 1);
        ssize_t n = goro_tls_read_until(c, buf, sizeof buf, goro_now() + 20 * GORO_MSEC);
        CHECK(n == -ETIMEDOUT, "a read with nothing to read: %zd (%s), want -ETIMEDOUT", n,
              goro_tls_error(c));
        ERR_raise(ERR_LIB_USER, 2);
        CHECK(goro_tls_write(c, "go", 2) == 2, "write: %s", goro_tls_error(c));
        n = goro_tls_read(c, buf, sizeof buf);
        CHECK(n == 4 && memcmp(buf, "done", 4) == 0, "read: %zd (%s)", n, goro_tls_error(c));
    } else {
        /* bounded: a server that failed above never sends */
        ssize_t n = goro_tls_read_until(c, buf, sizeof buf, goro_now() + 5 * GORO_SEC);
        CHECK(n == 2 && memcmp(buf, "go", 2) == 0, "read: %zd (%s)", n, goro_tls_error(c));
        CHECK(goro_tls_write(c, "done", 4) == 4, "write: %s", goro_tls_error(c));
    }
    goro_tls_free(c);
    goro_close(fd);
    return 0;
}

START_TEST(stale_thread_error_is_not_the_connections)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    goro_t *a = go(read_with_a_stale_error, sv[0], scfg, true);
    goro_t *b = go(read_with_a_stale_error, sv[1], ccfg, false);
    ck_assert_int_eq(goro_join(a, NULL), 0);
    ck_assert_int_eq(goro_join(b, NULL), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
}
END_TEST

/* ---- many connections on two workers ---- */

START_TEST(many_connections)
{
    int n = slow() ? 20 : 200;
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    ck_assert_int_eq(goro_join(go(echo_many, lfd, scfg, n), NULL), 0);
    goro_t **h = calloc((size_t)n, sizeof *h);
    for (int i = 0; i < n; i++)
        h[i] = go(echo_client, port, ccfg, NULL, "a line of 64 bytes, more or less, for the echo", 10);
    for (int i = 0; i < n; i++) {
        long r;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        ck_assert_msg(r == 0, "client %d: %ld (%s)", i, r, failed());
    }
    free(h);
    goro_tls_config_free(scfg);
    goro_tls_config_free(ccfg);
    goro_close(lfd);     /* the servers ended with their clients */
}
END_TEST

/* ---- the openssl command as the peer ---- */

static pid_t spawn(char *const argv[], int in, int out)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    posix_spawn_file_actions_adddup2(&fa, in >= 0 ? in : devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, out >= 0 ? out : devnull, 1);
    posix_spawn_file_actions_adddup2(&fa, devnull, 2);
    pid_t pid;
    int r = posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(devnull);
    return r == 0 ? pid : -r;
}

/* A free port for a program that binds its own: bound, then released. */
static int free_port(void)
{
    int port, fd = listener(&port);
    close(fd);
    return fd < 0 ? -1 : port;
}

static long s_server_client(int port, goro_tls_config_t *cfg, char *alpn)
{
    int fd = -1;
    /* s_server is ready when it accepts. */
    for (int i = 0; i < 500 && (fd = dial(port)) < 0; i++)
        goro_sleep(10 * GORO_MSEC);
    CHECK(fd >= 0, "s_server never listened on %d", port);
    goro_tls_conn_t *c;
    goro_tls_client(fd, cfg, NULL, &c);
    int r = goro_tls_handshake(c);
    CHECK(r == 0, "handshake with s_server: %d %s", r, goro_tls_error(c));
    snprintf(alpn, 16, "%s", goro_tls_alpn(c) ?: "");
    ssize_t n = goro_tls_write(c, "hello\n", 6);
    CHECK(n == 6, "write: %zd %s", n, goro_tls_error(c));
    char buf[64];
    size_t got = 0;
    while (got < 6 && (n = goro_tls_read(c, buf + got, sizeof buf - got)) > 0)
        got += (size_t)n;
    CHECK(got >= 5 && memcmp(buf, "olleh", 5) == 0, "s_server -rev said %.*s (%zd %s)",
          (int)got, buf, n, goro_tls_error(c));
    goro_tls_shutdown(c);
    goro_tls_free(c);
    goro_close(fd);
    return 0;
}

START_TEST(against_s_server)
{
    int port = free_port();
    char portarg[16];
    snprintf(portarg, sizeof portarg, "%d", port);
    char *argv[] = { "openssl", "s_server", "-accept", portarg, "-4",
                     "-cert", (char *)path("server.pem"), "-key", (char *)path("server.key"),
                     "-alpn", "http/1.1", "-rev", "-naccept", "1", "-quiet", NULL };
    pid_t pid = spawn(argv, -1, -1);
    ck_assert_msg(pid > 0, "spawn openssl: %d", -pid);
    goro_tls_config_t *ccfg = client_cfg("ca.pem", false);
    char alpn[16] = "";
    long r;
    ck_assert_int_eq(goro_join(go(s_server_client, port, ccfg, alpn), &r), 0);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    ck_assert_int_eq(r, 0);
    ck_assert_str_eq(alpn, "http/1.1");
    goro_tls_config_free(ccfg);
}
END_TEST

START_TEST(against_s_client)
{
    int port, lfd = listener(&port);
    char connect[32];
    snprintf(connect, sizeof connect, "127.0.0.1:%d", port);
    int in[2], out[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    char *argv[] = { "openssl", "s_client", "-connect", connect, "-servername", "localhost",
                     "-CAfile", (char *)path("ca.pem"), "-verify_return_error",
                     "-verify_hostname", "localhost", "-alpn", "h2", "-quiet", NULL };
    pid_t pid = spawn(argv, in[0], out[1]);
    ck_assert_msg(pid > 0, "spawn openssl: %d", -pid);
    close(in[0]);
    close(out[1]);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    ck_assert_int_eq(write(in[1], "ping\n", 5), 5);
    char buf[16];
    ssize_t got = 0, n;
    while (got < 5 && (n = read(out[0], buf + got, sizeof buf - (size_t)got)) > 0)
        got += n;
    ck_assert_int_eq(got, 5);
    ck_assert(memcmp(buf, "ping\n", 5) == 0);
    close(in[1]);                   /* s_client's end: it closes its side */
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_int_eq(goro_join(srv, NULL), 0);
    ck_assert_str_eq(s.sni, "localhost");
    ck_assert_str_eq(s.alpn, "h2");
    close(out[0]);
    goro_tls_config_free(scfg);
    goro_close(lfd);
}
END_TEST

/* ---- session tickets ---- */

/* A plain OpenSSL client on a thread (blocking socket): counts the TLS 1.3
 * session tickets the server sends, which come before the echo. */
static atomic_int tickets;

static int count_ticket(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl, (void)sess;
    atomic_fetch_add(&tickets, 1);
    return 0;                       /* not kept: OpenSSL frees it */
}

static void *ticket_client(void *arg)
{
    int port = (int)(intptr_t)arg;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, count_ticket);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    SSL *ssl = SSL_new(ctx);
    char c = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || !SSL_set_fd(ssl, fd) ||
        SSL_connect(ssl) != 1 || SSL_write(ssl, "t", 1) != 1 || SSL_read(ssl, &c, 1) != 1 ||
        c != 't')
        tfail("the OpenSSL client failed");
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return NULL;
}

/* One ticket after a TLS 1.3 handshake, as Go's server sends, rather than
 * OpenSSL's default two: enough to resume, half the work (tls/config.c). */
START_TEST(one_session_ticket)
{
    int port, lfd = listener(&port);
    goro_tls_config_t *scfg = server_cfg(GORO_TLS_VERIFY_DEFAULT);
    struct served s = { 0 };
    goro_t *srv = go(echo_one, lfd, scfg, &s);
    atomic_store(&tickets, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, ticket_client, (void *)(intptr_t)port), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(goro_join(srv, NULL), 0);
    ck_assert_msg(failed() == NULL, "%s", failed());
    int n = atomic_load(&tickets);
    ck_assert_msg(n == 1, "%d session tickets", n);
    goro_tls_config_free(scfg);
    goro_close(lfd);
}
END_TEST

/* ---- bad input ---- */

START_TEST(bad_input)
{
    goro_tls_config_t *cfg = NULL;
    char err[256];
    ck_assert_int_eq(goro_tls_config_new(NULL, &cfg, err, sizeof err), -EINVAL);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){ 0 }, NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){ .server = true }, &cfg,
                                         err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "certificate") != NULL, "%s", err);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_file = path("none.pem"), .key_file = path("server.key") },
        &cfg, err, sizeof err), -ENOENT);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_file = path("server.csr"), .key_file = path("server.key") },
        &cfg, err, sizeof err), -EBADMSG);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_file = path("server.pem"), .key_file = path("client.key") },
        &cfg, err, sizeof err), -EBADMSG);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_pem = "not PEM", .key_pem = "nor this" },
        &cfg, err, sizeof err), -EBADMSG);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .alpn = (const char *const[]){ "", NULL } }, &cfg, err, sizeof err), -EINVAL);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){ .min_version = 0x0301 },
                                         &cfg, err, sizeof err), -EINVAL);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){ .ca_file = path("none") },
                                         &cfg, err, sizeof err), -ENOENT);
    ck_assert_ptr_null(cfg);
    /* A client of the system's store, and the wrong role. */
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){ 0 }, &cfg, err, sizeof err), 0);
    goro_tls_conn_t *c = (goro_tls_conn_t *)1;
    ck_assert_int_eq(goro_tls_server(0, cfg, &c), -EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(goro_tls_client(-1, cfg, NULL, &c), -EINVAL);
    ck_assert_int_eq(goro_tls_client(0, NULL, NULL, &c), -EINVAL);
    ck_assert_int_eq(goro_tls_handshake(NULL), -EINVAL);
    ck_assert_int_eq(goro_tls_read(NULL, err, 1), -EINVAL);
    ck_assert_int_eq(goro_tls_write(NULL, err, 1), -EINVAL);
    ck_assert_int_eq(goro_tls_shutdown(NULL), -EINVAL);
    goro_tls_free(NULL);
    goro_tls_config_free(cfg);
    goro_tls_config_free(NULL);
    /* The same from PEM in memory works. */
    char cert[4096] = "", key[1024] = "";
    FILE *f = fopen(path("server.pem"), "r");
    ck_assert_uint_gt(fread(cert, 1, sizeof cert - 1, f), 0);
    fclose(f);
    f = fopen(path("server.key"), "r");
    ck_assert_uint_gt(fread(key, 1, sizeof key - 1, f), 0);
    fclose(f);
    ck_assert_int_eq(goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_pem = cert, .key_pem = key }, &cfg, err, sizeof err), 0);
    goro_tls_config_free(cfg);
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    double scale = slow() ? 10 : 1;
    struct { const char *name; const TTest *t; double timeout; } cases[] = {
        { "echo_goro", echo_goro, 10 },
        { "verify_wrong_ca", verify_wrong_ca, 10 },
        { "verify_wrong_host", verify_wrong_host, 10 },
        { "verify_ip_name", verify_ip_name, 10 },
        { "client_cert_required", client_cert_required, 10 },
        { "handshake_deadline", handshake_deadline, 10 },
        { "handshake_cancel", handshake_cancel, 10 },
        { "garbage_records", garbage_records, 10 },
        { "end_of_stream", end_of_stream, 10 },
        { "large_both_ways", large_both_ways, 30 },
        { "stale_thread_error_is_not_the_connections", stale_thread_error_is_not_the_connections, 10 },
        { "many_connections", many_connections, 60 },
        { "against_s_server", against_s_server, 20 },
        { "against_s_client", against_s_client, 20 },
        { "one_session_ticket", one_session_ticket, 10 },
        { "bad_input", bad_input, 10 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, cases[i].timeout * scale);
        tcase_add_checked_fixture(tc, setup, teardown);
        _tcase_add_test(tc, cases[i].t, 0, 0, 0, 1);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    unsetenv("GORO_WORKERS");
    snprintf(dir, sizeof dir, "%s/goro-tls-XXXXXX", getenv("TMPDIR") ?: "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh '%s' '%s'", TLS_MKCERTS, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "tls tests: %s failed (is the openssl command installed?)\n", cmd);
        return 1;
    }
    check_set_max_msg_size(1 << 16);
    SRunner *sr = srunner_create(tls_suite());
    srunner_run_all(sr, CK_NORMAL);
    int nfailed = srunner_ntests_failed(sr);
    srunner_free(sr);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "tls tests: could not remove %s\n", dir);
    return nfailed == 0 ? 0 : 1;
}
