"""An Oxide kernel as a torch operator (oxide.torch.custom_op), called from
a function compiled by torch.compile with fullgraph=True (a graph break
would be an error), checked against eager mode."""
import torch

import oxide
import oxide.torch
from _common import finish, kernel_file, pick_device

where, dev = pick_device()
softmax_k = oxide.compile_file(kernel_file("tile_softmax.oxk"), dev).softmax

# the operator's schema comes from the kernel: softmax(Tensor x) -> Tensor;
# the output's allocator is also its shape function under torch.compile
softmax = oxide.torch.custom_op(
    "oxide_examples::softmax", softmax_k,
    outputs={"y": lambda x: torch.empty_like(x)},
    tile={"y": lambda y, x: (1, 1 << (x.shape[1] - 1).bit_length())})


def attention_scores(q, k):
    return softmax(q @ k.T / q.shape[1] ** 0.5)


compiled = torch.compile(attention_scores, fullgraph=True)
worst = 0.0
for _ in range(3):
    q = torch.randn(128, 64, device=where)
    k = torch.randn(300, 64, device=where)
    got = compiled(q, k)
    want = torch.softmax(q @ k.T / 8.0, dim=1)
    worst = max(worst, (got - want).abs().max().item())
finish("compile_custom_op", worst < 1e-5, f"max abs error {worst:.2e}, torch.compile on {dev}")
