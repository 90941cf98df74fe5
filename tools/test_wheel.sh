#!/usr/bin/env bash
# Tests the wheel as users get it: installs dist/*.whl into a fresh virtual
# environment outside the repository and runs the Python tests against the
# installed package (no PYTHONPATH, no OXIDE_LIBRARY, no build folder), with
# its C extension and again with the pure ctypes path (OXIDE_PURE_PYTHON=1).
# OXIDE_WHEEL_BENCH="ARGS": then bench/python_launch.py ARGS on that package.
#
#   tools/test_wheel.sh [--system-site-packages] [pytest args...]
# --system-site-packages: take numpy/pytest (and torch, cupy on a GPU machine)
# from the system instead of PyPI (for machines without a package registry).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
wheel=$(ls "$root"/dist/oxide_kernels-*.whl | head -1)
venv=$(mktemp -d /tmp/oxide-wheel-venv.XXXXXX)
trap 'rm -rf "$venv"' EXIT
if [ "${1:-}" = --system-site-packages ]; then
  shift
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
  # pytest, numpy, torch may sit where a venv does not look (a user site):
  # add the folders the system python finds them in, after the venv's own
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for m in pytest numpy torch cupy; do
    python3 -c "import os, $m; print(os.path.dirname(os.path.dirname($m.__file__)))" 2>/dev/null ||
      true # not installed (the loop's status would stop the script under pipefail)
  done | sort -u >"$site/oxide-test-system.pth"
else
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$wheel" pytest numpy
fi
unset OXIDE_LIBRARY PYTHONPATH
# the stand-in two-GPU driver that tests/python/test_devices.py runs against (a test library of the build)
for b in "${OXIDE_BUILD_DIR:-build}" build-gpu; do
  if [ -f "$root/$b/tests/libmockcuda.so" ]; then export OXIDE_MOCK_CUDA="$root/$b/tests/libmockcuda.so"; break; fi
done
cd "$venv"  # nothing of the repository on sys.path
"$venv/bin/python" - <<'PY'
import oxide, os, sys
where = os.path.dirname(oxide.__file__)
assert where.startswith(sys.prefix), f"oxide imported from {where}, not the venv {sys.prefix}"
assert os.path.exists(os.path.join(where, "liboxide.so")), "the wheel's liboxide.so is missing"
assert os.path.exists(os.path.join(where, "py.typed")), "the wheel's py.typed marker is missing"
print("installed oxide", oxide.version(), "from", where)
PY
status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@" || status=1
# the installed package, without its extension: the pure ctypes path
OXIDE_PURE_PYTHON=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@" ||
  status=1
# the Python examples, on the installed package (where torch is installed)
bash "$root/tools/run_python_examples.sh" "$venv/bin/python" || status=1
if [ -n "${OXIDE_WHEEL_BENCH:-}" ]; then # the Python launch benchmark, on the installed package
  PYTHONUNBUFFERED=1 "$venv/bin/python" "$root/bench/python_launch.py" $OXIDE_WHEEL_BENCH || status=1
fi
exit $status
