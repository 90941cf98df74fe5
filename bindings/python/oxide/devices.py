"""Devices, and the streams and events that order work on them.

Streams and events, and the streams of other libraries.

Which stream a launch runs on (docs/python.md, "Streams"):
  - stream= given: an oxide.Stream, or another library's stream (a
    torch.cuda.Stream, a CuPy stream, anything with __cuda_stream__, or a
    raw CUstream as an int), wrapped for Oxide;
  - else, if an argument is a CUDA array of a library with a current stream
    (PyTorch, through DLPack's C exchange API or torch.cuda.current_stream;
    CuPy), that stream, so that a kernel called among torch operations runs
    in their order, inside `with torch.cuda.stream(s):` and inside a
    torch.cuda.graph capture too;
  - else the device's default stream.
A foreign array imported for a launch goes back to its library on that
library's current stream (ox_tensor_set_release_stream): the stream waits,
on the device, for the launch, as it would for one of the library's own
operations, and nothing waits on the host.

Foreign streams are wrapped once per CUstream and kept (the core interns
them too: docs/c-api.md, "Streams"); the C extension keeps the same wrappers
in its own table.
"""
from __future__ import annotations

import ctypes as C
import os
import sys
from typing import Any, Callable, Dict, Optional, Tuple, Union

from . import _decls as D
from . import _handles
from . import _sizes
from ._errors import InvalidArgumentError, _check
from ._lib import lib as _L

DeviceLike = Union["Device", str, None]
"""A Device, "cpu", "cuda" or "cuda:N"; None: oxide.default_device()."""

class Device:
    """A CPU or CUDA device. Devices live as long as the process; each is one
    object, so `oxide.device("cpu") is oxide.device("cpu")`."""

    __slots__ = ("_h", "_default_stream")
    _h: int
    _default_stream: Optional[Stream]
    _all: Dict[int, Device] = {}

    def __init__(self):
        raise TypeError("use oxide.device(...) or oxide.default_device()")

    @classmethod
    def _of(cls, handle):
        d = cls._all.get(handle)
        if d is None:
            d = object.__new__(cls)
            d._h, d._default_stream = handle, None
            cls._all[handle] = d
        return d

    @property
    def type(self) -> str:
        """"cpu" or "cuda"."""
        return "cuda" if _L.ox_device_get_type(self._h) == D.OX_DEVICE_CUDA else "cpu"

    @property
    def index(self) -> int:
        return _L.ox_device_ordinal(self._h)

    @property
    def name(self) -> str:
        """Human-readable name, e.g. "NVIDIA H200"."""
        return _L.ox_device_name(self._h).decode()

    @property
    def multiprocessors(self) -> int:
        """Streaming multiprocessors of a CUDA device (132 on an H200), or the
        CPU's worker threads: how many blocks run at once, for choosing a grid."""
        return _L.ox_device_multiprocessors(self._h)

    @property
    def compute_capability(self) -> Optional[Tuple[int, int]]:
        """(major, minor) of a CUDA device, e.g. (9, 0); None for the CPU."""
        cc = _L.ox_device_compute_capability(self._h)
        return divmod(cc, 10) if cc else None

    @property
    def default_stream(self) -> Stream:
        """The device's default stream (for CUDA, the legacy default stream)."""
        if self._default_stream is None:
            h = C.c_void_p()
            _check(_L.ox_device_stream(self._h, C.byref(h)))
            self._default_stream = Stream._make(h.value, self, owned=False)
        return self._default_stream

    def stream(self) -> Stream:
        """A new stream on this device (destroyed when garbage-collected)."""
        h = C.c_void_p()
        _check(_L.ox_stream_create(self._h, C.byref(h)))
        return Stream._make(h.value, self, owned=True)

    def synchronize(self) -> None:
        """Waits for the default stream (see Stream.synchronize)."""
        self.default_stream.synchronize()

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"oxide.device({str(self)!r})"


def device(spec: DeviceLike = None) -> Device:
    """A device from "cpu", "cuda", "cuda:N" (or a Device); None: the default."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return default_device()
    kind, _, idx = str(spec).partition(":")
    types = {"cpu": D.OX_DEVICE_CPU, "cuda": D.OX_DEVICE_CUDA}
    if kind not in types or (idx and not idx.isdigit()) or int(idx or 0) > _sizes.INT32_MAX:
        raise InvalidArgumentError(f"unknown device {spec!r}; use 'cpu', 'cuda' or 'cuda:N'")
    h = C.c_void_p()
    _check(_L.ox_device_get(types[kind], int(idx or 0), C.byref(h)))
    return Device._of(h.value)


def default_device() -> Device:
    """$OXIDE_DEVICE if set, else CUDA device 0 when a GPU is usable, else the CPU."""
    h = C.c_void_p()
    _check(_L.ox_device_default(C.byref(h)))
    return Device._of(h.value)


def device_count(type: str = "cuda") -> int:
    """Number of devices of a type ("cpu": 1; "cuda": 0 without a driver)."""
    n = C.c_int()
    t = {"cpu": D.OX_DEVICE_CPU, "cuda": D.OX_DEVICE_CUDA}[type]
    _check(_L.ox_device_count(t, C.byref(n)))
    return n.value


_as_device = device  # for functions whose `device` parameter hides the function


# ------------------------------------------------------------------ streams

# OXIDE_DEBUG_NO_STREAM_ORDERING=1: producers are asked for no ordering
# either (DLPack stream -1), so that tests can show the races it prevents
NO_ORDERING = bool(os.environ.get("OXIDE_DEBUG_NO_STREAM_ORDERING"))


class Stream(_handles.Holder):
    """An ordered queue of work on one device: one Oxide made
    (device.stream()), a device's default stream, or another library's
    stream wrapped (oxide.wrap_stream)."""

    __slots__ = ("_h", "_owned", "device", "__weakref__")
    _h: int
    _owned: bool
    _what = "oxide.Stream"

    def __init__(self):
        raise TypeError("use device.stream(), device.default_stream or oxide.wrap_stream(...)")

    @classmethod
    def _make(cls, handle, dev, owned):
        s = object.__new__(cls)
        s._h, s._owned, s.device = handle, owned, dev
        return s

    @property
    def handle(self) -> int:
        """The CUstream behind the stream, as an int (0: the legacy default
        stream, and on the CPU)."""
        return _L.ox_stream_handle(self._h) or 0

    # the CUDA stream protocol (CUDA Python, CuPy, PyTorch's ExternalStream)
    def __cuda_stream__(self) -> Tuple[int, int]:
        if self.device.type != "cuda":
            raise TypeError("a CPU stream has no CUDA stream")
        return (0, self.handle)

    def synchronize(self) -> None:
        """Waits for the queued work; raises BoundsError if a kernel on this
        stream made an out-of-bounds access since the last synchronization."""
        _check(_L.ox_stream_synchronize(self._h))

    def wait_stream(self, other: Any) -> None:
        """Later work here waits, on the device, for the work queued on
        `other` (a stream of the same device, Oxide's or another library's)
        so far."""
        _check(_L.ox_stream_wait_stream(self._h, as_stream(other, self.device)._h))

    def wait_event(self, event: "Event") -> None:
        """Later work here waits, on the device, for the work before `event`."""
        _check(_L.ox_stream_wait_event(self._h, event._h))

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        """Records `event` (a new one if None) here and returns it."""
        event = event if event is not None else Event(self.device)
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._h == self._h

    def __hash__(self) -> int:
        return hash(self._h)

    def __del__(self, _destroy=_L.ox_stream_destroy, _take=_handles.take):
        # default arguments survive interpreter shutdown, module globals may not
        if getattr(self, "_owned", False):
            h = _take(self)
            if h:
                _destroy(h)

    def __repr__(self) -> str:
        kind = "" if self._owned else " (default)"
        if self._owned == "wrapped":
            kind = f" (wraps CUstream {self.handle:#x})"
        return f"<oxide.Stream on {self.device}{kind}>"


class Event(_handles.Holder):
    """A point in a stream's work, to wait for or to time (as
    torch.cuda.Event, with timing always on)."""

    __slots__ = ("_h", "device")
    _what = "oxide.Event"

    def __init__(self, device: Any = None):
        self.device = _as_device(device)
        h = C.c_void_p()
        _check(_L.ox_event_create(self.device._h, C.byref(h)))
        self._h = h.value

    def record(self, stream: Any = None) -> None:
        """Marks the current end of `stream`'s queued work (None: the
        device's default stream)."""
        s = as_stream(stream, self.device) if stream is not None else self.device.default_stream
        _check(_L.ox_event_record(self._h, s._h))

    def wait(self, stream: Any = None) -> None:
        """Makes later work on `stream` (None: the default stream) wait for this event."""
        s = as_stream(stream, self.device) if stream is not None else self.device.default_stream
        s.wait_event(self)

    def synchronize(self) -> None:
        """Waits on the host until the work before the last record is done."""
        _check(_L.ox_event_synchronize(self._h))

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to `end` (both recorded and done)."""
        ms = C.c_float()
        _check(_L.ox_event_elapsed_ms(self._h, end._h, C.byref(ms)))
        return ms.value

    def __del__(self, _destroy=_L.ox_event_destroy, _take=_handles.take):
        h = _take(self)
        if h:
            _destroy(h)

    def __repr__(self) -> str:
        return f"<oxide.Event on {self.device}>"


def handle_of(stream):
    """The handle of an oxide.Stream argument of a tensor function (None:
    the device's default stream)."""
    if stream is None:
        return None
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be an oxide.Stream or None, got {type(stream).__name__}")
    return stream._h


# ------------------------------------------------------------------ foreign streams

_WRAPPED: Dict[Tuple[int, int], Stream] = {}  # (device handle, CUstream) -> wrapper, kept


def wrapped(dev, cu: int) -> Stream:
    """Oxide's stream for CUstream `cu` of CUDA device `dev` (0 and 1, the
    legacy default stream: the device's default stream)."""
    if cu in (0, 1):
        return dev.default_stream
    s = _WRAPPED.get((dev._h, cu))
    if s is None:
        h = C.c_void_p()
        _check(_L.ox_stream_wrap(dev._h, cu, C.byref(h)))
        s = _WRAPPED.setdefault((dev._h, cu), Stream._make(h.value, dev, "wrapped"))
    return s


def _cu_of(obj) -> Optional[int]:
    """The CUstream of another library's stream object, or None."""
    proto = getattr(type(obj), "__cuda_stream__", None)
    if proto is not None:
        v = obj.__cuda_stream__()
        if not (isinstance(v, tuple) and len(v) == 2 and type(v[1]) is int):
            raise TypeError(f"{type(obj).__name__}.__cuda_stream__() gave {v!r}, "
                            "not a (version, handle) tuple")
        return v[1]
    cu = getattr(obj, "cuda_stream", None)  # torch.cuda.Stream
    if type(cu) is int:
        return cu
    if type(obj).__module__.split(".")[0] == "cupy":  # older CuPy: no __cuda_stream__
        ptr = getattr(obj, "ptr", None)
        if type(ptr) is int:
            return ptr
    return None


def as_stream(obj, dev) -> Stream:
    """stream= of a launch (or of wait_stream) on `dev` as an oxide.Stream;
    TypeError/ValueError for what is none."""
    if isinstance(obj, Stream):
        return obj  # of another device: the core says so where it is used
    cu = obj if type(obj) is int else _cu_of(obj)
    if cu is None or isinstance(obj, bool):
        raise TypeError("stream must be an oxide.Stream, a torch.cuda.Stream, a CuPy stream, an "
                        "object with __cuda_stream__, a CUstream (int) or None, got "
                        f"{type(obj).__name__}")
    if dev.type != "cuda":
        raise ValueError(f"a CUDA stream cannot order work on {dev}")
    if not 0 <= cu < 1 << 64:
        raise ValueError(f"a CUstream handle is an int in 0..2**64-1, got {cu}")
    dev_of = getattr(obj, "device", None)  # torch.cuda.Stream knows its device
    idx = getattr(dev_of, "index", None)
    if type(idx) is int and getattr(dev_of, "type", "cuda") == "cuda" and idx != dev.index:
        raise ValueError(f"the stream is on cuda:{idx}, the launch on {dev}")
    return wrapped(dev, cu)


def wrap_stream(obj: Any, device: Any = None) -> Stream:
    """Another library's CUDA stream (a torch.cuda.Stream, a CuPy stream,
    anything with __cuda_stream__, or a CUstream as an int) as an
    oxide.Stream of `device` (None: the default device). Oxide borrows it:
    the stream must outlive the work and the tensors Oxide uses on it."""
    return as_stream(obj, _as_device(device))


# ------------------------------------------------------------------ producers' streams

_GETTERS: Dict[type, Optional[Callable[[Any], Optional[int]]]] = {}


def _torch_stream(dev):
    torch = sys.modules["torch"]
    return torch.cuda.current_stream(dev.index).cuda_stream


def _cupy_stream(dev):
    cupy = sys.modules["cupy"]
    try:
        return cupy.cuda.get_current_stream(dev.index).ptr
    except TypeError:  # a CuPy whose get_current_stream takes no device
        return cupy.cuda.get_current_stream().ptr


def stream_getter(tp: type) -> Optional[Callable[[Any], Optional[int]]]:
    """For an array type, a function giving its library's current CUstream
    on a device (PyTorch, CuPy), or None: the library has none Oxide knows."""
    try:
        return _GETTERS[tp]
    except KeyError:
        pass
    root = tp.__module__.split(".")[0]
    g = None
    if root == "torch" and "torch" in sys.modules:
        g = _torch_stream
    elif root == "cupy" and "cupy" in sys.modules:
        g = _cupy_stream
    _GETTERS[tp] = g
    return g


def producer_stream(x, dev) -> Optional[int]:
    """The current CUstream of array x's library on CUDA device `dev`, or
    None when it has none Oxide knows (or x is not a CUDA array there)."""
    g = stream_getter(type(x))
    if g is None:
        return None
    try:
        kind, index = x.__dlpack_device__()
    except (AttributeError, TypeError, ValueError):
        return None
    if kind != 2 or index != dev.index:  # kDLCUDA
        return None
    return g(dev)


def array_stream(x):
    """(known, stream): whether array x's library has a current stream Oxide
    knows on x's own CUDA device, and that stream as an oxide.Stream (None:
    the device's default stream). A launch takes it, on that device, which
    may be another GPU than the kernel's module was compiled for."""
    g = stream_getter(type(x))
    if g is None:
        return False, None
    try:
        kind, index = x.__dlpack_device__()
    except (AttributeError, TypeError, ValueError):
        return False, None
    if kind != 2:  # kDLCUDA
        return False, None
    dev = device(f"cuda:{int(index)}")
    cu = g(dev)
    if cu is None:
        return False, None
    return True, (None if cu in (0, 1) else wrapped(dev, cu))



def release_on_producer(t, x, dev, cai_stream=None) -> None:
    """Imported tensor t (of array x) goes back to x's library on that
    library's current stream (or the stream its __cuda_array_interface__
    named); unknown libraries keep the core's default (a host wait)."""
    if dev.type != "cuda":
        return
    dev = t.device  # (another GPU than the kernel's module's, maybe)
    cu = producer_stream(x, dev)
    if cu is None:
        cu = cai_stream
    if cu is not None:
        _check(_L.ox_tensor_set_release_stream(t._h, wrapped(dev, cu)._h))


def dlpack_stream_arg(stream_int: int) -> int:
    """The stream argument given to a producer's __dlpack__."""
    return -1 if NO_ORDERING else stream_int


# the classes are oxide's (messages and reprs name them so)
Device.__module__ = Stream.__module__ = Event.__module__ = "oxide"
