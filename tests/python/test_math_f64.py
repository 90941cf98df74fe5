"""f64 exp, exp2, log and log2 on both targets against NumPy over the whole
range (subnormals, infinities, NaN included): libm's on the CPU, Oxide's own
on the GPU (which has no libm; core/backend/math.c), within 2 ulp. The CUDA
case is a GPU test."""
import numpy as np

import oxide

SRC = """
#[kernel]
fn f64_math(x: &[f64], e: DisjointSlice<f64>, l: DisjointSlice<f64>, e2: DisjointSlice<f64>, l2: DisjointSlice<f64>) {
    let i = thread::index_1d();
    if let Some(o) = e.get_mut(i) { *o = exp(x[i]); }
    if let Some(o) = l.get_mut(i) { *o = log(x[i]); }
    if let Some(o) = e2.get_mut(i) { *o = exp2(x[i]); }
    if let Some(o) = l2.get_mut(i) { *o = log2(x[i]); }
}
"""


def test_f64_exp_and_log_within_2_ulp(dev):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-50, 50, 20000), rng.uniform(-1100, 1100, 5000), 10.0 ** rng.uniform(-323, 308, 5000),
                        [0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 709.78, -745.1,
                         -1.0, 1024.0, -1074.0, -1075.0]])
    outs = [oxide.empty(x.shape, dtype="f64", device=dev) for _ in range(4)]
    oxide.compile(SRC, dev).f64_math(oxide.tensor(x, device=dev), *outs, grid=-(-x.size // 256), block=256)
    with np.errstate(all="ignore"):
        refs = [np.exp(x), np.log(x), np.exp2(x), np.log2(x)]
    for name, o, r in zip(["exp", "log", "exp2", "log2"], outs, refs):
        o = o.numpy()
        assert np.array_equal(np.isnan(o), np.isnan(r)), name
        inf = np.isinf(r)
        assert np.array_equal(o[inf], r[inf]), name
        fin = np.isfinite(r)
        ulp = np.abs(o[fin] - r[fin]) / np.spacing(np.abs(r[fin]))
        assert ulp.max() <= 2.0, (name, ulp.max(), x[fin][ulp.argmax()])
