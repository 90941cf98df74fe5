"""Objects that hold a liboxide handle (tensors, modules, streams, events,
chains), and what using one raises once its handle is released.

The handle lives in the slot `_h`. Releasing it (__del__: the garbage
collector, or a call by hand) deletes the slot, so that every later use of
`obj._h`, wherever it is, raises InvalidArgumentError instead of handing
liboxide NULL or a freed pointer."""
from ._errors import InvalidArgumentError


def message(what: str) -> str:
    """What a use of released object `what` ("oxide.Tensor") is told."""
    return f"the {what} was released (its __del__ was called) and cannot be used any more"


class Holder:
    """Base of the classes whose `_h` slot holds a handle; `_what` names
    them in messages."""

    __slots__ = ()
    _what = "object"

    def __getattr__(self, name):
        # only reached when normal lookup failed: for _h, the handle was released
        if name == "_h":
            raise InvalidArgumentError(message(self._what))
        return object.__getattribute__(self, name)  # the original AttributeError again


def peek(obj):
    """obj's handle, or None when it has none (released, or never made)."""
    try:
        return object.__getattribute__(obj, "_h")  # past __getattr__: no error
    except AttributeError:
        return None


def take(obj):
    """obj's handle, removed from obj (None when it had none): for __del__."""
    h = peek(obj)
    if h is not None:
        object.__delattr__(obj, "_h")
    return h
