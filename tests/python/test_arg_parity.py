"""The two launch paths treat every kind of argument alike: each case below
is passed, in one process, through the C extension (`k(...)`; the pure path
again when the extension is not loaded) and through the pure ctypes path
(`k._run(...)`), as a scalar argument, as a tensor argument that is read
and as one that is written, by position and by name; both must give the
same result (the same values written, the same array contents after) or
the same exception, type and message."""
import enum
import fractions
import re

import pytest

import oxide

np = pytest.importorskip("numpy")

CPU = oxide.device("cpu")
DTYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
          "f64")
# put_T(out, v) writes scalar v; get_T(out, v) copies slice v; each over out's elements
SOURCE = "".join(f"""
#[kernel]
fn put_{t}(out: DisjointSlice<{t}>, v: {t}) {{
    if let Some(o) = out.get_mut(thread::index_1d()) {{ *o = v; }}
}}
#[kernel]
fn get_{t}(out: DisjointSlice<{t}>, v: &[{t}]) {{
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {{ *o = v[i]; }}
}}
""" for t in DTYPES)
N = 2


@pytest.fixture(scope="module")
def mod():
    return oxide.compile(SOURCE, device=CPU, filename="parity.oxk")


class Color(enum.IntEnum):
    RED = 3


class MyFloat(float):
    pass


def _numpy_of(dt):
    """NumPy's scalar type of dtype dt (None for bf16, which NumPy has not)."""
    return np.bool_ if dt == "bool" else getattr(np, oxide.tensors._NUMPY[dt]) if dt != "bf16" else None


def released():
    t = oxide.zeros(N, device=CPU)
    t.__del__()
    return t


# Each case makes a fresh value (for the parameter's dtype, which some use):
# the two paths must not share an array one of them may write.
CASES = {
    # Python numbers
    "True": lambda dt: True, "False": lambda dt: False, "int 0": lambda dt: 0,
    "int 3": lambda dt: 3, "int -1": lambda dt: -1, "float 2.5": lambda dt: 2.5,
    "float -0.0": lambda dt: -0.0, "float 1e300": lambda dt: 1e300,
    "float nan": lambda dt: float("nan"), "float inf": lambda dt: float("inf"),
    "IntEnum": lambda dt: Color.RED, "float subclass": lambda dt: MyFloat(0.5),
    # ints at and beyond the ends of each integer dtype: refused, never wrapped
    "2**7": lambda dt: 2**7, "2**8": lambda dt: 2**8, "2**15": lambda dt: 2**15,
    "2**31": lambda dt: 2**31, "2**32": lambda dt: 2**32, "-2**31-1": lambda dt: -2**31 - 1,
    "2**53+1": lambda dt: 2**53 + 1, "2**63-1": lambda dt: 2**63 - 1, "2**63": lambda dt: 2**63,
    "2**64-1": lambda dt: 2**64 - 1, "2**64": lambda dt: 2**64, "2**64+5": lambda dt: 2**64 + 5,
    "-2**63": lambda dt: -2**63, "-2**63-1": lambda dt: -2**63 - 1, "2**200": lambda dt: 2**200,
    # numpy scalars of each dtype, and ones Oxide has no dtype for
    "np.bool_": lambda dt: np.bool_(True), "np.int8": lambda dt: np.int8(-5),
    "np.int16": lambda dt: np.int16(300), "np.int32": lambda dt: np.int32(-70000),
    "np.int64": lambda dt: np.int64(3), "np.int64 min": lambda dt: np.int64(-2**63),
    "np.uint8": lambda dt: np.uint8(200), "np.uint16": lambda dt: np.uint16(60000),
    "np.uint32": lambda dt: np.uint32(2**32 - 1), "np.uint64 max": lambda dt: np.uint64(2**64 - 1),
    "np.float16": lambda dt: np.float16(1.5), "np.float32": lambda dt: np.float32(2.0),
    "np.float64": lambda dt: np.float64(2.5), "np.longdouble": lambda dt: np.longdouble(1),
    "np.complex64": lambda dt: np.complex64(1), "np.datetime64": lambda dt: np.datetime64(1, "s"),
    "np.str_": lambda dt: np.str_("a"),
    # 0-d and 1-d numpy arrays
    "0-d f32 array": lambda dt: np.array(2.0, np.float32),
    "0-d i64 array": lambda dt: np.array(3, np.int64), "0-d bool array": lambda dt: np.array(True),
    "0-d array of the dtype": lambda dt: np.ones((), _numpy_of(dt)) if _numpy_of(dt) else None,
    "array of the dtype": lambda dt: (np.arange(1, N + 1).astype(_numpy_of(dt))
                                      if _numpy_of(dt) else oxide.full(N, 1.5, dt, CPU)),
    "f32 array": lambda dt: np.arange(N, dtype=np.float32),
    "read-only array": lambda dt: _read_only(np.arange(1, N + 1).astype(_numpy_of(dt) or "f4")),
    "2-d array": lambda dt: np.ones((N, 1), np.float32),
    # Oxide's own
    "tensor of the dtype": lambda dt: oxide.full(N, 1.0, dt, CPU),
    "f32 tensor": lambda dt: oxide.full(N, 2.0, "f32", CPU),
    "released tensor": lambda dt: released(),
    "oxide.f32": lambda dt: oxide.f32(1.0), "oxide.i64": lambda dt: oxide.i64(-3),
    "oxide.u64 max": lambda dt: oxide.u64(2**64 - 1), "oxide.bool_": lambda dt: oxide.bool_(True),
    "oxide scalar of the dtype": lambda dt: oxide.dtypes._SCALARS[dt](1),
    # wrong kinds
    "None": lambda dt: None, "str": lambda dt: "1", "bytes": lambda dt: b"\x01",
    "list": lambda dt: [1.0] * N, "tuple": lambda dt: (1,) * N, "dict": lambda dt: {},
    "complex": lambda dt: 1j, "Fraction": lambda dt: fractions.Fraction(1, 2),
    "object": lambda dt: object(), "memoryview": lambda dt: memoryview(bytearray(8)),
}


def _read_only(a):
    a.setflags(write=False)
    return a


def _out(dt):
    return oxide.zeros(N, "bf16", CPU) if dt == "bf16" else np.zeros(N, _numpy_of(dt))


def _state(x):
    """What a value holds after a launch, to compare (arrays: their contents)."""
    if isinstance(x, oxide.Tensor):  # (repr: a NaN equals the other path's NaN)
        try:
            return ("tensor", repr(x.tolist()))
        except oxide.InvalidArgumentError:
            return ("tensor", "released")
    if isinstance(x, np.ndarray):
        return ("array", repr(x.tolist()))
    return ("value", type(x).__name__)


def _run(launch, k, position, by_name, make, dt):
    """The outcome of one launch: None or the exception's (type, message),
    and what the output and the value hold afterwards."""
    value = make(dt)
    if position == "out":  # the value is what the kernel writes (put_T's out)
        args = [value, oxide.dtypes._SCALARS[dt](1)]
    else:
        args = [_out(dt), value]
    names = [p.name for p in k.params]
    try:
        if by_name:
            launch(k, **dict(zip(names, args)), grid=1, block=N)
        else:
            launch(k, *args, grid=1, block=N)
        CPU.synchronize()  # an out-of-bounds read (of a 0-d array) is this launch's outcome
        err = None
    except Exception as e:  # the point: compare what each path raises
        err = (type(e), str(e))
    return err, [_state(a) for a in args]


def extension(k, *args, **kwargs):
    k(*args, **kwargs)


def pure(k, *args, **kwargs):
    k._run(oxide._L.ox_launch, args, kwargs)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_both_paths_agree(mod, dtype, case):
    make = CASES[case]
    for position, kernel in (("scalar", "put"), ("slice", "get"), ("out", "put")):
        k = mod[f"{kernel}_{dtype}"]
        for by_name in (False, True):
            got = {f.__name__: _run(f, k, position, by_name, make, dtype)
                   for f in (extension, pure)}
            assert got["extension"] == got["pure"], (
                f"{case!r} as {position} of {k.name} ({'by name' if by_name else 'by position'}): "
                f"\n  extension: {got['extension']}\n  pure path: {got['pure']}")


def test_numpy_scalars_are_scalars(mod):
    """A numpy scalar is a value with a dtype: for a scalar parameter of that
    dtype it is that number; where a tensor goes it is refused (as a Python
    number is), never imported through its __array_interface__ as a
    temporary that a kernel could write to and lose."""
    for launch in (extension, pure):
        out = np.zeros(N, np.float32)
        launch(mod.put_f32, out, np.float32(2.5), grid=1, block=N)
        assert out.tolist() == [2.5] * N
        for k, args, i, name, want in (
                (mod.get_f32, (out, np.float32(1.0)), 2, "v", "&[T]"),
                (mod.put_f32, (np.float32(1.0), 1.0), 1, "out", "DisjointSlice<T>")):
            with pytest.raises(oxide.ArgumentTypeError,
                               match=rf"^kernel '{k.name}', argument {i} \('{name}'\): expected a "
                                     rf"tensor for {re.escape(want)} of f32 .*got numpy\.float32$"):
                launch(k, *args, grid=1, block=N)

