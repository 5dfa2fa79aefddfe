#!/usr/bin/env python3
"""Checks that runtime/'s calls go down its layers (docs/architecture.md).

A call from a file of one layer to a goro__ function defined in a higher
layer is an error unless that function is part of a named contract below.
debug/ is beside every layer (it reads them all and all report through it);
runtime/internal.h counts as base/. Exit status 1 lists the offending calls.
"""
import collections
import glob
import os
import re
import sys

ORDER = ["base", "sched", "coro", "wait", "io", "pipe", "top"]

# The contracts by which a lower layer may call up (each named in the
# header of the layer that provides it).
CONTRACTS = {
    # io/poller.h: the poller, for sched/.
    ("sched", "io"): {"goro__netpoll", "goro__netpoll_break", "goro__netpoll_init",
                      "goro__netpoll_fini", "goro__netpoll_forget_all"},
    # coro/coro.h: a coroutine's life, for sched/.
    ("sched", "coro"): {"goro__release", "goro__slab_put", "goro__slab_trim_idle",
                        "goro__slab_trim_tick", "goro__slab_trim_pending",
                        "goro__slab_cache_spill",
                        "goro__cxx_eh_save", "goro__cxx_eh_restore"},
    # wait/group.h: the tree of groups, for coro/ (spawn, end, cancel).
    ("coro", "wait"): {"goro__cancel_tree", "goro__cancel_with_cause", "goro__group_limited", "goro__group_admit",
                       "goro__group_admit_undo",
                       "goro__group_link", "goro__group_exit", "goro__scope_free"},
    # io/poller.h: a select's descriptor cases, for wait/chan.c.
    ("wait", "io"): {"goro__select_fds"},
}
# runtime.c: the first use of the runtime starts it, from any layer.
ANYONE = {"goro__ensure_started"}

DEF = re.compile(r"^(?:GORO_HIDDEN\s+)?(?:static\s+inline\s+)?[A-Za-z_][\w\s\*]*?"
                 r"\b(goro__\w+)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b(goro__\w+)\s*\(")


def layer(path):
    parts = path.split(os.sep)
    if path == os.path.join("runtime", "internal.h"):
        return "base"
    return parts[1] if len(parts) > 2 else "top"


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sources = glob.glob("runtime/*/*.c") + glob.glob("runtime/*.c")
    headers = glob.glob("runtime/*/*.h") + glob.glob("runtime/*.h")
    defined = {}
    for path in sources + headers:
        for m in DEF.finditer(open(path).read()):
            defined[m.group(1)] = path
    bad = collections.defaultdict(set)
    for path in sources:
        here = layer(path)
        for m in CALL.finditer(open(path).read()):
            name = m.group(1)
            there = layer(defined.get(name, path))
            if "debug" in (here, there) or name in ANYONE:
                continue
            if ORDER.index(there) > ORDER.index(here) and \
                    name not in CONTRACTS.get((here, there), ()):
                bad[path].add("%s (%s/)" % (name, there))
    for path in sorted(bad):
        print("%s calls up outside a contract: %s" % (path, ", ".join(sorted(bad[path]))))
    if bad:
        return 1
    print("layers: %d files, every call goes down or through a named contract" % len(sources))
    return 0


if __name__ == "__main__":
    sys.exit(main())
