#!/usr/bin/env python3
"""SIMT kernels with barriers and warp shuffles on the CPU backend, beside a
plain vecadd and NumPy's add in the same run (issue 31): ns an element, the
median of 5 launches after a warm-up, 2^20 f32 elements in blocks of 256.

  python3 bench/cpu_barriers.py [LIBOXIDE ...]

With paths to several liboxide.so builds, each is timed in a subprocess of
its own (OXIDE_LIBRARY), the rows side by side: a before/after comparison."""
from libs import median_s, run  # bench/libs.py, beside this script

SRC = """
#[kernel]
fn vecadd(x: &[f32], y: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) { *o = x[i] + 1.0; }
}
// a block reverse through shared memory: one barrier
#[kernel]
fn reverse(x: &[f32], y: DisjointSlice<f32>) {
    let mut s = SharedArray::<f32, 256>::new();
    let t = thread::thread_idx_x() as usize;
    let i = thread::index_1d();
    s[t] = x[i.get()];
    sync_threads();
    if let Some(o) = y.get_mut(i) { *o = s[255 - t]; }
}
// a warp sum: five shuffles
#[kernel]
fn warp_sum(x: &[f32], y: DisjointSlice<f32>) {
    let i = thread::index_1d();
    let mut v = x[i.get()];
    v += warp::shuffle_xor(v, 16);
    v += warp::shuffle_xor(v, 8);
    v += warp::shuffle_xor(v, 4);
    v += warp::shuffle_xor(v, 2);
    v += warp::shuffle_xor(v, 1);
    if let Some(o) = y.get_mut(i) { *o = v; }
}
"""
N = 1 << 20


def measure():
    import numpy as np
    import oxide
    dev = oxide.device("cpu")
    m = oxide.compile(SRC, dev)
    xs = np.arange(N, dtype=np.float32)
    x, y = oxide.tensor(xs), oxide.empty((N,))
    rows = {}
    for name in ("vecadd", "reverse", "warp_sum"):
        rows[name] = median_s(lambda: (m[name](x, y, grid=N // 256, block=256), dev.synchronize())) / N * 1e9
    out = np.empty_like(xs)
    rows["numpy add"] = median_s(lambda: np.add(xs, 1.0, out=out)) / N * 1e9
    return rows


if __name__ == "__main__":
    run(__file__, measure, "ns an element")
