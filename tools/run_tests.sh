#!/usr/bin/env bash
# Every test suite: set up, build, then
#   1. C/C++ tests and the examples on the CPU (ctest; GPU-labelled tests are
#      run on a GPU machine by tools/gpu_suite.sh), and the installed C/C++
#      package used by a project outside the repository (find_package,
#      pkg-config, add_subdirectory: tools/test_cmake_package.sh),
#   2. the same C tests under AddressSanitizer + UndefinedBehaviorSanitizer
#      (+ LeakSanitizer): API misuse, handles, the cache, threads included,
#   3. the concurrency tests (ctest label "threads") under ThreadSanitizer,
#   4. Python (pytest, twice: through the C extension, and with
#      OXIDE_PURE_PYTHON=1 through ctypes; the tile tests a third time with
#      OXIDE_TILE_THREADS=1, the GPU's tile lowering run on the CPU), Rust (cargo test, a crate outside
#      the workspace) and SWIG (Java) bindings, and the cross-language
#      examples (examples/interop),
#   5. the Python wheel (tools/build_wheel.sh) installed into a fresh virtual
#      environment, and the Python tests against the installed package,
#   6. the front-end fuzzer for a bounded CPU time ($OXIDE_FUZZ_SECONDS, default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
export OXIDE_FUZZ=1 OXIDE_SWIG=1
bash tools/setup.sh
BUILD=${OXIDE_BUILD_DIR:-build}
JOBS=$(nproc)
status=0
step() { echo; echo "=== $*"; }

step "C/C++ tests (ctest, CPU)"
(cd "$BUILD" && ctest -LE gpu --output-on-failure -j"$JOBS") || status=1

step "C/C++ package: install, find_package, pkg-config, add_subdirectory"
bash tools/test_cmake_package.sh || status=1

step "C tests under AddressSanitizer and UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DOXIDE_SANITIZE=ON -DOXIDE_LLVM_SHARED=ON >/dev/null
cmake --build build-asan -j"$JOBS" >/dev/null
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest -LE gpu --output-on-failure -j"$JOBS") || status=1

step "concurrency tests under ThreadSanitizer"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOXIDE_TSAN=ON -DOXIDE_LLVM_SHARED=ON \
  -DOXIDE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$JOBS" >/dev/null
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
   ctest -L threads --output-on-failure -j"$JOBS") || status=1

step "Python tests (pytest): the C extension's launch path, then the pure ctypes path"
if [ -d tests/python ]; then
  # OXIDE_TEST_FAST=1: the extension (built next to liboxide) must be the one in use
  # OXIDE_MOCK_CUDA: the stand-in two-GPU driver of tests/python/test_devices.py
  export OXIDE_MOCK_CUDA="$PWD/$BUILD/tests/libmockcuda.so"
  OXIDE_LIBRARY="$PWD/$BUILD/liboxide.so" PYTHONPATH="$PWD/bindings/python" OXIDE_TEST_FAST=1 \
    python3 -m pytest -q tests/python || status=1
  OXIDE_LIBRARY="$PWD/$BUILD/liboxide.so" PYTHONPATH="$PWD/bindings/python" OXIDE_PURE_PYTHON=1 \
    python3 -m pytest -q tests/python || status=1
  # the tile tests again with tile kernels lowered for the CPU as for a GPU (blocks of
  # threads, shared memory, barriers): the GPU lowering's logic, checked without a GPU
  OXIDE_TILE_THREADS=1 OXIDE_LIBRARY="$PWD/$BUILD/liboxide.so" PYTHONPATH="$PWD/bindings/python" \
    python3 -m pytest -q tests/python/test_tile.py tests/python/test_tile_data.py tests/python/test_rng.py || status=1
fi

step "Python wheel: build, install into a fresh venv, test the installed package"
{ bash tools/build_wheel.sh && OXIDE_TEST_FAST=1 bash tools/test_wheel.sh; } || status=1

step "Rust tests (cargo test)"
if [ -f bindings/rust/Cargo.toml ]; then
  OXIDE_LIB_DIR="$PWD/$BUILD" cargo test --offline --manifest-path bindings/rust/Cargo.toml || status=1
  # a crate outside the workspace, built and run with no environment variables
  bash tools/test_rust_consumer.sh || status=1
  # across languages: C and Python hand tensors to a Rust cdylib through DLPack
  bash examples/interop/run.sh "$PWD/$BUILD" || status=1
fi

step "SWIG binding (Java)"
bash tools/test_swig.sh "$PWD/$BUILD" || status=1

step "front-end fuzzing"
if [ -x tools/fuzz.sh ] || [ -f tools/fuzz.sh ]; then
  bash tools/fuzz.sh "${OXIDE_FUZZ_SECONDS:-300}" || status=1
fi

echo
if [ $status = 0 ]; then echo "all test suites passed"; else echo "SOME TEST SUITES FAILED"; fi
exit $status
