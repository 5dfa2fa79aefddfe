/* echod: the pieces around the echo loop in echod.c - options, the
 * listening socket, the registry of live connections, the status line and
 * the signal-driven shutdown. Each lives in its own small file. */
#ifndef ECHOD_H
#define ECHOD_H

#include <goro.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- options.c ---- */

struct echod_options {
    const char *bind;           /* address to listen on */
    int port;                   /* 0: the kernel picks one (printed at start) */
    int workers;                /* 0: online CPUs */
    size_t stack_size;          /* reserve of every connection's stack */
    long max_conns;             /* 0: no limit but the descriptor limit */
    int64_t idle_timeout;       /* ns; 0: connections may stay idle forever */
    int64_t grace;              /* ns in-flight echoes get at shutdown */
    int64_t status_interval;    /* ns between status lines; 0: only on SIGUSR1 */
    bool verbose;
    bool lines;                 /* --lines: echo lines through goro_reader/writer */
    const char *tls_cert, *tls_key;   /* --tls CERT KEY; NULL: plain TCP */
};
extern bool echod_lines;        /* opt.lines, for the connections */

/* Fills opt from the command line; prints usage and exits on --help or a
 * bad option. */
void options_parse(int argc, char **argv, struct echod_options *opt);

/* The deadline of a read that may wait for the idle timeout. */
int64_t idle_deadline(void);

/* ---- tls.c: --tls ---- */

/* Builds the TLS configuration when --tls was given (exits on a bad
 * certificate or key); tls_on() says whether it was. */
void tls_setup(const struct echod_options *opt);
bool tls_on(void);
/* The echo loop over TLS on fd, an open connection (closed by the caller). */
void tls_echo(int fd);

/* ---- listener.c ---- */

/* goro_listen on address:port (IPv4 or IPv6 literal); prints the bound
 * address; exits with a message when that is impossible. */
int listen_tcp(const char *address, int port);

/* Raises the soft descriptor limit to the hard one; returns the limit. */
long raise_fd_limit(void);

/* ---- conns.c: every live connection, for --max-conns and shutdown ---- */

struct conn {
    struct conn *prev, *next;   /* intrusive: the node lives on the stack */
    goro_t *self;               /* the coroutine serving it, for goro_cancel */
    int fd;
    bool listed;
};

void conns_init(long max_conns);

/* Takes one of --max-conns slots, waiting while all are taken. Returns 0
 * or -ECANCELED. conns_unreserve() gives it back if no connection came. */
int conns_reserve(void);
void conns_unreserve(void);

/* Called by the coroutine serving fd, which owns a reserved slot: lists
 * it. -ESHUTDOWN once shutdown has cancelled the
 * others: close at once. */
int conn_open(struct conn *c, int fd);

/* Unlists c (if listed), closes its fd and frees its slot. */
void conn_close(struct conn *c);

/* Connections being served now. */
long conns_live(void);

/* Slots taken: connections accepted and not yet closed (some may not have
 * started being served), plus one while the acceptor holds a slot. */
long conns_reserved(void);

/* Waits until every connection has ended or deadline passes, then cancels
 * the ones left and waits for them to unwind. */
void conns_drain(int64_t deadline);

/* Cancels every connection now (a second SIGINT or SIGTERM). */
void conns_cancel_now(void);

/* ---- status.c ---- */

void stats_echoed(void);          /* one read echoed back in full */
void stats_accepted(void);
void stats_coroutine(int delta);  /* +1 when a coroutine starts, -1 at its end */

/* Creates what the status coroutine and status_request() use. */
void status_init(void);

/* Asks the status coroutine for a line now (SIGUSR1). Never waits. */
void status_request(void);

/* The status coroutine: one line to stderr every interval_ns (0: only on
 * request) until cancelled. */
void status_loop(int64_t interval_ns);

/* ---- accept_backoff.c: the descriptor limit ---- */

/* goro_accept_backoff's options: at the descriptor limit it says so once
 * and counts the refusals; its sleeps grow to 100 ms. */
extern const goro_accept_opts_t accept_opts;

/* Accepts refused for lack of descriptors so far. */
unsigned long fd_limit_hits(void);

/* ---- shutdown.c ---- */

/* Blocks SIGINT, SIGTERM and SIGUSR1 in the calling thread: call from
 * main before the runtime starts, so that every thread blocks them. */
void signals_block(void);
/* Has SIGINT, SIGTERM and SIGUSR1 sent to a channel (goro_signal_notify)
 * that run_until_stopped reads. Call from main once the runtime runs;
 * exits with a message on failure. */
void signals_subscribe(void);

/* Runs until SIGINT or SIGTERM: then stops the acceptor, closes the
 * listener, lets in-flight echoes finish within the grace period, cancels
 * what is left and stops the runtime. Returns the process exit status. */
int run_until_stopped(goro_t *acceptor, int listener, const struct echod_options *opt);

#endif /* ECHOD_H */
