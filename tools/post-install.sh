#!/bin/sh
# After `make install`: makes sure programs find libgoro.so.0 at run time.
#   tools/post-install.sh PREFIX LIBDIR DESTDIR
# Into a directory the dynamic loader searches (ld.so.conf, or its built-in
# /lib and /usr/lib), as root and with no DESTDIR: runs ldconfig, which
# the loader's cache needs for a new library. A staged install (DESTDIR)
# leaves that to whoever installs the stage. Anywhere else: prints the one
# line a program's build needs (an rpath, which goro.pc carries as a
# variable) or its run (LD_LIBRARY_PATH), and where pkg-config and CMake
# look when they do not look there already.
# LDCONFIG=... overrides the ldconfig program.
set -eu
prefix=$1
libdir=$2
destdir=${3:-}
[ -z "$destdir" ] || exit 0
ldconfig=${LDCONFIG:-$(command -v ldconfig || echo /sbin/ldconfig)}
real=$(realpath -m "$libdir")

searched=no
for d in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p') /lib /usr/lib; do
  [ "$(realpath -m "$d")" = "$real" ] && searched=yes && break
done

if [ $searched = yes ]; then
  if [ "$(id -u)" = 0 ]; then
    $ldconfig
    echo "goro: ran ldconfig: programs load libgoro.so.0 from $libdir"
  else
    echo "goro: run 'sudo ldconfig' once, so that programs find libgoro.so.0 in $libdir"
  fi
else
  echo "goro: $libdir is not searched by the loader: link with" \
       "\$(pkg-config --variable=rpath goro) (-Wl,-rpath,$libdir), or run with LD_LIBRARY_PATH=$libdir"
fi
case ":$(pkg-config --variable pc_path pkg-config 2>/dev/null):${PKG_CONFIG_PATH:-}:" in
  *":$libdir/pkgconfig:"*) ;;
  *) echo "goro: pkg-config looks there with PKG_CONFIG_PATH=$libdir/pkgconfig;" \
          "CMake with -DCMAKE_PREFIX_PATH=$prefix" ;;
esac
