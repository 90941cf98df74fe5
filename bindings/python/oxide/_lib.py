"""Finds and loads liboxide, and declares its functions from the generated table."""
import ctypes
import ctypes.util
import os
from pathlib import Path

from . import _decls

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[2]  # bindings/python/oxide -> the repository root


def _candidates():
    env = os.environ.get("OXIDE_LIBRARY")
    if env:
        # An explicit path is the only candidate: falling back silently would
        # hide a typo behind some other build.
        yield env
        return
    yield _HERE / "liboxide.so"
    for d in ["build", *sorted(p.name for p in _REPO.glob("build-*"))]:
        yield _REPO / d / "liboxide.so"
    found = ctypes.util.find_library("oxide")
    if found:
        yield found


def _load():
    tried = []
    for c in _candidates():
        c = str(c)
        if os.sep in c and not os.path.exists(c):
            tried.append(c)
            continue
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            tried.append(f"{c} ({e})")
    raise ImportError("oxide: cannot find liboxide.so; set OXIDE_LIBRARY to its path "
                      "(tried: " + ", ".join(tried or ["nothing"]) + ")")


def _check_abi(lib, where):
    """Refuses a liboxide built from another oxide.h: its structs and enums
    would not be what _decls.py declares (silent garbage, or a crash)."""
    abi = getattr(lib, "ox_abi_version", None)
    if abi is None:
        raise ImportError(f"oxide: {where} is a liboxide older than this package (no "
                          f"ox_abi_version); this package needs ABI {_decls.OX_ABI_VERSION}")
    abi.restype, abi.argtypes = ctypes.c_int, []
    if abi() != _decls.OX_ABI_VERSION:
        raise ImportError(f"oxide: {where} has ABI {abi()}, this package needs ABI "
                          f"{_decls.OX_ABI_VERSION}: use the liboxide of the same build")


lib = _load()
_check_abi(lib, getattr(lib, "_name", "liboxide"))
for _name, (_restype, _argtypes) in _decls.FUNCTIONS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
