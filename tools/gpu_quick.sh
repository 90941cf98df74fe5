#!/usr/bin/env bash
# A short GPU check for when device time is scarce (tools/gpu_run.sh is the
# full one): the stream and DLPack C tests, the Python tests about streams,
# torch and CUDA against the installed wheel (C extension path only), the
# interop examples, and bench/python_launch.py with fewer samples.
#   tools/gpu_quick.sh   (carry .carry/build-gpu and dist, as for gpu_run.sh)
set -u
cd "$(dirname "$0")/.."
mkdir -p /work
[ "$(pwd -P)" = /work/main ] || ln -sfn "$(pwd -P)" /work/main
source tools/gpu_setup.sh
status=0
(cd /work/main/build-gpu && ctest -R 'wrap_test_gpu|streams_test_gpu|dlpack_test_gpu' --output-on-failure) 2>&1 |
  tail -8
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# the wheel installed into a folder the system python (torch, pytest) imports from
site=$(wheel_site quick) || exit 1
(cd "$site" && PYTHONPATH="$site" OXIDE_TEST_GPU=1 python3 -m pytest -q -p no:cacheprovider \
  /work/main/tests/python -k "test_torch or test_streams or cuda or gpu" 2>&1 | tail -4)
[ "${PIPESTATUS[0]}" = 0 ] || status=1
export OXIDE_LIBRARY="$PWD/build-gpu/liboxide.so" PYTHONPATH="$PWD/bindings/python"
build-gpu/interop/c_rust cuda || status=1
python3 examples/interop/python_rust.py build-gpu/interop/liboxide_rust_fill.so || status=1
python3 examples/interop/cpp_python.py build-gpu/interop/libcpp_scale.so || status=1
unset OXIDE_LIBRARY PYTHONPATH
(cd "$site" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 python3 /work/main/bench/python_launch.py \
  --device cuda --samples 20 2>&1 | grep -v Warning | tail -24)
echo "gpu quick status: $status"
exit $status
