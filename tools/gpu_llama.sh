#!/usr/bin/env bash
# The Llama model's GPU run (issue 28): installs the oxide wheel (dist/) and
# transformers with its dependencies from wheels carried to the GPU machine
# (.carry/wheels, made here by tools/llama_wheels.sh; the machine has no
# package registry) into a folder on PYTHONPATH, over the system's torch, then runs the model
# against transformers' LlamaForCausalLM (tests/python/test_llama_hf.py), the
# kernels' tests on the GPU, and bench/llama.py unless --no-bench.
#   tools/gpu_llama.sh [--no-bench]   (carry dist and .carry/wheels; .carry/build-gpu for the Rust engine)
set -u
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-/tmp}
site=$(mktemp -d /tmp/oxide-llama.XXXXXX)
# the wheels without their dependencies (the machine's torch and numpy serve), on PYTHONPATH
python3 -m pip install -q --no-index --no-deps --target "$site" dist/oxide_kernels-*.whl .carry/wheels/*.whl || exit 1
status=0
# the Rust engine built by tools/gpu_bundle.sh (when .carry/build-gpu is carried), against
# the wheel's liboxide (named by its SONAME) and the libraries the wheel vendors
if [ -x .carry/build-gpu/llama/llama_oxide ]; then
  lib=$(mktemp -d /tmp/oxide-lib.XXXXXX)
  cp "$site"/oxide/liboxide.so "$lib/liboxide.so.0" && cp "$site"/oxide_kernels.libs/* "$lib/" 2>/dev/null
  export OXIDE_LLAMA_RUST="$root/.carry/build-gpu/llama/llama_oxide" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
(cd "$site" && env -u OXIDE_LIBRARY PYTHONPATH="$site:$root" OXIDE_TEST_GPU=1 python3 -m pytest -q -p no:cacheprovider \
  "$root/tests/python/test_llama_hf.py" "$root/tests/python/test_llama_kernels.py" "$root/tests/python/test_llama_model.py" 2>&1 |
  tee "$out/llama_tests.log" | tail -15) || status=1
[ "${PIPESTATUS[0]:-0}" = 0 ] || status=1
if [ "${1:-}" != --no-bench ]; then
  (cd "$site" && env -u OXIDE_LIBRARY PYTHONPATH="$site:$root:$root/bench" python3 "$root/bench/llama.py" 2>&1 |
    tee "$out/llama_bench.log" | tail -40) || status=1
fi
echo "gpu llama status: $status"
exit $status
