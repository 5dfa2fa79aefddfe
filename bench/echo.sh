#!/usr/bin/env bash
# bench/echo.sh - TCP echo throughput and latency: goro's echo server
# (samples/echod) against a hand-written epoll server (1 and 2 threads), a
# libevent server and a Go server (bench/peers/).
#
#   bench/echo.sh [BUILD]         BUILD: the build directory (default: build)
#
# For every load point (connections x message size) each server is started
# on a fresh port and loaded for ECHO_DURATION seconds by samples/echoload
# (a closed loop per connection: send a message, wait for all of it to come
# back; by default its lean engine, one plain epoll thread, so that the load
# costs no more per round trip than the cheapest server); the servers take turns per load point, so slow phases of the
# machine hit all of them alike. Output, as bench/run.sh's:
#   name=echo_c<conns>_s<size> impl=<who> value=<round trips/s> unit=rt/s
#   name=echo_c<conns>_s<size>_p99 impl=<who> value=<us> unit=us
# then goro's ratios to Go and to the fastest C server
#   name=echo_c<conns>_s<size> impl=goro ratio_vs=<who> value=<x> unit=x
# and target lines (target <what> <value> <op> <limit> ok|MISSED): at 1000
# connections and more, goro's round trips >= 1.3 x Go's, its p99 <= Go's;
# at 64 B, >= 1.0 x the fastest C server's (0.9 x at 100 connections), and
# at 1000 x 64 B a p99 <= 1.5 x that server's. Every run also goes to
# BUILD/bench/echo.csv, which `make bench-plot` draws.
#
# Settings (environment):
#   ECHO_DURATION   seconds measured per run (default 5; plus 1 s warm-up)
#   ECHO_CONNS      connection counts (default "100 1000 10000")
#   ECHO_SIZES      message sizes in bytes (default "64 4096")
#   ECHO_IMPLS      servers (default "goro goro_lines goro_w1 epoll1 epoll2 libevent go";
#                   goro_lines: echod --lines, whose ratio to goro is
#                   target-checked >= 0.95 at 1000 connections;
#                   goro_w1, goro_w2: echod with 1 and 2 workers, whatever
#                   ECHO_WORKERS says; goro against the better of itself
#                   and goro_w1 is target-checked at 100 and 1000
#                   connections, 64 B: >= 0.95x rt/s, p99 <= 1.1x - the
#                   worker count a user leaves alone must be the best one)
#   ECHO_WORKERS    threads of goro, Go and epoll2 (default 2)
#   ECHO_REPS       runs per server and point, best reported (default 1)
#   ECHO_CLIENT     echoload's engine: epoll (default) or goro (a coroutine
#                   per connection on one worker)
#   ECHO_QUICK=1    default matrix 100 and 1000 connections x 64 bytes
#   ECHO_PERF=0     no CPU accounting (below)
#
# CPU per round trip: with perf(1) at hand, each run also counts, over the
# measured seconds, the CPU time (task-clock) and system calls of the
# server and of the load generator, and prints them per round trip:
#   name=echo_c<conns>_s<size>_srv_ns impl=<who> value=<ns> unit=ns  (and _cli_ns)
#   name=echo_c<conns>_s<size>_srv_sys impl=<who> value=<calls> unit=calls  (and _cli_sys)
#   name=echo_c<conns>_s<size>_srv_insn impl=<who> value=<n> unit=insn  (and _cli_insn;
#       user-mode instructions, only where the CPUs let perf count them;
#       target for goro at 1000 x 64 B: <= 700, issue 38)
# plus a note when the load generator used most of a CPU: then the client,
# not the server, may be what limits the round trips.
# Where perf cannot count instructions (virtual CPUs without counters) and
# valgrind is at hand, callgrind counts them instead, for the C servers and
# goro at 1000 x 64 B (ECHO_CALLGRIND=0: not):
#   name=echo_c1000_s64_srv_insn_cg impl=<who> value=<n> unit=insn
# Each server runs twice under callgrind, CG_SHORT and CG_LONG seconds of
# load; the difference of its instructions over the difference of the
# round trips leaves out its start, the connects and its stop. valgrind
# runs one thread at a time and about 50 times slower, so every poll finds
# many connections ready: the count is a floor of what the server spends
# at full speed (fewer polls and sleeps per round trip), the same floor for
# every server.
# Exit status: 1 if a run failed (server died, no RESULT line), else 0.
set -u
source "$(dirname "$0")/results.sh"

build=${1:-build}
P=$build/bench/peers
LOAD=$build/samples/echoload
csv=$build/bench/echo.csv

if [[ ${ECHO_QUICK:-0} == 1 ]]; then
    def_conns="100 1000" def_sizes="64"
else
    def_conns="100 1000 10000" def_sizes="64 4096"
fi
DURATION=${ECHO_DURATION:-5}
WARMUP=1
read -r -a CONNS <<<"${ECHO_CONNS:-$def_conns}"
read -r -a SIZES <<<"${ECHO_SIZES:-$def_sizes}"
read -r -a IMPLS <<<"${ECHO_IMPLS:-goro goro_lines goro_w1 epoll1 epoll2 libevent go}"
WORKERS=${ECHO_WORKERS:-2}
REPS=${ECHO_REPS:-1}
CLIENT=${ECHO_CLIENT:-epoll}
LIMIT=$((DURATION + WARMUP + 120))  # seconds per load run, hard limit
FD_SPARE=100                        # descriptors beyond one per connection

perf_ok=0 insn_ok=0
PERF_EVENTS=task-clock,raw_syscalls:sys_enter
if [[ ${ECHO_PERF:-1} != 0 ]] && command -v perf >/dev/null &&
   perf stat -x, -e "$PERF_EVENTS" true >/dev/null 2>&1; then
    perf_ok=1
    # User-mode instructions, where the CPU lets perf count them (virtual
    # CPUs often do not: the figure is then left out, and said so).
    if perf stat -x, -e instructions:u true 2>&1 >/dev/null | grep -q '^[0-9]'; then
        insn_ok=1
        PERF_EVENTS=$PERF_EVENTS,instructions:u
    fi
fi

results=$(mktemp)   # figure lines
runs=$(mktemp)      # one line per run: conns size impl rtps p99
errf=$(mktemp)
serr=$(mktemp)
server_pid=
perf_pid=
cgdir=              # callgrind's output (cg_figures)
cleanup() {
    [[ -n $server_pid ]] && stop_server
    rm -f "$results" "$runs" "$errf" "$serr"
    [[ -n $cgdir ]] && rm -rf "$cgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
failed=0

# server_cmd IMPL PORT: the command line that starts IMPL on PORT.
server_cmd() {
    case $1 in
        goro)     echo "$build/samples/echod --port $2 --workers $WORKERS" ;;
        goro_lines) echo "$build/samples/echod --port $2 --workers $WORKERS --lines" ;;
        goro_w1)  echo "$build/samples/echod --port $2 --workers 1" ;;
        goro_w2)  echo "$build/samples/echod --port $2 --workers 2" ;;
        epoll1)   echo "$P/echo_epoll --port $2 --threads 1" ;;
        epoll2)   echo "$P/echo_epoll --port $2 --threads $WORKERS" ;;
        libevent) echo "$P/echo_libevent --port $2" ;;
        go)       echo "env GOMAXPROCS=$WORKERS $P/go/echo --port $2" ;;
        *)        return 1 ;;
    esac
}

# The binary a command line runs (the word after any env VAR=value).
cmd_binary() {
    local w
    for w in $1; do
        [[ $w == env || $w == *=* ]] || { echo "$w"; return; }
    done
}

# Drops the implementations that are unknown or not built.
usable_impls() {
    local impl bin keep=()
    for impl in "${IMPLS[@]}"; do
        if ! server_cmd "$impl" 0 >/dev/null; then
            echo "# skip: echo ($impl): unknown server; known: goro goro_lines goro_w1 goro_w2 epoll1 epoll2 libevent go"
            continue
        fi
        bin=$(cmd_binary "$(server_cmd "$impl" 0)")
        if [[ ! -x $bin ]]; then
            echo "# skip: echo ($impl): ${bin#"$build"/} is not built"
            continue
        fi
        keep+=("$impl")
    done
    IMPLS=("${keep[@]}")
}

# Sets $port to one below the ephemeral range (the load generator's source
# ports) that nothing listens on. Each run gets a new one, so sockets a
# previous server left in TIME_WAIT never stand in the way.
port=$((20000 + RANDOM % 10000))
next_port() {
    for ((;;)); do
        port=$((port >= 32000 ? 20000 : port + 1))
        [[ -z $(ss -Htln "sport = :$port" 2>/dev/null) ]] && return
    done
}

# start_server IMPL PORT: starts it in the background (after the words of
# $server_wrap: a tool to run it under) and waits (up to 10 s, 60 s
# wrapped) until it accepts a connection. Returns 1 if it does not.
server_wrap=
start_server() {
    local cmd i
    cmd=$(server_cmd "$1" "$2")
    # shellcheck disable=SC2086  # the command line is split on purpose
    $server_wrap $cmd >/dev/null 2>"$serr" &
    server_pid=$!
    for ((i = 0; i < (${#server_wrap} ? 1200 : 200); i++)); do
        kill -0 "$server_pid" 2>/dev/null || return 1
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# Stops the server (SIGTERM, then SIGKILL after 5 s, 60 s wrapped) and
# reaps it.
stop_server() {
    local i
    kill -TERM "$server_pid" 2>/dev/null
    for ((i = 0; i < (${#server_wrap} ? 600 : 50); i++)); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
}

# What the server printed, shown when a run went wrong (servers print a
# line or two at start and stop, noise otherwise).
show_server_stderr() {
    head -n 10 "$serr" | sed "s/^/#   stderr ($1): /"
}

# field KEY LINE: the value of KEY=value in LINE.
field() {
    sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"
}

# figure NAME IMPL VALUE UNIT: prints and records one figure.
figure() {
    echo "name=$1 impl=$2 value=$3 unit=$4" | tee -a "$results"
}

# figures CONNS SIZE IMPL: the point's figures from its runs: the best
# (most round trips, lowest p99) of the repetitions, as bench/run.sh's.
figures() {
    local best
    best=$(awk -v c="$1" -v s="$2" -v i="$3" '$1 == c && $2 == s && $3 == i {
        if (n++ == 0 || $4 > r) r = $4
        if (n == 1 || $5 < p) p = $5 }
        END { if (n) print r, p }' "$runs")
    [[ -z $best ]] && return
    figure "echo_c$1_s$2" "$3" "${best% *}" rt/s
    figure "echo_c$1_s$2_p99" "$3" "${best#* }" us
}

# run_point IMPL CONNS SIZE: one server, one load run. On a failure,
# shows what both programs printed.
run_point() {
    local impl=$1 c=$2 s=$3 out rc res label bad=0
    label="echo_c${c}_s${s} ($impl)"
    next_port
    if ! start_server "$impl" "$port"; then
        echo "# FAILED: $label: server did not start on port $port"
        show_server_stderr "$impl"
        failed=1
        stop_server
        return
    fi
    local outf srvf clif load_pid
    outf=$(mktemp) srvf=$(mktemp) clif=$(mktemp)
    timeout -k 5 "$LIMIT" "$LOAD" --port "$port" --conns "$c" --size "$s" \
          --duration "$DURATION" --warmup "$WARMUP" --workers 1 --engine "$CLIENT" \
          --quiet >"$outf" 2>"$errf" &
    load_pid=$!
    perf_pid=
    ((perf_ok)) && count_cpu "$server_pid" "$load_pid" "$srvf" "$clif"
    wait "$load_pid"
    rc=$?
    [[ -n $perf_pid ]] && wait "$perf_pid"
    out=$(cat "$outf")
    res=$(tail -n 1 <<<"$out")
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "# FAILED: $label: the server died during the run"
        bad=1
    fi
    stop_server
    if ((rc == 124 || rc == 137)); then
        echo "# FAILED: $label: load timed out after ${LIMIT}s"
        bad=1
    elif [[ $res != RESULT* ]]; then
        echo "# FAILED: $label: no RESULT line (echoload exit status $rc)"
        bad=1
    else
        record "$impl" "$c" "$s" "$res" || bad=1
        ((perf_ok)) && cpu_figures "$impl" "$c" "$s" "$(field rtps "$res")" "$srvf" "$clif"
        # echoload fails when a connection failed or an echo came back
        # wrong: the figures stand, the run counts as failed.
        if ((rc != 0)); then
            echo "# FAILED: $label: echoload exit status $rc"
            bad=1
        fi
    fi
    rm -f "$outf" "$srvf" "$clif"
    if ((bad)); then
        failed=1
        show_server_stderr "$impl"
        head -n 10 "$errf" | sed "s/^/#   stderr (echoload): /"
    fi
}

# count_cpu SERVER_PID TIMEOUT_PID SRV_OUT CLI_OUT: in the background,
# perf stat of the server and of echoload's load processes (children of
# timeout's child) over the measured seconds, after the warm-up.
count_cpu() {
    local srv=$1 tpid=$2 i cli=
    for ((i = 0; i < 50; i++)); do
        [[ -n $cli ]] && break
        cli=$(pgrep -P "$tpid" -n 2>/dev/null)
        [[ -z $cli ]] && sleep 0.02
    done
    [[ -z $cli ]] && return
    (sleep "$WARMUP"
     # echoload runs its connections in processes of its own
     local kids
     kids=$(pgrep -P "$cli" 2>/dev/null | paste -sd, -)
     perf stat -x, -e "$PERF_EVENTS" -p "$srv" -o "$3" -- sleep "$DURATION" &
     perf stat -x, -e "$PERF_EVENTS" -p "${kids:-$cli}" -o "$4" -- sleep "$DURATION"
     wait) >/dev/null 2>&1 &
    perf_pid=$!
}

# perf_value FILE EVENT: the count perf stat -x, wrote for EVENT.
perf_value() {
    awk -F, -v e="$2" '$3 == e { print $1 }' "$1" 2>/dev/null | head -n 1
}

# cpu_figures IMPL CONNS SIZE RTPS SRV_OUT CLI_OUT
cpu_figures() {
    local impl=$1 n="echo_c$2_s$3" rt side f ms sys insn cpu_pct
    rt=$(awk -v r="$4" -v d="$DURATION" 'BEGIN { printf "%.0f", r * d }')
    [[ -z $rt || $rt == 0 ]] && return
    for side in srv cli; do
        f=$5
        [[ $side == cli ]] && f=$6
        ms=$(perf_value "$f" task-clock) sys=$(perf_value "$f" raw_syscalls:sys_enter)
        [[ -z $ms || -z $sys || $ms == "<not"* ]] && continue
        figure "${n}_${side}_ns" "$impl" "$(awk -v m="$ms" -v r="$rt" 'BEGIN { printf "%.0f", m * 1e6 / r }')" ns
        figure "${n}_${side}_sys" "$impl" "$(awk -v c="$sys" -v r="$rt" 'BEGIN { printf "%.2f", c / r }')" calls
        insn=$(perf_value "$f" instructions:u)
        [[ -n $insn && $insn != "<not"* ]] &&
            figure "${n}_${side}_insn" "$impl" "$(awk -v c="$insn" -v r="$rt" 'BEGIN { printf "%.0f", c / r }')" insn
        if [[ $side == cli ]]; then
            cpu_pct=$(awk -v m="$ms" -v d="$DURATION" 'BEGIN { printf "%.0f", m / (d * 10) }')
            ((cpu_pct >= 90)) &&
                echo "# note: $n ($impl): the load generator used ${cpu_pct}% of a CPU; it may be what limits this server"
        fi
    done
}

# record IMPL CONNS SIZE RESULT_LINE: notes, CSV row, the run for figures.
# Returns 1 if the line cannot be read.
record() {
    local impl=$1 c=$2 s=$3 res=$4 got rtps p50 p99 p999 errs
    got=$(field conns "$res") rtps=$(field rtps "$res")
    p50=$(field p50_us "$res") p99=$(field p99_us "$res")
    p999=$(field p999_us "$res") errs=$(field errors "$res")
    if [[ -z $rtps || -z $p99 ]]; then
        echo "# FAILED: echo_c${c}_s${s} ($impl): unreadable result: $res"
        return 1
    fi
    [[ $got != "$c" ]] && echo "# note: echo_c${c}_s${s} ($impl): only $got of $c connections connected"
    [[ ${errs:-0} != 0 ]] && echo "# note: echo_c${c}_s${s} ($impl): $errs connection errors"
    echo "$c $s $impl $rtps $p99" >>"$runs"
    echo "$c,$s,$impl,$rtps,$p50,$p99,$p999,${errs:-},${got:-}" >>"$csv"
}

# fds_ok CONNS: whether a process may open CONNS + FD_SPARE descriptors.
fds_ok() {
    local hard
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ((hard >= $1 + FD_SPARE))
}

# ratio NAME VS A B: prints goro's ratio A / B against VS and leaves it
# in $R.
ratio() {
    R=$(quotient "$3" "$4")
    echo "name=$1 impl=goro ratio_vs=$2 value=$R unit=x"
}

# best_c NAME: "impl value" of the C server with the most round trips.
best_c() {
    local impl v best="" bv=0
    for impl in epoll1 epoll2 libevent; do
        v=$(val "$1" "$impl")
        [[ -z $v ]] && continue
        if [[ -z $best ]] || awk -v a="$v" -v b="$bv" 'BEGIN { exit !(a > b) }'; then
            best=$impl bv=$v
        fi
    done
    [[ -n $best ]] && echo "$best $bv"
}

# ratios_for CONNS SIZE: goro against Go and the fastest C server;
# targets against Go at 1000 connections and more, against C at 64 B.
ratios_for() {
    local n="echo_c$1_s$2" g gl go gp gop bc bv w1 t=0
    g=$(val "$n" goro)
    [[ -z $g ]] && return
    (($1 >= 1000)) && t=1
    gl=$(val "$n" goro_lines)       # --lines: goro_reader/writer, against raw
    if [[ -n $gl ]]; then
        echo "name=${n}_lines impl=goro_lines ratio_vs=goro value=$(quotient "$gl" "$g") unit=x"
        ((t)) && target "${n}_lines_vs_raw" "$(quotient "$gl" "$g")" ">=" 0.95
    fi
    w1=$(val "$n" goro_w1)
    if [[ -n $w1 && $2 == 64 ]] && (($1 == 100 || $1 == 1000)); then
        # the default count against the better of it and one worker
        local bw=$g bwp
        bwp=$(val "${n}_p99" goro)
        if awk -v a="$w1" -v b="$g" 'BEGIN { exit !(a > b) }'; then
            bw=$w1 bwp=$(val "${n}_p99" goro_w1)
        fi
        ratio "${n}_workers_default_vs_best" goro "$g" "$bw"
        target "${n}_workers_default_vs_best" "$R" ">=" 0.95
        ratio "${n}_workers_default_vs_best_p99" goro "$(val "${n}_p99" goro)" "$bwp"
        target "${n}_workers_default_vs_best_p99" "$R" "<=" 1.1
    fi
    go=$(val "$n" go)
    if [[ -n $go ]]; then
        ratio "$n" go "$g" "$go"
        ((t)) && target "${n}_vs_go" "$R" ">=" 1.3
        gp=$(val "${n}_p99" goro) gop=$(val "${n}_p99" go)
        ratio "${n}_p99" go "$gp" "$gop"
        ((t)) && target "${n}_p99_vs_go" "$R" "<=" 1.0
    fi
    read -r bc bv <<<"$(best_c "$n")"
    if [[ -n $bc ]]; then
        ratio "$n" "$bc" "$g" "$bv"
        # Issue 38: >= 0.9x at 100 connections (light load), 1.0x above.
        [[ $2 == 64 ]] && target "${n}_vs_best_c" "$R" ">=" "$( (($1 == 100)) && echo 0.9 || echo 1.0)"
        # and at 1000 x 64 B a p99 within 1.5x that server's
        if [[ $1 == 1000 && $2 == 64 ]]; then
            ratio "${n}_p99" "$bc" "$(val "${n}_p99" goro)" "$(val "${n}_p99" "$bc")"
            target "${n}_p99_vs_best_c" "$R" "<=" 1.5
        fi
        # What the fastest C server makes of the same point against Go:
        # how far above Go the machine's kernel lets any server go.
        [[ -n $go ]] && echo "name=${n}_best_c_vs_go impl=$bc ratio_vs=go value=$(quotient "$bv" "$go") unit=x"
    fi
    if [[ $1 == 1000 && $2 == 64 ]]; then
        if ((insn_ok)); then
            target_val "${n}_srv_insn" goro "<=" 700
        else
            echo "# skip: ${n}_srv_insn: perf cannot count user instructions on these CPUs"
            target_val "${n}_srv_insn_cg" goro "<=" 700
        fi
    fi
}

# ---- instructions by callgrind ----

CG_CONNS=1000 CG_SIZE=64 CG_SHORT=3 CG_LONG=9

# cg_run IMPL SECONDS: the server under callgrind, loaded for SECONDS;
# prints "<instructions> <round trips>", nothing if the run failed.
cg_run() {
    local out res f ir
    next_port
    server_wrap="valgrind --tool=callgrind --callgrind-out-file=$cgdir/cg.%p"
    if start_server "$1" "$port"; then
        out=$(timeout -k 5 $(($2 + 300)) "$LOAD" --port "$port" --conns "$CG_CONNS" \
              --size "$CG_SIZE" --duration "$2" --warmup 0 --workers 1 --engine epoll \
              --timeout 60 --quiet 2>"$errf")
        res=$(tail -n 1 <<<"$out")
    fi
    f="$cgdir/cg.$server_pid"
    stop_server
    server_wrap=
    ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$f" 2>/dev/null)
    rm -f "$cgdir"/cg.*
    [[ $res == RESULT* && -n $ir ]] || return
    echo "$ir $(awk -v r="$(field rtps "$res")" -v d="$(field duration "$res")" \
                   'BEGIN { printf "%.0f", r * d }')"
}

# cg_figures: echo_c1000_s64_srv_insn_cg for goro and the C servers.
cg_figures() {
    local impl a b per n="echo_c${CG_CONNS}_s${CG_SIZE}_srv_insn_cg"
    if ((insn_ok)) || [[ ${ECHO_CALLGRIND:-1} == 0 ]]; then
        return
    fi
    if ! command -v valgrind >/dev/null; then
        echo "# skip: $n: no valgrind"
        return
    fi
    echo "# echo: instructions per round trip by callgrind, $CG_CONNS x $CG_SIZE B," \
         "${CG_SHORT}s and ${CG_LONG}s of load per server"
    cgdir=$(mktemp -d)
    for impl in "${IMPLS[@]}"; do
        [[ $impl == go ]] && { echo "# skip: $n (go): Go's runtime does not run under valgrind"; continue; }
        a=$(cg_run "$impl" "$CG_SHORT") b=$(cg_run "$impl" "$CG_LONG")
        per=$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
                  if (y[2] > x[2]) printf "%.0f", (y[1] - x[1]) / (y[2] - x[2]) }')
        if [[ -z $a || -z $b || -z $per ]]; then
            echo "# FAILED: $n ($impl): a run under callgrind failed (runs: '$a' '$b')"
            show_server_stderr "$impl"
            head -n 10 "$errf" | sed "s/^/#   stderr (echoload): /"
            failed=1
            continue
        fi
        figure "$n" "$impl" "$per" insn
    done
    rm -rf "$cgdir"
}

main() {
    local c s k i n r
    ulimit -Sn "$(ulimit -Hn)" 2>/dev/null   # echoload inherits it
    echo "# echo: ${IMPLS[*]}; ${CONNS[*]} connections x ${SIZES[*]} bytes;" \
         "$REPS x ${DURATION}s per point; $WORKERS server threads (goro, go, epoll2);" \
         "$(nproc) CPUs"
    if [[ ! -x $LOAD ]]; then
        echo "# skip: echo: ${LOAD#"$build"/} is not built"
        return
    fi
    usable_impls
    ((${#IMPLS[@]} == 0)) && return
    mkdir -p "$(dirname "$csv")"
    echo "conns,size,impl,rtps,p50_us,p99_us,p999_us,errors,connected" >"$csv"
    k=0
    for c in "${CONNS[@]}"; do
        if ! fds_ok "$c"; then
            echo "# skip: echo_c$c: needs $((c + FD_SPARE)) descriptors per process," \
                 "the hard limit is $(ulimit -Hn) (raise it: ulimit -Hn, limits.conf)"
            continue
        fi
        for s in "${SIZES[@]}"; do
            # Servers take turns, a different one first each round.
            n=${#IMPLS[@]}
            for ((r = 0; r < REPS; r++)); do
                for ((i = 0; i < n; i++)); do
                    run_point "${IMPLS[(i + k) % n]}" "$c" "$s"
                done
                k=$((k + 1))
            done
            for i in "${IMPLS[@]}"; do
                figures "$c" "$s" "$i"
            done
        done
    done
    fds_ok "$CG_CONNS" && cg_figures
    echo "# echo ratios (impl=goro: goro / peer; best C server per point)"
    for c in "${CONNS[@]}"; do
        for s in "${SIZES[@]}"; do
            ratios_for "$c" "$s"
        done
    done
    echo "# echo figures written to $csv (make bench-plot draws them)"
}

main
exit $failed
