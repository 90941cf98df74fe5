"""Counter-based random numbers (docs/language.md section 5.6): Philox4x32-10
against the published known-answer vectors (Random123's kat_vectors), in a SIMT
and a tile kernel; rand/randn/randint as functions of (seed, offset) alone, the
same whatever the tiling; and a fused dropout against a Python Philox written
from the algorithm."""
import pytest

import oxide

np = pytest.importorskip("numpy")

KAT = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((0xffffffff,) * 4, (0xffffffff, 0xffffffff), (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]

SRC = """\
#[kernel]
fn kat(c: &[u32], k: &[u32], o: DisjointSlice<u32>) {
    let i = thread::index_1d();
    let w = i.get() % 4;
    let r = if w == 0 { philox(k[0], k[1], c[0], c[1], c[2], c[3], 0) }
        else if w == 1 { philox(k[0], k[1], c[0], c[1], c[2], c[3], 1) }
        else if w == 2 { philox(k[0], k[1], c[0], c[1], c[2], c[3], 2) }
        else { philox(k[0], k[1], c[0], c[1], c[2], c[3], 3) };
    if let Some(x) = o.get_mut(i) { *x = r; }
}

#[tile]
fn tkat<const B: i32>(z: &mut Tensor<u32, [B]>, c: &Tensor<u32, [-1]>, k: &Tensor<u32, [-1]>) {
    let w = iota([B], 0) % 4u32;
    let c0 = full([B], c[0]);
    let r0 = philox(k[0], k[1], c0, c[1], c[2], c[3], 0);
    let r1 = philox(k[0], k[1], c0, c[1], c[2], c[3], 1);
    let r2 = philox(k[0], k[1], c0, c[1], c[2], c[3], 2);
    let r3 = philox(k[0], k[1], c0, c[1], c[2], c[3], 3);
    z.store(select(w == 0u32, r0, select(w == 1u32, r1, select(w == 2u32, r2, r3))));
}

#[tile]
fn draw<const B: i32>(u: &mut Tensor<f32, [B]>, g: &mut Tensor<f32, [B]>, r: &mut Tensor<u32, [B]>, seed: u64) {
    let off = iota([B], 0) + tile_id(0) * (B as usize);
    u.store(rand(seed, off));
    g.store(randn(seed, off));
    r.store(randint(seed, off));
}

#[kernel]
fn simt_draw(u: DisjointSlice<f32>, seed: u64) {
    let i = thread::index_1d();
    let v = rand(seed, i.get());
    if let Some(x) = u.get_mut(i) { *x = v; }
}

#[tile]
fn dropout<const B: i32>(y: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, p: f32, seed: u64) {
    let off = iota([B], 0) + tile_id(0) * (B as usize);
    let keep = rand(seed, off) >= p;
    y.store(select(keep, load_tile_like(x, y) / (1.0 - p), 0.0f32));
}
"""


def philox(c, k):
    """Philox4x32-10 from the SC'11 paper, for the reference."""
    c, k0, k1 = list(c), k[0], k[1]
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xffffffff, (k1 + 0xBB67AE85) & 0xffffffff
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & 0xffffffff, (p0 >> 32) ^ c[3] ^ k1, p0 & 0xffffffff]
    return c


@pytest.fixture
def mod(dev):
    return oxide.compile(SRC, device=dev, filename="rng.oxk")


def test_reference_matches_the_known_answers():
    for c, k, want in KAT:
        assert tuple(philox(c, k)) == want


@pytest.mark.parametrize("case", range(len(KAT)))
def test_known_answers(mod, dev, case):
    c, k, want = KAT[case]
    tc, tk = oxide.from_numpy(np.array(c, np.uint32)).to(dev), oxide.from_numpy(np.array(k, np.uint32)).to(dev)
    o = oxide.zeros(4, dtype="u32", device=dev)
    mod.kat(tc, tk, o, grid=(1,), block=(4,))
    assert [int(v) for v in o.numpy()] == list(want)
    z = oxide.zeros(4, dtype="u32", device=dev)
    mod.tkat(z.partition(4), tc, tk)
    assert [int(v) for v in z.numpy()] == list(want)


def test_draws_depend_on_seed_and_offset_only(mod, dev):
    n, seed = 1 << 15, 2**40 + 17
    out = {}
    for B in (256, 1024):
        u, g, r = (oxide.zeros(n, dtype=d, device=dev) for d in ("f32", "f32", "u32"))
        mod.draw(u.partition(B), g.partition(B), r.partition(B), oxide.u64(seed))
        out[B] = (u.numpy(), g.numpy(), r.numpy())
    for a, b in zip(out[256], out[1024]):
        np.testing.assert_array_equal(a, b)
    u, g, r = out[256]
    want = np.array([philox((i & 0xffffffff, i >> 32, 0, 0), (seed & 0xffffffff, seed >> 32))[0] for i in range(64)],
                    dtype=np.uint32)
    np.testing.assert_array_equal(r[:64], want)
    np.testing.assert_array_equal(u[:64], (want >> 8).astype(np.float32) * np.float32(2.0**-24))
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    assert abs(g.mean()) < 0.03 and abs(g.std() - 1.0) < 0.03
    s = oxide.zeros(n, device=dev)
    mod.simt_draw(s, oxide.u64(seed), grid=(n // 256,), block=(256,))
    np.testing.assert_array_equal(s.numpy(), u)


def test_fused_dropout(mod, dev):
    rng = np.random.default_rng(0)
    n, p, seed = 10_000, 0.3, 7
    x = rng.standard_normal(n).astype(np.float32)
    y = oxide.zeros(n, device=dev)
    mod.dropout(y.partition(512), oxide.from_numpy(x).to(dev), np.float32(p), oxide.u64(seed))
    keep = np.array([(philox((i, 0, 0, 0), (seed, 0))[0] >> 8) * 2.0**-24 >= np.float32(p) for i in range(n)])
    np.testing.assert_allclose(y.numpy(), np.where(keep, x / np.float32(1 - p), 0), rtol=1e-6)
    assert abs(keep.mean() - (1 - p)) < 0.02
