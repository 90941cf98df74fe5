#!/usr/bin/env python3
"""Decode-shaped projections on one GPU: y = x w^T for x [M, K] (M = 1 to 64
rows) and w [N, K] as transformers stores it, bf16 in and out, f32
accumulation. Oxide's is the Llama model's (models/llama/llama.oxk):
linear_part split along K into S runs, then a kernel summing the S partials
(in the model that sum is fused into what consumes the projection), with S
from the model's policy (Llama._splits) and, beside it, the best S of
1 to 32. Peers in the same run: torch.matmul (cuBLAS) on the same operands,
and the roofline (the weight's bytes / 4.8 TB/s). Each result is checked
against cuBLAS's before it is timed.

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

HBM = 4.8e12
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
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'K x N':>14s} {'M':>3s} {'cuBLAS us':>10s} {'oxide us':>9s} {'S':>3s} {'best us':>8s} {'S':>3s}"
          f" {'oxide/cuBLAS':>12s} {'best/cuBLAS':>11s} {'cuBLAS TB/s':>11s} {'oxide TB/s':>10s}")
    for K, N in SHAPES:
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / 32
        for M in MS:
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            ref = x @ w.t()
            t_ref = timing.timeit(lambda: x @ w.t(), reps=20, inner=5)
            ktiles = -(-K // 64)
            y = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

            def run(S):
                chunk = -(-ktiles // S)
                ws = torch.empty(S, M, N, device="cuda", dtype=torch.float32)
                wsp = oxide.from_dlpack(ws).partition((1, 64, 128))
                yp = oxide.from_dlpack(y).partition((1, 128))
                wsd = oxide.from_dlpack(ws)
                ox, ow = oxide.from_dlpack(x), oxide.from_dlpack(w)

                def go():
                    k.linear_part(wsp, ox, ow, chunk)
                    s.split_sum(yp, wsd)
                go()
                torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
                return timing.timeit(go, reps=20, inner=5)
            S0, _ = splits(M, N, K)
            times = {S: run(S) for S in sorted({1, 2, 4, 8, 16, 32, S0}) if S <= ktiles}
            best = min(times, key=times.get)
            bytes_ = 2 * (N * K + M * K + M * N)
            row = {"K": K, "N": N, "M": M, "cublas_us": t_ref * 1e6, "oxide_us": times[S0] * 1e6, "S": S0,
                   "best_us": times[best] * 1e6, "best_S": best, "ratio": t_ref / times[S0],
                   "best_ratio": t_ref / times[best], "roofline_us": bytes_ / HBM * 1e6}
            rows.append(row)
            print(f"{K:>6d} x {N:<6d} {M:>3d} {t_ref * 1e6:10.1f} {times[S0] * 1e6:9.1f} {S0:3d} {times[best] * 1e6:8.1f}"
                  f" {best:3d} {row['ratio']:12.2f} {row['best_ratio']:11.2f} {bytes_ / t_ref / 1e12:11.2f}"
                  f" {bytes_ / times[S0] / 1e12:10.2f}")
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "decode_matmul.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
