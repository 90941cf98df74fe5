#!/usr/bin/env bash
# Tests Oxide as C and C++ users consume it, from outside the repository:
#   1. `cmake --install` of build/ into a temporary prefix;
#   2. a user project (tests/package) with find_package(oxide): C and C++
#      against liboxide.so, C and C++ against the self-contained liboxide.a
#      (which must need nothing but libc/libm at run time);
#   3. the same program through pkg-config;
#   4. the user project with add_subdirectory(oxide) and default options.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${OXIDE_BUILD_DIR:-build}
work=$(mktemp -d /tmp/oxide-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$root/$BUILD" --prefix "$work/prefix" >/dev/null
for f in include/oxide/oxide.h include/oxide/oxide.hpp include/dlpack/dlpack.h lib/liboxide.so \
         lib/cmake/oxide/oxideConfig.cmake lib/cmake/oxide/oxideConfigVersion.cmake lib/pkgconfig/oxide.pc; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
if readelf -d "$work/prefix/lib/liboxide.so" | grep -q RUNPATH; then
  echo "liboxide.so keeps a RUNPATH:"; readelf -d "$work/prefix/lib/liboxide.so" | grep RUNPATH; exit 1
fi
export OXIDE_CACHE_DIR="$work/cache"

echo "== find_package(oxide)"
cmake -S "$root/tests/package" -B "$work/pkg" -DOXIDE_FROM=package -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/pkg" -j"$(nproc)" >/dev/null
"$work/pkg/app_c" && "$work/pkg/app_cpp"
if [ -e "$work/prefix/lib/liboxide.a" ]; then
  "$work/pkg/app_static" && "$work/pkg/app_static_cpp"
  extra=$(ldd "$work/pkg/app_static" | grep -vE 'linux-vdso|libc\.so|libm\.so|ld-linux|libdl|libpthread' || true)
  [ -z "$extra" ] || { echo "the static app needs more than libc/libm: $extra"; exit 1; }
else
  echo "no liboxide.a installed (OXIDE_STATIC_BUNDLE off)"
fi

echo "== pkg-config"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -o "$work/app_pc" "$root/tests/package/app.c" $(pkg-config --cflags --libs oxide)
env -i "$work/app_pc" # as documented: the .pc's rpath finds liboxide, no environment needed

echo "== add_subdirectory(oxide)"
cmake -S "$root/tests/package" -B "$work/sub" -DOXIDE_FROM=source -DOXIDE_SOURCE="$root" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/sub" -j"$(nproc)" >/dev/null # the default target: the user's programs and what they link
"$work/sub/app_c" && "$work/sub/app_cpp"
# as a subproject Oxide builds only what the user's targets link, and installs nothing of its own
for f in oxide/oxide oxide/bundle/liboxide.a; do
  if [ -e "$work/sub/$f" ]; then echo "add_subdirectory(oxide) built $f"; exit 1; fi
done
if ls "$work/sub/oxide/"_fast*.so >/dev/null 2>&1; then echo "add_subdirectory(oxide) built the Python extension"; exit 1; fi
cmake --install "$work/sub" --prefix "$work/sub-prefix" >/dev/null
if [ -n "$(find "$work/sub-prefix" -type f 2>/dev/null)" ]; then
  echo "add_subdirectory(oxide) installed files:"; find "$work/sub-prefix" -type f; exit 1
fi
echo "package tests passed"
