/* wait/future.c, for the producers inside wait/ (flight.c): a reference
 * that keeps a future alive while its owner may free it, until the
 * producer has set it. */
#ifndef GORO_WAIT_FUTURE_H
#define GORO_WAIT_FUTURE_H

#include "internal.h"

GORO_HIDDEN void goro__future_hold(struct goro_future *f);
GORO_HIDDEN void goro__future_drop(struct goro_future *f);

#endif
