"""The exception classes of `oxide`, one per ox_status, and the check that
raises them. Re-exported by the package (their module is "oxide")."""
import re
from typing import Optional

from . import _decls as D
from ._lib import lib as _L


class OxideError(Exception):
    """A failed Oxide call. `status` is the ox_status code (by default the
    class's own), `status_name` its name ("OX_ERR_COMPILE"), str(e) Oxide's
    message."""

    _status = D.OX_ERR_INTERNAL

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        status = self._status if status is None else status
        self.status = status
        self.status_name = _L.ox_status_name(status).decode()


class InvalidArgumentError(OxideError, ValueError):
    """A bad argument to a call or a launch (count, kind, dtype, device...)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """A kernel launch's arguments do not fit its parameters: too many, a
    missing, repeated or unknown name, or a value of the wrong kind (a float
    for an i32, a list for a tensor); or a size, shape or generic that is no
    int. Also a TypeError, as Python's own call errors are."""


class ArgumentRangeError(InvalidArgumentError, OverflowError):
    """A number out of range for its parameter's dtype (2**40 for an i32, 1e300
    for an f32), or a size, offset, stride or generic beyond the C integer
    that carries it (2**64 for an int64). Also an OverflowError."""


class CompileError(OxideError):
    """The kernel text has errors; the message has file:line:col and a caret."""


class NotFoundError(OxideError, LookupError):
    """No kernel, device or file of that name."""


class DeviceError(OxideError):
    """No CUDA driver, or no such GPU."""


class DriverError(DeviceError):
    """The CUDA driver returned an error."""


class OutOfMemoryError(OxideError, MemoryError):
    """An allocation failed."""


class LaunchError(OxideError):
    """A launch violates the kernel's launch contract or the device's limits."""


class BoundsError(OxideError):
    """A kernel made an out-of-bounds access (raised by the next synchronize)."""


class FileError(OxideError):
    """A file could not be read or written."""


class UnsupportedError(OxideError):
    """Valid, but not supported (yet) on this target."""


class InternalError(OxideError):
    """A bug in Oxide."""


class CancelledError(OxideError):
    """A CPU launch was stopped before it finished (ox_stream_cancel from C, or
    SIGINT: Ctrl-C raises KeyboardInterrupt instead when it reaches Python's
    handler); what it wrote is incomplete."""


_ERRORS = {
    D.OX_ERR_INVALID_ARGUMENT: InvalidArgumentError, D.OX_ERR_COMPILE: CompileError,
    D.OX_ERR_NOT_FOUND: NotFoundError, D.OX_ERR_NO_DEVICE: DeviceError,
    D.OX_ERR_DRIVER: DriverError, D.OX_ERR_OUT_OF_MEMORY: OutOfMemoryError,
    D.OX_ERR_LAUNCH: LaunchError, D.OX_ERR_BOUNDS: BoundsError, D.OX_ERR_IO: FileError,
    D.OX_ERR_UNSUPPORTED: UnsupportedError, D.OX_ERR_INTERNAL: InternalError,
    D.OX_ERR_CANCELLED: CancelledError,
}


for _status, _cls in _ERRORS.items():
    _cls._status = _status  # each class's default status (ArgumentTypeError: its base's)


# The Python API's names of the C functions Oxide's messages name (the C
# library speaks to every binding; a Python user calls these).
_PY_NAMES = {
    "ox_kernel_set_generic": "Kernel.set_generic", "ox_kernel_set_candidates": "Kernel.set_candidates",
    "ox_kernel_tuned": "Kernel.tuned", "ox_launch_check": "Kernel.check", "ox_launch": "a kernel call",
    "ox_tensor_partition": "Tensor.partition", "ox_tensor_to": "Tensor.to", "ox_tensor_reshape": "Tensor.reshape",
    "ox_tensor_permute": "Tensor.permute", "ox_tensor_transpose": "Tensor.transpose",
    "ox_tensor_slice": "Tensor indexing", "ox_tensor_broadcast_to": "Tensor.broadcast_to",
    "ox_tensor_copy": "Tensor.copy_from", "ox_module_compile": "oxide.compile",
    "ox_module_compile_file": "oxide.compile_file", "ox_emit": "oxide.emit", "ox_stream_wrap": "oxide.wrap_stream",
    "ox_chain_create": "oxide.Chain", "ox_chain_capture": "Chain.capture", "ox_chain_run": "Chain.run",
    "ox_event_create": "oxide.Event", "ox_event_record": "Event.record", "ox_event_elapsed_ms": "Event.elapsed_time",
    "ox_doctor": "oxide.doctor", "ox_stream_synchronize": "Stream.synchronize",
}
_C_NAME = re.compile(r"\box_[a-z0-9_]+\b")


def python_names(message: str) -> str:
    """message with the C functions it names replaced by their Python API's."""
    return _C_NAME.sub(lambda m: _PY_NAMES.get(m.group(0), m.group(0)), message)


def _check(status):
    # ox_last_error is per thread, and ctypes calls run on the calling thread.
    if status != D.OX_OK:
        raise _ERRORS.get(status, OxideError)(python_names(_L.ox_last_error().decode(errors="replace")), status)


for _cls in (OxideError, InvalidArgumentError, ArgumentTypeError, ArgumentRangeError, CompileError, NotFoundError, DeviceError, DriverError, OutOfMemoryError, LaunchError, BoundsError, FileError, UnsupportedError, InternalError, CancelledError):
    _cls.__module__ = "oxide"  # their public home, for reprs and pickling
