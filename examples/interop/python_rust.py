"""Python hands NumPy arrays (and torch tensors, where torch is installed,
on the GPU when there is one) to a Rust library (the oxide_rust_fill
cdylib) through DLPack: the Rust side launches an Oxide kernel that writes
them in place. Checks the values and that each capsule's deleter ran
exactly once (the array's reference count is back where it was).
    python_rust.py PATH/liboxide_rust_fill.so"""
import ctypes as C
import sys

import numpy as np
from _handover import give

lib = C.CDLL(sys.argv[1])
lib.rust_affine.argtypes = [C.c_void_p, C.c_float, C.c_float]
lib.rust_affine_on.argtypes = [C.c_void_p, C.c_float, C.c_float, C.c_size_t]
lib.rust_last_error.restype = C.c_char_p


def affine(x, a, b, stream=None):
    """x = a * x + b in Rust, which takes the DLPack tensor over."""
    if lib.rust_affine(give(x, stream), a, b):
        raise RuntimeError(lib.rust_last_error().decode())


ok = True
x = np.arange(1001, dtype=np.float32)
before = sys.getrefcount(x)
for _ in range(3):
    affine(x, 2.0, 1.0)
ok &= bool((x == 8 * np.arange(1001, dtype=np.float32) + 7).all())
ok &= sys.getrefcount(x) == before  # every deleter ran, once
print(f"python_rust numpy: {'ok' if ok else 'WRONG'}")
try:
    import torch
except ImportError:
    print("python_rust torch: not run (torch is not installed)")
else:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t = torch.arange(5000, dtype=torch.float32, device=dev)
    stream = torch.cuda.current_stream().cuda_stream or 1 if dev == "cuda" else None
    affine(t, 3.0, -1.0, stream=stream)
    good = torch.equal(t, 3 * torch.arange(5000, dtype=torch.float32, device=dev) - 1)
    print(f"python_rust torch on {dev}: {'ok' if good else 'WRONG'}")
    ok &= good
    if dev == "cuda":  # on torch's current stream (a side stream), no synchronization
        side = torch.cuda.Stream()
        t = torch.empty(1 << 20, device="cuda")
        results = []
        with torch.cuda.stream(side):
            for it in range(20):
                torch.cuda._sleep(1_000_000)  # a late write: a launch elsewhere would read stale data
                t.fill_(float(it))
                ptr = give(t, stream=side.cuda_stream)
                if lib.rust_affine_on(ptr, 2.0, 1.0, side.cuda_stream):
                    raise RuntimeError(lib.rust_last_error().decode())
                results.append(t.clone())
        side.synchronize()
        good = all(torch.equal(r, torch.full_like(r, 2.0 * i + 1)) for i, r in enumerate(results))
        print(f"python_rust torch on a side stream: {'ok' if good else 'WRONG'}")
        ok &= good
sys.exit(0 if ok else 1)
