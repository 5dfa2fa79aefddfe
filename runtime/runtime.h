/* runtime.c: goro_start and goro_shutdown - the layers started and
 * stopped in order, settings from goro_config_t and the environment - and
 * the first use of the runtime, which starts it from any layer.
 *
 * layer: runtime - goro_start / goro_shutdown: starts and stops the layers
 * may call: file, io, coro, sched, debug, base
 * contract start for all: goro__ensure_started
 */
#ifndef GORO_RUNTIME_H
#define GORO_RUNTIME_H

#include "internal.h"

/* Starts the runtime as goro_start(NULL) would, unless it runs: 0, or
 * goro_start's error. A public call that needs the runtime makes this its
 * first step, as go() does. */
GORO_HIDDEN int goro__ensure_started(void);

#endif
