#!/usr/bin/env bash
# Makes sure the Debian packages a build needs are installed.
#   tools/deps.sh [group...]    groups: core (default), bench, test, gdb, httpd
# test: what `make test-install` uses beyond core (CMake for a user's
# find_package(goro) build; man-db and groff-base to check the man pages).
# httpd: the clients of samples/httpd's end-to-end test (make test-httpd).
# As root, installs what is missing; otherwise prints the exact apt-get line
# and fails.
set -euo pipefail

declare -A group=(
  [core]="gcc g++ clang make pkg-config python3 libunwind-dev libevent-dev liburing-dev check valgrind libsqlite3-dev zlib1g-dev libssl-dev openssl"
  [test]="valgrind cmake man-db groff-base"
  [bench]="g++ libboost-context-dev golang-go gnuplot-nox wrk nginx-light"
  [httpd]="curl wrk"
  [gdb]="gdb gdb-multiarch"
)

want=()
for g in "${@:-core}"; do
  [[ -n "${group[$g]:-}" ]] || { echo "deps.sh: unknown group '$g'" >&2; exit 2; }
  read -r -a pkgs <<< "${group[$g]}"
  want+=("${pkgs[@]}")
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "goro needs these Debian packages: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
