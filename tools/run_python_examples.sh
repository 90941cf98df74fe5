#!/usr/bin/env bash
# Runs examples/python/*.py with the given Python (each checks its result),
# or says why not: they need PyTorch.
#   tools/run_python_examples.sh PYTHON
set -u
py=${1:-python3}
cd "$(dirname "$0")/.."
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "examples/python: NOT RUN: PyTorch is not installed for $py (pip install torch)"
  exit 0
fi
fail=0
for ex in examples/python/[a-z]*.py; do
  "$py" "$ex" || fail=1
done
exit $fail
