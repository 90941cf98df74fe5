#!/usr/bin/env python3
"""Benchmarks on a GPU machine: Oxide against PyTorch, CuPy and Triton in the
same run. Prints a table and writes JSON (to $OUT/bench.json when $OUT is set,
else bench/results.json).

  python3 bench/run.py BUILD_DIR

Figures: vecadd on 2^28 f32 (GB/s counting bytes read + written, median);
host time per launch (ox_launch vs raw cuLaunchKernel of the same cubin);
cold compile of vecadd to a loaded module, and a load from the disk cache."""
import json, os, subprocess, sys, tempfile

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
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3 / 10)
    times.sort()
    return times[len(times) // 2]


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
