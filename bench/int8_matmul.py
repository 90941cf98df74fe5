#!/usr/bin/env python3
"""Exact i8 x i8 -> i32 matmuls on one GPU, cuBLAS in the same run:
C = A W^T, A [M, K] and W [N, K] int8 (weights stored [N, K], as int8
inference engines keep them), against torch._int_mm (cuBLAS's int8 GEMM,
which takes the same K-major second operand). Oxide's kernel is one tile
kernel, `transpose(w tile)` as B, which sm_90 runs on wgmma .s32.s8.s8; the
N-major form (B [K, N]) runs on mma.sync m16n8k32 and is timed beside it.
Tiles are chosen by the runtime among candidates at the first launch. Every
result is compared with torch's exactly before it is timed.

  python3 bench/int8_matmul.py [--quick]

Writes $OUT/int8_matmul.json (else bench/int8_matmul.json)."""
import json, os, sys

import torch
import oxide

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 14336, 4096), (128, 4096, 4096)]  # M, N, K
if "--quick" in sys.argv:
    SHAPES = [(2048, 2048, 2048)]
CANDIDATES = [{"BM": 128, "BN": 256, "BK": 128}, {"BM": 128, "BN": 128, "BK": 128},
              {"BM": 128, "BN": 256, "BK": 64}, {"BM": 64, "BN": 256, "BK": 128}]
CANDIDATES_N = [{"BM": 128, "BN": 128, "BK": 64}, {"BM": 64, "BN": 128, "BK": 64}, {"BM": 128, "BN": 64, "BK": 64}]
PEAK = 1979.0  # H100/H200 SXM dense int8 TOPS

KERNELS = """\
#[tile]
fn qmm_t<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<i32, [BM, BN]>, a: &Tensor<i8, [-1, -1]>, w: &Tensor<i8, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pw = w.partition([BN, BK]);
    let mut acc = full([BM, BN], 0i32);
    for k in 0..pa.num_tiles(1) {
        acc = mma(pa.load([tile_id(0), k]), transpose(pw.load([tile_id(1), k])), acc);
    }
    c.store(acc);
}

#[tile]
fn qmm_n<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<i32, [BM, BN]>, a: &Tensor<i8, [-1, -1]>, b: &Tensor<i8, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0i32);
    for k in 0..pa.num_tiles(1) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""

rows = []


def main():
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, oxide {oxide.version()}")
    mod = oxide.compile(KERNELS, "cuda", filename="int8_matmul.oxk")
    mod.qmm_t.set_candidates(CANDIDATES)
    mod.qmm_n.set_candidates(CANDIDATES_N)
    for M, N, K in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8, generator=g)
        w = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8, generator=g)
        wn = w.t().contiguous()
        ref = torch._int_mm(a, w.t())
        print(f"\n{M} x {N} x {K} (ms, median; TOPS; peak {PEAK:.0f})")
        base = None
        for impl, fn, out, args in (
                ("torch._int_mm (cuBLAS)", lambda: torch._int_mm(a, w.t()), None, None),
                ("oxide, transpose(w) (wgmma)", mod.qmm_t, torch.empty(M, N, device="cuda", dtype=torch.int32), w),
                ("oxide, N-major b (mma.sync)", mod.qmm_n, torch.empty(M, N, device="cuda", dtype=torch.int32), wn)):
            if out is None:
                ok, secs, tiles = True, timing.timeit(fn, reps=20, inner=5, warmup=3), None
            else:
                out.fill_(-1)
                fn(out, a, args)
                ok = torch.equal(out, ref)
                chosen = fn.tuned(out, a, args)
                tiles = f"{chosen['BM']}x{chosen['BN']}x{chosen['BK']}"
                secs = timing.timeit(lambda: fn(out, a, args), reps=20, inner=5, warmup=3) if ok else None
            tops = 2 * M * N * K / secs / 1e12 if secs else None
            base = base or secs
            rows.append({"shape": [M, N, K], "impl": impl, "ms": secs * 1e3 if secs else None, "tops": tops,
                         "exact": ok, "tiles": tiles})
            if not ok:
                print(f"  {impl:32s} WRONG RESULT")
                continue
            print(f"  {impl:32s} {secs * 1e3:8.3f} {tops:7.1f}  {base / secs:5.2f}x cuBLAS" +
                  (f"  tiles {tiles}" if tiles else ""))
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "int8_matmul.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
