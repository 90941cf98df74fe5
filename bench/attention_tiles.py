#!/usr/bin/env python3
"""Each candidate tile of bench/attention.py's Oxide kernel measured alone (no
tuner), for seeing what the tuner chooses between:

  python3 bench/attention_tiles.py [B H N D] ...   (default: 4 32 4096 64 and 4 32 4096 128)

Prints one JSON row per shape, mask and tiles (TFLOP/s, median of CUDA-event timings)."""
import json, math, os, sys

import torch
import oxide

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TILES = [(64, 64), (128, 64), (64, 128), (128, 128)]


def main():
    args = [int(a) for a in sys.argv[1:]]
    shapes = [tuple(args[i:i + 4]) for i in range(0, len(args), 4)] or [(4, 32, 4096, 64), (4, 32, 4096, 128)]
    src = os.path.join(ROOT, "examples", "tile_attention.oxk")
    for (B, H, N, D) in shapes:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flop = 4 * B * H * N * N * D / (2 if causal else 1)
            for bm, bn in TILES:
                kern = oxide.compile_file(src, "cuda").attention
                kern.set_generic("BN", bn)
                o = torch.empty_like(q)
                po = oxide.from_dlpack(o).partition([1, 1, bm, D])
                t = timing.timeit(lambda: kern(po, q, k, v, oxide.f32(1 / math.sqrt(D)), causal), reps=5, inner=3,
                                  warmup=2)
                print(json.dumps({"shape": [B, H, N, D], "causal": causal, "tiles": [bm, bn],
                                  "tflops": flop / t / 1e12}), flush=True)


if __name__ == "__main__":
    main()
