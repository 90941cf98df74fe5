"""examples/tile_attention.oxk as a torch operator (oxide.torch.custom_op)
inside a model's attention layer, eager and under torch.compile(fullgraph=True),
checked against the same layer on torch.nn.functional.scaled_dot_product_attention."""
import math

import torch
import torch.nn.functional as F

import oxide
import oxide.torch
from _common import finish, kernel_file, pick_device

where, dev = pick_device()
kernel = oxide.compile_file(kernel_file("tile_attention.oxk"), dev).attention
kernel.set_generic("BN", 64)  # key/value tile; BM and D come from the output's partition

# attention(Tensor q, Tensor k, Tensor v, float scale, bool causal) -> Tensor
attention = oxide.torch.custom_op(
    "oxide_examples::attention", kernel,
    outputs={"o": lambda q, k, v, scale, causal: torch.empty_like(q)},
    tile={"o": lambda o, q, k, v, scale, causal: (1, 1, 64, q.shape[3])})


class SelfAttention(torch.nn.Module):
    def __init__(self, dim, heads, use_oxide):
        super().__init__()
        self.heads, self.use_oxide = heads, use_oxide
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = (t.reshape(B, N, self.heads, C // self.heads).transpose(1, 2).contiguous()
                   for t in self.qkv(x).chunk(3, dim=-1))
        if self.use_oxide:
            o = attention(q, k, v, 1 / math.sqrt(C // self.heads), True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(B, N, C))


torch.manual_seed(0)
ours = SelfAttention(512, 4, True).to(where, torch.bfloat16)
ref = SelfAttention(512, 4, False).to(where, torch.bfloat16)
ref.load_state_dict(ours.state_dict())
compiled = torch.compile(ours, fullgraph=True)
worst = 0.0
with torch.no_grad():
    for n in (200, 333):  # sequence lengths no tile divides
        x = torch.randn(2, n, 512, device=where, dtype=torch.bfloat16)
        want = ref(x).float()
        for model in (ours, compiled):
            worst = max(worst, (model(x).float() - want).abs().max().item())
finish("attention_torch", worst < 3e-2, f"max abs difference {worst:.2e} from SDPA, eager and compiled, on {dev}")
