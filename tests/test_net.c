/* goro_listen, goro_dial, goro_accept_backoff: addresses and networks,
 * name resolution off the workers (deadline and cancellation while it
 * runs), Happy Eyeballs' fall-back, the descriptor limit, bad input.
 * Every socket is on 127.0.0.1, ::1 or a unix path. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <goro.h>

#include "helpers.h"
#include "suites.h"
#include "../runtime/net/net.h"

#define CHECK(cond, ...) do { if (!(cond)) { t_fail(__VA_ARGS__); return 0; } } while (0)

/* Accepts one connection on lfd and echoes it until end of file. */
static long echo_one(int lfd)
{
    int c = goro_accept(lfd, NULL, NULL);
    if (c < 0)
        return c;
    char buf[256];
    ssize_t n;
    while ((n = goro_read(c, buf, sizeof buf)) > 0)
        goro_write_all(c, buf, (size_t)n);
    goro_close(c);
    return 0;
}

/* Dials address, sends a line and reads it back. 0 or a negative errno. */
static int dial_echo(const char *network, const char *address)
{
    int fd = -1;
    int err = goro_dial(network, address, goro_now() + 10 * GORO_SEC, &fd);
    if (err)
        return err;
    char buf[6] = { 0 };
    if (goro_write_all(fd, "hello", 5) != 5 || goro_read_full(fd, buf, 5) != 5 ||
        strcmp(buf, "hello") != 0)
        err = -EIO;
    goro_close(fd);
    return err;
}

/* Listens on network/address, dials what it got bound to (or dial_as,
 * with the port appended), echoes once. */
static int round_trip(const char *network, const char *address, const char *dial_as)
{
    int lfd, err = goro_listen(network, address, NULL, &lfd);
    if (err)
        return err;
    char bound[128], target[160];
    int port = goro_listen_addr(lfd, bound, sizeof bound);
    if (port < 0) {
        goro_close(lfd);
        return port;
    }
    if (dial_as)
        snprintf(target, sizeof target, "%s:%d", dial_as, port);
    else
        snprintf(target, sizeof target, "%s", bound);
    goro_t *h = go(echo_one, lfd);
    err = dial_echo(network, target);
    long r = 0;
    goro_join(h, &r);
    goro_close(lfd);
    return err ? err : (int)r;
}

static bool have_ipv6(void)
{
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    bool ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    if (s >= 0)
        close(s);
    return ok;
}

/* Runs body in a coroutine and fails the test with what it reported;
 * the resolver hook goes back to getaddrinfo whatever the body did. */
static void run(long (*body)(void))
{
    goro_join(go(body), NULL);
    goro__net_getaddrinfo = getaddrinfo;
    ck_assert_msg(!t_failed(), "%s", t_failed());
}

static long tcp_by_address_and_name(void)
{
    int err;
    CHECK((err = round_trip("tcp", "127.0.0.1:0", NULL)) == 0, "127.0.0.1: %d", err);
    CHECK((err = round_trip("tcp4", "127.0.0.1:0", "localhost")) == 0, "localhost: %d", err);
    CHECK((err = round_trip("tcp", "127.0.0.1:0", "127.0.0.1")) == 0, "numeric: %d", err);
    if (have_ipv6()) {
        CHECK((err = round_trip("tcp6", "[::1]:0", NULL)) == 0, "[::1]: %d", err);
        CHECK((err = round_trip("tcp", "[::1]:0", "[::1]")) == 0, "[::1] tcp: %d", err);
    }
    /* ":0" listens on every address; the loopback reaches it. */
    CHECK((err = round_trip("tcp", ":0", "127.0.0.1")) == 0, ":0: %d", err);
    return 0;
}

START_TEST(net_tcp_by_address_and_name)
{
    run(tcp_by_address_and_name);
}
END_TEST

/* "localhost" may resolve to ::1 first while the server is on 127.0.0.1
 * only: the refused attempt falls through to the next address. */
static long localhost_falls_back(void)
{
    int err = round_trip("tcp4", "127.0.0.1:0", NULL);
    CHECK(err == 0, "tcp4 %d", err);
    err = round_trip("tcp", "127.0.0.1:0", "localhost");
    CHECK(err == 0, "localhost on 127.0.0.1 only: %d", err);
    return 0;
}

/* TCP_NODELAY of fd: 1, 0, or -1 if it cannot be read. */
static int nodelay(int fd)
{
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 ? v != 0 : -1;
}

/* Listens (nagle as given), dials it (the same), accepts; the two ends'
 * TCP_NODELAY as dialed * 10 + accepted, or a negative errno. */
static int nodelay_pair(const char *address, int nagle)
{
    int lfd, dfd, afd, err;
    if ((err = goro_listen("tcp", address, &(goro_listen_opts_t){ .nagle = nagle }, &lfd)))
        return err;
    char bound[128];
    if ((err = goro_listen_addr(lfd, bound, sizeof bound)) < 0 ||
        (err = goro_dial_opts("tcp", bound, &(goro_dial_opts_t){ .nagle = nagle },
                              goro_now() + 10 * GORO_SEC, &dfd)) != 0) {
        goro_close(lfd);
        return err;
    }
    if ((afd = goro_accept(lfd, NULL, NULL)) < 0)
        err = afd;
    else
        err = nodelay(dfd) * 10 + nodelay(afd);
    if (afd >= 0)
        goro_close(afd);
    goro_close(dfd);
    goro_close(lfd);
    return err;
}

/* As in Go: a response written in two parts (a header, then sendfile)
 * would otherwise wait for the peer's delayed ACK. */
static long tcp_nagle_off_by_default(void)
{
    int r;
    CHECK((r = nodelay_pair("127.0.0.1:0", 0)) == 11, "default: %d, want 11", r);
    CHECK((r = nodelay_pair("127.0.0.1:0", 1)) == 0, "nagle = 1: %d, want 0", r);
    if (have_ipv6())
        CHECK((r = nodelay_pair("[::1]:0", 0)) == 11, "[::1]: %d, want 11", r);
    return 0;
}

START_TEST(net_tcp_nagle_off_by_default)
{
    run(tcp_nagle_off_by_default);
}
END_TEST

START_TEST(net_localhost_falls_back)
{
    run(localhost_falls_back);
}
END_TEST

static long unix_sockets(void)
{
    char path[64], bound[128];
    snprintf(path, sizeof path, "/tmp/goro-net-%d.sock", (int)getpid());
    unlink(path);
    int lfd, err = goro_listen("unix", path, NULL, &lfd);
    CHECK(err == 0, "listen unix: %d", err);
    CHECK(goro_listen_addr(lfd, bound, sizeof bound) == 0 && strcmp(bound, path) == 0,
          "bound %s", bound);
    goro_t *h = go(echo_one, lfd);
    CHECK((err = dial_echo("unix", path)) == 0, "dial unix: %d", err);
    goro_join(h, NULL);
    /* Someone listens: no policy but ALWAYS removes it. */
    int l2;
    CHECK(goro_listen("unix", path, NULL, &l2) == -EADDRINUSE, "live socket replaced");
    goro_close(lfd);
    /* Nobody listens now: STALE removes it, NEVER refuses. */
    err = goro_listen("unix", path, &(goro_listen_opts_t){ .unix_remove = GORO_UNIX_REMOVE_NEVER },
                      &l2);
    CHECK(err == -EADDRINUSE, "NEVER: %d", err);
    CHECK((err = goro_listen("unix", path, NULL, &l2)) == 0, "stale not removed: %d", err);
    goro_close(l2);
    /* Not a socket: never removed. */
    unlink(path);
    FILE *f = fopen(path, "w");
    CHECK(f, "fopen");
    fclose(f);
    err = goro_listen("unix", path,
                      &(goro_listen_opts_t){ .unix_remove = GORO_UNIX_REMOVE_ALWAYS }, &l2);
    CHECK(err == -EADDRINUSE, "regular file: %d", err);
    unlink(path);
    /* Abstract names. */
    char name[64];
    snprintf(name, sizeof name, "@goro-net-%d", (int)getpid());
    CHECK((err = goro_listen("unix", name, NULL, &lfd)) == 0, "abstract: %d", err);
    CHECK(goro_listen_addr(lfd, bound, sizeof bound) == 0 && strcmp(bound, name) == 0,
          "abstract bound %s", bound);
    h = go(echo_one, lfd);
    CHECK((err = dial_echo("unix", name)) == 0, "dial abstract: %d", err);
    goro_join(h, NULL);
    goro_close(lfd);
    return 0;
}

START_TEST(net_unix_sockets)
{
    run(unix_sockets);
}
END_TEST

static long options_and_bad_input(void)
{
    int fd = -1, err;
    char longpath[200];
    memset(longpath, 'x', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    static const struct { const char *net, *addr; int want; } bad[] = {
        { "udp", "127.0.0.1:0", -EINVAL }, { NULL, "127.0.0.1:0", -EINVAL },
        { "tcp", "127.0.0.1", -EINVAL }, { "tcp", "::1:80", -EINVAL },
        { "tcp", "[::1:80", -EINVAL }, { "tcp", "127.0.0.1:", -EINVAL },
        { "tcp", "127.0.0.1:nosuchservice", -EINVAL }, { "unix", "", -EINVAL },
        { "tcp4", "[::1]:0", -ENOENT },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = goro_listen(bad[i].net, bad[i].addr, NULL, &fd);
        CHECK(err == bad[i].want, "listen %s %s: %d", bad[i].net, bad[i].addr, err);
        err = goro_dial(bad[i].net, bad[i].addr, GORO_FOREVER, &fd);
        CHECK(err == bad[i].want, "dial %s %s: %d", bad[i].net, bad[i].addr, err);
    }
    CHECK(goro_listen("unix", longpath, NULL, &fd) == -ENAMETOOLONG, "long path");
    CHECK(goro_listen("tcp", "127.0.0.1:0", NULL, NULL) == -EINVAL, "NULL fd");
    CHECK(goro_listen("tcp", NULL, NULL, &fd) == -EINVAL, "NULL address");
    CHECK(goro_listen("tcp", "127.0.0.1:0", &(goro_listen_opts_t){ .backlog = -1 }, &fd) == -EINVAL,
          "backlog");
    CHECK(goro_dial("tcp", "127.0.0.1:1", GORO_FOREVER, NULL) == -EINVAL, "dial NULL fd");
    CHECK(goro_listen_addr(-1, NULL, 0) == -EBADF, "addr of -1");
    CHECK(goro__net_dial_addrs(NULL, NULL, 0, NULL, 0, GORO_FOREVER, &fd) == -EINVAL, "no addrs");

    /* Options reach the socket; the bound port comes back; a taken port
     * is -EADDRINUSE without SO_REUSEPORT on both. */
    int a, b, on = 0;
    socklen_t sl = sizeof on;
    CHECK(goro_listen("tcp", "127.0.0.1:0", &(goro_listen_opts_t){ .reuseport = 1 }, &a) == 0,
          "reuseport");
    getsockopt(a, SOL_SOCKET, SO_REUSEPORT, &on, &sl);
    CHECK(on, "SO_REUSEPORT off");
    getsockopt(a, SOL_SOCKET, SO_REUSEADDR, &on, &sl);
    CHECK(on, "SO_REUSEADDR off by default");
    char addr[64], small[4];
    int port = goro_listen_addr(a, addr, sizeof addr);
    CHECK(port > 0, "port %d", port);
    CHECK(goro_listen_addr(a, NULL, 0) == port, "port alone");
    CHECK(goro_listen_addr(a, small, sizeof small) == -ENOSPC, "small buffer");
    CHECK(goro_listen("tcp", addr, &(goro_listen_opts_t){ .reuseport = 1 }, &b) == 0,
          "second reuseport listener");
    goro_close(b);
    CHECK(goro_listen("tcp", addr, NULL, &b) == -EADDRINUSE, "taken port");
    /* From a chosen source address; a malformed one is -EINVAL. */
    CHECK(goro_dial_opts("tcp", addr, &(goro_dial_opts_t){ .local = "127.0.0.2:0" },
                         GORO_FOREVER, &fd) == 0, "dial from 127.0.0.2");
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    CHECK(me.sin_addr.s_addr == htonl(0x7f000002), "not from 127.0.0.2");
    goro_close(fd);
    CHECK(goro_dial_opts("tcp", addr, &(goro_dial_opts_t){ .local = "localhost:0" },
                         GORO_FOREVER, &fd) == -EINVAL, "a local name");
    goro_close(a);
    if (have_ipv6()) {
        CHECK(goro_listen("tcp6", "[::]:0", &(goro_listen_opts_t){ .v6only = 1 }, &a) == 0, "v6only");
        getsockopt(a, IPPROTO_IPV6, IPV6_V6ONLY, &on, &sl);
        CHECK(on == 1, "IPV6_V6ONLY off");
        goro_close(a);
    }
    return 0;
}

START_TEST(net_options_and_bad_input)
{
    run(options_and_bad_input);
}
END_TEST

/* ---- a resolver that waits to be released ---- */

static _Atomic int hook_entered, hook_release, hook_done;

static int slow_gai(const char *host, const char *port, const struct addrinfo *hints,
                    struct addrinfo **res)
{
    atomic_fetch_add(&hook_entered, 1);
    while (!atomic_load(&hook_release))
        usleep(1000);
    int r = getaddrinfo(host, port, hints, res);
    atomic_fetch_add(&hook_done, 1);
    return r;
}

static int nxdomain_gai(const char *host, const char *port, const struct addrinfo *hints,
                        struct addrinfo **res)
{
    (void)host; (void)port; (void)hints; (void)res;
    return EAI_NONAME;
}

static void hook(goro__net_gai_fn *fn)
{
    atomic_store(&hook_entered, 0);
    atomic_store(&hook_release, 0);
    atomic_store(&hook_done, 0);
    goro__net_getaddrinfo = fn;
}

/* Lets the lookup the caller left finish. Its coroutine then frees it
 * (goro_shutdown at the test's end waits for that coroutine; ASan's leak
 * check would report the job or its addresses otherwise). */
static void wait_hook_done(int n)
{
    atomic_store(&hook_release, 1);
    while (atomic_load(&hook_done) < n)
        goro_sleep(GORO_MSEC);
}

static long deadline_mid_resolution(void)
{
    int fd;
    hook(slow_gai);
    int64_t t0 = goro_now();
    int err = goro_dial("tcp", "localhost:9", t0 + 20 * GORO_MSEC, &fd);
    CHECK(err == -ETIMEDOUT, "dial: %d", err);
    CHECK(atomic_load(&hook_done) == 0, "returned only after the lookup");
    wait_hook_done(1);

    hook(nxdomain_gai);
    err = goro_dial("tcp", "no-such-host.invalid:80", GORO_FOREVER, &fd);
    CHECK(err == -ENOENT, "unknown name: %d", err);
    goro__net_getaddrinfo = getaddrinfo;
    return 0;
}

START_TEST(net_deadline_mid_resolution)
{
    run(deadline_mid_resolution);
}
END_TEST

static long dial_forever(void)
{
    int fd;
    return goro_dial("tcp", "localhost:9", GORO_FOREVER, &fd);
}

static long cancel_mid_resolution(void)
{
    hook(slow_gai);
    goro_t *h = go(dial_forever);
    while (atomic_load(&hook_entered) == 0)
        goro_sleep(GORO_MSEC);
    goro_cancel(h);
    long r = 0;
    goro_join(h, &r);
    CHECK(r == -ECANCELED, "cancelled dial: %ld", r);
    CHECK(atomic_load(&hook_done) == 0, "returned only after the lookup");
    wait_hook_done(1);
    goro__net_getaddrinfo = getaddrinfo;
    return 0;
}

START_TEST(net_cancel_mid_resolution)
{
    run(cancel_mid_resolution);
}
END_TEST

/* ---- numeric addresses: no resolver ---- */

static _Atomic int gai_calls;

static int counting_gai(const char *host, const char *port, const struct addrinfo *hints,
                        struct addrinfo **res)
{
    atomic_fetch_add(&gai_calls, 1);
    return getaddrinfo(host, port, hints, res);
}

/* Dials address in network, echoes a byte through the connection lfd's
 * acceptor takes; the dial's result, and how many lookups it made. */
static int dial_counted(int lfd, const char *network, const char *address, int64_t deadline,
                        int *lookups)
{
    atomic_store(&gai_calls, 0);
    int fd, err = goro_dial(network, address, deadline, &fd);
    *lookups = atomic_load(&gai_calls);
    if (err)
        return err;
    int a = goro_accept(lfd, NULL, NULL);
    char c = 0;
    if (a < 0 || goro_write(fd, "n", 1) != 1 || goro_read(a, &c, 1) != 1 || c != 'n')
        err = -EIO;
    if (a >= 0)
        goro_close(a);
    goro_close(fd);
    return err;
}

static long cancelled_dial(const char *address)
{
    goro_cancel(goro_self());
    int fd;
    return goro_dial("tcp", address, GORO_FOREVER, &fd);
}

/* A dotted IPv4 or a plain IPv6 address with a decimal port connects
 * without a lookup (the pool hop used to cost the accept bench a third of
 * its connections); every other form still goes to getaddrinfo, and a
 * deadline or a cancellation that came before the dial ends it. */
static long numeric_skips_the_resolver(void)
{
    int lfd, err, n;
    char addr[64];
    CHECK(goro_listen("tcp4", "127.0.0.1:0", NULL, &lfd) == 0, "listen");
    int port = goro_listen_addr(lfd, NULL, 0);
    goro__net_getaddrinfo = counting_gai;

    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    CHECK((err = dial_counted(lfd, "tcp", addr, GORO_FOREVER, &n)) == 0 && n == 0,
          "%s: %d, %d lookups", addr, err, n);
    CHECK((err = dial_counted(lfd, "tcp4", addr, GORO_FOREVER, &n)) == 0 && n == 0,
          "tcp4 %s: %d, %d lookups", addr, err, n);
    /* inet_aton's short form: the resolver reads it, as before */
    snprintf(addr, sizeof addr, "127.1:%d", port);
    CHECK((err = dial_counted(lfd, "tcp", addr, GORO_FOREVER, &n)) == 0 && n == 1,
          "%s: %d, %d lookups", addr, err, n);
    /* an IPv4 address on tcp6, a port beyond 65535: the resolver refuses */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    CHECK((err = dial_counted(lfd, "tcp6", addr, GORO_FOREVER, &n)) < 0 && n == 1,
          "tcp6 %s: %d, %d lookups", addr, err, n);
    CHECK((err = dial_counted(lfd, "tcp", "127.0.0.1:65536", GORO_FOREVER, &n)) < 0 && n == 1,
          "port 65536: %d, %d lookups", err, n);
    CHECK((err = dial_counted(lfd, "tcp", "127.0.0.1:", GORO_FOREVER, &n)) == -EINVAL && n == 0,
          "no port: %d, %d lookups", err, n);

    CHECK((err = dial_counted(lfd, "tcp", addr, goro_now() - 1, &n)) == -ETIMEDOUT,
          "a deadline that passed: %d", err);
    int64_t prev = goro_deadline_push(goro_now() - 1);
    err = dial_counted(lfd, "tcp", addr, GORO_FOREVER, &n);
    goro_deadline_pop(prev);
    CHECK(err == -ETIMEDOUT, "a deadline in force that passed: %d", err);
    long r = 0;
    goro_join(go(cancelled_dial, (const char *)addr), &r);
    CHECK(r == -ECANCELED, "a cancelled dial: %ld", r);
    goro_close(lfd);

    if (have_ipv6()) {
        CHECK(goro_listen("tcp6", "[::1]:0", NULL, &lfd) == 0, "listen [::1]");
        snprintf(addr, sizeof addr, "[::1]:%d", goro_listen_addr(lfd, NULL, 0));
        CHECK((err = dial_counted(lfd, "tcp", addr, GORO_FOREVER, &n)) == 0 && n == 0,
              "%s: %d, %d lookups", addr, err, n);
        goro_close(lfd);
    }
    goro__net_getaddrinfo = getaddrinfo;
    return 0;
}

START_TEST(net_numeric_addresses_skip_the_resolver)
{
    run(numeric_skips_the_resolver);
}
END_TEST

/* ---- Happy Eyeballs ---- */

static socklen_t sockname(int fd, struct sockaddr_storage *ss)
{
    socklen_t len = sizeof *ss;
    getsockname(fd, (struct sockaddr *)ss, &len);
    return len;
}

/* A listener whose accept queue is full (backlog 0 holds one connection,
 * which `filler` makes): the kernel drops further SYNs, so a connect to
 * it stays in flight - a black hole on the loopback. */
static int black_hole(int *filler, struct sockaddr_storage *ss, socklen_t *len)
{
    int l;
    if (goro_listen("tcp", "127.0.0.1:0", &(goro_listen_opts_t){ .backlog = 1 }, &l) != 0)
        return -1;
    listen(l, 0);
    *len = sockname(l, ss);
    *filler = goro_socket(AF_INET, SOCK_STREAM, 0);
    goro_connect(*filler, (struct sockaddr *)ss, *len);
    /* Readable: the filler's connection is in the queue, which is full. */
    if (goro_wait_fd(l, GORO_READABLE, goro_now() + 10 * GORO_SEC) < 0)
        return -1;
    return l;
}

static long happy_eyeballs(void)
{
    struct sockaddr_storage addrs[2];
    socklen_t lens[2];
    int filler, good, fd, err;
    int hole = black_hole(&filler, &addrs[0], &lens[0]);
    CHECK(hole >= 0, "black hole");
    CHECK(goro_listen("tcp", "127.0.0.1:0", NULL, &good) == 0, "listen");
    lens[1] = sockname(good, &addrs[1]);

    /* One at a time: the black hole eats the whole deadline. */
    int64_t t0 = goro_now();
    err = goro__net_dial_addrs(addrs, lens, 2, NULL, -1, t0 + 50 * GORO_MSEC, &fd);
    CHECK(err == -ETIMEDOUT, "one at a time: %d", err);

    /* With a 20 ms attempt delay the second address wins after it; the
     * first attempt is closed. */
    t0 = goro_now();
    err = goro__net_dial_addrs(addrs, lens, 2, NULL, 20 * GORO_MSEC, t0 + 10 * GORO_SEC, &fd);
    int64_t took = goro_now() - t0;
    CHECK(err == 0, "happy eyeballs: %d", err);
    CHECK(took >= 20 * GORO_MSEC, "second attempt before the delay: %.1f ms", t_ms(took));
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    getpeername(fd, (struct sockaddr *)&peer, &pl);
    CHECK(((struct sockaddr_in *)&peer)->sin_port == ((struct sockaddr_in *)&addrs[1])->sin_port,
          "connected to the black hole");
    goro_close(fd);

    /* A refused first address falls through at once, not after the delay. */
    int gone;
    CHECK(goro_listen("tcp", "127.0.0.1:0", NULL, &gone) == 0, "listen");
    lens[0] = sockname(gone, &addrs[0]);
    goro_close(gone);
    t0 = goro_now();
    err = goro__net_dial_addrs(addrs, lens, 2, NULL, 100 * GORO_SEC, t0 + 10 * GORO_SEC, &fd);
    CHECK(err == 0, "after a refusal: %d", err);
    goro_close(fd);
    /* Only refusals: the last one's error. */
    err = goro__net_dial_addrs(addrs, lens, 1, NULL, 0, GORO_FOREVER, &fd);
    CHECK(err == -ECONNREFUSED, "refused: %d", err);
    goro_close(filler);
    goro_close(hole);
    goro_close(good);
    return 0;
}

START_TEST(net_happy_eyeballs)
{
    run(happy_eyeballs);
}
END_TEST

/* v6 v6 v6 v4 v4 comes out v6 v4 v6 v4 v6; v4 first stays first. */
START_TEST(net_interleaves_families)
{
    struct sockaddr_in6 six[3];
    struct sockaddr_in four[2];
    struct addrinfo ai[5];
    struct sockaddr_storage out[NET_DIAL_MAX];
    socklen_t lens[NET_DIAL_MAX];
    for (int i = 0; i < 5; i++) {
        bool v6 = i < 3;
        ai[i] = (struct addrinfo){
            .ai_family = v6 ? AF_INET6 : AF_INET,
            .ai_addr = v6 ? (struct sockaddr *)&six[i] : (struct sockaddr *)&four[i - 3],
            .ai_addrlen = v6 ? sizeof six[0] : sizeof four[0],
            .ai_next = i < 4 ? &ai[i + 1] : NULL,
        };
        if (v6)
            six[i] = (struct sockaddr_in6){ .sin6_family = AF_INET6, .sin6_port = htons(i) };
        else
            four[i - 3] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(i) };
    }
    static const int want[] = { 0, 3, 1, 4, 2 };
    ck_assert_int_eq(goro__net_interleave(&ai[0], out, lens), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ntohs(((struct sockaddr_in *)&out[i])->sin_port), want[i]);
    ck_assert_int_eq(lens[0], sizeof six[0]);
    ck_assert_int_eq(lens[1], sizeof four[0]);
    /* Starting at the first IPv4 address: v4 v4 v6 order, then the end. */
    ai[4].ai_next = &ai[0];
    ai[2].ai_next = NULL;
    static const int want4[] = { 3, 0, 4, 1, 2 };
    ck_assert_int_eq(goro__net_interleave(&ai[3], out, lens), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ntohs(((struct sockaddr_in *)&out[i])->sin_port), want4[i]);
}
END_TEST

/* ---- the descriptor limit ---- */

static int fill_fds(int *fds, int max)
{
    int n = 0;
    while (n < max && (fds[n] = dup(0)) >= 0)
        n++;
    return n;
}

static _Atomic int limit_errors;

static void count_error(int err, void *arg)
{
    (void)arg;
    if (err == -EMFILE || err == -ENFILE)
        atomic_fetch_add(&limit_errors, 1);
}

static long accept_one(int lfd)
{
    return goro_accept_backoff(lfd, NULL, NULL,
                               &(goro_accept_opts_t){ .on_error = count_error },
                               goro_now() + 30 * GORO_SEC);
}

/* Waits until at least n descriptor-limit errors were reported, or the
 * deadline: the wait is bounded, so a lost connection fails the test
 * rather than hanging it. */
static bool limit_errors_reach(int n, int64_t deadline)
{
    while (atomic_load(&limit_errors) < n)
        if (goro_now() >= deadline || goro_sleep(GORO_MSEC) < 0)
            return false;
    return true;
}

/* Accept at the limit: refused, backed off, accepted once a descriptor
 * frees. On Linux the refused connection stays queued and the back-off
 * refuses it again until then. Under valgrind it does not: valgrind keeps
 * a few descriptors below the kernel's limit for itself, so the kernel
 * accepts, and valgrind closes the new descriptor and reports -EMFILE -
 * the connection is gone and the listener stays quiet. A second client,
 * connecting once a descriptor is free, is what the back-off accepts
 * there (on Linux it stays queued behind the first). */
static long descriptor_limit(void)
{
    enum { MAX = 100000 };
    int *fds = malloc(MAX * sizeof *fds);
    int lfd, fd;
    char addr[64];
    CHECK(fds, "malloc");
    CHECK(goro_listen("tcp", "127.0.0.1:0", NULL, &lfd) == 0, "listen");
    goro_listen_addr(lfd, addr, sizeof addr);
    int client = goro_socket(AF_INET, SOCK_STREAM, 0);
    int late = goro_socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_storage ss;
    socklen_t len = sockname(lfd, &ss);
    atomic_store(&limit_errors, 0);

    int n = fill_fds(fds, MAX);
    CHECK(errno == EMFILE, "filled %d descriptors: %s", n, strerror(errno));
    int err = goro_dial("tcp", addr, goro_now() + 5 * GORO_SEC, &fd);
    int listen_err = goro_listen("tcp", "127.0.0.1:0", NULL, &fd);
    goro_t *h = go(accept_one, lfd);
    int cerr = goro_connect(client, (struct sockaddr *)&ss, len);
    int64_t deadline = goro_now() + 20 * GORO_SEC;
    bool refused = limit_errors_reach(1, deadline);
    /* Refused again after a back-off: what the kernel shows (see above). */
    bool again = t_valgrind() || limit_errors_reach(2, deadline);
    close(fds[--n]);                          /* one descriptor frees */
    int lerr = goro_connect(late, (struct sockaddr *)&ss, len);
    long c = 0;
    goro_join(h, &c);
    while (n > 0)
        close(fds[--n]);
    free(fds);
    CHECK(err == -EMFILE, "dial at the limit: %d", err);
    CHECK(listen_err == -EMFILE, "listen at the limit: %d", listen_err);
    CHECK(cerr == 0 && lerr == 0, "connect: %d, %d", cerr, lerr);
    CHECK(refused && again, "limit errors reported: %d", atomic_load(&limit_errors));
    CHECK(c >= 0, "accept after the back-off: %ld", c);
    goro_close((int)c);
    goro_close(client);
    goro_close(late);
    goro_close(lfd);
    return 0;
}

START_TEST(net_descriptor_limit)
{
    run(descriptor_limit);
}
END_TEST

/* ---- resolution never blocks a worker ---- */

static _Atomic int dials_left;

static long dial_many(const char *addr, int count)
{
    for (int i = 0; i < count; i++) {
        int fd, err = goro_dial("tcp", addr, goro_now() + 30 * GORO_SEC, &fd);
        if (err) {
            t_fail("dial %s: %d", addr, err);
            break;
        }
        goro_close(fd);
    }
    atomic_fetch_sub(&dials_left, count);
    return 0;
}

static long accept_all(int lfd)
{
    int c;
    while ((c = goro_accept(lfd, NULL, NULL)) >= 0)
        goro_close(c);
    return 0;
}

/* getaddrinfo as slow as a DNS round trip: it sleeps its thread 2 ms. */
static int rtt_gai(const char *host, const char *port, const struct addrinfo *hints,
                   struct addrinfo **res)
{
    usleep(2000);
    return getaddrinfo(host, port, hints, res);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A 1 ms ticker on the only worker while 1000 dials of "localhost" (in
 * /etc/hosts) resolve, ten at a time, each lookup taking 2 ms: its ticks
 * keep coming. Were a lookup to block the worker, the ticker would wait
 * behind the ten dialers' lookups (~20 ms), and the ticks that came due
 * meanwhile would be dropped. The measure is the share of milliseconds
 * that got their tick: a loaded machine's scheduler delays some ticks
 * whatever goro does (the worst gap), it cannot drop most of them. */
static long ticker_on_time(void)
{
    enum { MAXTICKS = 100000 };
    int lfd, port;
    char addr[64];
    CHECK(goro_listen("tcp4", "127.0.0.1:0", NULL, &lfd) == 0, "listen");
    port = goro_listen_addr(lfd, NULL, 0);
    snprintf(addr, sizeof addr, "localhost:%d", port);
    int64_t *gaps = malloc(MAXTICKS * sizeof *gaps);
    CHECK(gaps, "malloc");
    goro__net_getaddrinfo = rtt_gai;
    goro_t *acc = go(accept_all, lfd);
    int total = (int)t_scale(1000), per = total / 10 ? total / 10 : 1;
    goro_t *dialers[10];
    int nd = 0;
    atomic_store(&dials_left, 0);
    for (int left = total; left > 0; left -= per) {
        atomic_fetch_add(&dials_left, left < per ? left : per);
        dialers[nd++] = go(dial_many, (const char *)addr, left < per ? left : per);
    }
    goro_ticker_t *t;
    goro_ticker_new(&t, GORO_MSEC);
    int64_t t0 = goro_now(), last = t0;
    long ticks = 0;
    while (atomic_load(&dials_left) > 0 && ticks < MAXTICKS) {
        int64_t tick;
        goro_ticker_wait(t, &tick);
        int64_t now = goro_now();
        gaps[ticks++] = now - last;
        last = now;
    }
    int64_t took = goro_now() - t0;
    goro_ticker_free(t);
    for (int i = 0; i < nd; i++)
        goro_join(dialers[i], NULL);
    goro__net_getaddrinfo = getaddrinfo;
    goro_close(lfd);
    goro_join(acc, NULL);
    qsort(gaps, (size_t)ticks, sizeof *gaps, cmp_i64);
    int64_t median = ticks ? gaps[ticks / 2] : took, worst = ticks ? gaps[ticks - 1] : took;
    free(gaps);
    if (getenv("GORO_TEST_VERBOSE"))
        fprintf(stderr, "net: %d dials in %.0f ms, %ld ticks, median gap %.2f ms, worst %.1f ms\n",
                total, t_ms(took), ticks, t_ms(median), t_ms(worst));
    CHECK(ticks * GORO_MSEC * 4 >= took, "%ld ticks in %.0f ms (median gap %.2f ms, worst %.1f)",
          ticks, t_ms(took), t_ms(median), t_ms(worst));
    return 0;
}

START_TEST(net_resolution_leaves_the_worker)
{
    if (t_valgrind()) {
        /* valgrind runs one thread at a time: a pool thread inside
         * getaddrinfo holds the worker off, and the ticker's gaps measure
         * that, not goro. */
        t_skip("net_resolution_leaves_the_worker", "valgrind");
        return;
    }
    t_restart(&(goro_config_t){ .workers = 1 });
    run(ticker_on_time);
}
END_TEST

Suite *net_suite(void)
{
    Suite *s = suite_create("net");
    TCase *tc = t_runtime_tcase(s, "net", 60);
    tcase_add_test(tc, net_tcp_by_address_and_name);
    tcase_add_test(tc, net_tcp_nagle_off_by_default);
    tcase_add_test(tc, net_localhost_falls_back);
    tcase_add_test(tc, net_unix_sockets);
    tcase_add_test(tc, net_options_and_bad_input);
    tcase_add_test(tc, net_deadline_mid_resolution);
    tcase_add_test(tc, net_cancel_mid_resolution);
    tcase_add_test(tc, net_numeric_addresses_skip_the_resolver);
    tcase_add_test(tc, net_happy_eyeballs);
    tcase_add_test(tc, net_interleaves_families);
    tcase_add_test(tc, net_descriptor_limit);
    tcase_add_test(tc, net_resolution_leaves_the_worker);
    return s;
}
