"""Oxide for Python: compile Oxide kernels and run them on NVIDIA GPUs or the CPU.

    import oxide
    dev = oxide.device("cpu")                 # or "cuda", "cuda:1", oxide.default_device()
    mod = oxide.compile(source, device=dev)
    a = oxide.tensor([1.0, 2.0], device=dev)  # f32 unless dtype= says otherwise
    c = oxide.empty(2, "f32", dev)
    mod.scale(a, c, 2.0, grid=1, block=256)   # 2.0 takes the parameter's dtype
    mod.scale(a, c=c, alpha=2.0, grid=1, block=256)  # or by name
    dev.default_stream.synchronize()          # out-of-bounds accesses surface here
    c.tolist()

    # a #[tile] kernel: the output is passed as a partition into tiles, whose
    # tile grid is the launch grid; the const generics are bound from its tile
    z = oxide.zeros(1000, "f32", dev)
    mod.add(z.partition((128,)), x, y)        # no grid=/block=: one block per tile

A thin layer over liboxide's C API (oxide.h) through ctypes; the C declarations
are generated from the header (bindings/gen/gen_decls.py). Kernels launch
through the C extension oxide._fast when it is there (see _ext.py), else
through ctypes, with the same rules (_args.py). Every failing call raises an
OxideError subclass carrying Oxide's message.

One module per subject, which this package re-exports: dtypes (element
types, scalar classes), devices (devices, streams, events), tensors,
kernels (modules, kernels, compiling), info (version, doctor); oxide.torch
is the PyTorch integration. Imports run one way: kernels -> tensors ->
devices -> dtypes, over the private helpers (_lib, _decls, _errors, ...).
"""
from __future__ import annotations

from ._errors import (
    OxideError,
    InvalidArgumentError,
    ArgumentTypeError,
    ArgumentRangeError,
    CompileError,
    NotFoundError,
    DeviceError,
    DriverError,
    OutOfMemoryError,
    LaunchError,
    BoundsError,
    FileError,
    UnsupportedError,
    InternalError,
    CancelledError,
)
from ._lib import lib as _L  # noqa: F401  (the C API, for tests and tools)
# DTypeLike, DeviceLike and ShapeLike: the annotations' aliases, for users' own annotations
from .dtypes import (DTYPES, DTypeLike, Scalar, bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32,
                     f64)
from .devices import Device, DeviceLike, Event, Stream, default_device, device, device_count, wrap_stream
from .tensors import (ShapeLike, Tensor, arange, empty, empty_like, from_dlpack, from_numpy, full, full_like,
                      tensor, zeros, zeros_like)
from .kernels import Kernel, Module, compile, compile_file, emit
from ._chain import Chain
from .info import cache_dir, doctor, launch_path, version

__all__ = [
    "OxideError", "InvalidArgumentError", "ArgumentTypeError", "ArgumentRangeError", "CompileError", "NotFoundError", "DeviceError",
    "DriverError", "OutOfMemoryError", "LaunchError", "BoundsError", "FileError",
    "UnsupportedError", "InternalError", "CancelledError",
    "Device", "Stream", "Event", "Chain", "wrap_stream", "Tensor", "Module", "Kernel", "Scalar",
    "device", "default_device", "device_count", "tensor", "empty", "zeros", "full", "arange",
    "empty_like", "zeros_like", "full_like",
    "from_numpy", "from_dlpack",
    "compile", "compile_file", "emit", "doctor", "version", "cache_dir", "launch_path", "DTYPES",
    "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
]
