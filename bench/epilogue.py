#!/usr/bin/env python3
"""A matmul with its epilogue fused, on one GPU, peers in the same run:
y = gelu(x w + bias) (exact, erf) in bf16, and the same plus a residual, as
one Oxide tile kernel against what a PyTorch user runs instead:
  - cuBLAS's matmul with the bias (torch.addmm) and then torch's GELU (and add):
    the pair the fused kernel must beat;
  - cuBLAS's matmul, then torch's bias add and GELU: three kernels, as the
    issue states the peer;
  - the same under torch.compile (Inductor fuses the elementwise tail, or the
    whole thing, as it chooses).
Oxide's plain matmul (no epilogue, the same tiles) is timed too: its gap to
the fused kernel is what the epilogue costs. Shapes are a transformer MLP's (tokens x hidden -> 4 hidden) and a square
one. Oxide's tiles are chosen by the runtime from candidates at the first
launch. Every result is checked against torch in float32 before it is timed.

  python3 bench/epilogue.py [--quick]

Writes $OUT/epilogue.json (else bench/epilogue.json)."""
import json, os, sys

import torch
import oxide

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(8192, 14336, 4096), (4096, 4096, 4096), (2048, 11008, 4096)]  # M, N, K
if "--quick" in sys.argv:
    SHAPES = [(2048, 2048, 2048)]
CANDIDATES = [{"BM": 128, "BN": 256, "BK": 64}, {"BM": 128, "BN": 128, "BK": 64},
              {"BM": 128, "BN": 256, "BK": 32}, {"BM": 64, "BN": 256, "BK": 64}]
PEAK = 989.0  # H200 dense bf16 TFLOP/s

KERNELS = """\
#[tile]
fn bias_gelu<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<bf16, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<bf16, [-1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    let h = acc + reshape(bias.partition([BN]).load([tile_id(1)]) as f32, [1, BN]);
    y.store((0.5 * h * (1.0 + erf(h * 0.7071067811865476))) as bf16);
}

#[tile]
fn bias_gelu_residual<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<bf16, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<bf16, [-1]>, res: &Tensor<bf16, [-1, -1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    let h = acc + reshape(bias.partition([BN]).load([tile_id(1)]) as f32, [1, BN]);
    let g = 0.5 * h * (1.0 + erf(h * 0.7071067811865476));
    y.store((g + res.partition([BM, BN]).load([tile_id(0), tile_id(1)]) as f32) as bf16);
}

#[tile]
fn plain<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<bf16, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    y.store(acc as bf16);
}
"""

rows = []


def timeit(fn):
    return timing.timeit(fn, reps=20, inner=5, warmup=3)


def report(name, shape, impl, secs, ok, extra=None):
    M, N, K = shape
    tf = 2 * M * N * K / secs / 1e12 if secs else None
    rows.append({"bench": name, "shape": shape, "impl": impl, "ms": secs * 1e3 if secs else None,
                 "tflops": tf, "ok": ok, **(extra or {})})


def show(name, shape, ref):
    mine = [r for r in rows if r["bench"] == name and r["shape"] == shape]
    base = next((r["ms"] for r in mine if r["impl"] == ref and r["ms"]), None)
    print(f"\n{name} {shape[0]} x {shape[1]} x {shape[2]} (ms, median; TFLOP/s; peak {PEAK:.0f})")
    for r in mine:
        if not r["ok"]:
            print(f"  {r['impl']:42s} WRONG RESULT")
            continue
        ratio = f"{base / r['ms']:5.2f}x {ref}" if base else ""
        note = f"  tiles {r['tiles']}" if "tiles" in r else ""
        print(f"  {r['impl']:42s} {r['ms']:8.3f} {r['tflops']:7.1f}  {ratio}{note}")


def main():
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, oxide {oxide.version()}")
    mod = oxide.compile(KERNELS, "cuda", filename="epilogue.oxk")
    fused, fused_res, plain = mod.bias_gelu, mod.bias_gelu_residual, mod.plain
    for k in (fused, fused_res, plain):
        k.set_candidates(CANDIDATES)
    gelu = torch.nn.functional.gelu

    def pair(x, w, b):
        return gelu(torch.addmm(b, x, w))

    def pair_res(x, w, b, r):
        return gelu(torch.addmm(b, x, w)) + r

    def three(x, w, b):
        return gelu(x @ w + b)

    def three_res(x, w, b, r):
        return gelu(x @ w + b) + r

    compiled, compiled_res = torch.compile(pair), torch.compile(pair_res)
    for shape in SHAPES:
        M, N, K = shape
        g = torch.Generator(device="cuda").manual_seed(M + N)
        x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
        w = (torch.randn(K, N, device="cuda", generator=g) / K ** 0.5).to(torch.bfloat16)
        b = torch.randn(N, device="cuda", generator=g).to(torch.bfloat16)
        r = torch.randn(M, N, device="cuda", generator=g).to(torch.bfloat16)
        for name, fk, peers, args in (("matmul+bias+gelu", fused, (pair, compiled, three), (x, w, b)),
                                      ("matmul+bias+gelu+residual", fused_res, (pair_res, compiled_res, three_res),
                                       (x, w, b, r))):
            ref = peers[0](*(a.float() for a in args))
            tol = 2e-2 * ref.abs().max().item()
            for impl, fn in (("torch addmm + gelu (cuBLAS + torch)", peers[0]),
                             ("torch.compile(addmm + gelu)", peers[1]),
                             ("torch matmul, + bias, gelu (3 kernels)", peers[2])):
                try:
                    out = fn(*args)
                    ok = (out.float() - ref).abs().max().item() <= tol
                    report(name, shape, impl, timeit(lambda: fn(*args)) if ok else None, ok)
                except Exception as e:  # a peer that fails here is reported, not fatal
                    print(f"  {impl}: {e}")
            y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            fk(y, *args)  # the first launch measures the candidates
            ok = (y.float() - ref).abs().max().item() <= tol
            chosen = fk.tuned(y, *args)
            report(name, shape, "oxide fused tile kernel (tuned)", timeit(lambda: fk(y, *args)) if ok else None,
                   ok, {"tiles": f"{chosen['BM']}x{chosen['BN']}x{chosen['BK']}"})
            if fk is fused:  # what the matmul costs without an epilogue, on the same candidates
                yp = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
                plain(yp, x, w)
                ok = (yp.float() - (x.float() @ w.float())).abs().max().item() <= tol
                chosen = plain.tuned(yp, x, w)
                report(name, shape, "oxide matmul alone (no bias, no gelu)",
                       timeit(lambda: plain(yp, x, w)) if ok else None, ok,
                       {"tiles": f"{chosen['BM']}x{chosen['BN']}x{chosen['BK']}"})
            show(name, shape, "torch addmm + gelu (cuBLAS + torch)")
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "epilogue.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
