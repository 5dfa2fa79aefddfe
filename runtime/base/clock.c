/* The runtime's clock: CLOCK_MONOTONIC in nanoseconds, the time base of
 * every deadline (goro_now). */
#include <time.h>

#include "internal.h"

int64_t goro__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}
