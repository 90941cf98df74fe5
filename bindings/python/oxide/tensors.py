"""Tensors: typed, strided arrays in one device's memory, the functions that
make them (tensor, empty, zeros, full, arange, the *_like ones, from_numpy,
from_dlpack), their views, and their exchange with NumPy and DLPack."""
from __future__ import annotations

import ctypes as C
import math
import numbers
import struct
import sys
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union, overload

from . import _decls as D
from . import _dlpack
from . import _handles
from . import _sizes
from . import devices as _devices
from ._errors import InvalidArgumentError, UnsupportedError, _check
from ._lib import lib as _L
from .devices import Device, DeviceLike, Stream, device as _as_device, handle_of as _stream_handle
from .dtypes import DTYPES, DTypeLike, Scalar, _CODE, _FLOATS, _FORMAT, _bf16_bits, _bf16_value, _dtype_name

if TYPE_CHECKING:  # for the annotations only: numpy stays optional
    import numpy as np  # (as `np`: Tensor.numpy would hide `numpy` in the class)

ShapeLike = Union[int, Sequence[int]]
"""An int (one dimension) or a sequence of ints."""

class Tensor(_handles.Holder):
    """A typed, strided array in one device's memory. Holds one reference to
    the C tensor, dropped when the object is garbage-collected.

    Views (partition, slice, t[...], transpose, permute, reshape,
    broadcast_to) are new Tensors on the same memory: they keep their parent
    (`base`) alive, and writes through one are seen through the other."""

    __slots__ = ("_h", "_base", "_tile", "__weakref__")
    _h: int
    _base: Tensor
    _tile: Tuple[int, ...]
    _what = "oxide.Tensor"

    def __init__(self):
        raise TypeError("use oxide.tensor(), oxide.empty() or oxide.from_numpy()")

    @classmethod
    def _wrap(cls, handle, base=None, tile=None):
        t = object.__new__(cls)
        t._h = handle
        # the slots stay unset unless used: a plain tensor refers to nothing
        if base is not None:
            t._base = base
        if tile is not None:
            t._tile = tile
        return t

    def __del__(self, _release=_L.ox_tensor_release, _take=_handles.take):
        h = _take(self)
        if h:
            _release(h)

    @property
    def shape(self) -> Tuple[int, ...]:
        n = _L.ox_tensor_ndim(self._h)
        return tuple(_L.ox_tensor_shape(self._h)[:n])

    @property
    def ndim(self) -> int:
        return _L.ox_tensor_ndim(self._h)

    @property
    def dtype(self) -> str:
        """The element type's name: "f32", "i64", ..."""
        return DTYPES[_L.ox_tensor_dtype(self._h)]

    @property
    def device(self) -> Device:
        return Device._of(_L.ox_tensor_device(self._h))

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (numel times the element size)."""
        return _L.ox_tensor_nbytes(self._h)

    @property
    def numel(self) -> int:
        return _L.ox_tensor_numel(self._h)

    @property
    def data_ptr(self) -> int:
        """Address of the first element (a device address for CUDA tensors)."""
        return _L.ox_tensor_data(self._h) or 0

    @property
    def base(self) -> Optional[Tensor]:
        """The tensor this one is a view of (kept alive by the view), else None."""
        return getattr(self, "_base", None)

    @overload
    def stride(self) -> Tuple[int, ...]: ...

    @overload
    def stride(self, dim: int) -> int: ...

    def stride(self, dim: Optional[int] = None) -> Union[Tuple[int, ...], int]:
        """Strides in elements (as torch's stride(); never negative, 0 along
        broadcast dimensions): a tuple, or the stride of dimension `dim`."""
        st = tuple(_L.ox_tensor_strides(self._h)[:self.ndim])
        return st if dim is None else st[_dim_index(dim, len(st))]

    def is_contiguous(self) -> bool:
        """True if the elements are dense and row-major."""
        return bool(_L.ox_tensor_is_contiguous(self._h))

    @property
    def is_read_only(self) -> bool:
        """True if the tensor may not be written (a broadcast view, or a
        DLPack import marked read-only): never a kernel's mutable argument."""
        return bool(_L.ox_tensor_is_read_only(self._h))

    # ---- views: new handles on the same memory

    def _view(self, fn, *args, tile=None):
        h = C.c_void_p()
        _check(fn(self._h, *args, C.byref(h)))
        return Tensor._wrap(h.value, self, tile)

    def partition(self, tile: ShapeLike) -> Tensor:
        """This tensor cut into exclusive tiles of shape `tile` (a tuple of
        ints, one per dimension; an int for a 1-D tensor): the argument of a
        #[tile] kernel's `&mut Tensor<T, [tile]>` output. The kernel's const
        generics are bound from the tile, and its launch grid is the tile
        grid, ceil(shape / tile) per dimension (`tile_grid`). The last tiles
        of a dimension the tile does not divide are cut at the edge. Tile
        kernels take tiles of powers of two: another size is refused by the
        launch (CompileError)."""
        tile = _sizes.ints(tile, "tile")
        if len(tile) != self.ndim:
            raise InvalidArgumentError(
                f"partition: tile {list(tile)} has {len(tile)} size{'s' if len(tile) != 1 else ''} "
                f"for a tensor of {self.ndim} dimension{'s' if self.ndim != 1 else ''} (shape "
                f"{list(self.shape)}); give one size per dimension", D.OX_ERR_INVALID_ARGUMENT)
        dims = (C.c_int64 * max(len(tile), 1))(*tile)
        return self._view(_L.ox_tensor_partition, len(tile), dims, tile=tile)

    @property
    def tile(self) -> Optional[Tuple[int, ...]]:
        """The tile shape of a partition (see partition), else None."""
        return getattr(self, "_tile", None)

    @property
    def tile_grid(self) -> Optional[Tuple[int, ...]]:
        """The tile grid of a partition, ceil(shape / tile) per dimension: the
        launch grid of a tile kernel it is the output of. None if this is not
        a partition (a view of a partition is a plain tensor again)."""
        g = (C.c_int64 * D.OX_MAX_DIMS)()
        n = _L.ox_tensor_partition_grid(self._h, g)
        return tuple(g[:n]) if n else None

    def slice(self, dim: int, start: Optional[int] = None, stop: Optional[int] = None,
              step: Optional[int] = 1) -> Tensor:
        """Elements start, start+step, ... below stop along `dim`, as
        t[start:stop:step] along that dimension (negative and out-of-range
        bounds are clipped as in Python, ints beyond int64 refused:
        ArgumentRangeError; step must be > 0)."""
        dim = _dim_index(dim, self.ndim)
        if step is None:
            step = 1
        if not _sizes.is_int(step) or int(step) <= 0:
            raise InvalidArgumentError(f"slice step must be a positive int (negative strides are "
                                       f"not supported), got {step!r}")
        start, stop, step = (None if v is None else _sizes.integer(v, f"slice {w}")
                             for v, w in ((start, "start"), (stop, "stop"), (step, "step")))
        start, stop, step = slice(start, stop, step).indices(self.shape[dim])
        return self._view(_L.ox_tensor_slice, dim, start, max(stop, start), step)

    def __getitem__(self, key: Any) -> Tensor:
        """Basic indexing: ints, slices with a positive step and `...`;
        always a view (an int drops its dimension, as in numpy)."""
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")
        t, drop = self, []
        for d, k in enumerate(key):
            if isinstance(k, slice):
                if k != slice(None):
                    t = t.slice(d, k.start, k.stop, k.step)
            elif _sizes.is_int(k):
                n, i = self.shape[d], _sizes.integer(k, "index")
                if not -n <= i < n:
                    raise IndexError(f"index {k} is out of range for dimension {d} of size {n}")
                i %= n
                t = t.slice(d, i, i + 1)
                drop.append(d)
            else:
                raise IndexError(f"tensor indices are ints, slices and '...', got {k!r}")
        if drop:
            t = t.reshape(tuple(n for d, n in enumerate(t.shape) if d not in drop))
        if t is self:
            t = self.slice(0) if self.ndim else self.reshape(())
        t._base = self  # the intermediate views need not live on
        return t

    def reshape(self, *shape: Any) -> Tensor:
        """The same elements in another shape (one dimension may be -1), as a
        view: InvalidArgumentError when the strides do not allow it without a
        copy (then reshape t.contiguous())."""
        shape = _sizes.ints(shape[0] if len(shape) == 1 else shape, "shape", least=-1)
        dims = (C.c_int64 * max(len(shape), 1))(*shape)
        return self._view(_L.ox_tensor_reshape, len(shape), dims)

    def permute(self, *dims: Any) -> Tensor:
        """Dimensions reordered: result.shape[i] == self.shape[dims[i]]."""
        dims = _sizes.ints(dims[0] if len(dims) == 1 else dims, "dims", least=None)
        if len(dims) != self.ndim:
            raise ValueError(f"permute: {len(dims)} dims for a tensor of {self.ndim} dimensions")
        dims = tuple(_dim_index(d, self.ndim) for d in dims)
        return self._view(_L.ox_tensor_permute, (C.c_int * max(len(dims), 1))(*dims))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """Dimensions dim0 and dim1 swapped."""
        return self._view(_L.ox_tensor_transpose, _dim_index(dim0, self.ndim),
                          _dim_index(dim1, self.ndim))

    @property
    def T(self) -> Tensor:
        """The dimensions in reverse order (the transpose of a matrix)."""
        return self.permute(tuple(range(self.ndim))[::-1])

    def broadcast_to(self, shape: ShapeLike) -> Tensor:
        """Size-1 dimensions (and missing leading ones) repeated by stride 0;
        the result is read-only."""
        shape = _sizes.ints(shape, "shape")
        dims = (C.c_int64 * max(len(shape), 1))(*shape)
        return self._view(_L.ox_tensor_broadcast_to, len(shape), dims)

    # ---- copies

    def to(self, device: DeviceLike, stream: Optional[Stream] = None) -> Tensor:
        """A new contiguous copy on `device` (always a copy, even on this device)."""
        h = C.c_void_p()
        _check(_L.ox_tensor_to(self._h, _as_device(device)._h, _stream_handle(stream),
                               C.byref(h)))
        return Tensor._wrap(h.value)

    def contiguous(self, stream: Optional[Stream] = None) -> Tensor:
        """This tensor if it is contiguous, else a contiguous copy."""
        return self if self.is_contiguous() else self.to(self.device, stream)

    def __copy__(self) -> Tensor:
        """Another reference to the same memory (copy.copy), like a view."""
        _L.ox_tensor_retain(self._h)  # each object releases its own reference
        return Tensor._wrap(self._h, getattr(self, "_base", None), getattr(self, "_tile", None))

    def __deepcopy__(self, memo: Any) -> Tensor:
        """A new tensor with a copy of the elements (copy.deepcopy)."""
        return self.to(self.device)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- host reads. Each first synchronizes the read's stream (None: the
    # device's default) and the stream that last wrote the tensor
    # (ox_tensor_last_writer), so that a kernel's out-of-bounds access there
    # raises its BoundsError at the read, not at some later synchronize.

    def _settle(self, stream: Optional[Stream]) -> None:
        """Synchronizes the streams a host read of this tensor depends on;
        raises (and so consumes) their pending BoundsError."""
        dev = self.device
        sh = _stream_handle(stream)
        if stream is None:
            sh = dev.default_stream._h
        elif stream.device is not dev:
            sh = None  # refused by the read itself, with the C API's message
        w = C.c_void_p()
        _check(_L.ox_tensor_last_writer(self._h, C.byref(w)))
        if sh:
            _check(_L.ox_stream_synchronize(sh))
        if w.value and w.value != sh:
            _check(_L.ox_stream_synchronize(w.value))

    def _to_host(self, stream, numpy_dtype):
        """A new numpy array of `numpy_dtype` (the element type, or the
        unsigned integers of its bits) holding a copy of the elements."""
        import numpy as np

        t = self.contiguous(stream)
        arr = np.empty(self.shape, dtype=numpy_dtype)
        _check(_L.ox_tensor_to_host(t._h, _stream_handle(stream), arr.ctypes.data, arr.nbytes))
        return arr

    def tobytes(self, stream: Optional[Stream] = None) -> bytes:
        """The elements' bytes (row-major), copied after the work queued on
        `stream`; raises a pending BoundsError (see item())."""
        self._settle(stream)
        t = self.contiguous(stream)
        buf = (C.c_char * t.nbytes)()
        _check(_L.ox_tensor_to_host(t._h, _stream_handle(stream), buf, t.nbytes))
        return bytes(buf)

    def tolist(self, stream: Optional[Stream] = None) -> Any:
        """The elements as (nested) Python lists; a number for a 0-d tensor.
        bf16 and fp8 elements become floats (exactly)."""
        flat = _unpack(self.dtype, self.tobytes(stream))
        return _nest(flat, self.shape) if self.shape else flat[0]

    def item(self, stream: Optional[Stream] = None) -> Union[bool, int, float]:
        """The element of a one-element tensor (any shape, any device) as a
        Python bool, int or float (bf16 and fp8: the exact float).

        Like every host read (tolist, numpy, tobytes, np.asarray), it first
        synchronizes `stream` (None: the device's default) and the stream
        that last wrote the tensor: a pending out-of-bounds access of a
        kernel there raises BoundsError here."""
        n = self.numel
        if n != 1:
            raise ValueError(f"item() needs a tensor of one element; this one has {n} "
                             f"(shape {self.shape})")
        return _unpack(self.dtype, self.tobytes(stream))[0]

    def numpy(self, stream: Optional[Stream] = None) -> np.ndarray:
        """A new numpy array holding a copy of the elements (bf16 and fp8 have
        no numpy dtype: np.asarray(t, dtype=np.float32) converts them)."""
        own = _NUMPY.get(self.dtype)
        if own is None:
            raise TypeError(_no_numpy_dtype(self.dtype))
        self._settle(stream)
        return self._to_host(stream, own)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        """NumPy's protocol (np.asarray(t), np.array(t); NumPy 2's signature).
        A CPU tensor is viewed without a copy when none is asked for (any
        strides; the array keeps the tensor alive and is read-only when the
        tensor is); a CUDA tensor is copied to the host. bf16 and fp8 have no
        NumPy dtype: without `dtype` that is a TypeError; with one, the
        elements are converted exactly to float32, then to `dtype`.
        copy=False refuses what needs a copy (ValueError). A pending
        BoundsError is raised first (see item())."""
        import numpy as np

        dt = self.dtype
        own = _NUMPY.get(dt)
        want = None if dtype is None else np.dtype(dtype)
        if own is None and want is None:
            raise TypeError(_no_numpy_dtype(dt))
        convert = own is None or (want is not None and want != np.dtype(own))
        cpu = self.device.type == "cpu"
        if copy is False and (convert or not cpu):
            why = (f"converting {dt} to {want}" if convert else
                   f"reading a tensor on {self.device} from the host")
            raise ValueError(f"__array__(copy=False): {why} needs a copy")
        self._settle(None)
        storage = own or _BITS[dt]
        if not cpu or self.numel == 0:
            arr, copied = self._to_host(None, storage), True
        else:
            arr, copied = np.asarray(_HostMemory(self, storage)), False
        if own is None:
            arr, copied = _float32_of(dt, arr), True
        if want is not None and arr.dtype != want:
            return arr.astype(want)
        return arr.copy() if copy and not copied else arr

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """The CUDA array interface (version 3) of a CUDA tensor, for CuPy,
        Numba, PyTorch...: no copy. `stream` is the stream of the tensor's
        last write (ox_tensor_last_writer: 1 for the legacy default stream,
        2 for the per-thread one, else the CUstream; None when no write is
        pending), which a consumer waits for before it uses the memory;
        reads pending on other streams are not covered, as with DLPack.
        AttributeError for a CPU tensor, and for bf16 and fp8, which the
        interface has no typestr for: consumers then fall back (to
        __array__ or DLPack)."""
        if self.device.type != "cuda":
            raise AttributeError(f"__cuda_array_interface__: the tensor is on {self.device}, not "
                                 "a CUDA device")
        typestr = _TYPESTR.get(self.dtype)
        if typestr is None:
            raise AttributeError(f"__cuda_array_interface__ has no type for {self.dtype}; use "
                                 "DLPack (__dlpack__), which carries it")
        w = C.c_void_p()
        _check(_L.ox_tensor_last_writer(self._h, C.byref(w)))
        stream = None
        if w.value:
            stream = _L.ox_stream_handle(w.value) or 1  # NULL: the legacy default stream
        size = _L.ox_dtype_size(_CODE[self.dtype])
        return {
            "shape": self.shape, "typestr": typestr, "data": (self.data_ptr, self.is_read_only),
            "strides": None if self.is_contiguous() else tuple(x * size for x in self.stride()),
            "version": 3, "stream": stream,
        }

    def copy_from(self, data: Any, stream: Optional[Stream] = None) -> None:
        """Overwrites the elements from another Tensor (same dtype and shape;
        any device and strides), or from a buffer or (nested) list of the
        same size."""
        if isinstance(data, Tensor):
            _check(_L.ox_tensor_copy(self._h, data._h, _stream_handle(stream)))
            return
        raw = _pack(data, self.dtype)[0]
        if len(raw) != self.nbytes:
            raise ValueError(f"{len(raw)} bytes of data for a tensor of {self.nbytes} bytes")
        if not self.is_contiguous():  # through a contiguous copy on the device
            src = _new_tensor(self.device, self.dtype, self.shape, raw, stream)
            _check(_L.ox_tensor_copy(self._h, src._h, _stream_handle(stream)))
            return
        _check(_L.ox_tensor_copy_from_host(self._h, _stream_handle(stream), raw, len(raw)))

    def __repr__(self) -> str:
        if _handles.peek(self) is None:
            return "oxide.Tensor(released)"
        tile = f", tile={self.tile}" if self.tile is not None else ""
        return (f"oxide.Tensor(shape={self.shape}, dtype={self.dtype!r}, "
                f"device={str(self.device)!r}{tile})")

    def __dlpack__(self, stream: Any = None, *, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule sharing the tensor's memory (Python array API).
        stream: where the consumer will use it (CUDA: None or 1, the legacy
        default stream; 2, the per-thread one; a CUstream as an int; -1, no
        ordering); Oxide's pending writes are ordered before it. max_version
        (1, x) or later gives a versioned capsule, else a legacy one (which
        cannot carry read-only tensors: BufferError). dl_device and copy=True
        export a copy; copy=False refuses to. A CPU tensor's export is a host
        read: a pending BoundsError is raised first (see item())."""
        if self.device.type == "cpu":
            self._settle(None)  # the consumer reads the memory from the host
        return _dlpack.dlpack(self, stream, max_version=max_version, dl_device=dl_device,
                              copy=copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(DLPack device type, index): (1, 0) for the CPU, (2, n) for cuda:n."""
        return _dlpack.dlpack_device(self)


_NUMPY = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
          "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
          "f32": "float32", "f64": "float64"}
# the bits of the dtypes numpy has not, as numpy holds them
_BITS = {"bf16": "uint16", "f8e4m3": "uint8", "f8e5m2": "uint8"}
# array interface typestrs (Oxide runs on little-endian machines only)
_TYPESTR = {"bool": "|b1", "i8": "|i1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "u8": "|u1",
            "u16": "<u2", "u32": "<u4", "u64": "<u8", "f16": "<f2", "f32": "<f4", "f64": "<f8"}
_FP8 = ("f8e4m3", "f8e5m2")


def _no_numpy_dtype(dt):
    return (f"NumPy has no {dt}: np.asarray(t, dtype=np.float32) converts the elements "
            "(exactly), t.tolist() gives Python floats")


def _f8_values(dt, _tables={}):
    """The 256 values of an fp8 dtype's bytes, as floats: f8e4m3 is OCP's
    E4M3FN (bias 7, no infinities, NaN at S.1111.111), f8e5m2 is the top
    byte of an f16."""
    table = _tables.get(dt)
    if table is None:
        if dt == "f8e5m2":
            table = [struct.unpack("<e", struct.pack("<H", b << 8))[0] for b in range(256)]
        else:
            table = []
            for b in range(256):
                e, m = (b >> 3) & 15, b & 7
                v = math.nan if e == 15 and m == 7 else (m / 8 * 2.0 ** -6 if e == 0 else
                                                        (1 + m / 8) * 2.0 ** (e - 7))
                table.append(-v if b & 128 else v)
        _tables[dt] = table
    return table


def _unpack(dt, raw):
    """The elements in `raw` (row-major bytes of dtype dt) as Python numbers."""
    if dt in _FP8:
        table = _f8_values(dt)
        return [table[b] for b in raw]
    fmt = _FORMAT[dt]
    flat = list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))
    return [_bf16_value(b) for b in flat] if dt == "bf16" else flat


def _float32_of(dt, bits):
    """A float32 numpy array of the values whose bits (uint16 for bf16, uint8
    for fp8) are in `bits`: exact, as every such value is a float32."""
    import numpy as np

    if dt == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return np.array(_f8_values(dt), dtype=np.float32)[bits]


class _HostMemory:
    """NumPy's view of a CPU tensor's memory (np.asarray reads the array
    interface): the array's base, holding the tensor alive."""

    __slots__ = ("__array_interface__", "tensor")

    def __init__(self, t, numpy_dtype):
        import numpy as np

        size = np.dtype(numpy_dtype).itemsize
        self.tensor = t
        self.__array_interface__ = {
            "version": 3, "shape": t.shape, "typestr": np.dtype(numpy_dtype).str,
            "data": (t.data_ptr, t.is_read_only),
            "strides": None if t.is_contiguous() else tuple(x * size for x in t.stride()),
        }
# buffer-protocol format characters (native, standard sizes on the platforms Oxide runs on)
_BUFFER_DTYPE = {"?": "bool", "b": "i8", "h": "i16", "i": "i32", "l": "i64", "q": "i64",
                 "B": "u8", "H": "u16", "I": "u32", "L": "u64", "Q": "u64", "e": "f16",
                 "f": "f32", "d": "f64"}


def _dim_index(dim, ndim):
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"a dimension is an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise IndexError(f"dimension {dim} is out of range for a tensor of {ndim} dimensions")
    return int(dim) % ndim


def _nest(flat, shape):
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _shape_of(data):
    shape, x = [], data
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        if not x:
            break
        x = x[0]
    return tuple(shape)


def _flatten(data, shape, out):
    if len(shape) == 0:
        if isinstance(data, (list, tuple)):
            raise ValueError("ragged nested list: every row must have the same length")
        out.append(data)
        return
    if not isinstance(data, (list, tuple)) or len(data) != shape[0]:
        raise ValueError("ragged nested list: every row must have the same length")
    for x in data:
        _flatten(x, shape[1:], out)


def _pack(data, dtype):
    """(bytes, shape, dtype) of `data` as `dtype` (a name, or None: f32 for
    lists and numbers, a typed buffer's own type)."""
    if dtype == "tf32":  # no struct format to miss: say why, as the C side does
        raise InvalidArgumentError("tf32 is a compute type of kernels (casts, dot operands), not "
                                   "a tensor dtype; tensors hold f32", D.OX_ERR_INVALID_ARGUMENT)
    if dtype in _FP8 and (isinstance(data, (list, tuple, int, float, bool)) or
                          type(data).__name__ == "ndarray"):
        raise UnsupportedError(f"Oxide does not convert numbers to {dtype} (a storage-only "
                               f"dtype): pass its bytes, oxide.tensor(raw, dtype={dtype!r})",
                               D.OX_ERR_UNSUPPORTED)
    if isinstance(data, (list, tuple, int, float, bool)):
        dtype = dtype or "f32"
        shape = _shape_of(data)
        flat = []
        _flatten(data, shape, flat)
        if dtype == "bf16":
            flat = [_bf16_bits(float(x)) for x in flat]
        elif dtype in _FLOATS:
            flat = [float(x) if isinstance(x, (int, float)) else x for x in flat]
        try:
            return struct.pack(f"<{len(flat)}{_FORMAT[dtype]}", *flat), shape, dtype
        except struct.error as e:
            kind = TypeError if "not a" in str(e) else OverflowError  # "...is not an integer"
            raise kind(f"cannot store these values as {dtype}: {e}") from None
    try:
        m = memoryview(data)
    except TypeError:
        raise TypeError(f"oxide.tensor takes a list, a number or a buffer, got "
                        f"{type(data).__name__}") from None
    fmt = m.format.lstrip("@=<")
    own = _BUFFER_DTYPE.get(fmt)
    if dtype and own != dtype:
        if fmt not in ("B", "b", "c"):
            raise TypeError(f"the buffer holds {own or repr(m.format)}, not {dtype}; convert it "
                            "first (Oxide does not convert implicitly)")
        # raw bytes: reinterpret as dtype
        size = 1 if dtype in _FP8 else struct.calcsize(_FORMAT[dtype])
        if m.nbytes % size:
            raise ValueError(f"{m.nbytes} bytes is not a whole number of {dtype} elements")
        return m.tobytes(), (m.nbytes // size,), dtype
    if own is None:
        raise TypeError(f"unsupported buffer format {m.format!r}; pass dtype= with raw bytes")
    return m.tobytes(), tuple(m.shape), own


def _new_tensor(dev, dtype, shape, src, stream):
    """A tensor on `dev`: uninitialized (src None) or a copy of bytes or a numpy array."""
    dev = _as_device(dev)
    shape = _sizes.ints(shape, "shape")
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    h = C.c_void_p()
    st = _stream_handle(stream)
    if src is None:
        _check(_L.ox_tensor_empty(dev._h, st, _CODE[dtype], len(shape), dims, C.byref(h)))
    else:
        ptr, n = (src, len(src)) if isinstance(src, bytes) else (src.ctypes.data, src.nbytes)
        _check(_L.ox_tensor_from_host(dev._h, st, _CODE[dtype], len(shape), dims, ptr, n,
                                      C.byref(h)))
    return Tensor._wrap(h.value)


def tensor(data: Any, dtype: DTypeLike = None, device: DeviceLike = None,
           stream: Optional[Stream] = None) -> Tensor:
    """A tensor holding a copy of `data`: a (nested) list, a number, a buffer
    (bytes, array.array, memoryview) or a numpy array. dtype: "f32" for
    lists, the buffer's own type for typed buffers; a numpy array is
    converted to `dtype` (to bf16 by rounding to nearest even)."""
    if "numpy" in sys.modules and isinstance(data, sys.modules["numpy"].ndarray):
        if dtype is not None:
            name = _dtype_name(dtype)
            if name == "bf16":
                # numpy has no bf16: round the values to it, as Oxide does
                return _new_tensor(device, "bf16", data.shape, _bf16_array(data), stream)
            if name not in _NUMPY:
                _pack(data, name)  # tf32, fp8: refused, with the reason
            data = data.astype(_NUMPY[name])
        return from_numpy(data, device, stream)
    raw, shape, dtype = _pack(data, _dtype_name(dtype) if dtype is not None else None)
    return _new_tensor(device, dtype, shape, raw, stream)


def empty(shape: ShapeLike, dtype: DTypeLike = "f32", device: DeviceLike = None,
          stream: Optional[Stream] = None) -> Tensor:
    """An uninitialized tensor; shape is an int or a tuple."""
    return _new_tensor(device, _dtype_name(dtype), shape, None, stream)


def zeros(shape: ShapeLike, dtype: DTypeLike = "f32", device: DeviceLike = None,
          stream: Optional[Stream] = None) -> Tensor:
    """A tensor of zeros; shape is an int or a tuple."""
    shape, dev = _sizes.ints(shape, "shape"), _as_device(device)
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    h = C.c_void_p()
    _check(_L.ox_tensor_zeros(dev._h, _stream_handle(stream), _CODE[_dtype_name(dtype)],
                              len(shape), dims, C.byref(h)))
    return Tensor._wrap(h.value)


def _exact_double(value, dtype, what):
    """`value` as the double the C API takes; refuses what a double would change."""
    if isinstance(value, Scalar):
        value = value.value
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    if dtype not in _FLOATS and isinstance(value, numbers.Integral) and abs(int(value)) > 1 << 53:
        raise ValueError(f"{what} {value} is not exact as a double, which the C API takes; "
                         "fill the tensor another way")
    return float(value)


def full(shape: ShapeLike, value: float, dtype: DTypeLike = "f32", device: DeviceLike = None,
         stream: Optional[Stream] = None) -> Tensor:
    """A tensor with every element `value` (converted to dtype, as the C API
    does); shape is an int or a tuple."""
    shape, dev, dtype = _sizes.ints(shape, "shape"), _as_device(device), _dtype_name(dtype)
    dims = (C.c_int64 * max(len(shape), 1))(*shape)
    h = C.c_void_p()
    _check(_L.ox_tensor_full(dev._h, _stream_handle(stream), _CODE[dtype], len(shape), dims,
                             _exact_double(value, dtype, "value"), C.byref(h)))
    return Tensor._wrap(h.value)


def _like(x, dtype, device):
    """(shape, dtype name, device) of a *_like call: x's, unless overridden."""
    if isinstance(x, Tensor):
        shape, own, dev = x.shape, x.dtype, x.device
    else:
        shape, own = getattr(x, "shape", None), getattr(x, "dtype", None)
        if shape is None or (own is None and dtype is None):
            raise TypeError(f"expected an oxide.Tensor or an array with shape and dtype (numpy, "
                            f"PyTorch, ...), got {type(x).__name__}")
        shape = _sizes.ints(shape, "shape")
        dev = None
        if device is None and hasattr(x, "__dlpack_device__"):
            kind, index = (int(v) for v in x.__dlpack_device__())
            dev = {1: "cpu", 2: f"cuda:{index}"}.get(kind)
    return (shape, _dtype_name(own if dtype is None else dtype),
            _as_device(dev if device is None else device))


def empty_like(x: Any, dtype: DTypeLike = None, device: DeviceLike = None,
               stream: Optional[Stream] = None) -> Tensor:
    """An uninitialized contiguous tensor of x's shape, dtype and device (an
    oxide.Tensor, or an array with shape and dtype: numpy, PyTorch...; such
    an array's device is its __dlpack_device__, else the default), unless
    `dtype` or `device` says otherwise."""
    shape, dtype, dev = _like(x, dtype, device)
    return _new_tensor(dev, dtype, shape, None, stream)


def zeros_like(x: Any, dtype: DTypeLike = None, device: DeviceLike = None,
               stream: Optional[Stream] = None) -> Tensor:
    """A tensor of zeros of x's shape, dtype and device (see empty_like)."""
    shape, dtype, dev = _like(x, dtype, device)
    return zeros(shape, dtype, dev, stream)


def full_like(x: Any, value: float, dtype: DTypeLike = None, device: DeviceLike = None,
              stream: Optional[Stream] = None) -> Tensor:
    """A tensor of x's shape, dtype and device (see empty_like) with every
    element `value`."""
    shape, dtype, dev = _like(x, dtype, device)
    return full(shape, value, dtype, dev, stream)


def arange(start: float, stop: Optional[float] = None, step: float = 1,
           dtype: DTypeLike = "f32", device: DeviceLike = None,
           stream: Optional[Stream] = None) -> Tensor:
    """The 1-D tensor start, start + step, ... below stop, as numpy.arange
    (arange(n) is 0 .. n-1)."""
    if stop is None:
        start, stop = 0, start
    dtype = _dtype_name(dtype)
    start, stop, step = (_exact_double(v, dtype, w) for v, w in
                         ((start, "start"), (stop, "stop"), (step, "step")))
    if step == 0:
        raise ValueError("arange: step must not be 0")
    n = _sizes.arange_length(start, stop, step)
    h = C.c_void_p()
    _check(_L.ox_tensor_arange(_as_device(device)._h, _stream_handle(stream), _CODE[dtype], start,
                               step, n, C.byref(h)))
    return Tensor._wrap(h.value)


def _bf16_array(arr):
    """The bf16 bits (a uint16 numpy array) of arr's values rounded to nearest
    even, as _bf16_bits does for one value."""
    import numpy as np

    u = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, np.uint16(0x7FC0), bits)


def from_numpy(arr: np.ndarray, device: DeviceLike = None,
               stream: Optional[Stream] = None) -> Tensor:
    """A tensor holding a copy of a numpy array (any layout; bf16 has no numpy dtype)."""
    import numpy as np

    arr = np.ascontiguousarray(arr).reshape(np.shape(arr))  # (ascontiguousarray makes 0-d 1-d)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    names = {np.dtype(v): k for k, v in _NUMPY.items()}
    if arr.dtype not in names:
        raise TypeError(f"numpy dtype {arr.dtype} has no Oxide dtype")
    return _new_tensor(device, names[arr.dtype], arr.shape, arr, stream)


def from_dlpack(obj: Any, device: DeviceLike = None, *,
                stream: Optional[Stream] = None) -> Tensor:
    """A tensor sharing the memory of any DLPack producer (numpy, PyTorch,
    CuPy, JAX, an oxide.Tensor), without a copy unless `device` names another
    device. `stream` (an oxide.Stream; default: the device's default stream) is
    where Oxide will use the tensor: the producer orders its pending work
    before it. The producer's memory is released with the last tensor using it."""
    t = Tensor._wrap(_dlpack.take(obj, stream))
    _devices.release_on_producer(t, obj, t.device)
    if device is not None and _as_device(device) is not t.device:
        return t.to(device)
    return t


Tensor.__module__ = "oxide"
