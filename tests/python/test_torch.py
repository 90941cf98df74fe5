"""Oxide next to PyTorch: which stream a launch with torch tensors runs on,
ordering across the boundary in both directions, CUDA graph capture, and
kernels registered as torch operators (oxide.torch.custom_op) under
torch.compile. Needs torch (skipped without it, with the reason); the CUDA
cases are GPU tests. Stream cases run many iterations and check exact
values: a missing wait shows up as a stale or partial result, and the
subprocess test shows they do fail with OXIDE_DEBUG_NO_STREAM_ORDERING=1."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

import oxide

torch = pytest.importorskip("torch")
import oxide.torch  # noqa: E402  (needs torch)

SRC = """
#[kernel]
fn axpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) { *o = alpha * x[i] + y[i]; }
}
// slow on purpose (a dependent chain the compiler cannot fold: a = 1, b = 0)
#[kernel]
fn slow_axpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32, spin: u32, a: f32, b: f32) {
    let i = thread::index_1d();
    let mut v = alpha;
    for k in 0..spin { v = v * a + b; }
    if let Some(o) = out.get_mut(i) { *o = v * x[i] + y[i]; }
}
#[tile]
fn softmax<const BN: i32>(y: &mut Tensor<f32, [1, BN]>, x: &Tensor<f32, [-1, -1]>) {
    let t = x.partition([1, BN]).load_padded([tile_id(0), 0], f32::NEG_INFINITY);
    let e = exp(t - reduce_max(t, 1));
    y.store(e / reduce_sum(e, 1));
}
"""

N = 1 << 20
GRID, BLOCK = N // 256, 256
ITERS = 20
SPIN = 100_000  # about 0.25 ms per slow_axpy on an H200


def cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return oxide.device("cuda")


@pytest.fixture(scope="module")
def gpu_mod():
    return oxide.compile(SRC, cuda())


# ------------------------------------------------------------------ streams


@pytest.mark.gpu
def test_default_is_torch_current_stream(gpu_mod):
    """No stream=: the launch joins torch's current stream (a side stream
    under `with torch.cuda.stream(s)`), so torch's write before it and read
    after it need no synchronization at all."""
    k = gpu_mod.axpy
    y = torch.full((N,), 10.0, device="cuda")
    x = torch.empty(N, device="cuda")
    o = torch.empty(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    results = []
    with torch.cuda.stream(side):
        for it in range(ITERS):
            torch.cuda._sleep(2_000_000)  # makes the write late: a launch elsewhere reads stale x
            x.fill_(float(it))
            k(x, y, o, 2.0, grid=GRID, block=BLOCK)
            results.append(o.clone())
    side.synchronize()
    for it, r in enumerate(results):
        assert torch.equal(r, torch.full_like(r, 2.0 * it + 10)), it


@pytest.mark.gpu
def test_no_host_synchronization(gpu_mod):
    """A launch and a torch.from_dlpack of an Oxide tensor, both on a busy
    torch stream, return at once (the issue's report: 408 ms blocked)."""
    k = gpu_mod.axpy
    dev = oxide.device("cuda")
    x = torch.ones(N, device="cuda")
    o = torch.empty(N, device="cuda")
    t = oxide.zeros(N, device=dev)
    dev.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(500_000_000)  # a few hundred ms of queued work
        t0 = time.perf_counter()
        k(x, x, o, 1.0, grid=GRID, block=BLOCK)
        tt = torch.from_dlpack(t)
        r = tt + 1
        k(x, x, o, 1.0, grid=GRID, block=BLOCK, stream=side)
        dt = time.perf_counter() - t0
    assert not side.query(), "the sleep should still be running"
    side.synchronize()
    assert dt < 0.05, f"the calls took {dt * 1e3:.1f} ms: something waited on the host"
    assert torch.equal(r, torch.ones_like(r)) and torch.equal(o, torch.full_like(o, 2.0))


def _streams_to_try(dev):
    """stream= values naming a stream other than torch's current one."""
    yield "torch.cuda.Stream", torch.cuda.Stream()
    yield "raw CUstream int", torch.cuda.Stream().cuda_stream
    yield "oxide.Stream", dev.stream()
    try:
        import cupy
        yield "cupy stream", cupy.cuda.Stream(non_blocking=True)
    except ImportError:
        pass


@pytest.mark.gpu
def test_explicit_stream_ordered_both_ways(gpu_mod):
    """stream= another stream: torch writes x on its current stream, Oxide
    reads it on the other, torch then reads Oxide's output on its current
    stream; and torch reads x before Oxide overwrites it. Exact every time."""
    dev = oxide.device("cuda")
    k = gpu_mod.slow_axpy
    y = torch.full((N,), 10.0, device="cuda")
    x = torch.zeros(N, device="cuda")
    o = torch.empty(N, device="cuda")
    for what, s in _streams_to_try(dev):
        outs, snaps = [], []
        for it in range(ITERS):
            torch.cuda._sleep(1_000_000)
            x.fill_(float(it))                 # torch writes x (late)
            k(x, y, o, 2.0, SPIN, 1.0, 0.0, grid=GRID, block=BLOCK, stream=s)
            outs.append(o.clone())             # torch reads o (Oxide's write is slow)
            torch.cuda._sleep(1_000_000)
            snaps.append(x.clone())            # torch reads x (late) ...
            k(y, y, x, 0.0, SPIN, 1.0, 0.0, grid=GRID, block=BLOCK, stream=s)  # ... Oxide writes x
        torch.cuda.synchronize()
        for it in range(ITERS):
            assert torch.equal(outs[it], torch.full_like(y, 2.0 * it + 10)), (what, it)
            assert torch.equal(snaps[it], torch.full_like(y, float(it))), (what, it)


@pytest.mark.gpu
def test_oxide_tensor_read_by_torch_on_its_stream(gpu_mod):
    """Oxide writes its own tensor (slowly, on Oxide's stream); torch takes it
    with torch.from_dlpack on a side stream and reads it there."""
    dev = oxide.device("cuda")
    k = gpu_mod.slow_axpy
    x = oxide.full(N, 1.0, device=dev)
    t = oxide.empty(N, device=dev)
    side = torch.cuda.Stream()
    s = dev.stream()
    for it in range(ITERS):
        k(x, x, t, float(it), SPIN, 1.0, 0.0, grid=GRID, block=BLOCK, stream=s)
        with torch.cuda.stream(side):
            r = torch.from_dlpack(t).clone()
        side.synchronize()
        assert torch.equal(r, torch.full_like(r, it + 1.0)), it


@pytest.mark.gpu
def test_ordering_fails_without_it(gpu_mod):
    """The same cross-stream program with OXIDE_DEBUG_NO_STREAM_ORDERING=1
    reads stale data: the waits above are what makes it right."""
    prog = textwrap.dedent(f"""
        import torch, oxide
        from test_torch import SRC, N, GRID, BLOCK, SPIN
        k = oxide.compile(SRC, "cuda").slow_axpy
        y = torch.full((N,), 10.0, device="cuda")
        x = torch.zeros(N, device="cuda")
        o = torch.empty(N, device="cuda")
        s = torch.cuda.Stream()
        bad = 0
        for it in range(10):
            torch.cuda._sleep(2_000_000)
            x.fill_(float(it))
            k(x, y, o, 2.0, SPIN, 1.0, 0.0, grid=GRID, block=BLOCK, stream=s)
            r = o.clone()
            torch.cuda.synchronize()
            bad += not torch.equal(r, torch.full_like(y, 2.0 * it + 10))
        print("BAD", bad)
    """)
    env = dict(os.environ, OXIDE_DEBUG_NO_STREAM_ORDERING="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                           os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    bad = int(out.stdout.split("BAD")[1])
    assert bad > 0, "without ordering the program should have read stale data"


@pytest.mark.gpu
def test_cuda_graph_capture(gpu_mod):
    """A launch inside torch.cuda.graph is captured on torch's capture stream
    and replays with the graph, between torch operations."""
    k = gpu_mod.axpy
    x = torch.zeros(N, device="cuda")
    y = torch.full((N,), 10.0, device="cuda")
    o = torch.empty(N, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):  # warm-up outside the capture, as torch asks
        k(x, y, o, 2.0, grid=GRID, block=BLOCK)
    torch.cuda.current_stream().wait_stream(warm)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x2 = x * 1.0
        k(x2, y, o, 2.0, grid=GRID, block=BLOCK)
        o2 = o + 1.0
    for it in range(ITERS):
        x.fill_(float(it))
        g.replay()
        assert torch.equal(o2, torch.full_like(o2, 2.0 * it + 11)), it


@pytest.mark.gpu
def test_cupy_arrays_follow_cupy_stream(gpu_mod):
    cupy = pytest.importorskip("cupy")
    k = gpu_mod.axpy
    x = cupy.zeros(N, dtype=cupy.float32)
    y = cupy.full(N, 10.0, dtype=cupy.float32)
    o = cupy.empty(N, dtype=cupy.float32)
    results = []
    with cupy.cuda.Stream(non_blocking=True) as cs:
        for it in range(ITERS):
            x.fill(float(it))
            k(x, y, o, 2.0, grid=GRID, block=BLOCK)
            results.append(o.copy())
        cs.synchronize()
    for it, r in enumerate(results):
        assert bool((r == 2.0 * it + 10).all()), it


# ------------------------------------------------------------------ custom ops


def _ops(devtype):
    """The test's operators for one device type (registered once per type)."""
    name = f"oxide_test_{devtype}"
    if hasattr(torch.ops, name) and hasattr(getattr(torch.ops, name), "axpy"):
        ns = getattr(torch.ops, name)
        return ns.axpy, ns.softmax
    mod = oxide.compile(SRC, devtype)
    axpy = oxide.torch.custom_op(
        f"{name}::axpy", mod.axpy, outputs={"out": lambda x, y, alpha: torch.empty_like(x)},
        grid=lambda x, y, out, alpha: ((x.numel() + 255) // 256,), block=256)
    softmax = oxide.torch.custom_op(
        f"{name}::softmax", mod.softmax, outputs={"y": lambda x: torch.empty_like(x)},
        tile={"y": lambda y, x: (1, 1 << max(0, (x.shape[1] - 1).bit_length()))})
    return axpy, softmax


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def tdev(request):
    if request.param == "cuda":
        cuda()
    return request.param


def test_custom_op_eager(tdev):
    axpy, softmax = _ops(tdev)
    x = torch.randn(1000, device=tdev)
    y = torch.randn(1000, device=tdev)
    assert torch.allclose(axpy(x, y, 3.0), 3.0 * x + y, rtol=1e-6, atol=1e-6)
    a = torch.randn(37, 300, device=tdev)
    assert torch.allclose(softmax(a), torch.softmax(a, dim=1), rtol=1e-5, atol=1e-6)
    schema = str(axpy.default._schema)
    assert "Tensor x, Tensor y, float alpha) -> Tensor" in schema, schema


def test_custom_op_torch_compile(tdev):
    axpy, softmax = _ops(tdev)

    def f(x, y):
        h = axpy(x, y, 2.0).reshape(40, 25)
        return softmax(torch.relu(h) + 1.0).sum(dim=0)

    x = torch.randn(1000, device=tdev)
    y = torch.randn(1000, device=tdev)
    eager = f(x, y)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    for _ in range(3):
        x = torch.randn(1000, device=tdev)
        y = torch.randn(1000, device=tdev)
        assert torch.allclose(compiled(x, y), f(x, y), rtol=1e-5, atol=1e-6)
    assert eager.shape == (25,)


@pytest.mark.gpu
def test_custom_op_compile_cudagraphs():
    """mode="reduce-overhead": inductor captures the operator in a CUDA graph."""
    cuda()
    axpy, softmax = _ops("cuda")

    def f(x, y):
        return softmax(axpy(x, y, 0.5).reshape(10, 100)) * 2.0

    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(5):
        x = torch.randn(1000, device="cuda")
        y = torch.randn(1000, device="cuda")
        assert torch.allclose(compiled(x, y), f(x, y), rtol=1e-5, atol=1e-6)


def test_custom_op_errors():
    mod = oxide.compile(SRC, "cpu")
    with pytest.raises(ValueError, match="not parameters"):
        oxide.torch.custom_op("oxide_test_err::a", mod.axpy, outputs={"nope": lambda *a: None})
    with pytest.raises(ValueError, match="not a parameter the kernel writes"):
        oxide.torch.custom_op("oxide_test_err::b", mod.axpy, outputs={"x": lambda *a: None})
    with pytest.raises(ValueError, match="tile shape"):
        oxide.torch.custom_op("oxide_test_err::c", mod.softmax, outputs={"y": lambda x: x})
    with pytest.raises(ValueError, match="namespace::name"):
        oxide.torch.custom_op("noname", mod.axpy, outputs={"out": lambda *a: None})
    with pytest.raises(TypeError, match="oxide.Kernel"):
        oxide.torch.custom_op("oxide_test_err::d", "axpy", outputs={"out": lambda *a: None})


ATTENTION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tile_attention.oxk")


@pytest.mark.parametrize("shape", [(2, 3, 300, 64, 64, 64), (1, 2, 257, 128, 64, 128), (1, 1, 100, 128, 128, 64),
                                   (1, 2, 700, 128, 128, 128), (2, 2, 519, 64, 128, 128), (2, 2, 333, 64, 64, 128),
                                   (1, 2, 40, 64, 64, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_tile_attention_against_sdpa(tdev, shape, causal):
    """examples/tile_attention.oxk on torch tensors against
    torch.nn.functional.scaled_dot_product_attention (sequence lengths no
    tile divides; on the GPU, the wgmma path), with a poisoned output."""
    import math
    import torch.nn.functional as F
    B, H, N, D, BM, BN = shape
    k = oxide.compile_file(ATTENTION, tdev).attention
    k.set_generic("BN", BN)
    g = torch.Generator(device="cpu").manual_seed(N + D)
    q, kk, v = (torch.randn(B, H, N, D, generator=g).to(tdev, torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    k(oxide.from_dlpack(o).partition([1, 1, BM, D]), q, kk, v, oxide.f32(1 / math.sqrt(D)), causal)
    ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), is_causal=causal)
    err = (o.float() - ref).abs().max().item()
    assert err < 2e-2, err  # bf16 probabilities and a bf16 output


@pytest.mark.parametrize("causal", [False, True])
def test_tile_attention_strided_views(tdev, causal):
    """The same on q, k and v that are views of [B, N, H, D] tensors (the
    layout a model's projections give) transposed to [B, H, N, D], k and v
    two views of one tensor: on the GPU, TMA copies through 4-D tensor maps
    with those strides."""
    import math
    import torch.nn.functional as F
    B, H, N, D = 2, 3, 333, 64
    k = oxide.compile_file(ATTENTION, tdev).attention
    k.set_generic("BN", 64)
    g = torch.Generator(device="cpu").manual_seed(7)
    q = torch.randn(B, N, H, D, generator=g).to(tdev, torch.bfloat16).transpose(1, 2)
    kv = torch.randn(B, N, 2, H, D, generator=g).to(tdev, torch.bfloat16)
    kk, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    o = torch.full((B, H, N, D), float("nan"), device=tdev, dtype=torch.bfloat16)
    k(oxide.from_dlpack(o).partition([1, 1, 64, D]), q, kk, v, oxide.f32(1 / math.sqrt(D)), causal)
    ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), is_causal=causal)
    err = (o.float() - ref).abs().max().item()
    assert err < 2e-2, err


CHAIN = """
#[tile]
fn chain<const BM: i32, const BN: i32, const D: i32>(o: &mut Tensor<f32, [BM, D]>, q: &Tensor<bf16, [1, -1, D]>,
        k: &Tensor<bf16, [1, -1, D]>, v: &Tensor<bf16, [1, -1, D]>) {
    let qt = reshape(q.partition([1, BM, D]).load([0, tile_id(0), 0]), [BM, D]);
    let mut acc = full([BM, D], 0.0f32);
    for j in 0..(k.dim(1) + (BN as usize) - 1) / (BN as usize) {
        let kt = reshape(k.partition([1, BN, D]).load([0, j, 0]), [BN, D]);
        let vt = reshape(v.partition([1, BN, D]).load([0, j, 0]), [BN, D]);
        let s = dot(qt, transpose(kt));
        if j % 2 == 1 {
            acc = acc * 0.5f32;
        }
        acc = mma(s as bf16, vt, acc);
    }
    o.store(acc);
}
"""
CHAIN_2D = """#[tile]
fn chain<const BM: i32, const BN: i32, const D: i32>(o: &mut Tensor<f32, [BM, D]>, q: &Tensor<bf16, [-1, D]>,
        k: &Tensor<bf16, [-1, D]>, v: &Tensor<bf16, [-1, D]>) {
    let qt = q.partition([BM, D]).load([tile_id(0), 0]);
    let mut acc = full([BM, D], 0.0f32);
    for j in 0..(k.dim(0) + (BN as usize) - 1) / (BN as usize) {
        let kt = k.partition([BN, D]).load([j, 0]);
        let vt = v.partition([BN, D]).load([j, 0]);
        let s = dot(qt, transpose(kt));
        if j % 2 == 1 {
            acc = acc * 0.5f32;
        }
        acc = mma(s as bf16, vt, acc);
    }
    o.store(acc);
}
"""


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("BM", [64, 128])
def test_tile_deferred_products(tdev, BM, rank):
    """Two products a pass whose operands are all copies (on sm_90, deferred
    wgmma dots: each use waits for just its product; TMA loads of [N, D] or
    [1, N, D] tensors, the query tile loaded once before the loop, so not a
    K loop): the scores used after a branch, not through a variable, and the
    second product stored in the accumulator in its own block; against a
    float64 reference with the same bf16 rounding of the scores. Sequence
    length no tile divides."""
    N, D, BN = 333, 64, 64
    k = oxide.compile(CHAIN if rank == 3 else CHAIN_2D, tdev).chain
    k.set_generic("BN", BN)
    g = torch.Generator(device="cpu").manual_seed(BM)
    q, kk, v = (torch.randn(N, D, generator=g).div(4).to(tdev, torch.bfloat16) for _ in range(3))
    o = torch.full((N, D), float("nan"), device=tdev)
    k(oxide.from_dlpack(o).partition([BM, D]), *((x[None] if rank == 3 else x) for x in (q, kk, v)))
    qd, kd, vd = (x.double().cpu() for x in (q, kk, v))
    acc = torch.zeros(N, D, dtype=torch.float64)
    for j in range((N + BN - 1) // BN):
        s = (qd @ kd[j * BN:(j + 1) * BN].T).float().to(torch.bfloat16).double()
        acc = (acc * 0.5 if j % 2 == 1 else acc) + s @ vd[j * BN:(j + 1) * BN]
    err = (o.double().cpu() - acc).abs().max().item()
    assert err < 2e-2 * max(1.0, acc.abs().max().item()), err


MM_FROM1 = """
#[tile]
fn mm_from1<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 1..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
#[tile]
fn mm_param<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>, nk: u64) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 1..nk {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""


@pytest.mark.parametrize("bound", ["dims", "param"])
@pytest.mark.parametrize("tiles", [(128, 256), (128, 128), (64, 128)])
@pytest.mark.parametrize("shape", [(300, 520, 328), (1500, 1304, 200), (200, 136, 40)])
def test_tile_matmul_k_loop_from_one(tdev, tiles, shape, bound):
    """A K loop that starts at tile 1: on sm_90 with 128-row tiles a producer
    warpgroup copies the operands (core/tile/ws.c), computing the loop's
    first and end values itself; the K tiles it walks must be the loop's, in
    persistent blocks that run several tiles (1500 x 1304), and none when the
    loop is empty (K = 40: the output is all zeros). Rows of whole 16-byte
    pieces, which TMA copies need. The loop's end from the tensors' dims, or
    a scalar parameter. Against float64, the output poisoned first."""
    (M, N, K), (BM, BN) = shape, tiles
    mod = oxide.compile(MM_FROM1, tdev)
    k = mod.mm_from1 if bound == "dims" else mod.mm_param
    k.set_generic("BK", 64)
    g = torch.Generator(device="cpu").manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).to(tdev, torch.bfloat16)
    b = torch.randn(K, N, generator=g).to(tdev, torch.bfloat16)
    c = torch.full((M, N), float("nan"), device=tdev)
    extra = () if bound == "dims" else (oxide.u64((K + 63) // 64),)
    k(oxide.from_dlpack(c).partition([BM, BN]), a, b, *extra)
    want = a.double().cpu()[:, 64:] @ b.double().cpu()[64:, :]
    err = (c.double().cpu() - want).abs().max().item()
    assert err <= 1e-3 * max(1.0, want.abs().max().item()), err


MATMUL_FP8 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tile_matmul_fp8.oxk")


@pytest.mark.parametrize("shape", [(300, 200, 176), (256, 512, 1024)])
def test_tile_matmul_fp8_against_scaled_mm(tdev, shape):
    """examples/tile_matmul_fp8.oxk on torch float8_e4m3fn tensors (B given as
    Bt [N, K], the layout torch._scaled_mm takes), with the candidate tiles
    chosen by measurement: against a float64 product of the same fp8 values,
    and on the GPU against torch._scaled_mm itself. Its quantize kernel
    against torch's own conversion to float8_e4m3fn (within range)."""
    M, N, K = shape
    mod = oxide.compile_file(MATMUL_FP8, tdev)
    g = torch.Generator(device="cpu").manual_seed(M + K)
    xa = torch.randn(M, K, generator=g).to(tdev) * 100
    a8 = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=tdev)
    mod.quantize(oxide.from_dlpack(a8).partition([32, 64]), xa, oxide.f32(1.0))
    assert torch.equal(a8.view(torch.uint8), xa.to(torch.float8_e4m3fn).view(torch.uint8))
    bt = (torch.randn(N, K, generator=g) * 4).to(torch.float8_e4m3fn).to(tdev)
    sa, sb = 0.5, 0.25
    c = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device=tdev)
    k = mod.matmul_fp8
    k.set_candidates([{"BM": 128, "BN": 128, "BK": 64}, {"BM": 128, "BN": 256, "BK": 128},
                      {"BM": 64, "BN": 128, "BK": 128}])
    k(c, a8, bt, oxide.f32(sa), oxide.f32(sb))
    assert k.tuned(c, a8, bt, oxide.f32(sa), oxide.f32(sb)) is not None
    want = (a8.double() @ bt.double().T) * (sa * sb)
    mag = (a8.double().abs() @ bt.double().abs().T) * (sa * sb)
    err = (c.double() - want).abs()
    # bf16 output; on Hopper the fp8 tensor cores accumulate with ~14 significant bits
    assert (err <= 2 ** -8 * want.abs() + 1e-3 * mag + 1e-6).all(), err.max().item()
    if tdev == "cuda" and M % 16 == 0 and N % 16 == 0 and K % 16 == 0:  # what _scaled_mm takes
        for fast in (False, True):
            ref = torch._scaled_mm(a8, bt.T, scale_a=torch.tensor(sa, device=tdev),
                                   scale_b=torch.tensor(sb, device=tdev), out_dtype=torch.bfloat16,
                                   use_fast_accum=fast)
            assert ((c.double() - ref.double()).abs() <= 2 ** -7 * ref.double().abs() + 4e-4 * mag + 1e-6).all()
