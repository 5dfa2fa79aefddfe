/* The Check runner: every suite of tests/suites.h, summary line from
 * CK_NORMAL, exit status non-zero on any failure. Environment: CK_FORK=no
 * (valgrind), CK_RUN_SUITE / CK_RUN_CASE to pick, GORO_TEST_SLOW=1 to shrink
 * loop counts (qemu), GORO_TEST_VALGRIND=1 (valgrind: shrink more, skip what
 * valgrind cannot model), GORO_TEST_STALL_INJECT=1 (the host's stalls,
 * injected: helpers.h). GORO_STACK_SIZE and GORO_WORKERS are cleared. */
#include <stdlib.h>

#include "helpers.h"
#include "suites.h"

int main(void)
{
    /* The tests choose their settings; a developer's environment must not
     * (a small GORO_STACK_SIZE would make the deep-recursion tests overflow). */
    unsetenv("GORO_STACK_SIZE");
    unsetenv("GORO_WORKERS");
    /* Check's default limit is 4 KiB: a longer failure message - the text
     * of an assertion around go(), whose expansion is long, or a report
     * of many cases - ended the test with "Message string too long" and
     * "Early exit with return value 2", the message lost. */
    check_set_max_msg_size(1 << 16);
    t_stall_inject_start();         /* GORO_TEST_STALL_INJECT=1 only */
    Suite *(*const suites[])(void) = { GORO_TEST_SUITES };
    t_runner = srunner_create(NULL);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        srunner_add_suite(t_runner, suites[i]());
    srunner_run_all(t_runner, CK_NORMAL);
    int failed = srunner_ntests_failed(t_runner);
    srunner_free(t_runner);
    t_stall_inject_stop();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
