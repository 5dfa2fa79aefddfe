#!/usr/bin/env bash
# bench/run.sh - runs goro's benchmarks and their peers, then ratios.
#
#   bench/run.sh [BUILD]          BUILD: the build directory (default: build)
#
# Programs are run interleaved per figure (peer, goro, peer ...) so both see
# similar machine load. Every figure is one line
#   name=<what> impl=<who> value=<number> unit=<unit>
# followed, at the end, by ratio lines in the same format (impl=goro: goro's
# figure over the peer's) and, for ratios with a target, a line
#   target <what> <value> <op> <target> ok|MISSED
# Other lines start with "# " (skips, notes, failures, stderr of a program).
# Go peers run with GOMAXPROCS equal to goro's worker count for the figure.
# The TCP echo figures come last but one, from bench/echo.sh (its own matrix
# of servers and loads, its own ratios and targets; ECHO_* settings there),
# then the static file servers' from bench/httpd.sh (HTTPD_* settings),
# then TLS echo and handshakes from bench/tls.sh (TLS_* settings).
# Exit status: 1 if a benchmark failed (crashed, timed out, wrong result),
# else 0; a missed target is reported, not an error.
set -u
source "$(dirname "$0")/results.sh"

build=${1:-build}
B=$build/bench
P=$B/peers
ncpu=$(nproc)
LIMIT=${BENCH_TIMEOUT:-180}     # seconds per program, hard limit
MAPS_WANT=4194304               # vm.max_map_count for 10^6 parked coroutines

results=$(mktemp)
errf=$(mktemp)
maps_orig=
cleanup() {
    rm -f "$results" "$errf"
    if [[ -n $maps_orig ]]; then
        sysctl -qw vm.max_map_count="$maps_orig" 2>/dev/null &&
            echo "# note: vm.max_map_count restored to $maps_orig"
    fi
}
trap cleanup EXIT
failed=0

# run [--as OLD:NEW] [VAR=value...] BINARY [ARGS...]
# Runs one program (bounded by $LIMIT), prints and records its figure lines.
# --as renames figures OLD and OLD_* to NEW and NEW_* (a peer run at another
# worker count than its default figure).
run() {
    local as=
    if [[ $1 == --as ]]; then as=$2; shift 2; fi
    local bin=
    for a in "$@"; do [[ $a == *=* ]] || { bin=$a; break; }; done
    if [[ ! -x $bin ]]; then
        echo "# skip: ${bin#"$build"/} is not built"
        return
    fi
    local out rc
    out=$(timeout -k 5 "$LIMIT" env "$@" 2>"$errf")
    rc=$?
    if [[ -n $as ]]; then
        out=$(sed "s/^name=${as%%:*}\([_ ]\)/name=${as#*:}\1/" <<<"$out")
    fi
    if [[ -n $out ]]; then
        echo "$out"
        grep '^name=' <<<"$out" >>"$results"
    fi
    if ((rc != 0)); then
        ((rc == 124 || rc == 137)) && echo "# FAILED: $* (timed out after ${LIMIT}s)" ||
            echo "# FAILED: $* (exit status $rc)"
        failed=1
    fi
    if [[ -s $errf ]]; then
        head -n 20 "$errf" | sed 's/^/#   stderr: /'
    fi
}

# ratio NAME IMPL NUM_NAME NUM_IMPL DEN_NAME DEN_IMPL [OP TARGET]
ratio() {
    local name=$1 impl=$2 a b r
    a=$(val "$3" "$4")
    b=$(val "$5" "$6")
    if [[ -z $a || -z $b ]]; then
        echo "# skip: $name: needs $3 ($4) and $5 ($6)"
        return
    fi
    r=$(quotient "$a" "$b")
    echo "name=$name impl=$impl value=$r unit=x"
    [[ $# -ge 8 ]] && target "$name" "$r" "$7" "$8"
}

# The 10^6-coroutine figures need many memory mappings.
raise_map_count() {
    local cur
    cur=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
    ((cur >= MAPS_WANT)) && return 0
    if [[ $(id -u) -eq 0 ]] && sysctl -qw vm.max_map_count=$MAPS_WANT 2>/dev/null; then
        maps_orig=$cur
        echo "# note: vm.max_map_count raised from $cur to $MAPS_WANT for this run"
        return 0
    fi
    echo "# note: vm.max_map_count is $cur (< $MAPS_WANT) and could not be raised" \
         "(as root: sysctl -w vm.max_map_count=$MAPS_WANT)"
    return 1
}

echo "# goro benchmarks: $(uname -m), $ncpu CPUs, build dir $build"
# Up front, for every figure alike: fork-join and skynet can have tens of
# thousands of coroutines alive at once, parked has 10^6. Stacks in arenas
# (MADV_GUARD_INSTALL) need no more mappings than the default allows; a
# mapping per stack needs two each.
maps_ok=1
guard_mode=$("$B/parked" --guard-mode 2>/dev/null)
if [[ $guard_mode == arenas ]]; then
    echo "# note: stacks in arenas (MADV_GUARD_INSTALL): vm.max_map_count left at" \
         "$(cat /proc/sys/vm/max_map_count 2>/dev/null)"
else
    raise_map_count || maps_ok=0
fi

# ---- raw context switch ----
run "$P/switch_boost"
run "$B/switch"
run "$P/switch_ucontext"

# ---- yield (1 worker) ----
run GOMAXPROCS=1 "$P/go/yield"
run "$B/yield"

# ---- spawn + run + exit + join (1 and 2 workers) ----
run GOMAXPROCS=1 "$P/go/spawn"
run "$B/spawn"
run "$B/group"
run "$P/go/group"
run --as spawn:spawn_2w GOMAXPROCS=2 "$P/go/spawn"
run "$P/spawn_pthread"

# ---- a future's set + get against a channel hand-off (1 worker) ----
run "$B/future"

# ---- a coroutine-local read (1 worker) ----
run "$B/local"

# ---- a wait inside a deadline in force vs an explicit _until (1 worker) ----
run "$B/inherit"

# ---- channel ping-pong (1 worker) ----
run GOMAXPROCS=1 "$P/go/pingpong"
run "$B/chan_pingpong"

# ---- fork-join, 1 and 2 workers ----
run --as forkjoin:forkjoin_1w GOMAXPROCS=1 "$P/go/forkjoin"
run "$B/forkjoin"
run --as forkjoin:forkjoin_2w GOMAXPROCS=2 "$P/go/forkjoin"

# ---- skynet and parked: 10^6 coroutines, all CPUs ----
run GOMAXPROCS="$ncpu" "$P/go/skynet"
run GORO_WORKERS="$ncpu" "$B/skynet"

run GOMAXPROCS="$ncpu" "$P/go/parked"
if ((maps_ok)); then
    run GORO_WORKERS="$ncpu" "$B/parked"
elif [[ -x $B/parked ]]; then
    echo "# skip: parked (goro): needs vm.max_map_count >= $MAPS_WANT"
else
    echo "# skip: parked is not built"
fi
# The same with a mapping per stack (the fallback), to compare the spawn
# cost; it needs the raised vm.max_map_count, so it runs last of the 10^6.
if [[ $guard_mode == arenas ]]; then
    if raise_map_count; then
        run --as parked:parked_mprotect GORO_STACK_GUARD=mprotect GORO_WORKERS="$ncpu" "$B/parked"
    else
        echo "# skip: parked_mprotect: needs vm.max_map_count >= $MAPS_WANT"
    fi
fi

# ---- timers: 10^4 coroutines sleeping 1 ms, all CPUs ----
run GOMAXPROCS="$ncpu" "$P/go/sleep"
run GORO_WORKERS="$ncpu" "$B/sleep"

# ---- the timer heaps: lateness with 10^2..10^5 pending timers (all CPUs;
# 10^5 coroutines need the raised vm.max_map_count), a 1 ms ticker among 4
# yielders (1 and 2 workers: figures ticker_*, ticker_2w_*), reset cost ----
run GOMAXPROCS="$ncpu" "$P/go/timers" heap
if ((maps_ok)); then
    run GORO_WORKERS="$ncpu" "$B/timers" heap
else
    echo "# skip: timers heap (goro): needs vm.max_map_count >= $MAPS_WANT"
fi
run GOMAXPROCS=1 "$P/go/timers" ticker
run GORO_WORKERS=1 "$B/timers" ticker
run --as ticker:ticker_2w GOMAXPROCS=2 "$P/go/timers" ticker
run --as ticker:ticker_2w GORO_WORKERS=2 "$B/timers" ticker
run GOMAXPROCS="$ncpu" "$P/go/timers" reset
run GORO_WORKERS="$ncpu" "$B/timers" reset
run GOMAXPROCS="$ncpu" "$P/go/timers" idle
run GORO_WORKERS="$ncpu" "$B/timers" idle

# ---- preemption: 4 spinners per worker, 10 ms slice or none; a 1 ms ticker
# among them. 1 worker, then all CPUs (figures preempt_nw_*) ----
run GOMAXPROCS=1 "$P/go/preempt"
run GORO_WORKERS=1 "$B/preempt"
run --as preempt:preempt_nw GOMAXPROCS="$ncpu" "$P/go/preempt"
run --as preempt:preempt_nw GORO_WORKERS="$ncpu" "$B/preempt"

# ---- the deadline class (docs/deadline.md): 8 periodic tasks at 85% of 2
# workers among 4 spinners and 1000 echo pairs - reserved, as NORMAL
# coroutines, as goroutines - and a reservation that spins for ever ----
run GOMAXPROCS=2 DL_SECONDS="${DL_SECONDS:-60}" "$P/go/deadline"
run GORO_WORKERS=2 DL_SECONDS="${DL_SECONDS:-60}" "$B/deadline"

# ---- accept + first echo + close per second: goro_listen/goro_dial against
# net.Listen/net.Dial, all CPUs (the goro run right after Go's) ----
run GOMAXPROCS="$ncpu" "$P/go/accept"
run GORO_WORKERS="$ncpu" "$B/accept"

# ---- files: 4 KiB random preads of a cached 1 GiB file by 256 readers, 2
# workers: goro's rings, goro on the offload pool (GORO_IO_URING=0, figures
# file_pread_pool_*), Go's ReadAt; one file for the three, made by the
# first and removed at the end (docs/files.md) ----
bench_file=$B/file_pread-1g.dat
run GOMAXPROCS=2 "$P/go/file_pread" "$bench_file"
run GORO_WORKERS=2 "$B/file_pread" "$bench_file"
run --as file_pread:file_pread_pool GORO_IO_URING=0 GORO_WORKERS=2 "$B/file_pread" "$bench_file"
rm -f "$bench_file"

# ---- scheduled pipelines: two CPU-bound jobs, 2 workers (docs/pipelines.md) ----
run GOMAXPROCS=2 "$P/go/pipeline"
run GORO_WORKERS=2 "$B/pipeline"

# ---- the price of priority classes ----
# yield, spawn and ping-pong on the library and on one built without classes
# (bench/noprio, GORO_NO_PRIORITIES), alternating, 3 rounds: best of each.
for round in 1 2 3; do
    for prog in yield spawn chan_pingpong; do
        run --as "$prog:${prog}_classes$round" "$B/$prog"
        run --as "$prog:${prog}_noclasses$round" "$B/noprio/$prog"
    done
done
for prog in yield spawn chan_pingpong; do
    best_of "${prog}_classes"
    best_of "${prog}_noclasses"
done

# ---- the price of the execution trace ----
# Off: yield, spawn, ping-pong and skynet on the library and on one built
# without the recording points (bench/notrace, GORO_NO_TRACE). On: skynet
# traced into /dev/null (the write at shutdown is outside the timed part).
# Alternating, 3 rounds: best of each.
for round in 1 2 3; do
    for prog in yield spawn chan_pingpong skynet; do
        workers=()
        [[ $prog == skynet ]] && workers=(GORO_WORKERS="$ncpu")
        run --as "$prog:${prog}_tracepoints$round" "${workers[@]}" "$B/$prog"
        run --as "$prog:${prog}_notrace$round" "${workers[@]}" "$B/notrace/$prog"
    done
    run --as "skynet:skynet_traced$round" GORO_WORKERS="$ncpu" GORO_TRACE=/dev/null "$B/skynet"
done
for prog in yield spawn chan_pingpong skynet; do
    best_of "${prog}_tracepoints"
    best_of "${prog}_notrace"
done
best_of skynet_traced

# ---- ratios ----
echo "# ratios (impl=goro: goro / peer; targets as in the project brief)"
ratio switch_vs_boost goro switch goro switch boost_fcontext "<=" 1.2
ratio switch_same_site_vs_boost goro switch_same_site goro switch boost_fcontext "<=" 1.2
ratio switch_vs_ucontext goro switch goro switch glibc_ucontext
ratio yield_vs_switch goro yield goro switch_same_site goro "<=" 1.5
ratio yield_vs_go goro yield goro yield go
target_val spawn goro "<=" 100
ratio spawn_vs_go goro spawn goro spawn go "<=" 0.6
ratio spawn_2w_vs_go goro spawn_2w goro spawn_2w go "<=" 0.6
ratio spawn_vs_pthread goro spawn goro spawn pthread
ratio chan_pingpong_vs_go goro chan_pingpong goro chan_pingpong go "<=" 0.5
gw=$(val skynet_workers go)
ow=$(val skynet_workers goro)
if [[ -n $gw && -n $ow && $gw != "$ow" ]]; then
    echo "# skip: skynet_vs_go: workers differ (go $gw, goro $ow)"
else
    ratio skynet_vs_go goro skynet goro skynet go "<=" 0.6
fi
ratio forkjoin_speedup go forkjoin_1w go forkjoin_2w go
target_val forkjoin_speedup goro ">=" 1.8
ratio forkjoin_2w_vs_go goro forkjoin_2w goro forkjoin_2w go
# priority classes: the hot paths with them over without (targets: 3%)
ratio classes_cost_yield goro yield_classes goro yield_noclasses goro "<=" 1.03
ratio classes_cost_spawn goro spawn_classes goro spawn_noclasses goro "<=" 1.03
ratio classes_cost_pingpong goro chan_pingpong_classes goro chan_pingpong_noclasses goro "<=" 1.03
# the execution trace: recording points while off (not measurable: within
# 2%), and skynet traced (<= 15%)
ratio trace_off_cost_yield goro yield_tracepoints goro yield_notrace goro "<=" 1.02
ratio trace_off_cost_spawn goro spawn_tracepoints goro spawn_notrace goro "<=" 1.02
ratio trace_off_cost_pingpong goro chan_pingpong_tracepoints goro chan_pingpong_notrace goro "<=" 1.02
ratio trace_off_cost_skynet goro skynet_tracepoints goro skynet_notrace goro "<=" 1.02
ratio trace_on_cost_skynet goro skynet_traced goro skynet_notrace goro "<=" 1.15
# a future's set + get against a channel hand-off, same run
ratio future_vs_chan_handoff goro future_handoff goro future_chan_handoff goro "<=" 1.0
# connections per second (goro over Go: higher is better)
ratio accept_vs_go goro accept goro accept go ">=" 1.3
# files: the rings over the pool and over Go's ReadAt (higher is better);
# threads alive meanwhile: at most the workers + 4
ratio file_pread_vs_pool goro file_pread goro file_pread_pool goro ">=" 1.5
ratio file_pread_vs_go goro file_pread goro file_pread go ">=" 1.0
target_val file_pread_threads goro "<=" 6
# a wait under a deadline in force against the same wait given it
ratio deadline_inherited_vs_explicit goro deadline_inherited_handoff goro deadline_explicit_handoff goro "<=" 1.05
# a coroutine-local read
target_val local_get goro "<=" 2
# Pipelines: speed-ups (the baseline's time over the pipeline's).
ratio pipeline_balanced_vs_loop goro pipeline_balanced_loop goro pipeline_balanced_dhondt goro ">=" 1.7
ratio pipeline_moving_vs_loop goro pipeline_moving_loop goro pipeline_moving_dhondt goro
ratio pipeline_moving_vs_static goro pipeline_moving_static goro pipeline_moving_dhondt goro ">=" 1.2
ratio pipeline_balanced_vs_static goro pipeline_balanced_static goro pipeline_balanced_dhondt goro
ratio pipeline_moving_vs_per_stage goro pipeline_moving_per_stage goro pipeline_moving_dhondt goro
ratio pipeline_balanced_vs_per_stage goro pipeline_balanced_per_stage goro pipeline_balanced_dhondt goro
ratio pipeline_moving_vs_go goro pipeline_moving_stages go pipeline_moving_dhondt goro
ratio pipeline_balanced_vs_go goro pipeline_balanced_stages go pipeline_balanced_dhondt goro
ratio pipeline_ordered_cost goro pipeline_balanced_ordered goro pipeline_balanced_dhondt goro "<=" 1.10
target_val pipeline_alloc_16x64 goro "<=" 1000
# groups: a member's spawn + wait against go() + join, same process
ratio group_member_vs_join goro group_member goro join_member goro "<=" 1.2
ratio group_member_vs_go goro group_member goro group_member go
ratio group_cancel_vs_go goro group_cancel goro group_cancel go
target_val parked_mem goro "<=" 4608
target_val parked_maps goro "<=" 1000
ratio parked_spawn_arena_vs_mprotect goro parked_spawn goro parked_mprotect_spawn goro "<=" 1.0
ratio parked_mem_vs_go goro parked_mem goro parked_mem go
# 10^4 sleepers of 1 ms ask for 10^7 wake-ups a second, an overload on any
# runtime: the figure stays, without a target (timers_* measure the path)
ratio sleep_p50_late_vs_go goro sleep_p50_late goro sleep_p50_late go
ratio sleep_p99_late_vs_go goro sleep_p99_late goro sleep_p99_late go
for n in 100 1000 10000 100000; do
    ratio "timers_${n}_p50_late_vs_go" goro "timers_${n}_p50_late" goro "timers_${n}_p50_late" go
    ratio "timers_${n}_p99_late_vs_go" goro "timers_${n}_p99_late" goro "timers_${n}_p99_late" go
done
target_val ticker_p99_late goro "<=" 1500
target_val ticker_2w_p99_late goro "<=" 1500
ratio ticker_p99_late_vs_go goro ticker_p99_late goro ticker_p99_late go
ratio ticker_2w_p99_late_vs_go goro ticker_2w_p99_late goro ticker_2w_p99_late go
ratio timer_reset_vs_go goro timer_reset goro timer_reset go
target_val timers_idle_cpu goro "<=" 0.1
# preemption: time with a 10 ms slice over time without (< 1% loss), the
# ticker's p99 lateness (<= 2 slices), and both against Go
ratio preempt_loss goro preempt_work_on goro preempt_work_off goro "<=" 1.01
# the deadline class: no reserved job late; the others keep >= 1 - the
# overrunner's bandwidth of their throughput
target_val dl_reserved_misses goro "<=" 0
target_val dl_overrun_share goro ">=" 0.85
ratio preempt_loss go preempt_work_on go preempt_work_off go
target_val preempt_tick_p99_late goro "<=" 20000
ratio preempt_tick_p99_late_vs_go goro preempt_tick_p99_late goro preempt_tick_p99_late go
ratio preempt_nw_loss goro preempt_nw_work_on goro preempt_nw_work_off goro "<=" 1.01
ratio preempt_nw_loss go preempt_nw_work_on go preempt_nw_work_off go
target_val preempt_nw_tick_p99_late goro "<=" 20000
ratio preempt_nw_tick_p99_late_vs_go goro preempt_nw_tick_p99_late goro preempt_nw_tick_p99_late go

# ---- TCP echo servers ----
"$(dirname "$0")/echo.sh" "$build" || failed=1

# ---- static files over HTTP: samples/httpd, nginx, Go ----
"$(dirname "$0")/httpd.sh" "$build" || failed=1

# ---- TLS: echod --tls and Go's crypto/tls echo ----
"$(dirname "$0")/tls.sh" "$build" || failed=1

exit $failed
