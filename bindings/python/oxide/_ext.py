"""Finds and loads the C extension oxide._fast (bindings/python/src), the
fast launch path; without it the package launches through ctypes.

Where it is looked for, in order (the first one found is the only one tried):
  - $OXIDE_PYTHON_EXT, the path of the extension's file;
  - next to the loaded liboxide (a build folder: build/_fast.abi3.so);
  - in the package (an installed wheel).
OXIDE_PURE_PYTHON=1 turns it off. An extension that is found but cannot
be used (built for another liboxide, say) is reported with a warning, and
the pure path is used: `oxide.launch_path()` says which path runs and why.
"""
import ctypes as C
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from pathlib import Path

from ._lib import lib as _L

ABI = 6  # must equal the extension's FX_ABI (bindings/python/src/fast.h)

FAST = None  # the extension module, once init() has run
WHY = "not loaded yet"  # why the pure path is used ("" when the extension is)
PATH = None  # where the extension was loaded from


def _candidates():
    env = os.environ.get("OXIDE_PYTHON_EXT")
    if env:
        yield Path(env)
        return
    here = Path(__file__).resolve().parent
    lib_dir = Path(_L._name).resolve().parent if os.sep in _L._name else None
    for d in ([lib_dir] if lib_dir else []) + [here]:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            yield d / f"_fast{suffix}"


def _load_module(path):
    spec = importlib.util.spec_from_file_location(f"{__package__}._fast", path)
    if spec is None:
        raise ImportError(f"not an extension module: {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(objects):
    """Loads the extension and hands it liboxide's functions and the
    package's `objects` (see fast.c's init); sets FAST, WHY and PATH."""
    global FAST, WHY, PATH
    FAST, PATH = None, None
    if os.environ.get("OXIDE_PURE_PYTHON", "") not in ("", "0"):
        WHY = "OXIDE_PURE_PYTHON is set"
        return
    tried = []
    for path in _candidates():
        if not path.exists():
            tried.append(str(path))
            continue
        try:
            mod = _load_module(path)
            if getattr(mod, "ABI", None) != ABI:
                raise ImportError(f"it speaks version {getattr(mod, 'ABI', None)} of the "
                                  f"package's contract, the package {ABI}")
            addresses = {name: C.cast(getattr(_L, name), C.c_void_p).value
                         for name in mod.FUNCTIONS}
            mod.init(addresses, objects)
        except Exception as e:  # reported, then the pure path
            WHY = f"{path} cannot be used: {type(e).__name__}: {e}"
            warnings.warn(f"oxide: the C extension {WHY}; launching through ctypes", RuntimeWarning,
                          stacklevel=3)
            return
        sys.modules[f"{__package__}._fast"] = mod
        FAST, WHY, PATH = mod, "", str(path)
        return
    WHY = "no extension found (tried " + ", ".join(tried or ["nothing"]) + ")"
