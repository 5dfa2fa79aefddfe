#!/usr/bin/env bash
# bench/tls.sh - TLS echo and handshakes: echod --tls (libgoro-tls) against
# Go's crypto/tls echo server (bench/peers/go/echo_tls.go), same load, back
# to back, best of TLS_REPS.
#
#   bench/tls.sh [BUILD]      BUILD: the build directory (default: build)
#
# Echo: samples/echoload --tls (the goro engine, one worker, no
# verification), TLS_CONNS connections x 64 B for TLS_DURATION s.
# Handshakes: `openssl s_time -new` (a full handshake per connection, no
# resumption; TLS 1.3, ECDHE, the test's ECDSA P-256 certificate) for
# TLS_DURATION s. Servers get TLS_WORKERS threads (GOMAXPROCS for Go).
# Output as bench/run.sh's: name=... impl=... value=... unit=..., then
# goro's ratios to Go.
set -euo pipefail
BUILD=${1:-build}
DUR=${TLS_DURATION:-5}
CONNS=${TLS_CONNS:-1000}
REPS=${TLS_REPS:-3}
WORKERS=${TLS_WORKERS:-2}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/samples/echod" "$BUILD/samples/echoload" \
  "$BUILD/bench/peers/go/echo_tls" >/dev/null
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
sh tests/tls/mkcerts.sh "$dir"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

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

declare -A echo_best hs_best
for rep in $(seq "$REPS"); do
  for impl in goro go; do
    port=$(free_port); start $impl "$port"
    rt=$("$BUILD/samples/echoload" -p "$port" --tls -c "$CONNS" -s 64 -d "$DUR" -w 1 -q \
          --timeout 30 2>/dev/null | sed -n 's/.*rtps=\([0-9]*\).*/\1/p')
    hs=$(openssl s_time -connect "127.0.0.1:$port" -new -time "$DUR" 2>/dev/null |
          sed -n 's/.*connections in [0-9.]*s; \([0-9.]*\) connections\/user sec.*/\1/p; s/^\([0-9]*\) connections in \([0-9]*\) real seconds.*/\1 \2/p' | tail -1)
    stop
    hs_rate=$(awk -v s="$hs" 'BEGIN { split(s, a, " "); if (a[2] > 0) printf "%.0f", a[1] / a[2]; else print 0 }')
    [ "${rt:-0}" -gt "${echo_best[$impl]:-0}" ] && echo_best[$impl]=$rt
    [ "$hs_rate" -gt "${hs_best[$impl]:-0}" ] && hs_best[$impl]=$hs_rate
  done
done
for impl in goro go; do
  echo "name=tls_echo_c${CONNS}_s64 impl=$impl value=${echo_best[$impl]} unit=rt/s"
  echo "name=tls_handshakes impl=$impl value=${hs_best[$impl]} unit=hs/s"
done
awk -v a="${echo_best[goro]}" -v b="${echo_best[go]}" \
  'BEGIN { printf "name=tls_echo_c'"$CONNS"'_s64 impl=goro ratio_vs=go value=%.2f unit=x\n", a / b }'
awk -v a="${hs_best[goro]}" -v b="${hs_best[go]}" \
  'BEGIN { printf "name=tls_handshakes impl=goro ratio_vs=go value=%.2f unit=x\n", a / b }'
