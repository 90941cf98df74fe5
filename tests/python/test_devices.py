"""Two CUDA devices from Python, without GPUs: a subprocess (the driver is
chosen once a process) loads the stand-in driver tests/mock_cuda.c, which
has two GPUs whose memory is host memory and runs no kernel
($OXIDE_MOCK_CUDA: the build's tests/libmockcuda.so; tools/run_tests.sh and
tools/test_wheel.sh set it). A kernel compiled on cuda:0 and called with
oxide tensors on cuda:1 runs on cuda:1; tensors of both devices are refused
with both named; a copy from cuda:0 to cuda:1 is a peer copy with exact
contents; arrays of a library with a current stream (a stand-in for CuPy)
on cuda:1 launch on that library's stream of cuda:1. Both launch paths (the extension and, with OXIDE_PURE_PYTHON=1,
ctypes), as the environment says."""
import os
import subprocess
import sys
import textwrap

import pytest

MOCK = os.environ.get("OXIDE_MOCK_CUDA")

SCRIPT = textwrap.dedent("""
    import ctypes, os
    import numpy as np
    import oxide
    mock = ctypes.CDLL(os.environ["OXIDE_CUDA_DRIVER"])
    assert oxide.device_count("cuda") == 2, oxide.device_count("cuda")
    k = oxide.compile('''
    #[kernel]
    fn vadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
        let i = thread::index_1d();
        if let Some(o) = c.get_mut(i) { *o = a[i] + b[i]; }
    }
    ''', device="cuda:0").vadd
    x = np.arange(1000, dtype=np.float32)
    a, b, c = (oxide.tensor(x, device="cuda:1") for _ in range(3))
    assert str(a.device) == "cuda:1", a.device
    k(a, b, c, grid=4, block=256)
    k(a, b, c, grid=4, block=256)
    assert (mock.mock_cuda_launches(0), mock.mock_cuda_launches(1)) == (0, 2), \\
        (mock.mock_cuda_launches(0), mock.mock_cuda_launches(1))
    assert mock.mock_cuda_module_loads(1) == 1
    try:
        k(a, oxide.tensor(x, device="cuda:0"), c, grid=4, block=256)
        raise SystemExit("tensors of two devices were not refused")
    except oxide.InvalidArgumentError as e:
        assert "argument 1 ('a') is on cuda:1 and argument 2 ('b') on cuda:0" in str(e), e
    y = oxide.tensor(x * 3, device="cuda:0").to("cuda:1")
    assert mock.mock_cuda_peer_copies() == 1
    assert np.array_equal(y.numpy(), x * 3)

    # arrays of a library with a current stream (here a stand-in "cupy" module: Oxide asks
    # cupy.cuda.get_current_stream(device).ptr) on cuda:1: the launch takes that library's
    # current stream on cuda:1, not its stream on the module's cuda:0
    import sys, types
    side = oxide.device("cuda:1").stream()
    other = oxide.device("cuda:0").stream()
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda index=0: types.SimpleNamespace(
        ptr=side.handle if index == 1 else other.handle))
    sys.modules["cupy"] = fake
    class Array:
        def __init__(self, t): self.t = t
        def __dlpack__(self, **kw): return self.t.__dlpack__(**kw)
        def __dlpack_device__(self): return self.t.__dlpack_device__()
    Array.__module__ = "cupy"
    fa, fb, fc = (Array(oxide.tensor(x, device="cuda:1")) for _ in range(3))
    before = mock.mock_cuda_launches(1)
    k(fa, fb, fc, grid=4, block=256)
    mock.mock_cuda_last_stream.restype = ctypes.c_void_p
    assert mock.mock_cuda_launches(1) == before + 1
    assert mock.mock_cuda_last_stream() == side.handle, (mock.mock_cuda_last_stream(), side.handle)
    print("ok")
""")


@pytest.mark.skipif(not MOCK, reason="OXIDE_MOCK_CUDA (the build's tests/libmockcuda.so) is not set")
def test_two_devices_against_the_stand_in_driver(tmp_path):
    env = dict(os.environ, OXIDE_CUDA_DRIVER=MOCK, OXIDE_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
