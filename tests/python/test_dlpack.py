"""DLPack through the Python protocol: numpy round trips on the CPU, capsule
ownership (consumed or not), hostile capsules, and PyTorch on CUDA (gpu)."""
import ctypes as C
import gc
import sys

import pytest

import oxide
from oxide import _dlpack

np = pytest.importorskip("numpy")

TWICE = """\
#[kernel]
fn twice(a: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(out) = c.get_mut(i) { *out = 2.0 * a[i]; }
}
"""

CPU = oxide.device("cpu")


class Producer:
    """Hands out a given capsule, like a library without max_version support."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def capsule_name(cap):
    return repr(cap).split('"')[1]  # <capsule object "dltensor" at 0x...>


def flags_of(cap):
    get = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_char_p)(("PyCapsule_GetPointer", C.pythonapi))
    return _dlpack._Versioned.from_address(get(cap, b"dltensor_versioned")).flags


def test_numpy_from_oxide_shares_memory():
    t = oxide.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=CPU)
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.shape == (2, 3) and a.flags.writeable
    assert a.ctypes.data == t.data_ptr
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    a[1, 2] = 60
    assert t.tolist()[1][2] == 60
    del t
    gc.collect()
    assert a.sum() == 75  # the export holds its own reference


def test_oxide_from_numpy_shares_memory():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = oxide.from_dlpack(arr)
    assert (t.shape, t.dtype, t.device) == ((3, 4), "f32", CPU)
    assert t.data_ptr == arr.ctypes.data
    arr[0, 0] = 42
    assert t.tolist()[0][0] == 42
    # a kernel writes into numpy's memory
    mod = oxide.compile(TWICE, device=CPU)
    src = oxide.tensor([float(i) for i in range(12)], device=CPU)
    out = np.zeros(12, dtype=np.float32)
    mod.twice(src, oxide.from_dlpack(out), grid=1, block=12)
    CPU.synchronize()
    assert out.tolist() == [2.0 * i for i in range(12)]


NP_TO_OX = {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
            "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16",
            "float32": "f32", "float64": "f64"}


@pytest.mark.parametrize("dtype", sorted(NP_TO_OX))
def test_dtype_round_trip(dtype):
    arr = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    t = oxide.from_dlpack(arr)
    assert t.dtype == NP_TO_OX[dtype]
    back = np.from_dlpack(t)
    assert back.dtype == arr.dtype and np.array_equal(back, arr)


def test_strided_0d_and_empty():
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = arr[1:, ::2]  # a byte offset and strides
    t = oxide.from_dlpack(view)
    assert t.shape == (3, 3) and t.data_ptr == view.ctypes.data
    back = np.from_dlpack(t)
    assert back.strides == view.strides and np.array_equal(back, view)
    scalar = oxide.from_dlpack(np.array(3.5, dtype=np.float32))
    assert scalar.shape == () and scalar.tolist() == 3.5
    assert np.from_dlpack(scalar).shape == ()
    empty = oxide.from_dlpack(np.zeros((0, 3), dtype=np.int32))
    assert empty.shape == (0, 3) and empty.numel == 0
    assert np.from_dlpack(empty).shape == (0, 3)


def test_read_only():
    arr = np.arange(4, dtype=np.float32)
    arr.setflags(write=False)
    t = oxide.from_dlpack(arr)  # versioned: numpy marks it read-only
    mod = oxide.compile(TWICE, device=CPU)
    with pytest.raises(oxide.InvalidArgumentError, match="read-only"):
        mod.twice(oxide.tensor([1.0] * 4, device=CPU), t, grid=1, block=4)
    assert not np.from_dlpack(t).flags.writeable
    with pytest.raises(BufferError, match="legacy DLManagedTensor cannot say so"):
        t.__dlpack__()  # no max_version: legacy, which cannot carry the flag


def test_capsules():
    t = oxide.tensor([1.0, 2.0], device=CPU)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__(max_version=(1, 3))
    u = oxide.from_dlpack(Producer(cap))
    assert capsule_name(cap) == "used_dltensor_versioned" and u.data_ptr == t.data_ptr
    with pytest.raises(ValueError, match="imported only once"):
        oxide.from_dlpack(Producer(cap))
    with pytest.raises(TypeError, match="does not support DLPack"):
        oxide.from_dlpack([1, 2])


def test_deleter_runs_once_consumed_or_not():
    # numpy's export holds a reference to the array until its deleter runs
    arr = np.arange(8, dtype=np.float32)
    base = sys.getrefcount(arr)
    t = oxide.from_dlpack(arr)
    assert sys.getrefcount(arr) == base + 1
    cap = t.__dlpack__(max_version=(1, 1))  # an Oxide export of numpy's memory
    del t
    gc.collect()
    assert sys.getrefcount(arr) == base + 1  # the unconsumed capsule holds it
    del cap  # its destructor runs the deleter
    gc.collect()
    assert sys.getrefcount(arr) == base
    t = oxide.from_dlpack(arr)
    cap = t.__dlpack__()
    u = oxide.from_dlpack(Producer(cap))  # consumed: the capsule no longer owns it
    del cap, t
    gc.collect()
    assert sys.getrefcount(arr) == base + 1 and u.tolist()[7] == 7
    del u
    gc.collect()
    assert sys.getrefcount(arr) == base


def test_copy_and_device():
    t = oxide.tensor([1.0, 2.0, 3.0], device=CPU)
    cap = t.__dlpack__(max_version=(1, 1), copy=True)
    assert flags_of(cap) & 2  # DLPACK_FLAG_BITMASK_IS_COPIED
    c = oxide.from_dlpack(Producer(cap))
    assert c.data_ptr != t.data_ptr and c.tolist() == [1.0, 2.0, 3.0]
    a = np.from_dlpack(t, copy=True)
    assert a.ctypes.data != t.data_ptr and a.tolist() == [1.0, 2.0, 3.0]
    assert np.from_dlpack(t, device="cpu").ctypes.data == t.data_ptr
    assert flags_of(t.__dlpack__(max_version=(1, 1), dl_device=(1, 0))) == 0
    with pytest.raises(BufferError, match="copy=False forbids it"):
        t.__dlpack__(max_version=(1, 1), dl_device=(2, 0), copy=False)
    with pytest.raises(BufferError, match="cannot export to DLPack device type 7"):
        t.__dlpack__(max_version=(1, 1), dl_device=(7, 0))


class _Legacy(C.Structure):
    _fields_ = _dlpack._Legacy._fields_


def hostile(shape, strides, code=2, bits=32, lanes=1, data=True, device=(1, 0), offset=0):
    """A legacy capsule made by hand, with a counting deleter."""
    buf = (C.c_float * 16)()
    nd = len(shape)
    sh = (C.c_int64 * max(nd, 1))(*shape)
    st = (C.c_int64 * max(nd, 1))(*strides) if strides is not None else None
    calls = []
    deleter = _dlpack._DELETER(lambda p: calls.append(p))
    m = _Legacy()
    m.dl_tensor.data = C.addressof(buf) if data else None
    m.dl_tensor.device_type, m.dl_tensor.device_id = device
    m.dl_tensor.ndim, m.dl_tensor.code, m.dl_tensor.bits, m.dl_tensor.lanes = nd, code, bits, lanes
    m.dl_tensor.shape = C.addressof(sh)
    m.dl_tensor.strides = C.addressof(st) if st is not None else None
    m.dl_tensor.byte_offset = offset
    m.deleter = C.cast(deleter, C.c_void_p)
    new = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_char_p, C.c_void_p)(("PyCapsule_New", C.pythonapi))
    cap = new(C.addressof(m), b"dltensor", None)
    return Producer(cap, device), calls, (buf, sh, st, deleter, m)


@pytest.mark.parametrize("kw, error, message", [
    (dict(shape=(4,), strides=(-1,)), oxide.UnsupportedError, "negative strides are not supported"),
    (dict(shape=(4,), strides=None, data=False), oxide.InvalidArgumentError, "data is NULL"),
    (dict(shape=(4,), strides=None, code=99), oxide.UnsupportedError, "code 99"),
    (dict(shape=(4,), strides=None, lanes=2), oxide.UnsupportedError, "lanes must be 1"),
    (dict(shape=(4,), strides=None, offset=2), oxide.InvalidArgumentError, "not a multiple"),
    (dict(shape=(1 << 62,), strides=None), oxide.InvalidArgumentError, "byte size overflows"),
    (dict(shape=(4,), strides=None, device=(3, 0)), oxide.UnsupportedError, "pinned host"),
])
def test_hostile_capsules(kw, error, message):
    producer, calls, keep = hostile(**kw)
    with pytest.raises(error, match=message):
        oxide.from_dlpack(producer)
    assert len(calls) == 1  # refused: the deleter ran, once
    del producer
    gc.collect()
    assert len(calls) == 1  # and the used capsule does not run it again


def test_hostile_accepted_layouts():
    producer, calls, keep = hostile(shape=(2, 3), strides=None)  # legacy NULL strides: row-major
    t = oxide.from_dlpack(producer)
    assert t.shape == (2, 3) and calls == []
    del t
    gc.collect()
    assert len(calls) == 1


# ------------------------------------------------------------------ CUDA


@pytest.mark.gpu
def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    dev = oxide.device("cuda")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    t = oxide.from_dlpack(x)
    assert t.device is dev and t.data_ptr == x.data_ptr()
    out = torch.zeros(1000, dtype=torch.float32, device="cuda")
    mod = oxide.compile(TWICE, device=dev)
    mod.twice(t, oxide.from_dlpack(out), grid=4, block=256)
    dev.synchronize()
    assert torch.equal(out, 2 * x)
    y = torch.from_dlpack(oxide.tensor([1.0, 2.0, 3.0], device=dev))
    assert y.device.type == "cuda" and y.tolist() == [1.0, 2.0, 3.0]
    assert oxide.tensor([0.0], device=dev).__dlpack_device__() == (2, 0)


@pytest.mark.gpu
def test_torch_streams():
    torch = pytest.importorskip("torch")
    dev = oxide.device("cuda")
    # torch writes on a side stream; Oxide names its stream and torch orders
    # the write before it
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x = torch.full((1 << 20,), 3.0, device="cuda")
        s = dev.stream()
        t = oxide.from_dlpack(x, stream=s)
        out = oxide.empty(1 << 20, "f32", dev)
        oxide.compile(TWICE, device=dev).twice(t, out, grid=(1 << 20) // 256, block=256, stream=s)
    s.synchronize()
    assert out.numpy(stream=s).min() == 6.0
    # Oxide writes; torch's consumer stream waits for it (stream passed as an int)
    mod = oxide.compile(TWICE, device=dev)
    src = oxide.tensor([1.0] * (1 << 20), device=dev)
    dst = oxide.empty(1 << 20, "f32", dev)
    w = dev.stream()
    mod.twice(src, dst, grid=(1 << 20) // 256, block=256, stream=w)
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(dst)
        assert y.min().item() == 2.0
    for bad in (0, "x"):
        with pytest.raises((ValueError, TypeError)):
            dst.__dlpack__(stream=bad)
    # a copy to the host for a consumer on the CPU (numpy asks with dl_device)
    assert np.from_dlpack(dst, device="cpu").min() == 2.0
