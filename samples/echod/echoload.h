/* echoload: the load generator's pieces. echoload.c is one load process
 * (a goro program: a coroutine per connection); load_procs.c forks those
 * processes and adds up what they report; load_hist.c keeps latencies;
 * load_options.c reads the command line. */
#ifndef ECHOLOAD_H
#define ECHOLOAD_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- load_options.c ---- */

struct load_options {
    const char *host_text;
    struct in_addr host;        /* always in 127.0.0.0/8 */
    int port;
    long conns;                 /* over all processes */
    size_t size;                /* bytes per message */
    double duration;            /* measured seconds */
    double warmup;              /* seconds after connecting, not measured */
    double ramp;                /* connections per second; 0: all at once */
    double hold;                /* seconds to keep the connections open, idle,
                                   after measuring (scale.sh measures then) */
    double timeout;             /* seconds a connect or a round trip may take */
    int sources;                /* source addresses 127.0.0.1..K */
    int workers;                /* worker threads per process */
    int procs;
    enum load_engine { ENGINE_GORO, ENGINE_EPOLL } engine;
    bool quiet, verify, allow_errors;
    bool tls;                   /* --tls: the goro engine speaks TLS */
    const char *tls_ca;         /* --ca FILE: verify the server; NULL: do not */
    int server_pid;             /* --server-pid: its CPU over the measured time; 0: none */
};

void load_options_parse(int argc, char **argv, struct load_options *opt);

/* ---- load_hist.c: log-linear latency histogram ----
 * Buckets are exact below 64 ns, then 32 per power of two: any value is
 * known within 1/32 (3 %), in a fixed 9 KiB. */

#define HIST_SUB 32
#define HIST_EXACT 64
#define HIST_TOP_BIT 40                  /* values up to 2^40 ns (18 minutes) */
#define HIST_BUCKETS (HIST_EXACT + (HIST_TOP_BIT - 6) * HIST_SUB)

struct hist {
    uint64_t n[HIST_BUCKETS];
};

/* Adds one value (ns); safe from any thread at once (atomic per bucket). */
void hist_record(struct hist *h, int64_t ns);
/* Moves every count of from into into, leaving from empty; from may be
 * recorded into meanwhile (nothing is lost). */
void hist_drain(struct hist *from, struct hist *into);
void hist_merge(struct hist *into, const struct hist *from);
uint64_t hist_count(const struct hist *h);
/* The value below which a fraction q of the samples lie (ns; 0 if empty). */
int64_t hist_quantile(const struct hist *h, double q);

/* ---- what a load process tells the parent, through its pipe ---- */

enum report_kind { REPORT_PROGRESS = 1, REPORT_CONNECTED, REPORT_FINAL };

struct report {
    int32_t kind;
    int32_t proc;
    int64_t connected;          /* connections open now */
    int64_t connect_errors;     /* totals so far */
    int64_t io_errors;          /* reset, early end of file, timeout */
    int64_t verify_errors;      /* echo differed from what was sent */
    int64_t silent;             /* FINAL: connected but never echoed */
    int64_t rounds;             /* PROGRESS: since the last one; FINAL: measured */
    struct hist hist;           /* latencies of those rounds */
};

/* What the parent tells a load process, one byte at a time. */
enum {
    CONTROL_MEASURE = 'M',      /* from now on, count */
    CONTROL_STOP = 'S',         /* finish the round in flight, send FINAL */
    CONTROL_CLOSE = 'C',        /* close the connections and exit */
};

/* ---- echoload.c: one load process ---- */

/* Runs connections [first, first + count) of the whole load. Returns the
 * process exit status. */
int load_process(const struct load_options *opt, int proc, long first, long count,
                 int report_fd, int control_fd);

/* What both engines share with the process around them. */
enum load_phase { WARMING, MEASURING, STOPPED };
enum load_failure { F_CONNECT, F_IO, F_VERIFY, F_SILENT, F_KINDS };

enum load_phase load_phase_now(void);
void load_failed(enum load_failure kind, int err);   /* err: an errno or 0 */
void load_connected(void);
void load_note_round(int64_t ns);
/* A message no other connection or round sends. */
void load_fill(unsigned char *msg, size_t size, long id, uint64_t round);
/* The source address of connection id (bound before connecting). */
struct sockaddr_in load_source(long id);

/* Larger messages go out in pieces, each echoed before the next is sent,
 * so neither side's socket buffers need to hold a whole message. */
#define LOAD_PIECE (32 * 1024)

/* ---- load_tls.c: --tls (the goro engine only) ---- */

struct goro_tls_conn;
/* Builds the client configuration when --tls was given; exits on error. */
void load_tls_setup(const struct load_options *opt);
/* A TLS client on fd, handshaken by deadline: 0 and *conn, or -errno. */
int load_tls_open(int fd, struct goro_tls_conn **conn, int64_t deadline);
/* goro_write_all_until's and goro_read_full_until's forms over TLS. */
ssize_t load_tls_write_all(struct goro_tls_conn *c, const void *buf, size_t n, int64_t deadline);
ssize_t load_tls_read_full(struct goro_tls_conn *c, void *buf, size_t n, int64_t deadline);
/* Sends close_notify (briefly) and frees c; NULL is fine. */
void load_tls_close(struct goro_tls_conn *c);

/* ---- load_epoll.c: the lean engine (--engine epoll) ----
 * All of a process's connections on one plain thread with one epoll set,
 * no runtime: as cheap per round trip as the cheapest server, so that a
 * benchmark can tell the server's limit from the load generator's. */

struct lean_load;

/* Connects [first, first + count) one after another (blocking, each within
 * opt->timeout); NULL without memory. Failures are counted, not fatal. */
struct lean_load *lean_dial(const struct load_options *opt, const struct sockaddr_in *target,
                            long first, long count);
/* Runs the closed loops until the phase is STOPPED and every round in
 * flight has ended (or timed out). */
void lean_run(struct lean_load *l);
void lean_close(struct lean_load *l);

/* ---- load_procs.c ---- */

/* Forks the load processes, drives their timeline, prints progress and the
 * result. Returns the exit status of echoload. */
int run_load(const struct load_options *opt);

#endif /* ECHOLOAD_H */
