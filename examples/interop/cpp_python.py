"""Python and a C++ library (cpp_scale.cpp, over the same liboxide.so) share
one tensor and one stream, through public API only:
  1. Python's tensor goes to C++ as DLPack (no copy); C++ queues a kernel on
     Python's stream (passed as its CUstream, Stream.handle) and returns at
     once; Python synchronizes that one stream and reads the result.
  2. A tensor made in C++ comes to Python as DLPack, a Python kernel writes
     it, Python reads it.
  3. NumPy memory passed to C++: the capsule's deleter runs exactly once.
On the CPU, and on CUDA device 0 when there is one.
    cpp_python.py PATH/libcpp_scale.so"""
import ctypes as C
import sys

import numpy as np

import oxide
from _handover import give

lib = C.CDLL(sys.argv[1])
lib.cpp_scale.argtypes = [C.c_void_p, C.c_float, C.c_size_t]
lib.cpp_make_iota.argtypes = [C.c_int64, C.c_int]
lib.cpp_make_iota.restype = C.c_void_p
lib.cpp_last_error.restype = C.c_char_p
new_capsule = C.pythonapi.PyCapsule_New
new_capsule.restype, new_capsule.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]


class Managed:
    """A managed tensor from C++, offered to oxide.from_dlpack."""

    def __init__(self, ptr, dev):
        self.ptr, self.dev = ptr, dev

    def __dlpack_device__(self):
        return (2, 0) if self.dev.type == "cuda" else (1, 0)

    def __dlpack__(self, stream=None, max_version=None):
        return new_capsule(self.ptr, b"dltensor_versioned", None)


ADD = """
#[kernel]
fn add(x: DisjointSlice<f32>, v: f32) {
    let i = thread::index_1d();
    if let Some(o) = x.get_mut(i) { *o = *o + v; }
}
"""

ok = True
devices = ["cpu"] + (["cuda"] if oxide.device_count("cuda") else [])
for name in devices:
    dev = oxide.device(name)
    n = 100_003
    # 1. one tensor and one stream: Python's
    x = oxide.arange(0.0, n, device=dev)
    s = dev.stream()
    for _ in range(3):
        if lib.cpp_scale(give(x, stream=s.handle if name == "cuda" else None), 2.0,
                         s.handle):
            raise RuntimeError(lib.cpp_last_error().decode())
    s.synchronize()  # C++ queued on this very stream
    got = x.numpy()
    ok &= bool((got == 8 * np.arange(n, dtype=np.float32)).all())
    # 2. a tensor C++ made, written by a Python kernel
    ptr = lib.cpp_make_iota(1000, int(name == "cuda"))
    if not ptr:
        raise RuntimeError(lib.cpp_last_error().decode())
    t = oxide.from_dlpack(Managed(ptr, dev))
    oxide.compile(ADD, dev).add(t, 0.5, grid=4, block=256)
    ok &= t.numpy().tolist() == [i + 0.5 for i in range(1000)]
    print(f"cpp_python on {dev}: {'ok' if ok else 'WRONG'}")
# 4. torch tensors through C++ and back, on torch's current stream (a side
# stream): torch writes, C++ scales, torch reads, with no synchronization
try:
    import torch
except ImportError:
    torch = None
    print("cpp_python torch: not run (torch is not installed)")
if torch is not None and torch.cuda.is_available():
    side = torch.cuda.Stream()
    t = torch.empty(1 << 20, device="cuda")
    results = []
    with torch.cuda.stream(side):
        for it in range(20):
            torch.cuda._sleep(1_000_000)  # a late write: a launch elsewhere would read stale data
            t.fill_(float(it))
            assert lib.cpp_scale(give(t, stream=side.cuda_stream), 2.0, side.cuda_stream) == 0
            results.append(t.clone())
    side.synchronize()
    good = all(torch.equal(r, torch.full_like(r, 2.0 * i)) for i, r in enumerate(results))
    print(f"cpp_python torch on a side stream: {'ok' if good else 'WRONG'}")
    ok &= good
# 3. NumPy memory to C++: the deleter runs once (the reference count comes back)
a = np.ones(5000, np.float32)
before = sys.getrefcount(a)
for _ in range(4):
    assert lib.cpp_scale(give(a), 3.0, 0) == 0, lib.cpp_last_error()
ok &= bool((a == 81).all()) and sys.getrefcount(a) == before
print(f"cpp_python numpy: {'ok' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
