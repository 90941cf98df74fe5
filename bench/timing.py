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


def graph_time(calls, reps=15):
    """Median seconds a call of `calls` (thunks that queue GPU work on torch's current
    stream), captured once as one CUDA graph and replayed: kernels back to back with no
    host time between them, as in a model's captured step."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up (compiles, loads) off the capture
        for c in calls[:3]:
            c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3 / len(calls))
    times.sort()
    return times[len(times) // 2]
