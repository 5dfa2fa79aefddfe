/* The suites of the Check test binary; check_main.c runs them in this
 * order. One file per area: tests/test_<area>.c defines <area>_suite(). */
#ifndef GORO_TEST_SUITES_H
#define GORO_TEST_SUITES_H

#include <check.h>

Suite *spawn_suite(void);       /* test_spawn.c: spawn/join/detach, ids, names, threads */
Suite *err_suite(void);         /* test_err.c: error objects, through exit and join */
Suite *group_suite(void);       /* test_group.c: groups, policies, limits, the cancel tree */
Suite *flight_suite(void);      /* test_flight.c: single-flight: shared computations */
Suite *structured_suite(void);  /* test_structured.c: weighted sem, futures, causes, TryGo */
Suite *inherit_suite(void);     /* test_inherit.c: deadlines in force, inherited by groups */
Suite *watch_suite(void);       /* test_watch.c: done channels, after-functions, timers */
Suite *priority_suite(void);    /* test_priority.c: classes, inheritance, inversion */
Suite *deadline_suite(void);    /* test_deadline.c: reservations, EDF, budgets, loans */
Suite *pipeline_suite(void);    /* test_pipeline.c: the allocator, pipelines end to end */
Suite *args_suite(void);        /* test_args.c: argument forwarding through go() */
Suite *context_suite(void);     /* test_context.c: registers, FP state, errno */
Suite *stack_suite(void);       /* test_stack.c: depth, overflow, reuse, mappings */
Suite *errors_suite(void);      /* test_errors.c: bad input */
Suite *lifecycle_suite(void);   /* test_lifecycle.c: shutdown, restart */

/* Channel and sync suites (written separately, declared so that the test
 * binary builds; add them to GORO_TEST_SUITES when they are meant to run). */
Suite *chan_suite(void);        /* test_chan.c */
Suite *select_suite(void);      /* test_select.c */
Suite *sync_suite(void);        /* test_sync.c */
Suite *sched_suite(void);       /* test_sched.c: stress, lost wake-ups, fairness, idle CPU */
Suite *offload_suite(void);     /* test_offload.c: blocking work on the pool */
Suite *io_suite(void);          /* test_io*.c: sockets, pipes, files; errors; leaks */
Suite *fdreuse_suite(void);     /* test_fdreuse.c: goro_close racing reuse of its number */
Suite *time_suite(void);        /* test_time.c: clock, sleep, deadlines of every wait */
Suite *timer_suite(void);       /* test_timer.c: the timer heaps, tickers */
Suite *cancel_suite(void);      /* test_cancel.c: goro_cancel of every wait */
Suite *preempt_suite(void);     /* test_preempt*.c: preemption, register state, signals */
Suite *handoff_suite(void);     /* test_handoff.c: blocked workers handed over, under stress */
Suite *signal_suite(void);      /* test_signal.c: runtime threads' masks, goro_signal_notify */
Suite *dump_suite(void);        /* test_dump.c: goro_dump's workers, crash report symbols */
Suite *stall_suite(void);       /* test_stall.c: stall reports, their histogram */
Suite *deadlock_suite(void);    /* test_deadlock.c: deadlock reports, goro_leaks */
Suite *trace_suite(void);       /* test_trace.c: the execution trace, its file, the SVG tool */
Suite *clock_suite(void);       /* test_clock.c: the virtual clock, seeded interleavings */
Suite *process_suite(void);     /* test_process.c: child processes, pipes, waits, kills */
Suite *net_suite(void);         /* test_net.c: listen, dial by name, Happy Eyeballs */
Suite *stream_suite(void);      /* test_stream.c: buffered streams, goro_copy, fd passing */
Suite *file_suite(void);        /* test_file.c: files through io_uring and the pool, sendfile */

#define GORO_TEST_SUITES \
    spawn_suite, err_suite, args_suite, context_suite, stack_suite, errors_suite, \
    lifecycle_suite, chan_suite, select_suite, sync_suite, sched_suite, \
    signal_suite, \
    offload_suite, io_suite, fdreuse_suite, time_suite, timer_suite, cancel_suite, preempt_suite, handoff_suite, \
    dump_suite, stall_suite, deadlock_suite, trace_suite, clock_suite, group_suite, flight_suite, structured_suite, inherit_suite, watch_suite, priority_suite, deadline_suite, pipeline_suite, \
    process_suite, \
    net_suite, stream_suite, file_suite

#endif
