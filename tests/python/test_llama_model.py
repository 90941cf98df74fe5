"""The Llama model on Oxide kernels (models/llama/model.py) against a float64
NumPy reference written here: prefill of a batch of prompts, then greedy
decoding, on a small configuration (f32 on the CPU; the GPU and transformers'
own LlamaForCausalLM check the same model with --gpu, test_llama_hf.py)."""
import json
import math
import os
import struct
import sys

import numpy as np
import pytest

import oxide

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from models.llama.model import Llama, load_safetensors, rope_tables  # noqa: E402

CONFIG = {"hidden_size": 96, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
          "intermediate_size": 200, "vocab_size": 300, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
          "max_position_embeddings": 128, "tie_word_embeddings": False,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}


def random_state(cfg, seed=0):
    r = np.random.default_rng(seed)
    H, I, V, Dh = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * Dh
    w = lambda *shape: (r.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)
    sd = {"model.embed_tokens.weight": r.standard_normal((V, H)).astype(np.float32),
          "model.norm.weight": (1 + 0.1 * r.standard_normal(H)).astype(np.float32), "lm_head.weight": w(V, H)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": (1 + 0.1 * r.standard_normal(H)).astype(np.float32),
                   p + "post_attention_layernorm.weight": (1 + 0.1 * r.standard_normal(H)).astype(np.float32),
                   p + "self_attn.q_proj.weight": w(H, H), p + "self_attn.k_proj.weight": w(kv, H),
                   p + "self_attn.v_proj.weight": w(kv, H), p + "self_attn.o_proj.weight": w(H, H),
                   p + "mlp.gate_proj.weight": w(I, H), p + "mlp.up_proj.weight": w(I, H),
                   p + "mlp.down_proj.weight": w(H, I)})
    return sd


class Reference:
    """Llama in float64 NumPy, token by token with a KV cache, from the
    architecture's definition (RMSNorm, rotate-half RoPE, GQA, SwiGLU)."""

    def __init__(self, cfg, sd):
        self.c, self.sd = cfg, {k: v.astype(np.float64) for k, v in sd.items()}
        cos, sin = rope_tables(_Cfg(cfg), cfg["max_position_embeddings"])
        self.cos, self.sin = cos.astype(np.float64), sin.astype(np.float64)
        self.cache = [([], []) for _ in range(cfg["num_hidden_layers"])]

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.c["rms_norm_eps"]) * w

    def rope(self, x, p):  # x [heads, Dh]
        half = x.shape[-1] // 2
        c, s = np.concatenate([self.cos[p]] * 2), np.concatenate([self.sin[p]] * 2)
        rot = np.concatenate([-x[:, half:], x[:, :half]], -1)
        return x * c + rot * s

    def step(self, tok, p):
        c, sd = self.c, self.sd
        Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        Dh = c["hidden_size"] // Hq
        h = sd["model.embed_tokens.weight"][tok]
        for i in range(c["num_hidden_layers"]):
            P = f"model.layers.{i}."
            x = self.norm(h, sd[P + "input_layernorm.weight"])
            q = self.rope((sd[P + "self_attn.q_proj.weight"] @ x).reshape(Hq, Dh), p)
            k = self.rope((sd[P + "self_attn.k_proj.weight"] @ x).reshape(Hkv, Dh), p)
            v = (sd[P + "self_attn.v_proj.weight"] @ x).reshape(Hkv, Dh)
            self.cache[i][0].append(k)
            self.cache[i][1].append(v)
            K, V = np.stack(self.cache[i][0], 1), np.stack(self.cache[i][1], 1)  # [Hkv, n, Dh]
            o = np.empty((Hq, Dh))
            for hh in range(Hq):
                s = K[hh // (Hq // Hkv)] @ q[hh] / math.sqrt(Dh)
                e = np.exp(s - s.max())
                o[hh] = (e / e.sum()) @ V[hh // (Hq // Hkv)]
            h = h + sd[P + "self_attn.o_proj.weight"] @ o.reshape(-1)
            x = self.norm(h, sd[P + "post_attention_layernorm.weight"])
            g, u = sd[P + "mlp.gate_proj.weight"] @ x, sd[P + "mlp.up_proj.weight"] @ x
            h = h + sd[P + "mlp.down_proj.weight"] @ (g / (1 + np.exp(-g)) * u)
        return sd["lm_head.weight"] @ self.norm(h, sd["model.norm.weight"])


class _Cfg:
    def __init__(self, c):
        self.head_dim = c["hidden_size"] // c["num_attention_heads"]
        self.theta = c["rope_theta"]
        self.scaling = c["rope_scaling"]


def run_reference(cfg, sd, prompts, steps):
    """Greedy decoding of each prompt: the logits at every step, and the tokens."""
    out = []
    for prompt in prompts:
        ref = Reference(cfg, sd)
        for p, tok in enumerate(prompt):
            logits = ref.step(tok, p)
        toks, all_logits = [], [logits]
        for s in range(steps):
            nxt = int(np.argmax(logits))
            toks.append(nxt)
            logits = ref.step(nxt, len(prompt) + s)
            all_logits.append(logits)
        out.append((toks, all_logits))
    return out


def test_prefill_and_greedy_decode_match_the_reference(dev):
    sd = random_state(CONFIG)
    prompts = np.array([[5, 17, 250, 3, 99, 42, 7], [1, 2, 3, 4, 5, 6, 7]], np.int32)
    steps = 32
    model = Llama(CONFIG, sd, device=dev, dtype="f32", max_batch=2, max_len=64)
    logits = model.prefill(prompts)
    ref = run_reference(CONFIG, sd, prompts, steps)
    got_toks = [[], []]
    for s in range(steps + 1):
        lg = logits.numpy()
        for b in range(2):
            np.testing.assert_allclose(lg[b], ref[b][1][s], rtol=2e-3, atol=2e-3,
                                       err_msg=f"sequence {b}, step {s}")
        if s == steps:
            break
        ids = model.greedy(logits)
        for b, t in enumerate(ids.numpy().tolist()):
            got_toks[b].append(t)
        logits = model.decode(ids)
    assert got_toks == [ref[0][0], ref[1][0]]


def write_safetensors(path, tensors):
    """A safetensors file (its published layout: an 8-byte little-endian header
    length, a JSON header of dtype, shape and byte offsets, then the data)."""
    header, data, off = {}, b"", 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def test_a_local_safetensors_checkpoint(tmp_path):
    sd = random_state(CONFIG, seed=1)
    path = tmp_path / "model.safetensors"
    write_safetensors(path, sd)
    loaded = load_safetensors(path)
    assert sorted(loaded) == sorted(sd) and all(np.array_equal(loaded[k], sd[k]) for k in sd)
    model = Llama(CONFIG, loaded, device="cpu", dtype="f32", max_len=16)
    prompt = np.array([[4, 8, 15, 16, 23]], np.int32)
    want = run_reference(CONFIG, sd, prompt, 0)[0][1][0]
    np.testing.assert_allclose(model.prefill(prompt).numpy()[0], want, rtol=2e-3, atol=2e-3)


def rust_engine(tmp_path):
    """The llama_oxide binary: OXIDE_LLAMA_RUST (one built beforehand, as
    tools/gpu_llama.sh passes on the GPU machine, which has no cargo), else
    built here by cargo against the liboxide of OXIDE_LIB_DIR; and the
    environment it runs in."""
    import shutil
    import subprocess
    if os.environ.get("OXIDE_LLAMA_RUST"):
        return os.environ["OXIDE_LLAMA_RUST"], dict(os.environ)
    lib = os.environ.get("OXIDE_LIB_DIR") or (os.path.dirname(os.environ["OXIDE_LIBRARY"])
                                             if os.environ.get("OXIDE_LIBRARY") else os.path.join(ROOT, "build"))
    if not shutil.which("cargo") or not os.path.exists(os.path.join(lib, "liboxide.so")):
        pytest.skip("needs cargo and a liboxide build (OXIDE_LIB_DIR): the Rust step of tools/run_tests.sh")
    env = dict(os.environ, OXIDE_LIB_DIR=lib, LD_LIBRARY_PATH=lib)
    target = tmp_path / "target"
    subprocess.run(["cargo", "build", "--offline", "--quiet", "--manifest-path",
                    os.path.join(ROOT, "models", "llama", "rust", "Cargo.toml"), "--target-dir", str(target)],
                   check=True, env=env)
    return str(target / "debug" / "llama_oxide"), env


def test_rust_engine_gives_the_same_tokens(tmp_path, dev):
    """models/llama/rust, a crate that depends on oxide, reads the checkpoint
    and config.json the test writes and decodes greedily, launch by launch and
    as a recorded chain (a CUDA graph on the GPU): the tokens are the Python
    model's."""
    import subprocess
    binary, env = rust_engine(tmp_path)
    sd = random_state(CONFIG, seed=2)
    write_safetensors(tmp_path / "model.safetensors", sd)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    prompt, steps = [5, 17, 250, 3, 99, 42, 7], 16
    # the same kernels, and the same roundings, in both languages; --graph: the
    # decode step recorded once as a chain and run once a token
    runs = (("f32", False), ("bf16", False), ("bf16", True)) if dev.type == "cpu" else (("bf16", False), ("bf16", True))
    for dtype, graph in runs:
        run = subprocess.run([binary, str(tmp_path), "--prompt", ",".join(map(str, prompt)), "--steps", str(steps),
                              "--dtype", dtype, "--device", dev.type] + ["--graph"] * graph,
                             check=True, env=env, capture_output=True, text=True)
        rust = [int(t) for t in run.stdout.strip().split(",")]
        assert "tokens/s" in run.stderr
        model = Llama(CONFIG, sd, device=dev, dtype=dtype, max_len=64)
        logits, toks = model.prefill(np.array([prompt], np.int32)), []
        for s in range(steps):
            ids = model.greedy(logits)
            toks.append(int(ids.numpy()[0]))
            logits = model.decode(ids)
        assert rust == toks, (dtype, graph)
        if dtype == "f32":
            assert toks == run_reference(CONFIG, sd, [prompt], steps)[0][0]


def test_decode_as_a_recorded_chain(dev):
    """The decode step recorded once (Llama.decode_chain; a CUDA graph on the
    GPU) and run once a token: the same tokens as step-by-step decoding, and
    positions that move on the device."""
    sd = random_state(CONFIG, seed=3)
    prompts = np.array([[9, 8, 7, 6], [1, 1, 2, 3]], np.int32)
    steps = 12
    model = Llama(CONFIG, sd, device=dev, dtype="f32", max_batch=2, max_len=32)
    logits, eager = model.prefill(prompts), []
    for _ in range(steps):
        ids = model.greedy(logits)
        eager.append(ids.numpy().tolist())
        logits = model.decode(ids)
    model2 = Llama(CONFIG, sd, device=dev, dtype="f32", max_batch=2, max_len=32)
    step = model2.decode_chain(model2.prefill(prompts))
    if dev.type == "cuda":
        step.capture()
    chained = []
    for _ in range(steps):
        step.run()
        step.synchronize()
        chained.append(step.ids.numpy().tolist())
    assert chained == eager
    assert model2.pos.numpy().tolist() == [4 + steps] * 2


def test_sampling_on_the_device(dev):
    """Llama.sample: top_k 1 is greedy; the same seed and step draw the same
    tokens; every draw is among the top_k."""
    sd = random_state(CONFIG, seed=4)
    model = Llama(CONFIG, sd, device=dev, dtype="f32", max_batch=2, max_len=16)
    logits = model.prefill(np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.int32))
    assert model.sample(logits, top_k=1).numpy().tolist() == model.greedy(logits).numpy().tolist()
    a = model.sample(logits, top_k=8, temperature=2.0, seed=5).numpy().tolist()
    assert a == model.sample(logits, top_k=8, temperature=2.0, seed=5).numpy().tolist()
    top8 = np.argsort(-logits.numpy(), axis=1)[:, :8]
    for s in range(6):
        ids = model.sample(logits, top_k=8, temperature=2.0, seed=5, step=s).numpy()
        assert all(ids[b] in top8[b] for b in range(2))
