# gdb support for goro coroutines.
#
#   info coroutines [FILTER...]    list coroutines: Id, State, Worker, Entry, Where
#   coroutine [N | none]           select coroutine N (frames, locals, up/down)
#   coroutine apply all|N... CMD   run CMD with each coroutine selected
#   $coro(N)                       the struct goro of coroutine N
#   pretty-printers for goro_t, goro_chan_t, goro_mutex_t and workers
#
# gdb loads this file by itself for programs linked with goro (it is
# embedded in their .debug_gdb_scripts section), once auto-loading is
# allowed for them; or load it with `source goro_gdb.py`. See
# docs/debugging.md.
#
# How it works. The runtime exports goro_debug, a versioned table with the
# address of every coroutine and worker, the offsets of the fields read
# here and the layout of a saved context; everything essential is read
# through it, so no debug information is needed for listing and
# selecting. A parked coroutine is selected through an unwinder: while a
# coroutine is selected, the innermost frame of the current thread
# "returns" into the coroutine's saved registers, and gdb's own unwinding
# takes it from there. Nothing is written to the program, so the same
# works on a core file; the bt filter hides that innermost frame (it is
# the thread's own). A running coroutine is shown through its worker
# thread. The selection is dropped when the program resumes or another
# thread is chosen.
#
# Loading the file again replaces what an earlier load registered.

import fnmatch
import os
import re
import struct

import gdb
import gdb.printing
import gdb.unwinder

TABLE_VERSION = 3

# goro_debug, version 3 (runtime/debug/registry.c), little-endian, no padding.
_TABLE_FIELDS = [
    ("version", "I"), ("size", "I"), ("coros", "Q"), ("ncoros", "I"),
    ("capacity", "I"), ("ms", "Q"), ("nms", "I"), ("sizeof_m", "I"),
    ("sizeof_goro", "I"), ("nstates", "I"), ("state_names", "Q"),
    ("wait_names", "Q"), ("nwaits", "I"), ("flag_g0", "I"),
    ("flag_external", "I"),
    ("off_sp", "H"), ("off_state", "H"), ("off_wait", "H"), ("off_flags", "H"),
    ("off_id", "H"), ("off_m", "H"), ("off_wait_obj", "H"), ("off_fn", "H"),
    ("off_name", "H"), ("off_lo", "H"), ("off_hi", "H"),
    ("off_stack_size", "H"), ("size_name", "H"),
    ("off_m_id", "H"), ("off_m_tid", "H"), ("off_m_curg", "H"), ("off_m_g0", "H"),
    ("ctx_words", "H"), ("ctx_slot_pc", "H"), ("ctx_slot_fp", "H"),
    ("ctx_caller_sp", "H"), ("off_dl", "H"), ("ctx_regs", "Q"), ("arch", "16s"),
]
_TABLE_FORMAT = "<" + "".join(f for _, f in _TABLE_FIELDS)

# gdb's names for the program counter and stack pointer of each architecture.
_PC_SP = {"x86_64": ("rip", "rsp"), "aarch64": ("pc", "sp")}

# States and wait reasons go by the names the runtime exports with them.
FREE, RUNNABLE, RUNNING, PARKED, DEAD = "free", "runnable", "running", "parked", "dead"
WAIT_JOIN, WAIT_IO, WAIT_OFFLOAD = "join", "io", "offload"

# struct goro_p's owner while sysmon takes the P away (GORO_P_RETAKING).
_P_RETAKING = 1


class GoroError(gdb.GdbError):
    pass


# ---------------------------------------------------------------------------
# Reading the program's memory

def _read(addr, size):
    try:
        return bytes(gdb.selected_inferior().read_memory(addr, size))
    except gdb.MemoryError:
        raise GoroError("goro: cannot read %d bytes at 0x%x" % (size, addr))


def _u(addr, fmt):
    return struct.unpack("<" + fmt, _read(addr, struct.calcsize(fmt)))[0]


def _cstring(addr, limit=256):
    if not addr:
        return ""
    out = b""
    while len(out) < limit:
        try:
            chunk = bytes(gdb.selected_inferior().read_memory(addr + len(out), 16))
        except gdb.MemoryError:
            # the string may end right before an unmapped page
            try:
                chunk = bytes(gdb.selected_inferior().read_memory(addr + len(out), 1))
            except gdb.MemoryError:
                break
        end = chunk.find(b"\0")
        if end >= 0:
            return (out + chunk[:end]).decode("utf-8", "replace")
        out += chunk
    return out.decode("utf-8", "replace")


def _symbol_address(name):
    try:
        return int(gdb.parse_and_eval("(unsigned long)&%s" % name))
    except gdb.error:
        return None


# ---------------------------------------------------------------------------
# The runtime's state: a snapshot read through goro_debug

class Coroutine(object):
    """One coroutine, as read from its struct goro."""

    def __init__(self, rt, addr):
        t = rt.table
        raw = _read(addr, t["sizeof_goro"])
        field = lambda off, fmt: struct.unpack_from("<" + fmt, raw, off)[0]
        self.addr = addr
        self.id = field(t["off_id"], "Q")
        self.state = field(t["off_state"], "i")
        self.wait = field(t["off_wait"], "B")
        self.flags = field(t["off_flags"], "B")
        self.wait_obj = field(t["off_wait_obj"], "Q")
        self.fn = field(t["off_fn"], "Q")
        self.sp = field(t["off_sp"], "Q")
        self.m = field(t["off_m"], "Q")
        self.lo = field(t["off_lo"], "Q")
        self.hi = field(t["off_hi"], "Q")
        self.stack_size = field(t["off_stack_size"], "Q")
        self.dl = field(t["off_dl"], "Q")   # its reservation's record, 0: none
        name = raw[t["off_name"]:t["off_name"] + t["size_name"]]
        self.name = name.split(b"\0", 1)[0].decode("utf-8", "replace")
        self.state_name = rt.state_name(self.state)
        self.wait_name = rt.wait_name(self.wait)
        self._rt = rt

    def label(self):
        return '%d "%s"' % (self.id, self.name) if self.name else str(self.id)

    def wait_text(self):
        """What it waits on: "chan recv 0x...", "io fd=12", "join coroutine 7"."""
        obj = self.wait_obj
        if self.wait_name == WAIT_IO and obj:
            try:
                return "io fd=%d" % _u(obj, "i")
            except GoroError:
                pass
        if self.wait_name == WAIT_JOIN and obj:
            try:
                return "join coroutine %d" % Coroutine(self._rt, obj).id
            except GoroError:
                pass
        if self.wait_name == WAIT_OFFLOAD and obj:
            return "offload %s" % symbol_name(obj)
        return "%s 0x%x" % (self.wait_name, obj) if obj else self.wait_name

    def state_text(self):
        if self.state_name == PARKED:
            return "parked: " + self.wait_text() + self.dl_text()
        return self.state_name + self.dl_text()

    def dl_text(self):
        """A reservation (runtime/deadline.c's struct goro_dlres, whose
        first fields stay put): " [deadline 2/5/10 ms, budget 1.2 ms, 3
        misses, 1 throttle]", or "" for none."""
        if not self.dl:
            return ""
        try:
            (run, dline, period, _bw, _g, _abs, budget, _periods, misses,
             throttles) = struct.unpack("<qqqQQqqQQQ", _read(self.dl, 80))
        except GoroError:
            return " [deadline: unreadable]"
        ms = lambda ns: ("%.3f" % (ns / 1e6)).rstrip("0").rstrip(".")
        return " [deadline %s/%s/%s ms, budget %s ms, %d misses, %d throttles]" % (
            ms(run), ms(dline), ms(period), ms(budget), misses, throttles)

    def saved_registers(self):
        """[(gdb register name, value)] of the caller of goro__ctx_switch,
        and the saved sp: the registers the coroutine resumes with."""
        t = self._rt.table
        words = t["ctx_words"]
        frame = struct.unpack("<%dQ" % words, _read(self.sp, 8 * words))
        pc_name, sp_name = _PC_SP.get(self._rt.arch, ("pc", "sp"))
        regs = [(pc_name, frame[t["ctx_slot_pc"]]), (sp_name, self.sp + t["ctx_caller_sp"])]
        for slot, name in enumerate(self._rt.ctx_regs[:words]):
            if name not in ("-", "pc"):
                regs.append((name, frame[slot]))
        return regs


class Worker(object):
    """A thread of the runtime (struct goro_m). Workers are not threads: a
    worker is a P, the right to run coroutines; a thread blocked in a
    system call has its worker handed to another thread and comes back as
    a spare. `worker` is the id of the worker this thread holds, None for a
    spare thread; without debug information it is the thread's own number,
    which is its worker's until a hand-off."""

    def __init__(self, rt, addr):
        t = rt.table
        raw = _read(addr, t["sizeof_m"])
        self.addr = addr
        self.id = struct.unpack_from("<i", raw, t["off_m_id"])[0]
        self.tid = struct.unpack_from("<i", raw, t["off_m_tid"])[0]
        self.curg = struct.unpack_from("<Q", raw, t["off_m_curg"])[0]
        held = rt.workers_held()
        self.worker = held.get(addr) if held is not None else self.id

    def label(self):
        """"worker 0", or "spare thread (no worker)"."""
        if self.worker is None:
            return "spare thread (no worker)"
        return "worker %d" % self.worker

    def thread(self):
        """The gdb thread of this worker, or None."""
        for th in gdb.selected_inferior().threads():
            if th.ptid[1] == self.tid:
                return th
        return None


class Runtime(object):
    """A snapshot of goro's registry. Read again for every command: the
    program may have run in between."""

    def __init__(self):
        addr = _symbol_address("goro_debug")
        if addr is None:
            raise GoroError("goro: no goro_debug symbol: is this program linked with goro?")
        head = _read(addr, 8)
        version, size = struct.unpack("<II", head)
        if version != TABLE_VERSION or size != struct.calcsize(_TABLE_FORMAT):
            raise GoroError("goro: goro_debug version %d (size %d); this script reads "
                            "version %d - use the goro_gdb.py of the same goro version"
                            % (version, size, TABLE_VERSION))
        values = struct.unpack(_TABLE_FORMAT, _read(addr, size))
        self.table = dict(zip((n for n, _ in _TABLE_FIELDS), values))
        self.arch = self.table["arch"].split(b"\0", 1)[0].decode()
        self.ctx_regs = _cstring(self.table["ctx_regs"]).split()
        self._states = self._names("state_names", "nstates")
        self._waits = self._names("wait_names", "nwaits")
        self._coros = None
        self._workers = None
        self._held = None
        self.unreadable = 0

    def _names(self, array, count):
        base, n = self.table[array], self.table[count]
        if not base:
            return []
        ptrs = struct.unpack("<%dQ" % n, _read(base, 8 * n))
        return [_cstring(p, 32) for p in ptrs]

    def state_name(self, s):
        return self._states[s] if 0 <= s < len(self._states) else "state %d" % s

    def wait_name(self, w):
        return self._waits[w] if 0 <= w < len(self._waits) else "wait %d" % w

    def coroutines(self, include_free=False):
        if self._coros is None:
            t = self.table
            n = t["ncoros"]
            ptrs = struct.unpack("<%dQ" % n, _read(t["coros"], 8 * n)) if n else ()
            coros = []
            for p in ptrs:
                try:
                    coros.append(Coroutine(self, p))
                except GoroError:
                    self.unreadable += 1    # a slab missing from the core
            coros.sort(key=lambda c: c.id)
            self._coros = coros
        return [c for c in self._coros if include_free or c.state_name != FREE]

    def find(self, cid):
        for c in self.coroutines():
            if c.id == cid:
                return c
        raise GoroError("goro: no coroutine %d (see info coroutines)" % cid)

    def coroutine_at(self, addr):
        return Coroutine(self, addr)

    def workers(self):
        if self._workers is None:
            t = self.table
            self._workers = [Worker(self, t["ms"] + i * t["sizeof_m"]) for i in range(t["nms"])]
        return self._workers

    def workers_held(self):
        """{address of a thread: id of the worker it holds}, from the
        scheduler's Ps (goro__sched.procs): a P's owner, not the thread's
        own p, which a blocked thread keeps until it comes back. None
        without debug information."""
        if self._held is None:
            held = {}
            try:
                sched = gdb.parse_and_eval("goro__sched")
                procs = sched["procs"]
                for i in range(int(sched["nprocs"]) if int(procs) else 0):
                    p = procs[i]
                    owner = int(p["owner"])
                    if owner == _P_RETAKING:    # sysmon decides; until then the old one's
                        owner = int(p["m"])
                    held[owner] = int(p["id"])
            except gdb.error:
                held = False
            self._held = held
        return self._held if self._held is not False else None

    def worker_running(self, coro):
        for w in self.workers():
            if w.curg == coro.addr:
                return w
        return None

    def worker_of_thread(self, thread):
        if thread is None:
            return None
        for w in self.workers():
            if w.tid == thread.ptid[1]:
                return w
        return None


def symbol_name(addr):
    """The function at addr: "name", "name+16" or the address."""
    if not addr:
        return "-"
    try:
        block = gdb.block_for_pc(addr)
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None and block.function is not None and block.start == addr:
            return block.function.print_name
    except RuntimeError:
        pass
    try:
        text = gdb.execute("info symbol 0x%x" % addr, to_string=True)
    except gdb.error:
        text = ""
    m = re.match(r"(\S+)( \+ (\d+))? in section", text)
    if m:
        return m.group(1) + ("+" + m.group(3) if m.group(3) else "")
    return "0x%x" % addr


# ---------------------------------------------------------------------------
# Selection: which coroutine the unwinder shows on which thread

class _Selection(object):
    def __init__(self, rt, coro, thread, registers):
        self.pc_name, self.sp_name = _PC_SP.get(rt.arch, ("pc", "sp"))
        self.coro_id = coro.id
        self.coro_label = coro.label()
        self.saved_sp = coro.sp
        self.ptid = thread.ptid
        self.registers = registers


_selection = None


def _set_selection(sel):
    global _selection
    _selection = sel
    gdb.invalidate_cached_frames()


def _selection_active():
    sel = _selection
    if sel is None:
        return None
    th = gdb.selected_thread()
    return sel if th is not None and th.ptid == sel.ptid else None


def select_coroutine(rt, coro):
    """Shows coro in the current thread (parked, runnable) or switches to
    the thread it runs on. Returns the frame to select."""
    if coro.state_name == RUNNING:
        worker = rt.worker_running(coro)
        thread = worker.thread() if worker else None
        if thread is None:
            raise GoroError("goro: coroutine %d is running, but its worker thread is "
                            "not known to gdb" % coro.id)
        _set_selection(None)
        thread.switch()
        return gdb.newest_frame()
    if coro.state_name not in (PARKED, RUNNABLE):
        raise GoroError("goro: coroutine %d is %s: it has no stack to show"
                        % (coro.id, coro.state_name))
    thread = gdb.selected_thread()
    if thread is None:
        raise GoroError("goro: no thread to show the coroutine in")
    _set_selection(_Selection(rt, coro, thread, coro.saved_registers()))
    frame = gdb.newest_frame().older()
    if frame is None:
        _set_selection(None)
        raise GoroError("goro: cannot unwind coroutine %d" % coro.id)
    return frame


class _SavedState(object):
    """The selected thread, coroutine and frame level, to put back."""

    def __init__(self):
        self.selection = _selection
        self.thread = gdb.selected_thread()
        try:
            self.level = gdb.selected_frame().level()
        except gdb.error:
            self.level = None

    def restore(self):
        global _selection
        if self.thread is not None and self.thread.is_valid():
            self.thread.switch()
        _selection = self.selection
        gdb.invalidate_cached_frames()
        if self.level is None:
            return
        try:
            frame = gdb.newest_frame()
            while frame is not None and frame.level() < self.level:
                frame = frame.older()
            if frame is not None:
                frame.select()
        except gdb.error:
            pass


# ---------------------------------------------------------------------------
# The unwinder and the bt filter

class _FrameId(object):
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


def _typed(pending, name, value):
    """[(name, value as a gdb.Value of the register's type)], or [] when
    this architecture has no register of that name."""
    try:
        typ = pending.read_register(name).type
    except ValueError:
        return []
    if typ.strip_typedefs().code in (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_PTR):
        return [(name, gdb.Value(value).cast(typ))]
    data = struct.pack("<Q", value).ljust(typ.sizeof, b"\0")
    return [(name, gdb.Value(data, typ))]


def _register_values(pending, name, value):
    """What to report for one saved register. aarch64's d8-d15 are the low
    halves of v8-v15: both are given, the raw register for the frames that
    gdb unwinds by their CFI and the pseudo one for this frame's caller
    (the upper halves are not callee-saved: they read as zero)."""
    vector = re.match(r"d(\d+)$", name)
    if vector:
        return _typed(pending, "v" + vector.group(1), value) + _typed(pending, name, value)
    return _typed(pending, name, value)


class CoroutineUnwinder(gdb.unwinder.Unwinder):
    """While a coroutine is selected, the innermost frame of the selected
    thread returns into the coroutine's saved context."""

    def __init__(self):
        super(CoroutineUnwinder, self).__init__("goro-coroutine")

    def __call__(self, pending):
        if pending.level() != 0:
            return None
        sel = _selection_active()
        if sel is None:
            return None
        sp_type = pending.read_register(sel.sp_name).type
        # Frame 0 keeps the thread's pc; its id takes the coroutine's saved
        # sp, below every frame of the coroutine, so that gdb's check that
        # callers lie above callees holds whatever stack the thread is on.
        fid = _FrameId(gdb.Value(sel.saved_sp).cast(sp_type), pending.read_register(sel.pc_name))
        info = pending.create_unwind_info(fid)
        for name, value in sel.registers:
            for reg, typed in _register_values(pending, name, value):
                info.add_saved_register(reg, typed)
        return info


class HideThreadFrame(object):
    """bt shows a selected coroutine's frames only: frame 0 is the thread's."""

    def __init__(self):
        self.name = "goro-coroutine"
        self.priority = 100
        self.enabled = True

    def filter(self, frames):
        if _selection_active() is None:
            return frames
        return (d for d in frames if d.inferior_frame().level() != 0)


# ---------------------------------------------------------------------------
# Where a coroutine is: the first frame outside the runtime

class _RuntimeFiles(object):
    """Tells the runtime's own frames from the program's: by source file
    (runtime/, the parent of registry.c's debug/ directory, and the arch
    directory next to it), by shared object (libgoro.so), else by name
    (goro_...)."""

    def __init__(self):
        self.dirs = None

    def _runtime_dirs(self):
        if self.dirs is None:
            self.dirs = []
            try:
                sym = gdb.lookup_global_symbol("goro_debug")
                if sym is not None and sym.symtab is not None:
                    rdir = os.path.dirname(os.path.dirname(sym.symtab.fullname()))
                    self.dirs = [rdir + os.sep, os.path.join(os.path.dirname(rdir), "arch") + os.sep]
            except (gdb.error, RuntimeError):
                pass
        return self.dirs

    def is_runtime(self, frame):
        sal = frame.find_sal()
        symtab = sal.symtab
        if symtab is None and frame.function() is not None:
            symtab = frame.function().symtab
        if symtab is not None:
            path = symtab.fullname()
            return any(path.startswith(d) for d in self._runtime_dirs())
        lib = gdb.solib_name(frame.pc()) or ""
        if "libgoro" in os.path.basename(lib):
            return True
        return (frame.name() or "").startswith("goro")


_runtime_files = _RuntimeFiles()


def _where(frame, depth, parked):
    """"file.c:41" of the first frame from `frame` outward that is the
    program's own: outside the runtime, with line information. Without
    line information, a function name: the caller of the innermost public
    goro_ function; else, for a parked coroutine (whose innermost frames
    are the runtime's), the last frame before the coroutine's entry code;
    else the first frame not named goro (libc, say)."""
    frames = []
    try:
        while frame is not None and len(frames) < depth:
            frames.append(frame)
            frame = frame.older()
    except gdb.error:
        pass
    # a signal's trampoline ("<signal handler called>") is nobody's place
    outside = [f for f in frames
               if f.type() != gdb.SIGTRAMP_FRAME and not _runtime_files.is_runtime(f)]
    for f in outside:
        sal = f.find_sal()
        if sal.symtab is not None and sal.line:
            return "%s:%d" % (os.path.basename(sal.symtab.filename), sal.line)
    names = [f.name() or "" for f in frames]
    for i, name in enumerate(names):
        if re.match(r"goro_[a-z]", name):
            callers = [f for f in frames[i + 1:] if f in outside]
            if callers:
                return callers[0].name() or "0x%x" % callers[0].pc()
    if parked:
        for i, name in enumerate(names):
            if i > 0 and re.match(r"goro(__|\.)(invoke|coro_main)$", name):
                return names[i - 1] or "0x%x" % frames[i - 1].pc()
    if outside:
        return outside[0].name() or "0x%x" % outside[0].pc()
    return "?"


def coroutine_where(rt, coro, depth):
    if coro.state_name == DEAD:
        return "(finished)"
    if depth <= 0:
        return ""
    saved = _SavedState()
    try:
        frame = select_coroutine(rt, coro)
        return _where(frame, depth, coro.state_name != RUNNING)
    except (GoroError, gdb.error):
        return "?"
    finally:
        saved.restore()


# ---------------------------------------------------------------------------
# Commands

class GoroPrefix(gdb.Command):
    """Settings of the goro extension."""

    def __init__(self, verb):
        super(GoroPrefix, self).__init__(verb + " goro", gdb.COMMAND_DATA, gdb.COMPLETE_NONE,
                                         True)


class WhereDepth(gdb.Parameter):
    """How many frames `info coroutines` looks through for the Where column
    (0: leave the column out, which is faster with many coroutines)."""

    set_doc = "Set how many frames info coroutines searches for Where."
    show_doc = "Show how many frames info coroutines searches for Where."

    def __init__(self):
        super(WhereDepth, self).__init__("goro where-depth", gdb.COMMAND_DATA,
                                         gdb.PARAM_ZUINTEGER)
        self.value = 32

    def get_show_string(self, svalue):
        return "info coroutines looks through %s frames for Where." % svalue


def _parse_filters(arg):
    """info coroutines filters: state names (parked, running, runnable,
    dead, free), ids, name=GLOB, entry=GLOB, wait=GLOB; all must hold."""
    states, ids, globs = set(), set(), []
    for tok in gdb.string_to_argv(arg or ""):
        key, eq, value = tok.partition("=")
        if eq and key in ("name", "entry", "wait", "state"):
            if key == "state":
                states.add(value)
            else:
                globs.append((key, value))
        elif tok.isdigit():
            ids.add(int(tok))
        elif tok in ("parked", "running", "runnable", "dead", "free"):
            states.add(tok)
        else:
            raise GoroError("goro: unknown filter %r: use parked, running, runnable, "
                            "dead, free, an id, name=GLOB, entry=GLOB or wait=GLOB" % tok)
    return states, ids, globs


def _matches(coro, entry, states, ids, globs):
    if states and coro.state_name not in states:
        return False
    if ids and coro.id not in ids:
        return False
    for key, pattern in globs:
        text = {"name": coro.name, "entry": entry,
                "wait": coro.wait_name if coro.state_name == PARKED else ""}[key]
        if not fnmatch.fnmatchcase(text, pattern):
            return False
    return True


def current_coroutine_id(rt):
    """The selected coroutine, else the one running on the selected thread."""
    sel = _selection_active()
    if sel is not None:
        return sel.coro_id
    worker = rt.worker_of_thread(gdb.selected_thread())
    if worker is not None and worker.curg:
        try:
            return rt.coroutine_at(worker.curg).id
        except GoroError:
            return None
    return None


class InfoCoroutines(gdb.Command):
    """List goro coroutines: info coroutines [FILTER...]

Columns: Id, State (with what a parked coroutine waits on), Worker (the
worker running it; "spare" for a thread whose worker was handed off while
it blocked or would not be preempted), Entry (its function) and Where (the first frame outside the
runtime). * marks the current coroutine: the selected one, or the one
running on the selected thread.

Filters, all of which must match: a state (parked, running, runnable, dead;
free lists pooled stacks too), coroutine ids, name=GLOB, entry=GLOB,
wait=GLOB (e.g. wait=chan*).  Example: info coroutines parked name=worker-*"""

    def __init__(self):
        super(InfoCoroutines, self).__init__("info coroutines", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        rt = Runtime()
        states, ids, globs = _parse_filters(arg)
        depth = gdb.parameter("goro where-depth")
        current = current_coroutine_id(rt)
        rows = []
        for coro in rt.coroutines(include_free="free" in states):
            entry = symbol_name(coro.fn)
            if not _matches(coro, entry, states, ids, globs):
                continue
            worker = rt.worker_running(coro) if coro.state_name == RUNNING else None
            column = "-"
            if worker:
                column = "spare" if worker.worker is None else str(worker.worker)
            rows.append(("*" if coro.id == current else " ", str(coro.id), coro.state_text(),
                         column, entry, coroutine_where(rt, coro, depth)))
        if rt.unreadable:
            gdb.write("(%d coroutine records could not be read: not in the core file?)\n"
                      % rt.unreadable)
        if not rows:
            gdb.write("No coroutines%s.\n" % (" match" if arg and arg.strip() else ""))
            return
        head = (" ", "Id", "State", "Worker", "Entry", "Where")
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
        for r in [head] + rows:
            cells = [r[i].ljust(widths[i]) for i in range(5)] + [r[5]]
            gdb.write(" ".join(cells).rstrip() + "\n")


def _announce(rt, coro, frame):
    where = ""
    if coro.state_name == RUNNING:
        worker = rt.worker_running(coro)
        where = " on %s, thread %d" % (worker.label(), gdb.selected_thread().num)
    gdb.write("[Switching to coroutine %s, %s%s]\n" % (coro.label(), coro.state_text(), where))
    frame.select()
    gdb.execute("frame", to_string=False)


class CoroutineCommand(gdb.Command):
    """Select a goro coroutine: coroutine N | coroutine none | coroutine

With N, shows coroutine N: bt, frame, up, down, info locals and print then
work on its stack. A parked or runnable coroutine is shown in the current
thread (its bt starts at frame 1: frame 0 is the thread's own and is
hidden); a running one by switching to the worker thread that runs it.
Nothing in the program is changed, so this works on core files too. The
selection ends when the program resumes, when another thread is selected,
or with `coroutine none`. Without an argument, says what is selected."""

    def __init__(self):
        super(CoroutineCommand, self).__init__("coroutine", gdb.COMMAND_STACK,
                                               gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        arg = (arg or "").strip()
        if not arg:
            sel = _selection_active()
            gdb.write("Coroutine %s is selected.\n" % sel.coro_label if sel
                      else "No coroutine is selected: frames are the thread's own.\n")
            return
        if arg == "none":
            _set_selection(None)
            gdb.newest_frame().select()
            gdb.write("[Back to the thread's own frames]\n")
            return
        if not arg.isdigit():
            raise GoroError("goro: usage: coroutine N | coroutine none | "
                            "coroutine apply all|N... COMMAND")
        rt = Runtime()
        coro = rt.find(int(arg))
        _announce(rt, coro, select_coroutine(rt, coro))


class CoroutineApply(gdb.Command):
    """Run a command in coroutines: coroutine apply all|N... COMMAND

Selects each coroutine in turn (parked, runnable or running ones; all
means every one of those), prints a header and runs COMMAND, e.g.
`coroutine apply all bt` or `coroutine apply 3 7 info locals`. The
selection from before is put back afterwards."""

    def __init__(self):
        super(CoroutineApply, self).__init__("coroutine apply", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        words = (arg or "").split(None, 1)
        if not words:
            raise GoroError("goro: usage: coroutine apply all|N... COMMAND")
        rt = Runtime()
        if words[0] == "all":
            coros = [c for c in rt.coroutines()
                     if c.state_name in (PARKED, RUNNABLE, RUNNING)]
            command = words[1] if len(words) > 1 else ""
        else:
            ids, rest = [], arg.split()
            while rest and rest[0].isdigit():
                ids.append(int(rest.pop(0)))
            if not ids:
                raise GoroError("goro: usage: coroutine apply all|N... COMMAND")
            coros = [rt.find(i) for i in ids]
            command = arg.split(None, len(ids))[-1] if len(arg.split()) > len(ids) else ""
        if not command:
            raise GoroError("goro: coroutine apply: no command to run")
        saved = _SavedState()
        try:
            for coro in coros:
                gdb.write("\nCoroutine %s (%s):\n" % (coro.label(), coro.state_text()))
                try:
                    select_coroutine(rt, coro).select()
                    gdb.execute(command, from_tty)
                except (GoroError, gdb.error) as e:
                    gdb.write("%s\n" % e)
        finally:
            saved.restore()


class CoroFunction(gdb.Function):
    """$coro(N): coroutine N's struct goro (an address when the program has
    no debug information). E.g. p $coro(3), p $coro(3).name."""

    def __init__(self):
        super(CoroFunction, self).__init__("coro")

    def invoke(self, n):
        coro = Runtime().find(int(n))
        try:
            typ = gdb.lookup_type("struct goro")
            return gdb.Value(coro.addr).cast(typ.pointer()).dereference()
        except gdb.error:
            return gdb.Value(coro.addr).cast(gdb.lookup_type("void").pointer())


# ---------------------------------------------------------------------------
# Pretty-printers (channels and locks need the runtime's debug information)

def _address_of(val):
    return int(val.address) if val.address is not None else None


def _waiters(waitq, rt, limit=16):
    """"[coroutine 3 "name", ...]" of a struct goro_waitq."""
    names, w, n = [], waitq["head"], 0
    while int(w) and n < limit:
        try:
            names.append("coroutine " + rt.coroutine_at(int(w["g"])).label())
        except (GoroError, gdb.error):
            names.append("?")
        w, n = w["next"], n + 1
    if int(w):
        names.append("...")
    return "[" + ", ".join(names) + "]"


class CoroutinePrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        addr = _address_of(self.val)
        if addr is None:
            return "coroutine (not in memory)"
        try:
            coro = Runtime().coroutine_at(addr)
        except GoroError as e:
            return "coroutine at 0x%x (%s)" % (addr, e)
        text = "coroutine %s %s, entry %s" % (coro.label(), coro.state_text(),
                                              symbol_name(coro.fn))
        if coro.state_name == RUNNING and coro.m:
            try:
                text += ", on " + Worker(Runtime(), coro.m).label()
            except GoroError:
                pass
        return text


class ChannelPrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        v = self.val
        try:
            rt = Runtime()
            return ("channel %s, %d of %d buffered (elements of %d bytes), "
                    "receivers waiting %s, senders waiting %s"
                    % ("closed" if int(v["closed"]) else "open", int(v["count"]),
                       int(v["cap"]), int(v["elem_size"]), _waiters(v["recvq"], rt),
                       _waiters(v["sendq"], rt)))
        except (gdb.error, GoroError) as e:
            return "channel (%s)" % e


class MutexPrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        try:
            impl = gdb.lookup_type("struct mutex_impl")
        except gdb.error:
            return "goro mutex (no debug information for its layout)"
        addr = _address_of(self.val)
        if addr is None:
            return "goro mutex (not in memory)"
        m = gdb.Value(addr).cast(impl.pointer()).dereference()
        try:
            rt = Runtime()
            if not int(m["holder"]["held"]):
                return "goro mutex, unlocked"
            return "goro mutex, locked, waiting %s" % _waiters(m["q"], rt)
        except (gdb.error, GoroError) as e:
            return "goro mutex (%s)" % e


class WorkerPrinter(object):
    def __init__(self, val):
        self.val = val

    def to_string(self):
        addr = _address_of(self.val)
        if addr is None:
            return "worker (not in memory)"
        try:
            rt = Runtime()
            w = Worker(rt, addr)
            doing = "in the scheduler" if w.worker is not None else "idle"
            if w.curg:
                doing = "running coroutine " + rt.coroutine_at(w.curg).label()
                if w.worker is None:
                    doing += " (its worker was handed off)"
            return "%s, thread %d, %s" % (w.label(), w.tid, doing)
        except GoroError as e:
            return "worker (%s)" % e


def _build_printers():
    pp = gdb.printing.RegexpCollectionPrettyPrinter("goro")
    pp.add_printer("goro_t", "^goro$", CoroutinePrinter)
    pp.add_printer("goro_chan_t", "^goro_chan$", ChannelPrinter)
    pp.add_printer("goro_mutex_t", "^goro_mutex$", MutexPrinter)
    pp.add_printer("worker", "^goro_m$", WorkerPrinter)
    return pp


# ---------------------------------------------------------------------------
# Events: the selection belongs to one stop of one thread

def _drop_selection(*_):
    if _selection is not None:
        _set_selection(None)


def _objfiles_changed(*_):
    _drop_selection()
    _runtime_files.dirs = None      # another program: its runtime is elsewhere


def _check_thread(*_):
    sel = _selection
    if sel is None:
        return
    th = gdb.selected_thread()
    if th is None or th.ptid != sel.ptid:
        _set_selection(None)


_HANDLERS = [("cont", _drop_selection), ("exited", _drop_selection),
             ("new_objfile", _objfiles_changed), ("clear_objfiles", _objfiles_changed),
             ("before_prompt", _check_thread)]


def _connect_events():
    # A second load (auto-load of several objfiles, or `source`) replaces
    # the handlers of the first; they are remembered on the gdb module.
    for name, handler in getattr(gdb, "_goro_event_handlers", []):
        try:
            getattr(gdb.events, name).disconnect(handler)
        except (AttributeError, ValueError, RuntimeError):
            pass
    connected = []
    for name, handler in _HANDLERS:
        registry = getattr(gdb.events, name, None)
        if registry is not None:
            registry.connect(handler)
            connected.append((name, handler))
    gdb._goro_event_handlers = connected


class CoreGuards(gdb.Command):
    """goro-core-guards lift|restore: around generate-core-file (and gcore),
    on a live process, lift the guard regions below coroutine stacks in
    arenas (MADV_GUARD_INSTALL) and put them back. gdb cannot read a guard
    region and would leave out of the core the whole megabyte it reads at a
    time, and with it the coroutines' stacks and records. Run by hooks that
    the extension defines; a no-op where stacks have a mapping each, on core
    files and on remote targets."""

    def __init__(self):
        super(CoreGuards, self).__init__("goro-core-guards", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        lift = {"lift": 1, "restore": 0}.get(arg.strip())
        if lift is None:
            raise gdb.GdbError("usage: goro-core-guards lift|restore")
        inferior = gdb.selected_inferior()
        connection = getattr(inferior, "connection", None)
        if not inferior.pid or getattr(connection, "type", "native") != "native":
            return
        if _symbol_address("goro__arena_guards") is None:
            return
        # Only the selected thread runs the call, and a signal in it (a
        # thread stopped on a stack overflow has no stack to call on)
        # unwinds the call instead of stopping inside it.
        saved = [gdb.parameter("scheduler-locking"), gdb.parameter("unwindonsignal")]
        try:
            gdb.execute("set scheduler-locking on", to_string=True)
            gdb.execute("set unwindonsignal on", to_string=True)
            gdb.parse_and_eval("((long (*)(int))goro__arena_guards)(%d)" % lift)
        except gdb.error as e:
            if lift:
                print("goro: could not lift the stack guards (%s): coroutine stacks "
                      "in arenas may be missing from the core" % e)
        finally:
            gdb.execute("set scheduler-locking %s" % saved[0], to_string=True)
            gdb.execute("set unwindonsignal %s" % ("on" if saved[1] else "off"),
                        to_string=True)


def _define_core_hooks():
    # Hooks of generate-core-file also run for its alias gcore. A second
    # load redefines them: no question asked.
    confirm = gdb.parameter("confirm")
    gdb.execute("set confirm off", to_string=True)
    try:
        gdb.execute("define hook-generate-core-file\ngoro-core-guards lift\nend",
                    to_string=True)
        gdb.execute("define hookpost-generate-core-file\ngoro-core-guards restore\nend",
                    to_string=True)
    finally:
        gdb.execute("set confirm %s" % ("on" if confirm else "off"), to_string=True)


def _register():
    GoroPrefix("set")
    GoroPrefix("show")
    WhereDepth()
    InfoCoroutines()
    CoroutineCommand()
    CoroutineApply()
    CoroFunction()
    CoreGuards()
    _define_core_hooks()
    gdb.unwinder.register_unwinder(None, CoroutineUnwinder(), replace=True)
    gdb.frame_filters["goro-coroutine"] = HideThreadFrame()
    gdb.printing.register_pretty_printer(None, _build_printers(), replace=True)
    _connect_events()


_register()
