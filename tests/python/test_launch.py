"""Kernel launches from Python: arguments by name, Python numbers typed by the
parameter, foreign arrays (NumPy) passed directly, the launch config rules,
and that the two launch paths -- the C extension (oxide._fast) and the pure
ctypes path -- give the same results and the same errors.

Each comparison runs both paths in this process: `k(...)` (the extension
when it is loaded) and `k._run(...)` (always the pure path). The suite also
runs whole with OXIDE_PURE_PYTHON=1 (tools/run_tests.sh), where both are the
pure path. OXIDE_TEST_FAST=1 makes the extension's absence an error."""
import ctypes as C
import enum
import gc
import os
import re
import subprocess
import sys
import threading
import tracemalloc

import pytest

import oxide
from oxide import _ext

np = pytest.importorskip("numpy")

CPU = oxide.device("cpu")
FAST = _ext.FAST is not None


def _numpy_versioned():
    try:
        np.zeros(1).__dlpack__(max_version=(1, 0))
        return True
    except TypeError:
        return False


# numpy >= 2.1 exports versioned capsules (with the read-only flag)
VERSIONED = _numpy_versioned()
needs_versioned = pytest.mark.skipif(not VERSIONED, reason="numpy < 2.1: no versioned DLPack")

SAXPY = """\
#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = alpha * x[i] + y[i];
    }
}
"""

DTYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
          "f64")
# put_T(out, v) writes v to every element of out
PUT = "".join(f"""
#[kernel]
fn put_{t}(out: DisjointSlice<{t}>, v: {t}) {{
    if let Some(o) = out.get_mut(thread::index_1d()) {{ *o = v; }}
}}
""" for t in DTYPES)

TILE_ADD = """\
#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"""


@pytest.fixture(scope="module")
def saxpy():
    return oxide.compile(SAXPY, device=CPU, filename="saxpy.oxk").saxpy


@pytest.fixture(scope="module")
def put():
    return oxide.compile(PUT, device=CPU, filename="put.oxk")


def outcome(fn):
    """None if fn() returns, else the exception's class and message."""
    try:
        fn()
    except Exception as e:  # the point: compare what each path raises
        return type(e), str(e)
    return None


def pure(k, *args, **kwargs):
    k._run(oxide._L.ox_launch, args, kwargs)


def paths(k):
    """The kernel's launch through the pure path, and through the extension
    (the pure path again without it)."""
    return (lambda *a, **kw: pure(k, *a, **kw)), k


def both(k, *args, **kwargs):
    """Runs a launch through both paths; they must agree. Returns the
    outcome (None, or the exception's class and message)."""
    p = outcome(lambda: pure(k, *args, **kwargs))
    f = outcome(lambda: k(*args, **kwargs))
    assert f == p, f"extension: {f}\npure path: {p}"
    return p


def raises(exc, match, k, *args, **kwargs):
    """Both paths raise `exc` with a message matching `match`."""
    got = both(k, *args, **kwargs)
    assert got is not None, "no error"
    assert issubclass(got[0], exc), got
    assert re.search(match, got[1]), got[1]


def arrays(n=8):
    x = np.arange(n, dtype=np.float32)
    return x, np.full(n, 10.0, np.float32), np.zeros(n, np.float32)


# ------------------------------------------------------------------ the paths


def test_launch_path():
    assert oxide.launch_path().startswith("C extension (" if FAST else "ctypes (")
    assert "python launch: " + oxide.launch_path() in oxide.doctor()
    if os.environ.get("OXIDE_PURE_PYTHON", "") not in ("", "0"):
        assert not FAST
    elif os.environ.get("OXIDE_TEST_FAST") == "1":
        assert FAST, _ext.WHY
    if FAST:
        assert issubclass(oxide.Kernel, _ext.FAST.Launcher)
    else:
        # an extension that exists where the package looks must have loaded
        assert "cannot be used" not in _ext.WHY, _ext.WHY


def test_pure_python_switch():
    env = dict(os.environ, OXIDE_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", "import oxide; print(oxide.launch_path())"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("ctypes (OXIDE_PURE_PYTHON is set)")


def test_bad_extension_falls_back_with_a_warning(tmp_path):
    bad = tmp_path / "_fast.abi3.so"
    bad.write_bytes(b"not a shared library")
    env = dict(os.environ, OXIDE_PYTHON_EXT=str(bad))
    env.pop("OXIDE_PURE_PYTHON", None)
    r = subprocess.run([sys.executable, "-c", "import oxide; print(oxide.launch_path())"],
                       env=env, capture_output=True, text=True, check=True)
    assert r.stdout.startswith("ctypes (" + str(bad) + " cannot be used")
    assert "RuntimeWarning" in r.stderr


# ------------------------------------------------------------------ binding


def test_positional_and_keywords(saxpy):
    expect = [2.5 * i + 10 for i in range(8)]
    for args, kwargs in [((0, 1, 2, 2.5), {}), ((0, 1), {"out": 2, "alpha": 2.5}),
                         ((), {"alpha": 2.5, "out": 2, "y": 1, "x": 0}),
                         ((0,), {"y": 1, "alpha": 2.5, "out": 2})]:
        for run in paths(saxpy):
            a = arrays()
            call_args = [a[i] if isinstance(i, int) and i < 3 else i for i in args]
            call_kwargs = {k: a[v] if k != "alpha" else v for k, v in kwargs.items()}
            run(*call_args, **call_kwargs, grid=1, block=8)
            assert a[2].tolist() == expect, (args, kwargs)


def test_binding_errors(saxpy):
    x, y, o = arrays()
    raises(TypeError, r"^kernel 'saxpy' takes 4 arguments, got 3: missing 'alpha'$",
           saxpy, x, y, o, grid=1, block=8)
    raises(TypeError, r"got 1: missing 'y', 'out' and 'alpha'$", saxpy, x, grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"^kernel 'saxpy' takes 4 arguments \(x, y, out, alpha\), "
           r"got 5 positional$", saxpy, x, y, o, 1.0, 2.0, grid=1, block=8)
    raises(TypeError, r"^kernel 'saxpy' got an unexpected keyword argument 'beta' \(its "
           r"parameters: x, y, out, alpha\)$", saxpy, x, y, o, 1.0, beta=2, grid=1, block=8)
    raises(TypeError, r"^kernel 'saxpy' got multiple values for argument 'x'$",
           saxpy, x, y, o, 1.0, x=x, grid=1, block=8)
    # a key made at run time (not interned) binds as well
    name = "".join(["al", "pha"])
    assert both(saxpy, x, y, o, **{name: 1.0}, grid=1, block=8) is None
    for run in paths(saxpy):
        with pytest.raises(oxide.ArgumentTypeError) as e:
            run(x, y, o, grid=1, block=8)
        assert e.value.status_name == "OX_ERR_INVALID_ARGUMENT"
        with pytest.raises(oxide.ArgumentRangeError) as e:
            run(np.zeros(8, np.int32), y, o, 1e300, grid=1, block=8)
        assert e.value.status_name == "OX_ERR_INVALID_ARGUMENT"
    assert issubclass(oxide.ArgumentTypeError, oxide.InvalidArgumentError)
    assert issubclass(oxide.ArgumentTypeError, TypeError)
    assert issubclass(oxide.ArgumentRangeError, OverflowError)


def test_params_and_dir(saxpy):
    p = saxpy.params
    assert [q.name for q in p] == ["x", "y", "out", "alpha"]
    assert p[0] == oxide._args.Param("x", "slice", "f32", 1, False)
    assert (p[2].kind, p[2].writable) == ("disjoint", True)
    assert (p[3].kind, p[3].dtype, p[3].rank) == ("scalar", "f32", 0)
    assert saxpy.num_params == 4
    t = oxide.compile(TILE_ADD, device=CPU).add
    assert [(q.name, q.kind, q.rank, q.writable) for q in t.params] == [
        ("z", "tile", 1, True), ("x", "tensor", 1, False), ("y", "tensor", 1, False)]
    m = oxide.compile(SAXPY + TILE_ADD, device=CPU)
    assert m.kernel_names() == ["saxpy", "add"]
    assert {"saxpy", "add", "kernel_names"} <= set(dir(m))


# ------------------------------------------------------------------ numbers

INT_RANGES = {"i8": (-128, 127), "i16": (-2**15, 2**15 - 1), "i32": (-2**31, 2**31 - 1),
              "i64": (-2**63, 2**63 - 1), "u8": (0, 255), "u16": (0, 2**16 - 1),
              "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1)}


def out_of(put, dtype):
    if dtype == "bf16":
        return oxide.zeros(4, "bf16", CPU)
    return np.zeros(4, {"bool": np.bool_}.get(dtype, oxide.tensors._NUMPY.get(dtype)))


def value_of(out):
    return out.tolist()[0] if isinstance(out, oxide.Tensor) else out.tolist()[0]


def check_value(put, dtype, v, expect):
    """v passed to put_dtype arrives as `expect` on both paths."""
    k = put[f"put_{dtype}"]
    for run in paths(k):
        out = out_of(put, dtype)
        run(out, v, grid=1, block=4)
        got = value_of(out)
        assert got == expect and type(got) is type(expect), (dtype, v, got)


@pytest.mark.parametrize("dtype", sorted(INT_RANGES))
def test_ints(put, dtype):
    lo, hi = INT_RANGES[dtype]
    k = put[f"put_{dtype}"]
    for v in (lo, hi, 0, 1):
        check_value(put, dtype, v, v)
    for v in (lo - 1, hi + 1, 2**64, -2**64, 2**200):
        raises(oxide.ArgumentRangeError,
               rf"^kernel 'put_{dtype}', argument 2 \('v'\): {v} is out of range for {dtype} "
               rf"\({lo}\.\.{hi}\)$", k, out_of(put, dtype), v, grid=1, block=4)
    raises(TypeError, rf"argument 2 \('v'\): a float \(2\.0\) for an? {dtype} parameter; pass an "
           "int", k, out_of(put, dtype), 2.0, grid=1, block=4)
    raises(TypeError, rf"a bool \(True\) for an? {dtype} parameter; pass an int", k,
           out_of(put, dtype), True, grid=1, block=4)


class Color(enum.IntEnum):
    RED = 3


class MyFloat(float):
    pass


def test_number_subclasses(put):
    check_value(put, "i32", Color.RED, 3)  # an int subclass: its value
    check_value(put, "f64", MyFloat(0.5), 0.5)
    check_value(put, "i64", np.int64(-7), -7)  # numpy scalars carry their dtype ...
    raises(oxide.InvalidArgumentError, r"expected i32, got i64", put.put_i32,
           out_of(put, "i32"), np.int64(1), grid=1, block=4)  # ... which must match
    raises(oxide.InvalidArgumentError, r"expected f32, got f64", put.put_f32,
           out_of(put, "f32"), np.float64(1.0), grid=1, block=4)  # a float subclass, but numpy's
    raises(TypeError, r"numpy complex64 has no Oxide dtype", put.put_f32, out_of(put, "f32"),
           np.complex64(1), grid=1, block=4)


def test_bools(put):
    check_value(put, "bool", True, True)
    check_value(put, "bool", False, False)
    check_value(put, "bool", np.bool_(True), True)
    for v, what in ((1, "a Python int \\(1\\)"), (0.0, "a Python float \\(0\\.0\\)")):
        raises(TypeError, rf"argument 2 \('v'\): {what} for a bool parameter; pass True or False",
               put.put_bool, out_of(put, "bool"), v, grid=1, block=4)


@pytest.mark.parametrize("dtype, exact, inexact, top", [
    ("f16", [2048, -2048, 65504, 3 << 14], [2049, 4097], 65504),
    ("bf16", [256, 1 << 100, -(255 << 120)], [257, (1 << 100) + (1 << 92)], 255 << 120),
    ("f32", [2**24, -2**24, 2**60, 0xFFFFFF << 104], [2**24 + 1, 2**60 + 1], 0xFFFFFF << 104),
    ("f64", [2**53, 2**63, -2**64, 2**1000], [2**53 + 1, 2**64 + 1], ((1 << 53) - 1) << 971),
])
def test_ints_for_floats(put, dtype, exact, inexact, top):
    k = put[f"put_{dtype}"]
    for v in exact:
        if dtype in ("f32", "f64", "f16"):
            check_value(put, dtype, v, float(v))
        else:
            assert both(k, out_of(put, dtype), v, grid=1, block=4) is None
    for v in inexact:
        raises(oxide.InvalidArgumentError,
               rf"^kernel 'put_{dtype}', argument 2 \('v'\): {v} is not exactly representable as "
               rf"{dtype}; pass a float to have it rounded$", k, out_of(put, dtype), v,
               grid=1, block=4)
    for v in (top + (1 << 200 if dtype == "f64" else top), -2 * top, 2**2000):
        raises(oxide.ArgumentRangeError, rf"{v} is out of range for {dtype}", k,
               out_of(put, dtype), v, grid=1, block=4)


@pytest.mark.parametrize("dtype, fine, overflow", [
    ("f16", [65504.0, 65519.0, -65519.99, 1e-8], [65520.0, -1e5, 1e300]),
    ("bf16", [3.3e38, -3.38e38], [3.4e38, 1e39]),
    # f32's largest, and the doubles on each side of halfway to the next power of two
    ("f32", [3.4028234663852886e38, float.fromhex("0x1.fffffefffffffp127")],
     [float.fromhex("0x1.ffffffp127"), 1e39, -1e300]),
    ("f64", [1e308, -1.7976931348623157e308], []),
])
def test_float_ranges(put, dtype, fine, overflow):
    k = put[f"put_{dtype}"]
    for v in fine + [float("inf"), float("-inf"), float("nan")]:
        assert both(k, out_of(put, dtype), v, grid=1, block=4) is None, v
    for v in overflow:
        raises(oxide.ArgumentRangeError,
               rf"^kernel 'put_{dtype}', argument 2 \('v'\): {re.escape(repr(v))} is out of range for {dtype} "
               r"\(it would become infinite\)$", k, out_of(put, dtype), v, grid=1, block=4)
    raises(TypeError, rf"a bool \(False\) for an? {dtype} parameter; pass a float", k,
           out_of(put, dtype), False, grid=1, block=4)


def test_float_values(put):
    check_value(put, "f32", 0.1, float(np.float32(0.1)))  # rounded to f32 by the launch
    check_value(put, "f64", 0.1, 0.1)
    check_value(put, "f16", 1.0009765625, 1.0009765625)
    check_value(put, "bf16", 1.5, 1.5)


def test_scalar_objects_match_exactly(put):
    check_value(put, "u16", oxide.u16(65535), 65535)
    check_value(put, "bf16", oxide.bf16(2.0), 2.0)
    raises(oxide.InvalidArgumentError, r"^kernel 'put_i32', argument 2 \('v'\): expected i32, got "
           r"i64 \(Oxide does not convert scalars implicitly\)$", put.put_i32,
           out_of(put, "i32"), oxide.i64(1), grid=1, block=4)


def test_wrong_kinds(saxpy, put):
    x, y, o = arrays()
    raises(TypeError, r"^kernel 'saxpy', argument 4 \('alpha'\): expected an f32 scalar \(a Python "
           r"number, oxide.f32 or a numpy scalar\), got list$", saxpy, x, y, o, [1.0],
           grid=1, block=8)
    raises(TypeError, r"^kernel 'saxpy', argument 3 \('out'\): expected a tensor for "
           r"DisjointSlice<T> of f32 \(an oxide.Tensor, or an array with __dlpack__, "
           r"__cuda_array_interface__ or __array_interface__\), got a Python float \(1\.0\)$",
           saxpy, x, y, 1.0, 2.0, grid=1, block=8)
    raises(TypeError, r"argument 1 \('x'\): expected a tensor .*got str$", saxpy, "x", y, o, 2.0,
           grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"argument 4 \('alpha'\): expected a f32 scalar, got a "
           "tensor", saxpy, x, y, o, oxide.tensor([1.0], device=CPU), grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"argument 1 \('x'\): expected a tensor for &\[T\] of f32, "
           "got a scalar", saxpy, oxide.f32(1.0), y, o, 2.0, grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"argument 1 \('x'\): expected a tensor of f32, got f64",
           saxpy, np.zeros(8), y, o, 2.0, grid=1, block=8)


# ------------------------------------------------------------------ config


def test_grid_and_block_rules(saxpy):
    x, y, o = arrays()
    raises(oxide.InvalidArgumentError, r"^kernel 'saxpy' is a #\[kernel\] \(SIMT\) kernel: pass "
           r"block= with grid= \(a SIMT launch needs both", saxpy, x, y, o, 1.0, grid=1)
    raises(oxide.InvalidArgumentError, r"pass grid= with block=", saxpy, x, y, o, 1.0, block=8)
    raises(oxide.InvalidArgumentError, r"pass grid= and block= \(only #\[tile\] kernels",
           saxpy, x, y, o, 1.0)
    for bad in ((1, 1, 1, 1), (), -1, 2**32, 1.0, "1", (1, 2.0), None.__class__):
        raises(oxide.InvalidArgumentError, r"^grid must be an int or a tuple of 1 to 3 ints in "
               r"0\.\.2\*\*32-1, got ", saxpy, x, y, o, 1.0, grid=bad, block=8)
    raises(ValueError, r"^block must be", saxpy, x, y, o, 1.0, grid=1, block=[8, -1])
    for grid, block in ((1, 8), ([1], [8, 1]), ((1, 1, 1), (8, 1, 1)), (True, 8)):
        assert both(saxpy, x, y, o, 1.0, grid=grid, block=block) is None
    raises(TypeError, r"^kernel 'saxpy': stream must be an oxide.Stream, a torch.cuda.Stream, a "
           r"CuPy stream, an object with __cuda_stream__, a CUstream \(int\) or None, got str$",
           saxpy, x, y, o, 1.0, grid=1, block=8, stream="s")
    raises(TypeError, r"got bool$", saxpy, x, y, o, 1.0, grid=1, block=8, stream=True)
    # a CUDA stream (a raw handle, or an object offering one) for a CPU launch
    raises(oxide.InvalidArgumentError, r"^kernel 'saxpy': a CUDA stream cannot order work on cpu$",
           saxpy, x, y, o, 1.0, grid=1, block=8, stream=0)

    class Proto:
        def __cuda_stream__(self):
            return (0, 1234)

    raises(oxide.InvalidArgumentError, r"cannot order work on cpu", saxpy, x, y, o, 1.0, grid=1,
           block=8, stream=Proto())
    s = CPU.stream()
    assert both(saxpy, x, y, o, 1.0, grid=1, block=8, stream=s) is None


def test_tile_kernels(saxpy):
    k = oxide.compile(TILE_ADD, device=CPU, filename="add.oxk").add
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.arange(2 * n, dtype=np.float32)[::2]  # &Tensor takes any strides
    for run in paths(k):
        z = np.zeros(n, np.float32)
        run(oxide.from_dlpack(z).partition(128), x, y)
        assert z.tolist() == [3.0 * i for i in range(n)]
    z = oxide.zeros(n, device=CPU)
    raises(oxide.LaunchError, r"grid is its output partition's .*leave out grid=", k,
           z.partition(128), x, y, grid=3)
    raises(oxide.InvalidArgumentError, r"got a plain tensor", k, z, x, y)


# ------------------------------------------------------------------ numpy arrays


def test_numpy_in_place(saxpy):
    x, y, o = arrays(1000)
    before = o.ctypes.data
    both(saxpy, x, y, o, 3.0, grid=4, block=256)
    assert o.ctypes.data == before and o.tolist() == [3.0 * i + 10 for i in range(1000)]
    # views: a contiguous slice is written in place, the rest of the array is not
    big = np.zeros(16, np.float32)
    both(saxpy, x[:4], y[:4], big[4:8], 1.0, grid=1, block=4)
    assert big.tolist() == [0] * 4 + [10.0, 11.0, 12.0, 13.0] + [0] * 8


def test_numpy_errors(saxpy):
    x, y, o = arrays()
    ro = o.copy()
    ro.setflags(write=False)
    if VERSIONED:  # older numpy exports no read-only array at all (BufferError)
        raises(oxide.InvalidArgumentError, r"argument 3 \('out', DisjointSlice<T>\): the tensor "
               "is read-only", saxpy, x, y, ro, 1.0, grid=1, block=8)
        x.setflags(write=False)  # read-only inputs are fine
        assert both(saxpy, x, y, o, 1.0, grid=1, block=8) is None
    wide = np.zeros(16, np.float32)
    raises(oxide.InvalidArgumentError, r"argument 3 \('out'\): a slice parameter needs a "
           "contiguous tensor", saxpy, x, y, wide[::2], 1.0, grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"argument 3 \('out', DisjointSlice<T>\) overlaps "
           r"argument 2 \('y'\)", saxpy, x, o, o, 1.0, grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"expected a tensor of f32, got i32", saxpy, x, y,
           np.zeros(8, np.int32), 1.0, grid=1, block=8)
    raises(oxide.UnsupportedError, r"", saxpy, x, y, np.zeros(8, np.complex64), 1.0,
           grid=1, block=8)


class Legacy:
    """An array that exports only legacy capsules (no max_version)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class Interface:
    """An array known only by its __array_interface__ (or a given dict)."""

    def __init__(self, a, iface=None, cuda=False):
        self.a = a  # the memory lives as long as this object
        d = iface if iface is not None else a.__array_interface__
        setattr(self, "__cuda_array_interface__" if cuda else "__array_interface__", d)


class Used:
    """Hands out a capsule that was consumed already."""

    def __init__(self, a):
        self.cap = a.__dlpack__(max_version=(1, 1))
        oxide.from_dlpack(Used.Producer(self.cap))

    class Producer:
        def __init__(self, cap):
            self.cap = cap

        def __dlpack__(self, stream=None, max_version=None):
            return self.cap

        def __dlpack_device__(self):
            return (1, 0)

    def __dlpack__(self, stream=None, max_version=None):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("wrap", [lambda a: a, Legacy, Interface], ids=["versioned", "legacy",
                                                                         "array_interface"])
def test_foreign_paths(saxpy, wrap):
    x, y, o = arrays(300)
    both(saxpy, wrap(x), wrap(y), wrap(o), 2.0, grid=2, block=256)
    assert o.tolist() == [2.0 * i + 10 for i in range(300)]
    # strided inputs through the interface: refused for a slice as for any tensor
    raises(oxide.InvalidArgumentError, "needs a contiguous tensor", saxpy, wrap(x[::2]),
           wrap(y[:150]), wrap(o[:150]), 2.0, grid=1, block=150)


def test_array_interface_read_only_and_errors(saxpy):
    x, y, o = arrays()
    o.setflags(write=False)
    raises(oxide.InvalidArgumentError, "read-only", saxpy, x, y, Interface(o), 1.0,
           grid=1, block=8)
    o = np.zeros(8, np.float32)
    good = dict(o.__array_interface__)
    for change, msg in [
        ({"typestr": "<c8"}, r"typestr '<c8' has no Oxide dtype"),
        ({"typestr": ">f4"}, r"typestr '>f4' is not in the machine's byte order"),
        ({"data": None}, r"data must be an \(address, read-only\) tuple"),
        ({"data": (-8, False)}, r"data must be .*, the address in 0\.\.2\*\*64-1"),
        ({"data": (1 << 64, False)}, r"data must be .*, the address in 0\.\.2\*\*64-1"),
        ({"mask": o}, r"masked arrays are not supported"),
        ({"shape": (8, -1)}, r"shape must be a tuple of at most 8 ints in 0\.\.2\*\*63-1"),
        # never taken modulo 2**64 (2**64 + 8 is not 8)
        ({"shape": (2**64 + 8,)}, r"shape must be a tuple of at most 8 ints in 0\.\.2\*\*63-1"),
        ({"shape": (2**63,)}, r"shape must be a tuple of at most 8 ints in 0\.\.2\*\*63-1"),
        ({"strides": (2,)}, r"strides \(2,\) are not multiples of the element size \(4 bytes\)"),
        ({"strides": (4, 4)}, r"strides must be None or a tuple of 1 ints"),
        ({"strides": (2**64 + 4,)}, r"strides must be None or a tuple of 1 ints in "
                                    r"-2\*\*63\.\.2\*\*63-1"),
    ]:
        raises(oxide.InvalidArgumentError, r"^kernel 'saxpy', argument 3 \('out'\): "
               r"__array_interface__: " + msg, saxpy, x, y, Interface(o, {**good, **change}), 1.0,
               grid=1, block=8)
    bad = dict(good)
    del bad["typestr"]
    raises(oxide.InvalidArgumentError, r"__array_interface__: no 'typestr' entry", saxpy, x, y,
           Interface(o, bad), 1.0, grid=1, block=8)
    raises(oxide.InvalidArgumentError, r"__array_interface__: expected a dict, got list", saxpy,
           x, y, Interface(o, [1]), 1.0, grid=1, block=8)
    # one-byte types take any byte order mark; bool is "|b1"
    k = oxide.compile(PUT, device=CPU).put_u8
    u = np.zeros(4, np.uint8)
    assert both(k, Interface(u, {**u.__array_interface__, "typestr": ">u1"}), 7, grid=1,
                block=4) is None
    assert u.tolist() == [7] * 4


def test_cuda_array_interface_on_the_cpu(saxpy):
    # a __cuda_array_interface__ pointer is a CUDA device's: not usable by a
    # CPU launch (without a GPU, not usable at all); the array is released
    x, y, o = arrays()
    cai = Interface(o, dict(o.__array_interface__, version=3, stream=None), cuda=True)
    base = sys.getrefcount(cai)
    got = both(saxpy, x, y, cai, 1.0, grid=1, block=8)
    assert got is not None and issubclass(got[0], oxide.OxideError)
    if oxide.device_count("cuda") == 0:
        assert issubclass(got[0], oxide.DeviceError), got
    gc.collect()
    assert sys.getrefcount(cai) == base
    raises(oxide.InvalidArgumentError, r"__cuda_array_interface__: stream must be None or a CUDA "
           r"stream \(an int in 1\.\.2\*\*64-1\), got 0", saxpy, x, y,
           Interface(o, dict(o.__array_interface__, stream=0), cuda=True), 1.0, grid=1, block=8)


@needs_versioned
def test_used_capsule(saxpy):
    x, y, o = arrays()
    raises(ValueError, r"^__dlpack__ returned no unused DLPack capsule \(a capsule can be imported "
           r"only once\)$", saxpy, x, y, Used(o), 1.0, grid=1, block=8)


# ------------------------------------------------------------------ the C exchange API


class _Header(C.Structure):
    pass


_Header._fields_ = [("major", C.c_uint32), ("minor", C.c_uint32), ("prev", C.POINTER(_Header))]
_FROM_PY = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p))
_STREAM = C.CFUNCTYPE(C.c_int, C.c_int32, C.c_int32, C.POINTER(C.c_void_p))


class _API(C.Structure):
    _fields_ = [("header", _Header), ("allocator", C.c_void_p), ("from_py", _FROM_PY),
                ("to_py", C.c_void_p), ("dltensor_from_py", C.c_void_p), ("stream", _STREAM)]


_capi = C.pythonapi
_new_capsule = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_char_p, C.c_void_p)(
    ("PyCapsule_New", _capi))
_capsule_ptr = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_char_p)(("PyCapsule_GetPointer", _capi))
_capsule_rename = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_void_p)(("PyCapsule_SetName", _capi))
_USED = C.create_string_buffer(b"used_dltensor_versioned")  # capsules keep the name's pointer


def exchange_type(major=1, prev=None, name=b"dlpack_exchange_api", fail=False):
    """A producer type with a __dlpack_c_exchange_api__ table made with
    ctypes (on NumPy's __dlpack__), and the list its calls go to."""
    calls = []

    def from_py(obj, out):
        calls.append("from_py")
        if fail:
            return -1
        a = C.cast(C.c_void_p(obj), C.py_object).value.a
        cap = a.__dlpack__(max_version=(1, 1))
        out[0] = _capsule_ptr(cap, b"dltensor_versioned")
        _capsule_rename(cap, C.addressof(_USED))
        return 0

    def stream(kind, index, out):
        calls.append("stream")
        out[0] = None
        return 0

    api = _API()
    api.header.major, api.header.minor = major, 3
    if prev is not None:
        api.header.prev = C.pointer(prev.api.header)
    api.from_py, api.stream = _FROM_PY(from_py), _STREAM(stream)
    cap = _new_capsule(C.addressof(api), name, None)
    names = {"__dlpack_c_exchange_api__": cap, "api": api, "calls": calls,
             "keep": (from_py, stream, api.from_py, api.stream, prev),
             "__init__": lambda self, a: setattr(self, "a", a),
             "__dlpack__": lambda self, stream=None, max_version=None:
                 self.a.__dlpack__(stream=stream, max_version=max_version),
             "__dlpack_device__": lambda self: self.a.__dlpack_device__()}
    return type("Producer", (), names)


@needs_versioned
@pytest.mark.parametrize("kind", ["v1", "v2 with an older v1", "v2 alone", "another capsule"])
def test_exchange_api(saxpy, kind):
    T = {"v1": lambda: exchange_type(),
         "v2 with an older v1": lambda: exchange_type(major=2, prev=exchange_type()),
         "v2 alone": lambda: exchange_type(major=2),
         "another capsule": lambda: exchange_type(name=b"something_else")}[kind]()
    x, y, o = arrays()
    both(saxpy, T(x), T(y), T(o), 2.0, grid=1, block=8)
    assert o.tolist() == [2.0 * i + 10 for i in range(8)]
    used = T.calls if kind == "v1" else T.keep[-1].calls if kind == "v2 with an older v1" else []
    usable = kind in ("v1", "v2 with an older v1")
    assert used.count("from_py") == (3 if FAST and usable else 0)
    assert "stream" not in used  # a CPU launch needs no stream
    base = sys.getrefcount(o)
    for _ in range(100):
        saxpy(T(x), T(y), T(o), 2.0, grid=1, block=8)
    gc.collect()
    assert sys.getrefcount(o) == base


@pytest.mark.skipif(not FAST, reason="the pure path does not use the C exchange API")
def test_exchange_api_failure(saxpy):
    T = exchange_type(fail=True)
    x, y, o = arrays()
    with pytest.raises(BufferError, match="the producer gave no tensor"):
        saxpy(T(x), y, o, 1.0, grid=1, block=8)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    k = oxide.compile(SAXPY, device=CPU).saxpy
    x = torch.arange(8, dtype=torch.float32)
    y = torch.full((8,), 10.0)
    for run in paths(k):
        o = torch.zeros(8)
        run(x, y, o, 2.0, grid=1, block=8)
        assert o.tolist() == [2.0 * i + 10 for i in range(8)]
    has_api = hasattr(type(x), "__dlpack_c_exchange_api__")
    print("torch", torch.__version__, "C exchange API:", has_api)


# ------------------------------------------------------------------ lifetimes and leaks


def test_arrays_are_released(saxpy):
    x, y, o = arrays()
    refs = [sys.getrefcount(a) for a in (x, y, o)]
    for run in paths(saxpy):
        for _ in range(200):
            run(x, y, o, 1.0, grid=1, block=8)
        for _ in range(50):  # failing launches release them too
            outcome(lambda: run(x, y, o, 1.0, grid=1))
            outcome(lambda: run(x, y, o, 2**300, grid=1, block=8))
            outcome(lambda: run(x, o, o, 1.0, grid=1, block=8))
    gc.collect()
    assert [sys.getrefcount(a) for a in (x, y, o)] == refs


def test_keywords_changed_during_a_launch(saxpy):
    # C code may call a kernel with a dict it keeps (PyObject_Call): a
    # __dlpack__ that empties it must not free the other arguments under the launch
    call = C.PYFUNCTYPE(C.py_object, C.py_object, C.py_object, C.py_object)(
        ("PyObject_Call", C.pythonapi))
    x = np.arange(8, dtype=np.float32)
    d = {}

    class Clearing:
        def __dlpack__(self, stream=None, max_version=None):
            d.clear()
            return x.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return (1, 0)

    for _ in range(20):
        out = np.zeros(8, np.float32)
        d.update(x=Clearing(), y=np.full(8, 10.0, np.float32), out=out,
                 alpha=np.float32(2.0), grid=1, block=8)
        call(saxpy, (), d)
        assert out.tolist() == [2.0 * i + 10 for i in range(8)]


def test_kernel_objects_are_freed(saxpy):
    m = saxpy.module
    counts = []
    for _ in range(3):
        ks = [m.saxpy for _ in range(500)]
        assert sys.getrefcount(oxide.Kernel) >= 500  # each instance holds its type
        del ks
        gc.collect()
        counts.append(sys.getrefcount(oxide.Kernel))
    assert counts[1] == counts[2], counts  # none kept


def test_no_growth(saxpy):
    x, y, o = arrays()
    t = oxide.tensor([1.0] * 8, device=CPU)
    cai = Interface(o)

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def work(n):
        for _ in range(n):
            saxpy(x, y, o, 1.0, grid=1, block=8)
            saxpy(t, t, cai, 2, grid=1, block=8)
            outcome(lambda: saxpy(x, y, o, 1.5, out=o, grid=1, block=8))

    n = 20000 if FAST else 3000  # a leak of 100 bytes a launch shows either way
    work(n // 10)  # warm up: caches, allocator pools
    tracemalloc.start()
    work(n // 10)
    snap1, r1 = tracemalloc.take_snapshot(), rss()
    work(n)
    snap2, r2 = tracemalloc.take_snapshot(), rss()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap2.compare_to(snap1, "filename"))
    assert grown < 64 * 1024, grown  # Python objects: nothing kept per launch
    assert r2 - r1 < n * 100, r2 - r1  # C memory: nothing kept per launch


def test_threads(saxpy):
    # CPU launches release the GIL: launches from several threads at once
    errors = []

    def worker(seed):
        try:
            for j in range(200):
                x = np.full(64, float(seed), np.float32)
                o = np.zeros(64, np.float32)
                saxpy(x, x, o, float(j), grid=1, block=64)
                assert o[0] == seed * j + seed
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


# ------------------------------------------------------------------ CUDA


@pytest.mark.gpu
def test_cuda_torch_tensors_directly():
    torch = pytest.importorskip("torch")
    dev = oxide.device("cuda")
    k = oxide.compile(SAXPY, device=dev).saxpy
    n = 1 << 20
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    y = torch.full((n,), 10.0, device="cuda")
    for run in paths(k):
        o = torch.zeros(n, device="cuda")
        run(x, y, o, 2.0, grid=n // 256, block=256)
        dev.synchronize()
        assert torch.equal(o, 2 * x + 10)
        # with no stream=, the launch runs on torch's current stream (a side
        # stream here), after the producer's pending work there
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x2 = torch.full((n,), 3.0, device="cuda")
            o2 = torch.zeros(n, device="cuda")
            run(x2, y, o2, 2.0, grid=n // 256, block=256)
        side.synchronize()
        assert o2.min().item() == 16.0 and o2.max().item() == 16.0
        # and before a launch on an Oxide stream of its own
        s = dev.stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x3 = torch.full((n,), 4.0, device="cuda")
            o3 = torch.zeros(n, device="cuda")
            run(x3, y, o3, 2.0, grid=n // 256, block=256, stream=s)
        s.synchronize()
        assert o3.min().item() == 18.0 and o3.max().item() == 18.0
    print("torch", torch.__version__, "C exchange API:",
          hasattr(torch.Tensor, "__dlpack_c_exchange_api__"))


@pytest.mark.gpu
def test_cuda_array_interface():
    torch = pytest.importorskip("torch")
    dev = oxide.device("cuda")
    k = oxide.compile(SAXPY, device=dev).saxpy
    n = 1 << 20
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    y = torch.full((n,), 10.0, device="cuda")
    for run in paths(k):
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x2 = torch.full((n,), 3.0, device="cuda")
        o = torch.zeros(n, device="cuda")
        torch.cuda.synchronize()  # o's zeros are in place; x2 is not known to be
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x2.fill_(5.0)
        # only the interface's v3 "stream" says where x2's pending write is
        cai = dict(x2.__cuda_array_interface__, version=3, stream=side.cuda_stream)
        run(Interface(x2, cai, cuda=True), Interface(y, y.__cuda_array_interface__, cuda=True),
            Interface(o, o.__cuda_array_interface__, cuda=True), 2.0, grid=n // 256, block=256)
        dev.synchronize()
        assert o.min().item() == 20.0 and o.max().item() == 20.0


@pytest.mark.gpu
def test_cuda_rejects_cpu_arrays():
    dev = oxide.device("cuda")
    k = oxide.compile(SAXPY, device=dev).saxpy
    x, y, o = arrays()
    raises(oxide.InvalidArgumentError, r"argument 1 \('x'\): the tensor is on cpu, the launch on cuda:0",
           k, x, y, o, 1.0, grid=1, block=8)


def test_jax_arrays():
    """JAX arrays as kernel inputs (through __dlpack__, zero-copy), on both
    paths (as outputs: the next test)."""
    jnp = pytest.importorskip("jax.numpy")
    import jax
    k = oxide.compile(SAXPY, device=CPU).saxpy
    cpu = jax.devices("cpu")[0]  # JAX's default is a GPU where it has one
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), cpu)
    y = jax.device_put(jnp.ones(1000, dtype=jnp.float32), cpu)
    for run in paths(k):
        out = np.zeros(1000, np.float32)
        run(x, y, out, 2.0, grid=4, block=256)
        assert (out == 2 * np.arange(1000, dtype=np.float32) + 1).all()
    t = oxide.from_dlpack(x)
    assert t.data_ptr == x.unsafe_buffer_pointer()  # in place, no copy


def test_jax_arrays_are_not_outputs():
    """An immutable JAX array passed where the kernel writes is refused on
    both paths, with the reason, before anything runs."""
    jnp = pytest.importorskip("jax.numpy")
    k = oxide.compile(SAXPY, device=CPU).saxpy
    x = jnp.arange(8, dtype=jnp.float32)
    raises(oxide.InvalidArgumentError, r"^kernel 'saxpy', argument 3 \('out'\): jax(lib)?\.\w+ is "
           r"immutable, and the kernel writes this parameter", k, x, x, x, 2.0, grid=1, block=8)
    assert x.tolist() == list(range(8))
