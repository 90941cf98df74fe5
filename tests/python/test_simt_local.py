"""SIMT kernels as people write them (docs/language.md sections 3, 4 and 6):
a thread's own arrays (`[0.0f32; 8]`), literals that take their type from
later use, and a thread that owns a row or a contiguous chunk of an output
(thread::index_chunk). Checked against NumPy on the CPU, and on the GPU with
--gpu."""
import numpy as np
import pytest

import oxide

HISTO = """\
#[kernel]
fn local_histogram(x: &[u32], out: DisjointSlice<u32>, per_thread: usize) {
    // each thread counts 8 bins of its own chunk of x, then writes its 8 counts
    let c = thread::index_chunk(8);
    let mut bins = [0u32; 8];
    let first = thread::index_1d().get() * per_thread;
    for k in 0..per_thread {
        let e = first + k;
        if e < x.len() { bins[(x[e] % 8) as usize] += 1; }
    }
    for b in 0..8 {
        if let Some(o) = out.get_mut(c.at(b)) { *o = bins[b]; }
    }
}
"""


def test_thread_array_and_chunk_writes(dev):
    threads, per = 37, 11
    x = np.random.default_rng(1).integers(0, 1000, threads * per - 5).astype(np.uint32)
    out = oxide.full((threads * 8,), 7, dtype="u32", device=dev)
    oxide.compile(HISTO, device=dev).local_histogram(oxide.tensor(x, device=dev), out, per,
                                                     grid=2, block=32)
    want = np.zeros((64, 8), np.uint32)
    for t in range(threads):
        chunk = x[t * per:(t + 1) * per]
        want[t] = np.bincount(chunk % 8, minlength=8)
    got = out.numpy().reshape(threads, 8)
    assert (got == want[:threads]).all()


ROWS = """\
#[kernel]
fn normalize_rows(x: &[f32], y: DisjointSlice<f32>, width: usize) {
    // one thread a row: the row's maximum, then the row divided by it
    let r = thread::index_chunk(width);
    let mut m = 0.0;
    for j in 0..width {
        let k = r.get() + j;
        if k < x.len() && x[k] > m { m = x[k]; }
    }
    for j in 0..width {
        if let Some(o) = y.get_mut(r.at(j)) { *o = x[r.get() + j] / m; }
    }
}
"""


def test_thread_owns_a_row(dev):
    rows, width = 45, 13
    x = np.random.default_rng(2).random((rows, width)).astype(np.float32) + 0.5
    y = oxide.zeros((rows * width,), device=dev)
    oxide.compile(ROWS, device=dev).normalize_rows(oxide.tensor(x.ravel(), device=dev), y, width,
                                                   grid=2, block=32)  # 64 threads: 19 with no row
    np.testing.assert_allclose(y.numpy().reshape(rows, width), x / x.max(axis=1, keepdims=True), rtol=1e-6)


def test_at_past_the_chunk_writes_nothing(dev):
    src = """\
#[kernel]
fn k(y: DisjointSlice<u32>, n: usize) {
    let c = thread::index_chunk(n);
    for j in 0..n + 3 {
        if let Some(o) = y.get_mut(c.at(j)) { *o = thread::index_1d().get() as u32; }
    }
}
"""
    y = oxide.full((20,), 99, dtype="u32", device=dev)
    oxide.compile(src, device=dev).k(y, 3, grid=1, block=8)  # threads 0..5 own 3 each, 6 owns 18..20
    want = [t // 3 for t in range(20)]
    assert y.numpy().tolist() == want
    z = oxide.full((5,), 99, dtype="u32", device=dev)
    oxide.compile(src, device=dev).k(z, 0, grid=1, block=8)  # a chunk of 0: nothing is anyone's
    assert z.numpy().tolist() == [99] * 5


INFER = """\
#[kernel]
fn k(x: &[f32], out: DisjointSlice<f32>) {
    let i = thread::index_1d();
    let off = 16;               // a u32: a shuffle's lane
    let j = 0;                  // a usize: an index
    let mut acc = [0.0; 4];     // f32s: the elements take x's values
    for q in 0..4 { acc[q] = x[j + q]; }
    let mut s = 0.0;            // an f32: added to an f32
    for q in 0..4 { s += acc[q]; }
    let v = warp::shuffle_down(s, off);
    if let Some(o) = out.get_mut(i) { *o = s + v * 0.0; }
}
"""


def test_literals_take_their_type_from_later_use(dev):
    x = np.arange(8, dtype=np.float32)
    out = oxide.zeros((32,), device=dev)
    oxide.compile(INFER, device=dev).k(oxide.tensor(x, device=dev), out, grid=1, block=32)
    assert out.numpy().tolist() == [6.0] * 32


@pytest.mark.parametrize("src, message", [
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let a = [1.0f32; 4];\n    a[0] = 2.0;\n}\n",
     "'a' is not mutable; declare it 'let mut a = [..]'"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let a = [1.0f32; 5000];\n}\n",
     "a thread's array holds 1 to 4096 elements, found 5000"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>, n: usize) {\n    let a = [1.0f32; n];\n}\n",
     "the length of '[v; n]' is an integer literal (a usize)"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let a = [1.0f32, 2i32];\n}\n",
     "array elements have one type: the first is f32, this one i32"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let a: [f32; 3] = [1.0f32; 4];\n}\n",
     "expected [f32; 3], found [f32; 4]"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let a = [0.0f64; 2048];\n    let b = [0.0f64; 2048];\n}\n",
     "kernel 'k' keeps more than 16384 bytes in its threads' own arrays (this one: 16384); use a "
     "SharedArray, or smaller arrays"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    let c = thread::index_chunk(thread::thread_idx_x() as usize);\n}\n",
     "the length of thread::index_chunk must be the same in every thread and everywhere in the kernel"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>, n: usize) {\n    let c = thread::index_chunk(n);\n"
     "    let d = thread::index_chunk(n + 1);\n"
     "    if let Some(o) = y.get_mut(c.at(0)) { *o = 1.0; }\n    if let Some(o) = y.get_mut(d.at(0)) { *o = 1.0; }\n}\n",
     "'y' is written through thread::index_chunk() witnesses of two lengths"),
    ("#[kernel]\nfn k(y: DisjointSlice<f32>, n: usize) {\n    let c = thread::index_chunk(n);\n"
     "    if let Some(o) = y.get_mut(c.at(0)) { *o = 1.0; }\n"
     "    if let Some(o) = y.get_mut(thread::index_1d()) { *o = 1.0; }\n}\n",
     "'y' is written through a thread::index_1d() witness here and through a thread::index_chunk() "
     "witness on line 4"),
])
def test_errors(src, message):
    with pytest.raises(oxide.CompileError) as e:
        oxide.compile(src)
    assert message in str(e.value)


TUPLES = """\
fn minmax(a: f32, b: f32) -> (f32, f32) {
    if a < b { return (a, b); }
    (b, a)
}

fn divmod<T: Int>(a: T, b: T) -> (T, T) { (a / b, a % b) }

#[kernel]
fn k(x: &[f32], y: DisjointSlice<f32>, n: &[u32]) {
    let i = thread::index_1d();
    let (lo, hi) = minmax(x[i], 2.0);
    let t = (lo, hi * 2.0);
    let (q, mut r) = divmod(n[i], 7u32);
    r += q;
    let (_, b) = t;
    if let Some(o) = y.get_mut(i) { *o = t.0 + b + r as f32; }
}
"""


def test_tuples(dev):
    x = np.array([1, 3, -2, 5, 2], np.float32)
    n = np.array([20, 7, 3, 100, 0], np.uint32)
    y = oxide.zeros((5,), device=dev)
    oxide.compile(TUPLES, device=dev).k(oxide.tensor(x, device=dev), y, oxide.tensor(n, device=dev),
                                       grid=1, block=5)  # (x[i] is read for every thread)
    want = np.minimum(x, 2) + 2 * np.maximum(x, 2) + (n % 7 + n // 7)
    assert y.numpy().tolist() == want.tolist()


@pytest.mark.parametrize("body, message", [
    ("let t = (1.0f32, 2.0f32); let a = t.2;", "the tuple has 2 values (.0 to .1), not .2"),
    ("let a = 1.0f32; let b = a.0;", "'.0' takes a value of a tuple; this is"),
    ("let (a, b) = (1, 2, 3);", "the pattern names 2 values, and the tuple has 3"),
    ("let mut t = (1, 2);", "a tuple cannot be mutable; take its values apart: 'let (mut a, b) = ...'"),
    ("let (a, b) = 1.0f32;", "'let (..) = ' takes a tuple, found"),
])
def test_tuple_errors(body, message):
    with pytest.raises(oxide.CompileError) as e:
        oxide.compile("#[kernel]\nfn k(y: DisjointSlice<f32>) {\n    " + body + "\n}\n")
    assert message in str(e.value)


def test_tuple_results_must_match():
    src = "fn f(a: f32) -> (f32, u32) { (a, a) }\n#[kernel]\nfn k(x: &[f32], y: DisjointSlice<f32>) {\n" \
          "    let i = thread::index_1d();\n    let (p, q) = f(x[i]);\n}\n"
    with pytest.raises(oxide.CompileError, match=r"value 1 of the tuple 'f' returns is u32, found f32"):
        oxide.compile(src)
