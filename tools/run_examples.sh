#!/usr/bin/env bash
# The main job: set up, build, and run every example: on the GPU when one is
# usable, else on the embedded CPU backend. Each example checks its own result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD=${OXIDE_BUILD_DIR:-build}
"$BUILD/oxide" doctor
fail=0
for ex in vecadd saxpy reduce transpose histogram tile_add tile_saxpy tile_softmax tile_rmsnorm \
  tile_layernorm tile_matmul tile_matmul_fp8 tile_attention; do
  "$BUILD/examples/example_$ex" || fail=1
done
# examples/python: Oxide kernels on torch tensors (they need PyTorch, which
# the setup does not install: several GB; `pip install torch` to run them)
export OXIDE_LIBRARY="$PWD/$BUILD/liboxide.so" PYTHONPATH="$PWD/bindings/python"
bash tools/run_python_examples.sh python3 || fail=1
exit $fail
