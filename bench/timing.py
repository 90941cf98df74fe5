"""The GPU timing the benchmarks share: the median over `reps` samples of CUDA
event time around `inner` back-to-back calls, after `warmup` calls."""


def timeit(fn, reps=20, inner=5, warmup=3):
    """Median seconds per call of fn (which queues GPU work on torch's current stream)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(inner):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3 / inner)
    times.sort()
    return times[len(times) // 2]
