/* echod: an echo server with one coroutine per connection.
 *
 * This is the blocking server every C programmer has written - accept in a
 * loop, hand each connection to its own thread of control, read and write
 * until the peer goes away - except that a "thread" here is a coroutine
 * with a small stack, so a million of them fit in memory. Everything else
 * (options, status line, shutdown, the descriptor limit) is in the other
 * files of this directory; see docs/echod.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echod.h"

/* Echoed a read at a time. 1 KiB keeps a parked connection within one
 * page: the coroutine's header, this frame and the runtime's wait path
 * below the buffer (docs/echod.md: 4.4 KB resident per connection; from
 * about 2 KiB on, the wait path reaches a second page and that doubles).
 * A connection that fills it is moving bulk data: it moves to a 16 KiB
 * heap buffer, so that a large message costs one read and one write
 * rather than one per KiB, while quiet connections stay small. */
#define ECHO_BUF 1024
#define ECHO_BULK_BUF (16 * 1024)

/* The stack size is the runtime default (--stack-size), whose stacks are
 * pooled: a connection that ends hands its stack to the next one. */
static const goro_attr_t serve_attr = { .name = "echo" };

/* --lines: a line protocol through the buffered reader and writer; the
 * echo of pipelined lines goes out in one write once none is left. A
 * coroutine of its own, so that its stack holds no unused echo buffer. */
#define LINE_BUF 4096

static void serve_lines(int fd)
{
    struct conn conn;
    goro_reader_t r;
    goro_writer_t w;
    const char *p;
    ssize_t n;

    if (conn_open(&conn, fd) == 0 && goro_reader_init(&r, fd, LINE_BUF) == 0) {
        if (goro_writer_init(&w, fd, LINE_BUF) == 0) {
            while ((n = goro_reader_read_delim_until(&r, '\n', &p, idle_deadline())) > 0) {
                if (goro_writer_write(&w, p, (size_t)n) < 0 ||
                    (goro_reader_buffered(&r) == 0 && goro_writer_flush(&w) < 0))
                    break;
                stats_echoed();
            }
            goro_writer_destroy(&w);
        }
        goro_reader_destroy(&r);
    }
    conn_close(&conn);
}

static void serve(int fd)
{
    struct conn conn;
    char small[ECHO_BUF];
    char *buf = small, *bulk = NULL;
    size_t size = sizeof small;
    ssize_t n;

    int opened = conn_open(&conn, fd);
    if (opened == 0 && tls_on()) {
        tls_echo(fd);
    } else if (opened == 0) {
        while ((n = goro_read_until(fd, buf, size, idle_deadline())) > 0) {
            if (goro_write_all(fd, buf, (size_t)n) < 0)
                break;
            stats_echoed();
            if ((size_t)n == size && !bulk && (bulk = malloc(ECHO_BULK_BUF))) {
                buf = bulk;
                size = ECHO_BULK_BUF;
            }
        }
    }
    conn_close(&conn);
    free(bulk);
}

static void accept_loop(int listener)
{
    for (;;) {
        if (conns_reserve() < 0)          /* --max-conns; cancelled at shutdown */
            return;
        int fd = goro_accept_backoff(listener, NULL, NULL, &accept_opts, GORO_FOREVER);
        if (fd < 0) {                     /* cancelled at shutdown, or closed */
            conns_unreserve();
            return;
        }
        stats_accepted();
        int err = echod_lines ? goro_go(NULL, &serve_attr, serve_lines, fd)
                              : goro_go(NULL, &serve_attr, serve, fd);
        if (err != 0) {
            goro_close(fd);               /* no memory for a stack: drop it */
            conns_unreserve();
        }
    }
}

int main(int argc, char **argv)
{
    struct echod_options opt;
    options_parse(argc, argv, &opt);

    long fd_limit = raise_fd_limit();
    signals_block();                      /* before the runtime: its threads inherit it */
    goro_config_t config = { .workers = opt.workers, .stack_size = opt.stack_size };
    int err = goro_start(&config);
    if (err < 0) {
        fprintf(stderr, "echod: cannot start the runtime: %s\n", strerror(-err));
        return 1;
    }
    signals_subscribe();                  /* before "listening": a stop may follow at once */
    conns_init(opt.max_conns);
    tls_setup(&opt);

    int listener = listen_tcp(opt.bind, opt.port);
    fprintf(stderr, "echod: %d workers, %zu KiB stacks, descriptor limit %ld\n",
            goro_workers(), opt.stack_size / 1024, fd_limit);
    goro_t *acceptor = go(accept_loop, listener);
    if (!acceptor) {
        perror("echod: cannot start the acceptor");
        return 1;
    }
    return run_until_stopped(acceptor, listener, &opt);
}
