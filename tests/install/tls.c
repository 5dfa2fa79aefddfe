/* make test-install: a program built against the installed libgoro-tls
 * through pkg-config (goro-tls.pc: Requires goro, OpenSSL for static
 * links). Builds a client configuration on the system's CA store. */
#include <stdio.h>

#include <goro.h>
#include <goro/tls.h>

int main(void)
{
    goro_tls_config_t *cfg;
    char err[256];
    int r = goro_tls_config_new(&(goro_tls_options_t){
        .alpn = (const char *const[]){ "h2", NULL } }, &cfg, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "goro_tls_config_new: %d %s\n", r, err);
        return 1;
    }
    goro_tls_config_free(cfg);
    puts("a TLS client configuration on the system's CA store");
    return 0;
}
