"""Every failing C call raises an OxideError subclass with Oxide's message."""
import os
import re
import subprocess
import sys

import pytest

import oxide
from kernels import OOB, SAXPY, VECADD, bounds_errors

LOCATION = re.compile(r"\w+\.oxk:\d+:\d+")


def test_compile_error_has_location_and_caret(dev):
    src = "#[kernel]\nfn bad(a: &[f32]) {\n    let x: i32 = 1.5;\n}\n"
    with pytest.raises(oxide.CompileError) as e:
        oxide.compile(src, device=dev, filename="bad.oxk")
    msg = str(e.value)
    assert "bad.oxk:3:18" in msg and "^" in msg and "let x: i32 = 1.5;" in msg
    assert e.value.status == oxide._decls.OX_ERR_COMPILE
    assert e.value.status_name == "OX_ERR_COMPILE"


def test_wrong_argument_count(dev):
    k = oxide.compile(SAXPY, device=dev).saxpy
    a = oxide.tensor([1.0], device=dev)
    with pytest.raises(oxide.InvalidArgumentError, match="takes 4 arguments, got 3"):
        k(a, a, oxide.empty(1, device=dev), grid=1, block=1)


def test_wrong_dtype(dev):
    k = oxide.compile(SAXPY, device=dev).saxpy
    a, out = oxide.tensor([1.0], device=dev), oxide.empty(1, device=dev)
    with pytest.raises(oxide.InvalidArgumentError, match="expected f32, got f64"):
        k(a, a, out, oxide.f64(2.0), grid=1, block=1)
    with pytest.raises(oxide.InvalidArgumentError, match="tensor of f32, got i32"):
        k(oxide.tensor([1], dtype="i32", device=dev), a, out, oxide.f32(2.0), grid=1, block=1)
    with pytest.raises(TypeError, match=r"expected an f32 scalar .*got str"):
        k(a, a, out, "2.0", grid=1, block=1)
    k(a, a, out, 2.0, grid=1, block=1)  # a plain number takes the parameter's dtype
    with pytest.raises(ValueError):
        k.check(a, a, out, oxide.f32(2.0), grid=1, block=(1, 1, 1, 1))


def test_launch_contract(dev):
    k = oxide.compile(VECADD, device=dev, filename="vecadd.oxk").vecadd
    a, c = oxide.tensor([1.0] * 4, device=dev), oxide.empty(8, device=dev)
    with pytest.raises(oxide.LaunchError, match=r"vecadd\.oxk:\d+:\d+.*block = \(256, 1, 1\)"):
        k(a, a, c, grid=1, block=128)
    with pytest.raises(oxide.LaunchError, match=r"a\.len\(\) >= c\.len\(\)"):
        k.check(a, a, c, grid=1, block=256)


def test_out_of_bounds_read_reported_once(dev):
    """On the CPU the launch itself raises (its kernel has run); on CUDA the launch
    raises if the kernel has recorded the access by then, else the synchronize."""
    k = oxide.compile(OOB, device=dev, filename="oob.oxk").oob
    a, c = oxide.tensor([1.0, 2.0, 3.0, 4.0], device=dev), oxide.empty(4, device=dev)
    launched = []
    errors = bounds_errors(lambda: launched.append(k(a, c, grid=1, block=4)),
                           dev.default_stream.synchronize)
    assert len(errors) == 1
    if dev.type == "cpu":
        assert not launched, "on the CPU the launch raises"
    msg = str(errors[0])
    assert "oob.oxk:5:" in msg and "index 4" in msg and "length is 4" in msg, msg
    # the error is consumed: the stream and the kernel keep working
    k(oxide.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=dev), c, grid=1, block=4)
    dev.default_stream.synchronize()
    assert c.tolist() == [2.0, 3.0, 4.0, 5.0]


def test_out_of_bounds_raised_by_a_later_launch(dev):
    """On CUDA an error the kernel has recorded is raised by this thread's next launch,
    not only by a synchronize: here the faulting kernel is waited for through an event,
    which consumes nothing, so the next launch raises it."""
    k = oxide.compile(OOB, device=dev, filename="oob.oxk").oob
    a, c = oxide.tensor([1.0, 2.0, 3.0, 4.0], device=dev), oxide.empty(4, device=dev)
    b = oxide.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=dev)
    if dev.type == "cpu":
        with pytest.raises(oxide.BoundsError, match="index 4"):
            k(a, c, grid=1, block=4)
        return
    try:
        k(a, c, grid=1, block=4)
    except oxide.BoundsError:
        pytest.skip("the kernel finished before its own launch returned (raised there)")
    dev.default_stream.record_event().synchronize()
    with pytest.raises(oxide.BoundsError, match="oob.oxk:5:.*index 4"):
        k(b, c, grid=1, block=4)  # a correct launch: the error is the earlier one's
    dev.default_stream.synchronize()  # consumed above


def test_launch_blocking_raises_at_the_launch(dev, tmp_path):
    """OXIDE_LAUNCH_BLOCKING=1: every launch waits for its kernel and raises its error."""
    script = tmp_path / "blocking.py"
    script.write_text(
        "import sys, oxide\n"
        "sys.path.insert(0, %r)\n"
        "from kernels import OOB\n"
        "dev = oxide.device(%r)\n"
        "k = oxide.compile(OOB, device=dev, filename='oob.oxk').oob\n"
        "a, c = oxide.tensor([1.0, 2.0, 3.0, 4.0], device=dev), oxide.empty(4, device=dev)\n"
        "try:\n"
        "    k(a, c, grid=1, block=4)\n"
        "except oxide.BoundsError as e:\n"
        "    print('raised at the launch:', e)\n"
        "dev.synchronize()\n" % (os.path.dirname(os.path.abspath(__file__)), str(dev)))
    env = dict(os.environ, OXIDE_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "raised at the launch: oob.oxk:5:" in out.stdout, out.stdout + out.stderr


def test_not_found(dev, tmp_path):
    m = oxide.compile(VECADD, device=dev)
    with pytest.raises(oxide.NotFoundError, match="no kernel 'nope'.*'vecadd'"):
        m["nope"]
    with pytest.raises(AttributeError):
        m.nope
    with pytest.raises(oxide.FileError):
        oxide.compile_file(tmp_path / "missing.oxk", device=dev)


def test_compile_file(dev, tmp_path):
    p = tmp_path / "va.oxk"
    p.write_text(VECADD)
    k = oxide.compile_file(p, device=dev).vecadd
    a, c = oxide.tensor([1.0, 2.0], device=dev), oxide.empty(2, device=dev)
    with pytest.raises(oxide.LaunchError, match="va.oxk"):  # the file's name is in messages
        k(a, a, c, grid=1, block=1)


def test_error_hierarchy():
    assert issubclass(oxide.DriverError, oxide.DeviceError)
    assert issubclass(oxide.InvalidArgumentError, ValueError)
    assert all(issubclass(c, oxide.OxideError) for c in (
        oxide.CompileError, oxide.LaunchError, oxide.BoundsError, oxide.NotFoundError))


@pytest.mark.skipif(oxide.device_count("cuda") > 0, reason="a GPU is present: 'cuda' works here")
def test_cuda_without_gpu_is_device_error():
    with pytest.raises(oxide.DeviceError) as e:
        oxide.device("cuda")
    assert e.value.status_name == "OX_ERR_NO_DEVICE" and str(e.value)


def test_bad_cuda_ordinal():
    with pytest.raises(oxide.DeviceError):
        oxide.device(f"cuda:{oxide.device_count('cuda') + 7}")
