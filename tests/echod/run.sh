#!/usr/bin/env bash
# tests/echod/run.sh BUILD [TEST...] - end-to-end checks of samples/echod: many
# verified clients, graceful shutdown, stop signals, the descriptor limit,
# resets, a slow reader, --max-conns, --idle-timeout, the status line and the
# options.
# Every echod listens on a port the kernel picks (--port 0). Needs the
# binaries of `make test-echod` in BUILD.
set -uo pipefail

BUILD=${1:-build}
ECHOD=$BUILD/samples/echod
LOAD=$BUILD/samples/echoload
PROBE=$BUILD/tests/echod_probe
# Clients never take longer than this: a hang is a failure, not a stuck make.
CLIENT_LIMIT=60
load() { timeout -k 5 $CLIENT_LIMIT "$LOAD" "$@"; }
probe() { timeout -k 5 $CLIENT_LIMIT "$PROBE" "$@"; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/echod-test.XXXXXX")
FAILED=()
ECHOD_PID=
PORT=

# Sanitizer builds run slower and use more memory: widen the limits.
SLOW=1
if nm "$ECHOD" 2>/dev/null | grep -q -e __asan_init -e __tsan_init; then SLOW=4; fi

cleanup() {
  [[ -n $ECHOD_PID ]] && kill -KILL "$ECHOD_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '  %s\n' "$*"; }
problem() { say "FAIL: $*"; CURRENT_OK=0; }

# start_echod NAME [echod options...]: sets ECHOD_PID and PORT; the log is
# $WORK/NAME.log. Options come first so a test can prefix `ulimit` via
# ECHOD_PREFIX.
start_echod() {
  local name=$1; shift
  : >"$WORK/$name.log"
  bash -c "${ECHOD_PREFIX:-} exec \"\$0\" --port 0 \"\$@\"" "$ECHOD" "$@" \
    2>"$WORK/$name.log" &
  ECHOD_PID=$!
  for _ in $(seq 100); do
    PORT=$(sed -n 's/^echod: listening on .* port \([0-9]*\)$/\1/p' "$WORK/$name.log")
    [[ -n $PORT ]] && return 0
    sleep 0.05
  done
  problem "echod did not start: $(cat "$WORK/$name.log")"
  return 1
}

# stop_echod: SIGTERM, then the exit status (124 if it took over 10 s).
stop_echod() {
  kill -TERM "$ECHOD_PID" 2>/dev/null
  wait_echod 10
}

wait_echod() {
  local limit=$1 status
  for _ in $(seq $((limit * 20))); do
    kill -0 "$ECHOD_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$ECHOD_PID" 2>/dev/null; then
    kill -KILL "$ECHOD_PID"; wait "$ECHOD_PID" 2>/dev/null; ECHOD_PID=; return 124
  fi
  wait "$ECHOD_PID"; status=$?
  ECHOD_PID=
  return $status
}

expect_clean_exit() {
  stop_echod; local status=$?
  [[ $status -eq 0 ]] || problem "echod exited with status $status"
}

rss_kib() { awk '{ print $2 * 4 }' "/proc/$1/statm"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
now_ms() { date +%s%3N; }

# status_line NAME: asks for a status line (SIGUSR1) and prints it.
status_line() {
  local before
  before=$(grep -c 'status conns=' "$WORK/$1.log")
  kill -USR1 "$ECHOD_PID"
  for _ in $(seq 100); do
    [[ $(grep -c 'status conns=' "$WORK/$1.log") -gt $before ]] && break
    sleep 0.05
  done
  grep 'status conns=' "$WORK/$1.log" | tail -n 1
}

# ---- the tests ----

test_many_clients() {
  start_echod many || return
  load --port "$PORT" --conns 200 --duration 2 --warmup 0.5 --quiet >"$WORK/many.out" 2>&1
  local status=$? result
  result=$(tail -n 1 "$WORK/many.out")
  say "$result"
  [[ $status -eq 0 ]] || problem "echoload exited with $status: $(cat "$WORK/many.out")"
  [[ $result == "RESULT conns=200 size=64 "*" errors=0" ]] || problem "unexpected: $result"
  # Messages of several pieces, and one not a multiple of 8 bytes.
  load --port "$PORT" --conns 8 --size 100003 --duration 1 --warmup 0 --quiet \
    >"$WORK/big.out" 2>&1 || problem "large messages: $(tail -n 3 "$WORK/big.out")"
  # The lean engine (one epoll thread, no coroutines), small and large.
  local size
  for size in 64 100003; do
    load --port "$PORT" --conns 50 --size $size --duration 1 --warmup 0 --quiet --engine epoll \
      >"$WORK/lean.out" 2>&1 || problem "--engine epoll, $size B: $(tail -n 3 "$WORK/lean.out")"
    result=$(tail -n 1 "$WORK/lean.out")
    [[ $result == "RESULT conns=50 size=$size "*" errors=0" ]] ||
      problem "--engine epoll, $size B: unexpected: $result"
  done
  expect_clean_exit
}

test_graceful_shutdown() {
  start_echod graceful --grace 2 || return
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"     # an idle client: held until the grace ends
  probe midmsg "$PORT" 20 65536 >"$WORK/midmsg.out" 2>&1 &
  local probe=$! t0 elapsed
  for _ in $(seq 100); do grep -q READY "$WORK/midmsg.out" && break; sleep 0.05; done
  t0=$(now_ms)
  kill -TERM "$ECHOD_PID"
  sleep 0.2
  if (exec 4<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    problem "a new connection was accepted after SIGTERM"
  fi
  wait_echod 5; local status=$?
  elapsed=$(( $(now_ms) - t0 ))
  exec 3>&-
  wait $probe || problem "mid-message clients: $(cat "$WORK/midmsg.out")"
  say "$(tail -n 1 "$WORK/midmsg.out"); echod exited $status after ${elapsed} ms"
  [[ $status -eq 0 ]] || problem "echod exited with status $status"
  (( elapsed <= 3000 )) || problem "shutdown took ${elapsed} ms (grace 2 s)"
  (( elapsed >= 1500 )) || problem "the idle client was dropped before the grace ended"
}

# SIGINT stops echod as SIGTERM does; a second stop signal cuts the grace
# period short; SIGUSR1 in between only asks for a status line.
test_stop_signals() {
  start_echod sigint || return
  status_line sigint >/dev/null
  kill -INT "$ECHOD_PID"
  wait_echod 5; local status=$?
  [[ $status -eq 0 ]] || problem "SIGINT: echod exited with status $status"
  grep -q '^echod: stopping' "$WORK/sigint.log" ||
    problem "SIGINT did not stop echod gracefully: $(cat "$WORK/sigint.log")"

  start_echod second --grace 30 || return
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"     # an idle client: held for the grace period
  local t0 elapsed
  t0=$(now_ms)
  kill -TERM "$ECHOD_PID"
  for _ in $(seq 100); do grep -q '^echod: stopping' "$WORK/second.log" && break; sleep 0.05; done
  kill -TERM "$ECHOD_PID"
  wait_echod 5; status=$?
  elapsed=$(( $(now_ms) - t0 ))
  exec 3>&-
  say "SIGINT: exit 0; two SIGTERMs: exit $status after ${elapsed} ms (grace 30 s)"
  [[ $status -eq 0 ]] || problem "two SIGTERMs: echod exited with status $status"
  grep -q 'second stop signal' "$WORK/second.log" ||
    problem "the second SIGTERM was not seen: $(cat "$WORK/second.log")"
  (( elapsed <= 3000 )) || problem "the second SIGTERM did not cut the grace short (${elapsed} ms)"
}

test_fd_limit() {
  ECHOD_PREFIX='ulimit -n 64;' start_echod fdlimit || return
  probe hold "$PORT" 100 4 >"$WORK/hold.out" 2>&1 &
  local probe=$! c0 c1
  sleep 1.5
  c0=$(cpu_ticks "$ECHOD_PID")
  sleep 2
  c1=$(cpu_ticks "$ECHOD_PID")
  wait $probe || problem "served clients stopped being served: $(cat "$WORK/hold.out")"
  local hold messages
  hold=$(tail -n 1 "$WORK/hold.out")
  messages=$(grep -c 'Too many open files' "$WORK/fdlimit.log")
  say "$hold; fd-limit messages: $messages; CPU over 2 s: $((c1 - c0)) ticks"
  [[ $hold =~ served=([0-9]+)\ unserved=([0-9]+) ]] || { problem "probe said: $hold"; return; }
  (( BASH_REMATCH[1] >= 40 )) || problem "only ${BASH_REMATCH[1]} clients served under the limit"
  (( BASH_REMATCH[2] >= 1 )) || problem "the descriptor limit was never reached"
  [[ $messages -eq 1 ]] || problem "the fd-limit message appeared $messages times"
  (( c1 - c0 <= 30 * SLOW )) || problem "echod burned $((c1 - c0)) CPU ticks in 2 s at the limit"
  # Once clients leave, it accepts again.
  load --port "$PORT" --conns 20 --duration 1 --warmup 0 --quiet >"$WORK/after.out" 2>&1 ||
    problem "not serving after the limit: $(tail -n 3 "$WORK/after.out")"
  expect_clean_exit
}

test_resets() {
  start_echod resets || return
  probe reset "$PORT" 100 >"$WORK/reset.out" 2>&1 || problem "$(cat "$WORK/reset.out")"
  load --port "$PORT" --conns 20 --duration 1 --warmup 0 --quiet >"$WORK/reset-load.out" 2>&1 ||
    problem "not serving after resets: $(tail -n 3 "$WORK/reset-load.out")"
  sleep 0.3
  local line
  line=$(status_line resets)
  say "$line"
  [[ $line == *" conns=0 "* ]] || problem "connections left open after resets: $line"
  [[ $line =~ rtps=[0-9]+\ rss=[0-9.]+MiB\ coroutines=[0-9]+ ]] || problem "status line: $line"
  expect_clean_exit
}

test_slow_reader() {
  start_echod slow || return
  local r0 peak=0 r
  r0=$(rss_kib "$ECHOD_PID")
  probe slow "$PORT" 3 >"$WORK/slow.out" 2>&1 &
  local probe=$!
  for _ in $(seq 6); do
    sleep 0.5
    r=$(rss_kib "$ECHOD_PID")
    (( r > peak )) && peak=$r
  done
  wait $probe
  local line
  line=$(tail -n 1 "$WORK/slow.out")
  say "$line; echod RSS ${r0} -> peak ${peak} KiB"
  [[ $line =~ sent=([0-9]+)\ received=([0-9]+) ]] || { problem "probe said: $line"; return; }
  (( BASH_REMATCH[1] - BASH_REMATCH[2] < 64 << 20 )) ||
    problem "the writer was not held back (sent ${BASH_REMATCH[1]}, received ${BASH_REMATCH[2]})"
  (( peak - r0 < 4096 * SLOW )) || problem "echod grew by $((peak - r0)) KiB for one slow reader"
  expect_clean_exit
}

test_max_conns() {
  start_echod maxconns --max-conns 5 || return
  # Held past the 1 s the others wait for their echo, so no slot frees early.
  probe hold "$PORT" 8 2.5 >"$WORK/maxconns.out" 2>&1 || problem "$(cat "$WORK/maxconns.out")"
  local line
  line=$(tail -n 1 "$WORK/maxconns.out")
  say "$line"
  [[ $line == "hold served=5 unserved=3 "* ]] || problem "--max-conns 5: $line"
  expect_clean_exit
}

test_idle_timeout() {
  start_echod idle --idle-timeout 0.5 || return
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"
  local status t0
  t0=$(now_ms)
  read -r -t 3 -u 3; status=$?
  exec 3<&-
  say "idle connection ended after $(( $(now_ms) - t0 )) ms (read status $status)"
  [[ $status -eq 1 ]] || problem "an idle connection was not closed (read status $status)"
  expect_clean_exit
}

test_options() {
  "$ECHOD" --help | grep -q -- '--idle-timeout' || problem "echod --help"
  "$ECHOD" --bogus >/dev/null 2>&1; [[ $? -eq 2 ]] || problem "echod --bogus should exit 2"
  "$LOAD" --help | grep -q -- '--procs' || problem "echoload --help"
  local out
  out=$("$LOAD" --host 10.1.2.3 2>&1); [[ $? -eq 2 && $out == *"only targets"* ]] ||
    problem "echoload accepted a non-loopback host: $out"
}

# ---- run them ----

tests=(many_clients graceful_shutdown stop_signals fd_limit resets slow_reader max_conns idle_timeout options)
[[ $# -gt 1 ]] && tests=("${@:2}")
for t in "${tests[@]}"; do
  echo "echod: $t"
  CURRENT_OK=1
  "test_$t"
  [[ -n $ECHOD_PID ]] && { kill -KILL "$ECHOD_PID" 2>/dev/null; wait "$ECHOD_PID" 2>/dev/null; ECHOD_PID=; }
  if [[ $CURRENT_OK -eq 1 ]]; then say ok; else FAILED+=("$t"); fi
done

if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "echod tests FAILED: ${FAILED[*]} (logs were in $WORK)"
  trap - EXIT          # keep the logs
  exit 1
fi
echo "echod tests: all ${#tests[@]} passed"
