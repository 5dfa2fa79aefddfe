#!/usr/bin/env bash
# samples/echod/scale.sh [BUILD [CONNS...]] - echod's memory per connection.
#
# Starts one echod, then for each level (default 1000 10000 19000) runs
# echoload with two processes (the clients' descriptors are theirs, not
# echod's): every connection echoes verified messages for 3 s, then all
# are held open and idle while echod's resident memory is read. Prints
#
#   name=echod_rss_per_conn_c<N> impl=goro value=<bytes> unit=B
#
# (RSS over echod's idle baseline, divided by N), echoload's RESULT line
# for each level, and what 10^6 connections would take at the last level's
# rate. 19000 connections need about 19,050 descriptors in echod: the
# script raises its soft limit to the hard one and says so if that is short.
#
# As root it raises net.core.somaxconn, net.ipv4.tcp_max_syn_backlog and
# the local port range when they are below what the run needs, and puts
# them back at the end. Builds nothing: run `make all` first.
set -euo pipefail

BUILD=${1:-build}
shift || true
LEVELS=("$@")
[[ ${#LEVELS[@]} -gt 0 ]] || LEVELS=(1000 10000 19000)
ECHOD=$BUILD/samples/echod
LOAD=$BUILD/samples/echoload
SOURCES=4                        # 127.0.0.1..4: ports to spare across runs
TARGET_BYTES=$((8 << 30))        # 10^6 connections in 8 GiB

WORK=$(mktemp -d "${TMPDIR:-/tmp}/echod-scale.XXXXXX")
ECHOD_PID=
LOAD_PID=
RESTORE=()

# stop PID: SIGTERM, and SIGKILL if it is still there 5 s later.
stop() {
  local _
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}

cleanup() {
  set +e
  [[ -n $LOAD_PID ]] && stop "$LOAD_PID"
  [[ -n $ECHOD_PID ]] && stop "$ECHOD_PID"
  local r
  for r in "${RESTORE[@]}"; do sysctl -q -w "$r" >/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

die() { echo "scale.sh: $*" >&2; exit 1; }

# raise NAME VALUE: as root, sets a sysctl that is below VALUE (restored at exit).
raise() {
  local name=$1 want=$2 have
  have=$(sysctl -n "$name")
  (( have >= want )) && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "scale.sh: $name is $have (want $want); run as root to raise it" >&2
    return 0
  fi
  RESTORE+=("$name=$have")
  sysctl -q -w "$name=$want"
  echo "scale.sh: $name $have -> $want (restored at exit)" >&2
}

# The ephemeral ports must cover a level per source, with TIME_WAIT
# leftovers of the previous levels.
ports_range() {
  local max=0 n lo hi
  for n in "${LEVELS[@]}"; do (( n > max )) && max=$n; done
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
  if (( (hi - lo) * SOURCES < 2 * max )) && [[ $(id -u) -eq 0 ]]; then
    RESTORE+=("net.ipv4.ip_local_port_range=$lo $hi")
    sysctl -q -w net.ipv4.ip_local_port_range="10000 65000"
    echo "scale.sh: ip_local_port_range $lo $hi -> 10000 65000 (restored at exit)" >&2
  fi
}

start_echod() {
  "$ECHOD" --port 0 2>"$WORK/echod.log" &
  ECHOD_PID=$!
  local _
  for _ in $(seq 100); do
    PORT=$(sed -n 's/^echod: listening on .* port \([0-9]*\)$/\1/p' "$WORK/echod.log")
    [[ -n $PORT ]] && return 0
    sleep 0.05
  done
  die "echod did not start: $(cat "$WORK/echod.log")"
}

PAGE=$(getconf PAGESIZE)
# The resident bytes of the load processes (the children of echoload).
clients_rss() {
  local total=0 kid
  for kid in $(pgrep -P "$1"); do
    total=$(( total + $(awk -v page="$PAGE" '{ print $2 * page }' "/proc/$kid/statm") ))
  done
  echo $total
}
slab_bytes() { awk '/^Slab:/ { print $2 * 1024 }' /proc/meminfo; }
rss_bytes() { awk -v page="$PAGE" '{ print $2 * page }' "/proc/$ECHOD_PID/statm"; }

# Asks echod for its status line (SIGUSR1) and prints its conns= value.
echod_conns() {
  local before _
  before=$(grep -c 'status conns=' "$WORK/echod.log" || true)
  kill -USR1 "$ECHOD_PID"
  for _ in $(seq 100); do
    (( $(grep -c 'status conns=' "$WORK/echod.log" || true) > before )) && break
    sleep 0.05
  done
  grep 'status conns=' "$WORK/echod.log" | tail -n 1 | sed 's/.* conns=\([0-9]*\) .*/\1/'
}

wait_idle() {
  local _
  for _ in $(seq 100); do
    [[ $(echod_conns) -eq 0 ]] && return 0
    sleep 0.2
  done
  die "echod still has connections open: $(grep 'status' "$WORK/echod.log" | tail -n 1)"
}

# level N: sets PER, the RSS per connection in bytes.
level() {
  local n=$1 _ rss conns
  "$LOAD" --port "$PORT" --conns "$n" --procs 2 --sources $SOURCES --duration 2 --warmup 1 \
    --hold 3 --timeout 30 --quiet >"$WORK/load.out" 2>"$WORK/load.err" &
  LOAD_PID=$!
  for _ in $(seq 1200); do
    grep -q 'holding' "$WORK/load.err" && break
    kill -0 $LOAD_PID 2>/dev/null || break
    sleep 0.1
  done
  grep -q 'holding' "$WORK/load.err" || die "echoload did not reach the hold: $(cat "$WORK/load.err")"
  sleep 0.5
  rss=$(rss_bytes)
  slab=$(slab_bytes)
  client_rss=$(clients_rss "$LOAD_PID")
  conns=$(echod_conns)
  local status=0
  wait $LOAD_PID || status=$?
  [[ $status -eq 0 ]] ||
    die "echoload failed (status $status) at $n connections: $(tail -n 5 "$WORK/load.out" "$WORK/load.err")"
  LOAD_PID=
  grep '^RESULT' "$WORK/load.out" >&2
  [[ $conns -eq $n ]] || die "echod had $conns connections open at the hold, not $n"
  wait_idle
  PER=$(( (rss - BASE) / n ))
  echo "  $n connections: echod RSS $(( rss >> 10 )) KiB; kernel slab +$(( (slab - SLAB0) >> 10 )) KiB" \
    "= $(( (slab - SLAB0) / (2 * n) )) B per socket (both ends are on this host);" \
    "echoload processes $(( client_rss >> 10 )) KiB = $(( client_rss / n )) B per connection" >&2
}

raise net.core.somaxconn 4096
raise net.ipv4.tcp_max_syn_backlog 4096
ports_range
ulimit -n "$(ulimit -Hn)"
start_echod
sleep 0.3
BASE=$(rss_bytes)
SLAB0=$(slab_bytes)
echo "echod idle RSS: $BASE B ($(grep 'workers' "$WORK/echod.log" | sed 's/^echod: //'))" >&2

last=0
for n in "${LEVELS[@]}"; do
  level "$n"
  echo "name=echod_rss_per_conn_c$n impl=goro value=$PER unit=B"
  last=$PER
done

projection=$(( last * 1000000 ))
echo "name=echod_rss_projection_1m impl=goro value=$projection unit=B"
verdict=$([[ $projection -le $TARGET_BYTES ]] && echo "within" || echo "OVER")
awk -v p="$projection" -v v="$verdict" 'BEGIN {
  printf "projection: 10^6 connections x %d B = %.2f GiB of user memory, %s the 8 GiB target\n",
         p / 1e6, p / 2^30, v }' >&2
kill -TERM "$ECHOD_PID"
wait "$ECHOD_PID" || die "echod exited with status $?"
ECHOD_PID=
[[ $verdict == within ]]
