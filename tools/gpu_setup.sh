# Sourced by tools/gpu_run.sh, gpu_quick.sh and gpu_tile.sh on the GPU machine
# (not run alone): build-gpu from the carried .carry/build-gpu, with the wheel's
# liboxide (dist/, the same code stripped) and the libraries the wheel vendors
# in place of the build's, found through LD_LIBRARY_PATH. Sets OUT.
OUT=${OUT:-/tmp/oxide-gpu-out}
mkdir -p "$OUT"
rm -rf build-gpu wheel-x && cp -r .carry/build-gpu build-gpu || exit 1
python3 -m zipfile -e dist/oxide_kernels-*.whl wheel-x >/dev/null || exit 1
cp wheel-x/oxide/liboxide.so build-gpu/liboxide.so.0.1.0
mkdir -p build-gpu/lib && cp wheel-x/oxide_kernels.libs/* build-gpu/lib/ 2>/dev/null
export LD_LIBRARY_PATH="$PWD/build-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The wheel installed into a new folder that the system python (torch,
# pytest) imports from through PYTHONPATH: prints the folder.
wheel_site() {
  local site
  site=$(mktemp -d "/tmp/oxide-$1.XXXXXX") &&
    python3 -m pip install -q --no-index --no-deps --target "$site" dist/oxide_kernels-*.whl &&
    echo "$site"
}
