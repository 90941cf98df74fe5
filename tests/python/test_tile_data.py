"""Data-dependent addressing in #[tile] kernels (docs/language.md section 12.5):
an input's element as a scalar (`x[i]`, `x.at([i, j])`), a tile at any
element offset (`x.load_at([r, c], [BM, BN])`) and a gather through index
tiles (`x.gather([rows, cols])`). Kernels written the way users
port them (variable-length segments through cu_seqlens, a 3x3 convolution, an
embedding lookup, a paged KV gather through a block table), on sizes no tile
divides, against float64 NumPy; reads outside a tensor give the padding."""
import pytest

import oxide

np = pytest.importorskip("numpy")

KERNELS = """\
#[tile]
fn seg_sum<const B: i32>(z: &mut Tensor<f32, [1, 1]>, x: &Tensor<f32, [-1]>, cu: &Tensor<i32, [-1]>) {
    let s = cu[tile_id(0)] as usize;
    let e = cu[tile_id(0) + 1] as usize;
    let mut acc = full([B], 0.0f32);
    let mut i = s;
    while i < e {
        let t = x.load_at([i], [B]);
        acc += select(iota([B], 0) + i < e, t, 0.0f32);
        i += B as usize;
    }
    z.store(reshape(reduce_sum(acc, 0), [1, 1]));
}

#[tile]
fn conv3<const BM: i32, const BN: i32>(z: &mut Tensor<f32, [BM, BN]>, x: &Tensor<f32, [-1, -1]>, w: &Tensor<f32, [3, 3]>) {
    let r = tile_id(0) * (BM as usize);
    let c = tile_id(1) * (BN as usize);
    let mut acc = full([BM, BN], 0.0f32);
    for di in 0..3usize {
        for dj in 0..3usize {
            acc += x.load_at([r + di, c + dj], [BM, BN]) * w.at([di, dj]);
        }
    }
    z.store(acc);
}

#[tile]
fn embed<const D: i32>(z: &mut Tensor<f32, [1, D]>, table: &Tensor<f32, [-1, -1]>, ids: &Tensor<i64, [-1]>) {
    let row = ids[tile_id(0)] as usize;
    z.store(table.load_at([row, tile_id(1) * (D as usize)], [1, D]));
}

#[tile]
fn paged<const P: i32, const D: i32>(z: &mut Tensor<f16, [P, D]>, cache: &Tensor<f16, [-1, -1, -1]>, table: &Tensor<i32, [-1, -1]>, seq: usize) {
    let page = table.at([seq, tile_id(0)]) as usize;
    let t = cache.load_at([page, 0, tile_id(1) * (D as usize)], [1, P, D], -1.0);
    z.store(reshape(t, [P, D]));
}

#[tile]
fn rows<const BM: i32, const D: i32>(z: &mut Tensor<f32, [BM, D]>, table: &Tensor<f32, [-1, -1]>, ids: &Tensor<i32, [-1]>) {
    let id = ids.partition([BM]).load_padded([tile_id(0)], -1);
    let cols = iota([1, D], 1) + (tile_id(1) * (D as usize)) as i32;
    z.store(table.gather([reshape(id, [BM, 1]), cols]));
}

#[tile]
fn gather1<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, idx: &Tensor<i64, [-1]>) {
    z.store(x.gather([load_tile_like(idx, z)], -7.0));
}

#[tile]
fn shifted<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, off: usize) {
    z.store(x.load_at([tile_id(0) * (B as usize) + off], [B], -1.0));
}
"""


@pytest.fixture
def mod(dev):
    return oxide.compile(KERNELS, device=dev, filename="data.oxk")


def test_varlen_segments_through_cu_seqlens(mod, dev):
    rng = np.random.default_rng(0)
    lens = [0, 1, 5, 64, 65, 300, 3]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    x = rng.standard_normal(int(cu[-1]) + 7).astype(np.float32)  # a tail no segment reads
    for B in (16, 64):
        z = oxide.zeros((len(lens), 1), device=dev)
        mod.seg_sum.set_generic("B", B)
        mod.seg_sum(z.partition((1, 1)), oxide.from_numpy(x).to(dev), oxide.from_numpy(cu).to(dev))
        ref = [x[cu[b]:cu[b + 1]].astype(np.float64).sum() for b in range(len(lens))]
        np.testing.assert_allclose(z.numpy()[:, 0], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,tile", [((37, 53), (16, 16)), ((5, 130), (4, 64)), ((64, 64), (32, 32)),
                                        ((3, 3), (16, 64))])
def test_conv3x3_by_offset_loads(mod, dev, shape, tile):
    rng = np.random.default_rng(1)
    H, W = shape
    x = rng.standard_normal((H + 2, W + 2)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    z = oxide.zeros((H, W), device=dev)
    mod.conv3(z.partition(tile), oxide.from_numpy(x).to(dev), oxide.from_numpy(w).to(dev))
    ref = sum(w[a, b].astype(np.float64) * x[a:a + H, b:b + W] for a in range(3) for b in range(3))
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_conv3x3_of_a_strided_view(mod, dev):
    """load_at follows the tensor's strides: a transposed input."""
    rng = np.random.default_rng(2)
    xt = rng.standard_normal((41, 22)).astype(np.float32)
    x = oxide.from_numpy(xt).to(dev).permute((1, 0))  # (22, 41), strides (1, 22)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    z = oxide.zeros((20, 39), device=dev)
    mod.conv3(z.partition((8, 16)), x, oxide.from_numpy(w).to(dev))
    xv = xt.T
    ref = sum(w[a, b].astype(np.float64) * xv[a:a + 20, b:b + 39] for a in range(3) for b in range(3))
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_embedding_lookup(mod, dev):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((50, 96)).astype(np.float32)
    ids = np.array([3, 0, 49, 3, 50, 2**40, 17], dtype=np.int64)  # 50 and 2**40: past the table
    z = oxide.zeros((len(ids), 96), device=dev)
    mod.embed(z.partition((1, 32)), oxide.from_numpy(table).to(dev), oxide.from_numpy(ids).to(dev))
    ref = np.stack([table[i] if i < 50 else np.zeros(96, np.float32) for i in ids])
    np.testing.assert_array_equal(z.numpy(), ref)


def test_paged_kv_gather_through_a_block_table(mod, dev):
    rng = np.random.default_rng(4)
    pages, P, D = 9, 16, 40
    cache = rng.standard_normal((pages, P, D)).astype(np.float16)
    table = np.array([[4, 0, 8, 2], [1, 1, 7, 30]], dtype=np.int32)  # page 30 does not exist
    for seq in range(2):
        z = oxide.zeros((4 * P, D), dtype="f16", device=dev)
        mod.paged(z.partition((P, 32)), oxide.from_numpy(cache).to(dev), oxide.from_numpy(table).to(dev),
                  oxide.u64(seq))
        ref = np.concatenate([cache[p] if p < pages else np.full((P, D), -1, np.float16) for p in table[seq]])
        np.testing.assert_array_equal(z.numpy(), ref)


def test_gather_rows_through_an_index_tile(mod, dev):
    """An embedding lookup of a tile of token ids at once: the ids tile [BM, 1] and
    the column iota [1, D] broadcast to the [BM, D] gather; ids that are negative
    or past the table read 0."""
    rng = np.random.default_rng(5)
    table = rng.standard_normal((37, 50)).astype(np.float32)
    ids = np.array([0, 36, 5, -1, 37, 12, 12, 2**31 - 1, 3, 1, 4], dtype=np.int32)
    z = oxide.zeros((len(ids), 50), device=dev)
    mod.rows(z.partition((4, 16)), oxide.from_numpy(table).to(dev), oxide.from_numpy(ids).to(dev))
    ref = np.stack([table[i] if 0 <= i < 37 else np.zeros(50, np.float32) for i in ids])
    np.testing.assert_array_equal(z.numpy(), ref)


def test_gather_1d_with_padding(mod, dev):
    rng = np.random.default_rng(6)
    x = np.arange(100, dtype=np.float32)
    idx = rng.integers(-5, 110, size=333).astype(np.int64)
    z = oxide.zeros(333, device=dev)
    mod.gather1(z.partition(64), oxide.from_numpy(x).to(dev), oxide.from_numpy(idx).to(dev))
    np.testing.assert_array_equal(z.numpy(), np.array([x[i] if 0 <= i < 100 else -7 for i in idx], np.float32))


@pytest.mark.parametrize("off", [0, 1, 3, 4, 97, 99, 100, 2**62, 2**64 - 1])
def test_offset_loads_pad_outside(mod, dev, off):
    x = np.arange(100, dtype=np.float32)
    z = oxide.zeros(100, device=dev)
    mod.shifted(z.partition(16), oxide.from_numpy(x).to(dev), oxide.u64(off))
    # block b's offset is 16b + off in usize (it wraps, as the kernel's arithmetic does);
    # from there on nothing wraps: elements past the end read the padding
    o = [(16 * (i // 16) + off) % 2**64 for i in range(100)]
    ref = np.array([x[o[i] + i % 16] if o[i] + i % 16 < 100 else -1 for i in range(100)], dtype=np.float32)
    np.testing.assert_array_equal(z.numpy(), ref)


@pytest.mark.parametrize("body,message", [
    ("let v = z.at([0]);", "'z' is an output tile (&mut Tensor): its other elements belong to other blocks"),
    ("let v = z[0];", "'z' is an output tile (&mut Tensor): its other elements belong to other blocks"),
    ("let v = m[0];", "'m' has 2 dims: read an element with 'm.at([i, j])'"),
    ("let v = m.at([0]);", "'m' has rank 2, but at gives 1 index"),
    ("let v = x.at(0);", "at takes element indices as an array, one usize per dim: 'x.at([i])'"),
    ("let v = x[1u32];", "an element index must be usize, found u32; convert it with 'as usize'"),
    ("let t = x.load_at([0], [3]);", "tile shapes are static powers of two: dim 0 of load_at is 3"),
    ("let t = m.load_at([0, 0], [4]);", "'m' has rank 2, but the tile of load_at has 1 dims"),
    ("let t = x.load_at([0]);", "load_at takes the first element's indices, the tile's shape and optionally a padding value"),
    ("let t = z.load_at([0], [16]);", "'z' is an output tile (&mut Tensor)"),
    ("let t = x.gather([3]);", "gather needs at least one index tile; for one element write 'x.at([..])'"),
    ("let t = m.gather([iota([16], 0)]);", "'m' has rank 2: gather takes 2 indexes as an array, 'm.gather([rows, cols])'"),
    ("let t = x.gather([full([16], 0.5f32)]);", "a gather index is an integer tile or scalar, found a tile of f32"),
    ("let t = m.gather([iota([16, 2], 0), iota([8], 0)]);", "tiles of shapes [16, 2] and [1, 8] do not broadcast"),
])
def test_errors(body, message):
    src = ("#[tile]\nfn k(z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [-1]>, m: &Tensor<f32, [-1, -1]>) {\n"
           f"    {body}\n    z.store(0.0);\n}}\n")
    with pytest.raises(oxide.CompileError) as e:
        oxide.compile(src, filename="bad.oxk")
    assert message in str(e.value)
    assert "bad.oxk:3:" in str(e.value)


ATTENTION = """\
#[tile]
fn varlen<const BM: i32, const BN: i32, const D: i32>(o: &mut Tensor<f32, [BM, 1, D]>, q: &Tensor<f32, [-1, -1, D]>,
        k: &Tensor<f32, [-1, -1, D]>, v: &Tensor<f32, [-1, -1, D]>, cu: &Tensor<i32, [-1]>, scale: f32) {
    let r0 = tile_id(0) * (BM as usize);
    let h = tile_id(1);
    let total = q.dim(0);
    let rows = iota([BM, 1], 0) + r0 as i64;
    // each row's sequence start: the last cu_seqlens entry at or below it
    let mut start = full([BM, 1], 0i64);
    for b in 0..cu.dim(0) {
        let c = cu[b] as i64;
        start = select(rows >= c, full([BM, 1], c), start);
    }
    let qt = reshape(q.load_at([r0, h, 0], [BM, 1, D]), [BM, D]);
    let mut m = full([BM, 1], f32::NEG_INFINITY);
    let mut l = full([BM, 1], 0.0f32);
    let mut acc = full([BM, D], 0.0f32);
    let end = min(r0 + (BM as usize), total);
    let mut j = start.at([0, 0]) as usize;
    while j < end {
        let kt = reshape(k.load_at([j, h, 0], [BN, 1, D]), [BN, D]);
        let vt = reshape(v.load_at([j, h, 0], [BN, 1, D]), [BN, D]);
        let cols = iota([1, BN], 1) + j as i64;
        let ok = (cols >= start) & (cols <= rows);
        let s = select(ok, dot(qt, transpose(kt)) * scale, f32::NEG_INFINITY);
        let mn = max(m, reduce_max(s, 1));
        // a row none of whose keys is in this tile keeps -inf: subtract 0 there, not -inf
        let base = select(mn == f32::NEG_INFINITY, 0.0f32, mn);
        let p = exp(s - base);
        let alpha = exp(m - base);
        l = l * alpha + reduce_sum(p, 1);
        acc = acc * alpha + dot(p, vt);
        m = mn;
        j += BN as usize;
    }
    o.store(reshape(acc / l, [BM, 1, D]));
}

#[tile]
fn paged_decode<const P: i32, const D: i32>(o: &mut Tensor<f32, [1, 1, D]>, q: &Tensor<f32, [-1, -1, D]>,
        kc: &Tensor<f32, [-1, P, -1, D]>, vc: &Tensor<f32, [-1, P, -1, D]>, table: &Tensor<i32, [-1, -1]>,
        lens: &Tensor<i32, [-1]>, scale: f32) {
    let b = tile_id(0);
    let h = tile_id(1);
    let n = lens[b] as usize;
    let qt = reshape(q.load_at([b, h, 0], [1, 1, D]), [1, D]);
    let mut m = full([1, 1], f32::NEG_INFINITY);
    let mut l = full([1, 1], 0.0f32);
    let mut acc = full([1, D], 0.0f32);
    for j in 0..(n + (P as usize) - 1) / (P as usize) {
        let page = table.at([b, j]) as usize;
        let kt = reshape(kc.load_at([page, 0, h, 0], [1, P, 1, D]), [P, D]);
        let vt = reshape(vc.load_at([page, 0, h, 0], [1, P, 1, D]), [P, D]);
        let pos = iota([1, P], 1) + j * (P as usize);
        let s = select(pos < n, dot(qt, transpose(kt)) * scale, f32::NEG_INFINITY);
        let mn = max(m, reduce_max(s, 1));
        let p = exp(s - mn);
        let alpha = exp(m - mn);
        l = l * alpha + reduce_sum(p, 1);
        acc = acc * alpha + dot(p, vt);
        m = mn;
    }
    o.store(reshape(acc / l, [1, 1, D]));
}
"""


def _varlen_ref(q, k, v, cu, scale):
    out = np.zeros_like(q, dtype=np.float64)
    for b in range(len(cu) - 1):
        s0, s1 = cu[b], cu[b + 1]
        for h in range(q.shape[1]):
            Q, K, V = q[s0:s1, h].astype(np.float64), k[s0:s1, h].astype(np.float64), v[s0:s1, h].astype(np.float64)
            S = Q @ K.T * scale
            S[np.triu_indices(s1 - s0, 1)] = -np.inf
            P = np.exp(S - S.max(1, keepdims=True))
            out[s0:s1, h] = (P / P.sum(1, keepdims=True)) @ V
    return out


def _paged_ref(q, kc, vc, table, lens, scale):
    B, H, D = q.shape
    P = kc.shape[1]
    out = np.zeros((B, H, D))
    for b in range(B):
        n = lens[b]
        pages = table[b, : (n + P - 1) // P]
        K = np.concatenate([kc[p] for p in pages])[:n].astype(np.float64)
        V = np.concatenate([vc[p] for p in pages])[:n].astype(np.float64)
        for h in range(H):
            s = K[:, h] @ q[b, h].astype(np.float64) * scale
            e = np.exp(s - s.max())
            out[b, h] = e @ V[:, h] / e.sum()
    return out


@pytest.fixture
def attn(dev):
    return oxide.compile(ATTENTION, device=dev, filename="attention_data.oxk")


@pytest.mark.parametrize("tiles", [(16, 16), (8, 32)])
def test_varlen_attention_through_cu_seqlens(attn, dev, tiles):
    """Causal attention within each sequence of a packed batch (FlashAttention's
    varlen form): each row finds its sequence's start in cu_seqlens, a block's
    keys start at its first row's sequence (start.at(..)), and keys are loaded
    at element offsets (load_at); a block's rows may span sequences."""
    BM, BN = tiles
    rng = np.random.default_rng(0)
    lens = [5, 17, 1, 40, 9]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    T, H, D = int(cu[-1]), 2, 16
    q, k, v = (rng.standard_normal((T, H, D)).astype(np.float32) for _ in range(3))
    o = oxide.zeros((T, H, D), device=dev)
    attn.varlen.set_generic("BN", BN)
    attn.varlen(o.partition((BM, 1, D)), *(oxide.from_numpy(a).to(dev) for a in (q, k, v, cu)), np.float32(0.25))
    np.testing.assert_allclose(o.numpy(), _varlen_ref(q, k, v, cu, 0.25), rtol=1e-5, atol=1e-5)


def test_paged_kv_decode_attention(attn, dev):
    """One new query per sequence against a KV cache in pages a block table names
    (vLLM's layout: [pages, page size, heads, head dim])."""
    rng = np.random.default_rng(1)
    B, H, D, P, pages = 3, 2, 16, 8, 12
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((pages, P, H, D)).astype(np.float32) for _ in range(2))
    table = np.array([[3, 7, 1, 0], [11, 2, 0, 0], [5, 6, 9, 10]], dtype=np.int32)
    lens = np.array([25, 9, 32], dtype=np.int32)
    o = oxide.zeros((B, H, D), device=dev)
    attn.paged_decode.set_generic("P", P)
    attn.paged_decode(o.partition((1, 1, D)), *(oxide.from_numpy(a).to(dev) for a in (q, kc, vc, table, lens)),
                      np.float32(0.3))
    np.testing.assert_allclose(o.numpy(), _paged_ref(q, kc, vc, table, lens, 0.3), rtol=1e-5, atol=1e-5)
