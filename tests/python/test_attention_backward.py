"""Attention for training (examples/tile_attention_backward.oxk): the forward
with its log-sum-exp, and dQ, dK, dV, against float64 NumPy gradients, causal
and not, grouped-query, on sequences no tile divides; f32 on the CPU (and on
the GPU with --gpu)."""
import math
import os

import numpy as np
import pytest

import oxide

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reference(q, k, v, do, causal):
    """Forward and backward of softmax(q k^T / sqrt(D)) v in float64, from the
    definitions (q [B, Hq, S, D]; k, v [B, Hkv, N, D])."""
    B, Hq, S, D = q.shape
    g = Hq // k.shape[1]
    kk, vv = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = q @ kk.transpose(0, 1, 3, 2) / math.sqrt(D)
    if causal:
        s = np.where(np.arange(k.shape[2])[None, :] <= np.arange(S)[:, None], s, -np.inf)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)) + s.max(-1, keepdims=True)
    p = np.exp(s - lse)
    o = p @ vv
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ vv.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ kk / math.sqrt(D)
    dk = ds.transpose(0, 1, 3, 2) @ q / math.sqrt(D)
    fold = lambda x: x.reshape(B, k.shape[1], g, *x.shape[2:]).sum(2)  # the group's heads into their KV head
    return o, lse, dq, fold(dk), fold(dv)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_gradients(dev, causal):
    B, Hq, Hkv, S, D = 2, 4, 2, 37, 32
    r = np.random.default_rng(11)
    q, k, v, do = (r.standard_normal((B, h, S, D)) for h in (Hq, Hkv, Hkv, Hq))
    m = oxide.compile_file(os.path.join(ROOT, "examples", "tile_attention_backward.oxk"), device=dev)
    for kern in (m.attention_forward, m.attention_backward_dkdv, m.attention_backward_dq):
        kern.set_generic("BN", 16)
    m.attention_backward_dkdv.set_generic("BM", 16)
    T = lambda a: oxide.tensor(a.astype(np.float32), device=dev)
    tq, tk, tv, tdo = T(q), T(k), T(v), T(do)
    o = oxide.empty((B, Hq, S, D), device=dev)
    lse = oxide.empty((B, Hq, S, 1), device=dev)
    scale = 1 / math.sqrt(D)
    m.attention_forward(o.partition((1, 1, 16, D)), lse.partition((1, 1, 16, 1)), tq, tk, tv, scale, causal)
    dq, dk, dv = (oxide.empty(x.shape, device=dev) for x in (q, k, v))
    m.attention_backward_dkdv(dk.partition((1, 1, 16, D)), dv.partition((1, 1, 16, D)), tq, tk, tv, o, tdo, lse,
                              scale, causal)
    m.attention_backward_dq(dq.partition((1, 1, 16, D)), tq, tk, tv, o, tdo, lse, scale, causal)
    want = reference(q, k, v, do, causal)
    for name, got, w in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4, err_msg=name)
