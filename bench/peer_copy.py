#!/usr/bin/env python3
"""Copy bandwidth from GPU 0 to GPU 1 (issue 12), peers in the same run:
Oxide's ox_tensor_copy (Tensor.copy_from: cuMemcpyPeerAsync with peer
access; $OXIDE_PEER=0 for its path through the host), torch's
Tensor.copy_ between devices, and cudaMemcpyPeer (CuPy's runtime binding),
all into preallocated buffers. Each is timed as wall time around `reps`
copies followed by a synchronization of both devices (median of 5); every
copy is checked for exact contents first. Needs two GPUs: on one it says so
and exits with status 2 (nothing measured).

  python3 bench/peer_copy.py [MiB ...]        (default 64 256 1024)

Writes $OUT/peer_copy.json (else bench/peer_copy.json)."""
import json
import os
import statistics
import sys
import time

import torch

import oxide

if torch.cuda.device_count() < 2 or oxide.device_count("cuda") < 2:
    print(f"peer_copy: NOT RUN: {torch.cuda.device_count()} GPU(s); this benchmark needs two")
    sys.exit(2)
try:
    import cupy
except ImportError:
    cupy = None

SIZES = [int(a) for a in sys.argv[1:]] or [64, 256, 1024]
d0, d1 = oxide.device("cuda:0"), oxide.device("cuda:1")
print(f"devices: {d0} and {d1} ({torch.cuda.get_device_name(0)}); peer access "
      f"{torch.cuda.can_device_access_peer(1, 0)}; OXIDE_PEER={os.environ.get('OXIDE_PEER', '(unset)')}")


def sync():
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)


def timed(fn, nbytes, reps=20):
    fn()
    sync()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / reps)
    return nbytes / statistics.median(times) / 1e9


rows = []
for mib in SIZES:
    n = mib * (1 << 20) // 4
    src = torch.arange(n, dtype=torch.float32, device="cuda:0")
    dst = torch.empty(n, dtype=torch.float32, device="cuda:1")
    osrc, odst = oxide.from_dlpack(src), oxide.from_dlpack(dst)
    ways = {
        "oxide ox_tensor_copy": lambda: odst.copy_from(osrc),
        "torch Tensor.copy_": lambda: dst.copy_(src),
    }
    if cupy is not None:
        ways["cudaMemcpyPeer (CuPy)"] = lambda: cupy.cuda.runtime.memcpyPeer(dst.data_ptr(), 1, src.data_ptr(), 0,
                                                                           n * 4)
    for name, fn in ways.items():
        dst.zero_()
        sync()
        fn()
        sync()
        assert torch.equal(dst.cpu(), src.cpu()), f"{name}: wrong contents"
        gbs = timed(fn, n * 4)
        rows.append({"MiB": mib, "impl": name, "GB/s": gbs})
        print(f"  {mib:5d} MiB  {name:28s} {gbs:8.1f} GB/s")
out = os.path.join(os.environ.get("OUT", os.path.dirname(os.path.abspath(__file__))), "peer_copy.json")
with open(out, "w") as f:
    json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
print("wrote", out)
