#!/usr/bin/env bash
# The SWIG binding (bindings/swig/oxide.i) generated for Java, built against
# the build's liboxide.so, and tests/swig/Main.java run on it.
#   tools/test_swig.sh [BUILD] [cuda]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
java_home=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
work=$(mktemp -d /tmp/oxide-swig.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gen" "$work/classes"
swig -java -DSWIGWORDSIZE64 -package oxide.swig -outdir "$work/gen" -o "$work/oxide_wrap.c" \
  -I"$root/core/include" "$root/bindings/swig/oxide.i"
cc -shared -fPIC -O2 -o "$work/liboxide_java.so" "$work/oxide_wrap.c" -I"$root/core/include" \
  -I"$java_home/include" -I"$java_home/include/linux" -L"$build" -loxide -Wl,-rpath,"$build"
javac -d "$work/classes" "$work"/gen/*.java "$root/tests/swig/Main.java"
java -Djava.library.path="$work" -cp "$work/classes" Main ${2:-}
