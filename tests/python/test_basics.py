"""Devices, tensors and launches through the Python binding."""
import array
import gc
import os
import weakref

import pytest

import oxide
from kernels import SAXPY, VECADD


def test_version_and_doctor():
    assert oxide.version().startswith("0.")
    report = oxide.doctor()
    assert "cpu" in report and "cache" in report


def test_cpu_device():
    d = oxide.device("cpu")
    assert d is oxide.device("cpu")  # one object per device
    assert (d.type, str(d), d.compute_capability) == ("cpu", "cpu", None)
    assert "CPU" in d.name
    assert d.default_stream is d.default_stream
    assert oxide.device_count("cpu") == 1
    with pytest.raises(ValueError):
        oxide.device("tpu")


def test_default_device():
    d = oxide.default_device()
    if "OXIDE_DEVICE" not in os.environ:
        assert d.type == ("cuda" if oxide.device_count("cuda") else "cpu")


def test_vecadd(dev):
    n = 1000  # not a multiple of the block: the tail threads write nothing
    a = oxide.tensor([float(i) for i in range(n)], device=dev)
    b = oxide.tensor([0.5 * i for i in range(n)], device=dev)
    c = oxide.tensor([-1.0] * n, device=dev)
    k = oxide.compile(VECADD, device=dev, filename="vecadd.oxk")["vecadd"]
    assert (k.name, k.num_params) == ("vecadd", 3)
    k(a, b, c, grid=((n + 255) // 256,), block=(256,))
    dev.default_stream.synchronize()
    assert c.tolist() == [1.5 * i for i in range(n)]


def test_saxpy_on_a_stream(dev):
    n = 300
    x = oxide.tensor(array.array("f", range(n)), device=dev)  # a buffer: keeps its f32 type
    y = oxide.tensor([1.0] * n, device=dev)
    out = oxide.empty(n, "f32", dev)
    s = dev.stream()
    oxide.compile(SAXPY, device=dev).saxpy(x, y, out, oxide.f32(2.0), grid=2, block=256, stream=s)
    s.synchronize()
    assert out.tolist(stream=s) == [2.0 * i + 1.0 for i in range(n)]


def test_many_scalar_dtypes(dev):
    src = """\
#[kernel]
fn mix(out: DisjointSlice<f64>, a: i32, b: u64, c: f64, d: bool, e: i8, f: u16, g: f32) {
    let i = thread::index_1d();
    let mut x = (a as f64) + (b as f64) + c + (e as f64) + (f as f64) + (g as f64);
    if d {
        x = x * 2.0;
    }
    if let Some(o) = out.get_mut(i) {
        *o = x;
    }
}
"""
    out = oxide.empty(4, oxide.f64, dev)
    oxide.compile(src, device=dev).mix(
        out, oxide.i32(-3), oxide.u64(1 << 40), oxide.f64(0.25), oxide.bool_(True), oxide.i8(-1),
        oxide.u16(65535), oxide.f32(0.5), grid=1, block=4)
    assert out.tolist() == [2 * (-3 + 2**40 + 0.25 - 1 + 65535 + 0.5)] * 4


ROUND_TRIP = {
    "bool": [True, False, True],
    "i8": [-128, 0, 127], "i16": [-32768, 7, 32767], "i32": [-2**31, 5, 2**31 - 1],
    "i64": [-2**63, 9, 2**63 - 1], "u8": [0, 200, 255], "u16": [0, 65535, 3],
    "u32": [0, 2**32 - 1, 4], "u64": [0, 2**64 - 1, 6],
    "f16": [1.5, -0.25, 65504.0], "bf16": [1.5, -2.0, 256.0],
    "f32": [1.5, -1e-3, 3.25], "f64": [1.5, -1e-300, 1e300],
}


def test_fp8_storage(dev):
    # fp8 dtypes are storage-only (DLPack exchange, copies): no Python scalars
    for dtype in ("f8e4m3", "f8e5m2"):
        t = oxide.empty((4, 3), dtype, device=dev)
        assert (t.shape, t.dtype, t.nbytes) == ((4, 3), dtype, 12)


def test_tf32_refused(dev):
    # tf32 is a compute type of kernels (casts, dot operands): tensors hold f32
    assert "tf32" in oxide.DTYPES
    for make in (lambda: oxide.empty((4,), "tf32", device=dev),
                 lambda: oxide.zeros((4,), "tf32", device=dev),
                 lambda: oxide.tensor([1.0, 2.0], dtype="tf32", device=dev)):
        with pytest.raises(oxide.InvalidArgumentError, match="tf32 is a compute type of kernels"):
            make()


@pytest.mark.parametrize("dtype", [d for d in oxide.DTYPES if d in ROUND_TRIP])
def test_dtype_round_trip(dev, dtype):
    values = ROUND_TRIP[dtype]
    if dtype == "f32":
        values = [float(array.array("f", [v])[0]) for v in values]  # exactly representable
    t = oxide.tensor([values, values], dtype=dtype, device=dev)
    assert (t.shape, t.dtype, t.device, t.ndim, len(t)) == ((2, 3), dtype, dev, 2, 2)
    assert t.nbytes == 6 * {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2,
                            "bf16": 2}.get(dtype, 8 if dtype[1:] == "64" else 4)
    assert t.tolist() == [values, values]


def test_tensor_shapes_and_conversions(dev):
    assert oxide.tensor(2.5, device=dev).tolist() == 2.5  # 0-d
    assert oxide.tensor([], device=dev).shape == (0,)
    assert oxide.empty((2, 3, 4), "i16", dev).shape == (2, 3, 4)
    raw = oxide.tensor(b"\x01\x00\x00\x00\x02\x00\x00\x00", dtype="i32", device=dev)
    assert raw.tolist() == [1, 2]  # raw bytes are reinterpreted when a dtype is given
    assert oxide.tensor(b"\x01\x02", device=dev).dtype == "u8"
    t = oxide.tensor([1, 2, 3], dtype="i64", device=dev)
    t.copy_from([4, 5, 6])
    assert t.tolist() == [4, 5, 6]
    with pytest.raises(ValueError):
        oxide.tensor([[1.0, 2.0], [3.0]], device=dev)  # ragged
    with pytest.raises(TypeError):
        oxide.tensor(array.array("d", [1.0]), dtype="f32", device=dev)  # no implicit conversion
    with pytest.raises(OverflowError):
        oxide.tensor([300], dtype="u8", device=dev)
    with pytest.raises(TypeError):
        oxide.tensor([1.5], dtype="i32", device=dev)
    with pytest.raises(ValueError):
        oxide.empty(3, "f128", dev)


def test_scalar_wrappers():
    assert oxide.f32(2).value == 2.0 and oxide.u64(2**64 - 1).value == 2**64 - 1
    assert repr(oxide.i32(3)) == "oxide.i32(3)" and oxide.i32(3) == oxide.i32(3)
    with pytest.raises(OverflowError):
        oxide.i8(128)
    with pytest.raises(OverflowError):
        oxide.u32(-1)
    with pytest.raises(TypeError):
        oxide.i32(1.5)
    with pytest.raises(TypeError):
        oxide.bool_(2)


def test_numpy_round_trip(dev):
    np = pytest.importorskip("numpy")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = oxide.from_numpy(a.T, device=dev)  # any layout: copied contiguous
    assert t.shape == (4, 3) and t.dtype == "f32"
    assert (t.numpy() == a.T).all()
    for dt in ("bool", "int8", "uint16", "int64", "float16", "float64"):
        b = np.ones(5, dtype=dt)
        assert (oxide.tensor(b, device=dev).numpy() == b).all()
    out = oxide.empty(12, "f32", dev)
    k = oxide.compile(SAXPY, device=dev).saxpy
    x = oxide.from_numpy(a.ravel(), dev)
    k(x, x, out, np.float32(3.0), grid=1, block=256)  # a numpy scalar carries its dtype
    assert (out.numpy() == 4 * a.ravel()).all()


def test_kernel_keeps_module_alive(dev):
    k = oxide.compile(VECADD, device=dev).vecadd
    module = weakref.ref(k.module)
    gc.collect()
    assert module() is not None
    a = oxide.tensor([1.0, 2.0], device=dev)
    c = oxide.empty(2, device=dev)
    k(a, a, c, grid=1, block=256)
    assert c.tolist() == [2.0, 4.0]
    del k
    gc.collect()
    assert module() is None  # ... and only the kernel did


def test_tensor_keeps_nothing_alive(dev):
    t = oxide.tensor([1.0], device=dev)
    assert [r for r in gc.get_referents(t) if not isinstance(r, (int, type))] == []
    ref = weakref.ref(t)
    del t
    assert ref() is None  # released at once (refcounting), not at some later collection


def test_emit():
    assert ".entry vecadd" in oxide.emit(VECADD)
    assert ".target sm_80" in oxide.emit(VECADD, arch="sm_80")
    assert "vecadd" in oxide.emit(VECADD, kind="ir")
    assert "vecadd" in oxide.emit(VECADD, kind="asm")
    assert "define" in oxide.emit(VECADD, kind="llvm", target="cpu")
    with pytest.raises(ValueError):
        oxide.emit(VECADD, kind="sass")


MATMUL = """#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>,
        a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""


def test_emit_generics():
    # every generic at the placeholder 16: tiles too small for wgmma
    assert "wgmma" not in oxide.emit(MATMUL, arch="sm_90", contiguous=True)
    big = oxide.emit(MATMUL, arch="sm_90", contiguous=True, generics={"BM": 128, "BN": 128, "BK": 64})
    assert "wgmma.mma_async" in big and "cp.async" in big
    assert "mma.sync" in oxide.emit(MATMUL, arch="sm_80", generics={"BM": 64, "BN": 64, "BK": 32})
    with pytest.raises(oxide.InvalidArgumentError, match="generic 'BQ'"):
        oxide.emit(MATMUL, generics={"BQ": 16})
    with pytest.raises(oxide.CompileError, match=r"<input>:2:\d+: error: tile shapes are static powers of two"):
        oxide.emit(MATMUL, generics={"BM": 100})


@pytest.mark.gpu
def test_cuda_device():
    d = oxide.device("cuda")
    assert d is oxide.device("cuda:0") and d.type == "cuda" and str(d) == "cuda:0"
    assert d.compute_capability >= (8, 0)
    assert oxide.device_count("cuda") >= 1
