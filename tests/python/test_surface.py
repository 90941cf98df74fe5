"""The Pythonic surface: NumPy's __array__, __cuda_array_interface__, item(),
*_like, dtype spellings, host reads that raise a pending BoundsError, DLPack
exports a consumer refuses (no leak), and the typing marker."""
import ctypes as C
import gc
import inspect
import os
import re
import struct

import pytest

import oxide
from oxide import _dlpack

from kernels import OOB, SAXPY, bounds_errors

np = pytest.importorskip("numpy")

CPU = oxide.device("cpu")

NP_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64"]


# ------------------------------------------------------------------ __array__


def test_asarray_views_cpu_memory():
    t = oxide.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=CPU)
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (2, 3) and a.ctypes.data == t.data_ptr
    a[0, 1] = 20
    assert t.tolist()[0][1] == 20  # one memory
    b = np.asarray(t.T)  # strided: still a view, with byte strides
    assert b.ctypes.data == t.data_ptr and b.strides == (4, 12) and b[1, 0] == 20
    s = np.asarray(t[:, ::2])
    assert s.tolist() == [[1, 3], [4, 6]] and s.strides == (12, 8)
    del t, b, s
    gc.collect()
    assert a.sum() == 39  # the array keeps the tensor alive
    r = np.asarray(oxide.tensor([1.0, 2.0], device=CPU).broadcast_to((3, 2)))
    assert r.strides == (0, 4) and not r.flags.writeable  # read-only stays read-only
    assert r.tolist() == [[1, 2]] * 3


@pytest.mark.parametrize("name", NP_DTYPES)
def test_asarray_every_numpy_dtype(dev, name):
    src = (np.arange(6) % 2 == 1) if name == "bool" else np.arange(6).astype(name)
    t = oxide.tensor(src.reshape(2, 3), device=dev)
    a = np.asarray(t)
    assert a.dtype == np.dtype(name) and a.shape == (2, 3) and a.dtype != object
    assert (a == src.reshape(2, 3)).all()
    z = np.asarray(oxide.tensor(src[:1].reshape(()), device=dev))  # 0-d
    assert z.shape == () and z.dtype == np.dtype(name)
    e = np.asarray(oxide.empty((0, 3), dtype=name, device=dev))
    assert e.shape == (0, 3) and e.dtype == np.dtype(name)


def test_asarray_copy_and_dtype():
    t = oxide.tensor([1.0, 2.0], device=CPU)
    c = np.array(t)  # copy=True
    assert c.ctypes.data != t.data_ptr and c.tolist() == [1.0, 2.0]
    assert np.asarray(t, copy=False).ctypes.data == t.data_ptr
    d = np.asarray(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == [1.0, 2.0]
    assert np.asarray(t, dtype=np.float32).ctypes.data == t.data_ptr  # the same dtype: no copy
    with pytest.raises(ValueError, match=r"converting f32 to float64 needs a copy"):
        np.asarray(t, dtype=np.float64, copy=False)
    # the protocol called directly, as NumPy 1.x calls it (no copy argument)
    assert t.__array__().ctypes.data == t.data_ptr
    assert t.__array__(np.dtype("int32")).tolist() == [1, 2]


def test_asarray_bf16_and_fp8():
    b = oxide.tensor([1.5, -2.25, 3.0e38, 1.0e-40], dtype="bf16", device=CPU)
    with pytest.raises(TypeError, match=r"NumPy has no bf16: np.asarray\(t, dtype=np.float32\)"):
        np.asarray(b)
    with pytest.raises(TypeError, match="NumPy has no bf16"):
        b.numpy()
    exact = b.tolist()
    assert exact[:2] == [1.5, -2.25]
    f = np.asarray(b, dtype=np.float32)
    assert f.dtype == np.float32 and f.tolist() == exact  # exact: bf16 is f32's top half
    assert np.asarray(b, dtype=np.float64).tolist() == exact
    with pytest.raises(ValueError, match="converting bf16 to float32 needs a copy"):
        np.asarray(b, dtype=np.float32, copy=False)
    # fp8: every byte, against independent decodings
    raw = bytes(range(256))
    e5 = oxide.tensor(raw, dtype="f8e5m2", device=CPU)
    want5 = np.arange(256, dtype=np.uint16).__lshift__(8).view(np.float16).astype(np.float32)
    got5 = np.asarray(e5, dtype=np.float32)
    assert np.array_equal(got5, want5, equal_nan=True)
    assert np.array_equal(np.array(e5.tolist(), np.float32), want5, equal_nan=True)
    e4 = oxide.tensor(raw, dtype="f8e4m3", device=CPU)
    got4 = np.asarray(e4, dtype=np.float32)
    known = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6, 0x38: 1.0,
             0x3C: 1.5, 0x77: 240.0, 0x7E: 448.0, 0xB8: -1.0, 0xFE: -448.0}
    for bits, value in known.items():
        assert got4[bits] == value and e4[bits].item() == value, hex(bits)
    assert np.isnan(got4[0x7F]) and np.isnan(got4[0xFF]) and np.isfinite(got4[:0x7F]).all()
    assert np.signbit(got4[0x80])  # -0.0
    for dt in ("f8e4m3", "f8e5m2"):
        with pytest.raises(TypeError, match=f"NumPy has no {dt}"):
            np.asarray(oxide.tensor(raw, dtype=dt, device=CPU))
        with pytest.raises(oxide.UnsupportedError, match=f"does not convert numbers to {dt}"):
            oxide.tensor([1.0], dtype=dt, device=CPU)
        with pytest.raises(oxide.UnsupportedError, match=f"does not convert numbers to {dt}"):
            oxide.tensor(np.ones(2, np.float32), dtype=dt, device=CPU)


@pytest.mark.gpu
def test_asarray_cuda_copies():
    dev = oxide.device("cuda")
    t = oxide.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    a = np.asarray(t)
    assert a.tolist() == [[1, 2], [3, 4]] and a.dtype == np.float32
    assert np.asarray(t.T).tolist() == [[1, 3], [2, 4]]
    with pytest.raises(ValueError, match="reading a tensor on cuda:0 from the host needs a copy"):
        np.asarray(t, copy=False)
    assert np.asarray(oxide.tensor([0.5], dtype="bf16", device=dev), dtype=np.float32)[0] == 0.5


# ------------------------------------------------- __cuda_array_interface__


def test_cuda_array_interface_absent_on_cpu():
    t = oxide.zeros(4, device=CPU)
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="the tensor is on cpu, not a CUDA device"):
        t.__cuda_array_interface__


class _FakeCuda:
    """Stands in for a CUDA device, so that the interface's dict is built
    from a CPU tensor (the fields come from the same calls)."""

    type = "cuda"


def _cai_of(t, monkeypatch):
    monkeypatch.setattr(oxide.Tensor, "device", property(lambda self: _FakeCuda()))
    try:
        return t.__cuda_array_interface__
    finally:
        monkeypatch.undo()


def test_cuda_array_interface_fields(monkeypatch):
    t = oxide.arange(12, dtype="i16", device=CPU).reshape(3, 4)
    cai = _cai_of(t, monkeypatch)
    assert cai == {"shape": (3, 4), "typestr": "<i2", "data": (t.data_ptr, False),
                   "strides": None, "version": 3, "stream": 1}  # written on the default stream
    v = t.T[1:, :]
    cai = _cai_of(v, monkeypatch)
    assert cai["shape"] == (3, 3) and cai["strides"] == (2, 8) and cai["data"][0] == v.data_ptr
    r = oxide.tensor([1.0], device=CPU).broadcast_to((2, 3))
    assert _cai_of(r, monkeypatch)["data"][1] is True and _cai_of(r, monkeypatch)["strides"] == (0, 0)
    assert _cai_of(oxide.empty(2, "u8", device=CPU), monkeypatch)["stream"] is None  # never written
    for dt in ("bf16", "f8e4m3", "f8e5m2"):
        with pytest.raises(AttributeError, match=f"has no type for {dt}; use DLPack"):
            _cai_of(oxide.empty(2, dt, device=CPU), monkeypatch)
    typestrs = {n: _cai_of(oxide.empty(1, n, device=CPU), monkeypatch)["typestr"] for n in NP_DTYPES}
    assert typestrs == {n: np.dtype(n).str for n in NP_DTYPES}


@pytest.mark.gpu
def test_cuda_array_interface_gpu():
    dev = oxide.device("cuda")
    m = oxide.compile(SAXPY, device=dev)
    x = oxide.arange(1 << 20, device=dev)
    y = oxide.full(1 << 20, 1.0, device=dev)
    out = oxide.empty(1 << 20, device=dev)
    cai = out.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (1 << 20,)
    assert cai["data"] == (out.data_ptr, False) and cai["strides"] is None
    assert cai["stream"] == 1  # allocated on the legacy default stream
    s = dev.stream()
    m.saxpy(x, y, out, 2.0, grid=(1 << 20) // 256, block=256, stream=s)
    stream = out.__cuda_array_interface__["stream"]
    assert stream == _dlpack._stream_handle(s._h) and stream not in (None, 0, 1, 2)
    assert out.T.__cuda_array_interface__["stream"] == stream  # views share the writer
    assert x.__cuda_array_interface__["stream"] == 1  # a read does not change it
    with pytest.raises(AttributeError, match="has no type for bf16"):
        oxide.zeros(2, "bf16", device=dev).__cuda_array_interface__
    consumers = 0
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:  # CuPy honours the interface's stream
        consumers += 1
        m.saxpy(x, y, out, 3.0, grid=(1 << 20) // 256, block=256, stream=s)
        c = cupy.asarray(out)
        assert c.data.ptr == out.data_ptr
        assert float(c[7]) == 22.0 and float(c[-1]) == 3.0 * ((1 << 20) - 1) + 1
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        consumers += 1
        m.saxpy(x, y, out, 4.0, grid=(1 << 20) // 256, block=256, stream=s)
        g = torch.as_tensor(out, device="cuda")
        assert g.data_ptr() == out.data_ptr
        torch.cuda.current_stream().wait_stream(torch.cuda.ExternalStream(stream))
        assert g[7].item() == 29.0
        gt = torch.as_tensor(oxide.arange(6, device=dev).reshape(2, 3).T, device="cuda")
        assert gt.stride() == (1, 3) and gt.tolist() == [[0, 3], [1, 4], [2, 5]]
    if not consumers:
        pytest.skip("neither CuPy nor PyTorch (with CUDA) is importable")


# ------------------------------------------------------------------ item


def test_item(dev):
    assert oxide.tensor(2.5, device=dev).item() == 2.5
    v = oxide.full((1, 1, 1), 7, "i64", device=dev).item()
    assert v == 7 and type(v) is int
    b = oxide.tensor([True], dtype="bool", device=dev).item()
    assert b is True
    t = oxide.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    assert t[1, 0].item() == 3.0 and t.T[0, 1].item() == 3.0  # views, any strides
    assert oxide.tensor([0.1], dtype="bf16", device=dev).item() == struct.unpack(
        "<f", struct.pack("<I", 0x3DCD << 16))[0]
    assert oxide.tensor(bytes([0x3C]), dtype="f8e4m3", device=dev).item() == 1.5
    for shape in ((2,), (0,), (1, 2)):
        n = int(np.prod(shape))
        with pytest.raises(ValueError, match=re.escape(
                f"item() needs a tensor of one element; this one has {n} (shape {shape})")):
            oxide.zeros(shape, device=dev).item()


# ------------------------------------------------------------------ *_like


def test_like(dev):
    t = oxide.tensor([[1, 2, 3], [4, 5, 6]], dtype="i16", device=dev)
    e = oxide.empty_like(t)
    assert (e.shape, e.dtype, e.device) == ((2, 3), "i16", dev)
    z = oxide.zeros_like(t, dtype="float32")
    assert z.dtype == "f32" and z.tolist() == [[0.0] * 3] * 2 and z.device is dev
    f = oxide.full_like(t, 9)
    assert f.dtype == "i16" and f.tolist() == [[9] * 3] * 2
    g = oxide.full_like(t.T, 0.5, dtype=np.float64, device="cpu")
    assert (g.shape, g.dtype, g.device) == ((3, 2), "f64", CPU) and g.is_contiguous()
    n = oxide.zeros_like(np.ones((4, 2), np.uint8))  # an array with shape and dtype
    assert (n.shape, n.dtype, n.device) == ((4, 2), "u8", CPU)
    with pytest.raises(TypeError, match="expected an oxide.Tensor or an array with shape and dtype"):
        oxide.zeros_like([1, 2])
    with pytest.raises(oxide.InvalidArgumentError, match="unknown dtype 'f33'"):
        oxide.empty_like(t, dtype="f33")


# ------------------------------------------------------------------ dtypes


class _TorchLike:
    """A stand-in for torch.dtype (recognised by its type's name and module
    and its str(), so torch need not be imported)."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_TorchLike.__name__, _TorchLike.__module__ = "dtype", "torch"

SPELLINGS = [
    ("f32", "f32"), ("float32", "f32"), (np.float32, "f32"), (np.dtype("f4"), "f32"),
    (np.dtype("<f4"), "f32"), (oxide.f32, "f32"), (_TorchLike("float32"), "f32"),
    ("bfloat16", "bf16"), ("bf16", "bf16"), (oxide.bf16, "bf16"), (_TorchLike("bfloat16"), "bf16"),
    ("float16", "f16"), (np.float16, "f16"), (_TorchLike("float16"), "f16"),
    ("float64", "f64"), (np.double, "f64"), (np.dtype(float), "f64"),
    ("int64", "i64"), (np.int64, "i64"), (_TorchLike("int64"), "i64"), ("i8", "i8"),
    ("int8", "i8"), ("uint16", "u16"), (np.uint64, "u64"), (_TorchLike("uint8"), "u8"),
    ("bool", "bool"), (bool, "bool"), (np.bool_, "bool"), (np.dtype(bool), "bool"),
    (_TorchLike("bool"), "bool"), (oxide.bool_, "bool"),
    ("float8_e4m3fn", "f8e4m3"), ("f8e5m2", "f8e5m2"), (_TorchLike("float8_e5m2"), "f8e5m2"),
]


@pytest.mark.parametrize("spelling, name", SPELLINGS, ids=[str(s) for s, _ in SPELLINGS])
def test_dtype_spellings(spelling, name):
    assert oxide.empty(2, dtype=spelling, device=CPU).dtype == name


def test_dtype_spellings_everywhere():
    assert oxide.zeros(2, np.int32, CPU).dtype == "i32"
    assert oxide.full(2, 3, "int16", CPU).tolist() == [3, 3]
    assert oxide.arange(3, dtype=np.uint8, device=CPU).tolist() == [0, 1, 2]
    assert oxide.tensor([1, 2], dtype="int64", device=CPU).dtype == "i64"
    assert oxide.tensor(np.array([1.5]), dtype="bfloat16", device=CPU).tolist() == [1.5]
    assert oxide.tensor(np.array([1, 2]), dtype=np.float16, device=CPU).dtype == "f16"
    assert oxide.empty_like(oxide.zeros(1, device=CPU), _TorchLike("int8")).dtype == "i8"


@pytest.mark.parametrize("bad", ["float", "int", "f33", "complex64", np.complex64,
                                 np.dtype("U3"), _TorchLike("complex64"), 3.5, None.__class__])
def test_dtype_refused(bad):
    with pytest.raises(oxide.InvalidArgumentError) as e:
        oxide.empty(2, dtype=bad, device=CPU)
    msg = str(e.value)
    assert msg.startswith(f"unknown dtype {bad!r}")
    for listed in ("f32", "bf16", "f8e4m3", "'float32'", "'bfloat16'", "np.float32",
                   "torch.float32", "oxide.f32"):
        assert listed in msg, (listed, msg)
    if bad in ("float", "int"):
        assert f"give the width, as '{bad}32' or '{bad}64'" in msg


def test_torch_dtypes():
    torch = pytest.importorskip("torch")
    for td, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.half, "f16"),
                     (torch.int64, "i64"), (torch.bool, "bool"), (torch.uint8, "u8")):
        assert oxide.zeros(1, td, CPU).dtype == name
    with pytest.raises(oxide.InvalidArgumentError, match="unknown dtype torch.complex64"):
        oxide.zeros(1, torch.complex64, CPU)


# ---------------------------------------------- host reads and BoundsError


READS = {
    "tolist": lambda c: c.tolist(),
    "numpy": lambda c: c.numpy(),
    "tobytes": lambda c: c.tobytes(),
    "item": lambda c: c[3].item(),
    "asarray": lambda c: np.asarray(c),
    "array": lambda c: np.array(c, dtype=np.float64),
    "from_dlpack": lambda c: np.from_dlpack(c),
    "view": lambda c: c[1:].tolist(),
}


@pytest.mark.parametrize("on_own_stream", [False, True], ids=["default", "stream"])
@pytest.mark.parametrize("read", list(READS))
def test_host_read_raises_pending_bounds_error(dev, read, on_own_stream):
    if read == "from_dlpack" and dev.type == "cuda":
        pytest.skip("NumPy takes no CUDA memory (and a CUDA export is no host read)")
    k = oxide.compile(OOB, device=dev, filename="oob.oxk").oob
    a = oxide.tensor([1.0, 2.0, 3.0, 4.0], device=dev)
    c = oxide.zeros(4, device=dev)
    s = dev.stream() if on_own_stream else None
    # thread 3 reads a[4]: on the CPU the launch raises (the kernel has run); on CUDA the
    # launch if the kernel has recorded it already, else the host read
    errors = bounds_errors(lambda: k(a, c, grid=1, block=4, stream=s), lambda: READS[read](c))
    assert len(errors) == 1 and re.search(r"oob.oxk:5:.*index 4.*length is 4", str(errors[0])), errors
    # the error is consumed: reads work again, and show what was written
    assert c.tolist()[:3] == [2.0, 3.0, 4.0]
    dev.synchronize()
    if s is not None:
        s.synchronize()


def test_host_read_stream_argument(dev):
    """A read on stream= synchronizes that stream and the tensor's writer."""
    k = oxide.compile(OOB, device=dev, filename="oob.oxk").oob
    a = oxide.tensor([1.0, 2.0, 3.0, 4.0], device=dev)
    c, other = oxide.zeros(4, device=dev), oxide.zeros(4, device=dev)
    s1, s2 = dev.stream(), dev.stream()
    # (on the CPU each launch raises its error itself, so no read has one to raise)
    errors = bounds_errors(lambda: k(a, c, grid=1, block=4, stream=s1),
                           lambda: other.tolist(stream=s2),  # neither s2 nor other's writer has it
                           lambda: c.tolist(stream=s2))  # c's writer, s1, has it
    assert len(errors) == 1
    assert other.tolist(stream=s2) == [0.0] * 4
    errors = bounds_errors(lambda: k(a, c, grid=1, block=4, stream=s1),
                           lambda: other.tolist(stream=s1))  # the read's own stream has it
    assert len(errors) == 1
    s1.synchronize()


# ---------------------------------------- DLPack exports a consumer refuses


def _foreign_bf16(n=4, code=4, bits=16):
    """A foreign CPU tensor (kDLBfloat 16 by default) with a counting
    deleter, imported into Oxide: its deleter runs once Oxide lets go of it."""
    buf = (C.c_uint8 * (n * bits // 8))()
    shape = (C.c_int64 * 1)(n)
    calls = []
    deleter = _dlpack._DELETER(lambda p: calls.append(p))
    m = _dlpack._Legacy()
    m.dl_tensor.data = C.addressof(buf)
    m.dl_tensor.device_type, m.dl_tensor.device_id = 1, 0
    m.dl_tensor.ndim, m.dl_tensor.code, m.dl_tensor.bits, m.dl_tensor.lanes = 1, code, bits, 1
    m.dl_tensor.shape = C.addressof(shape)
    m.deleter = C.cast(deleter, C.c_void_p)
    new = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_char_p, C.c_void_p)(("PyCapsule_New", C.pythonapi))

    class Producer:
        def __dlpack__(self, stream=None):
            return new(C.addressof(m), b"dltensor", None)

        def __dlpack_device__(self):
            return (1, 0)

    t = oxide.from_dlpack(Producer())
    return t, calls, (buf, shape, deleter, m)


@pytest.mark.parametrize("code, bits, dtype", [(4, 16, "bf16"), (10, 8, "f8e4m3"), (12, 8, "f8e5m2")])
def test_refused_export_frees_the_tensor(code, bits, dtype):
    t, calls, keep = _foreign_bf16(code=code, bits=bits)
    assert t.dtype == dtype
    for _ in range(3):
        with pytest.raises(Exception) as e:
            np.from_dlpack(t)  # NumPy takes the capsule, refuses the dtype, drops it
        # NumPy's own error, not a SystemError from a failed destructor
        assert not isinstance(e.value, SystemError), repr(e.value)
        assert "dtype" in str(e.value).lower(), repr(e.value)
    del t, e
    gc.collect()  # the pure path frees a dropped capsule's tensor by then
    assert len(calls) == 1  # every export let go: the producer's deleter ran, once


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_refused_export_does_not_leak_memory():
    # 64 MiB of bf16 per tensor, written (so resident); above glibc's largest
    # mmap threshold (32 MiB), so that a freed tensor leaves the process
    n = 32 << 20

    def refuse():
        with pytest.raises(Exception):
            np.from_dlpack(oxide.full(n, 1.0, "bf16", device=CPU))
        gc.collect()

    for _ in range(2):  # let the allocator settle
        refuse()
    before = _rss_mib()
    for _ in range(8):  # a leak would keep 512 MiB
        refuse()
    grown = _rss_mib() - before
    assert grown < 48, f"resident memory grew by {grown:.0f} MiB over 8 refused exports"


def test_unconsumed_capsule_still_frees():
    """Dropping a capsule nobody consumed releases the export (both paths)."""
    t, calls, keep = _foreign_bf16()
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    del t
    gc.collect()
    assert calls == []  # the capsules hold it
    del caps
    gc.collect()
    assert len(calls) == 1


# ------------------------------------------------------------------ typing


def test_py_typed_marker():
    assert os.path.isfile(os.path.join(os.path.dirname(oxide.__file__), "py.typed"))


def _public_callables():
    for name in oxide.__all__:
        obj = getattr(oxide, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__ == "oxide" and not issubclass(obj, Exception):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__array__", "__dlpack__", "__getitem__"):
                    continue
                fn = member.fget if isinstance(member, property) else member
                if inspect.isfunction(fn):
                    yield f"{name}.{attr}", fn


def test_public_api_is_annotated():
    missing = [name for name, fn in _public_callables()
               if inspect.signature(fn).return_annotation is inspect.Signature.empty]
    assert not missing, f"no return annotation: {missing}"
    assert oxide.zeros.__annotations__["return"] == "Tensor"  # from __future__ import annotations


def test_annotations_resolve():
    import typing

    for fn in (oxide.zeros, oxide.full_like, oxide.device, oxide.compile, oxide.Tensor.item,
               oxide.Tensor.stride, oxide.Kernel.set_generic):
        typing.get_type_hints(fn)  # in its module's names, as Python 3.9 would evaluate them
