"""Objects whose handle was released (their __del__ called by hand, as at
interpreter exit) raise InvalidArgumentError (a ValueError, an OxideError)
at every later use, on both launch paths: never an IndexError from a
garbage lookup, a NULL handed to liboxide, or a launch on freed memory."""
import re

import pytest

import oxide

np = pytest.importorskip("numpy")

CPU = oxide.device("cpu")

SAXPY = """\
#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = alpha * x[i] + y[i];
    }
}
"""
TILE_ADD = """\
#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"""


def released(what):
    return (rf"the oxide\.{what} was released \(its __del__ was called\) and cannot be used "
            r"any more$")


def is_released_error(e, what):
    assert type(e) is oxide.InvalidArgumentError, type(e)
    assert isinstance(e, ValueError) and e.status_name == "OX_ERR_INVALID_ARGUMENT"
    assert re.search(released(what), str(e)), str(e)


def refused(what, fn):
    with pytest.raises(oxide.InvalidArgumentError) as info:
        fn()
    is_released_error(info.value, what)
    return str(info.value)


def launches(k):
    """The extension's launch and the pure path's (the same without the extension)."""
    return {"extension": k, "pure": lambda *a, **kw: k._run(oxide._L.ox_launch, a, kw)}


def dead_tensor(n=8):
    t = oxide.zeros(n, device=CPU)
    t.__del__()
    return t


def test_tensor():
    t = oxide.arange(8, device=CPU)
    view = t[2:]
    t.__del__()
    t.__del__()  # twice: nothing more to release
    for use in (lambda: t.shape, lambda: t.ndim, lambda: t.dtype, lambda: t.numel,
                lambda: t.nbytes, lambda: t.device, lambda: t.data_ptr, lambda: t.stride(),
                lambda: t.is_contiguous(), lambda: t.tolist(), lambda: t.item(),
                lambda: t.numpy(), lambda: np.asarray(t), lambda: t.tobytes(),
                lambda: t.reshape(2, 4), lambda: t[1:], lambda: t.partition(4),
                lambda: t.broadcast_to((2, 8)), lambda: t.to("cpu"), lambda: t.copy_from([0.0] * 8),
                lambda: oxide.zeros(8, device=CPU).copy_from(t), lambda: t.__dlpack__(),
                lambda: oxide.from_dlpack(t), lambda: len(t)):
        refused("Tensor", use)
    assert repr(t) == "oxide.Tensor(released)"
    assert view.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]  # a view holds its own reference


@pytest.mark.parametrize("path", ["extension", "pure"])
def test_tensor_arguments(path):
    k = oxide.compile(SAXPY, device=CPU).saxpy
    run = launches(k)[path]
    x, y, out = (oxide.zeros(8, device=CPU) for _ in range(3))
    msg = refused("Tensor", lambda: run(x, dead_tensor(), out, 2.0, grid=1, block=8))
    assert msg.startswith("kernel 'saxpy', argument 2 ('y'): ")
    msg = refused("Tensor", lambda: run(x, y, out=dead_tensor(), alpha=2.0, grid=1, block=8))
    assert msg.startswith("kernel 'saxpy', argument 3 ('out'): ")
    refused("Tensor", lambda: k.check(dead_tensor(), y, out, 2.0, grid=1, block=8))
    run(x, y, out, 2.0, grid=1, block=8)  # the next launch works


def test_tensor_arguments_agree():
    k = oxide.compile(SAXPY, device=CPU).saxpy
    x = oxide.zeros(8, device=CPU)
    got = []
    for run in launches(k).values():
        try:
            run(x, x, dead_tensor(), 1.0, grid=1, block=8)
        except oxide.OxideError as e:
            got.append((type(e), str(e)))
    assert len(got) == 2 and got[0] == got[1], got


def test_module_and_its_kernels():
    mod = oxide.compile(SAXPY, device=CPU)
    k = mod.saxpy  # a Kernel holds its module: only a call by hand releases it
    kept = mod["saxpy"]
    mod.__del__()
    for use in (lambda: mod.saxpy, lambda: mod["saxpy"], lambda: mod.from_cache,
                lambda: mod.kernel_names()):
        refused("Module", use)
    assert "kernel_names" in dir(mod) and repr(mod) == "<oxide.Module on cpu>"
    x = oxide.zeros(8, device=CPU)
    for kernel in (k, kept):
        for name, run in launches(kernel).items():
            msg = refused("Module of the kernel",
                          lambda: run(x, x, oxide.zeros(8, device=CPU), 1.0, grid=1, block=8))
            assert msg.startswith("kernel 'saxpy': "), (name, msg)
        refused("Module of the kernel", lambda: kernel.check(x, x, x, 1.0, grid=1, block=8))
        refused("Module of the kernel", lambda: kernel.tuned(x, x, x, 1.0))
        # the bad arguments are not even looked at: the kernel is gone first
        refused("Module of the kernel", lambda: kernel("not", "even", "arguments"))
        refused("Module of the kernel", lambda: oxide.Chain(CPU).launch(kernel, x, x, x, 1.0,
                                                                       grid=1, block=8))
        assert kernel.params[0].name == "x"  # what was read before stays readable


def test_tile_kernel_of_a_released_module():
    mod = oxide.compile(TILE_ADD, device=CPU)
    k = mod.add
    mod.__del__()
    refused("Module of the kernel", lambda: k.set_generic("B", 4))
    refused("Module of the kernel", lambda: k.set_candidates([{"B": 4}]))
    z = oxide.zeros(8, device=CPU)
    for run in launches(k).values():
        refused("Module of the kernel", lambda: run(z.partition(4), z, z))


def test_stream():
    s = CPU.stream()
    s.__del__()
    for use in (lambda: s.synchronize(), lambda: s.handle,
                lambda: s.wait_stream(CPU.default_stream),
                lambda: CPU.default_stream.wait_stream(s), lambda: s.record_event(),
                lambda: oxide.zeros(4, device=CPU, stream=s), lambda: oxide.Event(CPU).record(s)):
        refused("Stream", use)
    k = oxide.compile(SAXPY, device=CPU).saxpy
    x = oxide.zeros(8, device=CPU)
    out = []
    for run in launches(k).values():
        # a released stream= is refused, not taken for the default stream
        out.append(refused("Stream", lambda: run(x, x, x, 1.0, grid=1, block=8, stream=s)))
    assert out[0] == out[1] and out[0].startswith("kernel 'saxpy': stream=: "), out
    CPU.default_stream.__del__()  # a device's default stream is not owned: nothing released
    CPU.default_stream.synchronize()


def test_event_and_chain():
    e = oxide.Event(CPU)
    e.__del__()
    refused("Event", lambda: e.record())
    refused("Event", lambda: e.synchronize())
    chain = oxide.Chain(CPU)
    chain.__del__()
    refused("Chain", lambda: chain.run())
    x = oxide.zeros(4, device=CPU)
    refused("Chain", lambda: chain.copy(x, x))


def test_copy_and_deepcopy_of_a_tensor():
    """copy.copy shares the memory and holds its own reference (each object
    releases its own); copy.deepcopy copies the elements."""
    import copy
    import gc

    t = oxide.from_numpy(np.arange(6, dtype=np.float32))
    shared, deep = copy.copy(t), copy.deepcopy(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(shared.numpy(), np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(deep.numpy(), np.arange(6, dtype=np.float32))
    shared.copy_from(np.zeros(6, dtype=np.float32))
    np.testing.assert_array_equal(deep.numpy(), np.arange(6, dtype=np.float32))
    p = copy.copy(oxide.zeros(16).partition(4))
    assert p._tile == (4,)
