#!/usr/bin/env python3
"""One launch of examples/tile_attention.oxk for a profiler (after a warm-up
launch that compiles it), e.g. what limits it according to Nsight Compute:

  ncu --kernel-name regex:attention --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      python3 bench/profile_attention.py [B H N D BM BN causal]"""
import math, os, sys

import torch
import oxide

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, H, N, D, BM, BN, causal = (list(map(int, sys.argv[1:8])) if len(sys.argv) > 7 else [4, 32, 4096, 128, 64, 64, 0])
k = oxide.compile_file(os.path.join(ROOT, "examples", "tile_attention.oxk"), "cuda").attention
k.set_generic("BN", BN)
q, kk, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = torch.empty_like(q)
for _ in range(2):
    k(oxide.from_dlpack(o).partition([1, 1, BM, D]), q, kk, v, oxide.f32(1 / math.sqrt(D)), bool(causal))
torch.cuda.synchronize()
print("profiled", (B, H, N, D), "tiles", (BM, BN), "causal", bool(causal))
