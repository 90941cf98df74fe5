#!/usr/bin/env bash
# Builds and runs the cross-language examples (each checks its result):
#   - c_rust: C makes a tensor, a kernel launched from Rust writes it, C reads it;
#   - python_rust.py: Python hands NumPy arrays (and torch tensors) to Rust;
#   - cpp_python.py: Python and a C++ library share a tensor and a stream.
# On the GPU as well when one is usable. Needs the build folder (BUILD, default
# build/) with liboxide.so and the static bundle, cargo and a C compiler.
#   examples/interop/run.sh [BUILD]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d /tmp/oxide-interop.XXXXXX)
trap 'rm -rf "$work"' EXIT
OXIDE_LIB_DIR="$build" cargo build --offline --quiet --release \
  --manifest-path "$root/examples/interop/rust_fill/Cargo.toml" --target-dir "$work/target"
so="$work/target/release/liboxide_rust_fill.so"
cc -std=c11 -Wall -Wextra -Werror -o "$work/c_rust" "$root/examples/interop/c_rust.c" \
  -I "$root/core/include" -L "$build" -loxide "$so" -Wl,-rpath,"$build" -Wl,-rpath,"$(dirname "$so")"
g++ -std=c++17 -Wall -Wextra -Werror -shared -fPIC -o "$work/libcpp_scale.so" \
  "$root/examples/interop/cpp_scale.cpp" -I "$build/include" -L "$build" -loxide -Wl,-rpath,"$build"
fail=0
devices=cpu
if nvidia-smi -L >/dev/null 2>&1; then devices="cpu cuda"; fi
for d in $devices; do "$work/c_rust" "$d" || fail=1; done
OXIDE_LIBRARY="$build/liboxide.so" PYTHONPATH="$root/bindings/python" \
  python3 "$root/examples/interop/python_rust.py" "$so" || fail=1
OXIDE_LIBRARY="$build/liboxide.so" PYTHONPATH="$root/bindings/python" \
  python3 "$root/examples/interop/cpp_python.py" "$work/libcpp_scale.so" || fail=1
exit $fail
