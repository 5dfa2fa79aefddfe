/* I/O: the io suite, its tests by concern in test_io_<concern>.c -
 * streams (thousands of connections, partial reads and writes), sockets
 * (reset, half-close, accept storms, goro_wait_fd, connect), pipes,
 * socketpairs, datagrams, files and devices, closing under waiters, bad
 * input and leaks, and calls from threads that are not coroutines. */
#include "test_io.h"

Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    struct io_tcases tc = {
        .io = t_runtime_tcase(s, "io", 30),
        .cancel_detached = t_runtime_tcase(s, "cancel_detached", 60),
        .sigpipe = t_runtime_tcase(s, "sigpipe", 30),
    };
    io_stream_tests(&tc);
    io_sock_tests(&tc);
    io_pipe_tests(&tc);
    io_close_tests(&tc);
    io_errors_tests(&tc);
    io_threads_tests(&tc);
    return s;
}
