"""Dtype-generic kernels (`<T: Float>`, `<T: Int>`, `<T: Num>`): one source,
specialized at launch for the dtypes of its tensors, SIMT and tile kernels,
checked against float64 on the CPU (and on the GPU with --gpu)."""
import numpy as np
import pytest

import oxide

SAXPY = """\
fn twice<T: Float>(v: T) -> T { v * (2.0 as T) }

#[kernel]
fn saxpy<T: Float>(x: &[T], y: &[T], out: DisjointSlice<T>, a: T) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) { *o = twice(a) * x[i] + y[i]; }
}
"""

FLOATS = ["f16", "bf16", "f32", "f64"]
# how far each dtype's rounding may move a result of magnitude ~1
TOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 1e-6, "f64": 1e-14}


def _rounded(values, dtype, dev):
    """values as an Oxide tensor of dtype, and those values read back (float64)"""
    t = oxide.tensor(values.astype(np.float32) if dtype != "f64" else values, dtype=dtype, device=dev)
    return t, np.array(t.tolist(), dtype=np.float64)


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_simt_source_every_float_dtype(dev, dtype):
    n = 1000  # not a multiple of the block
    rng = np.random.default_rng(1)
    x, xv = _rounded(rng.standard_normal(n), dtype, dev)
    y, yv = _rounded(rng.standard_normal(n), dtype, dev)
    out = oxide.empty((n,), dtype=dtype, device=dev)
    k = oxide.compile(SAXPY, device=dev).saxpy
    k(x, y, out, 0.75, grid=(n + 255) // 256, block=256)
    got = np.array(out.tolist(), dtype=np.float64)
    want = 1.5 * xv + yv
    assert out.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


def test_signature_names_the_generic():
    k = oxide.compile(SAXPY).saxpy
    assert [(p.name, p.generic) for p in k.params] == [("x", "T"), ("y", "T"), ("out", "T"), ("a", "T")]
    # numbers for a Float generic's scalar pass as f64; the launch converts them
    assert k.params[3].dtype == "f64"


def test_dtypes_must_agree_and_fit_the_bound():
    k = oxide.compile(SAXPY).saxpy
    x = np.ones(8, np.float32)
    with pytest.raises(oxide.InvalidArgumentError,
                       match=r"type generic 'T' is f32 from argument 1 \('x'\) and f16 from argument 2 \('y'\)"):
        k(x, np.ones(8, np.float16), np.zeros(8, np.float32), 1.0, grid=1, block=8)
    with pytest.raises(oxide.InvalidArgumentError,
                       match=r"argument 1 \('x'\): a tensor of i32, which 'T: Float' does not admit"):
        k(np.ones(8, np.int32), np.ones(8, np.int32), np.zeros(8, np.int32), 1.0, grid=1, block=8)
    with pytest.raises(oxide.InvalidArgumentError, match=r"70000 is out of range for f16"):
        k(np.ones(8, np.float16), np.ones(8, np.float16), np.zeros(8, np.float16), 70000.0, grid=1, block=8)


CLAMP = """\
#[kernel]
fn clamp_add<T: Int>(x: &[T], out: DisjointSlice<T>, lo: T, hi: T, d: T) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        let v = x[i] + d;
        *o = if v < lo { lo } else if v > hi { hi } else { v };
    }
}
"""


@pytest.mark.parametrize("dtype", ["i8", "u8", "i32", "u32", "i64"])
def test_int_generic(dev, dtype):
    n = 300
    x = np.arange(n) % 100
    xt = oxide.tensor(x.astype(np.int64), dtype=dtype, device=dev)
    out = oxide.empty((n,), dtype=dtype, device=dev)
    oxide.compile(CLAMP, device=dev).clamp_add(xt, out, 10, 90, 3, grid=2, block=256)
    assert out.tolist() == np.clip(x + 3, 10, 90).tolist()


def test_int_generic_scalars_are_checked():
    k = oxide.compile(CLAMP).clamp_add
    x = np.zeros(4, np.uint8)
    with pytest.raises(oxide.InvalidArgumentError, match=r"argument 5 \('d'\): 300 is out of range for u8"):
        k(x, np.zeros(4, np.uint8), 0, 10, 300, grid=1, block=4)
    with pytest.raises(oxide.InvalidArgumentError, match=r"argument 4 \('hi'\): -1 is out of range for u8"):
        k(x, np.zeros(4, np.uint8), 0, -1, 3, grid=1, block=4)


NUM = """\
#[kernel]
fn square<T: Num>(x: &[T], y: DisjointSlice<T>, c: T) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) { *o = x[i] * x[i] + c; }
}
"""


def test_num_generic_ints_and_floats():
    k = oxide.compile(NUM).square
    for dt in (np.int16, np.float32, np.float64, np.uint64):
        x = np.arange(7, dtype=dt)
        y = np.zeros(7, dtype=dt)
        k(x, y, 2, grid=1, block=8)
        assert y.tolist() == (x * x + 2).tolist()
    with pytest.raises(oxide.InvalidArgumentError, match=r"2.5 is not an integer, which type generic 'T' \(here i16\) needs"):
        k(np.arange(7, dtype=np.int16), np.zeros(7, np.int16), 2.5, grid=1, block=8)


AXPY_TILE = """\
#[tile]
fn axpy<T: Float, const B: i32>(y: &mut Tensor<T, [B]>, x: &Tensor<T, [-1]>, z: &Tensor<T, [-1]>, a: T) {
    let t = x.partition([B]).load([tile_id(0)]);
    let u = z.partition([B]).load([tile_id(0)]);
    y.store(t * a + u);
}
"""


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_tile_source_every_float_dtype(dev, dtype):
    n = 1000
    rng = np.random.default_rng(3)
    x, xv = _rounded(rng.standard_normal(n), dtype, dev)
    z, zv = _rounded(rng.standard_normal(n), dtype, dev)
    y = oxide.empty((n,), dtype=dtype, device=dev)
    k = oxide.compile(AXPY_TILE, device=dev).axpy
    k(y.partition(128), x, z, -0.5)
    got = np.array(y.tolist(), dtype=np.float64)
    np.testing.assert_allclose(got, -0.5 * xv + zv, rtol=TOL[dtype], atol=TOL[dtype])


MATMUL = """\
#[tile]
fn mm<T: Float, const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<T, [-1, -1]>, b: &Tensor<T, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..pa.num_tiles(1) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_generic_tile_matmul(dev, dtype):
    M, N, K = 100, 70, 90
    rng = np.random.default_rng(4)
    a, av = _rounded(rng.standard_normal((M, K)), dtype, dev)
    b, bv = _rounded(rng.standard_normal((K, N)), dtype, dev)
    c = oxide.full((M, N), float("nan"), device=dev)
    k = oxide.compile(MATMUL, device=dev).mm
    k.set_generic("BK", 32)
    k(c.partition((64, 32)), a, b)
    want = av @ bv
    mag = np.abs(av) @ np.abs(bv)
    assert (np.abs(c.numpy() - want) <= 1e-5 * mag + 1e-6).all()


def test_type_generic_is_not_a_const_generic():
    k = oxide.compile(MATMUL).mm
    with pytest.raises(oxide.InvalidArgumentError, match="'T' is a type generic, which a launch binds"):
        k.set_generic("T", 2)


@pytest.mark.parametrize("src, message", [
    ("#[kernel]\nfn k<T>(x: &[T], y: DisjointSlice<T>) { }\n",
     "give type generic 'T' a bound: 'T: Float', 'T: Int' or 'T: Num'"),
    ("#[kernel]\nfn k<T: Real>(x: &[T], y: DisjointSlice<T>) { }\n",
     "a type generic's bound is Float (f16, bf16, f32, f64), Int (i8 to u64) or Num (either); found 'Real'"),
    ("#[kernel]\nfn k<T: Float>(y: DisjointSlice<f32>, a: T) { }\n",
     "type generic 'T' must be the element type of a slice parameter: the launch takes it from "
     "that argument's dtype"),
    ("#[kernel]\nfn k<const B: i32>(y: DisjointSlice<f32>) { }\n",
     "const generics are for #[tile] kernels; a SIMT function takes type generics only, written "
     "'<T: Float>'"),
    ("#[kernel]\nfn k<T: Float, T: Int>(x: &[T], y: DisjointSlice<T>) { }\n", "generic 'T' appears twice"),
    ("fn f<T: Float>(a: f32) -> f32 { a }\n#[kernel]\nfn k(y: DisjointSlice<f32>) { }\n",
     "type generic 'T' must be the type of a parameter: each call takes it from that argument"),
    ("fn f<T: Float>(a: T) -> T { a }\n#[kernel]\nfn k(y: DisjointSlice<f32>) {\n"
     "    let i = thread::index_1d();\n    if let Some(o) = y.get_mut(i) { *o = f(3i32) as f32; }\n}\n",
     "argument 'a' of 'f' is i32, which 'T: Float' does not admit"),
    ("#[tile]\nfn k<T: Float>(y: &mut Tensor<f32, [T]>) { }\n",
     "'T' is a type generic; a tensor dim is an integer, -1 or a const generic"),
])
def test_errors(src, message):
    with pytest.raises(oxide.CompileError) as e:
        oxide.compile(src)
    assert message in str(e.value)


def test_generic_device_function_inferred_per_call(dev):
    src = """\
fn sq<T: Num>(v: T) -> T { v * v }

#[kernel]
fn k(x: &[f32], n: &[i32], y: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) { *o = sq(x[i]) + sq(n[i]) as f32; }
}
"""
    x = np.array([1.5, -2.0, 3.0], np.float32)
    n = np.array([2, 3, -4], np.int32)
    y = oxide.empty((3,), device=dev)
    oxide.compile(src, device=dev).k(oxide.tensor(x, device=dev), oxide.tensor(n, device=dev), y,
                                     grid=1, block=4)
    assert y.numpy().tolist() == (x * x + n * n).tolist()
