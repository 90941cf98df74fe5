"""oxide.Stream, oxide.Event, oxide.wrap_stream and oxide.Chain, on the CPU
and (GPU tests) on CUDA, without PyTorch: raw CUstream handles and objects
with __cuda_stream__ stand in for other libraries' streams."""
import numpy as np
import pytest

import oxide

ADD1 = """
#[kernel]
fn add1(x: &[f32], y: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) { *o = x[i] + 1.0; }
}
"""


class Proto:
    """Another library's stream, as the CUDA stream protocol shows it."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_stream_surface(dev):
    s = dev.stream()
    d = dev.default_stream
    assert d.handle == 0  # the legacy default stream (CUDA), or no CUDA stream (CPU)
    assert s == s and s != d and len({s, s, d}) == 2
    if dev.type == "cpu":
        assert s.handle == 0
        with pytest.raises(TypeError, match="a CPU stream has no CUDA stream"):
            s.__cuda_stream__()
        with pytest.raises(ValueError, match="cannot order work on cpu"):
            oxide.wrap_stream(Proto(1234), dev)
    else:
        assert s.handle != 0 and s.__cuda_stream__() == (0, s.handle)
        w = oxide.wrap_stream(Proto(s.handle), dev)
        assert w.handle == s.handle and "wraps CUstream" in repr(w)
        assert oxide.wrap_stream(s.handle, dev) is w  # one wrapper per CUstream
        assert oxide.wrap_stream(0, dev) is d and oxide.wrap_stream(1, dev) is d
    assert oxide.wrap_stream(s, dev) is s
    for bad in ("x", 1.5, True, Proto("x")):
        with pytest.raises(TypeError):
            oxide.wrap_stream(bad, dev)


def test_events_and_waits(dev):
    m = oxide.compile(ADD1, dev)
    n = 1 << 16
    x = oxide.full(n, 1.0, device=dev)
    y = oxide.empty(n, device=dev)
    a, b = dev.stream(), dev.stream()
    start = a.record_event()
    m.add1(x, y, grid=n // 256, block=256, stream=a)
    done = a.record_event()
    b.wait_event(done)
    b.wait_stream(a)
    z = oxide.empty(n, device=dev)
    m.add1(y, z, grid=n // 256, block=256, stream=b)
    done.synchronize()
    assert start.elapsed_time(done) >= 0.0
    e = oxide.Event(dev)
    e.record(b)
    e.wait()  # the default stream waits for b
    assert z.numpy().min() == 3.0 and z.numpy().max() == 3.0
    assert repr(e) == f"<oxide.Event on {dev}>"


def test_chain(dev):
    m = oxide.compile(ADD1, dev)
    x = oxide.tensor(np.arange(256, dtype=np.float32), device=dev)
    y = oxide.empty(256, device=dev)
    z = oxide.empty(256, device=dev)
    ch = oxide.Chain(dev)
    ch.launch(m.add1, x, y, grid=1, block=256)
    ch.launch(m.add1, y=z, x=y, grid=1, block=256)  # by name too
    ch.copy(x, z)                                    # x = z: each run adds 2
    ch.run()
    assert z.numpy().tolist() == [i + 2.0 for i in range(256)]
    ch.capture()  # CUDA: one graph from now on; CPU: nothing to capture
    s = dev.stream()
    ch.run(stream=s)
    ch.run(stream=s)
    s.synchronize()
    assert z.numpy().tolist() == [i + 6.0 for i in range(256)]
    with pytest.raises(oxide.ArgumentTypeError, match="missing 'y'"):
        ch.launch(m.add1, x, grid=1, block=256)
    with pytest.raises(oxide.InvalidArgumentError, match="pass grid= and block="):
        ch.launch(m.add1, x, y)
    assert repr(ch) == f"<oxide.Chain on {dev}>"


def test_chain_holds_foreign_arrays():
    """A NumPy array recorded in a chain is imported once and kept: the chain
    writes into the same memory every run."""
    dev = oxide.device("cpu")
    m = oxide.compile(ADD1, dev)
    a = np.zeros(64, np.float32)
    b = np.zeros(64, np.float32)
    ch = oxide.Chain(dev)
    ch.launch(m.add1, a, b, grid=1, block=64)
    ch.run()
    assert b.tolist() == [1.0] * 64
    a[:] = 5
    ch.run()
    assert b.tolist() == [6.0] * 64


@pytest.mark.gpu
def test_stream_argument_kinds():
    """stream= takes a raw CUstream int and __cuda_stream__ objects, runs on
    that stream, and refuses a stream of the wrong kind with the rule."""
    dev = oxide.device("cuda")
    m = oxide.compile(ADD1, dev)
    n = 1 << 20
    x = oxide.full(n, 2.0, device=dev)
    s = dev.stream()
    for arg in (s.handle, Proto(s.handle), s):
        y = oxide.zeros(n, device=dev)
        m.add1(x, y, grid=n // 256, block=256, stream=arg)
        s.synchronize()
        assert y.numpy().min() == 3.0
    with pytest.raises(oxide.ArgumentTypeError, match="stream must be an oxide.Stream"):
        m.add1(x, x, grid=1, block=1, stream="s")
    with pytest.raises(oxide.InvalidArgumentError, match="belongs to device cpu"):
        m.add1(x, oxide.empty(n, device=dev), grid=1, block=1,
               stream=oxide.device("cpu").stream())


ADD1_TILE = """
#[tile]
fn add1t<const B: i32>(y: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {
    let p = x.partition([B]);
    p.prefetch([tile_id(0)]);
    y.store(p.load([tile_id(0)]) + 1.0);
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [None, "1", "0"])
def test_overlapped_launches_keep_order(tmp_path, pdl):
    """Launch overlap (programmatic dependent launch; on by default, OXIDE_PDL=0 turns it
    off): each launch may start while the kernel before it finishes, and must still see all
    it wrote: 400 dependent launches of many blocks, then the same as a captured graph,
    checked exactly; for a SIMT kernel, and for a tile kernel that prefetches (before its
    wait) the very tile the kernel before writes."""
    import os
    import subprocess
    import sys
    script = tmp_path / "pdl.py"
    script.write_text(
        "import numpy as np, oxide\n"
        "ADD1 = %r\n"
        "ADD1_TILE = %r\n"
        "dev = oxide.device('cuda')\n"
        "m = oxide.compile(ADD1, dev)\n"
        "t = oxide.compile(ADD1_TILE, dev)\n"
        "t.add1t.set_generic('B', 1024)\n"
        "n = (1 << 20) + 3\n"
        "kernels = [lambda x, y: m.add1(x, y, grid=-(-n // 256), block=256),\n"
        "           lambda x, y: t.add1t(y.partition(1024), x)]\n"
        "for k in kernels:\n"
        "    a = oxide.tensor(np.zeros(n, dtype=np.float32), device=dev)\n"
        "    b = oxide.empty(n, device=dev)\n"
        "    for i in range(200):\n"
        "        k(a, b)\n"
        "        k(b, a)\n"
        "    assert (a.numpy() == 400).all(), 'eager'\n"
        "    ch = oxide.Chain(dev)\n"
        "    for i in range(50):\n"
        "        ch.launch(m.add1, a, b, grid=-(-n // 256), block=256)\n"
        "        ch.launch(t.add1t, a.partition(1024), b)\n"
        "    ch.capture()\n"
        "    s = dev.stream()\n"
        "    for r in range(3):\n"
        "        ch.run(stream=s)\n"
        "    s.synchronize()\n"
        "    assert (a.numpy() == 700).all(), 'graph'\n"
        "print('in order')\n" % (ADD1, ADD1_TILE))
    env = dict(os.environ)
    env.pop("OXIDE_PDL", None)
    if pdl is not None:
        env["OXIDE_PDL"] = pdl
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "in order" in out.stdout, out.stdout + out.stderr
