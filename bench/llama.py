#!/usr/bin/env python3
"""The Llama model on Oxide kernels (models/llama/model.py) on one GPU, bf16,
peers in the same run: transformers eager (SDPA attention) and transformers
with torch.compile(mode="reduce-overhead") and a static cache, plus the decode
roofline (weight and KV-cache bytes read per step / the HBM's bandwidth:
4.8 TB/s on an H200, 3.35 on an H100).
Random weights from a fixed seed: no checkpoint can be downloaded here.

  python3 bench/llama.py [--quick] [--1b | --8b] [--prefill=B:S,..] [--decode=B:CTX,..]

Measures prefill tokens/s at 1 x 2048 and 8 x 512, and decode tokens/s at
batch 1, 8 and 64 with 1k and 8k of context. Writes $OUT/llama.json (else
bench/llama.json). Needs torch and transformers (tools/gpu_llama.sh)."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import transformers

import timing  # bench/timing.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

HBM = {"H100": 3.35e12, "H200": 4.8e12}  # bytes/s, by the device name's second word (else the H200's)
CONFIGS = {
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, vocab_size=128256, max_position_embeddings=8448, rope_theta=500000.0),
    "8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, vocab_size=128256, max_position_embeddings=8448, rope_theta=500000.0),
}
PREFILL = [(1, 2048), (8, 512)]
DECODE = [(1, 1024), (8, 1024), (64, 1024), (1, 8192), (8, 8192), (64, 8192)]
if "--quick" in sys.argv:
    PREFILL, DECODE = [(1, 512), (8, 512)], [(1, 1024), (8, 1024), (64, 1024)]
for a in sys.argv:  # --prefill=B:S,.. and --decode=B:CTX,.. choose the shapes (empty: none)
    for flag in ("--prefill=", "--decode="):
        if a.startswith(flag):
            shapes = [tuple(int(v) for v in p.split(":")) for p in a[len(flag):].split(",") if p]
            if flag == "--prefill=":
                PREFILL = shapes
            else:
                DECODE = shapes
rows = []


def cuda_time(fn, reps=5):
    """Median seconds of fn (bench/timing.py: CUDA events, after a warm-up)."""
    return timing.timeit(fn, reps=reps, inner=1, warmup=1)


def report(cfg, what, shape, impl, tokens, secs, extra=None):
    row = {"config": cfg, "bench": what, "shape": shape, "impl": impl,
           "tokens_per_s": tokens / secs if secs else None, **(extra or {})}
    rows.append(row)
    print(f"  {what:8s} {str(shape):12s} {impl:44s} {row['tokens_per_s'] or 0:12.1f} tok/s"
          + (f"  ({extra['note']})" if extra and "note" in extra else ""))


def decode_bytes(config, batch, ctx):
    """Bytes a decode step reads at least: every weight once, and each sequence's KV cache."""
    H, I, L, V = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    Dh, kvh = H // config.num_attention_heads, config.num_key_value_heads
    weights = L * (2 * H * H + 2 * H * kvh * Dh + 3 * H * I) + V * H
    return 2 * (weights + batch * L * 2 * kvh * Dh * ctx)


def reference(name):
    """transformers' LlamaForCausalLM of configuration `name`, random weights of seed 0, bf16."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**CONFIGS[name])
    config._attn_implementation = "sdpa"
    return config, transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()


def compiled_decode(name, batch, ctx):
    """Seconds a decode step of transformers + torch.compile(mode="reduce-overhead") with a
    static cache takes, timed in a child process without Oxide (this script with
    --compiled-decode): a crash of the peer's compile is then reported, not the end of the
    run. Returns (seconds, None) or (None, why)."""
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--compiled-decode", name, str(batch), str(ctx)],
                           capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return None, "no result in 20 minutes"
    for line in r.stdout.splitlines():
        if line.startswith("SECONDS "):
            return float(line.split()[1]), None
    err = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("W1")]
    return None, f"the child exited with {r.returncode}: {' | '.join(err[-3:])[:300]}"


def child_compiled_decode(name, b, ctx):
    config, ref = reference(name)
    compiled = torch.compile(ref, mode="reduce-overhead", fullgraph=False)
    ids = torch.randint(0, config.vocab_size, (b, ctx), device="cuda")
    with torch.no_grad():
        static = transformers.StaticCache(config=config, max_batch_size=b, max_cache_len=ctx + 64,
                                          device="cuda", dtype=torch.bfloat16)
        out = compiled(ids, past_key_values=static, use_cache=True, cache_position=torch.arange(ctx, device="cuda"))
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        pos = torch.tensor([ctx], device="cuda")

        def cstep():
            compiled(nxt, past_key_values=static, use_cache=True, cache_position=pos)
        print(f"SECONDS {cuda_time(cstep, reps=3)!r}", flush=True)


def bench(name):
    from models.llama.model import Llama
    print(f"\n{name}: {CONFIGS[name]}")
    config, ref = reference(name)
    max_batch = max(b for b, _ in PREFILL + DECODE)
    max_len = max(c for _, c in PREFILL + DECODE) + 64
    model = Llama(config, ref.state_dict(), device="cuda", dtype="bf16", max_batch=max_batch, max_len=max_len)
    compiled = torch.compile(ref, mode="reduce-overhead", fullgraph=False)
    for b, s in PREFILL:
        ids = torch.randint(0, config.vocab_size, (b, s), device="cuda")
        with torch.no_grad():
            report(name, "prefill", (b, s), "transformers eager (SDPA)", b * s, cuda_time(lambda: ref(ids)))
            try:
                report(name, "prefill", (b, s), "transformers + torch.compile", b * s, cuda_time(lambda: compiled(ids)))
            except Exception as e:  # a peer that fails is reported, not fatal
                print(f"  torch.compile prefill: {e}")
        host = ids.cpu().numpy().astype(np.int32)
        report(name, "prefill", (b, s), "oxide", b * s, cuda_time(lambda: model.prefill(host)))
    for b, ctx in DECODE:
        ids = torch.randint(0, config.vocab_size, (b, ctx), device="cuda")
        hbm = HBM.get(torch.cuda.get_device_name().split()[1], HBM["H200"])
        roof = decode_bytes(config, b, ctx) / hbm
        report(name, "decode", (b, ctx), f"roofline (bytes read / {hbm / 1e12:.2f} TB/s)", b, roof)
        with torch.no_grad():
            cache = transformers.DynamicCache()
            out = ref(ids, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)

            def step():
                ref(nxt, past_key_values=cache, use_cache=True)
            report(name, "decode", (b, ctx), "transformers eager (SDPA)", b, cuda_time(step, reps=3))
        if "--quick" in sys.argv:
            print("  torch.compile decode: skipped with --quick (its compile takes minutes)")
        else:
            secs, why = compiled_decode(name, b, ctx)
            if secs:
                report(name, "decode", (b, ctx), "transformers + torch.compile (static cache)", b, secs)
            else:
                print(f"  torch.compile decode: {why}")
        logits = model.prefill(ids.cpu().numpy().astype(np.int32))
        nid = model.greedy(logits)

        def ostep():  # each timed step appends one position (max_len leaves room for them)
            model.decode(nid)
        secs = cuda_time(ostep, reps=3)
        report(name, "decode", (b, ctx), "oxide (a launch a kernel)", b, secs, {"roofline_fraction": roof / secs})
        # the step recorded once and replayed as one CUDA graph: no host work a token
        step = model.decode_chain(model.prefill(ids.cpu().numpy().astype(np.int32))).capture()
        step.run()  # (warm-up) timed on the host: the graph runs on the step's own stream
        step.synchronize()
        t0 = time.perf_counter()
        for _ in range(8):
            step.run()
        step.synchronize()
        secs = (time.perf_counter() - t0) / 8
        report(name, "decode", (b, ctx), "oxide (CUDA graph a step)", b, secs, {"roofline_fraction": roof / secs})
    del ref, model, compiled
    torch.cuda.empty_cache()


def main():
    if "--compiled-decode" in sys.argv:
        i = sys.argv.index("--compiled-decode")
        return child_compiled_decode(sys.argv[i + 1], int(sys.argv[i + 2]), int(sys.argv[i + 3]))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers {transformers.__version__}")
    names = ["1b"] if "--1b" in sys.argv else ["8b"] if "--8b" in sys.argv else ["1b", "8b"]
    for n in names:
        bench(n)
    out = os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "bench"), "llama.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
