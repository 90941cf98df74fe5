"""A Llama-architecture decoder that runs on Oxide kernels only
(models/llama/llama.oxk): prefill of a batch of prompts, then decode steps
against a KV cache that lives on the device across steps.

    from models.llama.model import Llama
    model = Llama(config, state_dict, device="cuda", dtype="bf16")
    logits = model.prefill(ids)            # ids: [batch, prompt] ints
    for _ in range(n):
        next_ids = model.greedy(logits)    # on the device
        logits = model.decode(next_ids)

`config` is a transformers `LlamaConfig`, or anything with its attribute
names (a dict too); `state_dict` maps transformers' parameter names to arrays
(NumPy, torch, or anything DLPack takes). The host only launches kernels: the
KV cache, positions and sequence lengths are device tensors.
"""
import json
import math
import os
import struct

import numpy as np

import oxide

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama.oxk")


class _Config:
    """The LlamaConfig fields the model reads, from an object or a dict."""

    def __init__(self, c):
        get = (lambda k, d=None: c.get(k, d)) if isinstance(c, dict) else (lambda k, d=None: getattr(c, k, d))
        self.hidden = get("hidden_size")
        self.layers = get("num_hidden_layers")
        self.heads = get("num_attention_heads")
        self.kv_heads = get("num_key_value_heads") or self.heads
        self.inter = get("intermediate_size")
        self.vocab = get("vocab_size")
        self.eps = float(get("rms_norm_eps", 1e-6))
        self.theta = float(get("rope_theta", 10000.0) or 10000.0)
        self.scaling = get("rope_scaling")
        rp = get("rope_parameters")  # transformers 5 keeps theta and scaling here
        if isinstance(rp, dict):
            self.theta = float(rp.get("rope_theta", self.theta))
            self.scaling = rp if rp.get("rope_type", "default") != "default" else self.scaling
        self.max_pos = get("max_position_embeddings", 2048)
        self.head_dim = get("head_dim") or self.hidden // self.heads
        self.tied = bool(get("tie_word_embeddings", False))


def rope_tables(cfg, positions):
    """cos and sin, [positions, head_dim / 2] float32, of the model's rotary
    frequencies (Llama 3's scaling when rope_scaling says so), in float64 first."""
    D = cfg.head_dim
    inv = 1.0 / cfg.theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    s = cfg.scaling or {}
    kind = s.get("rope_type", s.get("type")) if isinstance(s, dict) else None
    if kind == "llama3":
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        original = s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = (original / wavelen - low) / (high - low)
        scaled = np.where(wavelen > original / low, inv / factor, inv)
        mid = (wavelen <= original / low) & (wavelen >= original / high)
        inv = np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    elif kind not in (None, "default"):
        raise ValueError(f"rope_scaling of type {kind!r} is not supported (default and llama3 are)")
    ang = np.outer(np.arange(positions, dtype=np.float64), inv)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def load_safetensors(path):
    """The tensors of a .safetensors file as NumPy arrays (float32 for F32,
    F16 and BF16; BF16 widened by its bits), read from the format's published
    layout: an 8-byte little-endian header length, a JSON header (each tensor's
    dtype, shape and byte offsets), then the data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = blob[base + lo:base + hi]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name!r} is {dt}; F32, F16 and BF16 are read")
        out[name] = a.reshape(info["shape"])
    return out


class _Step:
    """A recorded decode step (Llama.decode_chain): run() it once a token."""

    def __init__(self, chain):
        self.chain = chain
        self.logits = self.ids = None
        self.stream = None  # the stream a captured step replays on

    def capture(self, stream=None):
        """Makes the step one CUDA graph, captured on `stream` (an oxide
        Stream; None: one of its own), where every run replays it."""
        self.stream = stream if stream is not None else self.chain.device.stream()
        self.chain.capture(self.stream)
        return self

    def run(self):
        self.chain.run(self.stream)

    def synchronize(self):
        (self.stream or self.chain.device).synchronize()


def _pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


class Llama:
    """The model, its weights and its KV cache on one Oxide device."""

    def __init__(self, config, state_dict, device=None, dtype="bf16", max_batch=1, max_len=None):
        self.cfg = cfg = _Config(config)
        self.dev = oxide.device(device) if isinstance(device, str) or device is None else device
        self.dtype = dtype
        self.k = oxide.compile_file(SOURCE, device=self.dev)
        self.max_batch, self.max_len = max_batch, max_len or cfg.max_pos
        self._set_generics()
        w = lambda name: self._weight(state_dict, name)
        self.embed = w("model.embed_tokens.weight")
        self.layers = []
        for i in range(cfg.layers):
            p = f"model.layers.{i}."
            self.layers.append({
                "in_norm": w(p + "input_layernorm.weight"),
                # q, k and v one weight [(heads + 2 kv_heads) head_dim, hidden]: one projection
                "qkv": self._rows([w(p + "self_attn.q_proj.weight"), w(p + "self_attn.k_proj.weight"),
                                   w(p + "self_attn.v_proj.weight")]),
                "o": w(p + "self_attn.o_proj.weight"),
                "post_norm": w(p + "post_attention_layernorm.weight"),
                "gate_up": self._interleave(w(p + "mlp.gate_proj.weight"), w(p + "mlp.up_proj.weight")),
                "down": w(p + "mlp.down_proj.weight"),
            })
        self.norm = w("model.norm.weight")
        self.lm_head = self.embed if cfg.tied or "lm_head.weight" not in state_dict else w("lm_head.weight")
        cos, sin = rope_tables(cfg, self.max_len)
        self.cos = oxide.tensor(cos, device=self.dev)
        self.sin = oxide.tensor(sin, device=self.dev)
        # the KV cache: [batch, kv_heads, max_len, head_dim] a layer, K and V
        shape = (max_batch, cfg.kv_heads, self.max_len, cfg.head_dim)
        self.cache = [(oxide.zeros(shape, dtype=dtype, device=self.dev), oxide.zeros(shape, dtype=dtype, device=self.dev))
                      for _ in range(cfg.layers)]
        self._lens_host = None  # each sequence's length so far
        self._chain = None      # a chain being recorded (decode_chain)
        self.pos = self.lens = None  # [batch] i32 on the device: the next position, and the length with it

    def _weight(self, sd, name):
        if name not in sd:
            raise KeyError(f"the state dict has no {name!r}")
        x = sd[name]
        if hasattr(x, "detach"):
            x = x.detach()
            if x.device.type == self.dev.type:  # a torch tensor where the model runs: copied there
                t = oxide.from_dlpack(x.contiguous(), device=self.dev)
                y = self._empty(*t.shape)
                if t.dtype == self.dtype:
                    y.copy_from(t)
                else:  # converted on the device (8B weights never cross to the host)
                    n = int(np.prod(t.shape))
                    self.k.convert(y.reshape(-1), t.reshape(-1), grid=-(-n // 256), block=256)
                return y
            x = x.float().cpu().numpy()  # else to float32 on the host, rounded to dtype below
        return oxide.tensor(np.asarray(x, dtype=np.float32), dtype=self.dtype, device=self.dev)

    def _rows(self, ws):
        """The weights ws [n_i, K] stacked along their rows: [sum n_i, K]."""
        out = self._empty(sum(x.shape[0] for x in ws), ws[0].shape[1])
        r = 0
        for x in ws:
            out[r:r + x.shape[0]].copy_from(x)
            r += x.shape[0]
        return out

    def _interleave(self, wg, wu):
        """gate_up's one weight [2 Np, K] from wg and wu [N, K]: their rows by
        blocks of BN in turn (gate's j-th, up's j-th, ...), N padded to Np with
        zero rows (llama.oxk's gate_up)."""
        N, K = wg.shape
        BN = self.BN
        nb = -(-N // BN)
        out = oxide.zeros((2 * nb * BN, K), dtype=self.dtype, device=self.dev)
        blocks = out.reshape(nb, 2, BN, K)
        full = N // BN
        for half, x in enumerate((wg, wu)):
            if full:
                blocks[:full, half].copy_from(x[:full * BN].reshape(full, BN, K))
            if N % BN:
                blocks[full, half, :N % BN].copy_from(x[full * BN:])
        return out

    def _set_generics(self):
        k, cfg = self.k, self.cfg
        self.gpu = gpu = self.dev.type == "cuda"
        # the projections' tiles. On sm_90 a 64-row tile runs on wgmma with its
        # operands copied by TMA, which streams the weight at the memory's speed;
        # a 16-row one would take mma.sync, whose transposed weight tile is not
        # copied asynchronously. At decode (M of 1 to 64) the rows past M cost
        # only tensor-core time, which the weight's bytes hide.
        self.BM, self.BN, self.BK = (64, 128, 64) if gpu else (16, 32, 32)
        for kern in (k.linear, k.linear_part, k.gate_up):
            kern.set_generic("BK", self.BK)
        # blocks the split-K projections aim for: two an SM (on the CPU, a split
        # of 2 wherever M is decode-sized, so that the tests run both paths). One
        # an SM is faster for a projection alone (bench/decode_matmul.py), but the
        # decode step was slower with it (H100, batch 1: 1468-1477 us against
        # 1398-1404 with launch overlap): the MLP's input then runs unsplit as
        # gate_up, whose persistent loop leaves its prefetches after the wait
        self.blocks = 2 * self.dev.multiprocessors
        k.prefill_attention.set_generic("BN", 64 if gpu else 16)
        k.decode_attention.set_generic("BN", 64 if gpu else 16)
        # decode attention's query rows: the group's heads, or on the GPU the 64
        # rows of a wgmma (llama.oxk says why); and the cache positions a block takes
        self.G = 64 if gpu else _pow2(cfg.heads // cfg.kv_heads)
        # the fewest cache positions a decode attention block takes (a multiple of its BN;
        # _split chooses more where there are enough to fill the GPU)
        self.split = 128 if gpu else 64
        k.decode_combine.set_generic("NS", _pow2(-(-self.max_len // self.split)))
        self.BV = 8192 if gpu else 1024
        k.argmax_part.set_generic("BV", self.BV)
        k.argmax_final.set_generic("NC", _pow2(-(-cfg.vocab // self.BV)))

    # ------------------------------------------------------------ pieces

    def _empty(self, *shape, dtype=None):
        return oxide.empty(shape, dtype=dtype or self.dtype, device=self.dev)

    def _run(self, name, *args, **kw):
        """Launches kernel `name`, or records it into the chain being built (decode_chain)."""
        if self._chain is not None:
            self._chain.launch(self.k[name], *args, **kw)
        else:
            self.k[name](*args, **kw)

    def _splits(self, M, N, K, most=64):
        """How many runs of K tiles linear_part cuts x [M, K] w^T [K, N] into
        (a power of two, which the kernels that sum them take as one tile), and
        the K tiles a run: enough blocks for two an SM, each run at least two K
        tiles, the f32 partials (S M N 4 bytes, written and read) at most a
        quarter of the weight's (N K 2), and at most `most`."""
        ktiles = -(-K // self.BK)
        tiles = -(-M // self.BM) * -(-N // self.BN)
        if self.gpu:
            S = max(1, min(self.blocks // tiles, ktiles // 2, K // (16 * M)))
        else:
            S = 2 if M <= 16 and ktiles >= 2 else 1
        S = 1 << (min(S, most).bit_length() - 1)
        return S, -(-ktiles // S)

    def _part(self, x, w, splits=None, norm=False):
        """x [M, K] times w^T (w [N, K], as transformers stores it; the kernel
        reads it as it lies), split along K: the f32 partials [S, M, N] that the
        consumer sums (`norm`: split_add_rmsnorm, whose [S, 1, N] tile holds at
        most 65536 elements)."""
        M, K = x.shape
        N = w.shape[0]
        S, chunk = splits or self._splits(M, N, K, 65536 // _pow2(N) if norm else 64)
        ws = self._empty(S, M, N, dtype="f32")
        self._run("linear_part", ws.partition((1, self.BM, self.BN)), x, w, chunk)
        return ws

    def _linear(self, x, w):
        """x [M, K] times w^T in one pass, in the model's dtype (the logits)."""
        y = self._empty(x.shape[0], w.shape[0])
        self._run("linear", y.partition((self.BM, self.BN)), x, w)
        return y

    def _mlp_in(self, x, w):
        """silu(x wg^T) * (x wu^T) from gate_up's interleaved weight: one fused
        kernel, or split along K and finished by split_swiglu."""
        M, K = x.shape
        y = self._empty(M, self.cfg.inter)  # w's padding rows: columns past y, not stored
        S, chunk = self._splits(M, w.shape[0], K)
        if S == 1:
            self._run("gate_up", y.partition((self.BM, self.BN)), x, w)
        else:
            ws = self._part(x, w, (S, chunk))
            self._run("split_swiglu", y.partition((1, self.BN)), ws)
        return y

    def _norm(self, w, x=None, ws=None, res=None):
        """rmsnorm(x) * w; or with the partials ws of a block's last projection
        and the residual res: (rmsnorm(sum ws + res) * w, sum ws + res)."""
        T, H = res.shape if ws is not None else x.shape
        BD = _pow2(H)
        BR = 1 if T <= 65535 else 16  # a grid axis holds 65535 tiles (a prompt batch of 64k tokens)
        y = self._empty(T, H)
        if ws is None:
            self._run("rmsnorm", y.partition((BR, BD)), x, w, self.cfg.eps)
            return y, x
        h = self._empty(T, H)
        self._run("split_add_rmsnorm", y.partition((BR, BD)), h.partition((BR, BD)), ws, res, w, self.cfg.eps)
        return y, h

    def _block(self, i, x, h, positions, seq, attend):
        """Layer i on the normalized input x (with the residual h); returns the
        partials of its MLP's output (which the next norm sums) and the residual."""
        cfg, L = self.cfg, self.layers[i]
        T, Dh = x.shape[0], cfg.head_dim
        # q, k and v in one projection; qkv_finish rotates q and k, and writes k
        # and v into the cache (attention reads them there)
        ws = self._part(x, L["qkv"])
        q = self._empty(T, cfg.heads, Dh)
        kc, vc = self.cache[i]
        n = T * (cfg.heads + 2 * cfg.kv_heads) * Dh
        self._run("qkv_finish", q.reshape(-1), kc.reshape(-1), vc.reshape(-1), ws, positions, seq, self.cos, self.sin,
                  cfg.kv_heads, self.max_len, Dh, grid=-(-n // 256), block=256)
        o = attend(i, q)  # [T, heads * Dh]
        x2, h = self._norm(L["post_norm"], ws=self._part(o, L["o"], norm=True), res=h)
        return self._part(self._mlp_in(x2, L["gate_up"]), L["down"], norm=True), h

    def _forward(self, ids, positions, seq, attend, last):
        cfg = self.cfg
        T = ids.shape[0]
        x = self._empty(T, cfg.hidden)
        # BT tokens a tile: the grid's rows stay within CUDA's 65535 for any batch of prompts
        self._run("embed", x.partition((16, min(_pow2(cfg.hidden), 256))), self.embed, ids)
        out, h = None, x
        for i in range(cfg.layers):
            xn, h = self._norm(self.layers[i]["in_norm"], x=h) if out is None else \
                self._norm(self.layers[i]["in_norm"], ws=out, res=h)
            out, h = self._block(i, xn, h, positions, seq, attend)
        xn, _ = self._norm(self.norm, ws=out, res=h)
        return self._linear(last(xn), self.lm_head)  # the logits of the rows that sample

    # ------------------------------------------------------------ the API

    def prefill(self, ids):
        """Runs prompts ids [batch, S] (equal lengths) from position 0; returns
        the logits of each prompt's last token, [batch, vocab] (f32 on the host
        is logits.numpy())."""
        ids = np.asarray(ids, dtype=np.int32)
        B, S = ids.shape
        if B > self.max_batch or S > self.max_len:
            raise ValueError(f"a batch of {B} prompts of {S} tokens; the model holds {self.max_batch} of {self.max_len}")
        cfg = self.cfg
        tok = oxide.tensor(ids.reshape(-1), device=self.dev)
        pos = oxide.tensor(np.tile(np.arange(S, dtype=np.int32), B), device=self.dev)
        seq = oxide.tensor(np.repeat(np.arange(B, dtype=np.int32), S), device=self.dev)

        def attend(i, q):
            Dh = cfg.head_dim
            o = self._empty(B * S, cfg.heads * Dh)
            view = lambda t: t.reshape(B, S, cfg.heads, Dh).permute(0, 2, 1, 3)  # [B, heads, S, Dh]
            kc, vc = self.cache[i]
            BM = 64 if self.gpu else 16
            self._run("prefill_attention", view(o).partition((1, 1, BM, Dh)), view(q), kc[:B, :, :S], vc[:B, :, :S],
                      1 / math.sqrt(Dh))
            return o

        # each prompt's last row, a strided view of the final norm's output
        logits = self._forward(tok, pos, seq, attend, lambda xn: xn.reshape(B, S, cfg.hidden)[:, S - 1])
        self._lens_host = np.full(B, S, dtype=np.int64)
        self.pos = oxide.tensor(np.full(B, S, dtype=np.int32), device=self.dev)       # the next token's
        self.lens = oxide.tensor(np.full(B, S + 1, dtype=np.int32), device=self.dev)  # with it
        self.seq = oxide.tensor(np.arange(B, dtype=np.int32), device=self.dev)
        return logits

    def _split(self, B, context):
        """The cache positions a decode attention block takes, for B sequences
        of up to `context` positions: about four blocks an SM (flash-decoding's
        split), a power of two from self.split."""
        want = B * self.cfg.kv_heads * context / (4 * self.dev.multiprocessors * self.split)
        return self.split * min(_pow2(math.ceil(want)), 64)

    def decode(self, ids, context=None):
        """One token per sequence (ids: [batch] ints, or a device tensor of i32),
        at each sequence's next position (device tensors: the host uploads
        nothing); returns [batch, vocab] logits. `context`: the cache positions
        attention covers (default: the longest sequence's; a recorded step
        covers the whole cache)."""
        cfg = self.cfg
        tok = ids if isinstance(ids, oxide.Tensor) else oxide.tensor(np.asarray(ids, dtype=np.int32), device=self.dev)
        B = tok.shape[0]
        if self._chain is None:
            if self._lens_host is None:
                raise RuntimeError("decode follows prefill")
            if int(self._lens_host.max()) >= self.max_len:
                raise ValueError(f"a sequence reached the cache's {self.max_len} positions")
        context = context or int(self._lens_host.max() + 1)
        split = self._split(B, context)
        splits = -(-context // split)
        group = cfg.heads // cfg.kv_heads
        pos, lens, seq = self.pos, self.lens, self.seq

        def attend(i, q):
            kc, vc = self.cache[i]
            Dh = cfg.head_dim
            po = self._empty(B * cfg.kv_heads, splits, group, Dh, dtype="f32")
            lse = self._empty(B * cfg.kv_heads, splits, group, 1, dtype="f32")
            G = max(self.G, _pow2(group))
            self._run("decode_attention", po.partition((1, 1, G, Dh)), lse.partition((1, 1, G, 1)), q,
                      kc[:B], vc[:B], lens, split, 1 / math.sqrt(Dh))
            o = self._empty(B, cfg.heads * Dh)
            self._run("decode_combine", o.reshape(B, cfg.heads, Dh).partition((1, 1, Dh)), po, lse)
            return o

        logits = self._forward(tok, pos, seq, attend, lambda xn: xn)
        self._run("advance", pos, lens, grid=1, block=_pow2(max(B, 32)))
        if self._chain is None:
            self._lens_host += 1
        return logits

    def decode_chain(self, logits):
        """The decode step recorded once as an oxide.Chain, from prefill's
        `logits`: each run samples greedily from the last logits into .ids,
        then decodes those tokens into .logits (device tensors the chain
        reuses): one token for every sequence. On CUDA, .capture() makes it
        one CUDA graph a step. The host does nothing per token but run it (and
        read what it wants)."""
        if self.pos is None:
            raise RuntimeError("decode_chain follows prefill")
        B = self.pos.shape[0]
        chain = oxide.Chain(device=self.dev)
        step = _Step(chain)
        self._chain = chain
        try:
            step.logits = self._empty(B, self.cfg.vocab)
            step.logits.copy_from(logits)
            step.ids = self._empty(B, dtype="i32")
            self.greedy(step.logits, out=step.ids)
            out = self.decode(step.ids, context=self.max_len)
            chain.copy(step.logits, out)
        finally:
            self._chain = None
        return step

    def sample(self, logits, top_k=50, top_p=1.0, temperature=1.0, seed=0, step=0):
        """One token a row of logits [batch, vocab], drawn on the device from
        the top_k largest (a power of two; rounded up) and, of those, the
        smallest prefix holding top_p of the probability, at `temperature`:
        [batch] i32. The draw is a counter-based random number of (seed, row,
        step), so the same arguments give the same tokens."""
        B, V = logits.shape
        K = _pow2(max(1, min(top_k, self.BV)))
        chunks = -(-V // self.BV)
        pv = self._empty(B, chunks * K, dtype="f32")
        pi = self._empty(B, chunks * K, dtype="i32")
        self.k.topk_part.set_generic("BV", self.BV)
        self.k.sample_topk.set_generic("K", K)
        self.k.sample_topk.set_generic("NK", _pow2(chunks * K))
        self._run("topk_part", pv.partition((1, K)), pi.partition((1, K)), logits)
        ids = self._empty(B, dtype="i32")
        self._run("sample_topk", ids.partition((1,)), pv, pi, float(temperature), float(top_p), int(seed), int(step))
        return ids

    def greedy(self, logits, out=None):
        """The largest logit's index of each row, on the device: [batch] i32
        (into `out` if given)."""
        B, V = logits.shape
        chunks = -(-V // self.BV)
        pv = self._empty(B, chunks, dtype="f32")
        pi = self._empty(B, chunks, dtype="i32")
        self._run("argmax_part", pv.partition((1, 1)), pi.partition((1, 1)), logits)
        ids = out if out is not None else self._empty(B, dtype="i32")
        self._run("argmax_final", ids.partition((1,)), pv, pi)
        return ids
