"""Modules and kernels: compiling kernel text (compile, compile_file, emit),
the kernels of a module, and launching them (through the C extension
oxide._fast when it is there, else through ctypes, with the same rules:
_args.py)."""
from __future__ import annotations

import ctypes as C
import os
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _args
from . import _decls as D
from . import _ext
from . import _handles
from . import _sizes
from ._errors import NotFoundError, _check
from ._lib import lib as _L
from .devices import Device, DeviceLike, Stream, device as _as_device
from . import devices as _devices
from .dtypes import Scalar, _CODE, _SCALARS
from .info import _take_string
from .tensors import Tensor

# the pure path's kept ox_cancel_on_sigint(1), from its first CPU launch on (Kernel.__call__)
_sigint_kept = False


def _options(filename, arch, opt_level, no_cache):
    o = D.ox_compile_options(size=C.sizeof(D.ox_compile_options))
    if filename is not None:
        o.filename = os.fsencode(filename)
    if arch is not None:
        a = str(arch)
        o.sm = _sizes.integer(int(a[3:] if a.startswith("sm_") else a), "arch", 32)
    o.opt_level = _sizes.integer(opt_level, "opt_level", 32)
    o.no_cache = int(bool(no_cache))
    return o


class Module(_handles.Holder):
    """Compiled kernels of one source text, loaded on one device. Kernels are
    `module["name"]` or `module.name`; each keeps its module alive."""

    # _kernels: name -> (handle, signature, launcher), made once per kernel
    # (not Kernel objects, which would make a cycle).
    # _opts: liboxide keeps the options' filename pointer for later messages
    # (bounds errors, launch contracts) without copying it, so it must live on.
    __slots__ = ("_h", "device", "_kernels", "_opts", "__weakref__")
    _h: int
    device: Device
    _kernels: Dict[str, Any]
    _opts: Any
    _what = "oxide.Module"

    def __init__(self):
        raise TypeError("use oxide.compile() or oxide.compile_file()")

    @classmethod
    def _wrap(cls, handle, dev, opts):
        m = object.__new__(cls)
        m._h, m.device, m._kernels, m._opts = handle, dev, {}, opts
        return m

    def __del__(self, _destroy=_L.ox_module_destroy, _take=_handles.take):
        h = _take(self)
        if not h:
            return
        for _, _, proto in getattr(self, "_kernels", {}).values():
            if proto is not None:  # its kernels die with it: their copies refuse to launch
                proto._release()
        _destroy(h)

    @property
    def from_cache(self) -> bool:
        """True if loaded from the compiled-kernel cache without code generation."""
        return bool(_L.ox_module_from_cache(self._h))

    def __getitem__(self, name: str) -> Kernel:
        h = self._h  # first: a released module has no kernels
        entry = self._kernels.get(name)
        if entry is None:
            out = C.c_void_p()
            _check(_L.ox_module_get_kernel(h, name.encode(), C.byref(out)))
            entry = self._kernels[name] = Kernel._entry(out.value, self.device)
        return Kernel._make(entry, self)

    def __getattr__(self, name: str) -> Kernel:
        if name.startswith("_"):
            return super().__getattr__(name)  # _h of a released module: its error
        try:
            return self[name]
        except NotFoundError as e:
            raise AttributeError(str(e)) from None

    def kernel_names(self) -> List[str]:
        """The names of the module's kernels (#[kernel] and #[tile]).

        liboxide has no call that lists a module's kernels: its message for
        a kernel it does not have names them all, "no kernel '' in FILE (it
        has 'a', 'b')", and this reads them from it."""
        out = C.c_void_p()
        if _L.ox_module_get_kernel(self._h, b"", C.byref(out)) != D.OX_ERR_NOT_FOUND:
            return []
        msg = _L.ox_last_error().decode(errors="replace")
        at = msg.rfind("(it has ")
        return re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", msg[at:]) if at >= 0 else []

    def __dir__(self) -> List[str]:
        names = self.kernel_names() if _handles.peek(self) is not None else []
        return sorted(set(super().__dir__()) | set(names))

    def __repr__(self) -> str:
        return f"<oxide.Module on {self.device}>"


def compile(source: str, device: DeviceLike = None, filename: Optional[str] = None, *,
            arch: Union[str, int, None] = None, opt_level: int = 0,
            no_cache: bool = False) -> Module:
    """Compiles kernel text for `device` (default: oxide.default_device()) and loads it.
    Raises CompileError with every diagnostic (file:line:col, the line, a caret)."""
    dev = _as_device(device)
    h = C.c_void_p()
    opts = _options(filename, arch, opt_level, no_cache)
    _check(_L.ox_module_compile(dev._h, source.encode(), C.byref(opts), C.byref(h)))
    return Module._wrap(h.value, dev, opts)


def compile_file(path: Union[str, os.PathLike], device: DeviceLike = None, *,
                 arch: Union[str, int, None] = None, opt_level: int = 0,
                 no_cache: bool = False) -> Module:
    """Reads and compiles the kernel file at `path` (FileError if unreadable)."""
    dev = _as_device(device)
    h = C.c_void_p()
    opts = _options(path, arch, opt_level, no_cache)  # the filename defaults to the path
    _check(_L.ox_module_compile_file(dev._h, opts.filename, C.byref(opts), C.byref(h)))
    return Module._wrap(h.value, dev, opts)


_EMIT = {"ast": D.OX_EMIT_AST, "ir": D.OX_EMIT_IR, "llvm": D.OX_EMIT_LLVM, "ptx": D.OX_EMIT_PTX,
         "asm": D.OX_EMIT_ASM}
_TARGET = {None: D.OX_TARGET_DEFAULT, "cpu": D.OX_TARGET_CPU, "cuda": D.OX_TARGET_CUDA}


def emit(source: str, kind: str = "ptx", target: Optional[str] = None,
         arch: Union[str, int, None] = None, filename: Optional[str] = None, opt_level: int = 0,
         contiguous: bool = False, generics: Optional[Dict[str, int]] = None) -> str:
    """The text of one compilation stage: kind "ast", "ir", "llvm", "ptx" or
    "asm"; target None (CUDA for PTX, else the CPU), "cpu" or "cuda"; arch
    "sm_90" or 90; contiguous: tile kernels as launched on contiguous16
    tensors (16-byte aligned, unit last stride); generics: values of tile
    kernels' const generics by name, e.g. {"BM": 128} (others are 16), so that
    the code is what a launch with those tile sizes runs. Needs no device."""
    if kind not in _EMIT or target not in _TARGET:
        raise ValueError(f"kind must be one of {sorted(_EMIT)} and target None, 'cpu' or 'cuda'")
    out = C.c_void_p()
    opts = _options(filename, arch, opt_level, False)
    opts.emit_contiguous = int(bool(contiguous))
    if generics:
        values = (D.ox_generic_value * len(generics))(
            *(D.ox_generic_value(str(k).encode(), _sizes.integer(v, f"generic {k}"))
              for k, v in generics.items()))
        opts.generics = values  # kept alive by `values` until the call returns
        opts.num_generics = len(generics)
    _check(_L.ox_emit(source.encode(), C.byref(opts), _TARGET[target], _EMIT[kind], C.byref(out)))
    return _take_string(out)


# ------------------------------------------------------------------ kernels

_ext.load({
    "Tensor": Tensor, "Scalar": Scalar, "Stream": Stream,
    "scalar_dtypes": {cls: _CODE[dt] for dt, cls in _SCALARS.items()},
    "error": _args.error, "failure": _args.failure, "convert_other": _args.convert_other,
    "call_stream": _args.call_stream, "wrapped": _devices.wrapped,
    "stream_getter": _devices.stream_getter, "producer_stream": _devices.producer_stream,
    "array_stream": _devices.array_stream,
    "type_kind": _args.type_kind, "with_tiles": _args.with_tiles,
    "no_ordering": _devices.NO_ORDERING,
})


class _PureLaunch:
    """Kernel launches through ctypes (_args.py has the rules), for when the
    C extension is not used; its Launcher, the base of Kernel otherwise, has
    the same methods."""

    __slots__ = ()
    _run: Any  # Kernel's

    def __call__(self, /, *args: Any, **kwargs: Any) -> None:
        self._run(_L.ox_launch, args, kwargs)

    def check(self, /, *args: Any, **kwargs: Any) -> None:
        self._run(_L.ox_launch_check, args, kwargs)


if TYPE_CHECKING:  # the call signature type checkers see (the extension's is the same)
    _KernelBase = _PureLaunch
else:
    _KernelBase = _ext.FAST.Launcher if _ext.FAST is not None else _PureLaunch


# Kernel.set_candidates' lists by kernel handle, for Kernel.tuned (a Kernel object
# is made per lookup, the candidates belong to the kernel).
_CANDIDATES: Dict[Any, List[Dict[str, int]]] = {}


class Kernel(_KernelBase):
    """One kernel of a module. Call it with its arguments, by position or by
    parameter name, and the launch's own keywords:

        kernel(x, y, out, 2.0, grid=(n_blocks,), block=(256,), stream=None)
        kernel(x, y, out=out, alpha=2.0, grid=n_blocks, block=256)

    It queues a launch on `stream` (None: the device's default stream).
    grid and block: an int or a tuple of 1 to 3 ints. A #[kernel] (SIMT)
    launch needs both. A #[tile] kernel takes neither: pass each
    `&mut Tensor` output as a partition (t.partition(tile)); the grid is its
    tile grid and the block the compiler's (a tile kernel with atomic
    tensors and no output takes grid= from the call). A kernel parameter
    named grid, block or stream can be passed by position only.

    Arguments: for tensor parameters, oxide.Tensors, or any array with
    __dlpack__, __cuda_array_interface__ or __array_interface__ (numpy,
    PyTorch, CuPy, JAX...), used in place without a copy; for scalar
    parameters, Python numbers, typed by the parameter (an i32 takes ints in
    its range; an f32 floats that stay finite and ints it holds exactly; a
    bool True or False), or oxide.f32(x)-style scalars and numpy scalars,
    whose dtype must be the parameter's. `params` lists the parameters.

    Errors in the arguments or the launch contract raise at once
    (ArgumentTypeError, ArgumentRangeError, InvalidArgumentError,
    LaunchError; a tile kernel's first launch with new tile sizes compiles
    it, and may raise CompileError). An out-of-bounds access of a SIMT
    kernel raises BoundsError: on the CPU device, where the kernel has run
    when the call returns, from the call itself; on CUDA from a later launch
    of this thread once the kernel has recorded it, or from the stream's
    synchronize or a host read of what it wrote, whichever comes first
    (OXIDE_LAUNCH_BLOCKING=1 in the environment makes every launch wait for
    its kernel and raise its error, for debugging). `check(...)` checks a launch
    the same way without running it."""

    __slots__ = ("_kh", "module", "name", "_sig")
    _kh: int
    module: Module
    name: str
    _sig: Any

    def __init__(self, *args):
        raise TypeError("use module['name'] or module.name")

    @staticmethod
    def _entry(handle, dev):
        """(handle, signature, prototype) of a kernel, made once per module:
        the prototype is the C extension's Launcher that Kernel objects are
        copied from, or None for the pure path."""
        sig = _args.Signature(handle, dev)
        proto = None
        if _ext.FAST is not None:
            cuda = dev.type == "cuda"
            proto = _ext.FAST.Launcher(sig, handle, dev._h, int(not cuda),
                                       dev.index if cuda else 0, dev.default_stream._h or 0)
        return handle, sig, proto

    @classmethod
    def _make(cls, entry, module):
        handle, sig, proto = entry
        k = cls.__new__(cls) if proto is None else cls.__new__(cls, proto)
        k._kh, k._sig = handle, sig
        k.module = module  # the module must outlive the kernel handle
        k.name = sig.kernel
        return k

    @property
    def _h(self) -> int:
        """The kernel's handle, owned by its module: gone with it."""
        if _handles.peek(self.module) is None:
            raise _args.error(self._sig, "released", -1, None, "kernel")
        return self._kh

    @property
    def num_params(self) -> int:
        return len(self._sig.params)

    @property
    def params(self) -> Tuple[_args.Param, ...]:
        """The parameters, as written: a tuple of Param(name, kind, dtype,
        rank, writable) named tuples (kind "scalar", "slice", "mut_slice",
        "atomic_slice", "disjoint", "tensor", "tile" or "atomic_tensor")."""
        return self._sig.params

    def set_generic(self, name: str, value: int) -> None:
        """Gives tile-kernel const generic `name` an explicit value for the
        launches from now on (one that sizes no output dim gets its value only
        this way; one that does must agree with the partitions)."""
        _check(_L.ox_kernel_set_generic(self._h, name.encode(),
                                        _sizes.integer(value, f"generic {name}")))

    def set_candidates(self, candidates: Sequence[Mapping[str, int]]) -> None:
        """Lets the runtime choose this tile kernel's configuration, as
        triton.autotune does: each candidate is a dict of const generics
        ({"BM": 128, "BN": 256, "BK": 64}), all setting the same names to
        powers of two. The first launch with new argument shapes (dtypes,
        alignment, device) measures every candidate on scratch outputs and
        keeps the fastest, in memory and in the kernel cache, so the next
        process starts with it; outputs may then be passed whole or
        partitioned in any tiles. An empty list clears them."""
        cands = [dict(c) for c in candidates]
        arr = (D.ox_tile_candidate * max(1, len(cands)))()
        keep = []  # the ctypes buffers must live through the call
        for i, c in enumerate(cands):
            vals = (D.ox_generic_value * max(1, len(c)))()
            for j, (name, value) in enumerate(c.items()):
                b = str(name).encode()
                keep.append(b)
                vals[j].name, vals[j].value = b, _sizes.integer(value, f"generic {name}")
            keep.append(vals)
            arr[i].values, arr[i].num_values = vals, len(c)
        _check(_L.ox_kernel_set_candidates(self._h, arr, len(cands)))
        _CANDIDATES[self._h] = cands

    def tuned(self, *args: Any, **kwargs: Any) -> Optional[Dict[str, int]]:
        """The candidate (a dict, as given to set_candidates) that a launch
        with these arguments runs, or None when none is chosen yet (the next
        launch measures them). Measures nothing."""
        h = self._h  # first, as a launch checks it
        _, argv, nargs, _, temps = _args.prepare(self._sig, args, kwargs, None, None, None)
        try:
            idx = C.c_int(-1)
            _check(_L.ox_kernel_tuned(h, argv, nargs, C.byref(idx)))
        finally:
            temps.clear()
        return None if idx.value < 0 else dict(_CANDIDATES[h][idx.value])

    def _run(self, fn, args, kwargs):
        """The pure path: the arguments through _args, then ox_launch (or
        ox_launch_check) through ctypes."""
        h = self._h  # first, as the C extension checks it
        grid, block, stream, tiles = (kwargs.pop(k, None) for k in ("grid", "block", "stream", "tiles"))
        cfg, argv, nargs, sh, temps = _args.prepare(self._sig, args, kwargs, grid, block, stream, tiles)
        # Ctrl-C: a CPU launch runs the kernel inside this call, where Python
        # cannot raise KeyboardInterrupt. While it runs, Oxide's SIGINT handler
        # cancels it and then calls Python's own (which records the signal),
        # so the call returns OX_ERR_CANCELLED and KeyboardInterrupt is raised
        # below. From the first CPU launch on one enabling call is kept for
        # the process's life, so that each launch's own costs one sigaction
        # query (ours is put back in front of a handler set since). (A GPU
        # launch only queues, and returns at once.) The C launch path does
        # the same.
        ctrl_c = fn is _L.ox_launch and self.module.device.type == "cpu"
        if ctrl_c:
            global _sigint_kept
            if not _sigint_kept:
                _check(_L.ox_cancel_on_sigint(1))
                _sigint_kept = True
            _check(_L.ox_cancel_on_sigint(1))
        try:
            try:
                status = fn(h, sh, None if cfg is None else C.byref(cfg), argv, nargs)
            finally:
                if ctrl_c:
                    _L.ox_cancel_on_sigint(0)
            if status == D.OX_ERR_CANCELLED:
                # Run Python's signal handlers now (main thread): a pending
                # SIGINT raises KeyboardInterrupt here, not at some later line.
                C.pythonapi.PyErr_CheckSignals()
            if status == D.OX_OK and fn is _L.ox_launch:
                # an out-of-bounds access raises here: this launch's on the CPU (it has
                # run), on CUDA an earlier one's that its kernel has recorded by now
                status = _L.ox_launch_errors()
            if status != D.OX_OK:
                raise _args.failure(self._sig, status,
                                    _L.ox_last_error().decode(errors="replace"), cfg is None)
        finally:
            temps.clear()  # the imported arrays: the launch holds what it needs

    def __repr__(self) -> str:
        return f"<oxide.Kernel {self.name!r} ({self.num_params} params) on {self.module.device}>"

Module.__module__ = Kernel.__module__ = "oxide"
