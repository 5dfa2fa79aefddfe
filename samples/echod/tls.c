/* echod --tls CERT KEY: the echo loop over TLS (libgoro-tls,
 * docs/tls.md). One server configuration for every connection; each
 * connection's handshake has the idle timeout as its deadline, so a
 * client that connects and never speaks TLS is dropped like an idle one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echod.h"

#ifdef ECHOD_TLS
#include <goro/tls.h>

static goro_tls_config_t *config;

void tls_setup(const struct echod_options *opt)
{
    if (opt->tls_cert == NULL)
        return;
    char err[256];
    int r = goro_tls_config_new(&(goro_tls_options_t){
        .server = true, .cert_file = opt->tls_cert, .key_file = opt->tls_key }, &config,
        err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "echod: --tls: %s (%s)\n", err, strerror(-r));
        exit(1);
    }
    fprintf(stderr, "echod: TLS with %s\n", opt->tls_cert);
}

bool tls_on(void)
{
    return config != NULL;
}

void tls_echo(int fd)
{
    goro_tls_conn_t *c;
    if (goro_tls_server(fd, config, &c) < 0)
        return;
    char buf[16 * 1024];            /* one TLS record */
    ssize_t n = goro_tls_handshake_until(c, idle_deadline());
    while (n == 0 && (n = goro_tls_read_until(c, buf, sizeof buf, idle_deadline())) > 0) {
        if (goro_tls_write(c, buf, (size_t)n) < 0)
            break;
        stats_echoed();
        n = 0;
    }
    if (n == 0)
        goro_tls_shutdown_until(c, goro_now() + GORO_SEC);     /* the client ended cleanly */
    goro_tls_free(c);
}
#else
void tls_setup(const struct echod_options *opt)
{
    if (opt->tls_cert != NULL) {
        fputs("echod: built without TLS (no OpenSSL for this target)\n", stderr);
        exit(2);
    }
}

bool tls_on(void)
{
    return false;
}

void tls_echo(int fd)
{
    (void)fd;
}
#endif
