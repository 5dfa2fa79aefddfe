#!/usr/bin/env bash
# Build a minimal aarch64 sysroot with the static archives goro needs
# (libevent, libunwind + liblzma, Check + subunit) for -static cross builds
# that run under qemu-user.
#
# Usage: tools/aarch64-sysroot.sh SYSROOT_DIR     (e.g. build/aarch64/sysroot)
#
# The arm64 -dev packages are fetched with `apt-get download` and unpacked
# with `dpkg-deb -x` into SYSROOT_DIR; nothing arm64 is installed on the host
# (libevent-dev:arm64 conflicts with libevent-dev:amd64). The cross gcc's own
# glibc (libc6-dev-arm64-cross) is used, not one from the sysroot.
# Idempotent: does nothing when SYSROOT_DIR/.goro-sysroot-stamp exists.
# Compile/link flags: see tools/aarch64-flags.txt.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 SYSROOT_DIR" >&2
    exit 2
fi
SYSROOT=$1
STAMP=$SYSROOT/.goro-sysroot-stamp
TRIPLET=aarch64-linux-gnu

# arm64 packages to unpack. Every static archive lives in a -dev package
# (the runtime packages libevent-2.1-7, libunwind8, liblzma5, libsubunit0
# only carry .so files, which a -static link never uses):
#   libevent-dev   libevent.a libevent_core.a libevent_pthreads.a (+extra/openssl)
#   libunwind-dev  libunwind.a libunwind-aarch64.a   (elf64.o needs liblzma)
#   liblzma-dev    liblzma.a
#   check          libcheck.a check.h               (check.pc requires libsubunit)
#   libsubunit-dev libsubunit.a
#   liburing-dev   liburing.a liburing.h             (files through io_uring)
PACKAGES=(libevent-dev libunwind-dev liblzma-dev check libsubunit-dev liburing-dev)
REQUIRED_FILES=(
    usr/include/check.h
    usr/include/event2/event.h
    usr/include/event2/thread.h
    "usr/include/$TRIPLET/libunwind.h"
    usr/include/lzma.h
    "usr/lib/$TRIPLET/libcheck.a"
    "usr/lib/$TRIPLET/libsubunit.a"
    "usr/lib/$TRIPLET/libevent.a"
    "usr/lib/$TRIPLET/libevent_core.a"
    "usr/lib/$TRIPLET/libevent_pthreads.a"
    "usr/lib/$TRIPLET/libunwind.a"
    "usr/lib/$TRIPLET/libunwind-aarch64.a"
    "usr/lib/$TRIPLET/liblzma.a"
    usr/include/liburing.h
    "usr/lib/$TRIPLET/liburing.a"
)

# A sysroot made before a package joined the list is made again.
have_all() {
    for f in "${REQUIRED_FILES[@]}"; do [ -e "$SYSROOT/$f" ] || return 1; done
}
if [ -e "$STAMP" ] && have_all; then
    exit 0
fi

is_root() { [ "$(id -u)" -eq 0 ]; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
apt_updated=0
apt_update() {
    if [ "$apt_updated" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        apt_updated=1
    fi
}

# 1. Host toolchain + emulator --------------------------------------------------
# qemu-user provides /usr/bin/qemu-aarch64, the runner named in
# tools/aarch64-flags.txt (qemu-user-static only has qemu-aarch64-static).
missing=()
for p in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user; do
    installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if is_root; then
        echo "aarch64-sysroot: installing host packages: ${missing[*]}" >&2
        apt_update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    else
        echo "aarch64-sysroot: missing host packages; run as root:" >&2
        echo "apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# apt-get download pkg:arm64 needs apt to know the arm64 architecture. Adding
# the architecture is harmless; we never *install* arm64 packages.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    if is_root; then
        dpkg --add-architecture arm64
        apt_updated=0
        apt_update
    else
        echo "aarch64-sysroot: apt does not know arm64; run as root:" >&2
        echo "dpkg --add-architecture arm64 && apt-get update" >&2
        exit 1
    fi
fi
if ! apt-cache show "${PACKAGES[0]}:arm64" >/dev/null 2>&1; then
    if is_root; then
        apt_update
    else
        echo "aarch64-sysroot: no arm64 package lists; run as root: apt-get update" >&2
        exit 1
    fi
fi

# 2. Download and unpack the arm64 packages --------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Let apt's sandbox user write there (avoids the "unsandboxed as root" warning).
if is_root && id _apt >/dev/null 2>&1; then
    chown _apt "$tmp"
fi
(cd "$tmp" && apt-get download -q "${PACKAGES[@]/%/:arm64}")

mkdir -p "$SYSROOT"
for deb in "$tmp"/*.deb; do
    echo "aarch64-sysroot: unpacking $(basename "$deb")" >&2
    dpkg-deb -x "$deb" "$SYSROOT"
done

for f in "${REQUIRED_FILES[@]}"; do
    if [ ! -e "$SYSROOT/$f" ]; then
        echo "aarch64-sysroot: expected file missing after unpack: $SYSROOT/$f" >&2
        exit 1
    fi
done

# 3. Stamp ---------------------------------------------------------------------
for deb in "$tmp"/*.deb; do basename "$deb"; done > "$STAMP"
echo "aarch64-sysroot: ready in $SYSROOT" >&2
