#!/usr/bin/env python3
"""Matmuls on one GPU, peers in the same run: bf16 (f32 accumulation) against
torch.matmul (cuBLAS) and a Triton matmul written here, on square and skinny
shapes; fp8 (f8e4m3, per-tensor scales, bf16 out) against torch._scaled_mm.
Oxide's kernels are examples/tile_matmul.oxk with a bf16 output (as cuBLAS and
Triton write here; the example writes f32) and examples/tile_matmul_fp8.oxk,
their tiles chosen by the runtime from candidates (Kernel.set_candidates, the
first launch measures them), not by hand; the choice is printed. Every
result is checked against the peer's before it is timed.

  python3 bench/matmul.py [--quick] [--bf16 | --fp8]   (--bf16/--fp8: only those)

TFLOP/s = 2 M N K / median time. Writes $OUT/matmul.json (else bench/matmul.json)."""
import json, os, sys

import torch
import oxide

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK = {"bf16": 989.0, "fp8": 1979.0}  # H200 dense tensor-core TFLOP/s (NVIDIA's figures)
BF16 = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (16384, 1024, 8192)]
FP8 = [(4096, 4096, 4096), (8192, 8192, 8192)]
if "--quick" in sys.argv:
    BF16, FP8 = [(2048, 2048, 2048)], [(2048, 2048, 2048)]
CANDIDATES = [{"BM": 128, "BN": 256, "BK": 64}, {"BM": 128, "BN": 128, "BK": 64},
              {"BM": 128, "BN": 256, "BK": 32}, {"BM": 128, "BN": 128, "BK": 32}, {"BM": 64, "BN": 256, "BK": 64}]
FP8_CANDIDATES = [{"BM": 128, "BN": 256, "BK": 128}, {"BM": 128, "BN": 128, "BK": 128},
                  {"BM": 128, "BN": 256, "BK": 64}, {"BM": 128, "BN": 128, "BK": 64}]
rows = []
# examples/tile_matmul.oxk, storing bf16
MATMUL = """
#[tile]
fn matmul<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<bf16, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc as bf16);
}
"""


def timeit(fn, reps=20):
    """Median seconds per call (CUDA events around 5 calls), after a warm-up."""
    return timing.timeit(fn, reps=reps, inner=5, warmup=3)


def triton_matmul():
    import triton
    import triton.language as tl

    @triton.jit
    def mm(c, a, b, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)  # grouped order: G rows of tiles before the next column
        tn = tl.cdiv(N, BN)
        group = pid // (G * tn)
        rows = min(tl.cdiv(M, BM) - group * G, G)
        i = group * G + (pid % (G * tn)) % rows
        j = (pid % (G * tn)) // rows
        rm = i * BM + tl.arange(0, BM)
        rn = j * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
            y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))

    def run(c, a, b, cfg):
        M, K = a.shape
        N = b.shape[1]
        bm, bn, bk, w, st = cfg
        mm[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](c, a, b, M, N, K, BM=bm, BN=bn, BK=bk, G=8,
                                                         num_warps=w, num_stages=st)
    return run


def report(kind, shape, name, secs, ok, extra=None):
    M, N, K = shape
    tf = 2 * M * N * K / secs / 1e12 if ok else None
    row = {"bench": f"matmul_{kind}", "shape": shape, "impl": name, "tflops": tf,
           "correct": ok, **(extra or {})}
    rows.append(row)
    return tf


def show(kind, shape, ref_name):
    mine = [r for r in rows if r["bench"] == f"matmul_{kind}" and r["shape"] == shape]
    ref = next(r["tflops"] for r in mine if r["impl"] == ref_name)
    print(f"\n{kind} matmul {shape[0]} x {shape[1]} x {shape[2]} (TFLOP/s, median; H200 peak {PEAK[kind]:.0f})")
    for r in mine:
        v = r["tflops"]
        ratio = f"{v / ref:6.3f} x {ref_name}" if v and ref else ""
        note = f"  tiles {r['tiles']}" if "tiles" in r else ""
        print(f"  {r['impl']:30s} {'WRONG RESULT' if v is None else f'{v:8.1f}'}  {ratio}"
              f"  {100 * v / PEAK[kind] if v else 0:5.1f}% of peak{note}")


def bench_bf16(mod, tri):
    k = mod.matmul
    k.set_candidates(CANDIDATES)
    for shape in BF16:
        M, N, K = shape
        g = torch.Generator(device="cuda").manual_seed(M + K)
        a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(K, N, device="cuda", generator=g).to(torch.bfloat16)
        ref = torch.matmul(a, b)
        report("bf16", shape, "torch.matmul (cuBLAS)", timeit(lambda: torch.matmul(a, b)), True)
        tol = 2e-2 * ref.float().abs().max().item()
        if tri:
            best = None
            c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            for cfg in ((128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4)):
                try:
                    tri(c, a, b, cfg)
                    ok = (c.float() - ref.float()).abs().max().item() <= tol
                    t = timeit(lambda: tri(c, a, b, cfg)) if ok else None
                except Exception as e:  # a config that does not fit: the others decide
                    print(f"  triton {cfg}: {e}")
                    continue
                if ok and (best is None or t < best[0]):
                    best = (t, cfg)
            if best:
                report("bf16", shape, "triton (best of 3 configs)", best[0], True, {"tiles": best[1][:3]})
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        k(c, a, b)  # the first launch measures the candidates
        ok = (c.float() - ref.float()).abs().max().item() <= tol
        chosen = k.tuned(c, a, b)
        report("bf16", shape, "oxide tile matmul (tuned)", timeit(lambda: k(c, a, b)), ok,
               {"tiles": f"{chosen['BM']}x{chosen['BN']}x{chosen['BK']}"})
        show("bf16", shape, "torch.matmul (cuBLAS)")


def bench_fp8(mod):
    k = mod.matmul_fp8
    k.set_candidates(FP8_CANDIDATES)
    for shape in FP8:
        M, N, K = shape
        g = torch.Generator(device="cuda").manual_seed(M)
        a = (torch.randn(M, K, device="cuda", generator=g) * 8).to(torch.float8_e4m3fn)
        bt = (torch.randn(N, K, device="cuda", generator=g) * 8).to(torch.float8_e4m3fn)
        sa, sb = torch.tensor(0.125, device="cuda"), torch.tensor(0.125, device="cuda")
        f = lambda: torch._scaled_mm(a, bt.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        ref = f()
        report("fp8", shape, "torch._scaled_mm", timeit(f), True)
        # the tensor cores' own accumulation (~14 significant bits), as Oxide's fp8 dot has
        ff = lambda: torch._scaled_mm(a, bt.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        report("fp8", shape, "torch._scaled_mm fast_accum", timeit(ff), True)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        args = (c, a, bt, oxide.f32(0.125), oxide.f32(0.125))
        k(*args)
        ok = (c.float() - ref.float()).abs().max().item() <= 1e-2 * ref.float().abs().max().item()
        chosen = k.tuned(*args)
        report("fp8", shape, "oxide tile matmul_fp8 (tuned)", timeit(lambda: k(*args)), ok,
               {"tiles": f"{chosen['BM']}x{chosen['BN']}x{chosen['BK']}"})
        show("fp8", shape, "torch._scaled_mm")


def main():
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, oxide {oxide.version()}")
    try:
        tri = triton_matmul()
    except Exception as e:
        print(f"triton: {e}")
        tri = None
    if "--fp8" not in sys.argv:
        bench_bf16(oxide.compile(MATMUL, "cuda", filename="matmul_bf16.oxk"), tri)
    if "--bf16" not in sys.argv:
        bench_fp8(oxide.compile_file(os.path.join(ROOT, "examples", "tile_matmul_fp8.oxk"), "cuda"))
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "matmul.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
