#!/usr/bin/env python3
"""Benchmarks on a GPU machine: Oxide against PyTorch, CuPy and Triton in the
same run. Prints a table and writes JSON (to $OUT/bench.json when $OUT is set,
else bench/results.json).

  python3 bench/run.py BUILD_DIR

Figures: vecadd on 2^28 f32 (GB/s counting bytes read + written, median);
host time per launch (ox_launch vs raw cuLaunchKernel of the same cubin);
cold compile of vecadd to a loaded module, and a load from the disk cache.
Row softmax, RMSNorm and LayerNorm (8192 x 8192 and 4096 x 4096 f32) against
torch and Triton kernels written here (GB/s counting x read and y written)."""
import json, os, subprocess, sys, tempfile

import timing  # bench/timing.py, beside this script

build = sys.argv[1] if len(sys.argv) > 1 else "build"
exe = os.path.join(build, "bench", "oxide_bench")
N = 1 << 28
results = {"device": None, "rows": []}


def oxide(*args, env=None):
    out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def timeit(fn, reps=50):
    """Median seconds per call: CUDA events around 10 calls, after a warm-up."""
    return timing.timeit(fn, reps=reps, inner=10, warmup=5)


def peers_vecadd():
    import torch
    results["device"] = torch.cuda.get_device_name()
    a = torch.rand(N, device="cuda")
    b = torch.rand(N, device="cuda")
    c = torch.empty_like(a)
    rows = {}

    t = timeit(lambda: torch.add(a, b, out=c))
    rows["torch.add"] = 12 * N / t / 1e9
    t = timeit(lambda: c.copy_(a))
    rows["torch copy (roofline)"] = 8 * N / t / 1e9
    try:
        import cupy
        k = cupy.RawKernel(r'''
        extern "C" __global__ void vecadd(const float* a, const float* b, float* c, long long n) {
            long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) c[i] = a[i] + b[i];
        }''', "vecadd")
        ca, cb, cc = (cupy.asarray(x) for x in (a, b, c))
        grid = ((N + 255) // 256,)
        t = timeit(lambda: k(grid, (256,), (ca, cb, cc, cupy.int64(N))))
        rows["cupy RawKernel"] = 12 * N / t / 1e9
    except Exception as e:  # report, never hide
        rows["cupy RawKernel"] = f"failed: {e}"
    try:
        import triton, triton.language as tl

        @triton.jit
        def add_kernel(x, y, z, n, BLOCK: tl.constexpr):
            off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = off < n
            tl.store(z + off, tl.load(x + off, mask=m) + tl.load(y + off, mask=m), mask=m)

        t = timeit(lambda: add_kernel[(triton.cdiv(N, 1024),)](a, b, c, N, BLOCK=1024))
        rows["triton"] = 12 * N / t / 1e9
    except Exception as e:
        rows["triton"] = f"failed: {e}"
    return rows


def norms(R, C, eps=1e-5):
    """RMSNorm and LayerNorm of R x C f32 over the rows: torch, a Triton kernel
    (one row per program, the whole row in one block of BLOCK = next power of
    two >= C, masked past C) and Oxide's tile kernels. GB/s counts x read and y
    written; the weights are one row."""
    import torch
    x = torch.randn(R, C, device="cuda") + 1.0
    y = torch.empty_like(x)
    w = torch.rand(C, device="cuda") + 0.5
    b = torch.rand(C, device="cuda") - 0.5
    gbps = lambda t: 8 * R * C / t / 1e9
    peers = {"rmsnorm": {}, "layernorm": {}}
    if hasattr(torch.nn.functional, "rms_norm"):  # torch >= 2.4
        peers["rmsnorm"]["torch rms_norm"] = gbps(timeit(
            lambda: torch.nn.functional.rms_norm(x, (C,), w, eps)))
    else:
        peers["rmsnorm"]["torch rms_norm"] = f"failed: torch {torch.__version__} has no rms_norm"
    peers["layernorm"]["torch layer_norm"] = gbps(timeit(
        lambda: torch.nn.functional.layer_norm(x, (C,), w, b, eps)))
    want = {"rmsnorm": x * torch.rsqrt((x * x).mean(1, keepdim=True) + eps) * w,
            "layernorm": torch.nn.functional.layer_norm(x, (C,), w, b, eps)}
    try:
        import triton, triton.language as tl

        @triton.jit
        def rmsnorm_kernel(y, x, w, n, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            off = tl.arange(0, BLOCK)
            m = off < n
            v = tl.load(x + row * n + off, mask=m, other=0.0)  # padding 0 adds nothing
            r = tl.rsqrt(tl.sum(v * v, 0) / n + eps)
            tl.store(y + row * n + off, v * r * tl.load(w + off, mask=m), mask=m)

        @triton.jit
        def layernorm_kernel(y, x, w, b, n, eps, BLOCK: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            off = tl.arange(0, BLOCK)
            m = off < n
            v = tl.load(x + row * n + off, mask=m, other=0.0)
            mean = tl.sum(v, 0) / n
            d = tl.where(m, v - mean, 0.0)  # centered, padding masked out
            r = tl.rsqrt(tl.sum(d * d, 0) / n + eps)
            tl.store(y + row * n + off, d * r * tl.load(w + off, mask=m) + tl.load(b + off, mask=m), mask=m)

        BLOCK = triton.next_power_of_2(C)
        launch = {"rmsnorm": lambda nw: rmsnorm_kernel[(R,)](y, x, w, C, eps, BLOCK=BLOCK, num_warps=nw),
                  "layernorm": lambda nw: layernorm_kernel[(R,)](y, x, w, b, C, eps, BLOCK=BLOCK, num_warps=nw)}
        for name, run in launch.items():
            for nw in (4, 8, 16):  # the best of these is the reference
                y.fill_(float("nan"))
                run(nw)
                ok = torch.allclose(y, want[name], rtol=2e-4, atol=1e-5)
                peers[name][f"triton, {nw} warps"] = gbps(timeit(lambda: run(nw))) if ok else "WRONG RESULT"
    except Exception as e:
        for name in peers:
            peers[name]["triton"] = f"failed: {e}"
    for name, rows in peers.items():
        try:
            ox = oxide(name, R, C, 20)
            rows[f"oxide tile {name}"] = ox["gbps"] if ox["correct"] else "WRONG RESULT"
        except Exception as e:  # report, and go on with the rest of the run
            rows[f"oxide tile {name}"] = f"failed: {str(e).strip()}"
        tri = [v for k, v in rows.items() if k.startswith("triton") and isinstance(v, float)]
        ref, refname = (max(tri), "triton") if tri else (next(iter(rows.values())), "torch")
        print(f"\n{name} {R} x {C} f32 (GB/s, read + write, median; ratio to "
              f"{'the fastest triton' if tri else 'torch'})")
        for impl, v in rows.items():
            ratio = f"{v / ref:6.3f} x {refname}" if isinstance(v, float) and isinstance(ref, float) else ""
            print(f"  {impl:24s} {v if isinstance(v, str) else f'{v:8.1f}'}  {ratio}")
            results["rows"].append({"bench": name, "rows": R, "cols": C, "impl": impl, "gbps": v})


def matmul(S):
    """bf16 S x S x S matmul, f32 accumulation: torch.matmul (cuBLAS), a Triton
    matmul written here (the usual K loop of tl.dot, several pipeline stages),
    and Oxide's tile matmul (examples/tile_matmul.oxk) in several tile shapes (BM x BN x BK).
    TFLOP/s = 2 S^3 / median time."""
    import torch
    a = torch.full((S, S), 0.5, device="cuda", dtype=torch.bfloat16)
    b = torch.full((S, S), 0.5, device="cuda", dtype=torch.bfloat16)
    flop = 2 * S ** 3
    mrows = {"torch.matmul (cuBLAS)": flop / timeit(lambda: torch.matmul(a, b), reps=20) / 1e12}
    try:
        import triton, triton.language as tl

        @triton.jit
        def mm_kernel(c, a, b, n, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            i = tl.program_id(0)
            j = tl.program_id(1)
            rm = i * BM + tl.arange(0, BM)
            rn = j * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, n, BK):
                x = tl.load(a + rm[:, None] * n + (k + rk)[None, :])
                y = tl.load(b + (k + rk)[:, None] * n + rn[None, :])
                acc += tl.dot(x, y)
            tl.store(c + rm[:, None] * n + rn[None, :], acc)

        c = torch.empty((S, S), device="cuda", dtype=torch.float32)
        best = None
        for bm, bn, bk, w, st in ((128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 32, 4, 4)):
            f = lambda: mm_kernel[(S // bm, S // bn)](c, a, b, S, BM=bm, BN=bn, BK=bk, num_warps=w, num_stages=st)
            f()
            ok = bool(torch.all(c == S / 4))
            t = flop / timeit(f, reps=20) / 1e12 if ok else 0.0
            best = t if best is None or t > best else best
        mrows["triton (best of 3 configs)"] = best if best else "WRONG RESULT"
    except Exception as e:
        mrows["triton (best of 3 configs)"] = f"failed: {e}"
    for tm, tn, bk in ((128, 128, 64), (128, 128, 32), (128, 256, 64), (64, 64, 64)):
        name = f"oxide tile matmul, {tm}x{tn}x{bk}"
        try:
            ox = oxide("matmul", S, S, S, tm, 10, bk, tn)
            mrows[name] = ox["tflops"] if ox["correct"] else "WRONG RESULT"
        except Exception as e:
            mrows[name] = f"failed: {e}"
    ref = mrows["torch.matmul (cuBLAS)"]
    print(f"\nbf16 matmul {S}^3, f32 accumulate (TFLOP/s, median)")
    for name, v in mrows.items():
        ratio = f"{v / ref:6.3f} x cuBLAS" if isinstance(v, float) else ""
        print(f"  {name:28s} {v if isinstance(v, str) else f'{v:8.1f}'}  {ratio}")
        results["rows"].append({"bench": "matmul", "size": S, "impl": name, "tflops": v})


def main():
    rows = peers_vecadd()
    ox = oxide("vecadd", N, 50)
    rows["oxide vecadd"] = ox["gbps"] if ox["correct"] else "WRONG RESULT"
    for waves in (4, 8, 16):
        ox = oxide("vecadd", N, 50, waves)
        rows[f"oxide grid-stride {waves}/SM"] = ox["gbps"] if ox["correct"] else "WRONG RESULT"
    for tile in (1024, 4096):
        ox = oxide("tileadd", N, 50, tile)
        rows[f"oxide tile add, tile {tile}"] = ox["gbps"] if ox["correct"] else "WRONG RESULT"
    ref = rows["torch.add"]
    print(f"\nvecadd, 2^28 f32, on {results['device']} (GB/s, bytes read + written, median)")
    for name, v in rows.items():
        ratio = f"{v / ref:6.3f} x torch.add" if isinstance(v, float) else ""
        print(f"  {name:24s} {v if isinstance(v, str) else f'{v:8.1f}'}  {ratio}")
        results["rows"].append({"bench": "vecadd", "impl": name, "gbps": v})
    # row softmax, 8192 x 8192 f32 (GB/s counting one read and one write)
    import torch
    R = C = 8192
    xs = torch.rand(R, C, device="cuda")
    ys = torch.empty_like(xs)

    srows = {"torch.softmax": 8 * R * C / timeit(lambda: torch.softmax(xs, 1)) / 1e9}
    try:
        import triton, triton.language as tl

        @triton.jit
        def softmax_kernel(y, x, n, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            off = tl.arange(0, BLOCK)
            v = tl.load(x + row * n + off, mask=off < n, other=-float("inf"))
            e = tl.exp(v - tl.max(v, 0))
            tl.store(y + row * n + off, e / tl.sum(e, 0), mask=off < n)

        srows["triton"] = 8 * R * C / timeit(lambda: softmax_kernel[(R,)](ys, xs, C, BLOCK=C)) / 1e9
    except Exception as e:
        srows["triton"] = f"failed: {e}"
    ox = oxide("softmax", R, C, 20)
    srows["oxide tile softmax"] = ox["gbps"] if ox["correct"] else "WRONG RESULT"
    ref = srows.get("triton") if isinstance(srows.get("triton"), float) else srows["torch.softmax"]
    print(f"\nrow softmax {R} x {C} f32 (GB/s, read + write, median)")
    for name, v in srows.items():
        ratio = f"{v / ref:6.3f} x triton" if isinstance(v, float) else ""
        print(f"  {name:24s} {v if isinstance(v, str) else f'{v:8.1f}'}  {ratio}")
        results["rows"].append({"bench": "softmax", "impl": name, "gbps": v})
    for R in (8192, 4096):
        norms(R, R)
    for S in (4096, 8192):
        matmul(S)
    la = oxide("launch", 20000)
    print(f"\nhost time per launch: raw cuLaunchKernel {la['raw_us']:.2f} us, ox_launch {la['oxide_us']:.2f} us "
          f"(ratio {la['ratio']:.3f})")
    results["rows"].append(la)
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, OXIDE_CACHE_DIR=d)
        cold = oxide("compile", env=env)
        warm = oxide("compile", env=env)
    print(f"compile of vecadd to a loaded module: cold {cold['ms']:.1f} ms (from_cache={cold['from_cache']}), "
          f"from the disk cache {warm['ms']:.2f} ms (from_cache={warm['from_cache']})")
    results["rows"] += [dict(cold, kind="cold"), dict(warm, kind="disk cache")]
    path = os.path.join(os.environ["OUT"], "bench.json") if os.environ.get("OUT") else "bench/results.json"
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
