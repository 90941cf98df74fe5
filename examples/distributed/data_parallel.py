"""A data-parallel training step with Oxide kernels inside a torch.distributed
job: each rank takes its share of the batch on its own GPU, runs Oxide's tile
matmul and softmax (examples/tile_matmul.oxk, examples/tile_softmax.oxk) for
the forward pass and a matmul for the weight gradient of a softmax
regression, and torch.distributed.all_reduce (NCCL) sums the ranks'
gradients. No host synchronization between the kernels and the collective:
Oxide launches on torch's current stream of the rank's device, where NCCL
runs too. Checked on every rank against the whole batch's gradient computed
in one process (float64, from the same bf16 inputs).

    torchrun --standalone --nproc-per-node=2 examples/distributed/data_parallel.py

(examples/distributed/run.sh runs it on every GPU of the machine; on the CPU,
with the gloo backend, when no GPU is there.)"""
import os
import sys

import torch
import torch.distributed as dist

import oxide

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.dirname(HERE)

cuda = torch.cuda.is_available() and oxide.device_count("cuda") > 0
dist.init_process_group("nccl" if cuda else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", rank))
if cuda:
    torch.cuda.set_device(local)
where = f"cuda:{local}" if cuda else "cpu"
dev = oxide.device(where)

matmul = oxide.compile_file(os.path.join(EXAMPLES, "tile_matmul.oxk"), dev).matmul
matmul.set_generic("BK", 32)
softmax = oxide.compile_file(os.path.join(EXAMPLES, "tile_softmax.oxk"), dev).softmax

BATCH, FEATURES, CLASSES = 1000, 192, 64  # the batch splits unevenly: a rank's rows are its own
g = torch.Generator().manual_seed(0)  # every rank makes the same data
x = torch.randn(BATCH, FEATURES, generator=g).to(torch.bfloat16)
w = (torch.randn(FEATURES, CLASSES, generator=g) / 8).to(torch.bfloat16)
labels = torch.randint(0, CLASSES, (BATCH,), generator=g)
rows = torch.arange(BATCH).tensor_split(world)[rank]


def mm(a, b):
    """a @ b (bf16 in, f32 out) on Oxide's tile matmul."""
    c = torch.empty(a.shape[0], b.shape[1], device=a.device)
    matmul(oxide.from_dlpack(c).partition([64, 64]), a, b)
    return c


# this rank's share, on its GPU
xr, yr = x[rows].to(where), labels[rows].to(where)
logits = mm(xr, w.to(where))
p = torch.empty_like(logits)
softmax(oxide.from_dlpack(p).partition([1, CLASSES]), logits)
p[torch.arange(len(rows), device=where), yr] -= 1  # d(loss)/d(logits) of the cross-entropy
grad = mm(xr.T.contiguous(), p.to(torch.bfloat16))  # d(loss)/d(w), this rank's rows
dist.all_reduce(grad)  # summed over the ranks, on the same stream

# the whole batch in one process
xd, wd = x.double(), w.double()
pd = torch.softmax(xd @ wd, dim=1)
pd[torch.arange(BATCH), labels] -= 1
want = xd.T @ pd.to(torch.bfloat16).double()
err = (grad.double().cpu() - want).abs().max().item() / want.abs().max().item()
ok = err < 2e-2  # (p rounded to bf16 from slightly different logits than float64's)
print(f"rank {rank} of {world} on {where}: gradient relative error {err:.2e}: {'PASSED' if ok else 'FAILED'}")
dist.destroy_process_group()
sys.exit(0 if ok else 1)
