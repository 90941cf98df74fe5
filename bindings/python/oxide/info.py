"""What is loaded and how: the library's version, the environment report
(doctor), the Python launch path, and the compiled-kernel cache's place."""
from __future__ import annotations

import ctypes as C

from . import _ext
from ._errors import _check
from ._lib import lib as _L


def _take_string(ptr):
    """Copies a string that Oxide handed over and frees it."""
    try:
        return C.string_at(ptr).decode(errors="replace")
    finally:
        _L.ox_free(ptr)


def version() -> str:
    """Version of the loaded liboxide, e.g. "0.1.0 (LLVM 19.1.7)"."""
    return _L.ox_version().decode()


def doctor() -> str:
    """A report of the environment: driver, GPUs, LLVM, cache, ptxas, and the
    Python binding's launch path."""
    out = C.c_void_p()
    _check(_L.ox_doctor(C.byref(out)))
    report = _take_string(out)
    return report + ("" if report.endswith("\n") else "\n") + f"python launch: {launch_path()}\n"


def launch_path() -> str:
    """How kernels are launched: "C extension (its path)", or "ctypes (why
    the extension is not used)"."""
    return f"C extension ({_ext.PATH})" if _ext.FAST else f"ctypes ({_ext.WHY})"


def cache_dir() -> str:
    """Directory of the compiled-kernel cache, or "" when the cache is off."""
    return _L.ox_cache_dir().decode()
