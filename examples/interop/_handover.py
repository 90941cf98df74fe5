"""Handing a Python array to C, C++ or Rust code through DLPack, as the
DLPack Python spec says a consumer takes it: the capsule's pointer, then the
capsule renamed "used_dltensor_versioned" so that its destructor leaves the
managed tensor to the consumer (which calls its deleter once)."""
import ctypes as C

_get_pointer = C.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
_set_name = C.pythonapi.PyCapsule_SetName
_set_name.argtypes = [C.py_object, C.c_char_p]


def give(x, stream=None):
    """x's DLPackManagedTensorVersioned* (an int), for a consumer that takes
    it over; `stream` is the consumer's stream, as __dlpack__ takes it."""
    cap = x.__dlpack__(stream=stream, max_version=(1, 1))
    ptr = _get_pointer(cap, b"dltensor_versioned")
    if _set_name(cap, b"used_dltensor_versioned"):
        raise RuntimeError("cannot mark the DLPack capsule as used")
    return ptr
