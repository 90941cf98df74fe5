"""#[tile] kernels from Python (docs/language.md section 12): outputs passed as
partitions (Tensor.partition), launches without grid= and block=, atomic
tensors with grid= from the call, and the errors of each."""
import gc
import weakref

import pytest

import oxide
from kernels import VECADD

np = pytest.importorskip("numpy")

ADD = """\
#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"""

# examples/tile_softmax.oxk
SOFTMAX = """\
#[tile]
fn softmax<const BN: i32>(y: &mut Tensor<f32, [1, BN]>, x: &Tensor<f32, [-1, -1]>) {
    let t = x.partition([1, BN]).load_padded([tile_id(0), 0], f32::NEG_INFINITY);
    let e = exp(t - reduce_max(t, 1));
    y.store(e / reduce_sum(e, 1));
}
"""

# examples/tile_matmul.oxk
MATMUL = """\
#[tile]
fn matmul<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {
    let pa = a.partition([BM, 32]);
    let pb = b.partition([32, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + 31) / 32 {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""

HIST = """\
#[tile]
fn hist(h: &Tensor<Atomic<u32>, [-1]>, x: &Tensor<i32, [-1]>) {
    h.atomic_add_at(x.partition([256]).load_padded([tile_id(0)], -1), 1u32);
}
"""


def _add(dev):
    return oxide.compile(ADD, device=dev, filename="add.oxk").add


# ------------------------------------------------------------------ results


def test_tile_add(dev):
    n = 1000  # not a multiple of the tile: the last tile is cut at the edge
    x = oxide.arange(n, dtype="f32", device=dev)
    y = oxide.full(n, 0.5, device=dev)
    k = _add(dev)
    for tile in (128, 256):  # each tile size binds B anew (and specializes the kernel)
        z = oxide.full(n, float("nan"), device=dev)
        p = z.partition((tile,))
        assert p.tile == (tile,) and p.tile_grid == ((n + tile - 1) // tile,)
        assert p.base is z and p.shape == z.shape and p.data_ptr == z.data_ptr
        assert z.tile is None and z.tile_grid is None
        k.check(p, x, y)
        k(p, x, y)  # no grid= or block=: the partition's tile grid, the compiler's block
        dev.synchronize()
        assert z.numpy().tolist() == [i + 0.5 for i in range(n)]


def test_tiles_keyword_cuts_whole_outputs(dev):
    """tiles= at the call cuts each output passed whole (a NumPy array on the CPU, an
    oxide.Tensor) into the partition the kernel needs, in either form: one tile for every
    output, or a dict by parameter name."""
    n = 1000
    k = _add(dev)
    x, y = oxide.arange(n, dtype="f32", device=dev), oxide.full(n, 0.5, device=dev)
    want = [i + 0.5 for i in range(n)]
    for tiles in ((256,), 128, {"z": (512,)}):
        z = oxide.full(n, float("nan"), device=dev)
        k(z, x, y, tiles=tiles)
        dev.synchronize()
        assert z.numpy().tolist() == want
        k.check(z, x, y, tiles=tiles)
    if dev.type == "cpu":  # an array of another library, used in place
        z = np.full(n, np.nan, dtype=np.float32)
        k(z, x, y, tiles=(256,))
        assert z.tolist() == want
    z = oxide.empty(n, device=dev)
    with pytest.raises(oxide.InvalidArgumentError, match=r"tiles=.*'w' is not one of its outputs \(z\)"):
        k(z, x, y, tiles={"w": (128,)})
    with pytest.raises(oxide.InvalidArgumentError, match=r"output 'z' is already a partition \(tile \[128\]\)"):
        k(z.partition(128), x, y, tiles=(256,))
    with pytest.raises(oxide.InvalidArgumentError, match=r"partition: tile \[16, 16\] has 2 sizes"):
        k(z, x, y, tiles=(16, 16))
    vk = oxide.compile(VECADD, device=dev).vecadd
    with pytest.raises(oxide.InvalidArgumentError, match="no `&mut Tensor` output to cut"):
        vk(x, x, z, grid=1, block=256, tiles=(128,))


def test_tile_add_strided_and_broadcast_inputs(dev):
    n = 300
    big = oxide.arange(2 * n, dtype="f32", device=dev)
    x = big[::2]  # every other element: a strided view
    y = oxide.tensor([0.25], device=dev).broadcast_to((n,))  # stride 0, read-only
    assert x.stride() == (2,) and not x.is_contiguous()
    assert y.stride() == (0,) and y.is_read_only
    z = oxide.zeros(n, device=dev)
    _add(dev)(z.partition(64), x, y)
    assert z.tolist() == [2 * i + 0.25 for i in range(n)]
    # a strided output: the partition of a view writes only the view's elements
    out = oxide.zeros(2 * n, device=dev)
    _add(dev)(out[1::2].partition(64), x, y)
    got = out.numpy()
    assert got[1::2].tolist() == [2 * i + 0.25 for i in range(n)]
    assert not got[::2].any()


def test_tile_softmax_rows_not_a_power_of_two(dev):
    rows, n = 37, 300  # a row is one tile of [1, 512]; the padding is -inf
    xs = np.random.default_rng(1).standard_normal((rows, n)).astype(np.float32) * 4
    y = oxide.full((rows, n), float("nan"), device=dev)
    p = y.partition((1, 512))
    assert p.tile_grid == (rows, 1)
    oxide.compile(SOFTMAX, device=dev).softmax(p, oxide.tensor(xs, device=dev))
    x64 = xs.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=0)


def _bf16_reference(a32):
    """float64 values of a32 rounded to bf16 (nearest even), computed here
    independently of the binding."""
    u = a32.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("b_layout", ["contiguous", "transposed"])
def test_tile_matmul_bf16(dev, b_layout):
    M, N, K = 100, 70, 90  # no dimension is a multiple of a tile
    rng = np.random.default_rng(2)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    a = oxide.tensor(a32, dtype="bf16", device=dev)  # rounded to nearest even
    if b_layout == "contiguous":
        b = oxide.tensor(b32, dtype=oxide.bf16, device=dev)
    else:  # b as the transposed view of a [N, K] tensor
        b = oxide.tensor(np.ascontiguousarray(b32.T), dtype="bf16", device=dev).T
        assert b.shape == (K, N) and b.stride() == (1, K)
    assert (a.dtype, b.dtype) == ("bf16", "bf16")
    av, bv = _bf16_reference(a32), _bf16_reference(b32)
    # the binding rounded as Oxide does (tolist() reads back the bf16 values)
    assert np.array_equal(np.array(a.tolist()), av) and np.array_equal(np.array(b.tolist()), bv)
    c = oxide.full((M, N), float("nan"), device=dev)
    p = c.partition((64, 32))
    assert p.tile_grid == (2, 3)
    oxide.compile(MATMUL, device=dev).matmul(p, a, b)
    want = av @ bv
    mag = np.abs(av) @ np.abs(bv)  # f32 accumulation: error ~ K * 2^-24 * sum |a b|
    err = np.abs(c.numpy().astype(np.float64) - want)
    assert (err <= 1e-5 * mag + 1e-6).all(), err.max()


# y = x w^T as the Llama decode projections: the weight's first K tiles prefetched into L2
# first (a hint: on the GPU, before the wait for the kernel before), some of them past the
# tensor's end (skipped)
PREFETCH_LINEAR = """\
#[tile]
fn linear<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>,
        w: &Tensor<bf16, [-1, -1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BN, BK]);
    for k in 0..px.num_tiles(1) + 3 {
        pw.prefetch([tile_id(1), k]);
    }
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), transpose(pw.load([tile_id(1), k])), acc);
    }
    y.store(acc);
}
"""


def test_prefetch_changes_no_result(dev):
    M, N, K = 3, 200, 150
    rng = np.random.default_rng(5)
    x32 = rng.standard_normal((M, K)).astype(np.float32)
    w32 = rng.standard_normal((N, K)).astype(np.float32)
    x, w = oxide.tensor(x32, dtype="bf16", device=dev), oxide.tensor(w32, dtype="bf16", device=dev)
    y = oxide.full((M, N), float("nan"), device=dev)
    k = oxide.compile(PREFETCH_LINEAR, device=dev).linear
    k.set_generic("BK", 64)
    k(y.partition((64, 64)), x, w)
    want = _bf16_reference(x32) @ _bf16_reference(w32).T
    assert np.abs(y.numpy() - want).max() <= 1e-3 * np.abs(want).max()


TF32_MATMUL = """\
#[tile]
fn mm<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f32, [-1, -1]>, b: &Tensor<f32, [-1, -1]>) {
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + 15) / 16 {
        acc = mma(a.partition([BM, 16]).load([tile_id(0), k]) as tf32, b.partition([16, BN]).load([k, tile_id(1)]) as tf32, acc);
    }
    c.store(acc);
}
"""


def _tf32_reference(x):
    """f32 -> tf32 as cvt.rna.tf32.f32 rounds: to nearest, ties away from zero"""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x1000) & ~np.uint64(0x1FFF)) & 0xFFFFFFFF
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("tile", [(128, 128), (16, 32)])
def test_tile_matmul_tf32(dev, tile):
    """f32 tensors multiplied as tf32: on CUDA with 128 x 128 tiles on tensor
    cores (mma.sync m16n8k8), with 16 x 32 tiles and on the CPU in f32"""
    M, N, K = 150, 90, 70
    rng = np.random.default_rng(3)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    c = oxide.full((M, N), float("nan"), device=dev)
    oxide.compile(TF32_MATMUL, device=dev).mm(c.partition(tile), oxide.tensor(a32, device=dev),
                                               oxide.tensor(b32, device=dev))
    av, bv = _tf32_reference(a32), _tf32_reference(b32)
    want, mag = av @ bv, np.abs(av) @ np.abs(bv)
    err = np.abs(c.numpy().astype(np.float64) - want)
    assert (err <= 1e-5 * mag + 1e-6).all(), err.max()
    # the inputs' own f32 values would not do: tf32 rounding is visible
    assert np.abs(a32.astype(np.float64) @ b32.astype(np.float64) - want).max() > 1e-4


def test_atomic_histogram(dev):
    n, bins = 1000, 64  # n is not a multiple of the 256-element tiles: padded with -1
    xs = np.random.default_rng(3).integers(-5, bins + 6, n).astype(np.int32)  # some outside h
    x = oxide.tensor(xs, device=dev)
    h = oxide.zeros(bins, "u32", dev)
    k = oxide.compile(HIST, device=dev, filename="hist.oxk").hist
    grid = ((n + 255) // 256,)
    k.check(h, x, grid=grid)
    k(h, x, grid=grid)
    want = np.bincount(xs[(xs >= 0) & (xs < bins)], minlength=bins)
    assert h.numpy().tolist() == want.tolist()
    k(h, x, grid=grid)  # atomics add to what is there
    assert h.numpy().tolist() == (2 * want).tolist()


def test_atomic_kernel_without_grid(dev):
    k = oxide.compile(HIST, device=dev, filename="hist.oxk").hist
    h, x = oxide.zeros(64, "u32", dev), oxide.tensor(np.arange(10, dtype=np.int32), device=dev)
    for launch in (k, k.check):
        with pytest.raises(oxide.LaunchError,
                           match="'hist' has no partitioned output to give its grid") as e:
            launch(h, x)
        assert e.value.status == oxide._decls.OX_ERR_LAUNCH
        assert "pass grid=" in str(e.value)
    assert h.numpy().tolist() == [0] * 64  # nothing ran


# ------------------------------------------------------------------ lifetime


def test_partition_keeps_its_parent_alive(dev):
    n = 500
    x, y = oxide.arange(n, device=dev), oxide.full(n, 1.0, device=dev)
    z = oxide.full(n, -1.0, device=dev)
    parent = weakref.ref(z)
    p = z.partition(128)
    del z
    gc.collect()
    assert parent() is not None and p.base is parent()  # the view holds its parent
    _add(dev)(p, x, y)
    assert p.tolist() == [i + 1.0 for i in range(n)]  # a partition reads as its tensor
    del p
    gc.collect()
    assert parent() is None  # and nothing else did


def test_partition_of_a_released_handle(dev):
    """The C guarantee under the binding: the memory lives while any view
    does, even when the parent's own C handle has been released."""
    n = 300
    z = oxide.full(n, -1.0, device=dev)
    p = z.partition(64)
    h, z._h = z._h, None  # release the parent's handle by hand, as a C user would
    oxide._L.ox_tensor_release(h)
    del z
    gc.collect()
    _add(dev)(p, oxide.arange(n, device=dev), oxide.full(n, 2.0, device=dev))
    assert p.tolist() == [i + 2.0 for i in range(n)]
    assert p.tile_grid == (5,)


# ------------------------------------------------------------------ errors


def test_bad_tiles(dev):
    z = oxide.zeros(1000, device=dev)
    x = oxide.zeros(1000, device=dev)
    k = _add(dev)
    # not a power of two: refused by the launch that would bind B = 96
    with pytest.raises(oxide.CompileError,
                       match=r"add\.oxk:\d+:\d+: error: tile shapes are static powers of two: "
                             r"dim 0 of output 'z' is B = 96"):
        k(z.partition(96), x, x)
    # one size per dimension
    with pytest.raises(oxide.InvalidArgumentError, match="2 sizes for a tensor of 1 dimension"):
        z.partition((128, 1))
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        oxide.zeros((4, 4), device=dev).partition((4,))
    # a partition of another rank than the kernel's tile
    z2 = oxide.zeros((8, 1000), device=dev)
    with pytest.raises(oxide.InvalidArgumentError,
                       match=r"argument 1 \('z'\): a partition of rank 2 for a tile of rank 1"):
        k(z2.partition((1, 128)), x, x)
    with pytest.raises(oxide.InvalidArgumentError, match="tile sizes must be > 0"):
        z.partition(0)
    with pytest.raises(ValueError, match="must not be negative"):
        z.partition(-128)
    with pytest.raises(TypeError, match="tuple of ints"):
        z.partition((128.0,))
    with pytest.raises(oxide.InvalidArgumentError, match="got a plain tensor"):
        k(z, x, x)  # the output must be a partition
    # a view of a partition is a plain tensor again
    assert z.partition(128)[:500].tile_grid is None


def test_launch_config_of_tile_kernels(dev):
    n = 1000
    z, x = oxide.zeros(n, device=dev), oxide.arange(n, device=dev)
    k = _add(dev)
    with pytest.raises(oxide.LaunchError,
                       match=r"grid is its output partition's \(8, 1, 1\).*leave out grid="):
        k(z.partition(128), x, x, grid=3)
    assert z.numpy().tolist() == [0.0] * n
    # zeros are "not given", as in the C API
    k(z.partition(128), x, x, grid=(0, 0, 0), block=0)
    assert z.numpy().tolist() == [2.0 * i for i in range(n)]


def test_simt_kernels_still_need_grid_and_block(dev):
    k = oxide.compile(VECADD, device=dev).vecadd
    a, c = oxide.tensor([1.0] * 4, device=dev), oxide.empty(4, device=dev)
    with pytest.raises(oxide.InvalidArgumentError, match="pass grid= and block="):
        k(a, a, c)
    with pytest.raises(oxide.InvalidArgumentError, match="pass grid= and block="):
        k.check(a, a, c)
    k(a, a, c, grid=1, block=256)
    assert c.tolist() == [2.0] * 4


# ------------------------------------------------------- candidate configurations

MATMUL_G = """\
#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f32, [-1, -1]>, b: &Tensor<f32, [-1, -1]>) {
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(a.partition([BM, BK]).load([tile_id(0), k]), b.partition([BK, BN]).load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""
CANDIDATES = [{"BM": 512, "BN": 1024, "BK": 16},  # too large a tile: skipped
              {"BM": 32, "BN": 32, "BK": 16}, {"BM": 64, "BN": 64, "BK": 32}]


def test_set_candidates(dev, tmp_path, monkeypatch):
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))  # no choice from an earlier run
    k = oxide.compile(MATMUL_G, device=dev).mm
    k.set_candidates(CANDIDATES)
    rng = np.random.default_rng(5)
    a32 = rng.integers(-4, 5, (100, 45)).astype(np.float32)
    b32 = rng.integers(-4, 5, (45, 70)).astype(np.float32)
    a, b = oxide.tensor(a32, device=dev), oxide.tensor(b32, device=dev)
    c = oxide.full((100, 70), float("nan"), device=dev)
    assert k.tuned(c, a, b) is None  # nothing measured yet
    k(c, a, b)  # the output whole: re-partitioned to each candidate's tiles
    chosen = k.tuned(c, a, b)
    assert chosen in CANDIDATES[1:]
    assert np.array_equal(c.numpy(), a32 @ b32)
    c2 = oxide.full((100, 70), float("nan"), device=dev)
    assert k.tuned(c2.partition((16, 16)), a, b) == chosen  # any tiles: the same choice
    k(c2.partition((16, 16)), a, b)
    assert np.array_equal(c2.numpy(), a32 @ b32)
    with pytest.raises(oxide.InvalidArgumentError, match="BM = 48 is not a power of two"):
        k.set_candidates([{"BM": 48, "BN": 32, "BK": 16}])
    with pytest.raises(oxide.InvalidArgumentError, match="candidate 1 does not set 'BK'"):
        k.set_candidates([{"BM": 32, "BN": 32, "BK": 16}, {"BM": 32, "BN": 32}])


def test_candidates_persist_across_processes(tmp_path):
    """The choice is in the kernel cache: a second process starts with it."""
    import os
    import subprocess
    import sys
    script = tmp_path / "tune.py"
    script.write_text(f"""
import numpy as np, oxide
k = oxide.compile({MATMUL_G!r}, device="cpu").mm
k.set_candidates({CANDIDATES!r})
a = oxide.tensor(np.ones((64, 40), np.float32), device="cpu")
b = oxide.tensor(np.ones((40, 48), np.float32), device="cpu")
c = oxide.empty((64, 48), device="cpu")
before = k.tuned(c, a, b)
k(c, a, b)
assert (c.numpy() == 40).all()
print(before, k.tuned(c, a, b))
""")
    env = dict(os.environ, OXIDE_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(oxide.__file__)),
                                         env.get("PYTHONPATH", "")])
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]
    first_before, first_after = runs[0].split(" ", 1)
    assert first_before == "None" and first_after != "None"
    assert runs[1] == f"{first_after} {first_after}", runs


IF_TILE = """\
#[tile]
fn k<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, lim: usize) {
    let t = load_tile_like(x, z);
    let u = if tile_id(0) % 2 == 0 { t * 2.0 } else if tile_id(0) < lim { -1.0 } else { exp(t) };
    z.store(u + 1.0);
}
"""


def test_if_that_gives_a_tile(dev):
    """An if whose branches give tiles (a scalar branch is splatted), nested."""
    m = oxide.compile(IF_TILE, device=dev, filename="if.oxk")
    x = np.linspace(-1, 1, 200).astype(np.float32)
    z = oxide.zeros(200, device=dev)
    m.k(z.partition(16), oxide.from_numpy(x).to(dev), oxide.u64(7))
    b = np.arange(200) // 16
    ref = np.where(b % 2 == 0, 2.0 * x, np.where(b < 7, -1.0, np.exp(x.astype(np.float64)))) + 1
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-6, atol=1e-6)


ITEM = """\
#[tile]
fn k<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, lens: &Tensor<i32, [-1]>) {
    let t = load_tile_like(x, z);
    let n = reduce_max(lens.partition([8]).load([0]), 0).item() as usize;
    let mut acc = 0.0f32;
    for i in 0..n {
        acc += t[i];
    }
    let m = reduce_sum(reshape(t, [B / 8, 8]), 1);
    z.store(full([B], acc + m.at([1, 0]) + t[1000]));
}
"""


def test_tile_elements_as_scalars(dev):
    """t.item() of a one-element tile as a loop bound, t[i] and t.at([i, j])
    (0 past the end), and a tile shape written as an expression of a generic."""
    m = oxide.compile(ITEM, device=dev, filename="item.oxk")
    x = np.linspace(-1, 1, 64).astype(np.float32)
    lens = np.array([3, 1, 7, 2, 0, 5, 6, 4], dtype=np.int32)
    for B in (16, 32):
        z = oxide.zeros(64, device=dev)
        m.k(z.partition(B), oxide.from_numpy(x).to(dev), oxide.from_numpy(lens).to(dev))
        t = x.astype(np.float64).reshape(-1, B)
        ref = np.repeat(t[:, :7].sum(1) + t[:, 8:16].sum(1), B)
        np.testing.assert_allclose(z.numpy(), ref, rtol=1e-6, atol=1e-6)


BIAS_MATMUL = """\
#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<f32, [-1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(x.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    y.store(acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]));
}
"""


@pytest.mark.parametrize("tile", [(128, 256, 64), (128, 128, 64), (64, 128, 64)])
def test_matmul_with_a_fused_bias(dev, tile):
    """The bias epilogue at the tiles a plain matmul uses: at 128 x 128 x 64 on sm_90 it
    once reached an internal IR verifier error (a barrier placed before its id), and
    at 128 x 256 x 64 it once needed more shared memory than a block has (the
    broadcast bias was moved into the accumulator's layout whole)."""
    BM, BN, BK = tile
    M, N, K = 300, 200, 130
    rng = np.random.default_rng(7)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    k = oxide.compile(BIAS_MATMUL, device=dev, filename="bias.oxk").mm
    k.set_generic("BK", BK)
    y = oxide.full((M, N), float("nan"), device=dev)
    k(y.partition((BM, BN)), oxide.tensor(a32, dtype="bf16", device=dev), oxide.tensor(b32, dtype="bf16", device=dev),
      oxide.tensor(bias, device=dev))
    av, bv = _bf16_reference(a32), _bf16_reference(b32)
    want = av @ bv + bias
    err = np.abs(y.numpy().astype(np.float64) - want)
    assert (err <= 1e-5 * (np.abs(av) @ np.abs(bv)) + 1e-5).all(), err.max()


EPILOGUE_MATMUL = """\
#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<bf16, [BM, BN]>, x: &Tensor<bf16, [-1, -1]>, w: &Tensor<bf16, [-1, -1]>, bias: &Tensor<f32, [-1]>, res: &Tensor<bf16, [-1, -1]>) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    let h = acc + reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]);
    let g = 0.5 * h * (1.0 + erf(h * 0.7071067811865476));
    y.store((g + res.partition([BM, BN]).load([tile_id(0), tile_id(1)]) as f32) as bf16);
}
"""


@pytest.mark.parametrize("tile", [(128, 256, 64), (128, 128, 64), (64, 128, 64)])
def test_matmul_with_bias_gelu_residual_epilogue(dev, tile):
    """y = gelu(x w + bias) + res, in bf16, at the fast tiles: the residual is read
    straight into the accumulator's layout (no move through shared memory)."""
    from math import erf
    BM, BN, BK = tile
    M, N, K = 260, 300, 100
    rng = np.random.default_rng(8)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32) * 0.1
    bias = rng.standard_normal(N).astype(np.float32)
    r32 = rng.standard_normal((M, N)).astype(np.float32)
    k = oxide.compile(EPILOGUE_MATMUL, device=dev, filename="epilogue.oxk").mm
    k.set_generic("BK", BK)
    y = oxide.empty((M, N), dtype="bf16", device=dev)
    k(y.partition((BM, BN)), oxide.tensor(a32, dtype="bf16", device=dev), oxide.tensor(b32, dtype="bf16", device=dev),
      oxide.tensor(bias, device=dev), oxide.tensor(r32, dtype="bf16", device=dev))
    av, bv, rv = _bf16_reference(a32), _bf16_reference(b32), _bf16_reference(r32)
    h = av @ bv + bias
    want = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2))) + rv
    got = np.array(y.tolist(), dtype=np.float64)
    assert (np.abs(got - want) <= 2 ** -7 * np.abs(want) + 1e-3).all(), np.abs(got - want).max()


TWO_ROWS_EPILOGUE = """\
#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f16, [-1, -1]>, w: &Tensor<f16, [-1, -1]>, r1: &Tensor<f16, [-1, -1]>, r2: &Tensor<f32, [-1, -1]>, bias: &Tensor<f32, [-1]>, rb: &Tensor<f16, [-1]>, s: f32) {
    let px = x.partition([BM, BK]);
    let pw = w.partition([BK, BN]);
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..px.num_tiles(1) {
        acc = mma(px.load([tile_id(0), k]), pw.load([k, tile_id(1)]), acc);
    }
    let b1 = reshape(bias.partition([BN]).load([tile_id(1)]), [1, BN]);
    let b2 = reshape(rb.partition([BN]).load([tile_id(1)]) as f32, [1, BN]);
    let t = acc + b1 - b2 + r1.partition([BM, BN]).load([tile_id(0), tile_id(1)]) as f32;
    y.store(max(t, r2.partition([BM, BN]).load([tile_id(0), tile_id(1)])) / s);
}
"""


@pytest.mark.parametrize("tile", [(128, 256, 64), (128, 128, 64), (64, 256, 64)])
def test_matmul_epilogue_of_two_rows_and_two_residuals(dev, tile):
    """An epilogue lowered a piece at a time at its store: two broadcast rows of one dtype
    (one through shared memory, the other moved whole), residuals of two dtypes, of which
    the f32 one is smaller than the output (its padding, 0, takes part in the max), and a
    division by a scalar; on a shape no tile divides, so both the straight-line pieces and
    the predicated path run."""
    BM, BN, BK = tile
    M, N, K = 300, 520, 72
    rng = np.random.default_rng(9)
    f16 = lambda a: a.astype(np.float16).astype(np.float64)
    a, b = f16(rng.standard_normal((M, K))), f16(rng.standard_normal((K, N)) * 0.2)
    r1 = f16(rng.standard_normal((M, N)))
    r2 = rng.standard_normal((M - 40, N - 8)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    rb = f16(rng.standard_normal(N))
    k = oxide.compile(TWO_ROWS_EPILOGUE, device=dev, filename="two_rows.oxk").mm
    k.set_generic("BK", BK)
    y = oxide.full((M, N), float("nan"), device=dev)
    t16 = lambda v: oxide.tensor(v.astype(np.float32), dtype="f16", device=dev)
    k(y.partition((BM, BN)), t16(a), t16(b), t16(r1), oxide.tensor(r2, device=dev), oxide.tensor(bias, device=dev),
      t16(rb), -1.5)
    r2p = np.zeros((M, N))
    r2p[:M - 40, :N - 8] = r2
    want = np.maximum(a @ b + bias - rb + r1, r2p) / -1.5
    err = np.abs(y.numpy().astype(np.float64) - want)
    assert (err <= 1e-5 * ((np.abs(a) @ np.abs(b)) + np.abs(want)) + 1e-5).all(), err.max()


ARGMAX = """\
#[tile]
fn k<const BM: i32, const BN: i32>(mx: &mut Tensor<i32, [BM, 1]>, mn: &mut Tensor<i32, [1, BN]>, x: &Tensor<f32, [-1, -1]>) {
    let t = x.partition([BM, BN]).load_padded([tile_id(0), 0], f32::NEG_INFINITY);
    mx.store(argmax(t, 1));
    let u = x.partition([BM, BN]).load_padded([0, tile_id(1)], f32::INFINITY);
    mn.store(argmin(u, 0));
}
"""


def test_argmax_argmin(dev):
    """The first index of the extreme along an axis (ties: the first), NaNs passed
    over; on a 30 x 20 tensor in 32 x 32 tiles, whose padding takes part like in a
    reduction: a row of NaNs finds the first -inf of the padding, at 20."""
    m = oxide.compile(ARGMAX, device=dev, filename="argmax.oxk")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(30, 20)).astype(np.float32)
    x[3, :] = np.nan
    x[5, 7] = np.nan
    mx, mn = oxide.zeros((30, 1), dtype="i32", device=dev), oxide.zeros((1, 20), dtype="i32", device=dev)
    m.k(mx.partition((32, 1)), mn.partition((1, 32)), oxide.from_numpy(x).to(dev))
    want = np.array([20 if np.isnan(r).all() else np.nanargmax(r) for r in x])
    np.testing.assert_array_equal(mx.numpy()[:, 0], want)
    np.testing.assert_array_equal(mn.numpy()[0], np.nanargmin(x, axis=0))


RANKS = """\
#[tile]
fn k<const BM: i32, const BN: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>, bias: &Tensor<f32, [-1]>) {
    let b = bias.partition([BN]).load([tile_id(1)]);
    y.store(load_tile_like(x, y) * 2.0 + b - select(b > 0.0, b, 0.0f32));
}
"""


def test_lower_rank_tiles_broadcast_as_numpy(dev):
    """A [BN] tile next to a [BM, BN] one takes a leading dim of 1 (a bias on each row)."""
    m = oxide.compile(RANKS, device=dev, filename="ranks.oxk")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((37, 45)).astype(np.float32)
    bias = rng.standard_normal(45).astype(np.float32)
    y = oxide.zeros((37, 45), device=dev)
    m.k(y.partition((16, 32)), oxide.from_numpy(x).to(dev), oxide.from_numpy(bias).to(dev))
    np.testing.assert_allclose(y.numpy(), x * 2 + bias - np.maximum(bias, 0), rtol=1e-6, atol=1e-6)


CDIV = """\
#[tile]
fn k<const B: i32>(z: &mut Tensor<i64, [B]>, x: &Tensor<f32, [-1, -1]>, a: &Tensor<i64, [-1]>) {
    let p = x.partition([4, 16]);
    let n = (p.num_tiles(0) * 100 + p.num_tiles(1)) as i64;
    z.store(cdiv(load_tile_like(a, z), 7i64) + n * 1000);
}
"""


def test_cdiv_and_partition_tile_counts(dev):
    m = oxide.compile(CDIV, device=dev, filename="cdiv.oxk")
    a = np.arange(0, 40, dtype=np.int64)
    z = oxide.zeros(40, dtype="i64", device=dev)
    m.k(z.partition(8), oxide.zeros((10, 33), device=dev), oxide.from_numpy(a).to(dev))
    np.testing.assert_array_equal(z.numpy(), -(-a // 7) + (3 * 100 + 3) * 1000)


ROPE = """\
#[tile]
fn rope<const R: i32, const D: i32>(y: &mut Tensor<f32, [R, D]>, x: &Tensor<f32, [-1, -1]>, base: f32) {
    let t = reshape(load_tile_like(x, y), [R, 2, D / 2]);
    let x1 = t.slice([0, 0, 0], [R, 1, D / 2]);
    let x2 = t.slice([0, 1, 0], [R, 1, D / 2]);
    let pos = (iota([R, 1, 1], 0) + (tile_id(0) * (R as usize)) as i32) as f32;
    let i = iota([1, 1, D / 2], 2) as f32;
    let ang = pos * exp(i * (-2.0f32 / (D as f32)) * ln(base));
    let c = cos(ang);
    let s = sin(ang);
    let half = iota([R, 2, D / 2], 1) == 0;
    let out = select(half, broadcast_to(x1 * c - x2 * s, [R, 2, D / 2]), broadcast_to(x2 * c + x1 * s, [R, 2, D / 2]));
    y.store(reshape(out, [R, D]));
}
"""


@pytest.mark.parametrize("rows", [8, 16])
def test_rope_by_slices(dev, rows):
    """Rotary embeddings (rotate-half form) from two slices of a tile, against float64."""
    m = oxide.compile(ROPE, device=dev, filename="rope.oxk")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((37, 64)).astype(np.float32)
    y = oxide.zeros((37, 64), device=dev)
    m.rope(y.partition((rows, 64)), oxide.from_numpy(x).to(dev), np.float32(10000.0))
    ang = np.arange(37)[:, None] * 10000.0 ** (-np.arange(32) * 2.0 / 64)
    x1, x2 = x[:, :32].astype(np.float64), x[:, 32:].astype(np.float64)
    want = np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x2 * np.cos(ang) + x1 * np.sin(ang)], 1)
    np.testing.assert_allclose(y.numpy(), want, atol=2e-5)


INT_MATMUL = """\
#[tile]
fn qmm<T: Int, const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<i32, [BM, BN]>, a: &Tensor<T, [-1, -1]>, b: &Tensor<T, [-1, -1]>) {
    let pa = a.partition([BM, BK]);
    let pb = b.partition([BK, BN]);
    let mut acc = full([BM, BN], 0i32);
    for k in 0..pa.num_tiles(1) {
        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""


@pytest.mark.parametrize("dtype, lo, hi", [(np.int8, -128, 128), (np.uint8, 0, 256), (np.int16, -3000, 3000),
                                          (np.int32, -2 ** 31, 2 ** 31)])
def test_integer_matmul_is_exact(dev, dtype, lo, hi):
    """i8 x i8 (and u8, i16, i32) products summed exactly in i32, wrapping as i32
    does (the i32 case wraps on purpose), one generic source for every dtype."""
    M, N, K = 70, 50, 100
    rng = np.random.default_rng(9)
    a = rng.integers(lo, hi, (M, K), dtype=np.int64).astype(dtype)
    b = rng.integers(lo, hi, (K, N), dtype=np.int64).astype(dtype)
    k = oxide.compile(INT_MATMUL, device=dev, filename="qmm.oxk").qmm
    k.set_generic("BK", 32)
    c = oxide.full((M, N), -1, dtype="i32", device=dev)
    k(c.partition((64, 32)), oxide.tensor(a, device=dev), oxide.tensor(b, device=dev))
    want = (a.astype(np.int64) @ b.astype(np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert (c.numpy().astype(np.int64) == want).all()


TILE_IDS = """\
#[tile]
fn k<const B: i32>(y: &mut Tensor<f32, [B, B]>, x: &Tensor<f32, [-1, -1]>) {
    let (i, j) = tile_id();
    let (gi, gj) = num_tiles();
    y.store(x.partition([B, B]).load([i, j]) + ((i * gj + j) as f32) + 0.0 * (gi as f32));
}
"""


def test_tile_ids_as_a_tuple(dev):
    x = np.random.default_rng(3).random((40, 24)).astype(np.float32)
    y = oxide.zeros((40, 24), device=dev)
    oxide.compile(TILE_IDS, device=dev).k(y.partition((16, 16)), oxide.tensor(x, device=dev))
    ids = np.add.outer(np.arange(40) // 16 * 2, np.arange(24) // 16)
    np.testing.assert_allclose(y.numpy(), x + ids, rtol=1e-6)


ROW_SUM = """\
#[tile]
fn row_sum<const D: i32>(y: &mut Tensor<f32, [1]>, x: &Tensor<f32, [-1, D]>) {
    let t = x.partition([1, D]).load([tile_id(0), 0]);
    y.store(reshape(reduce_sum(t, 1), [1]));
}
"""


def test_generic_bound_by_an_input_dim(dev):
    """D sizes no output: it takes the input's dim at each launch (a specialization
    per size), and a size that no tile can have is the located error."""
    k = oxide.compile(ROW_SUM, device=dev, filename="rows.oxk").row_sum
    for D in (64, 256):
        x = np.random.default_rng(D).random((10, D)).astype(np.float32)
        y = oxide.zeros((10,), device=dev)
        k(y.partition((1,)), oxide.tensor(x, device=dev))
        np.testing.assert_allclose(y.numpy(), x.astype(np.float64).sum(1), rtol=1e-5)
    with pytest.raises(oxide.CompileError, match=r"rows.oxk:3:29: .*dim 1 of the partition of 'x' is D = 100"):
        k(y.partition((1,)), oxide.tensor(np.ones((10, 100), np.float32), device=dev))
