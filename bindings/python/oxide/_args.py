"""Kernel launches from Python: a kernel's signature, the binding of a call's
arguments to its parameters (positional and by name), their conversion to
ox_arg values, and every message a bad launch gets.

Two paths launch kernels, with the same rules and the same errors:
  - the C extension (oxide._fast, bindings/python/src), loaded by _ext.py,
    which converts the common arguments itself and calls back into this
    module for the rare ones and to build its error messages;
  - the pure path below (ctypes), used without the extension or with
    OXIDE_PURE_PYTHON=1.
Keeping every message here makes the two paths' errors identical by
construction; tests/python/test_launch.py checks both on the same calls.

The rules (docs/python.md, "Launching kernels"):
  - arguments bind to parameters by position, then by name, as a Python
    call does; grid=, block= and stream= are the launch's own keywords;
  - a Python number for a scalar parameter takes the parameter's dtype, if
    that keeps its value: ints in range for integer dtypes, exact ints and
    finite floats that stay finite for float dtypes, bools for bool only;
    oxide.f32(x) and numpy scalars carry their dtype, which must match;
  - a tensor parameter takes an oxide.Tensor, or any array that offers
    __dlpack__, __cuda_array_interface__ or __array_interface__, imported
    without a copy for the launch and released once it is queued;
  - a #[kernel] (SIMT) launch needs grid= and block=; a #[tile] kernel
    takes neither (its output partitions give them).
"""
import collections
import ctypes as C
import struct
import sys

from . import _decls as D
from . import _dlpack
from . import _handles
from . import _sizes
from . import devices as _devices
from ._errors import (_ERRORS, ArgumentRangeError, ArgumentTypeError, InvalidArgumentError, OxideError, _check,
                      python_names)
from ._lib import lib as _L
from .dtypes import Scalar, _CODE, _SCALARS, _bf16_bits
from .tensors import Tensor, from_dlpack

# ------------------------------------------------------------------ signatures

# ox_param_kind values, by name (Param.kind) and as the core's messages write them
KINDS = {D.OX_PARAM_SCALAR: "scalar", D.OX_PARAM_SLICE: "slice", D.OX_PARAM_MUT_SLICE: "mut_slice",
         D.OX_PARAM_ATOMIC_SLICE: "atomic_slice", D.OX_PARAM_DISJOINT: "disjoint",
         D.OX_PARAM_TENSOR: "tensor", D.OX_PARAM_TILE: "tile",
         D.OX_PARAM_ATOMIC_TENSOR: "atomic_tensor"}
_SPELLING = {"slice": "&[T]", "mut_slice": "&mut [T]", "atomic_slice": "&[Atomic<T>]",
             "disjoint": "DisjointSlice<T>", "tensor": "&Tensor", "tile": "&mut Tensor",
             "atomic_tensor": "&Tensor<Atomic<T>>"}
_TILE_KINDS = ("tensor", "tile", "atomic_tensor")

Param = collections.namedtuple("Param", "name kind dtype rank writable generic", defaults=(None,))
Param.__doc__ = """One parameter of a kernel, as written: name, kind ("scalar", "slice",
"mut_slice", "atomic_slice", "disjoint", "tensor", "tile" or "atomic_tensor"),
dtype ("f32": the scalar's type or the tensor's element type), rank (tensor
parameters of tile kernels; slices 1; scalars 0), writable (True if the
kernel may write the tensor) and generic (the type generic the parameter is
written with, "T" for `x: &[T]`, else None). A generic parameter's dtype is
what numbers are passed as (f64, or i64 for `T: Int`) for a scalar, and the
bound's first dtype for a tensor: a launch takes any dtype the bound admits,
the same for every argument of one generic, and converts scalars to it."""


class Signature:
    """What a launch needs to know of a kernel, read once: its name, its
    parameters, and whether it is a #[tile] kernel (one with tensor, output
    partition or atomic tensor parameters: every tile kernel has one)."""

    __slots__ = ("kernel", "params", "names", "index", "tile", "device")

    def __init__(self, handle, device):
        self.device = device
        self.kernel = _L.ox_kernel_name(handle).decode()
        n = _L.ox_kernel_num_params(handle)
        params = []
        info = D.ox_param_info()
        for i in range(max(n, 0)):
            _check(_L.ox_kernel_param(handle, i, C.byref(info)))
            generic = _L.ox_kernel_param_generic(handle, i)
            params.append(Param(info.name.decode(), KINDS.get(info.kind, str(info.kind)),
                                _L.ox_dtype_name(info.dtype).decode(), info.rank,
                                bool(info.writable), generic.decode() if generic else None))
        self.params = tuple(params)
        self.names = tuple(p.name for p in params)
        self.index = {p.name: i for i, p in enumerate(params)}
        self.tile = any(p.kind in _TILE_KINDS for p in params)




# ------------------------------------------------------------------ messages

def _names(names):
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _what(x):
    """How a message names a value of the wrong kind."""
    t = type(x)
    if t in (bool, int, float):
        return f"a Python {t.__name__} ({x!r})"
    mod = t.__module__
    return t.__name__ if mod in ("builtins", None) else f"{mod.split('.')[0]}.{t.__name__}"


def _an(dtype):
    """'an f32', 'an i8', 'a u8', 'a bool': the article as the name is said."""
    return ("an " if dtype[0] in "fi" else "a ") + dtype


_FLOAT_MAX = {"f16": 65504, "bf16": 0xFF << 120, "f32": 0xFFFFFF << 104,
              "f64": ((1 << 53) - 1) << 971}
_MANTISSA = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}
_FLOATS = ("f16", "bf16", "f32", "f64")
_NUMBER_DTYPES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", *_FLOATS)


def _int_range(dtype):
    bits = int(dtype[1:])
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype[0] == "i" else (0, (1 << bits) - 1)


def error(sig, code, index, value=None, extra=None):
    """The exception for a launch whose arguments are wrong: `code` says
    what is wrong, `index` which parameter (-1: none), `value` the
    offending value, `extra` a detail. The C extension calls this too."""
    k = sig.kernel
    if 0 <= index < len(sig.params):
        p = sig.params[index]
        at = f"kernel '{k}', argument {index + 1} ('{p.name}'): "
    def TypeErr(msg):  # noqa: N802 (the classes, with the status of every argument error)
        return ArgumentTypeError(msg, D.OX_ERR_INVALID_ARGUMENT)

    def RangeErr(msg):  # noqa: N802
        return ArgumentRangeError(msg, D.OX_ERR_INVALID_ARGUMENT)

    def ValueErr(msg):  # noqa: N802
        return InvalidArgumentError(msg, D.OX_ERR_INVALID_ARGUMENT)

    if code == "too_many":
        listed = f" ({', '.join(sig.names)})" if sig.names else ""
        return TypeErr(f"kernel '{k}' takes {len(sig.params)} argument"
                       f"{'' if len(sig.params) == 1 else 's'}{listed}, got {value} positional")
    if code == "unexpected":
        return TypeErr(f"kernel '{k}' got an unexpected keyword argument '{value}' (its "
                       f"parameters: {', '.join(sig.names) or 'none'})")
    if code == "duplicate":
        return TypeErr(f"kernel '{k}' got multiple values for argument '{value}'")
    if code == "missing":
        missing = [n for n, given in zip(sig.names, extra) if not given]
        return TypeErr(f"kernel '{k}' takes {len(sig.params)} argument"
                       f"{'' if len(sig.params) == 1 else 's'}, got {value}: missing "
                       f"{_names(missing)}")
    if code == "dim":
        return ValueErr(f"{extra} must be an int or a tuple of 1 to 3 ints in 0..2**32-1, "
                        f"got {value!r}")
    if code == "no_config":
        return ValueErr(f"kernel '{k}' is a #[kernel] (SIMT) kernel: pass grid= and block= (only "
                        "#[tile] kernels take them from their output partitions)")
    if code == "half_config":
        given, other = extra, "block" if extra == "grid" else "grid"
        return ValueErr(f"kernel '{k}' is a #[kernel] (SIMT) kernel: pass {other}= with {given}= "
                        f"(a SIMT launch needs both: the threads of a block are never implied)")
    if code == "tiles":  # extra: what is wrong with tiles=
        return ValueErr(f"kernel '{k}': tiles={value!r}: {extra}")
    if code == "stream":  # extra: the TypeError or ValueError of _devices.as_stream
        return (ValueErr if isinstance(extra, ValueError) else TypeErr)(f"kernel '{k}': {extra}")
    if code == "bool_for":  # a bool for a number parameter
        want = "a float" if p.dtype in _FLOATS else "an int"
        return TypeErr(f"{at}a bool ({value!r}) for {_an(p.dtype)} parameter; pass {want}")
    if code == "not_bool":  # an int or float for a bool parameter
        return TypeErr(f"{at}{_what(value)} for a bool parameter; pass True or False")
    if code == "float_for_int":
        return TypeErr(f"{at}a float ({value!r}) for {_an(p.dtype)} parameter; pass an int "
                       f"(Oxide does not round implicitly)")
    if code == "int_range":
        lo, hi = _int_range(p.dtype)
        return RangeErr(f"{at}{value} is out of range for {p.dtype} ({lo}..{hi})")
    if code == "float_range":
        return RangeErr(f"{at}{value!r} is out of range for {p.dtype} (it would become infinite)")
    if code == "inexact":
        return ValueErr(f"{at}{value} is not exactly representable as {p.dtype}; pass a float "
                        f"to have it rounded")
    if code == "no_number":
        return TypeErr(f"{at}{_what(value)} cannot be {_an(p.dtype)} scalar")
    if code == "numpy_dtype":
        return TypeErr(f"{at}numpy {value.dtype} has no Oxide dtype")
    if code == "not_scalar":
        return TypeErr(f"{at}expected {_an(p.dtype)} scalar (a Python number, oxide.{p.dtype} or "
                       f"a numpy scalar), got {_what(value)}")
    if code == "not_tensor":
        return TypeErr(f"{at}expected a tensor for {_SPELLING.get(p.kind, p.kind)} of {p.dtype} "
                       f"(an oxide.Tensor, or an array with __dlpack__, "
                       f"__cuda_array_interface__ or __array_interface__), got {_what(value)}")
    if code == "interface":
        return ValueErr(f"{at}{extra}")
    if code == "released":  # extra: what was released ("tensor", "stream" or "kernel")
        if extra == "kernel":
            return ValueErr(f"kernel '{k}': {_handles.message('oxide.Module of the kernel')}")
        if extra == "stream":
            return ValueErr(f"kernel '{k}': stream=: {_handles.message('oxide.Stream')}")
        return ValueErr(f"{at}{_handles.message('oxide.Tensor')}")
    if code == "immutable":
        return ValueErr(f"{at}{_what(value)} is immutable, and the kernel writes this parameter "
                        f"({_SPELLING.get(p.kind, p.kind)}); pass an array that may be written "
                        f"(numpy, torch, an oxide.Tensor)")
    raise AssertionError(f"unknown launch error code {code!r}")


def failure(sig, status, message, config_null=False):
    """The exception for a failed C call of a launch (status, ox_last_error's
    message): the C messages speak of the launch config; say what that is
    in Python. The C extension calls this too."""
    if status == D.OX_ERR_INVALID_ARGUMENT and config_null and message.endswith(
            "launch config is NULL"):
        message = (f"kernel '{sig.kernel}' is a #[kernel] (SIMT) kernel: pass grid= and block= "
                   "(only #[tile] kernels take them from their output partitions)")
    elif "pass a NULL or zero launch config" in message:
        message += " (from Python: leave out grid= and block=)"
    elif "pass the grid in the launch config" in message:
        message += " (from Python: pass grid=, and leave out block=)"
    return _ERRORS.get(status, OxideError)(python_names(message), status)


# ------------------------------------------------------------------ numbers


def number(sig, i, x):
    """The ox_arg value of a plain Python number (bool, int or float, any
    subclass but numpy's) for scalar parameter i, or the error it gets."""
    dt = sig.params[i].dtype
    if dt not in _NUMBER_DTYPES:  # the f8 and tf32 types
        raise error(sig, "no_number", i, x)
    if dt == "bool":
        if isinstance(x, bool):
            return bool(x)
        raise error(sig, "not_bool", i, x)
    if isinstance(x, bool):
        raise error(sig, "bool_for", i, x)
    if dt in _FLOATS:
        if isinstance(x, float):
            x = float(x)
            if not _overflows(x, dt):
                return x
            raise error(sig, "float_range", i, x)
        x = int(x)
        a = abs(x)
        if a > _FLOAT_MAX[dt]:
            raise error(sig, "float_range", i, x)
        if a and (a >> ((a & -a).bit_length() - 1)).bit_length() > _MANTISSA[dt]:
            raise error(sig, "inexact", i, x)
        return float(x)
    if isinstance(x, float):
        raise error(sig, "float_for_int", i, x)
    x = int(x)
    lo, hi = _int_range(dt)
    if not lo <= x <= hi:
        raise error(sig, "int_range", i, x)
    return x


def _overflows(x, dt):
    """True if finite x becomes infinite as dtype dt, converted as the launch
    converts it (through f32 for f16 and bf16, each rounded to nearest even)."""
    if dt == "f64" or x != x or x in (_INF, -_INF):
        return False
    try:
        f = struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:  # finite, but infinite as an f32
        return True
    if dt == "f16":
        return abs(f) >= 65520.0  # rounds to the f16 infinity
    if dt == "bf16":
        return _bf16_bits(f) & 0x7FFF == 0x7F80
    return False


_INF = float("inf")


# ------------------------------------------------------------------ arguments

_NUMPY_DTYPES = {"bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                 "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
                 "float16": "f16", "float32": "f32", "float64": "f64"}


def convert_other(sig, i, x, stream):
    """Argument x of parameter i when it is none of the kinds both paths
    convert themselves (an oxide.Tensor, an oxide.Scalar, a plain bool, int
    or float for a scalar parameter, an array for a tensor parameter the C
    extension imports itself): an oxide.Tensor or oxide.Scalar to launch
    with, or the error. The C extension calls this too."""
    p = sig.params[i]
    if p.kind == "scalar":
        np = sys.modules.get("numpy")
        if np is not None and isinstance(x, np.generic):
            # a numpy scalar carries its dtype: as explicit as oxide.f32(x)
            dt = _NUMPY_DTYPES.get(x.dtype.name)
            if dt is None:
                raise error(sig, "numpy_dtype", i, x)
            return _SCALARS[dt](x.item())
        if isinstance(x, (int, float)):  # subclasses of them (bool is an int)
            return _SCALARS[p.dtype](number(sig, i, x))
        raise error(sig, "not_scalar", i, x)
    kind = type_kind(type(x))
    if kind == IMMUTABLE and p.writable:
        raise error(sig, "immutable", i, x)
    if kind != SCALAR:
        t = import_array(sig, i, x, stream)
        if t is not None:
            return t
    raise error(sig, "not_tensor", i, x)


ARRAY, IMMUTABLE, SCALAR = 0, 1, 2  # type_kind's answers


def type_kind(tp):
    """What values of type tp are to a tensor parameter: SCALAR for numbers
    (numpy scalars too: they offer __array_interface__, but are values, not
    memory a kernel may use), IMMUTABLE for arrays whose values must never
    change (JAX's: JAX exports them through DLPack without the read-only
    flag, so the producer cannot say it), else ARRAY. The C extension asks
    this once per type."""
    np = sys.modules.get("numpy")
    if issubclass(tp, (int, float, complex)) or (np is not None and issubclass(tp, np.generic)):
        return SCALAR
    return IMMUTABLE if tp.__module__.split(".")[0] in ("jax", "jaxlib") else ARRAY


def import_array(sig, i, x, stream):
    """A foreign array as an oxide.Tensor on its memory (no copy), or None
    if x is no array: __dlpack__ first, then __cuda_array_interface__, then
    __array_interface__. `stream` (None: the device's default) is where the
    launch will use it: the producer orders its pending work before it."""
    if hasattr(x, "__dlpack__"):
        return from_dlpack(x, stream=stream)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_interface(sig, i, x, cai, "__cuda_array_interface__", stream)
    ai = getattr(x, "__array_interface__", None)
    if ai is not None:
        return _from_interface(sig, i, x, ai, "__array_interface__", stream)
    return None


# typestr kind letter -> (DLPack type code, allowed sizes in bytes)
_TYPESTR = {"b": (6, (1,)), "i": (0, (1, 2, 4, 8)), "u": (1, (1, 2, 4, 8)), "f": (2, (2, 4, 8))}
_NATIVE = "<" if sys.byteorder == "little" else ">"


def parse_interface(sig, i, iface, name):
    """(shape, strides in elements or None, DLPack (code, bits), address,
    read-only, stream) of an array interface dict (NumPy's
    __array_interface__, or __cuda_array_interface__ v2/v3), or the error."""
    def bad(msg):
        return error(sig, "interface", i, None, f"{name}: {msg}")
    if not isinstance(iface, dict):
        raise bad(f"expected a dict, got {type(iface).__name__}")
    try:
        shape, typestr, data = iface["shape"], iface["typestr"], iface["data"]
    except KeyError as e:
        raise bad(f"no {e.args[0]!r} entry") from None
    if iface.get("mask") is not None:
        raise bad("masked arrays are not supported")
    if not isinstance(shape, tuple) or len(shape) > D.OX_MAX_DIMS or \
            not all(type(s) is int and 0 <= s <= _sizes.INT64_MAX for s in shape):
        raise bad(f"shape must be a tuple of at most {D.OX_MAX_DIMS} ints in 0..2**63-1, "
                  f"got {shape!r}")
    if not (isinstance(typestr, str) and len(typestr) >= 3 and typestr[1] in _TYPESTR
            and typestr[2:].isdigit() and int(typestr[2:]) in _TYPESTR[typestr[1]][1]):
        raise bad(f"typestr {typestr!r} has no Oxide dtype")
    size = int(typestr[2:])
    if typestr[0] not in ("|", "=", _NATIVE) and size > 1:
        raise bad(f"typestr {typestr!r} is not in the machine's byte order")
    if not (isinstance(data, tuple) and len(data) == 2 and type(data[0]) is int
            and 0 <= data[0] < 1 << 64 and isinstance(data[1], bool)):
        raise bad("data must be an (address, read-only) tuple, the address in 0..2**64-1")
    strides = iface.get("strides")
    if strides is not None:
        if not isinstance(strides, tuple) or len(strides) != len(shape) or \
                not all(type(s) is int and _sizes.INT64_MIN <= s <= _sizes.INT64_MAX
                        for s in strides):
            raise bad(f"strides must be None or a tuple of {len(shape)} ints in "
                      f"-2**63..2**63-1, got {strides!r}")
        if any(s % size for s in strides):
            raise bad(f"strides {strides!r} are not multiples of the element size ({size} bytes)")
        strides = tuple(s // size for s in strides)
    stream = iface.get("stream") if name == "__cuda_array_interface__" else None
    if stream is not None and (type(stream) is not int or not 0 < stream < 1 << 64):
        raise bad(f"stream must be None or a CUDA stream (an int in 1..2**64-1), got {stream!r}")
    return shape, strides, (_TYPESTR[typestr[1]][0], 8 * size), data[0], data[1], stream


_KEEP = {}  # address of a managed tensor -> (its memory, the array it keeps alive)


@C.CFUNCTYPE(None, C.c_void_p)
def _release_interface(ptr, _keep=_KEEP):
    # the deleter: Oxide is done with the memory (ctypes takes the GIL for it)
    _keep.pop(ptr, None)


def _from_interface(sig, i, x, iface, name, stream):
    shape, strides, (code, bits), addr, read_only, cu_stream = parse_interface(sig, i, iface, name)
    cuda = name == "__cuda_array_interface__"
    dev = sig.device
    m = _dlpack._Versioned()
    m.major, m.minor = _dlpack._VERSION
    m.flags = 1 if read_only else 0  # DLPACK_FLAG_BITMASK_READ_ONLY
    t = m.dl_tensor
    t.data = addr or None
    # the interface names no device: a CUDA pointer is taken to be on the
    # launch's device (a CUDA launch on another device fails to run with it)
    t.device_type = _dlpack.kDLCUDA if cuda else _dlpack.kDLCPU
    t.device_id = dev.index if cuda and dev.type == "cuda" else 0
    t.ndim, t.code, t.bits, t.lanes = len(shape), code, bits, 1
    dims = (C.c_int64 * D.OX_MAX_DIMS)(*shape)
    st = (C.c_int64 * D.OX_MAX_DIMS)(*strides) if strides is not None else None
    t.shape = C.addressof(dims)
    t.strides = C.addressof(st) if st is not None else None
    m.deleter = C.cast(_release_interface, C.c_void_p)
    ptr = C.addressof(m)
    _KEEP[ptr] = (m, dims, st, x)
    if cuda and cu_stream is not None and dev.type == "cuda":
        _wait_for(dev, stream, cu_stream)
    h = C.c_void_p()
    _check(_dlpack._from_dlpack(ptr, 1, C.byref(h)))  # Oxide owns it now, even on failure
    t = Tensor._wrap(h.value)
    if cuda:
        _devices.release_on_producer(t, x, dev, cu_stream)
    return t


def _wait_for(dev, stream, cu_stream):
    """Makes the launch's stream wait, on the GPU, for the work queued on
    CUDA stream cu_stream (a __cuda_array_interface__'s "stream": 1 the
    legacy default stream, 2 the per-thread one, else a CUstream)."""
    if _devices.NO_ORDERING:
        return
    s = stream if stream is not None else dev.default_stream
    if (s.handle or 1) != cu_stream:  # NULL is the legacy default stream
        _check(_L.ox_stream_wait_stream(s._h, _devices.wrapped(dev, cu_stream)._h))


# ------------------------------------------------------------------ the pure path


def bind(sig, args, kwargs):
    """The arguments in parameter order, or the error (as a Python call)."""
    n = len(sig.params)
    if len(args) > n:
        raise error(sig, "too_many", -1, len(args))
    if not kwargs:
        if len(args) == n:
            return args
        bound = list(args) + [_MISSING] * (n - len(args))
    else:
        bound = list(args) + [_MISSING] * (n - len(args))
        for key, value in kwargs.items():
            j = sig.index.get(key)
            if j is None:
                raise error(sig, "unexpected", -1, key)
            if bound[j] is not _MISSING:
                raise error(sig, "duplicate", -1, key)
            bound[j] = value
    if any(v is _MISSING for v in bound):
        given = [v is not _MISSING for v in bound]
        raise error(sig, "missing", -1, sum(given), given)
    return bound


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def dim3(sig, v, what):
    """A grid or block as 3 ints, or the error."""
    if isinstance(v, int):
        dims = (v,)
    elif isinstance(v, (tuple, list)):
        dims = tuple(v)
    else:
        raise error(sig, "dim", -1, v, what)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and 0 <= d < 1 << 32 for d in dims):
        raise error(sig, "dim", -1, v, what)
    return (*dims, *(1,) * (3 - len(dims)))


def config(sig, grid, block):
    """The ox_launch_config of a launch, or None for a NULL one, or the error."""
    g = None if grid is None else dim3(sig, grid, "grid")
    b = None if block is None else dim3(sig, block, "block")
    if not sig.tile:
        if g is None and b is None:
            raise error(sig, "no_config", -1)
        if g is None or b is None:
            raise error(sig, "half_config", -1, None, "grid" if g is not None else "block")
    if g is None and b is None:
        # no config at all (a NULL one): a tile kernel takes it as zeros
        return None
    zero = (0, 0, 0)
    return D.ox_launch_config((C.c_uint32 * 3)(*(g or zero)), (C.c_uint32 * 3)(*(b or zero)))


def call_stream(sig, values, stream):
    """The stream of a launch of signature `sig` (an oxide.Stream; None: the
    device's default) by the rule in devices.py's docstring."""
    dev = sig.device
    if stream is not None:
        try:
            return _devices.as_stream(stream, dev)
        except (TypeError, ValueError) as e:
            raise error(sig, "stream", -1, stream, e) from None
    if dev.type != "cuda":
        return None
    for p, x in zip(sig.params, values):
        if p.kind != "scalar" and not isinstance(x, Tensor):
            known, s = _devices.array_stream(x)
            if known:
                return s
    return None


def with_tiles(sig, values, tiles, stream):
    """The arguments `values` with each output of a tile kernel (a `&mut
    Tensor` parameter) that is passed whole, an array or an oxide.Tensor,
    cut into the tiles of `tiles=`: one tile shape for every output (a tuple
    of ints, or an int for 1-D ones), or a dict {parameter name: tile shape}
    for some of them. A list. The C extension calls this too."""
    outs = [i for i, p in enumerate(sig.params) if p.kind == "tile"]
    if not outs:
        raise error(sig, "tiles", -1, tiles, "it has no `&mut Tensor` output to cut")
    if isinstance(tiles, collections.abc.Mapping):
        names = {sig.params[i].name for i in outs}
        for name in tiles:
            if name not in names:
                raise error(sig, "tiles", -1, tiles,
                            f"{name!r} is not one of its outputs ({', '.join(sorted(names))})")
    out = list(values)
    for i in outs:
        tile = tiles.get(sig.params[i].name) if isinstance(tiles, collections.abc.Mapping) else tiles
        if tile is None:
            continue
        x = out[i]
        if not isinstance(x, Tensor):
            x = convert_other(sig, i, x, stream)
        if x.tile is not None:
            raise error(sig, "tiles", i, x, f"output {sig.params[i].name!r} is already a partition "
                        f"(tile {list(x.tile)}): pass it whole, or leave out tiles=")
        out[i] = x.partition(tile)
    return out


def prepare(sig, args, kwargs, grid, block, stream, tiles=None):
    """(config, ox_arg array, stream handle, temporaries) of a launch; the
    temporaries (tensors imported for it) are to be dropped once the launch
    is queued."""
    values = bind(sig, args, kwargs)
    cfg = config(sig, grid, block)
    stream = call_stream(sig, values, stream)  # an oxide.Stream, or None
    temps = []
    if tiles is not None:
        values = with_tiles(sig, values, tiles, stream)
        temps = [x for p, x in zip(sig.params, values) if p.kind == "tile"]  # the partitions made
    sh = None
    if stream is not None:
        sh = _handles.peek(stream)
        if sh is None:
            raise error(sig, "released", -1, stream, "stream")
    argv = (D.ox_arg * max(len(values), 1))()
    for i, x in enumerate(values):
        a = argv[i]
        if not isinstance(x, (Tensor, Scalar)):
            p = sig.params[i]
            t = type(x)
            if p.kind == "scalar" and (t is float or t is int or t is bool):
                _fill(a, p.dtype, number(sig, i, x))
                continue
            x = convert_other(sig, i, x, stream)
            if isinstance(x, Tensor):
                temps.append(x)
        if isinstance(x, Tensor):
            h = _handles.peek(x)
            if h is None:
                raise error(sig, "released", i, x, "tensor")
            a.kind, a.dtype, a.v.tensor = D.OX_ARG_TENSOR, D.OX_F32, h
        else:
            x._fill(a)
    return cfg, argv, len(values), sh, temps


def _fill(a, dtype, value):
    a.kind, a.dtype = D.OX_ARG_SCALAR, _CODE[dtype]
    if dtype in _FLOATS:
        a.v.f = value
    elif dtype[0] == "u":
        a.v.u = value
    else:
        a.v.i = int(value)
