/* echod's command line. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "echod.h"

/* A reserve, not a cost: only touched pages are resident, and an echo
 * loop touches one (docs/echod.md). 32 KiB leaves room for whatever a
 * libc or runtime call below it may need; the minimum is 16 KiB. */
#define DEFAULT_STACK (32 * 1024)
#define DEFAULT_PORT 7007
#define TLS_MIN_STACK (128 * 1024)

static int64_t idle_timeout_ns;
bool echod_lines;

static const char usage_text[] =
    "usage: echod [options]\n"
    "An echo server with one coroutine per connection (docs/echod.md).\n"
    "\n"
    "  -b, --bind ADDR            address to listen on (default 127.0.0.1;\n"
    "                             IPv4 or IPv6, 0.0.0.0 or :: for all)\n"
    "  -p, --port N               TCP port (default 7007; 0: a free one, printed)\n"
    "  -w, --workers N            worker threads (default: online CPUs)\n"
    "  -s, --stack-size SIZE      stack reserve per connection: 16k..1g\n"
    "                             (default 32k; only touched pages use memory)\n"
    "  -m, --max-conns N          serve at most N connections at once; the\n"
    "                             others wait in the listen queue (default: no\n"
    "                             limit but the descriptor limit)\n"
    "  -i, --idle-timeout SECS    close connections silent for SECS (default: never)\n"
    "  -g, --grace SECS           at SIGINT/SIGTERM, time in-flight echoes get\n"
    "                             before the remaining connections are closed\n"
    "                             (default 2)\n"
    "      --status-interval SECS status line every SECS (default: 1 with -v,\n"
    "                             otherwise only on SIGUSR1)\n"
    "      --lines                echo lines (up to 4 KiB each) through the buffered\n"
    "                             reader and writer (docs/streams.md)\n"
    "  -v, --verbose              status line every second\n"
    "      --tls CERT KEY         serve TLS with this certificate and key (PEM\n"
    "                             files; docs/tls.md); stacks of 128k at least\n"
    "  -h, --help                 this text\n"
    "\n"
    "Status line (stderr): conns=<open connections> rtps=<reads echoed per\n"
    "second since the last line> rss=<resident memory> coroutines=<running>\n"
    "accepted=<total> fd_limit_hits=<accepts refused for lack of descriptors>.\n"
    "Signals: SIGUSR1 prints it; SIGINT or SIGTERM stops accepting, lets\n"
    "in-flight echoes finish within the grace period, closes the rest and\n"
    "exits 0; a second SIGINT or SIGTERM closes the rest at once.\n";

/* Seconds, fractions allowed, as nanoseconds. */
static int64_t parse_seconds(const char *option, const char *s)
{
    return (int64_t)(cli_seconds(option, s, 1e9) * 1e9);
}

/* 65536, 64k, 1m, 1g. */
static size_t parse_size(const char *option, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
    if (errno || end == s || *end || v == 0 || v > (1ull << 30) >> shift)
        cli_bad(option, s);
    v <<= shift;
    if (v < 16 * 1024)
        cli_bad(option, s);
    return (size_t)v;
}

static void set_defaults(struct echod_options *opt)
{
    *opt = (struct echod_options){
        .bind = "127.0.0.1",
        .port = DEFAULT_PORT,
        .stack_size = DEFAULT_STACK,
        .grace = 2 * GORO_SEC,
        .status_interval = -1,   /* decided after -v is known */
    };
}

void options_parse(int argc, char **argv, struct echod_options *opt)
{
    cli_program = "echod";
    enum { OPT_STATUS_INTERVAL = 256, OPT_LINES, OPT_TLS };
    static const struct option longs[] = {
        { "bind", required_argument, NULL, 'b' },
        { "port", required_argument, NULL, 'p' },
        { "workers", required_argument, NULL, 'w' },
        { "stack-size", required_argument, NULL, 's' },
        { "max-conns", required_argument, NULL, 'm' },
        { "idle-timeout", required_argument, NULL, 'i' },
        { "grace", required_argument, NULL, 'g' },
        { "status-interval", required_argument, NULL, OPT_STATUS_INTERVAL },
        { "verbose", no_argument, NULL, 'v' },
        { "lines", no_argument, NULL, OPT_LINES },
        { "tls", required_argument, NULL, OPT_TLS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    set_defaults(opt);
    while ((c = getopt_long(argc, argv, "b:p:w:s:m:i:g:vh", longs, NULL)) != -1) {
        switch (c) {
        case 'b': opt->bind = optarg; break;
        case 'p': opt->port = (int)cli_long("--port", optarg, 0, 65535); break;
        case 'w': opt->workers = (int)cli_long("--workers", optarg, 1, 1024); break;
        case 's': opt->stack_size = parse_size("--stack-size", optarg); break;
        case 'm': opt->max_conns = cli_long("--max-conns", optarg, 0, 1L << 40); break;
        case 'i': opt->idle_timeout = parse_seconds("--idle-timeout", optarg); break;
        case 'g': opt->grace = parse_seconds("--grace", optarg); break;
        case OPT_STATUS_INTERVAL:
            opt->status_interval = parse_seconds("--status-interval", optarg);
            break;
        case 'v': opt->verbose = true; break;
        case OPT_LINES: opt->lines = echod_lines = true; break;
        case OPT_TLS:               /* two arguments: CERT KEY */
            if (optind >= argc)
                cli_usage(usage_text, 2);
            opt->tls_cert = optarg;
            opt->tls_key = argv[optind++];
            break;
        case 'h': cli_usage(usage_text, 0);
        default: cli_usage(usage_text, 2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "echod: unexpected argument '%s'\n", argv[optind]);
        cli_usage(usage_text, 2);
    }
    if (opt->status_interval < 0)
        opt->status_interval = opt->verbose ? GORO_SEC : 0;
    idle_timeout_ns = opt->idle_timeout;
    if (opt->lines && opt->tls_cert != NULL) {
        fprintf(stderr, "echod: --lines does not combine with --tls\n");
        cli_usage(usage_text, 2);
    }
    /* An OpenSSL handshake needs more stack than the echo loop's page. */
    if (opt->tls_cert != NULL && opt->stack_size < TLS_MIN_STACK)
        opt->stack_size = TLS_MIN_STACK;
}

int64_t idle_deadline(void)
{
    return idle_timeout_ns ? goro_now() + idle_timeout_ns : GORO_FOREVER;
}
