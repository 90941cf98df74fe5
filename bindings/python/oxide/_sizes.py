"""The integers the package hands to liboxide as C integers: sizes, shapes,
offsets, strides, tile sizes, generics.

ctypes stores a Python int into a C integer modulo 2**64 without a word
(`oxide.zeros(2**64 + 4)` would make 4 elements), so each is checked here
first: ArgumentTypeError for what is not an int, InvalidArgumentError for a
value the call does not allow (a negative size), ArgumentRangeError (also an
OverflowError) for one beyond the C type (2**63 and up for an int64)."""
import math
import numbers
from typing import Any, Optional, Tuple

from . import _decls as D
from ._errors import ArgumentRangeError, ArgumentTypeError, InvalidArgumentError

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1

_BOUNDS = {64: "-2**63..2**63-1", 32: "-2**31..2**31-1"}


def is_int(x: Any) -> bool:
    """True for ints and int-like numbers (numpy's), False for bools."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def integer(x: Any, what: str, bits: int = 64) -> int:
    """x as a plain int that fits a signed C integer of `bits` bits."""
    if not is_int(x):
        raise ArgumentTypeError(f"{what} must be an int, got {x!r}")
    x = int(x)
    if not -(1 << (bits - 1)) <= x < 1 << (bits - 1):
        raise ArgumentRangeError(f"{what} {x} does not fit in {bits} bits ({_BOUNDS[bits]})")
    return x


def ints(v: Any, what: str, least: Optional[int] = 0) -> Tuple[int, ...]:
    """A shape (or tile, or list of dims) from an int or a sequence of ints:
    at most OX_MAX_DIMS of them, each an int64 and >= `least` (None: any
    sign). reshape's least is -1, for the one dimension it infers."""
    try:
        vals = (v,) if is_int(v) else tuple(v)
    except TypeError:
        vals = (v,)  # not a sequence: refused below
    if not all(is_int(x) for x in vals):
        raise ArgumentTypeError(f"{what} must be an int or a tuple of ints, got {v!r}")
    if len(vals) > D.OX_MAX_DIMS:
        raise InvalidArgumentError(f"{what} has {len(vals)} dimensions; Oxide has at most "
                                   f"{D.OX_MAX_DIMS}")
    out = tuple(int(x) for x in vals)
    shown = repr(v if is_int(v) or isinstance(v, (tuple, list)) else out)
    for x in out:
        if not INT64_MIN <= x <= INT64_MAX:
            at = "" if is_int(v) else f" {shown}:"
            raise ArgumentRangeError(f"{what}{at} {x} does not fit in 64 bits ({_BOUNDS[64]})")
        if least is not None and x < least:
            raise InvalidArgumentError(
                f"{what} must not be negative, got {shown}" if least == 0 else
                f"{what} {shown}: {x} is not a size (sizes are >= 0; -1 infers one)")
    if least == -1 and out.count(-1) > 1:
        raise InvalidArgumentError(f"{what} {shown}: only one dimension may be -1")
    return out


def arange_length(start: float, stop: float, step: float) -> int:
    """The number of elements of arange(start, stop, step), step != 0."""
    if not all(map(math.isfinite, (start, stop, step))):
        raise InvalidArgumentError(f"arange: start, stop and step must be finite, got {start}, "
                                   f"{stop} and {step}")
    n = max(0, math.ceil((stop - start) / step))
    if n > INT64_MAX:
        raise ArgumentRangeError(f"arange: {n} elements do not fit in a tensor (a size is at "
                                 "most 2**63-1)")
    return n
