#!/usr/bin/env bash
# bench/tls.sh - TLS echo and handshakes: echod --tls (libgoro-tls) against
# Go's crypto/tls echo server (bench/peers/go/echo_tls.go), same load, back
# to back, best of TLS_REPS.
#
#   bench/tls.sh [BUILD]      BUILD: the build directory (default: build)
#
# Echo: samples/echoload --tls (the goro engine, no verification) in
# TLS_PROCS processes of one worker each, TLS_CONNS connections x 64 B for
# TLS_DURATION s. Handshakes: TLS_HS_PROCS `openssl s_time -new` at once (a
# full handshake per connection, no resumption; TLS 1.3, ECDHE, the test's
# ECDSA P-256 certificate) for TLS_DURATION s. Servers get TLS_WORKERS
# threads (GOMAXPROCS for Go).
#
# Client and server share the machine's CPUs, so a busy client caps the
# rates: beside each rate, the server's own CPU time (user + system, from
# /proc/PID/stat) per round trip and per handshake is the figure that
# shows the server alone. Rates are the best of the runs, CPU costs the
# lowest.
#
# Output as bench/run.sh's: name=... impl=... value=... unit=..., then
# goro's ratios to Go (rates: goro / Go; CPU: Go's cost / goro's, above 1
# when goro spends less).
set -euo pipefail
BUILD=${1:-build}
DUR=${TLS_DURATION:-5}
CONNS=${TLS_CONNS:-1000}
REPS=${TLS_REPS:-3}
WORKERS=${TLS_WORKERS:-2}
PROCS=${TLS_PROCS:-2}
HS_PROCS=${TLS_HS_PROCS:-2}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/samples/echod" "$BUILD/samples/echoload" \
  "$BUILD/bench/peers/go/echo_tls" >/dev/null
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
sh tests/tls/mkcerts.sh "$dir"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# CPU seconds (user + system) process $1 has used: fields 14 and 15 of
# /proc/PID/stat, counted after the command name's ")".
cpu_seconds() {
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / hz }'
}

start() {   # impl port
  case $1 in
    goro) "$BUILD/samples/echod" -p "$2" -w "$WORKERS" --tls "$dir/server.pem" "$dir/server.key" \
            2>"$dir/server.log" & ;;
    go) GOMAXPROCS=$WORKERS "$BUILD/bench/peers/go/echo_tls" --port "$2" \
            --cert "$dir/server.pem" --key "$dir/server.key" 2>"$dir/server.log" & ;;
  esac
  pid=$!
  for _ in $(seq 100); do grep -q listening "$dir/server.log" 2>/dev/null && return; sleep 0.05; done
  echo "tls.sh: $1 did not start" >&2; exit 1
}
stop() { kill -TERM "$pid" 2>/dev/null; sleep 0.3; kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }

# HS_PROCS s_time clients at once; prints "handshakes/s server-us-per-handshake".
handshakes() {   # port
  local c0 c1 i total=0 secs=0 clients=()
  c0=$(cpu_seconds "$pid")
  for i in $(seq "$HS_PROCS"); do
    openssl s_time -connect "127.0.0.1:$1" -new -time "$DUR" >"$dir/s_time.$i" 2>/dev/null &
    clients+=($!)
  done
  wait "${clients[@]}" || true
  c1=$(cpu_seconds "$pid")
  for i in $(seq "$HS_PROCS"); do
    read -r n s < <(sed -n 's/^\([0-9]*\) connections in \([0-9]*\) real seconds.*/\1 \2/p' \
                    "$dir/s_time.$i" | tail -1) || true
    total=$((total + ${n:-0})); [ "${s:-0}" -gt "$secs" ] && secs=$s
  done
  awk -v n="$total" -v s="$secs" -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
    'BEGIN { if (s > 0 && n > 0) printf "%.0f %.1f\n", n / s, c * 1e6 / n; else print "0 0" }'
}

better() {   # value best: 1 when value beats best (higher is better)
  awk -v a="$1" -v b="$2" 'BEGIN { exit !(b == "" || a > b) }'
}
lower() {    # value best: 1 when value beats best (lower is better, 0 is none)
  awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > 0 && (b == "" || a < b)) }'
}

declare -A echo_best echo_cpu hs_best hs_cpu
for rep in $(seq "$REPS"); do
  for impl in goro go; do
    port=$(free_port); start $impl "$port"
    res=$("$BUILD/samples/echoload" -p "$port" --tls -c "$CONNS" -s 64 -d "$DUR" -w 1 \
          --procs "$PROCS" -q --timeout 30 --server-pid "$pid" 2>/dev/null | grep '^RESULT' || true)
    rt=$(sed -n 's/.* rtps=\([0-9]*\).*/\1/p' <<<"$res")
    rt_cpu=$(sed -n 's/.* server_cpu_us_per_rt=\([0-9.]*\).*/\1/p' <<<"$res")
    read -r hs hs_us < <(handshakes "$port")
    stop
    echo "tls.sh: run $rep $impl: echo ${rt:-0} rt/s, ${rt_cpu:-?} us CPU/rt;" \
         "handshakes $hs/s, $hs_us us CPU/handshake" >&2
    better "${rt:-0}" "${echo_best[$impl]:-}" && echo_best[$impl]=${rt:-0}
    lower "${rt_cpu:-0}" "${echo_cpu[$impl]:-}" && echo_cpu[$impl]=$rt_cpu
    better "$hs" "${hs_best[$impl]:-}" && hs_best[$impl]=$hs
    lower "$hs_us" "${hs_cpu[$impl]:-}" && hs_cpu[$impl]=$hs_us
  done
done
for impl in goro go; do
  echo "name=tls_echo_c${CONNS}_s64 impl=$impl value=${echo_best[$impl]} unit=rt/s"
  echo "name=tls_echo_c${CONNS}_s64_server_cpu impl=$impl value=${echo_cpu[$impl]:-0} unit=us/rt"
  echo "name=tls_handshakes impl=$impl value=${hs_best[$impl]} unit=hs/s"
  echo "name=tls_handshakes_server_cpu impl=$impl value=${hs_cpu[$impl]:-0} unit=us/hs"
done
ratio() {   # name a b
  awk -v a="$2" -v b="$3" -v n="$1" \
    'BEGIN { printf "name=%s impl=goro ratio_vs=go value=%.2f unit=x\n", n, (b > 0 ? a / b : 0) }'
}
ratio "tls_echo_c${CONNS}_s64" "${echo_best[goro]}" "${echo_best[go]}"
ratio "tls_echo_c${CONNS}_s64_server_cpu" "${echo_cpu[go]:-0}" "${echo_cpu[goro]:-0}"
ratio tls_handshakes "${hs_best[goro]}" "${hs_best[go]}"
ratio tls_handshakes_server_cpu "${hs_cpu[go]:-0}" "${hs_cpu[goro]:-0}"
target() {   # name value op limit
  awk -v n="$1" -v v="$2" -v op="$3" -v t="$4" 'BEGIN {
    ok = (op == ">=") ? (v >= t) : (v <= t)
    printf "target %s %.2f %s %s %s\n", n, v, op, t, ok ? "ok" : "MISSED" }'
}
if [ "${echo_best[go]:-0}" -gt 0 ] && [ "${hs_best[go]:-0}" -gt 0 ]; then
  target "tls_echo_c${CONNS}_s64_vs_go" "$(awk -v a="${echo_best[goro]}" -v b="${echo_best[go]}" 'BEGIN { print a / b }')" ">=" 1.3
  target tls_handshakes_vs_go "$(awk -v a="${hs_best[goro]}" -v b="${hs_best[go]}" 'BEGIN { print a / b }')" ">=" 1.0
fi
