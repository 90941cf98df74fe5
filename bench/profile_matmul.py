#!/usr/bin/env python3
"""One launch of bench/matmul.py's bf16 matmul with fixed tiles (after a
warm-up launch that compiles it), then one torch.matmul (cuBLAS) on the same
operands, for a profiler, e.g. what limits each according to Nsight Compute:

  ncu --clock-control none --kernel-name regex:'matmul|gemm|sm90' --launch-skip 1 \
      --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      python3 bench/profile_matmul.py [M N K BM BN BK]"""
import sys

import torch
import oxide

from matmul import MATMUL  # bench/matmul.py, beside this script

M, N, K, BM, BN, BK = (list(map(int, sys.argv[1:7])) if len(sys.argv) > 6 else [8192, 8192, 8192, 128, 256, 64])
k = oxide.compile(MATMUL, "cuda", filename="matmul_bf16.oxk").matmul
k.set_generic("BK", BK)
a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
ct = oxide.from_dlpack(c).partition([BM, BN])
for _ in range(2):
    k(ct, a, b)
ref = torch.matmul(a, b)
torch.cuda.synchronize()
err = (c.float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
print("profiled", (M, N, K), "tiles", (BM, BN, BK), f"relative error {err:.2e}")
