"""The tile softmax of examples/tile_softmax.oxk on torch tensors, checked
against torch.softmax. A #[tile] kernel takes its grid from its output
partition: one row per tile, the tile as wide as the row rounded up to a
power of two (the load pads with -inf)."""
import torch

import oxide
from _common import finish, kernel_file, pick_device

where, dev = pick_device()
softmax = oxide.compile_file(kernel_file("tile_softmax.oxk"), dev).softmax

worst = 0.0
for rows, cols in ((4096, 1000), (333, 4096), (1, 7)):
    x = torch.randn(rows, cols, device=where) * 4
    y = torch.empty_like(x)
    width = 1 << (cols - 1).bit_length()
    softmax(oxide.from_dlpack(y).partition([1, width]), x)
    worst = max(worst, (y - torch.softmax(x, dim=1)).abs().max().item())
finish("softmax_torch", worst < 1e-5, f"max abs error {worst:.2e} on {dev}")
