#!/usr/bin/env bash
# Builds what tools/gpu_suite.sh runs on a GPU machine, and packs it small
# enough for the device tool's carry limit (64 MiB): a Release build (LLVM
# linked statically) in build-gpu/, copied to .carry/build-gpu/ without object
# files, without liboxide itself (the GPU run takes the wheel's, dist/, the
# same code stripped: tools/gpu_run.sh) and without the internal tests that
# link all of LLVM statically (CPU-only tests; CI runs them). Carry .carry and
# dist, and run tools/gpu_run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-gpu -j"$(nproc)" >/dev/null
# the cross-language examples (examples/interop), built here: the GPU machine
# has no cargo. Linked to liboxide.so (one copy in the process), found next to
# them at run time ($ORIGIN/..: the wheel's, which tools/gpu_run.sh puts there).
rm -rf build-gpu/interop && mkdir -p build-gpu/interop
OXIDE_LIB_DIR="$PWD/build-gpu" OXIDE_LINK=dylib RUSTFLAGS='-C link-arg=-Wl,-rpath,$ORIGIN/..' \
  cargo build --offline --quiet --release \
  --manifest-path examples/interop/rust_fill/Cargo.toml --target-dir build-gpu/interop-target
cp build-gpu/interop-target/release/liboxide_rust_fill.so build-gpu/interop/
cc -std=c11 -Wall -Wextra -Werror -o build-gpu/interop/c_rust examples/interop/c_rust.c \
  -I core/include -L build-gpu -loxide -L build-gpu/interop -loxide_rust_fill \
  -Wl,-rpath,'$ORIGIN/..' -Wl,-rpath,'$ORIGIN'
g++ -std=c++17 -Wall -Wextra -Werror -shared -fPIC -o build-gpu/interop/libcpp_scale.so \
  examples/interop/cpp_scale.cpp -I build-gpu/include -L build-gpu -loxide -Wl,-rpath,'$ORIGIN/..'
# the Llama model's Rust engine (models/llama/rust), which tests/python/
# test_llama_model.py runs on the GPU (tools/gpu_llama.sh: OXIDE_LLAMA_RUST)
rm -rf build-gpu/llama && mkdir -p build-gpu/llama
OXIDE_LIB_DIR="$PWD/build-gpu" OXIDE_LINK=dylib RUSTFLAGS='-C link-arg=-Wl,-rpath,$ORIGIN/..' \
  cargo build --offline --quiet --release \
  --manifest-path models/llama/rust/Cargo.toml --target-dir build-gpu/llama-target
cp build-gpu/llama-target/release/llama_oxide build-gpu/llama/
# the SWIG binding for Java (bindings/swig), when swig and a JDK are here:
# the GPU machine runs it only if it has a JVM (tools/gpu_run.sh says which)
rm -rf build-gpu/swig
if command -v swig >/dev/null && command -v javac >/dev/null; then
  mkdir -p build-gpu/swig/gen build-gpu/swig/classes
  java_home=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
  swig -java -DSWIGWORDSIZE64 -package oxide.swig -outdir build-gpu/swig/gen -o build-gpu/swig/oxide_wrap.c \
    -Icore/include bindings/swig/oxide.i
  cc -shared -fPIC -O2 -o build-gpu/swig/liboxide_java.so build-gpu/swig/oxide_wrap.c -I core/include \
    -I"$java_home/include" -I"$java_home/include/linux" -L build-gpu -loxide -Wl,-rpath,'$ORIGIN/..'
  javac --release 11 -d build-gpu/swig/classes build-gpu/swig/gen/*.java tests/swig/Main.java
  rm -rf build-gpu/swig/gen build-gpu/swig/oxide_wrap.c
fi
rm -rf .carry/build-gpu
mkdir -p .carry
cp -a build-gpu .carry/build-gpu
rm -rf .carry/build-gpu/interop-target .carry/build-gpu/llama-target
cd .carry/build-gpu
find . -name CMakeFiles -type d -prune -exec rm -rf {} +
rm -rf liboxide.a bundle test-cache Testing
# internal tests link LLVM statically (tens of MB each): CPU-only, CI runs them
for t in tests/*; do
  if [ -f "$t" ] && [ -x "$t" ] && [ "$(stat -c %s "$t")" -gt 8000000 ]; then rm -f "$t"; fi
done
rm -f liboxide.so.0.*
du -sh .
