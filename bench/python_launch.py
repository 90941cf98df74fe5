#!/usr/bin/env python3
"""Host time per kernel launch from Python: Oxide's C extension (oxide._fast)
and its pure ctypes path, against ox_launch from C and, where they are
importable, PyTorch tensors as arguments, CuPy RawKernel, torch.add, Triton
and numba-cuda on the GPU. Prints a table and writes JSON (to
$OUT/python_launch.json when $OUT is set, else bench/python_launch.json).

  PYTHONPATH=bindings/python OXIDE_LIBRARY=build/liboxide.so \\
      python3 bench/python_launch.py [--device cpu|cuda] [--samples N]

The launch: a 3-tensor + 1-scalar kernel (saxpy: out = alpha * x + y) on
256-element f32 tensors, grid 1 x block 256, so that the kernel itself costs
next to nothing. A sample times 200 back-to-back launches (host time only:
a GPU is synchronized after each sample, outside the timing); the figure is
the median sample, in microseconds per launch. "ox_launch from C" is the
extension's _bench: the arguments converted once, then ox_launch in a C loop.
The pure path runs in a child process (OXIDE_PURE_PYTHON=1), since a process
takes one path at import."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

N = 256
PER_SAMPLE = 200

SAXPY = """\
#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = alpha * x[i] + y[i];
    }
}
"""


def median_us(fn, sync, samples):
    """Microseconds per call of fn: the median, and the best, of `samples`
    samples of PER_SAMPLE calls (the best is steadier on a shared machine)."""
    for _ in range(PER_SAMPLE):
        fn()
    sync()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(PER_SAMPLE):
            fn()
        times.append((time.perf_counter() - t0) / PER_SAMPLE)
        sync()
    return [statistics.median(times) * 1e6, min(times) * 1e6]


def oxide_rows(device, samples):
    """The rows of this process's launch path (the extension unless
    OXIDE_PURE_PYTHON=1)."""
    import oxide

    dev = oxide.device(device)
    k = oxide.compile(SAXPY, device=dev).saxpy
    sync = dev.synchronize
    fast = oxide._ext.FAST is not None
    path = "extension" if fast else "pure ctypes"
    x, y, out = (oxide.zeros(N, device=dev) for _ in range(3))
    rows = {}
    if fast:
        def c_loop():
            t = k._bench(PER_SAMPLE, x, y, out, 2.0, grid=1, block=N)
            sync()
            return t / PER_SAMPLE * 1e6
        c_loop()
        times = [c_loop() for _ in range(samples)]
        rows["ox_launch from C"] = [statistics.median(times), min(times)]
    rows[f"oxide {path}: oxide.Tensor x3, float"] = median_us(
        lambda: k(x, y, out, 2.0, grid=1, block=N), sync, samples)
    alpha = oxide.f32(2.0)
    rows[f"oxide {path}: oxide.Tensor x3, oxide.f32"] = median_us(
        lambda: k(x, y, out, alpha, grid=1, block=N), sync, samples)
    rows[f"oxide {path}: by name"] = median_us(
        lambda: k(x=x, y=y, out=out, alpha=2.0, grid=1, block=N), sync, samples)
    m = k.module
    rows[f"oxide {path}: mod.saxpy(...) each time"] = median_us(
        lambda: m.saxpy(x, y, out, 2.0, grid=1, block=N), sync, samples)
    if device == "cpu":
        try:
            import numpy as np
            a, b, c = (np.zeros(N, np.float32) for _ in range(3))
            rows[f"oxide {path}: numpy arrays x3"] = median_us(
                lambda: k(a, b, c, 2.0, grid=1, block=N), sync, samples)
        except ImportError:
            pass
    try:
        import torch
        tdev = "cpu" if device == "cpu" else f"cuda:{dev.index}"
        a, b, c = (torch.zeros(N, device=tdev) for _ in range(3))
        api = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
        rows[f"oxide {path}: torch tensors x3{' (C exchange API)' if fast and api else ''}"] = \
            median_us(lambda: k(a, b, c, 2.0, grid=1, block=N), sync, samples)
        if device == "cuda":  # on torch's current stream, a side stream here
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                rows[f"oxide {path}: torch tensors x3, on a torch side stream"] = median_us(
                    lambda: k(a, b, c, 2.0, grid=1, block=N), side.synchronize, samples)
    except ImportError:
        pass
    return rows


def import_rows(samples=10):
    """Milliseconds of `import oxide` in a fresh interpreter (the median of
    `samples`): alone (NumPy's import included), and with NumPy (and torch,
    where installed) already imported, as in a PyTorch program."""
    def run(pre):
        code = (f"import time\n{pre}\nt = time.perf_counter()\nimport oxide\n"
                "print(time.perf_counter() - t)")
        ts = [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                   text=True).stdout.split()[-1]) for _ in range(samples)]
        return [statistics.median(ts) * 1e3, min(ts) * 1e3]
    rows = {"import oxide (ms)": run("")}
    rows["import oxide after import numpy (ms)"] = run("import numpy")
    try:
        import torch  # noqa: F401
        rows["import oxide after import torch (ms)"] = run("import torch")
    except ImportError:
        pass
    return rows


def peer_rows(samples):
    """Other libraries' launches of the same work on the GPU."""
    rows = {}
    try:
        import torch
    except ImportError:
        return rows
    sync = torch.cuda.synchronize
    a, b, c = (torch.zeros(N, device="cuda") for _ in range(3))
    rows["torch.add(a, b, out=c)"] = median_us(lambda: torch.add(a, b, out=c), sync, samples)
    try:
        import cupy
        k = cupy.RawKernel(r'''
        extern "C" __global__ void saxpy(const float* x, const float* y, float* out, float alpha) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < 256) out[i] = alpha * x[i] + y[i];
        }''', "saxpy")
        ca, cb, cc = (cupy.zeros(N, cupy.float32) for _ in range(3))
        alpha = cupy.float32(2.0)
        rows["cupy RawKernel"] = median_us(lambda: k((1,), (N,), (ca, cb, cc, alpha)),
                                           cupy.cuda.Device().synchronize, samples)
    except Exception as e:  # reported, never hidden
        rows["cupy RawKernel"] = f"failed: {type(e).__name__}: {e}"
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def saxpy_kernel(x, y, out, alpha, n, BLOCK: tl.constexpr):
            off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = off < n
            tl.store(out + off, alpha * tl.load(x + off, mask=m) + tl.load(y + off, mask=m), mask=m)

        rows["triton"] = median_us(lambda: saxpy_kernel[(1,)](a, b, c, 2.0, N, BLOCK=N), sync,
                                   samples)
    except Exception as e:
        rows["triton"] = f"failed: {type(e).__name__}: {e}"
    try:
        import numpy
        if not hasattr(numpy, "row_stack"):  # numba-cuda 0.30 still imports it (NumPy 2.x dropped it)
            numpy.row_stack = numpy.vstack
        from numba import cuda as ncuda

        @ncuda.jit
        def saxpy_numba(x, y, out, alpha):
            i = ncuda.grid(1)
            if i < out.size:
                out[i] = alpha * x[i] + y[i]

        na, nb, nc = (ncuda.as_cuda_array(t) for t in (a, b, c))
        f = saxpy_numba[1, N]
        rows["numba-cuda"] = median_us(lambda: f(na, nb, nc, 2.0), sync, samples)
    except Exception as e:
        rows["numba-cuda"] = f"failed: {type(e).__name__}: {e}"
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu or cuda (default: a GPU if there is one)")
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    import oxide

    device = args.device or ("cuda" if oxide.device_count("cuda") else "cpu")
    if args.child:  # the pure path's rows, for the parent
        print(json.dumps(oxide_rows(device, args.samples)))
        return
    rows = oxide_rows(device, args.samples)
    env = dict(os.environ, OXIDE_PURE_PYTHON="1")
    child = subprocess.run([sys.executable, __file__, "--child", "--device", device,
                            "--samples", str(args.samples)], env=env, capture_output=True,
                           text=True)
    if child.returncode:
        rows["oxide pure ctypes"] = f"failed: {child.stderr.strip().splitlines()[-1:]}"
    else:
        rows.update(json.loads(child.stdout.strip().splitlines()[-1]))
    if device == "cuda":
        rows.update(peer_rows(args.samples))
    imports = import_rows()
    name = oxide.device(device).name
    ref = rows.get("ox_launch from C")
    print(f"\nhost time per launch, saxpy on {N} f32 (3 tensors + 1 scalar), on {name}, "
          f"{oxide.launch_path()}\n(us per launch: median and best of {args.samples} samples "
          f"of {PER_SAMPLE})")
    print(f"  {'':58s} {'median':>8s} {'best':>8s}")
    for k, v in rows.items():
        if isinstance(v, str):
            print(f"  {k:58s} {v}")
            continue
        ratio = f"{v[0] / ref[0]:6.2f} x C" if isinstance(ref, list) else ""
        print(f"  {k:58s} {v[0]:8.2f} {v[1]:8.2f}  {ratio}")
    for k, v in imports.items():
        print(f"  {k:58s} {v[0]:8.2f} {v[1]:8.2f}")
    rows.update(imports)
    results = {"device": name, "python": sys.version.split()[0], "launch_path": oxide.launch_path(),
               "rows": [{"bench": "python_launch", "impl": k,
                         **({"error": v} if isinstance(v, str) else
                            {"median_ms": v[0], "best_ms": v[1]} if k.endswith("(ms)") else
                            {"median_us": v[0], "best_us": v[1]})} for k, v in rows.items()]}
    path = (os.path.join(os.environ["OUT"], "python_launch.json") if os.environ.get("OUT")
            else os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_launch.json"))
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
