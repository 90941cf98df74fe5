#!/usr/bin/env python3
"""Where a decode step of the Llama model (models/llama/model.py) spends its
GPU time: each kernel's total over a few steps, from torch.profiler (CUPTI
sees every kernel of the process, Oxide's included), at one configuration.

  python3 bench/llama_profile.py [--8b] [--batch B] [--ctx C] [--bm BM] [--graph]

--graph also times the step as one CUDA graph (Llama.decode_chain, captured),
replayed back to back: what a token costs when the host only replays
(launches overlap the kernel before them unless OXIDE_PDL=0 is in the environment, to compare).

Random bf16 weights (no checkpoint here); needs torch, not transformers."""
import argparse
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from models.llama.model import Llama  # noqa: E402

CONFIGS = {
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, vocab_size=128256, max_position_embeddings=8448, rope_theta=500000.0),
    "8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, max_position_embeddings=8448, rope_theta=500000.0),
}


def weights(c):
    """transformers' parameter names, random bf16 on the GPU (std 0.02; norms 1)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    H, I, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    kv = H // c["num_attention_heads"] * c["num_key_value_heads"]
    r = lambda *s: (torch.randn(*s, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
    sd = {"model.embed_tokens.weight": r(V, H), "model.norm.weight": torch.ones(H, device="cuda"), "lm_head.weight": r(V, H)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": torch.ones(H, device="cuda"),
                   p + "post_attention_layernorm.weight": torch.ones(H, device="cuda"),
                   p + "self_attn.q_proj.weight": r(H, H), p + "self_attn.k_proj.weight": r(kv, H),
                   p + "self_attn.v_proj.weight": r(kv, H), p + "self_attn.o_proj.weight": r(H, H),
                   p + "mlp.gate_proj.weight": r(I, H), p + "mlp.up_proj.weight": r(I, H),
                   p + "mlp.down_proj.weight": r(H, I)})
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--8b", dest="big", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--bm", type=int, default=None, help="the linear kernels' tile rows (default: the model's)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--graph", action="store_true", help="time the step replayed as one CUDA graph")
    a = ap.parse_args()
    c = CONFIGS["8b" if a.big else "1b"]
    model = Llama(c, weights(c), device="cuda", dtype="bf16", max_batch=a.batch,
                  max_len=a.ctx + 128)  # room for the steps below and the graph's replays
    if a.bm:
        model.BM = a.bm
    ids = np.random.default_rng(0).integers(0, c["vocab_size"], (a.batch, a.ctx)).astype(np.int32)
    nid = model.greedy(model.prefill(ids))
    model.decode(nid)  # warm-up: every kernel compiled and loaded
    model.dev.synchronize()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            model.decode(nid)
        model.dev.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n, t = totals.get(e.name, (0, 0.0))
            totals[e.name] = (n + 1, t + e.device_time_total)
    step = sum(t for _, t in totals.values()) / a.steps
    print(f"{'8b' if a.big else '1b'} batch {a.batch} ctx {a.ctx} linear BM {model.BM}: "
          f"{step:.1f} us of kernels a step ({1e6 / step * a.batch:.0f} tok/s if back to back)")
    for name, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {t / a.steps:10.1f} us/step  {n // a.steps:4d} launches/step  {t / n:8.1f} us each  {name[:60]}")
    if a.graph:
        step_graph(model, nid, a)


def step_graph(model, nid, a):
    """The step as one CUDA graph, replayed: median of 7 samples of 12 replays (each
    replay a token: 87 of them, within the cache's room past the prompt)."""
    logits = model.decode(nid)
    st = model.decode_chain(logits).capture()
    for _ in range(3):
        st.run()
    st.synchronize()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(12):
            st.run()
        st.synchronize()
        samples.append((time.perf_counter() - t0) / 12)
    us = sorted(samples)[3] * 1e6
    pdl = os.environ.get("OXIDE_PDL") != "0"
    print(f"graph replay: {us:.1f} us a step, {1e6 / us * a.batch:.0f} tok/s "
          f"(launch overlap {'on' if pdl else 'off (OXIDE_PDL=0)'})")


if __name__ == "__main__":
    main()
