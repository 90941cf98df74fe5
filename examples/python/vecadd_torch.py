"""vecadd on torch tensors: the kernel of examples/vecadd.oxk called with
PyTorch tensors directly (no copies, no conversions), on torch's current
stream, and checked against torch."""
import torch

import oxide
from _common import finish, kernel_file, pick_device

where, dev = pick_device()
vecadd = oxide.compile_file(kernel_file("vecadd.oxk"), dev).vecadd

n = 1_000_003  # not a multiple of the block: the last block is partly idle
a = torch.randn(n, device=where)
b = torch.randn(n, device=where)
c = torch.empty(n, device=where)
vecadd(a, b, c, grid=(n + 255) // 256, block=256)
# c is an ordinary torch tensor, written on torch's stream: use it at once
ok = torch.equal(c, a + b)
finish("vecadd_torch", ok, f"{n} elements on {dev}")
