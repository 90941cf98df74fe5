#!/usr/bin/env bash
# Runs on a GPU machine, over a build made elsewhere (the GPU machines have no
# LLVM): the GPU-labelled tests, the CPU tests, `oxide doctor`, and the
# benchmarks. Logs go to $OUT when it is set. Not run here: the internal
# tests that link LLVM statically (tile_front_test, handle_test,
# cpu_limits_test, limits_test), which tools/gpu_bundle.sh leaves out of the
# copy to keep it under the carry limit, and cpp_header_clang, a compile
# check with the build machine's clang++.
#
#   tools/gpu_suite.sh [BUILD_DIR] [--no-bench]
set -u
BUILD=${1:-build-gpu}
OUT=${OUT:-/tmp/oxide-gpu-out}
mkdir -p "$OUT"
# CTest files and rpaths hold the build machine's absolute paths (/work/main/...).
if [ "$(pwd -P)" != /work/main ]; then mkdir -p /work && ln -sfn "$(pwd -P)" /work/main; fi
cd /work/main || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUT/gpu.txt"
"$BUILD/oxide" doctor 2>&1 | tee -a "$OUT/gpu.txt"
status=0
# the two-GPU tests (label gpu2) need a second GPU: said so when there is none
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then two=; else
  two="-LE gpu2"; echo "one GPU: the two-GPU tests (ctest -L gpu2) are not run" | tee "$OUT/gpu2.txt"; fi
(cd "$BUILD" && ctest -L gpu $two --output-on-failure) 2>&1 | tee "$OUT/gpu_tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
(cd "$BUILD" && ctest -LE gpu -E 'tile_front_test|handle_test|cpu_limits_test|limits_test|cpp_header_clang' --output-on-failure) 2>&1 | tail -5 | tee "$OUT/cpu_tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ -d bindings/python ] && [ -d tests/python ] && [ -z "${OXIDE_SKIP_REPO_PYTHON:-}" ]; then
  OXIDE_LIBRARY="$BUILD/liboxide.so" PYTHONPATH=bindings/python OXIDE_TEST_GPU=1 \
    python3 -m pytest -q tests/python 2>&1 | tail -15 | tee "$OUT/python_tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "${2:-}" != --no-bench ]; then
  PYTHONUNBUFFERED=1 python3 bench/run.py "$BUILD" 2>&1 | tee "$OUT/bench.log"
fi
echo "gpu suite status: $status"
exit $status
