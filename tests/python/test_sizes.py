"""Sizes, shapes, offsets, strides, tile sizes and generics are C integers
(int64): ctypes would store 2**64 + 4 as 4, so every API that takes one
refuses what does not fit, with the binding's errors: ArgumentRangeError
(also an OverflowError) beyond the C type, InvalidArgumentError (a
ValueError) for a negative size, ArgumentTypeError (a TypeError) for what
is no int. Kernel launches check grid, block and integer scalars the same
way on both launch paths (the C extension and the pure ctypes path)."""
import copy
import pickle
import re

import pytest

import oxide

np = pytest.importorskip("numpy")

CPU = oxide.device("cpu")
BIG = [2**63, 2**64, 2**64 + 4, 2**200]  # each would wrap (2**64 + 4 to 4)
FITS = r"does not fit in 64 bits \(-2\*\*63\.\.2\*\*63-1\)"

TILE_ADD = """\
#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"""
PUT = """\
#[kernel]
fn put_u64(out: DisjointSlice<u64>, v: u64) {
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = v; }
}
#[kernel]
fn put_i64(out: DisjointSlice<i64>, v: i64) {
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = v; }
}
"""


def refused(exc, match, fn):
    with pytest.raises(exc, match=match) as info:
        fn()
    assert isinstance(info.value, oxide.OxideError), type(info.value)
    return info.value


# ------------------------------------------------------------------ constructors

CONSTRUCTORS = {
    "empty": lambda s: oxide.empty(s, device=CPU),
    "zeros": lambda s: oxide.zeros(s, device=CPU),
    "full": lambda s: oxide.full(s, 1.0, device=CPU),
    "empty_like": lambda s: oxide.empty_like(Shaped(s), device=CPU),
    "zeros_like": lambda s: oxide.zeros_like(Shaped(s), device=CPU),
    "full_like": lambda s: oxide.full_like(Shaped(s), 2.0, device=CPU),
}


class Shaped:
    """An array-like with a shape and a dtype, as the *_like functions take."""

    def __init__(self, shape):
        self.shape = shape
        self.dtype = "f32"


@pytest.mark.parametrize("make", CONSTRUCTORS.values(), ids=CONSTRUCTORS.keys())
def test_constructors_refuse_sizes_beyond_int64(make):
    assert make(4).shape == (4,) and make((2, 3)).shape == (2, 3)
    for n in BIG:
        e = refused(oxide.ArgumentRangeError, rf"^shape {n} {FITS}$", lambda: make(n))
        assert isinstance(e, OverflowError) and isinstance(e, ValueError)
        refused(oxide.ArgumentRangeError, rf"^shape \(2, {n}\): {n} {FITS}$",
                lambda: make((2, n)))
    refused(oxide.ArgumentRangeError, FITS, lambda: make(-2**64))
    refused(oxide.InvalidArgumentError, r"^shape must not be negative, got \(4, -1\)$",
            lambda: make((4, -1)))
    refused(oxide.ArgumentTypeError, r"^shape must be an int or a tuple of ints, got 2\.5$",
            lambda: make(2.5))
    refused(oxide.ArgumentTypeError, r"tuple of ints", lambda: make((2, True)))
    # the largest int64 passes the binding's check; the core refuses the size
    refused(oxide.InvalidArgumentError, r"too large", lambda: make(2**63 - 1))


def test_numpy_ints_are_sizes():
    assert oxide.zeros((np.int64(2), np.uint8(3)), device=CPU).shape == (2, 3)
    refused(oxide.ArgumentRangeError, FITS, lambda: oxide.zeros(np.uint64(2**63), device=CPU))


def test_arange():
    assert oxide.arange(2, 8, 2, dtype="i64", device=CPU).tolist() == [2, 4, 6]
    for stop in (2**64 + 4, 2**63, 2.0**70):
        refused(oxide.ArgumentRangeError, r"^arange: \d+ elements do not fit in a tensor \(a size "
                r"is at most 2\*\*63-1\)$", lambda: oxide.arange(0, stop, dtype="f64", device=CPU))
    for v in (float("inf"), float("nan")):
        refused(oxide.InvalidArgumentError, r"must be finite",
                lambda: oxide.arange(0, v, device=CPU))


# ------------------------------------------------------------------ views


def test_reshape():
    t = oxide.arange(8, device=CPU)
    assert t.reshape(2, -1).shape == (2, 4)
    for n in BIG:
        refused(oxide.ArgumentRangeError, rf"^shape {n} {FITS}$", lambda: t.reshape(n))
        refused(oxide.ArgumentRangeError, rf"^shape \({n}, 2\): {n} {FITS}$",
                lambda: t.reshape(n, 2))
    refused(oxide.InvalidArgumentError, r"^shape \(-2, -4\): -2 is not a size \(sizes are >= 0; "
            r"-1 infers one\)$", lambda: t.reshape(-2, -4))
    refused(oxide.InvalidArgumentError, r"^shape \(-1, -1\): only one dimension may be -1$",
            lambda: t.reshape(-1, -1))


def test_broadcast_to():
    t = oxide.tensor([1.0], device=CPU)
    assert t.broadcast_to((3,)).tolist() == [1.0] * 3
    for n in BIG:
        refused(oxide.ArgumentRangeError, rf"^shape \({n},\): {n} {FITS}$",
                lambda: t.broadcast_to((n,)))
    refused(oxide.InvalidArgumentError, r"must not be negative", lambda: t.broadcast_to((-1,)))


def test_partition():
    t = oxide.zeros(8, device=CPU)
    assert t.partition(4).tile_grid == (2,)
    for n in BIG:
        refused(oxide.ArgumentRangeError, rf"^tile {n} {FITS}$", lambda: t.partition(n))
    refused(oxide.InvalidArgumentError, r"^tile must not be negative, got -4$",
            lambda: t.partition(-4))


def test_slices_and_indices():
    t = oxide.arange(8, device=CPU)
    # within int64, bounds are clipped as in Python ...
    assert t[2**62:].shape == (0,) and t[-2**62:].tolist() == t.tolist()
    assert t[::2**63 - 1].tolist() == [0.0]
    # ... beyond it, refused: never taken modulo 2**64 (a step of 2**64 + 2 is not 2)
    for n in BIG:
        refused(oxide.ArgumentRangeError, rf"^slice step {n + 2} {FITS}$", lambda: t[::n + 2])
        refused(oxide.ArgumentRangeError, rf"^slice start {n} {FITS}$", lambda: t[n:])
        refused(oxide.ArgumentRangeError, rf"^slice stop -{n + 1} {FITS}$",
                lambda: t.slice(0, 0, -n - 1))
        refused(oxide.ArgumentRangeError, rf"^index {n} {FITS}$", lambda: t[n])
    with pytest.raises(IndexError):  # in range for int64, out of range for the tensor
        t[2**62]
    refused(oxide.InvalidArgumentError, r"positive", lambda: t.slice(0, 0, 4, 0))
    m = oxide.zeros((2, 3), device=CPU)
    refused(oxide.ArgumentRangeError, rf"^dims \(0, {2**64}\): {2**64} {FITS}$",
            lambda: m.permute(0, 2**64))


def test_interface_sizes_are_refused_on_both_paths():
    """A foreign array whose __array_interface__ gives a size beyond int64
    is refused, not imported with a wrapped shape (test_launch.py checks the
    messages on both paths)."""
    k = oxide.compile(PUT, device=CPU).put_u64

    class Iface:
        def __init__(self, shape):
            a = np.zeros(4, np.uint64)
            self.__array_interface__ = dict(a.__array_interface__, shape=shape)
            self.keep = a

    for run in (k, lambda *a, **kw: k._run(oxide._L.ox_launch, a, kw)):
        for shape in ((2**64 + 4,), (2**63,)):
            refused(oxide.InvalidArgumentError, r"ints in 0\.\.2\*\*63-1",
                    lambda: run(Iface(shape), 1, grid=1, block=4))


# ------------------------------------------------------------------ kernels


def test_generics():
    mod = oxide.compile(TILE_ADD, device=CPU)
    for n in BIG:
        refused(oxide.ArgumentRangeError, rf"^generic B {n} {FITS}$",
                lambda: mod.add.set_generic("B", n))
        refused(oxide.ArgumentRangeError, rf"^generic B {n} {FITS}$",
                lambda: mod.add.set_candidates([{"B": n}]))
        refused(oxide.ArgumentRangeError, rf"^generic B {n} {FITS}$",
                lambda: oxide.emit(TILE_ADD, "ir", "cpu", generics={"B": n}))
    refused(oxide.ArgumentTypeError, r"^generic B must be an int, got 2\.5$",
            lambda: mod.add.set_generic("B", 2.5))


def test_compile_options_and_devices():
    refused(oxide.ArgumentRangeError, r"^opt_level 4294967298 does not fit in 32 bits",
            lambda: oxide.compile(PUT, device=CPU, opt_level=2**32 + 2))
    refused(oxide.ArgumentRangeError, r"^arch 4294967386 does not fit in 32 bits",
            lambda: oxide.emit(PUT, "ptx", arch=f"sm_{2**32 + 90}"))
    refused(oxide.InvalidArgumentError, r"unknown device 'cuda:4294967296'",
            lambda: oxide.device(f"cuda:{2**32}"))


def both(k, *args, **kwargs):
    """The outcome of a launch on each path: the extension's (the pure
    path's again without it) and the pure path's; they must agree."""
    def outcome(fn):
        try:
            fn()
        except Exception as e:  # the point: compare what each path raises
            return type(e), str(e)
        return None
    f = outcome(lambda: k(*args, **kwargs))
    p = outcome(lambda: k._run(oxide._L.ox_launch, args, dict(kwargs)))
    assert f == p, f"extension: {f}\npure path: {p}"
    return p


@pytest.mark.parametrize("dim", [2**32, 2**63, 2**64 + 1, -1, 2**200])
def test_grid_and_block_on_both_paths(dim):
    k = oxide.compile(PUT, device=CPU).put_u64
    out = np.zeros(4, np.uint64)
    for cfg in ({"grid": dim, "block": 4}, {"grid": 1, "block": (4, dim)}):
        got = both(k, out, 1, **cfg)
        assert got is not None and got[0] is oxide.InvalidArgumentError, got
        assert re.search(r"must be an int or a tuple of 1 to 3 ints in 0\.\.2\*\*32-1", got[1])
    assert not out.any()


@pytest.mark.parametrize("dtype, lo, hi", [("u64", 0, 2**64 - 1), ("i64", -2**63, 2**63 - 1)])
def test_64_bit_scalars_on_both_paths(dtype, lo, hi):
    """An int that does not fit the parameter's type is refused, never
    wrapped (2**64 + 5 is not 5); the ends of the range arrive exactly."""
    k = oxide.compile(PUT, device=CPU)[f"put_{dtype}"]
    nt = np.uint64 if dtype == "u64" else np.int64
    for v in (lo, hi):
        for run in (k, lambda *a, **kw: k._run(oxide._L.ox_launch, a, kw)):
            out = np.zeros(4, nt)
            run(out, v, grid=1, block=4)
            assert out.tolist() == [v] * 4
    for v in (hi + 1, hi + 6, lo - 1, 2**64 + 5, -2**64 + 5, 2**200):
        got = both(k, np.zeros(4, nt), v, grid=1, block=4)
        assert got == (oxide.ArgumentRangeError, f"kernel 'put_{dtype}', argument 2 ('v'): {v} is "
                                                 f"out of range for {dtype} ({lo}..{hi})"), got
    scalar = getattr(oxide, dtype)
    refused(oxide.ArgumentRangeError, rf"^{hi + 1} is out of range for {dtype}",
            lambda: scalar(hi + 1))
    s = scalar(hi)
    with pytest.raises(AttributeError, match="immutable"):
        s.value = 2**64 + 5  # checked once, when made: it cannot change past the check
    assert s.value == hi
    assert copy.copy(s) == s and pickle.loads(pickle.dumps(s)) == s  # made anew, and checked
