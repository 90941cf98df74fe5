"""Dtypes: the names of the element types kernels and tensors use, the names
other libraries (NumPy, PyTorch) give them, and the scalar classes
(oxide.f32(x), ...) that give a kernel's scalar argument an explicit dtype."""
from __future__ import annotations

import numbers
import struct
import sys
from typing import Any, Optional, Tuple, Union

from . import _decls as D
from ._errors import ArgumentRangeError, ArgumentTypeError, InvalidArgumentError
from ._lib import lib as _L

DTypeLike = Any
"""A dtype: an Oxide name ("f32"), a NumPy-style name ("float32",
"bfloat16"), a NumPy dtype or scalar type, a PyTorch dtype, an oxide
scalar class (oxide.f32) or bool."""

# The kernel language's names, in ox_dtype order, and how struct packs each
# (bf16 has no struct code: it travels as the top half of an f32). "tf32" is
# in kernels only (casts, dot operands): tensors hold f32, and Oxide refuses
# tensors of tf32, so it has neither a format nor a scalar class.
DTYPES = tuple(_L.ox_dtype_name(i).decode() for i in range(D.OX_DTYPE_COUNT))
_CODE = {name: i for i, name in enumerate(DTYPES)}
_FORMAT = {"bool": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H",
           "u32": "I", "u64": "Q", "f16": "e", "bf16": "H", "f32": "f", "f64": "d"}
_FLOATS = ("f16", "bf16", "f32", "f64")


# Other libraries' names of Oxide's dtypes: NumPy's (np.dtype(...).name,
# including ml_dtypes' "bfloat16" and "float8_*") and PyTorch's (str(dtype)
# without "torch."). Only names that say the width: "float" is float64 to
# NumPy and float32 to PyTorch, so neither library's "float", "int" or
# "half" is taken.
_ALIASES = {"bool_": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
            "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
            "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
            "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
_DTYPE_HELP = ("a dtype is one of Oxide's names ({names}), a NumPy-style name ('float32', "
               "'bfloat16', 'int64', 'bool', 'float8_e4m3fn', ...), a NumPy dtype or scalar type "
               "(np.dtype('f4'), np.float32), a PyTorch dtype (torch.float32, torch.bfloat16, ...), "
               "an oxide scalar class (oxide.f32) or bool")


def _foreign_dtype_key(dtype):
    """The name a NumPy or PyTorch dtype goes by in _ALIASES, or None.
    Neither library is imported: NumPy's objects are recognised once it is,
    PyTorch's by their type (torch.dtype) and str()."""
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(dtype, np.dtype):
            return dtype.name
        if isinstance(dtype, type) and issubclass(dtype, np.generic):
            return np.dtype(dtype).name
    cls = type(dtype)
    if cls.__name__ == "dtype" and cls.__module__ == "torch":
        name = str(dtype)
        return name[len("torch."):] if name.startswith("torch.") else name
    return None


def _dtype_name(dtype: DTypeLike) -> str:
    """Oxide's name of a dtype given any way the package takes one (see
    _DTYPE_HELP); InvalidArgumentError (a ValueError) for anything else."""
    if isinstance(dtype, str):
        name = dtype if dtype in _CODE else _ALIASES.get(dtype)
    elif isinstance(dtype, type) and issubclass(dtype, Scalar) and dtype.dtype:
        name = dtype.dtype
    elif dtype is bool:
        name = "bool"
    else:
        key = _foreign_dtype_key(dtype)
        name = key if key in _CODE else _ALIASES.get(key)
    if name is None:
        hint = ""
        if isinstance(dtype, str) and dtype in _AMBIGUOUS:
            hint = (f" ({dtype!r} means {_AMBIGUOUS[dtype]}: give the width, as "
                    f"'{dtype}32' or '{dtype}64')")
        raise InvalidArgumentError(f"unknown dtype {dtype!r}{hint}; "
                                   + _DTYPE_HELP.format(names=", ".join(DTYPES)),
                                   D.OX_ERR_INVALID_ARGUMENT)
    return name


_AMBIGUOUS = {"float": "float64 to NumPy and float32 to PyTorch",
              "int": "int64 to NumPy and int32 to PyTorch"}


def _bf16_bits(x):
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if u & 0x7FFFFFFF > 0x7F800000:
        return 0x7FC0  # NaN stays a NaN
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF  # round to nearest even, as the C side


def _bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


class Scalar:
    """A number with an explicit dtype, for scalar kernel parameters:
    oxide.f32(2.0), oxide.i32(3), oxide.u64(1 << 40), oxide.bool_(True)."""

    __slots__ = ("value",)
    value: Union[bool, int, float]
    dtype: Optional[str] = None

    def __init__(self, value: Union[bool, int, float]) -> None:
        t = self.dtype
        if t is None:
            raise TypeError("use a dtype's class: oxide.f32(x), oxide.i32(x), ...")
        if t in _FLOATS:
            if not isinstance(value, numbers.Real):
                raise ArgumentTypeError(f"oxide.{t} takes a number, got {type(value).__name__}")
            value = float(value)
        elif t == "bool":
            if value not in (0, 1) or isinstance(value, float):
                raise ArgumentTypeError(f"oxide.bool_ takes True or False, got {value!r}")
            value = bool(value)
        else:
            if not isinstance(value, numbers.Integral):
                raise ArgumentTypeError(f"oxide.{t} takes an int, got {type(value).__name__}")
            bits = int(t[1:])
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "i" else (0, (1 << bits) - 1)
            if not lo <= value <= hi:
                raise ArgumentRangeError(f"{value} is out of range for {t} ({lo}..{hi})")
            value = int(value)
        object.__setattr__(self, "value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        # checked once, when made: a changed value would reach the launch unchecked
        raise AttributeError(f"oxide.{type(self).__name__} is immutable")

    def __reduce__(self) -> Tuple[Any, ...]:
        return type(self), (self.value,)  # copies and pickles are made (and checked) anew

    def __repr__(self) -> str:
        return f"oxide.{type(self).__name__}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __hash__(self) -> int:
        return hash((self.dtype, self.value))

    def _fill(self, arg):
        arg.kind, arg.dtype = D.OX_ARG_SCALAR, _CODE[self.dtype]
        if self.dtype in _FLOATS:
            arg.v.f = self.value
        elif self.dtype[0] == "u":
            arg.v.u = self.value
        else:
            arg.v.i = int(self.value)


def _scalar_class(name, dtype):
    return type(name, (Scalar,), {"__slots__": (), "dtype": dtype, "__module__": "oxide",
                                  "__doc__": f"A {dtype} scalar argument."})


bool_ = _scalar_class("bool_", "bool")  # trailing _ as in numpy: `bool` stays the builtin
i8, i16, i32, i64 = (_scalar_class(t, t) for t in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (_scalar_class(t, t) for t in ("u8", "u16", "u32", "u64"))
f16, bf16, f32, f64 = (_scalar_class(t, t) for t in ("f16", "bf16", "f32", "f64"))
_SCALARS = {c.dtype: c for c in (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64)}

Scalar.__module__ = "oxide"  # its public home, for reprs and pickling
