#!/usr/bin/env python3
"""Attention forward on one GPU: Oxide's tile kernel (examples/tile_attention.oxk)
against torch's scaled_dot_product_attention (its flash and cuDNN backends) and a
Triton attention kernel written here, in the same run, bf16 in and out, f32
accumulation. TFLOP/s count 4·B·H·N²·D multiply-adds·2 (half of that causal).
Each implementation's output is also compared with SDPA's (max abs difference).

  python3 bench/attention.py [--quick]

Writes $OUT/attention.json (else bench/attention.json). Oxide's tiles are the
runtime's choice among OX_TILES (Kernel.set_candidates: the first launch per
shape measures them); the choice is in each row."""
import json, math, os, sys

import torch
import oxide

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(4, 32, 4096, 128), (4, 32, 4096, 64), (1, 32, 16384, 128)]
if "--quick" in sys.argv:
    SHAPES = [(1, 8, 2048, 128), (1, 8, 2048, 64)]
OX_TILES = [(64, 64), (128, 64), (64, 128), (128, 128)]  # BN of 64 to 256: both products on wgmma


def timeit(fn, reps=10):
    """Median seconds per call (CUDA events around 3 calls), after a warm-up."""
    return timing.timeit(fn, reps=reps, inner=3, warmup=2)


def triton_attention():
    import triton
    import triton.language as tl

    @triton.jit
    def fwd(Q, K, V, O, scale, N, stride_bh, stride_n, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
            CAUSAL: tl.constexpr):
        m0 = tl.program_id(0) * BM
        base = tl.program_id(1).to(tl.int64) * stride_bh
        rows = m0 + tl.arange(0, BM)
        d = tl.arange(0, D)
        q = tl.load(Q + base + rows[:, None] * stride_n + d[None, :], mask=rows[:, None] < N, other=0.0)
        m = tl.full([BM], float("-inf"), tl.float32)
        l = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        c = scale * 1.4426950408889634  # exp(x) = exp2(x log2 e)
        hi = tl.minimum(m0 + BM, N) if CAUSAL else N
        for n0 in range(0, hi, BN):
            cols = n0 + tl.arange(0, BN)
            kt = tl.load(K + base + cols[None, :] * stride_n + d[:, None], mask=cols[None, :] < N, other=0.0)
            s = tl.dot(q, kt) * c
            keep = cols[None, :] < N
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            s = tl.where(keep, s, float("-inf"))
            mn = tl.maximum(m, tl.max(s, 1))
            p = tl.math.exp2(s - mn[:, None])
            alpha = tl.math.exp2(m - mn)
            l = l * alpha + tl.sum(p, 1)
            v = tl.load(V + base + cols[:, None] * stride_n + d[None, :], mask=cols[:, None] < N, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
            m = mn
        acc = acc / l[:, None]
        tl.store(O + base + rows[:, None] * stride_n + d[None, :], acc.to(tl.bfloat16), mask=rows[:, None] < N)

    def run(q, k, v, o, causal, BM, BN, warps, stages):
        B, H, N, D = q.shape
        fwd[(triton.cdiv(N, BM), B * H)](q, k, v, o, 1 / math.sqrt(D), N, q.stride(1), q.stride(2), D=D, BM=BM,
                                          BN=BN, CAUSAL=causal, num_warps=warps, num_stages=stages)
    return run


def main():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    out = {"device": torch.cuda.get_device_name(), "peak_bf16_dense_tflops": 989.4, "rows": []}
    mod = oxide.compile_file(os.path.join(ROOT, "examples", "tile_attention.oxk"), "cuda")
    kern = mod.attention
    kern.set_candidates([{"BM": bm, "BN": bn} for bm, bn in OX_TILES])
    try:
        tri = triton_attention()
    except Exception as e:  # report, never hide
        tri, tri_err = None, str(e)
    for (B, H, N, D) in SHAPES:
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flop = 4 * B * H * N * N * D / (2 if causal else 1)
            row = {"shape": [B, H, N, D], "causal": causal, "tflops": {}, "max_abs_diff": {}}
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            for name, be in (("sdpa flash", SDPBackend.FLASH_ATTENTION), ("sdpa cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(be):
                        t = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    row["tflops"][name] = flop / t / 1e12
                except Exception as e:
                    row["tflops"][name] = f"failed: {e}"[:200]
            if tri:
                best = None
                for cfg in ((128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 4, 3)):
                    o = torch.empty_like(q)
                    try:
                        t = timeit(lambda: tri(q, k, v, o, causal, *cfg))
                    except Exception as e:
                        row["tflops"][f"triton {cfg}"] = f"failed: {e}"[:200]
                        continue
                    if not best or t < best[0]:
                        best = (t, cfg, (o.float() - ref.float()).abs().max().item())
                if best:
                    row["tflops"]["triton"] = flop / best[0] / 1e12
                    row["triton_config"] = best[1]
                    row["max_abs_diff"]["triton"] = best[2]
            else:
                row["tflops"]["triton"] = f"failed: {tri_err}"[:200]
            # the tiles: the runtime's choice among OX_TILES, measured at the first launch per shape
            o = torch.full_like(q, float("nan"))
            po = oxide.from_dlpack(o).partition([1, 1, 64, D])  # BM is the candidates'; D stays
            sc = oxide.f32(1 / math.sqrt(D))
            try:
                kern(po, q, k, v, sc, causal)
                err = (o.float() - ref.float()).abs().max().item()
                chosen = kern.tuned(po, q, k, v, sc, causal)
                t = timeit(lambda: kern(po, q, k, v, sc, causal), reps=5)
                row["tflops"]["oxide"] = flop / t / 1e12
                row["oxide_tiles"] = (chosen["BM"], chosen["BN"])
                row["max_abs_diff"]["oxide"] = err
            except Exception as e:
                row["tflops"]["oxide"] = f"failed: {e}"[:300]
            nums = {k_: x for k_, x in row["tflops"].items() if isinstance(x, float) and k_.startswith("sdpa")}
            if "oxide" in row["tflops"] and nums:
                row["oxide_vs_best_sdpa"] = row["tflops"]["oxide"] / max(nums.values())
            if isinstance(row["tflops"].get("triton"), float) and "oxide" in row["tflops"]:
                row["oxide_vs_triton"] = row["tflops"]["oxide"] / row["tflops"]["triton"]
            print(json.dumps(row), flush=True)
            out["rows"].append(row)
    path = os.path.join(os.environ.get("OUT", os.path.join(ROOT, "bench")), "attention.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
