#!/usr/bin/env bash
# The GPU machine's side of a test run (the device tool carries .carry and
# dist/ from tools/gpu_bundle.sh and tools/build_wheel.sh):
#   1. build-gpu from .carry/build-gpu, with the wheel's liboxide (and the
#      library the wheel vendors) in place of the build's;
#   2. tools/gpu_suite.sh: GPU-labelled ctest, the CPU ctest, doctor (and the
#      benchmarks unless --no-bench);
#   3. the wheel installed into a fresh venv (system site packages: torch,
#      numpy, pytest), and the Python tests, GPU included, against it (C
#      extension and pure path), then bench/python_launch.py unless --no-bench.
#   tools/gpu_run.sh [--no-bench | --python-bench]
set -u
cd "$(dirname "$0")/.."
source tools/gpu_setup.sh
status=0
# the suite's Python step would use the repository's package: the wheel test below replaces it
# --no-bench: tests only; --python-bench: tests and bench/python_launch.py;
# default: tests and both benchmarks (bench/run.py in the suite)
suite_arg=--no-bench bench=""
case "${1:-}" in
  --no-bench) ;;
  --python-bench) bench="--device cuda" ;;
  *) suite_arg="" bench="--device cuda" ;;
esac
OXIDE_SKIP_REPO_PYTHON=1 bash tools/gpu_suite.sh build-gpu $suite_arg || status=1
OXIDE_TEST_GPU=1 OXIDE_WHEEL_BENCH="$bench" bash tools/test_wheel.sh --system-site-packages 2>&1 |
  tee "$OUT/wheel_tests.log" | grep -E "passed|failed|PASSED|FAILED|NOT RUN|Error|^  " | tail -80
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# the cross-language examples (built by tools/gpu_bundle.sh), on the GPU
if [ -d build-gpu/interop ]; then
  export OXIDE_LIBRARY="$PWD/build-gpu/liboxide.so" PYTHONPATH="$PWD/bindings/python"
  { build-gpu/interop/c_rust cuda &&
    python3 examples/interop/python_rust.py build-gpu/interop/liboxide_rust_fill.so &&
    python3 examples/interop/cpp_python.py build-gpu/interop/libcpp_scale.so; } 2>&1 |
    tee "$OUT/interop.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
# the torch.distributed example against the installed wheel: one rank a GPU (issue 12: on a
# one-GPU machine, one rank)
site=$(wheel_site dist) && env -u OXIDE_LIBRARY PYTHONPATH="$site" bash examples/distributed/run.sh 2>&1 |
  grep -v Warning | tee "$OUT/distributed.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# the SWIG/Java binding (built by tools/gpu_bundle.sh), on CUDA device 0
if [ -d build-gpu/swig ]; then
  if command -v java >/dev/null; then
    java -Djava.library.path="$PWD/build-gpu/swig" -cp build-gpu/swig/classes Main cuda 2>&1 | tee "$OUT/swig.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  else
    echo "SWIG/Java: NOT RUN (no java on this machine)" | tee "$OUT/swig.log"
  fi
fi
echo "gpu run status: $status"
exit $status
