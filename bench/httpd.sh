#!/usr/bin/env bash
# bench/httpd.sh - static files over HTTP/1.1: samples/httpd against nginx
# (Debian nginx-light) and Go's net/http FileServer (bench/peers/go/httpd.go).
#
#   bench/httpd.sh [BUILD]        BUILD: the build directory (default: build)
#
# For every load point (keep-alive connections x file size) each server is
# started on a free port and loaded by wrk (one thread, --latency) for
# HTTPD_DURATION seconds after a 1 s warm-up; the servers take turns, a
# different one first at each point. Each server gets HTTPD_WORKERS
# threads: httpd -w, nginx worker_processes, GOMAXPROCS. All three send
# files with sendfile and log nothing: nginx runs with sendfile on,
# access_log off, and keepalive_requests raised to 10^9 (its default closes
# a connection after 1000 requests; the other two never do), from a prefix
# and configuration of its own in a temporary directory, not daemonised;
# httpd runs with -q. Output, as bench/run.sh's:
#   name=httpd_c<conns>_s<size> impl=<who> value=<requests/s> unit=req/s
#   name=httpd_c<conns>_s<size>_p99 impl=<who> value=<us> unit=us
#   name=httpd_c<conns>_s<size>_cpu impl=<who> value=<ns> unit=ns
# (CPU per request: the server's user + system time over the measured run,
# from /proc/<pid>/stat - nginx's master and workers together - over the
# requests wrk counted), then goro's ratios and the targets: requests/s
# >= 1.0 x nginx's and >= 1.5 x Go's, p99 <= nginx's.
#
# Settings (environment):
#   HTTPD_DURATION  seconds measured per run (default 5)
#   HTTPD_CONNS     connection counts (default "100 1000")
#   HTTPD_SIZES     file sizes in bytes (default "1024 65536")
#   HTTPD_IMPLS     servers (default "goro nginx go")
#   HTTPD_WORKERS   server threads (default 2)
#   HTTPD_REPS      runs per server and point, the best figures reported
#                   (most requests/s, lowest p99 and CPU; default 1)
# Exit status: 1 if a run failed (a server did not start or died, wrk saw
# errors or answers other than 2xx), else 0.
set -u
source "$(dirname "$0")/results.sh"

build=${1:-build}
HTTPD=$build/samples/httpd
GOHTTPD=$build/bench/peers/go/httpd
DURATION=${HTTPD_DURATION:-5}
read -r -a CONNS <<<"${HTTPD_CONNS:-100 1000}"
read -r -a SIZES <<<"${HTTPD_SIZES:-1024 65536}"
read -r -a IMPLS <<<"${HTTPD_IMPLS:-goro nginx go}"
WORKERS=${HTTPD_WORKERS:-2}
REPS=${HTTPD_REPS:-1}
HZ=$(getconf CLK_TCK)

dir=$(mktemp -d)
results=$dir/results
runs=$dir/runs      # one line per run: conns size impl rps p99_us cpu_ns
server_pid=
cleanup() {
    [[ -n $server_pid ]] && stop_server
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
failed=0

# The files, readable by nginx's workers (which run as nobody under root).
chmod 755 "$dir"
mkdir -p "$dir/root" "$dir/nginx"
for s in "${SIZES[@]}"; do
    head -c "$s" /dev/urandom >"$dir/root/$s.bin"
done
: >"$results"
: >"$runs"

# nginx.conf for PORT.
nginx_conf() {
    cat >"$dir/nginx/nginx.conf" <<EOF
worker_processes $WORKERS;
daemon off;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000000000;
    default_type application/octet-stream;
    client_body_temp_path $dir/nginx/body;
    proxy_temp_path $dir/nginx/proxy;
    fastcgi_temp_path $dir/nginx/fastcgi;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    server {
        listen 127.0.0.1:$1;
        root $dir/root;
    }
}
EOF
}

server_bin() {
    case $1 in
        goro) echo "$HTTPD" ;;
        nginx) command -v nginx || echo /usr/sbin/nginx ;;
        go) echo "$GOHTTPD" ;;
    esac
}

# start_server IMPL PORT: waits (up to 10 s) until it accepts a connection.
start_server() {
    case $1 in
        goro) "$HTTPD" -q -p "$2" -b 127.0.0.1 -w "$WORKERS" "$dir/root" 2>"$dir/server.log" & ;;
        nginx) nginx_conf "$2"
               nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -e "$dir/nginx/error.log" \
                   2>"$dir/server.log" & ;;
        go) GOMAXPROCS=$WORKERS "$GOHTTPD" --port "$2" --root "$dir/root" 2>"$dir/server.log" & ;;
    esac
    server_pid=$!
    for _ in $(seq 200); do
        kill -0 "$server_pid" 2>/dev/null || return 1
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

stop_server() {
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
}

# The server's CPU time in ticks: its process and its children (nginx's workers).
cpu_ticks() {
    local p sum=0 t
    for p in "$server_pid" $(pgrep -P "$server_pid"); do
        t=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) && sum=$((sum + t))
    done
    echo "$sum"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wrk's latency ("1.23ms") in microseconds.
to_us() {
    awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        f = u == "us" ? 1 : u == "ms" ? 1000 : u == "s" ? 1e6 : u == "m" ? 6e7 : -1
        if (f < 0) exit 1; printf "%.0f", n * f }'
}

figure() { echo "name=$1 impl=$2 value=$3 unit=$4" | tee -a "$results"; }

# figures CONNS SIZE IMPL: the best of the point's runs.
figures() {
    local best r p u n="httpd_c$1_s$2"
    best=$(awk -v c="$1" -v s="$2" -v i="$3" '$1 == c && $2 == s && $3 == i {
        if (n++ == 0 || $4 > r) r = $4
        if (n == 1 || $5 < p) p = $5
        if (n == 1 || $6 < u) u = $6 }
        END { if (n) print r, p, u }' "$runs")
    [[ -z $best ]] && return
    read -r r p u <<<"$best"
    figure "$n" "$3" "$r" req/s
    figure "${n}_p99" "$3" "$p" us
    figure "${n}_cpu" "$3" "$u" ns
}

# run_point IMPL CONNS SIZE
run_point() {
    local impl=$1 c=$2 s=$3 n="httpd_c$2_s$3" port out c0 c1 reqs rps p99 cli
    port=$(free_port)
    if ! start_server "$impl" "$port"; then
        echo "# FAILED: $n ($impl): the server did not start"
        sed 's/^/#   stderr: /' "$dir/server.log" | head -n 5
        failed=1
        stop_server
        return
    fi
    local url="http://127.0.0.1:$port/$s.bin"
    wrk -t1 -c"$c" -d1s "$url" >/dev/null 2>&1             # warm-up
    c0=$(cpu_ticks)
    out=$( { TIMEFORMAT='%U %S'; time wrk -t1 -c"$c" -d"${DURATION}s" --latency "$url"; } 2>&1)
    c1=$(cpu_ticks)
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "# FAILED: $n ($impl): the server died"
        sed 's/^/#   stderr: /' "$dir/server.log" | head -n 20
        failed=1
    fi
    stop_server
    reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
    rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/^ *99% *\([0-9.]*[a-z]*\).*/\1/p' <<<"$out")
    if [[ -z $reqs || -z $rps || -z $p99 ]] || grep -q -e 'Non-2xx' -e 'Socket errors' <<<"$out"; then
        echo "# FAILED: $n ($impl): wrk:"
        sed 's/^/#   /' <<<"$out" | head -n 20
        failed=1
        [[ -z $reqs || -z $rps || -z $p99 ]] && return
    fi
    echo "$c $s $impl $(printf '%.0f' "$rps") $(to_us "$p99") $(awk -v t=$((c1 - c0)) \
        -v hz="$HZ" -v r="$reqs" 'BEGIN { printf "%.0f", t * 1e9 / hz / r }')" >>"$runs"
    cli=$(tail -n 1 <<<"$out" | awk -v d="$DURATION" '{ printf "%.0f", ($1 + $2) * 100 / (d + 0) }')
    ((cli >= 90)) && echo "# note: $n ($impl): wrk used ${cli}% of a CPU; it may be what limits this server"
}

main() {
    local c s i r k=0 n impl m
    ulimit -Sn "$(ulimit -Hn)" 2>/dev/null
    echo "# httpd: ${IMPLS[*]}; ${CONNS[*]} connections x ${SIZES[*]} bytes; ${DURATION}s" \
         "per point, best of $REPS; $WORKERS server threads; wrk -t1; $(nproc) CPUs"
    command -v wrk >/dev/null || { echo "# skip: httpd: no wrk (tools/deps.sh bench)"; return; }
    local keep=()
    for impl in "${IMPLS[@]}"; do
        if [[ -x $(server_bin "$impl") ]]; then keep+=("$impl")
        else echo "# skip: httpd ($impl): $(server_bin "$impl") is not there"; fi
    done
    IMPLS=("${keep[@]}")
    m=${#IMPLS[@]}
    ((m == 0)) && return
    for c in "${CONNS[@]}"; do
        for s in "${SIZES[@]}"; do
            for ((r = 0; r < REPS; r++)); do
                for ((i = 0; i < m; i++)); do
                    run_point "${IMPLS[(i + k) % m]}" "$c" "$s"
                done
                k=$((k + 1))
            done
            for impl in "${IMPLS[@]}"; do
                figures "$c" "$s" "$impl"
            done
        done
    done
    echo "# httpd ratios (impl=goro: goro / peer)"
    for c in "${CONNS[@]}"; do
        for s in "${SIZES[@]}"; do
            n="httpd_c${c}_s${s}"
            for impl in nginx go; do
                local a b
                a=$(val "$n" goro) b=$(val "$n" "$impl")
                [[ -z $a || -z $b ]] && continue
                echo "name=$n impl=goro ratio_vs=$impl value=$(quotient "$a" "$b") unit=x"
                target "${n}_vs_$impl" "$(quotient "$a" "$b")" ">=" "$([[ $impl == go ]] && echo 1.5 || echo 1.0)"
                a=$(val "${n}_cpu" goro) b=$(val "${n}_cpu" "$impl")
                echo "name=${n}_cpu impl=goro ratio_vs=$impl value=$(quotient "$a" "$b") unit=x"
            done
            a=$(val "${n}_p99" goro) b=$(val "${n}_p99" nginx)
            if [[ -n $a && -n $b ]]; then
                echo "name=${n}_p99 impl=goro ratio_vs=nginx value=$(quotient "$a" "$b") unit=x"
                target "${n}_p99_vs_nginx" "$(quotient "$a" "$b")" "<=" 1.0
            fi
        done
    done
}

main
exit $failed
