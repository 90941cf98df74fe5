#!/usr/bin/env python3
"""Elementwise bandwidth of the CPU backend (issue 31, items 2 and 3), beside
NumPy's `np.add(a, b, out=c)` in the same process: c = a + b over 2^26 f32
(768 MiB moved), GB/s counting 12 bytes an element, and the ratio to NumPy
timed alternately with it; the median of 5 runs after a warm-up.

Rows: a SIMT kernel one element a thread, bounds-checked and under a launch
contract (no checks), in blocks of 256 and 1024; a tile add; a SIMT
grid-stride loop over 64 x 256 threads.

  python3 bench/cpu_stream.py [LIBOXIDE ...]

With paths to several liboxide.so builds, each is timed in a subprocess of
its own (OXIDE_LIBRARY), the rows side by side: a before/after comparison."""
import time

from libs import run  # bench/libs.py, beside this script

SRC = """
#[kernel]
fn checked(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = c.get_mut(i) { *o = a[i] + b[i]; }
}

#[kernel]
#[launch_contract(requires = (a.len() >= c.len(), b.len() >= c.len()))]
fn contract(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = c.get_mut(i) { *o = a[i] + b[i]; }
}

#[kernel]
fn stride(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    for i in thread::grid_stride(c.len()) {
        if let Some(o) = c.get_mut(i) { *o = a[i] + b[i]; }
    }
}

#[tile]
fn tile_add<const B: i32>(c: &mut Tensor<f32, [B]>, a: &Tensor<f32, [-1]>, b: &Tensor<f32, [-1]>) {
    c.store(load_tile_like(a, c) + load_tile_like(b, c));
}
"""
N = 1 << 26


def measure():
    import numpy as np
    import oxide
    dev = oxide.device("cpu")
    m = oxide.compile(SRC, dev)
    m.tile_add.set_generic("B", 4096)
    a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    b = a * 0.5
    want = a + b
    c = np.empty_like(a)
    ta, tb, tc = oxide.tensor(a), oxide.tensor(b), oxide.empty(N)
    runs = {
        "SIMT, bounds-checked, blocks of 256": lambda: m.checked(ta, tb, tc, grid=N // 256, block=256),
        "SIMT, bounds-checked, blocks of 1024": lambda: m.checked(ta, tb, tc, grid=N // 1024, block=1024),
        "SIMT, launch contract, blocks of 256": lambda: m.contract(ta, tb, tc, grid=N // 256, block=256),
        "tile add, tiles of 4096": lambda: m.tile_add(tc.partition(4096), ta, tb),
        "SIMT grid-stride, 64 x 256 threads": lambda: m.stride(ta, tb, tc, grid=64, block=256),
    }
    out = {}
    for name, launch in runs.items():
        def ox():
            launch()
            dev.synchronize()
        tc.numpy()[:] = 0
        ox()
        assert np.array_equal(tc.numpy(), want), name
        t_ox, t_np = [], []
        for _ in range(6):
            t0 = time.perf_counter()
            ox()
            t_ox.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            np.add(a, b, out=c)
            t_np.append(time.perf_counter() - t0)
        o, n = sorted(t_ox[1:])[2], sorted(t_np[1:])[2]
        out[f"{name}: GB/s"] = 12 * N / o / 1e9
        out[f"{name}: / np.add"] = n / o
    out["np.add: GB/s"] = 12 * N / n / 1e9
    return out


if __name__ == "__main__":
    run(__file__, measure, "GB/s or ratio")
