/* echoload --tls: the goro engine's connections over TLS (libgoro-tls,
 * docs/tls.md). Without --ca nothing is verified: a load test measures
 * the server, and its certificate may be a throwaway. With --ca FILE the
 * server's certificate must chain to FILE and carry --host's name. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <goro.h>

#include "echoload.h"

#ifdef ECHOD_TLS
#include <goro/tls.h>

static goro_tls_config_t *config;
static const char *name;

void load_tls_setup(const struct load_options *opt)
{
    if (!opt->tls)
        return;
    char err[256];
    int r = goro_tls_config_new(&(goro_tls_options_t){
        .ca_file = opt->tls_ca,
        .verify = opt->tls_ca ? GORO_TLS_VERIFY_PEER : GORO_TLS_VERIFY_NONE }, &config,
        err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "echoload: --tls: %s (%s)\n", err, strerror(-r));
        exit(2);
    }
    name = opt->host_text;
}

int load_tls_open(int fd, struct goro_tls_conn **conn, int64_t deadline)
{
    int r = goro_tls_client(fd, config, name, conn);
    if (r == 0 && (r = goro_tls_handshake_until(*conn, deadline)) < 0) {
        goro_tls_free(*conn);
        *conn = NULL;
    }
    return r;
}

ssize_t load_tls_write_all(struct goro_tls_conn *c, const void *buf, size_t n, int64_t deadline)
{
    return goro_tls_write_until(c, buf, n, NULL, deadline);
}

ssize_t load_tls_read_full(struct goro_tls_conn *c, void *buf, size_t n, int64_t deadline)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = goro_tls_read_until(c, (char *)buf + got, n - got, deadline);
        if (r <= 0)
            return r < 0 ? r : (ssize_t)got;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

void load_tls_close(struct goro_tls_conn *c)
{
    if (c != NULL)
        goro_tls_shutdown_until(c, goro_now() + GORO_SEC / 10);
    goro_tls_free(c);
}
#else
void load_tls_setup(const struct load_options *opt)
{
    if (opt->tls) {
        fputs("echoload: built without TLS (no OpenSSL for this target)\n", stderr);
        exit(2);
    }
}

int load_tls_open(int fd, struct goro_tls_conn **conn, int64_t deadline)
{
    (void)fd, (void)conn, (void)deadline;
    return -ENOTSUP;
}

ssize_t load_tls_write_all(struct goro_tls_conn *c, const void *buf, size_t n, int64_t deadline)
{
    (void)c, (void)buf, (void)n, (void)deadline;
    return -ENOTSUP;
}

ssize_t load_tls_read_full(struct goro_tls_conn *c, void *buf, size_t n, int64_t deadline)
{
    (void)c, (void)buf, (void)n, (void)deadline;
    return -ENOTSUP;
}

void load_tls_close(struct goro_tls_conn *c)
{
    (void)c;
}
#endif
