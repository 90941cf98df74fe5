"""DLPack for Python: Tensor.__dlpack__, Tensor.__dlpack_device__ and
oxide.from_dlpack, a thin layer over ox_tensor_to_dlpack and
ox_tensor_from_dlpack (the stream rule is the C API's: docs/c-api.md, "DLPack").

Capsules follow the Python array API standard: a producer returns a capsule
named "dltensor_versioned" (DLPack 1.x) or "dltensor" (legacy) holding the
managed tensor; the consumer renames it "used_..." when it takes the tensor
over, so the capsule's destructor calls the deleter only for a capsule nobody
consumed. Oxide's capsules are made by the C extension (capsule.c), whose
destructor also works while a consumer's exception is pending; without the
extension, by _Unclaimed below.
"""
import atexit
import ctypes as C
import gc
import sys
import threading

from . import _decls as D
from . import _ext
from . import devices as _devices
from ._errors import _check
from ._lib import lib as _L

# ------------------------------------------------------------ the C side

kDLCPU, kDLCUDA = 1, 2
_VERSION = (1, 1)  # dlpack/dlpack.h: DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION
_IS_COPIED = 1 << 1


class _DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device_type", C.c_int32), ("device_id", C.c_int32),
                ("ndim", C.c_int32), ("code", C.c_uint8), ("bits", C.c_uint8),
                ("lanes", C.c_uint16), ("shape", C.c_void_p), ("strides", C.c_void_p),
                ("byte_offset", C.c_uint64)]


class _Legacy(C.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", C.c_void_p), ("deleter", C.c_void_p)]


class _Versioned(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32), ("manager_ctx", C.c_void_p),
                ("deleter", C.c_void_p), ("flags", C.c_uint64), ("dl_tensor", _DLTensor)]


_DELETER = C.CFUNCTYPE(None, C.c_void_p)


class _proto:
    """A liboxide function with a private prototype (lib[name] is a new
    function object), looked up at its first call: importing oxide never
    depends on these symbols or on the generated table (_decls) holding them."""

    def __init__(self, name, restype, *argtypes):
        self.name, self.types, self.fn = name, (restype, list(argtypes)), None

    def __call__(self, *args):
        if self.fn is None:
            fn = _L[self.name]
            fn.restype, fn.argtypes = self.types
            self.fn = fn
        return self.fn(*args)


_P = C.POINTER(C.c_void_p)
_to_dlpack = _proto("ox_tensor_to_dlpack", C.c_int, C.c_void_p, C.c_void_p, C.c_int, _P)
_from_dlpack = _proto("ox_tensor_from_dlpack", C.c_int, C.c_void_p, C.c_int, _P)
_stream_handle = _proto("ox_stream_handle", C.c_void_p, C.c_void_p)
_per_thread_stream = _proto("ox_device_per_thread_stream", C.c_int, C.c_void_p, _P)
_tensor_to = _proto("ox_tensor_to", C.c_int, C.c_void_p, C.c_void_p, C.c_void_p, _P)

# The Python C API, with prototypes of our own (ctypes.pythonapi's function
# objects are shared with every other user in the process). PYFUNCTYPE keeps
# the GIL held during the call.
_capi = C.pythonapi
_capsule_new = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_void_p, C.c_void_p)(("PyCapsule_New", _capi))
_is_valid = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_void_p)(("PyCapsule_IsValid", _capi))
_get_pointer = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_void_p)(("PyCapsule_GetPointer", _capi))
_set_name = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_void_p)(("PyCapsule_SetName", _capi))


_KEEP: list = []  # the buffers of _forever, which live as long as the process


def _forever(text):
    """A C string that is never freed: a capsule keeps its name's pointer,
    and a capsule may outlive this module (at interpreter exit)."""
    buf = C.create_string_buffer(text)
    _KEEP.append(buf)
    return C.addressof(buf)


_NAME = {1: _forever(b"dltensor_versioned"), 0: _forever(b"dltensor")}
_USED = {1: _forever(b"used_dltensor_versioned"), 0: _forever(b"used_dltensor")}


def _call_deleter(ptr, versioned, _types=(_Legacy, _Versioned), _fn=_DELETER):
    m = _types[versioned].from_address(ptr)
    if m.deleter:
        _fn(m.deleter)(ptr)


def _capsule(ptr, versioned):
    """The capsule of an export: it owns the managed tensor at `ptr` until a
    consumer renames it "used_..."."""
    if _ext.FAST is not None:
        # a C destructor, which a consumer's pending exception does not stop
        # (bindings/python/src/capsule.c); deletes the tensor if it fails
        return _ext.FAST.dlpack_capsule(ptr, versioned)
    return _unclaimed.capsule(ptr, versioned)


class _Unclaimed:
    """Capsules of the pure path (no C extension), which have no destructor.

    A destructor written in Python (a ctypes callback) cannot work: a
    consumer that refuses a tensor after taking its capsule (NumPy, for bf16
    and fp8) drops the capsule while its own exception is pending, and the
    callback then fails at its first call, never freeing the tensor and
    losing the consumer's exception. So the pure path keeps every capsule it
    makes in a list, and deletes the tensor of each that only the list still
    refers to and that nobody consumed: at the next export, at each garbage
    collection (gc.callbacks) and at exit. An abandoned capsule's tensor thus
    lives a little longer than the capsule, never forever."""

    def __init__(self):
        self.entries = []  # (capsule, address, versioned)
        self.lock = threading.Lock()
        self.hooked = False
        # the reference count that `alone` sees for a capsule only an entry
        # holds, measured the same way (a constant of the interpreter)
        self.alone = self.refs((object(),))

    @staticmethod
    def refs(entry, _count=sys.getrefcount):
        return _count(entry[0])

    def capsule(self, ptr, versioned):
        self.collect()
        try:
            cap = _capsule_new(ptr, _NAME[versioned], None)
        except BaseException:
            _call_deleter(ptr, versioned)
            raise
        with self.lock:
            self.entries.append((cap, ptr, versioned))
            if not self.hooked:
                self.hooked = True
                gc.callbacks.append(self._gc)
                atexit.register(self._exit)
        return cap

    def _gc(self, phase, info):
        if phase == "stop":
            self.collect()

    def _exit(self):
        gc.callbacks.remove(self._gc)  # later collections may find the module gone
        self.collect()

    def collect(self):
        """Deletes the tensors of the capsules nobody refers to or consumed.
        Skipped while another collect runs, in this thread (a garbage
        collection triggered inside one) or another: the next one does it."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            dead = [e for e in self.entries if self.refs(e) <= self.alone]
            if dead:
                self.entries = [e for e in self.entries if self.refs(e) > self.alone]
        finally:
            self.lock.release()
        # outside the lock: a deleter may drop a producer's array, whose
        # finalizers may export again
        for cap, ptr, versioned in dead:
            if _is_valid(cap, _NAME[versioned]):  # renamed: the consumer owns it
                _call_deleter(ptr, versioned)


_unclaimed = _Unclaimed()


# ------------------------------------------------------------ streams



def _consumer_stream(dev, stream):
    """The Oxide stream behind a __dlpack__ stream argument. Array API values
    for CUDA: None or 1, the legacy default stream; 2, the per-thread default
    stream; -1, no ordering; another int, a CUstream handle (wrapped once
    and kept: the consumer's later reads are then ordered before Oxide's
    later writes). CPU work is done when queued: nothing to order."""
    if isinstance(stream, _devices.Stream):
        if stream.device is not dev:
            raise BufferError(f"the consumer's stream is on {stream.device}, the tensor on {dev}")
        return stream._h
    if dev.type == "cpu" or stream == -1:
        return None
    if stream is None or stream == 1:
        return dev.default_stream._h
    if not isinstance(stream, int) or isinstance(stream, bool) or not 0 <= stream < 1 << 64:
        raise TypeError(f"stream must be None, -1, 1, 2 or a CUDA stream handle (int), got {stream!r}")
    if stream == 0:
        raise ValueError("stream=0 is ambiguous and not allowed by the DLPack protocol; "
                         "pass 1 for the legacy default stream or 2 for the per-thread one")
    if stream == 2:
        h = C.c_void_p()
        _check(_per_thread_stream(dev._h, C.byref(h)))
        return h.value
    return _devices.wrapped(dev, stream)._h


def _stream_int(dev, stream):
    """The array API stream value naming Oxide's stream `stream` (None: the
    device's default stream) to a producer."""
    s = stream if stream is not None else dev.default_stream
    if not isinstance(s, _devices.Stream) or s.device is not dev:
        raise ValueError(f"stream must be an oxide.Stream of {dev}")
    return _devices.dlpack_stream_arg(_stream_handle(s._h) or 1)  # NULL: the legacy default


# ------------------------------------------------------------ export


def _device_of(dl_device):
    kind, index = (int(x) for x in dl_device)
    if kind == kDLCPU:
        return _devices.device("cpu")
    if kind == kDLCUDA:
        return _devices.device(f"cuda:{index}")
    raise BufferError(f"Oxide cannot export to DLPack device type {kind}")


def dlpack(self, stream=None, *, max_version=None, dl_device=None, copy=None):
    versioned = int(max_version is not None and int(max_version[0]) >= 1)
    src, target = self, self.device
    if dl_device is not None and tuple(int(x) for x in dl_device) != self.__dlpack_device__():
        if copy is False:
            raise BufferError(f"exporting to DLPack device {tuple(dl_device)} needs a copy of the "
                              f"tensor on {self.device}, and copy=False forbids it")
        target = _device_of(dl_device)
    copied = copy is True or target is not self.device
    if copied:
        h = C.c_void_p()
        _check(_tensor_to(self._h, target._h, None, C.byref(h)))
        src = type(self)._wrap(h.value)
    consumer = _consumer_stream(target, stream)
    out = C.c_void_p()
    status = _to_dlpack(src._h, consumer, versioned, C.byref(out))
    if status == D.OX_ERR_INVALID_ARGUMENT:
        # what the protocol expects when a tensor cannot be exported as asked
        raise BufferError(_L.ox_last_error().decode(errors="replace"))
    _check(status)
    if copied and versioned:
        _Versioned.from_address(out.value).flags |= _IS_COPIED
    return _capsule(out.value, versioned)


def dlpack_device(self):
    d = self.device
    return (kDLCUDA, d.index) if d.type == "cuda" else (kDLCPU, 0)


# ------------------------------------------------------------ import


def take(obj, stream=None):
    """The handle of an Oxide tensor on the memory of `obj` (anything with
    __dlpack__), its producer's pending work ordered before `stream`'s
    (tensors.from_dlpack wraps it)."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not support DLPack (no __dlpack__ method)")
    kind, index = (int(x) for x in obj.__dlpack_device__())
    src = _devices.device("cpu" if kind == kDLCPU else f"cuda:{index}") if kind in (kDLCPU, kDLCUDA) else None
    # the stream on which Oxide will use the tensor: the producer orders its
    # pending work before it (CPU and unsupported devices: no stream)
    s = _stream_int(src, stream) if src is not None and src.type == "cuda" else None
    try:
        cap = obj.__dlpack__(stream=s, max_version=_VERSION)
    except TypeError:  # a producer older than max_version (DLPack < 1.0)
        cap = obj.__dlpack__(stream=s)
    for versioned in (1, 0):
        if _is_valid(cap, _NAME[versioned]):
            break
    else:
        raise ValueError("__dlpack__ returned no unused DLPack capsule (a capsule can be "
                         "imported only once)")
    ptr = _get_pointer(cap, _NAME[versioned])
    if _set_name(cap, _USED[versioned]):
        raise RuntimeError("cannot mark the DLPack capsule as used")
    h = C.c_void_p()
    _check(_from_dlpack(ptr, versioned, C.byref(h)))  # Oxide owns it now, even on failure
    return h.value
