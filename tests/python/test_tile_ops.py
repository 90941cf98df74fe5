"""Tile ops that see a row in order or rearrange tiles (docs/language.md
sections 12.5 and 12.6): cumsum and the other scans, sort, argsort, topk and
topk_indices, cat, zeros and ones, load_tile_like with a padding value, and a
select whose condition broadcasts. Each against NumPy in float64 (or exactly),
on tensors that no tile divides, so that edge tiles and their padding take
part. Run once more with OXIDE_TILE_THREADS=1 for the GPU's lowering on the
CPU."""
import pytest

import oxide

np = pytest.importorskip("numpy")


def _per_tile(x, tile, pad, f):
    """f applied to each tile of x (padded with `pad` past its edges), the
    result cut back to x's shape: what a tile kernel computes block by block."""
    rows = -(-x.shape[0] // tile[0]) * tile[0]
    cols = -(-x.shape[1] // tile[1]) * tile[1]
    xp = np.full((rows, cols), pad, dtype=np.float64)
    xp[: x.shape[0], : x.shape[1]] = x
    out = np.empty_like(xp)
    for i in range(0, rows, tile[0]):
        for j in range(0, cols, tile[1]):
            out[i:i + tile[0], j:j + tile[1]] = f(xp[i:i + tile[0], j:j + tile[1]])
    return out[: x.shape[0], : x.shape[1]]


# ------------------------------------------------------------------- scans

SCANS = """\
#[tile]
fn k<const BM: i32, const BN: i32>(s0: &mut Tensor<f32, [BM, BN]>, s1: &mut Tensor<f32, [BM, BN]>,
        p1: &mut Tensor<f32, [BM, BN]>, mx: &mut Tensor<f32, [BM, BN]>, mn: &mut Tensor<f32, [BM, BN]>,
        x: &Tensor<f32, [-1, -1]>) {
    let t = load_tile_like(x, s0);
    s0.store(cumsum(t, 0));
    s1.store(cumsum(t, 1));
    p1.store(cumprod(t, 1));
    mx.store(cummax(t, 0));
    mn.store(cummin(t, 1));
}
"""


@pytest.mark.parametrize("tile", [(16, 64), (4, 16), (1, 128)])
def test_scans_along_each_axis(dev, tile):
    m = oxide.compile(SCANS, device=dev, filename="scans.oxk")
    rng = np.random.default_rng(1)
    x = (rng.uniform(0.5, 1.5, (37, 45)) * rng.choice([-1, 1], (37, 45))).astype(np.float32)
    outs = [oxide.zeros((37, 45), device=dev) for _ in range(5)]
    m.k(*[o.partition(tile) for o in outs], oxide.tensor(x, device=dev))
    x64 = x.astype(np.float64)
    want = [
        _per_tile(x64, tile, 0, lambda t: np.cumsum(t, 0)),
        _per_tile(x64, tile, 0, lambda t: np.cumsum(t, 1)),
        _per_tile(x64, tile, 0, lambda t: np.cumprod(t, 1)),
        _per_tile(x64, tile, 0, lambda t: np.maximum.accumulate(t, 0)),
        _per_tile(x64, tile, 0, lambda t: np.minimum.accumulate(t, 1)),
    ]
    for got, ref in zip(outs, want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=2e-5, atol=2e-5)


SCAN_1D = """\
#[tile]
fn k<const B: i32>(y: &mut Tensor<i32, [B]>, x: &Tensor<i32, [-1]>) {
    y.store(cumsum(load_tile_like(x, y), 0));
}
"""


def test_integer_cumsum_of_a_1d_tile_is_exact(dev):
    m = oxide.compile(SCAN_1D, device=dev, filename="scan1.oxk")
    x = np.random.default_rng(2).integers(-1000, 1000, 1000).astype(np.int32)
    for B in (256, 1024):
        y = oxide.zeros(1000, dtype="i32", device=dev)
        m.k(y.partition(B), oxide.tensor(x, device=dev))
        want = np.concatenate([np.cumsum(x[i:i + B]) for i in range(0, 1000, B)])
        np.testing.assert_array_equal(y.numpy(), want)


# ------------------------------------------------------------------- sorts

SORTS = """\
#[tile]
fn k<const BM: i32, const BN: i32>(up: &mut Tensor<f32, [BM, BN]>, down: &mut Tensor<f32, [BM, BN]>,
        idx: &mut Tensor<i32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>) {
    up.store(sort(load_tile_like(x, up, f32::INFINITY), 1));
    down.store(sort(load_tile_like(x, up, f32::NEG_INFINITY), 1, true));
    idx.store(argsort(load_tile_like(x, up, f32::INFINITY), 1));
}
"""


def test_sort_rows_padded_past_the_edge(dev):
    """Rows of 45 in tiles of 64: padded with +inf (-inf descending), which
    sorts past the row's end, so the stored part is the row sorted."""
    m = oxide.compile(SORTS, device=dev, filename="sort.oxk")
    x = np.random.default_rng(3).standard_normal((37, 45)).astype(np.float32)
    x[5, :10] = x[5, 10:20]  # ties
    up, down = oxide.zeros((37, 45), device=dev), oxide.zeros((37, 45), device=dev)
    idx = oxide.zeros((37, 45), dtype="i32", device=dev)
    m.k(up.partition((8, 64)), down.partition((8, 64)), idx.partition((8, 64)), oxide.tensor(x, device=dev))
    np.testing.assert_array_equal(up.numpy(), np.sort(x, 1))
    np.testing.assert_array_equal(down.numpy(), -np.sort(-x, 1))
    np.testing.assert_array_equal(idx.numpy(), np.argsort(x, 1, kind="stable"))


SORT_AXIS0 = """\
#[tile]
fn k<T: Num, const BM: i32, const BN: i32>(y: &mut Tensor<T, [BM, BN]>, i: &mut Tensor<i32, [BM, BN]>,
        x: &Tensor<T, [-1, -1]>) {
    let t = load_tile_like(x, y, T::MAX);
    y.store(sort(t, 0));
    i.store(argsort(t, 0, true));
}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_sort_columns_and_descending_argsort(dev, dtype):
    """Along axis 0 (each column of a tile), with duplicates; argsort descending
    keeps equal keys in index order (a stable sort), so padding T::MAX comes
    first in a descending argsort and the check is on each tile's own rows."""
    m = oxide.compile(SORT_AXIS0, device=dev, filename="sort0.oxk")
    x = np.random.default_rng(4).integers(-20, 20, (37, 30)).astype(dtype)
    y = oxide.zeros((37, 30), dtype=np.dtype(dtype).name.replace("float", "f").replace("int", "i"), device=dev)
    i = oxide.zeros((37, 30), dtype="i32", device=dev)
    tile = (16, 8)
    m.k(y.partition(tile), i.partition(tile), oxide.tensor(x, device=dev))
    big = np.finfo(dtype).max if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).max
    np.testing.assert_array_equal(y.numpy(), _per_tile(x.astype(np.float64), tile, big, lambda t: np.sort(t, 0)))

    def desc(t):  # stable descending: the largest first, ties by index
        return np.argsort(-t, 0, kind="stable").astype(np.float64)
    np.testing.assert_array_equal(i.numpy(), _per_tile(x.astype(np.float64), tile, big, desc))


NANS = """\
#[tile]
fn k<const B: i32>(up: &mut Tensor<f32, [4, B]>, down: &mut Tensor<f32, [4, B]>,
        iu: &mut Tensor<i32, [4, B]>, idn: &mut Tensor<i32, [4, B]>, x: &Tensor<f32, [-1, -1]>) {
    let t = load_tile_like(x, up);
    up.store(sort(t, 1));
    down.store(sort(t, 1, true));
    iu.store(argsort(t, 1));
    idn.store(argsort(t, 1, true));
}
"""


def test_sort_with_nans_and_ties(dev):
    """NaNs are larger than every number: last ascending (NumPy), first
    descending (torch); equal keys and NaNs keep their order in argsort."""
    m = oxide.compile(NANS, device=dev, filename="nans.oxk")
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, (10, 32)).astype(np.float32)
    x[rng.random((10, 32)) < 0.2] = np.nan
    x[2, :] = np.nan
    x[3, 0] = np.inf
    x[4, 1] = -np.inf
    outs = [oxide.zeros((10, 32), dtype=d, device=dev) for d in ("f32", "f32", "i32", "i32")]
    m.k(*[o.partition((4, 32)) for o in outs], oxide.tensor(x, device=dev))
    np.testing.assert_array_equal(outs[0].numpy(), np.sort(x, 1))
    np.testing.assert_array_equal(outs[1].numpy(), np.sort(x, 1)[:, ::-1])
    np.testing.assert_array_equal(outs[2].numpy(), np.argsort(x, 1, kind="stable"))
    nan = np.isnan(x)
    # descending, NaNs first, ties by index: sort by (not NaN, -value, index)
    want = np.stack([np.lexsort((np.arange(32), -np.nan_to_num(r, nan=0), ~n)) for r, n in zip(x, nan)])
    np.testing.assert_array_equal(outs[3].numpy(), want)


TOPK = """\
#[tile]
fn k<const R: i32, const K: i32>(v: &mut Tensor<f32, [R, K]>, i: &mut Tensor<i32, [R, K]>,
        x: &Tensor<f32, [-1, -1]>) {
    let t = x.partition([R, 128]).load_padded([tile_id(0), 0], f32::NEG_INFINITY);
    v.store(topk(t, K, 1));
    i.store(topk_indices(t, K, 1));
}
"""


@pytest.mark.parametrize("K", [1, 8, 32])
def test_topk_of_rows(dev, K):
    """The K largest of each row of 100 (in a tile of 128, padded with -inf),
    largest first, and their indices."""
    m = oxide.compile(TOPK, device=dev, filename="topk.oxk")
    x = np.random.default_rng(6).standard_normal((37, 100)).astype(np.float32)
    v = oxide.zeros((37, K), device=dev)
    i = oxide.zeros((37, K), dtype="i32", device=dev)
    m.k(v.partition((4, K)), i.partition((4, K)), oxide.tensor(x, device=dev))
    order = np.argsort(-x, 1, kind="stable")[:, :K]
    np.testing.assert_array_equal(i.numpy(), order)
    np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, order, 1))


# --------------------------------------------------------------------- cat

CAT = """\
#[tile]
fn k<const BM: i32, const BN: i32>(sw: &mut Tensor<f32, [BM, BN]>, rows: &mut Tensor<f32, [BM, BN]>,
        q: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>) {
    let t = load_tile_like(x, sw);
    let l = t.slice([0, 0], [BM, BN / 2]);
    let r = t.slice([0, BN / 2], [BM, BN / 2]);
    sw.store(cat([r, l], 1));
    let top = t.slice([0, 0], [BM / 2, BN]);
    let bottom = t.slice([BM / 2, 0], [BM / 2, BN]);
    rows.store(cat([bottom * 2.0, top], 0));
    let a = t.slice([0, 0], [BM, BN / 4]);
    q.store(cat([a, a + 1.0, a + 2.0, cat([l, r], 1).slice([0, 0], [BM, BN / 4])], 1));
}
"""


@pytest.mark.parametrize("tile", [(8, 16), (2, 64)])
def test_cat_is_the_inverse_of_slice(dev, tile):
    m = oxide.compile(CAT, device=dev, filename="cat.oxk")
    x = np.random.default_rng(7).standard_normal((37, 45)).astype(np.float32)
    outs = [oxide.zeros((37, 45), device=dev) for _ in range(3)]
    m.k(*[o.partition(tile) for o in outs], oxide.tensor(x, device=dev))
    BM, BN = tile
    x64 = x.astype(np.float64)
    sw = _per_tile(x64, tile, 0, lambda t: np.concatenate([t[:, BN // 2:], t[:, :BN // 2]], 1))
    rows = _per_tile(x64, tile, 0, lambda t: np.concatenate([t[BM // 2:] * 2, t[:BM // 2]], 0))
    a = BN // 4
    q = _per_tile(x64, tile, 0, lambda t: np.concatenate([t[:, :a], t[:, :a] + 1, t[:, :a] + 2, t[:, :a]], 1))
    for got, ref in zip(outs, (sw, rows, q)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-6)


# ------------------------------------------------- zeros, ones, full's dtype

FILLS = """\
#[tile]
fn k<const B: i32>(h: &mut Tensor<f16, [B]>, n: &mut Tensor<i32, [B]>, y: &mut Tensor<f32, [B]>,
        x: &Tensor<f32, [-1]>) {
    let mut acc = full([B], 0.0);
    let one = ones([B]);
    acc = acc + one;
    h.store(acc);
    let mut c = zeros([B]);
    c += load_tile_like(x, y);
    y.store(c + full([B], 0.5) * ones([B]) - zeros::<f32>([B]));
    n.store(ones::<i32>([B]) * 3 + zeros([B]));
}
"""


def test_zeros_ones_and_the_dtype_of_full(dev):
    """A `let` of full([..], 0.0), zeros([..]) or ones([..]) takes its dtype
    from the variable's later use (f16 from a store into an f16 output, f32
    from an operand); next to a tile they take its dtype, as a literal does."""
    m = oxide.compile(FILLS, device=dev, filename="fills.oxk")
    x = np.random.default_rng(8).standard_normal(100).astype(np.float32)
    h = oxide.zeros(100, dtype="f16", device=dev)
    n = oxide.zeros(100, dtype="i32", device=dev)
    y = oxide.zeros(100, device=dev)
    m.k(h.partition(64), n.partition(64), y.partition(64), oxide.tensor(x, device=dev))
    np.testing.assert_array_equal(h.numpy(), np.ones(100, np.float16))
    np.testing.assert_array_equal(n.numpy(), np.full(100, 3))
    np.testing.assert_allclose(y.numpy(), x + 0.5, rtol=1e-6)


PADDED_LIKE = """\
#[tile]
fn k<const BM: i32, const BN: i32>(m: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>) {
    let t = load_tile_like(x, m, f32::NEG_INFINITY);
    m.store(broadcast_to(reduce_max(t, 1), [BM, BN]));
}
"""


def test_load_tile_like_with_a_padding_value(dev):
    """Rows of negative numbers, 45 wide in tiles of 64: the padding -inf
    leaves each row's maximum alone, as 0 would not."""
    m = oxide.compile(PADDED_LIKE, device=dev, filename="padlike.oxk")
    x = -np.random.default_rng(9).uniform(1, 2, (37, 45)).astype(np.float32)
    y = oxide.zeros((37, 45), device=dev)
    m.k(y.partition((8, 64)), oxide.tensor(x, device=dev))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(x.max(1, keepdims=True), (37, 45)))


# ------------------------------------------------ select's condition broadcasts

SELECT = """\
#[tile]
fn k<const BM: i32, const BN: i32>(y: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>,
        mask: &Tensor<bool, [-1]>) {
    let e = load_tile_like(x, y);
    let rows = reduce_sum(e, 1) > 0.0;
    let cols = mask.partition([BN]).load([tile_id(1)]);
    y.store(select(rows, e, 1.0) + select(cols, 0.0, e) + select(iota([BM, 1], 0) == 0, 100.0, 0.0f32));
}
"""


def test_select_condition_broadcasts(dev):
    """A [BM, 1] condition (a row's test) and a [BN] one (a column mask) pick
    among [BM, BN] values, as NumPy's where broadcasts; so does a [BM, 1]
    condition between scalars, which gives its own shape broadcast up."""
    m = oxide.compile(SELECT, device=dev, filename="select.oxk")
    rng = np.random.default_rng(10)
    x = rng.standard_normal((37, 45)).astype(np.float32)
    mask = rng.random(45) < 0.5
    y = oxide.zeros((37, 45), device=dev)
    tile = (8, 16)
    m.k(y.partition(tile), oxide.tensor(x, device=dev), oxide.tensor(mask, device=dev))
    x64 = x.astype(np.float64)
    xp = np.zeros((40, 48))
    xp[:37, :45] = x64
    rows = xp.reshape(5, 8, 3, 16).sum(3)  # each tile's row sums
    rows = np.repeat(rows, 16, axis=2).reshape(40, 48)[:37, :45] > 0
    first = (np.arange(37) % 8 == 0)[:, None]
    want = np.where(rows, x64, 1.0) + np.where(mask, 0.0, x64) + np.where(first, 100.0, 0.0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-6)


GENERIC_FILLS = """\
#[tile]
fn k<T: Float, const B: i32>(y: &mut Tensor<T, [B]>, x: &Tensor<T, [-1]>) {
    let z = zeros::<T>([B]);
    let o = ones([B]);
    y.store(load_tile_like(x, y) + z + o * 2.0);
}
"""


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_zeros_of_a_type_generic(dev, dtype):
    """zeros::<T> of a type generic; ones([B]) takes T from the arithmetic it is
    an operand of (load_tile_like of a T tensor)."""
    m = oxide.compile(GENERIC_FILLS, device=dev, filename="gfills.oxk")
    x = oxide.arange(100, dtype=dtype, device=dev)
    y = oxide.zeros(100, dtype=dtype, device=dev)
    m.k(y.partition(64), x)
    np.testing.assert_array_equal(y.numpy().astype(np.float64), np.arange(100) + 2.0)
