#!/usr/bin/env bash
# Installs what building and testing Oxide needs on Debian 12 (as root), then
# configures and builds into build/ (Release, LLVM linked statically).
# Idempotent: packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# python3-dev: CPython's headers, for the Python extension oxide._fast
for p in build-essential cmake llvm-19-dev libzstd-dev zlib1g-dev python3 python3-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
command -v cargo >/dev/null 2>&1 || need+=(cargo)
# the SWIG binding's test (Java): tools/test_swig.sh
if [ "${OXIDE_SWIG:-0}" = 1 ]; then
  for p in swig default-jdk-headless; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
fi
if [ "${OXIDE_FUZZ:-0}" = 1 ]; then
  for p in clang-14 libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Virtual environments (the wheel's build and its test): Debian's python3
# needs python3-venv for them.
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq python3-venv >/dev/null
fi

# Python test dependencies: pip where the python3 on PATH has it (a virtualenv
# or pyenv), else Debian's packages for Debian's own python3.
if ! python3 -c "import pytest, numpy" >/dev/null 2>&1; then
  if ! { python3 -m pip --version >/dev/null 2>&1 && python3 -m pip install -q pytest numpy; }; then
    apt-get install -y -qq python3-pytest python3-numpy >/dev/null
  fi
fi

BUILD=${OXIDE_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release ${OXIDE_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
