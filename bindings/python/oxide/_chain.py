"""Chains: a recorded sequence of launches and copies that runs when asked,
on a stream, in order; on CUDA it can be captured once as a CUDA graph and
replayed, which costs one driver call per run however many launches it
holds (docs/python.md, "Chains and graphs")."""
import ctypes as C
from typing import Any

from . import _args
from . import _handles
from . import devices as _devices
from ._errors import _check
from ._lib import lib as _L



class Chain(_handles.Holder):
    """Launches and copies recorded now, run later:

        chain = oxide.Chain("cuda")
        chain.launch(k1, x, y, grid=g, block=b)
        chain.launch(k2, y, out, grid=g, block=b)
        chain.capture()          # optional (CUDA): one graph from here on
        chain.run(stream=s)      # queues them all, in order

    Arguments are checked and tensors kept alive when recorded, so a chain
    replays on the same memory every run; write new inputs into its tensors
    between runs (tensor.copy_from). A foreign array (torch, CuPy, NumPy) is
    imported once, when recorded, and held until the chain is dropped."""

    __slots__ = ("_h", "device", "_keep")
    _what = "oxide.Chain"

    def __init__(self, device: Any = None):
        self.device = _devices.device(device)
        h = C.c_void_p()
        _check(_L.ox_chain_create(self.device._h, C.byref(h)))
        self._h = h.value
        self._keep = []  # imported tensors: the chain retains their handles; these own the imports

    def launch(self, kernel: Any, /, *args: Any, grid: Any = None, block: Any = None,
               **kwargs: Any) -> None:
        """Records a launch of `kernel` (of this chain's device) with these
        arguments, under the rules of a call (kernel(...)), without stream=."""
        kh = kernel._h  # first, as a launch checks it
        cfg, argv, nargs, _, temps = _args.prepare(kernel._sig, args, kwargs, grid, block, None)
        _check(_L.ox_chain_launch(self._h, kh, None if cfg is None else C.byref(cfg), argv,
                                  nargs))
        self._keep.extend(temps)

    def copy(self, dst: Any, src: Any) -> None:
        """Records a copy of tensor `src` into tensor `dst` (same shape and dtype)."""
        _check(_L.ox_chain_copy(self._h, dst._h, src._h))

    def _stream(self, stream):
        s = _devices.as_stream(stream, self.device) if stream is not None else None
        return s._h if s is not None else None

    def capture(self, stream: Any = None) -> None:
        """CUDA: captures the recorded steps as one CUDA graph, running
        nothing; later runs replay it (on any stream). A capture needs a
        stream Oxide made: `stream` (device.stream()), or None for a new one
        used for the capture only. On the CPU there is nothing to capture."""
        if stream is None and self.device.type == "cuda":
            stream = self.device.stream()  # the legacy default stream cannot capture
        _check(_L.ox_chain_capture(self._h, self._stream(stream)))

    def run(self, stream: Any = None) -> None:
        """Queues the chain on `stream` (an oxide.Stream, another library's
        stream, or None: the device's default stream): its graph if
        captured, else each step in order."""
        _check(_L.ox_chain_run(self._h, self._stream(stream)))

    def __del__(self, _destroy=_L.ox_chain_destroy, _take=_handles.take):
        h = _take(self)
        if h:
            _destroy(h)

    def __repr__(self) -> str:
        return f"<oxide.Chain on {self.device}>"


Chain.__module__ = "oxide"
