#!/usr/bin/env bash
# Runs data_parallel.py under torchrun: one process a GPU on every GPU of
# this machine (NCCL), or two CPU processes (gloo) when there is no GPU.
#   examples/distributed/run.sh [PYTHON]
set -u
cd "$(dirname "$0")"
py=${1:-python3}
n=$("$py" -c "import torch; print(torch.cuda.device_count() or 2)") || exit 1
exec "$py" -m torch.distributed.run --standalone --nproc-per-node="$n" data_parallel.py
