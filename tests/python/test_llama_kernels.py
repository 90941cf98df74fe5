"""The Llama decoder's kernels (models/llama/llama.oxk), each against a
float64 NumPy reference on shapes no tile divides, in f32 on the CPU (and on
the GPU with --gpu; bf16 there too, where the model runs)."""
import math
import os

import numpy as np
import pytest

import oxide

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "models", "llama", "llama.oxk")


@pytest.fixture(scope="module")
def kernels():
    mods = {}

    def get(dev):
        if dev.name not in mods:
            mods[dev.name] = oxide.compile_file(SRC, device=dev)
        return mods[dev.name]
    return get


def rng(seed):
    return np.random.default_rng(seed)


def t(x, dev, dtype="f32"):
    return oxide.tensor(np.ascontiguousarray(x, dtype=np.float32) if dtype != "i32" else x, dtype=dtype, device=dev)


def test_embed(dev, kernels):
    V, H, T = 50, 100, 7
    table = rng(1).standard_normal((V, H)).astype(np.float32)
    ids = np.array([3, 0, 49, 3, 17, 8, 22], np.int32)  # 7 tokens: a partial tile of 4
    x = oxide.empty((T, H), device=dev)
    kernels(dev).embed(x.partition((4, 32)), t(table, dev), oxide.tensor(ids, device=dev))
    assert np.array_equal(x.numpy(), table[ids])


def rmsnorm_ref(h, w, eps):
    h = h.astype(np.float64)
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * w


def test_rmsnorm_and_split_residual(dev, kernels):
    T, H, eps, S = 5, 100, 1e-5, 4
    x = rng(2).standard_normal((T, H)).astype(np.float32)
    res = rng(3).standard_normal((T, H)).astype(np.float32)
    w = rng(4).standard_normal(H).astype(np.float32)
    k = kernels(dev)
    y = oxide.empty((T, H), device=dev)
    for BR in (1, 4):  # rows a tile: 1, or several where the rows pass a grid axis's 65535 tiles
        k.rmsnorm(y.partition((BR, 128)), t(x, dev), t(w, dev), eps)
        np.testing.assert_allclose(y.numpy(), rmsnorm_ref(x, w, eps), rtol=1e-5, atol=1e-5)
    # x as the sum of S partial products (split-K's: a power of two), then the residual
    parts = rng(5).standard_normal((S, T, H)).astype(np.float32)
    parts[-1] = x - parts[:-1].sum(0)
    h = oxide.empty((T, H), device=dev)
    hx = parts.astype(np.float64).sum(0) + res
    for BR in (1, 4):
        k.split_add_rmsnorm(y.partition((BR, 128)), h.partition((BR, 128)), t(parts, dev), t(res, dev), t(w, dev), eps)
        np.testing.assert_allclose(h.numpy(), hx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y.numpy(), rmsnorm_ref(hx, w, eps), rtol=1e-5, atol=1e-5)


def llama3_inv_freq(D, theta=500000.0, factor=8.0, low=1.0, high=4.0, original=8192):
    """Llama 3's scaled frequencies, as transformers' _compute_llama3_parameters
    defines them (written from the published formula)."""
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    wavelen = 2 * math.pi / inv
    low_wl, high_wl = original / low, original / high
    smooth = (original / wavelen - low) / (high - low)
    scaled = np.where(wavelen > low_wl, inv / factor, inv)
    mid = (wavelen <= low_wl) & (wavelen >= high_wl)
    return np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)


def test_qkv_finish_rope_llama3_and_cache_write(dev, kernels):
    # 6 tokens of 2 sequences; q, k, v heads side by side in S = 2 partial products
    T, Hq, Hkv, D, P, B, S = 6, 3, 2, 64, 40, 2, 2
    inv = llama3_inv_freq(D)
    ang = np.outer(np.arange(P), inv)  # [P, D/2]
    cos, sin = np.cos(ang), np.sin(ang)
    x = rng(5).standard_normal((T, Hq + 2 * Hkv, D)).astype(np.float32)
    parts = rng(6).standard_normal((S, T, Hq + 2 * Hkv, D)).astype(np.float32)
    parts[-1] = x - parts[:-1].sum(0)
    pos = np.array([0, 1, 2, 17, 39, 5], np.int32)
    seq = np.array([0, 0, 0, 1, 1, 1], np.int32)
    q = oxide.empty((T, Hq, D), device=dev)
    kc = oxide.zeros((B, Hkv, P, D), device=dev)
    vc = oxide.zeros((B, Hkv, P, D), device=dev)
    n = x.size
    kernels(dev).qkv_finish(q.reshape(-1), kc.reshape(-1), vc.reshape(-1), t(parts, dev), oxide.tensor(pos, device=dev),
                            oxide.tensor(seq, device=dev), t(cos, dev), t(sin, dev), Hkv, P, D,
                            grid=-(-n // 256), block=256)
    c = np.concatenate([cos, cos], 1)[pos][:, None, :]
    s = np.concatenate([sin, sin], 1)[pos][:, None, :]
    x64 = parts.astype(np.float64).sum(0)
    rot = np.concatenate([-x64[..., D // 2:], x64[..., :D // 2]], -1)
    want = x64 * c + rot * s
    np.testing.assert_allclose(q.numpy(), want[:, :Hq], rtol=1e-5, atol=1e-5)
    kw, vw = np.zeros((B, Hkv, P, D)), np.zeros((B, Hkv, P, D))
    for i in range(T):  # token i's k and v at (seq, pos); nothing else written
        kw[seq[i], :, pos[i]] = want[i, Hq:Hq + Hkv]
        vw[seq[i], :, pos[i]] = x64[i, Hq + Hkv:]
    np.testing.assert_allclose(kc.numpy(), kw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vc.numpy(), vw, rtol=1e-5, atol=1e-5)


def attention_ref(q, k, v, causal_from=0):
    """q [Hq, S, D], k/v [Hkv, N, D]; query i sees keys 0..=causal_from + i"""
    Hq, S, D = q.shape
    g = Hq // k.shape[0]
    out = np.empty((Hq, S, D))
    for h in range(Hq):
        s = q[h].astype(np.float64) @ k[h // g].astype(np.float64).T / math.sqrt(D)
        mask = np.arange(k.shape[1])[None, :] > np.arange(S)[:, None] + causal_from
        s[mask] = -np.inf
        p = np.exp(s - s.max(1, keepdims=True))
        out[h] = (p / p.sum(1, keepdims=True)) @ v[h // g]
    return out


def test_prefill_attention_gqa_causal(dev, kernels):
    S, Hq, Hkv, D = 37, 6, 2, 64
    r = rng(6)
    q, k, v = (r.standard_normal((S, h, D)).astype(np.float32) for h in (Hq, Hkv, Hkv))
    o = oxide.empty((1, Hq, S, D), device=dev)
    view = lambda a: t(a, dev).reshape(1, S, a.shape[1], D).permute(0, 2, 1, 3)  # [B, H, S, D] views
    kern = kernels(dev).prefill_attention
    kern.set_generic("BN", 16)
    kern(o.partition((1, 1, 16, D)), view(q), view(k), view(v), 1 / math.sqrt(D))
    want = attention_ref(q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2))
    np.testing.assert_allclose(o.numpy()[0], want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("split", [16, 64])
def test_decode_attention_split_kv(dev, kernels, split):
    B, Hq, Hkv, D, L = 3, 6, 2, 64, 160
    lens = np.array([5, 37, 160], np.int32)
    r = rng(7)
    q = r.standard_normal((B, Hq, D)).astype(np.float32)
    kc = r.standard_normal((B, Hkv, L, D)).astype(np.float32)
    vc = r.standard_normal((B, Hkv, L, D)).astype(np.float32)
    splits = -(-L // split)
    group = Hq // Hkv
    po = oxide.empty((B * Hkv, splits, group, D), device=dev)
    lse = oxide.empty((B * Hkv, splits, group, 1), device=dev)
    k = kernels(dev)
    k.decode_attention.set_generic("BN", 16)
    k.decode_combine.set_generic("NS", 1 << (splits - 1).bit_length())
    k.decode_attention(po.partition((1, 1, 4, D)), lse.partition((1, 1, 4, 1)), t(q, dev), t(kc, dev), t(vc, dev),
                       oxide.tensor(lens, device=dev), split, 1 / math.sqrt(D))
    o = oxide.empty((B, Hq, D), device=dev)
    k.decode_combine(o.partition((1, 1, D)), po, lse)
    for b in range(B):
        n = lens[b]
        want = attention_ref(q[b][:, None, :], kc[b, :, :n], vc[b, :, :n], causal_from=n)[:, 0]
        np.testing.assert_allclose(o.numpy()[b], want, rtol=2e-4, atol=2e-4)


def interleave(wg, wu, BN):
    """gate_up's weight: wg's and wu's rows by blocks of BN in turn, padded with zero rows."""
    N, K = wg.shape
    nb = -(-N // BN)
    out = np.zeros((nb, 2, BN, K), np.float32)
    for half, w in enumerate((wg, wu)):
        pad = np.zeros((nb * BN, K), np.float32)
        pad[:N] = w
        out[:, half] = pad.reshape(nb, BN, K)
    return out.reshape(-1, K)


def test_linear_split_k_and_gate_up(dev, kernels):
    M, K, N, BN = 5, 100, 70, 32  # a decode-shaped M; 4 K tiles of 32
    r = rng(8)
    x = r.standard_normal((M, K)).astype(np.float32)
    wg = r.standard_normal((N, K)).astype(np.float32) / 10  # transformers' [out, in] weights
    wu = r.standard_normal((N, K)).astype(np.float32) / 10
    k = kernels(dev)
    for kern in (k.linear, k.linear_part, k.gate_up):
        kern.set_generic("BK", 32)
    x64 = x.astype(np.float64)
    y = oxide.empty((M, N), device=dev)
    k.linear(y.partition((16, BN)), t(x, dev), t(wg, dev))
    np.testing.assert_allclose(y.numpy(), x64 @ wg.T, rtol=1e-4, atol=1e-4)
    # split along K: runs of 1, 2, 3 and 4 K tiles (the last run short, or the only one)
    for chunk in (1, 2, 3, 4):
        S = -(-4 // chunk)
        ws = oxide.empty((S, M, N), device=dev)
        k.linear_part(ws.partition((1, 16, BN)), t(x, dev), t(wg, dev), chunk)
        np.testing.assert_allclose(ws.numpy().sum(0), x64 @ wg.T, rtol=1e-4, atol=1e-4)
    g, u = x64 @ wg.T, x64 @ wu.T
    want = g / (1 + np.exp(-g)) * u
    w = t(interleave(wg, wu, BN), dev)
    k.gate_up(y.partition((16, BN)), t(x, dev), w)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    for S, chunk in ((2, 2), (4, 1), (8, 1)):  # 8 runs of 1 of the 4 K tiles: the last 4 all zeros
        ws = oxide.empty((S, M, w.shape[0]), device=dev)
        k.linear_part(ws.partition((1, 16, BN)), t(x, dev), w, chunk)
        y2 = oxide.empty((M, N), device=dev)
        k.split_swiglu(y2.partition((1, BN)), ws)
        np.testing.assert_allclose(y2.numpy(), want, rtol=1e-4, atol=1e-4)


def test_greedy_argmax_over_a_long_vocabulary(dev, kernels):
    B, V, BV = 3, 70000, 4096
    logits = rng(9).standard_normal((B, V)).astype(np.float32)
    logits[0, 69999] = 10.0  # the last element of the last, partial chunk
    logits[1, 4096] = 10.0   # the first of a chunk
    logits[2, 123] = logits[2, 50000] = 10.0  # a tie: the first one wins, as torch.argmax
    chunks = -(-V // BV)
    pv = oxide.empty((B, chunks), device=dev)
    pi = oxide.empty((B, chunks), dtype="i32", device=dev)
    k = kernels(dev)
    k.argmax_part.set_generic("BV", BV)
    k.argmax_final.set_generic("NC", 32)
    k.argmax_part(pv.partition((1, 1)), pi.partition((1, 1)), t(logits, dev))
    ids = oxide.empty((B,), dtype="i32", device=dev)
    k.argmax_final(ids.partition((1,)), pv, pi)
    assert ids.numpy().tolist() == [69999, 4096, 123]


def _sample(dev, kernels, logits, K, temperature, top_p, seed=1, step=0, BV=1024):
    B, V = logits.shape
    chunks = -(-V // BV)
    NK = 1 << (chunks * K - 1).bit_length()
    k = kernels(dev)
    k.topk_part.set_generic("BV", BV)
    k.sample_topk.set_generic("NK", NK)
    pv = oxide.empty((B, chunks * K), device=dev)
    pi = oxide.empty((B, chunks * K), dtype="i32", device=dev)
    k.topk_part(pv.partition((1, K)), pi.partition((1, K)), t(logits, dev))
    ids = oxide.empty((B,), dtype="i32", device=dev)
    k.sample_topk.set_generic("K", K)
    k.sample_topk(ids.partition((1,)), pv, pi, temperature, top_p, seed, step)
    return ids.numpy()


def test_top_k_top_p_sampling(dev, kernels):
    V, B = 3000, 512
    r = rng(10)
    row = r.standard_normal(V).astype(np.float32)
    top = np.argsort(-row)[:4]
    row[top] = [8.0, 7.5, 7.0, 6.0]  # four clear leaders, wherever the draw put them
    logits = np.tile(row, (B, 1))
    # greedy two ways: k = 1, and a top-p that keeps only the first
    assert (_sample(dev, kernels, logits[:8], 1, 1.0, 1.0) == top[0]).all()
    assert (_sample(dev, kernels, logits[:8], 4, 1.0, 1e-6) == top[0]).all()
    # top-4 at temperature 1: the draws follow the softmax of the four
    got = np.concatenate([_sample(dev, kernels, logits, 4, 1.0, 1.0, seed=7, step=s) for s in range(4)])
    assert set(got.tolist()) <= set(top.tolist())
    p = np.exp(row[top] - row[top].max())
    p /= p.sum()
    freq = np.array([(got == t_).mean() for t_ in top])
    assert np.abs(freq - p).max() < 0.05, (freq, p)
    # top-p 0.7: the smallest prefix holding 0.7 (the first two of p = .47 .29 .17 .06)
    got = _sample(dev, kernels, logits, 4, 1.0, 0.7, seed=3)
    assert set(got.tolist()) == set(top[:2].tolist())
