/* net/: network and stream services (docs/streams.md) - buffered readers
 * and writers (stream.c), goro_copy by splice/sendfile (copy.c), recvmsg/
 * sendmsg and descriptor passing (msg.c); their calls are declared in
 * include/goro/stream.h. Built on the public API only, as pipe/ is: this
 * layer calls nothing below it but through goro.h.
 *
 * layer: net - streams and sockets, built on the public API (goro.h) alone
 * may call: nothing
 */
#ifndef GORO_NET_NET_H
#define GORO_NET_NET_H

#include "goro.h"

#endif
