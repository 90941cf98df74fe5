#!/usr/bin/env bash
# The tile kernels' GPU check for when device time is scarce (tools/gpu_run.sh
# is the full one): the tile, fp8 and tuning tests and the tile examples on the
# GPU, the Python tile, attention, fp8 and tuning tests from the wheel, then
# bench/attention.py, bench/matmul.py and bench/epilogue.py against the wheel.
#   tools/gpu_tile.sh [--no-bench] [--quick]   (carry .carry/build-gpu and dist)
set -u
cd "$(dirname "$0")/.."
source tools/gpu_setup.sh
status=0
(cd build-gpu && ctest -R 'tile_test_gpu|fp8_test_gpu|tune_test_gpu|example_tile_.*_gpu|ptx_test' --output-on-failure) 2>&1 | tail -20
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# the Python tile tests (attention against torch's SDPA among them) from the installed wheel
site=$(wheel_site tile) || exit 1
root=$PWD
(cd "$site" && PYTHONPATH="$site" OXIDE_TEST_GPU=1 python3 -m pytest -q -p no:cacheprovider \
  "$root/tests/python/test_tile.py" "$root/tests/python/test_torch.py" -k "tile or attention or fp8 or candidates" 2>&1 | tail -4)
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ "${1:-}" != --no-bench ]; then
  (cd "$site" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 python3 "$root/bench/attention.py" "$@" 2>&1 |
    grep -v Warning | tail -20) || status=1
  (cd "$site" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 python3 "$root/bench/matmul.py" "$@" 2>&1 |
    grep -v Warning | tail -60) || status=1
  (cd "$site" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 python3 "$root/bench/epilogue.py" "$@" 2>&1 |
    grep -v Warning | tail -40) || status=1
fi
echo "gpu tile status: $status"
exit $status
