#!/usr/bin/env bash
# The debugging tests (make test-gdb). For each ARCH:FIXTURE given:
#
#  - a fixture of the host's architecture is run under gdb and looked at
#    at its checkpoint (live), through a core that gdb writes there, and
#    through a core written by gdb at a crash inside a coroutine; then it
#    must go on and exit normally, its registers untouched. goro_dump, the
#    SIGQUIT dump and the crash report are checked from its output.
#  - a fixture of another architecture (aarch64) is run under qemu-user,
#    which writes the core of its crash itself; gdb-multiarch reads it.
#
# Each gdb command runs between "echo BEGIN name" / "echo END name"
# markers; each block is checked with regular expressions. Any Python
# exception in gdb's output fails the run.
#
#   tests/gdb/run.sh x86_64:build/gdb-O2/tests/gdb/fixture aarch64:...
set -uo pipefail

passed=0
failed=0
context=""

here=$(cd "$(dirname "$0")" && pwd)
source_file=$here/fixture.c
host_arch=$(uname -m)
work=$(mktemp -d "${TMPDIR:-/tmp}/goro-gdb.XXXXXX")
# The outputs stay for a look when something failed (cores are removed).
trap 'if [ "$failed" -eq 0 ] && [ -z "${GORO_GDB_KEEP:-}" ]; then rm -rf "$work"; else
      find "$work" -name "*.core" -delete; echo "test-gdb: outputs kept in $work"; fi' EXIT


fail() {
    echo "FAIL [$context] $*"
    failed=$((failed + 1))
}

ok() { passed=$((passed + 1)); }

# The line of the fixture marked "where: NAME".
line_of() { grep -n "where: $1 " "$source_file" | head -n1 | cut -d: -f1; }

# The text of block NAME in FILE (without the prompts of an interactive
# session).
block() {
    awk -v b="BEGIN $1" -v e="END $1" '{ sub(/^(\(gdb\) )+/, "") }
        $0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$2"
}

show() { sed 's/^/    | /' | head -n 60; }

# expect FILE NAME REGEX...: every REGEX matches some line of block NAME.
expect() {
    local file=$1 name=$2 re text
    shift 2
    if ! grep -Eq "^(\(gdb\) )*BEGIN $name\$" "$file"; then
        fail "block '$name' is missing"
        return
    fi
    text=$(block "$name" "$file")
    for re in "$@"; do
        if grep -Eq -- "$re" <<<"$text"; then
            ok
        else
            fail "$name: nothing matches /$re/ in:"
            show <<<"$text"
        fi
    done
}

# reject FILE NAME REGEX...: no line of block NAME matches.
reject() {
    local file=$1 name=$2 re text
    shift 2
    text=$(block "$name" "$file")
    for re in "$@"; do
        if grep -Eq -- "$re" <<<"$text"; then
            fail "$name: /$re/ should not match in:"
            show <<<"$text"
        else
            ok
        fi
    done
}

# same FILE NAME1 NAME2: the two blocks are identical (and not empty).
same() {
    local a b
    a=$(block "$2" "$1")
    b=$(block "$3" "$1")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        ok
    else
        fail "blocks '$2' and '$3' differ:"
        { echo "$a"; echo "---"; echo "$b"; } | show
    fi
}

# The whole output: no Python trouble at all.
clean() {
    if grep -Eq "Python Exception|Traceback|Error occurred in Python" "$1"; then
        fail "Python errors in gdb's output:"
        grep -E -A3 "Python Exception|Traceback|Error occurred in Python" "$1" | show
    else
        ok
    fi
}

# Command lists: add NAME COMMAND... appends the commands of block NAME.
cmds=()
add() {
    local name=$1
    shift
    cmds+=(-ex "echo BEGIN $name\\n")
    for c in "$@"; do
        cmds+=(-ex "$c")
    done
    cmds+=(-ex "echo END $name\\n")
}

# run_gdb GDB OUTPUT FIXTURE [CORE]: the command list, in batch mode, with
# the fixture's directory allowed to auto-load the extension it embeds.
run_gdb() {
    local gdb=$1 out=$2
    shift 2
    timeout 120 "$gdb" -nx -q -batch -iex "add-auto-load-safe-path $(dirname "$1")" \
        -iex "set pagination off" -iex "set width 0" -iex "set confirm off" \
        "${cmds[@]}" "$@" >"$out" 2>&1
    cmds=()
}

# ---- what the coroutines of the fixture look like -------------------------

# Ids are handed out in spawn order to coroutines spawned by main (a thread
# without a worker): receiver 1, sender 2, locker 3, sleeper 4, reader 5,
# joiner 6, spin1 7, spin2 8.
L_RECV=$(line_of chan_recv)
L_SEND=$(line_of chan_send)
L_MUTEX=$(line_of mutex)
L_SLEEP=$(line_of sleep)
L_IO=$(line_of io)
L_JOIN=$(line_of join)
L_CRASH=$(line_of crash)
L_HELD=$(line_of held)
HEX='0x[0-9a-f]+'
# Where a running spinner is. Normally on a worker; but a thread that runs
# a coroutine for slices without being preempted (under qemu-user, say)
# has its worker handed to another thread, and then runs it as a spare.
WORKER='([0-9]+|spare)'
ON_WORKER='(worker [0-9]+|spare thread \(no worker\))'

# The listing of parked coroutines, checked in every session.
expect_listing() { # FILE BLOCK
    expect "$1" "$2" \
        "^ +Id +State +Worker +Entry +Where\$" \
        "^ +1 +parked: chan recv $HEX +- +chan_receiver +fixture\\.c:$L_RECV\$" \
        "^ +2 +parked: chan send $HEX +- +chan_sender +fixture\\.c:$L_SEND\$" \
        "^ +3 +parked: mutex $HEX +- +mutex_waiter +fixture\\.c:$L_MUTEX\$" \
        "^ +4 +parked: sleep +- +sleeper +fixture\\.c:$L_SLEEP\$" \
        "^ +5 +parked: io fd=[0-9]+ +- +reader +fixture\\.c:$L_IO\$" \
        "^ +6 +parked: join coroutine 1 +- +joiner +fixture\\.c:$L_JOIN\$" \
        "^[ *] +7 +running +$WORKER +spinner +fixture\\.c:[0-9]+\$" \
        "^[ *] +8 +running +$WORKER +spinner +fixture\\.c:[0-9]+\$"
}

expect_printers() { # FILE
    expect "$1" printers \
        '= channel open, 2 of 2 buffered \(elements of 8 bytes\), receivers waiting \[\], senders waiting \[coroutine 2 "sender"\]' \
        '= channel open, 0 of 0 buffered \(elements of 8 bytes\), receivers waiting \[coroutine 1 "receiver"\], senders waiting \[\]' \
        '= goro mutex, locked, waiting \[coroutine 3 "locker"\]' \
        '= coroutine 1 "receiver" parked: chan recv 0x[0-9a-f]+, entry chan_receiver' \
        '= coroutine 4 "sleeper" parked: sleep, entry sleeper' \
        '= "sleeper"' \
        '= (worker 0|spare thread \(no worker\)), thread [0-9]+, running coroutine [78] "spin[12]"' \
        '= (worker 1|spare thread \(no worker\)), thread [0-9]+, running coroutine [78] "spin[12]"'
}

# The inspection at the checkpoint, the same for the live process and its
# core. PC, SP: gdb's names of the program counter and stack pointer.
inspect_checkpoint() { # PC SP
    local pc=$1 sp=$2
    add loaded "info auto-load python-scripts"
    add regs-before "info registers $pc $sp"
    add list "info coroutines"
    add filter-state "info coroutines parked"
    add filter-name "info coroutines name=spin*"
    add filter-wait "info coroutines wait=chan*"
    add filter-bad "info coroutines bogus"
    add select-1 "coroutine 1"
    add bt-1 "bt"
    add selected "coroutine"
    add marker "info coroutines 1 2"
    add frame0 "frame 0"
    add frame0-regs "info registers $pc $sp"
    add locals "frame function chan_receiver" "info locals"
    local n
    for n in 2 3 4 5 6; do
        add "bt-$n" "coroutine $n" "bt"
    done
    add apply-all "coroutine apply all bt"
    add apply-some "coroutine apply 2 5 bt -1"
    add printers "print *full_chan" "print *empty_chan" "print held_mutex" \
        "print *recv_handle" 'print $coro(4)' 'print $coro(4).name' \
        "print goro__sched.ms[0]" "print goro__sched.ms[1]"
    add select-7 "coroutine 7" "bt" "info coroutines 7"
    add none "coroutine none"
    add back-to-thread-1 "thread 1" "frame 0"
    add regs-after "info registers $pc $sp"
    add bad-id "coroutine 99"
}

check_checkpoint() { # FILE
    local f=$1
    expect "$f" loaded "^Yes +goro_gdb\\.py"
    expect_listing "$f" list
    expect "$f" filter-state "^ +1 +parked" "^ +6 +parked"
    reject "$f" filter-state "running"
    expect "$f" filter-name "^ +7 +running" "^ +8 +running"
    reject "$f" filter-name "parked"
    expect "$f" filter-wait "^ +1 +parked: chan recv" "^ +2 +parked: chan send"
    reject "$f" filter-wait "mutex|sleep|running"
    expect "$f" filter-bad "unknown filter 'bogus'"
    expect "$f" select-1 '^\[Switching to coroutine 1 "receiver", parked: chan recv '"$HEX"'\]' \
        "^#1 .* in switch_to "
    expect "$f" bt-1 "^#1 .* switch_to " \
        "chan_receiver \\(.*\\) at .*fixture\\.c:$L_RECV\$" \
        "goro__ctx_entry \\(\\)"
    reject "$f" bt-1 "^#0 " "(^| )(checkpoint|main) \\("
    expect "$f" selected 'Coroutine 1 "receiver" is selected'
    expect "$f" marker '^\* +1 +parked'
    expect "$f" locals "^v = 0\$"
    expect "$f" bt-2 "chan_sender \\(.*at .*fixture\\.c:$L_SEND\$"
    expect "$f" bt-3 "mutex_waiter \\(.*at .*fixture\\.c:$L_MUTEX\$"
    expect "$f" bt-4 "sleeper \\(.*at .*fixture\\.c:$L_SLEEP\$"
    expect "$f" bt-5 "reader \\(.*at .*fixture\\.c:$L_IO\$"
    expect "$f" bt-6 "joiner \\(.*at .*fixture\\.c:$L_JOIN\$"
    expect "$f" apply-all '^Coroutine 1 "receiver" \(parked: chan recv' \
        '^Coroutine 6 "joiner" \(parked: join coroutine 1\):' \
        '^Coroutine 7 "spin1" \(running\):' '^Coroutine 8 "spin2" \(running\):' \
        "chan_receiver \\(" "spinner \\("
    expect "$f" apply-some '^Coroutine 2 "sender"' '^Coroutine 5 "reader"' "goro__ctx_entry"
    reject "$f" apply-some '^Coroutine [134678] '
    expect_printers "$f"
    expect "$f" select-7 "^\\[Switching to coroutine 7 \"spin1\", running on $ON_WORKER, thread [0-9]+\\]" "spinner \\(" \
        '^\* +7 +running'
    expect "$f" none "Back to the thread's own frames"
    expect "$f" bad-id "no coroutine 99"
    same "$f" regs-before frame0-regs
    same "$f" regs-before regs-after
    clean "$f"
}

# ---- the host's architecture: live, checkpoint core, crash core ---------------

# gdb runs the fixture to a stop (the COMMANDs), writes DIR/CORE.core there
# (its own output: DIR/MADE.out) and kills it; a second gdb reads the core
# with the blocks INSPECT adds, and CHECK checks its output DIR/OUT.out.
# NOCORE: the failure when there is no core.
gdb_core() { # FIXTURE DIR CORE MADE OUT INSPECT CHECK NOCORE COMMAND...
    local fx=$1 core=$2/$3.core made=$2/$4.out out=$2/$5.out inspect=$6 check=$7 \
        nocore=$8 c
    shift 8
    for c in "$@"; do
        cmds+=(-ex "$c")
    done
    cmds+=(-ex "generate-core-file $core" -ex "kill")
    run_gdb gdb "$made" "$fx"
    if [ -s "$core" ]; then
        "$inspect" rip rsp
        run_gdb gdb "$out" "$fx" "$core"
        "$check" "$out"
        rm -f "$core"
    else
        fail "$nocore"
        show <"$made"
    fi
}

test_native() { # FIXTURE
    local fx=$1 dir out
    dir=$work/$(basename "$(dirname "$(dirname "$(dirname "$fx")")")")
    mkdir -p "$dir"

    context="$fx live"
    out=$dir/live.out
    cmds+=(-ex "break checkpoint" -ex "break released" -ex "run live")
    inspect_checkpoint rip rsp
    add continue-selected "coroutine 2" "continue"
    add after-continue "coroutine" "bt" "info coroutines"
    add exit "continue"
    run_gdb gdb "$out" "$fx"
    check_checkpoint "$out"
    expect "$out" continue-selected "Breakpoint 2, .*released \\(\\)"
    expect "$out" after-continue "No coroutine is selected" "^#0 .*released \\(\\)" \
        "main \\(" "^No coroutines\\.\$"
    expect "$out" exit "fixture: done" "exited normally"

    context="$fx checkpoint core"
    gdb_core "$fx" "$dir" checkpoint make-core core inspect_checkpoint check_checkpoint \
        "gdb wrote no core:" "break checkpoint" "run live"

    context="$fx crash core"
    gdb_core "$fx" "$dir" crash make-crash crash inspect_crash check_crash \
        "gdb wrote no core at the crash:" "handle SIGUSR2 nostop noprint pass" "run crash"

    test_interactive "$fx" "$dir"
    test_nodebug "$fx" "$dir"
    check_outputs "$fx" "$dir" ""
}

# Interactively (commands on stdin, a prompt between them): choosing
# another thread ends the selection, even when coming back to the first.
test_interactive() { # FIXTURE DIR
    local out=$2/interactive.out
    context="$1 interactive"
    printf '%s\n' "break checkpoint" "run live" "coroutine 1" "echo BEGIN switched\n" \
        "thread 2" "thread 1" "coroutine" "bt" "echo END switched\n" "kill" "quit" |
        timeout 120 gdb -nx -q -iex "add-auto-load-safe-path $(dirname "$1")" \
            -iex "set pagination off" -iex "set confirm off" "$1" >"$out" 2>&1
    expect "$out" switched "No coroutine is selected" "^#0 +checkpoint \\(\\)" "main \\("
    reject "$out" switched "switch_to"
    clean "$out"
}

# Without debug information (strip -g also drops .debug_gdb_scripts, so
# the script is sourced): listing and selecting still work, through the
# goro_debug table alone.
test_nodebug() { # FIXTURE DIR
    local fx=$2/fixture-nodebug out=$2/nodebug.out
    context="$1 without debug information"
    strip -g -o "$fx" "$1"
    cmds+=(-ex "source $here/../../gdb/goro_gdb.py" -ex "break checkpoint" -ex "run live")
    add nd-list "info coroutines"
    add nd-select "coroutine 3" "bt"
    add nd-coro 'print $coro(3)'
    add nd-none "coroutine none"
    add nd-regs-before "info registers rip rsp"
    add nd-apply "coroutine apply all bt 1"
    add nd-regs-after "info registers rip rsp"
    add nd-exit "continue"
    run_gdb gdb "$out" "$fx"
    expect "$out" nd-list \
        "^ +1 +parked: chan recv $HEX +- +chan_receiver +chan_receiver\$" \
        "^ +3 +parked: mutex $HEX +- +mutex_waiter +mutex_waiter\$" \
        "^ +5 +parked: io fd=[0-9]+ +- +reader +reader\$" \
        "^ +6 +parked: join coroutine 1 +- +joiner +joiner\$" \
        "^ +7 +running +[0-9]+ +spinner +(spinner|spin_step)\$"
    expect "$out" nd-select '^\[Switching to coroutine 3 "locker", parked: mutex' \
        "in mutex_waiter \\(\\)" "in goro.ctx_entry \\(\\)"
    expect "$out" nd-coro "= \\(void \\*\\) $HEX"
    expect "$out" nd-apply '^Coroutine 8 "spin2" \(running\):'
    same "$out" nd-regs-before nd-regs-after
    expect "$out" nd-exit "exited normally"
    clean "$out"

    # A spinner stopped in the runtime's preemption handler: its Where is
    # still the spinner, not the handler nor the signal's trampoline.
    # (main sleeps in a call from gdb while sysmon preempts a spinner.)
    out=$2/nodebug-preempted.out
    cmds+=(-ex "source $here/../../gdb/goro_gdb.py" -ex "break checkpoint" -ex "run live"
           -ex "break goro__on_sigurg" -ex "print (int)usleep(5000000)")
    add nd-preempted "info coroutines"
    add nd-kill "kill"
    run_gdb gdb "$out" "$fx"
    expect "$out" nd-preempted \
        "^[ *] +7 +running +$WORKER +spinner +(spinner|spin_step)\$" \
        "^[ *] +8 +running +$WORKER +spinner +(spinner|spin_step)\$"
    expect "$out" nd-kill "\\[Inferior 1 \\(process [0-9]+\\) killed\\]"
}

inspect_crash() { # PC SP
    add crash-regs-before "info registers $1 $2"
    add crash-list "info coroutines"
    add crash-select "coroutine 7" "bt"
    add crash-held "coroutine 8" "bt"
    add crash-parked "coroutine 5" "bt"
    add printers "print *full_chan" "print *empty_chan" "print held_mutex" \
        "print *recv_handle" 'print $coro(4)' 'print $coro(4).name' \
        "print goro__sched.ms[0]" "print goro__sched.ms[1]"
    add crash-back "coroutine none" "thread 1"
    add crash-regs-after "info registers $1 $2"
}

check_crash() { # FILE
    local f=$1
    expect_listing "$f" crash-list
    expect "$f" crash-list "^\\* +7 +running +$WORKER +spinner +fixture\\.c:$L_CRASH\$"
    expect "$f" crash-select "^\\[Switching to coroutine 7 \"spin1\", running on $ON_WORKER, thread 1\\]" \
        "crash_here \\(.*at .*fixture\\.c:$L_CRASH\$" "spinner \\(" "goro__ctx_entry"
    # spin2 was interrupted by a signal: gdb unwinds through the signal frame
    expect "$f" crash-list "^ +8 +running +$WORKER +spinner +fixture\\.c:$L_HELD\$"
    expect "$f" crash-held "held_by_signal \\(.*at .*fixture\\.c:$L_HELD\$" \
        "<signal handler called>" "spinner \\(" "goro__ctx_entry"
    expect "$f" crash-parked "reader \\(.*at .*fixture\\.c:$L_IO\$" "goro__ctx_entry"
    expect_printers "$f"
    same "$f" crash-regs-before crash-regs-after
    clean "$f"
}

# goro_dump, the SIGQUIT dump and the crash report, from the program's own
# output. RUNNER runs the fixture (empty, or qemu-aarch64).
check_outputs() { # FIXTURE DIR RUNNER
    local fx=$1 dir=$2 runner=$3 status
    context="$fx goro_dump"
    (cd "$dir" && $runner "$fx" dump >dump.out 2>&1)
    status=$?
    { echo "BEGIN dump"; cat "$dir/dump.out"; echo "END dump"; } >"$dir/dump.blk"
    [ "$status" -eq 0 ] && ok || fail "fixture dump exited with $status"
    expect_dump "$dir/dump.blk" dump
    expect "$dir/dump.blk" dump "^fixture: done\$"

    context="$fx SIGQUIT"
    (cd "$dir" && GORO_DUMP_ON_SIGQUIT=1 $runner "$fx" sigquit >quit.out 2>&1)
    status=$?
    { echo "BEGIN quit"; cat "$dir/quit.out"; echo "END quit"; } >"$dir/quit.blk"
    [ "$status" -eq 0 ] && ok || fail "fixture sigquit exited with $status"
    expect_dump "$dir/quit.blk" quit
    expect "$dir/quit.blk" quit "the one printing this" "spinner\\+0x" "^fixture: done\$"
    if [ "$(grep -c '^goro: dump of process' "$dir/quit.out")" -eq 2 ]; then ok; else
        fail "want two SIGQUIT dumps:"
        show <"$dir/quit.out"
    fi

    context="$fx crash report"
    # (the shell's own "Segmentation fault" line goes to /dev/null)
    (cd "$dir" && ulimit -c 0 && $runner "$fx" crash >crash-report.out 2>&1) 2>/dev/null
    status=$?
    { echo "BEGIN report"; cat "$dir/crash-report.out"; echo "END report"; } >"$dir/report.blk"
    [ "$status" -eq $((128 + 11)) ] && ok || fail "fixture crash exited with $status, not SIGSEGV"
    expect "$dir/report.blk" report \
        '^goro: coroutine 7 \(spin1\) crashed: signal SIGSEGV \(Segmentation fault\) at address 0x0$' \
        '^goro: entry spinner, on worker [0-9]+ \(thread [0-9]+\)$' \
        '^  #0 +0x[0-9a-f]+ crash_here\+0x' 'spinner\+0x' 'goro__ctx_entry'
    [ -z "$runner" ] && check_kernel_core "$fx" "$dir"
}

# After its report the crash handler re-raises the signal with its default
# action, so the kernel writes a core. Checked only where the kernel's
# core_pattern names a plain file in the working directory and the core
# size limit can be raised; elsewhere the cores of gdb and qemu above
# stand in.
check_kernel_core() { # FIXTURE DIR
    local pattern
    pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
    case $pattern in
    "" | *"|"* | */* | *%[^p]*)
        echo "test-gdb: note: core_pattern is '$pattern'; not checking the kernel's core"
        return ;;
    esac
    if ! (ulimit -c unlimited) 2>/dev/null; then
        echo "test-gdb: note: cannot raise the core size limit; not checking the kernel's core"
        return
    fi
    mkdir -p "$2/kernel-core"
    (cd "$2/kernel-core" && ulimit -c unlimited && "$1" crash >/dev/null 2>&1) 2>/dev/null
    if ls "$2/kernel-core" | grep -q .; then ok; else
        fail "no core file after the crash report (core_pattern '$pattern')"
    fi
    rm -rf "$2/kernel-core"
}

expect_dump() { # FILE BLOCK
    expect "$1" "$2" \
        '^goro: dump of process [0-9]+, 2 workers$' \
        '^coroutine 1 "receiver" \[parked: chan recv 0x[0-9a-f]+\], entry chan_receiver$' \
        '^coroutine 2 "sender" \[parked: chan send 0x[0-9a-f]+\], entry chan_sender$' \
        '^coroutine 3 "locker" \[parked: mutex 0x[0-9a-f]+\], entry mutex_waiter$' \
        '^coroutine 4 "sleeper" \[parked: sleep\], entry sleeper$' \
        '^coroutine 5 "reader" \[parked: io fd=[0-9]+\], entry reader$' \
        '^coroutine 6 "joiner" \[parked: join coroutine 1\], entry joiner$' \
        '^coroutine 7 "spin1" \[running\], entry spinner$' \
        '^  running on (worker [0-9]+ \(thread [0-9]+\)|spare thread [0-9]+ \(its worker was handed off\))' \
        '^  #[0-9]+ +0x[0-9a-f]+ chan_receiver\+0x' \
        '^  #[0-9]+ +0x[0-9a-f]+ goro__ctx_entry\+0x' \
        '^worker 0: thread [0-9]+, ' '^worker 1: thread [0-9]+, ' \
        '^(worker [01]|spare thread \(no worker\)): thread [0-9]+, running coroutine 7 "spin1"' \
        '^(worker [01]|spare thread \(no worker\)): thread [0-9]+, running coroutine 8 "spin2"' \
        '^goro: 8 coroutines$'
}

# ---- another architecture: the core qemu-user writes at a crash --------------

# The CPU qemu-user emulates for the fixture. Its "max" aarch64 CPU has
# SVE, so a signal frame on the guest's stack holds an SVE record; gdb 13
# reading a core with no SVE registers (qemu writes none) loops forever
# on such a record (its sigframe parser skips it without moving on). The
# fixture's crash holds a coroutine in a signal handler, so its core
# always has one: it is made on a CPU without SVE.
qemu_cpu() { # ARCH
    case $1 in aarch64) echo "max,sve=off" ;; *) echo max ;; esac
}

test_foreign() { # ARCH FIXTURE
    local arch=$1 fx=$2 dir core out
    dir=$work/$arch
    mkdir -p "$dir"
    context="$fx ($arch) qemu core"
    if ! command -v "qemu-$arch" >/dev/null || ! command -v gdb-multiarch >/dev/null; then
        fail "qemu-$arch or gdb-multiarch is missing (tools/deps.sh gdb, tools/aarch64-sysroot.sh)"
        return
    fi
    # qemu-user writes the guest's core as qemu_<prog>_<date>_<pid>.core in
    # its working directory when the core size limit allows; qemu itself
    # then dies of the same signal and may leave a core of its own.
    # Only the soft limit can be raised without CAP_SYS_RESOURCE: a hard
    # limit too low for a core rules this check out, and says so.
    if ! (ulimit -c unlimited) 2>/dev/null; then
        echo "test-gdb: note: the hard core size limit is $(ulimit -H -c); not checking the $arch core" \
             "(start the run from a shell with a higher hard limit)"
    else
        test_foreign_core "$arch" "$fx" "$dir"
    fi
    check_outputs "$fx" "$dir" "qemu-$arch -cpu $(qemu_cpu "$arch")"
    # the crash-report run had a core limit of 0; nothing to clean
}

test_foreign_core() { # ARCH FIXTURE DIR
    local arch=$1 fx=$2 dir=$3 core out
    (cd "$dir" && ulimit -c unlimited &&
        "qemu-$arch" -cpu "$(qemu_cpu "$arch")" "$fx" crash >qemu-crash.out 2>&1) 2>/dev/null
    core=$(ls "$dir"/qemu_*.core 2>/dev/null | head -n1)
    rm -f "$dir"/core "$dir"/core.[0-9]*
    if [ -z "$core" ]; then
        fail "qemu-$arch wrote no core:"
        show <"$dir/qemu-crash.out"
        return
    fi
    { echo "BEGIN report"; cat "$dir/qemu-crash.out"; echo "END report"; } >"$dir/report.blk"
    expect "$dir/report.blk" report \
        '^goro: coroutine 7 \(spin1\) crashed: signal SIGSEGV \(Segmentation fault\) at address 0x0$' \
        'crash_here\+0x' 'goro__ctx_entry'
    out=$dir/crash.out
    inspect_crash pc sp
    add d-regs "coroutine 1" "frame 1" "info registers pc d8 x19 x29 x30"
    run_gdb gdb-multiarch "$out" "$fx" "$core"
    check_crash "$out"
    expect "$out" d-regs "^pc +0x[0-9a-f]+ +0x[0-9a-f]+ <switch_to\\+" \
        "^d8 +\\{f = -?[0-9]" "^x19 +0x" "^x29 +0x" "^x30 +0x"
    reject "$out" d-regs "not saved"
    rm -f "$core"
}

for spec in "$@"; do
    arch=${spec%%:*}
    fx=$(cd "$(dirname "${spec#*:}")" && pwd)/$(basename "${spec#*:}")
    if [ ! -x "$fx" ]; then
        context=$spec
        fail "no fixture at $fx"
        continue
    fi
    echo "test-gdb: $arch $fx"
    if [ "$arch" = "$host_arch" ]; then
        test_native "$fx"
    else
        test_foreign "$arch" "$fx"
    fi
done

echo "test-gdb: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
