#!/usr/bin/env python3
"""f32 transcendentals on the CPU backend (issue 31, item 4), beside NumPy (and
torch CPU when it is installed) in the same run: a tile row softmax of 4096 x
4096 (examples/tile_softmax.oxk) and elementwise exp, log, tanh and sin over 2^22
elements (SIMT, one element a thread): ms, the median of 5 runs after a warm-up.

  python3 bench/cpu_math.py [LIBOXIDE ...]

With paths to several liboxide.so builds, each is timed in a subprocess of
its own (OXIDE_LIBRARY), the rows side by side: a before/after comparison."""
import os

from libs import median_s, run  # bench/libs.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELEMENTWISE = "".join(f"""
#[kernel]
fn k_{f}(x: &[f32], y: DisjointSlice<f32>) {{
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) {{ *o = {f}(x[i]); }}
}}
""" for f in ("exp", "ln", "tanh", "sin"))
N = 1 << 22
R = C = 4096


def median_ms(fn):
    return median_s(fn) * 1e3


def measure():
    import numpy as np
    import oxide
    dev = oxide.device("cpu")
    rows = {}
    with open(os.path.join(ROOT, "examples", "tile_softmax.oxk")) as f:
        soft = oxide.compile(f.read(), dev).softmax
    soft.set_generic("BN", C)
    xs = np.random.default_rng(0).standard_normal((R, C)).astype(np.float32)
    x, y = oxide.tensor(xs), oxide.empty((R, C))

    def run_soft():
        soft(y.partition((1, C)), x)
        dev.synchronize()
    rows["softmax 4096^2 oxide"] = median_ms(run_soft)

    def np_soft():
        e = np.exp(xs - xs.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    assert np.allclose(y.numpy(), np_soft(), rtol=1e-5, atol=1e-7)
    rows["softmax 4096^2 numpy"] = median_ms(np_soft)
    try:
        import torch
        xt = torch.from_numpy(xs)
        rows["softmax 4096^2 torch"] = median_ms(lambda: torch.softmax(xt, dim=1))
    except ImportError:
        pass
    m = oxide.compile(ELEMENTWISE, dev)
    v = np.random.default_rng(1).uniform(0.1, 10, N).astype(np.float32)
    a, b = oxide.tensor(v), oxide.empty((N,))
    out = np.empty_like(v)
    for f, npf in (("exp", np.exp), ("ln", np.log), ("tanh", np.tanh), ("sin", np.sin)):
        k = m["k_" + f]

        def launch():
            k(a, b, grid=N // 256, block=256)
            dev.synchronize()
        rows[f"{f} 2^22 oxide"] = median_ms(launch)
        rows[f"{f} 2^22 numpy"] = median_ms(lambda: npf(v, out=out))
    return rows


if __name__ == "__main__":
    run(__file__, measure, "ms")
