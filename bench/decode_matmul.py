#!/usr/bin/env python3
"""Decode-shaped projections on one GPU: y = x w^T for x [M, K] (M = 1 to 64
rows) and w [N, K] as transformers stores it, bf16 in and out, f32
accumulation. Oxide's is the Llama model's (models/llama/llama.oxk):
linear_part split along K into S runs, then a kernel summing the S partials
(in the model that sum is fused into what consumes the projection, so the
partials alone are timed too), with S from the model's policy
(Llama._splits) and, beside it, the best S of 1 to 32. Peers in the same
run: torch.matmul (cuBLAS) on the same operands, and the roofline (the
weight's bytes over the memory's bandwidth). Each result is checked against
cuBLAS's before it is timed.

As in a model's decode step, the weights are cold (copies cycled through,
256 MB or more, past the 50 MB L2) and each variant is timed as a CUDA graph
of back-to-back calls (bench/timing.py: graph_time), so no host time counts.

  python3 bench/decode_matmul.py [--quick]

Writes $OUT/decode_matmul.json (else bench/decode_matmul.json)."""
import json
import os
import sys

import torch

import oxide
import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from models.llama.model import SOURCE  # noqa: E402

HBM = {"H100": 3.35e12, "H200": 4.8e12}  # the memory's bandwidth by the device name's second word
# (K, N): Llama 3 8B's (the table) and the 1B's fused q/k/v and gate/up
SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (2048, 128256), (2048, 3072), (2048, 16384), (8192, 2048)]
MS = [1, 8, 16, 32, 64]
if "--quick" in sys.argv:
    SHAPES, MS = SHAPES[:3], [1, 16, 64]
SUM = """
#[tile]
fn split_sum<const NS: i32, const BN: i32>(y: &mut Tensor<bf16, [1, BN]>, ws: &Tensor<f32, [NS, -1, -1]>) {
    let (i, j) = tile_id();
    y.store(reshape(reduce_sum(reshape(ws.partition([NS, 1, BN]).load([0, i, j]), [NS, BN]), 0), [1, BN]) as bf16);
}
"""


class Policy:
    """Llama._splits on this device, without a model."""
    BM, BN, BK, gpu = 64, 128, 64, True

    def __init__(self, dev):
        self.blocks = 2 * dev.multiprocessors


def main():
    from models.llama.model import Llama
    dev = oxide.device("cuda")
    k = oxide.compile_file(SOURCE, device=dev)
    s = oxide.compile(SUM, device=dev)
    k.linear_part.set_generic("BK", 64)
    pol = Policy(dev)
    splits = lambda M, N, K: Llama._splits(pol, M, N, K)
    hbm = HBM.get(torch.cuda.get_device_name().split()[1], 4.8e12)
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; us a call, cold weights, CUDA graphs")
    print(f"{'K x N':>14s} {'M':>3s} {'cuBLAS':>7s} {'oxide':>7s} {'S':>3s} {'parts':>7s} {'best':>7s} {'S':>3s}"
          f" {'ox/cuBLAS':>9s} {'parts/cuBLAS':>12s} {'best/cuBLAS':>11s} {'cuBLAS TB/s':>11s} {'oxide TB/s':>10s}")
    for K, N in SHAPES:
        copies = max(4, -(-256 * 2**20 // (2 * N * K)))
        ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / 32 for _ in range(copies)]
        calls = max(copies, 20)
        for M in MS:
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            ref = x @ ws[0].t()
            y = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            t_ref = timing.graph_time([lambda c=c: torch.matmul(x, ws[c % copies].t(), out=y) for c in range(calls)])
            ktiles = -(-K // 64)

            def run(S, parts_only=False):
                chunk = -(-ktiles // S)
                part = torch.empty(S, M, N, device="cuda", dtype=torch.float32)
                s.split_sum.set_generic("NS", S)
                go = lambda c: k.linear_part(part, x, ws[c % copies], chunk, tiles=(1, 64, 128))
                both = lambda c: (go(c), s.split_sum(y, part, tiles=(1, 128)))
                both(0)
                torch.cuda.synchronize()
                torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
                return timing.graph_time([lambda c=c: (go if parts_only else both)(c) for c in range(calls)])
            S0, _ = splits(M, N, K)
            times = {S: run(S) for S in sorted({1, 2, 4, 8, 16, 32, S0}) if S <= ktiles}
            parts = run(S0, parts_only=True)
            best = min(times, key=times.get)
            bytes_ = 2 * (N * K + M * K + M * N)
            row = {"K": K, "N": N, "M": M, "cublas_us": t_ref * 1e6, "oxide_us": times[S0] * 1e6, "S": S0,
                   "parts_us": parts * 1e6, "best_us": times[best] * 1e6, "best_S": best, "ratio": t_ref / times[S0],
                   "parts_ratio": t_ref / parts, "best_ratio": t_ref / times[best], "roofline_us": bytes_ / hbm * 1e6}
            rows.append(row)
            print(f"{K:>6d} x {N:<6d} {M:>3d} {t_ref * 1e6:7.1f} {times[S0] * 1e6:7.1f} {S0:3d} {parts * 1e6:7.1f}"
                  f" {times[best] * 1e6:7.1f} {best:3d} {row['ratio']:9.2f} {row['parts_ratio']:12.2f}"
                  f" {row['best_ratio']:11.2f} {bytes_ / t_ref / 1e12:11.2f} {bytes_ / times[S0] / 1e12:10.2f}", flush=True)
        del ws
        torch.cuda.empty_cache()
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "decode_matmul.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
