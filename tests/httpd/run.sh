#!/usr/bin/env bash
# tests/httpd/run.sh BUILD - end-to-end checks of samples/httpd with curl and
# wrk: GET, HEAD, 304, ranges (206, 416), traversal and symbolic links
# refused, malformed requests (400, 405, 413, 414, 431, 505), two requests
# in one packet, keep-alive reuse, a 64 KiB file byte for byte, the access
# log, and a short wrk run that must see no status other than 2xx and no
# socket error. httpd listens on a port the kernel picks (-p 0). Needs curl
# and wrk (tools/deps.sh httpd).
set -uo pipefail

BUILD=${1:-build}
HTTPD=$BUILD/samples/httpd
WORK=$(mktemp -d "${TMPDIR:-/tmp}/httpd-test.XXXXXX")
PID=
FAILS=0

cleanup() {
  [[ -n $PID ]] && { kill -KILL "$PID"; wait "$PID"; } 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

for tool in curl wrk python3; do
  command -v $tool >/dev/null || { echo "httpd test: $tool is missing (tools/deps.sh installs it)"; exit 1; }
done

fail() { echo "  FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "  ok: $*"; }
# expect WHAT GOT WANT
expect() { if [[ $2 == "$3" ]]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi; }

# The served tree: files, a directory, links out of the root and in it,
# and a secret beside the root.
R=$WORK/root
mkdir -p "$R/sub"
echo '<p>hello</p>' >"$R/index.html"
head -c 1024 /dev/urandom >"$R/1k.bin"
head -c 65536 /dev/urandom >"$R/64k.bin"
echo sub >"$R/sub/a.txt"
echo secret >"$WORK/secret.txt"
ln -s "$WORK/secret.txt" "$R/out.txt"
ln -s "$WORK" "$R/outdir"
ln -s ../index.html "$R/sub/in.html"
touch -d '2020-01-02 03:04:05 UTC' "$R/64k.bin"

"$HTTPD" -p 0 -b 127.0.0.1 -w 2 "$R" >"$WORK/access.log" 2>"$WORK/err.log" &
PID=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/^httpd: serving .* on port \([0-9]*\)$/\1/p' "$WORK/err.log")
  [[ -n $PORT ]] && break
  sleep 0.05
done
[[ -n $PORT ]] || { echo "httpd did not start: $(cat "$WORK/err.log")"; exit 1; }
U=http://127.0.0.1:$PORT

c() { curl -s -m 10 "$@"; }
code() { c -o /dev/null -w '%{http_code}' "$@"; }
header() { c -D - -o /dev/null "${@:2}" | tr -d '\r' | sed -n "s/^$1: //Ip"; }
# raw REQUEST [all]: sends the bytes (printf escapes) on a connection of its
# own and prints the status line of the answer (all: of every answer until
# the server closes, one per line).
raw() {
  python3 - "$PORT" "$1" "${2:-}" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
f = s.makefile("rb")
if sys.argv[3] != "all":
    print(f.readline().decode().strip())
else:
    for line in f:
        if line.startswith(b"HTTP/1.1 "):
            print(line.decode().strip())
EOF
}

echo "httpd end-to-end ($HTTPD, port $PORT)"
expect "GET / is index.html" "$(c "$U/" | cmp - "$R/index.html" && echo same)" same
expect "its type" "$(header Content-Type "$U/")" "text/html; charset=utf-8"
expect "64 KiB byte for byte" "$(c "$U/64k.bin" | cmp - "$R/64k.bin" && echo same)" same
expect "HEAD: no body" "$(c -I "$U/64k.bin" -o /dev/null -w '%{size_download}')" 0
expect "HEAD: the length" "$(header Content-Length -I "$U/64k.bin")" 65536
lm=$(header Last-Modified "$U/64k.bin")
expect "Last-Modified" "$lm" "Thu, 02 Jan 2020 03:04:05 GMT"
expect "304 on If-Modified-Since" "$(code -H "If-Modified-Since: $lm" "$U/64k.bin")" 304
expect "200 when modified since" \
  "$(code -H "If-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT" "$U/64k.bin")" 200
expect "206 for a range" "$(code -r 100-199 "$U/64k.bin")" 206
expect "the range's bytes" "$(c -r 100-199 "$U/64k.bin" | cmp - <(tail -c +101 "$R/64k.bin" | head -c 100) && echo same)" same
expect "Content-Range" "$(header Content-Range -r 100-199 "$U/64k.bin")" "bytes 100-199/65536"
expect "a suffix range" "$(c -r -10 "$U/64k.bin" | cmp - <(tail -c 10 "$R/64k.bin") && echo same)" same
expect "416 past the end" "$(code -r 70000- "$U/64k.bin")" 416
expect "416's Content-Range" "$(header Content-Range -r 70000- "$U/64k.bin")" "bytes */65536"
expect "several ranges: the whole file" "$(code -r 0-1,5-6 "$U/64k.bin")" 200
expect "404" "$(code "$U/nothing")" 404
expect "/../ refused" "$(code --path-as-is "$U/../secret.txt")" 400
expect "%2e%2e refused" "$(code --path-as-is "$U/%2e%2e/secret.txt")" 400
expect "a link out of the root refused" "$(code "$U/out.txt")" 403
expect "a directory link out refused" "$(code "$U/outdir/secret.txt")" 404
expect "a link inside the root refused too" "$(code "$U/sub/in.html")" 403
expect "POST: 405" "$(code -X POST "$U/")" 405
expect "garbage: 400" "$(raw 'GARBAGE\r\n\r\n')" "HTTP/1.1 400 Bad Request"
expect "no Host: 400" "$(raw 'GET / HTTP/1.1\r\n\r\n')" "HTTP/1.1 400 Bad Request"
expect "space before a colon: 400" "$(raw 'GET / HTTP/1.1\r\nHost : x\r\n\r\n')" "HTTP/1.1 400 Bad Request"
expect "HTTP/2.0: 505" "$(raw 'GET / HTTP/2.0\r\nHost: x\r\n\r\n')" "HTTP/1.1 505 HTTP Version Not Supported"
expect "a long target: 414" "$(raw "GET /$(printf 'a%.0s' $(seq 9000)) HTTP/1.1\r\n\r\n")" "HTTP/1.1 414 URI Too Long"
expect "a large head: 431" "$(raw "GET / HTTP/1.1\r\nHost: x\r\n$(printf 'X-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\r\\n%.0s' $(seq 400))\r\n")" \
  "HTTP/1.1 431 Request Header Fields Too Large"
expect "a large body: 413" "$(raw 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n')" \
  "HTTP/1.1 413 Content Too Large"
expect "HTTP/1.0 answered" "$(raw 'GET /sub/a.txt HTTP/1.0\r\n\r\n')" "HTTP/1.1 200 OK"
expect "two requests in one packet" \
  "$(raw 'GET /sub/a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' all | tr '\n' ,)" \
  "HTTP/1.1 200 OK,HTTP/1.1 200 OK,"
reuse=$(c -v "$U/1k.bin" "$U/sub/a.txt" -o /dev/null -o /dev/null 2>&1 | grep -c 'Re-using existing connection')
expect "keep-alive: two URLs, one connection" "$reuse" 1
expect "the access log" "$(grep -c '^127.0.0.1 - - \[.*\] "GET /sub/a.txt HTTP/1.0" 200 4$' "$WORK/access.log")" 1

# 50 connections, then 1000: more file completions at one look than a
# run queue holds (the 1000 once crashed httpd with two workers).
for conns in 50 1000; do
  out=$(timeout 30 wrk -t1 -c$conns -d2s "$U/1k.bin" 2>&1)
  reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
  if [[ -z $reqs || $reqs -lt 100 ]] || grep -q -e 'Non-2xx' -e 'Socket errors' <<<"$out"; then
    fail "wrk -c$conns: $out"
  else
    ok "wrk -c$conns: $reqs requests, all 2xx, no socket error"
  fi
done

kill -0 "$PID" 2>/dev/null || fail "httpd died: $(cat "$WORK/err.log")"
# Anything else on stderr (a sanitizer's report, say) is a failure.
if grep -q -v '^httpd: serving' "$WORK/err.log"; then
  grep -v '^httpd: serving' "$WORK/err.log" | head -n 40 | sed 's/^/  stderr: /'
  fail "httpd wrote to stderr"
fi
if ((FAILS)); then
  echo "httpd: $FAILS checks failed"
  exit 1
fi
echo "httpd: every check passed"
