#!/usr/bin/env bash
# Downloads transformers and its dependencies as wheels for the GPU machine
# (Python 3.12, x86-64 Linux) into .carry/wheels, for tools/gpu_llama.sh: that
# machine has no package registry. NumPy and torch are there already, so
# their wheels are dropped to stay inside the device tool's 64 MiB carry.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry/wheels && mkdir -p .carry/wheels
python3 -m pip download -q transformers --dest .carry/wheels --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64
rm -f .carry/wheels/numpy-*.whl
# `kernels` (an optional hub-kernels package of transformers) shares its import name with
# tests/python/kernels.py, which would shadow it: transformers works without it
rm -f .carry/wheels/kernels-*.whl
du -sh .carry/wheels
