/* echoload's command line. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "echoload.h"

#define MAX_SIZE (64L << 20)
#define MAX_SOURCES 254

static const char usage_text[] =
    "usage: echoload [options]\n"
    "Load for an echo server on this machine (docs/echod.md): every connection\n"
    "sends a message, waits for its whole echo, checks it, and sends the next.\n"
    "\n"
    "  -H, --host ADDR        server address, in 127.0.0.0/8 (default 127.0.0.1)\n"
    "  -p, --port N           server port (default 7007)\n"
    "  -c, --conns N          connections, over all processes (default 100)\n"
    "  -s, --size BYTES       message size (default 64; pieces over 32 KiB are\n"
    "                         each echoed before the next is sent)\n"
    "  -d, --duration SECS    measured time (default 5)\n"
    "      --warmup SECS      run unmeasured this long once connected (default 1)\n"
    "      --ramp N           open N connections per second (default 0: at once)\n"
    "      --sources K        connect from 127.0.0.1..127.0.0.K, each good for one\n"
    "                         local port range (default: as many as the\n"
    "                         connections need)\n"
    "  -w, --workers N        worker threads per process (default: CPUs / procs)\n"
    "      --engine E         goro: a coroutine per connection (the default);\n"
    "                         epoll: all of a process's connections on one plain\n"
    "                         epoll thread, the cheapest load per round trip\n"
    "      --procs P          processes, each with conns/P connections, to pass\n"
    "                         the per-process descriptor limit (default 1)\n"
    "      --hold SECS        after measuring, keep the connections open and idle\n"
    "                         this long before closing them (default 0)\n"
    "      --timeout SECS     a connect or round trip slower than this is an\n"
    "                         error (default 10)\n"
    "      --verify           compare every echoed byte (the default)\n"
    "      --no-verify        only count bytes\n"
    "      --allow-errors     exit 0 even if some connection failed\n"
    "      --tls              speak TLS (engine goro; the server's certificate is\n"
    "                         not verified unless --ca is given)\n"
    "      --ca FILE          with --tls: verify the server against FILE and --host\n"
    "      --server-pid PID   report the CPU time (user + system) process PID,\n"
    "                         the server on this machine, used per round trip\n"
    "                         over the measured time\n"
    "  -q, --quiet            no progress line\n"
    "  -h, --help             this text\n"
    "\n"
    "Progress goes to stderr once a second. The last line on stdout is\n"
    "  RESULT conns=<connected> size=<bytes> duration=<s> rtps=<round trips/s>\n"
    "         p50_us=<x> p99_us=<y> p999_us=<z> errors=<n>\n"
    "         [server_cpu_us_per_rt=<u>]   (with --server-pid)\n"
    "(one line). Exit status 1 if errors > 0, unless --allow-errors.\n";

/* The target must be this machine: echoload is a test tool, not a way to
 * flood somebody else's server. */
static void parse_host(const char *s, struct load_options *opt)
{
    const char *numeric = strcmp(s, "localhost") == 0 ? "127.0.0.1" : s;
    opt->host_text = s;
    if (inet_pton(AF_INET, numeric, &opt->host) != 1) {
        fprintf(stderr, "echoload: --host %s: give an IPv4 address in 127.0.0.0/8\n", s);
        exit(2);
    }
    if ((ntohl(opt->host.s_addr) >> 24) != 127) {
        fprintf(stderr, "echoload: refusing to load %s: echoload only targets this "
                "machine's loopback addresses (127.0.0.0/8)\n", s);
        exit(2);
    }
}

static void parse_engine(const char *s, struct load_options *opt)
{
    if (strcmp(s, "goro") == 0)
        opt->engine = ENGINE_GORO;
    else if (strcmp(s, "epoll") == 0)
        opt->engine = ENGINE_EPOLL;
    else {
        fprintf(stderr, "echoload: --engine %s: give goro or epoll\n", s);
        exit(2);
    }
}

static void set_defaults(struct load_options *opt)
{
    *opt = (struct load_options){
        .port = 7007, .conns = 100, .size = 64, .duration = 5, .warmup = 1,
        .timeout = 10, .procs = 1, .verify = true,
    };
    parse_host("127.0.0.1", opt);
}

/* Ports one source address offers towards one server address and port. */
static long ports_per_source(void)
{
    long lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &lo, &hi) != 2)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    return hi >= lo ? hi - lo + 1 : 1;
}

static void finish(struct load_options *opt)
{
    long per_source = ports_per_source() * 9 / 10;   /* TIME_WAIT leftovers */
    if (!opt->sources)
        opt->sources = (int)((opt->conns + per_source - 1) / per_source);
    if (opt->sources < 1)
        opt->sources = 1;
    if (opt->sources > MAX_SOURCES) {
        fprintf(stderr, "echoload: %ld connections need more than %d source addresses\n",
                opt->conns, MAX_SOURCES);
        exit(2);
    }
    if (opt->procs > opt->conns)
        opt->procs = (int)opt->conns;
    if (!opt->workers) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        opt->workers = cpus / opt->procs > 1 ? (int)(cpus / opt->procs) : 1;
    }
}

void load_options_parse(int argc, char **argv, struct load_options *opt)
{
    cli_program = "echoload";
    enum { O_WARMUP = 256, O_RAMP, O_SOURCES, O_PROCS, O_HOLD, O_TIMEOUT, O_VERIFY,
           O_NO_VERIFY, O_ALLOW_ERRORS, O_ENGINE, O_TLS, O_CA, O_SERVER_PID };
    static const struct option longs[] = {
        { "host", required_argument, NULL, 'H' },
        { "port", required_argument, NULL, 'p' },
        { "conns", required_argument, NULL, 'c' },
        { "size", required_argument, NULL, 's' },
        { "duration", required_argument, NULL, 'd' },
        { "warmup", required_argument, NULL, O_WARMUP },
        { "ramp", required_argument, NULL, O_RAMP },
        { "sources", required_argument, NULL, O_SOURCES },
        { "workers", required_argument, NULL, 'w' },
        { "procs", required_argument, NULL, O_PROCS },
        { "engine", required_argument, NULL, O_ENGINE },
        { "hold", required_argument, NULL, O_HOLD },
        { "timeout", required_argument, NULL, O_TIMEOUT },
        { "verify", no_argument, NULL, O_VERIFY },
        { "no-verify", no_argument, NULL, O_NO_VERIFY },
        { "allow-errors", no_argument, NULL, O_ALLOW_ERRORS },
        { "tls", no_argument, NULL, O_TLS },
        { "ca", required_argument, NULL, O_CA },
        { "server-pid", required_argument, NULL, O_SERVER_PID },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    set_defaults(opt);
    while ((c = getopt_long(argc, argv, "H:p:c:s:d:w:qh", longs, NULL)) != -1) {
        switch (c) {
        case 'H': parse_host(optarg, opt); break;
        case 'p': opt->port = (int)cli_long("--port", optarg, 1, 65535); break;
        case 'c': opt->conns = cli_long("--conns", optarg, 1, 100000000); break;
        case 's': opt->size = (size_t)cli_long("--size", optarg, 1, MAX_SIZE); break;
        case 'd': opt->duration = cli_seconds("--duration", optarg, 1e7); break;
        case O_WARMUP: opt->warmup = cli_seconds("--warmup", optarg, 1e7); break;
        case O_RAMP: opt->ramp = cli_seconds("--ramp", optarg, 1e7); break;
        case O_SOURCES:
            opt->sources = (int)cli_long("--sources", optarg, 1, MAX_SOURCES);
            break;
        case 'w': opt->workers = (int)cli_long("--workers", optarg, 1, 1024); break;
        case O_ENGINE: parse_engine(optarg, opt); break;
        case O_PROCS: opt->procs = (int)cli_long("--procs", optarg, 1, 1024); break;
        case O_HOLD: opt->hold = cli_seconds("--hold", optarg, 1e7); break;
        case O_TIMEOUT: opt->timeout = cli_seconds("--timeout", optarg, 1e7); break;
        case O_VERIFY: opt->verify = true; break;
        case O_NO_VERIFY: opt->verify = false; break;
        case O_ALLOW_ERRORS: opt->allow_errors = true; break;
        case O_TLS: opt->tls = true; break;
        case O_CA: opt->tls_ca = optarg; break;
        case O_SERVER_PID:
            opt->server_pid = (int)cli_long("--server-pid", optarg, 1, 1L << 22);
            break;
        case 'q': opt->quiet = true; break;
        case 'h': cli_usage(usage_text, 0);
        default: cli_usage(usage_text, 2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "echoload: unexpected argument '%s'\n", argv[optind]);
        cli_usage(usage_text, 2);
    }
    if (opt->duration <= 0 || opt->timeout <= 0) {
        fputs("echoload: --duration and --timeout must be above 0\n", stderr);
        exit(2);
    }
    if ((opt->tls_ca && !opt->tls) || (opt->tls && opt->engine == ENGINE_EPOLL)) {
        fputs("echoload: --ca needs --tls, and --tls the goro engine\n", stderr);
        exit(2);
    }
    finish(opt);
}
