//! llama_oxide: greedy decoding with a Llama-architecture model on Oxide
//! kernels, the same kernels (models/llama/llama.oxk) and the same steps as
//! the Python model (models/llama/model.py).
//!
//!   llama_oxide MODEL_DIR --prompt 5,17,250 [--steps 32] [--device cpu|cuda] [--dtype f32|bf16] [--graph]
//!
//! --graph records the decode step once as a chain (on CUDA, one CUDA graph)
//! and runs it once a token, as model.py's decode_chain does.
//! MODEL_DIR holds a transformers-style config.json and model.safetensors.
//! Prints the generated token ids on one line, then tokens/s on stderr.

mod json;

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use oxide::{Arg, Chain, Device, Dtype, Kernel, LaunchConfig, Module, Tensor};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn pow2(n: i64) -> i64 {
    let mut p = 1;
    while p < n {
        p *= 2;
    }
    p
}

fn cdiv(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

struct Config {
    hidden: i64,
    layers: usize,
    heads: i64,
    kv_heads: i64,
    vocab: i64,
    eps: f32,
    theta: f64,
    head_dim: i64,
    tied: bool,
    llama3: Option<(f64, f64, f64, f64)>, // factor, low, high, original max positions
}

impl Config {
    fn read(path: &str) -> Res<Config> {
        let j = json::parse(&std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?)?;
        let num = |k: &str| j.get(k).and_then(json::Json::num).ok_or_else(|| format!("{path}: no number '{k}'"));
        let hidden = num("hidden_size")? as i64;
        let heads = num("num_attention_heads")? as i64;
        // transformers 5 writes theta and the scaling into rope_parameters
        let rp = j.get("rope_parameters");
        let llama3 = match j.get("rope_scaling").or(rp) {
            Some(s) if s.get("rope_type").or(s.get("type")).and_then(json::Json::str) == Some("llama3") => {
                let f = |k: &str| s.get(k).and_then(json::Json::num).ok_or_else(|| format!("{path}: rope_scaling has no '{k}'"));
                Some((f("factor")?, f("low_freq_factor")?, f("high_freq_factor")?, f("original_max_position_embeddings")?))
            }
            _ => None,
        };
        Ok(Config {
            hidden,
            layers: num("num_hidden_layers")? as usize,
            heads,
            kv_heads: j.get("num_key_value_heads").and_then(json::Json::num).map_or(heads, |x| x as i64),
            vocab: num("vocab_size")? as i64,
            eps: j.get("rms_norm_eps").and_then(json::Json::num).unwrap_or(1e-6) as f32,
            theta: j.get("rope_theta").or(rp.and_then(|r| r.get("rope_theta"))).and_then(json::Json::num).unwrap_or(10000.0),
            head_dim: j.get("head_dim").and_then(json::Json::num).map_or(hidden / heads, |x| x as i64),
            tied: j.get("tie_word_embeddings") == Some(&json::Json::Bool(true)),
            llama3,
        })
    }

    /// cos and sin of the rotary angles, [positions, head_dim / 2] (as rope_tables in model.py).
    fn rope_tables(&self, positions: i64) -> (Vec<f32>, Vec<f32>) {
        let d = self.head_dim as usize;
        let mut inv: Vec<f64> = (0..d / 2).map(|i| 1.0 / self.theta.powf((2 * i) as f64 / d as f64)).collect();
        if let Some((factor, low, high, original)) = self.llama3 {
            for f in inv.iter_mut() {
                let wavelen = 2.0 * std::f64::consts::PI / *f;
                let smooth = (original / wavelen - low) / (high - low);
                *f = if wavelen > original / low {
                    *f / factor
                } else if wavelen < original / high {
                    *f
                } else {
                    (1.0 - smooth) * *f / factor + smooth * *f
                };
            }
        }
        let (mut c, mut s) = (Vec::new(), Vec::new());
        for p in 0..positions {
            for f in &inv {
                c.push((p as f64 * f).cos() as f32);
                s.push((p as f64 * f).sin() as f32);
            }
        }
        (c, s)
    }
}

/// The tensors of a safetensors file, as f32 values and shapes.
fn read_safetensors(path: &str) -> Res<HashMap<String, (Vec<f32>, Vec<i64>)>> {
    let blob = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if blob.len() < 8 {
        return Err(format!("{path}: not a safetensors file"));
    }
    let n = u64::from_le_bytes(blob[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(blob.get(8..8 + n).ok_or(format!("{path}: truncated header"))?).map_err(err)?;
    let json::Json::Obj(h) = json::parse(header)? else { return Err(format!("{path}: the header is not an object")) };
    let mut out = HashMap::new();
    for (name, info) in h {
        if name == "__metadata__" {
            continue;
        }
        let dt = info.get("dtype").and_then(json::Json::str).unwrap_or("?");
        let shape: Vec<i64> = match info.get("shape") {
            Some(json::Json::Arr(a)) => a.iter().filter_map(json::Json::num).map(|x| x as i64).collect(),
            _ => return Err(format!("{path}: {name} has no shape")),
        };
        let off: Vec<usize> = match info.get("data_offsets") {
            Some(json::Json::Arr(a)) => a.iter().filter_map(json::Json::num).map(|x| x as usize).collect(),
            _ => return Err(format!("{path}: {name} has no data_offsets")),
        };
        let raw = blob.get(8 + n + off[0]..8 + n + off[1]).ok_or(format!("{path}: {name} past the end"))?;
        let vals: Vec<f32> = match dt {
            "F32" => raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect(),
            "BF16" => raw.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect(),
            _ => return Err(format!("{path}: {name} is {dt}; F32 and BF16 are read")),
        };
        out.insert(name, (vals, shape));
    }
    Ok(out)
}

struct Layer {
    in_norm: Tensor,
    qkv: Tensor, // q, k and v stacked: [(heads + 2 kv_heads) head_dim, hidden]
    o: Tensor,
    post_norm: Tensor,
    gate_up: Tensor, // gate's and up's rows by blocks of BN in turn (llama.oxk's gate_up)
    down: Tensor,
}

struct Model<'m> {
    cfg: Config,
    dev: Device,
    dtype: Dtype, // of weights and activations (the kernels compute in f32 inside)
    module: &'m Module,
    // while a decode step is being recorded (decode_chain): where launches go
    chain: RefCell<Option<Chain<'m>>>,
    gpu: bool,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    cos: Tensor,
    sin: Tensor,
    cache: Vec<(Tensor, Tensor)>,
    max_len: i64,
    split: i64,
    bv: i64,
    tiles: (i64, i64, i64), // the projections' BM, BN, BK
    blocks: i64,            // blocks a split-K projection aims for
    lens: Vec<i64>, // each sequence's length so far, on the host
    // on the device, for a recorded step to replay alone: each sequence's next
    // position, its length with it, and its index
    pos: Option<(Tensor, Tensor, Tensor)>,
}

/// A decode step recorded once (Model::decode_chain): each run samples
/// greedily from the last logits into `ids`, then decodes those tokens into
/// the logits (a tensor the chain holds).
struct Step<'m> {
    chain: Chain<'m>,
    ids: Tensor,
}

/// gate_up's weight from gate's and up's rows ([n, k] each): blocks of `bn`
/// rows in turn, n padded to a multiple of bn with zero rows.
fn interleave(g: &[f32], u: &[f32], n: usize, k: usize, bn: usize) -> Vec<f32> {
    let nb = n.div_ceil(bn);
    let mut out = vec![0.0f32; 2 * nb * bn * k];
    for (half, w) in [g, u].into_iter().enumerate() {
        for r in 0..n {
            let dst = ((2 * (r / bn) + half) * bn + r % bn) * k;
            out[dst..dst + k].copy_from_slice(&w[r * k..(r + 1) * k]);
        }
    }
    out
}

/// The model's kernels (models/llama/llama.oxk), compiled for `dev`.
fn kernels(dev: Device) -> Res<Module> {
    Module::compile_file(dev, concat!(env!("CARGO_MANIFEST_DIR"), "/../llama.oxk"), &Default::default()).map_err(err)
}

impl<'m> Model<'m> {
    fn load(dir: &str, module: &'m Module, dtype: Dtype, max_batch: i64, max_len: i64) -> Res<Model<'m>> {
        let dev = module.device();
        let cfg = Config::read(&format!("{dir}/config.json"))?;
        let mut w = read_safetensors(&format!("{dir}/model.safetensors"))?;
        let gpu = dev.device_type() == oxide::DeviceType::Cuda;
        let tiles = if gpu { (64, 128, 64) } else { (16, 32, 32) };
        let convert = module.kernel("convert").map_err(err)?;
        let upload = |v: &[f32], shape: &[i64]| -> Res<Tensor> {
            let t = Tensor::with_shape(dev, v, shape).map_err(err)?;
            if dtype == Dtype::F32 {
                return Ok(t);
            }
            // to the model's dtype on the device (the convert kernel, generic over both types)
            let out = Tensor::empty(dev, dtype, shape).map_err(err)?;
            convert.launch(&LaunchConfig::for_elements(v.len(), 256), &[Arg::tensor(&out), Arg::tensor(&t)]).map_err(err)?;
            Ok(out)
        };
        let mut host = |name: &str| w.remove(name).ok_or_else(|| format!("the checkpoint has no '{name}'"));
        let (v, shape) = host("model.embed_tokens.weight")?;
        let embed = upload(&v, &shape)?;
        let mut layers = Vec::new();
        for i in 0..cfg.layers {
            let p = format!("model.layers.{i}.");
            let mut take = |name: &str| -> Res<Tensor> {
                let (v, shape) = host(&(p.clone() + name))?;
                upload(&v, &shape)
            };
            let (in_norm, o, post_norm, down) = (take("input_layernorm.weight")?, take("self_attn.o_proj.weight")?,
                                                 take("post_attention_layernorm.weight")?, take("mlp.down_proj.weight")?);
            // q, k and v stacked into one weight: one projection
            let (mut qkv, mut rows, k) = (Vec::new(), 0, cfg.hidden);
            for name in ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"] {
                let (v, shape) = host(&(p.clone() + name))?;
                rows += shape[0];
                qkv.extend_from_slice(&v);
            }
            let qkv = upload(&qkv, &[rows, k])?;
            let (g, gs) = host(&(p.clone() + "mlp.gate_proj.weight"))?;
            let (u, _) = host(&(p.clone() + "mlp.up_proj.weight"))?;
            let bn = tiles.1 as usize;
            let gu = interleave(&g, &u, gs[0] as usize, gs[1] as usize, bn);
            let gate_up = upload(&gu, &[(gu.len() / gs[1] as usize) as i64, gs[1]])?;
            layers.push(Layer { in_norm, qkv, o, post_norm, gate_up, down });
        }
        let (v, shape) = host("model.norm.weight")?;
        let norm = upload(&v, &shape)?;
        let lm_head = match host("lm_head.weight") {
            Ok((v, shape)) if !cfg.tied => upload(&v, &shape)?,
            _ => embed.clone(),
        };
        let (c, s) = cfg.rope_tables(max_len);
        let half = cfg.head_dim / 2;
        let cos = Tensor::with_shape(dev, &c, &[max_len, half]).map_err(err)?;
        let sin = Tensor::with_shape(dev, &s, &[max_len, half]).map_err(err)?;
        let shape = [max_batch, cfg.kv_heads, max_len, cfg.head_dim];
        let mut cache = Vec::new();
        for _ in 0..cfg.layers {
            cache.push((Tensor::zeros(dev, dtype, &shape).map_err(err)?, Tensor::zeros(dev, dtype, &shape).map_err(err)?));
        }
        let m = Model {
            split: if gpu { 128 } else { 64 },
            bv: if gpu { 8192 } else { 1024 },
            tiles,
            blocks: 2 * dev.multiprocessors() as i64,
            cfg, dev, dtype, module, chain: RefCell::new(None), gpu, embed, layers, norm, lm_head, cos, sin, cache, max_len,
            lens: Vec::new(),
            pos: None,
        };
        m.set_generics()?;
        Ok(m)
    }

    fn kern(&self, name: &str) -> Res<Kernel<'m>> {
        self.module.kernel(name).map_err(err)
    }

    fn set_generics(&self) -> Res<()> {
        let bn = if self.gpu { 64 } else { 16 };
        for k in ["linear", "linear_part", "gate_up"] {
            self.kern(k)?.set_generic("BK", self.tiles.2).map_err(err)?;
        }
        self.kern("prefill_attention")?.set_generic("BN", bn).map_err(err)?;
        self.kern("decode_attention")?.set_generic("BN", bn).map_err(err)?;
        self.kern("decode_combine")?.set_generic("NS", pow2(cdiv(self.max_len, self.split))).map_err(err)?;
        self.kern("argmax_part")?.set_generic("BV", self.bv).map_err(err)?;
        self.kern("argmax_final")?.set_generic("NC", pow2(cdiv(self.cfg.vocab, self.bv))).map_err(err)?;
        Ok(())
    }

    /// Launches kernel `name`, or records it into the chain being recorded.
    fn launch(&self, name: &str, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Res<()> {
        let k = self.kern(name)?;
        match self.chain.borrow_mut().as_mut() {
            Some(c) => c.launch(&k, cfg, args),
            None => k.launch(cfg, args),
        }
        .map_err(|e| format!("{name}: {e}"))
    }

    fn tile(&self, name: &str, args: &[Arg<'_>]) -> Res<()> {
        self.launch(name, &LaunchConfig::default(), args)
    }

    fn empty(&self, shape: &[i64], dtype: Dtype) -> Res<Tensor> {
        Tensor::empty(self.dev, dtype, shape).map_err(err)
    }

    /// How many runs of K tiles linear_part cuts x [m, k] w^T into (a power
    /// of two), and the K tiles a run (as _splits in model.py).
    fn splits(&self, m: i64, n: i64, k: i64, most: i64) -> (i64, i64) {
        let (bm, bn, bk) = self.tiles;
        let ktiles = cdiv(k, bk);
        let tiles = cdiv(m, bm) * cdiv(n, bn);
        let s = if self.gpu {
            (self.blocks / tiles).min(ktiles / 2).min(k / (16 * m)).max(1)
        } else if m <= 16 && ktiles >= 2 {
            2
        } else {
            1
        };
        let s = 1i64 << (63 - s.min(most).leading_zeros()); // a power of two: the sums take them as one tile
        (s, cdiv(ktiles, s))
    }

    /// x [m, k] times w^T (w [n, k], as transformers stores it) split along K:
    /// the f32 partials [S, m, n] that the consumer sums.
    /// `norm`: the partials go to split_add_rmsnorm, whose [S, 1, n] tile holds at most 65536 elements.
    fn part(&self, x: &Tensor, w: &Tensor, splits: Option<(i64, i64)>, norm: bool) -> Res<Tensor> {
        let (m, k, n) = (x.shape()[0], x.shape()[1], w.shape()[0]);
        let (s, chunk) = splits.unwrap_or_else(|| self.splits(m, n, k, if norm { 65536 / pow2(n) } else { 64 }));
        let ws = self.empty(&[s, m, n], Dtype::F32)?;
        let wp = ws.partition(&[1, self.tiles.0, self.tiles.1]).map_err(err)?;
        self.tile("linear_part", &[Arg::tensor(&wp), Arg::tensor(x), Arg::tensor(w), Arg::i32(chunk as i32)])?;
        Ok(ws)
    }

    /// x [m, k] times w^T in one pass, in the model's dtype (the logits).
    fn linear(&self, x: &Tensor, w: &Tensor) -> Res<Tensor> {
        let y = self.empty(&[x.shape()[0], w.shape()[0]], self.dtype)?;
        let yp = y.partition(&[self.tiles.0, self.tiles.1]).map_err(err)?;
        self.tile("linear", &[Arg::tensor(&yp), Arg::tensor(x), Arg::tensor(w)])?;
        Ok(y)
    }

    /// silu(x wg^T) * (x wu^T) from gate_up's interleaved weight: fused, or
    /// split along K and finished by split_swiglu.
    fn mlp_in(&self, x: &Tensor, w: &Tensor, inter: i64) -> Res<Tensor> {
        let (m, k) = (x.shape()[0], x.shape()[1]);
        let y = self.empty(&[m, inter], self.dtype)?;
        let (s, chunk) = self.splits(m, w.shape()[0], k, 64);
        if s == 1 {
            let yp = y.partition(&[self.tiles.0, self.tiles.1]).map_err(err)?;
            self.tile("gate_up", &[Arg::tensor(&yp), Arg::tensor(x), Arg::tensor(w)])?;
        } else {
            let ws = self.part(x, w, Some((s, chunk)), false)?;
            self.tile("split_swiglu", &[Arg::tensor(&y.partition(&[1, self.tiles.1]).map_err(err)?), Arg::tensor(&ws)])?;
        }
        Ok(y)
    }

    /// rmsnorm(x) * w (and x); or with a block's last partials ws and the
    /// residual res: (rmsnorm(sum ws + res) * w, sum ws + res).
    fn norm(&self, w: &Tensor, x: &Tensor, ws: Option<&Tensor>) -> Res<(Tensor, Tensor)> {
        let s = x.shape();
        let bd = pow2(s[1]);
        let br = if s[0] <= 65535 { 1 } else { 16 }; // a grid axis holds 65535 tiles
        let y = self.empty(&s, self.dtype)?;
        let yp = y.partition(&[br, bd]).map_err(err)?;
        match ws {
            None => {
                self.tile("rmsnorm", &[Arg::tensor(&yp), Arg::tensor(x), Arg::tensor(w), Arg::f32(self.cfg.eps)])?;
                Ok((y, x.clone()))
            }
            Some(p) => {
                let h = self.empty(&s, self.dtype)?;
                let hp = h.partition(&[br, bd]).map_err(err)?;
                self.tile("split_add_rmsnorm", &[Arg::tensor(&yp), Arg::tensor(&hp), Arg::tensor(p), Arg::tensor(x),
                                                 Arg::tensor(w), Arg::f32(self.cfg.eps)])?;
                Ok((y, h))
            }
        }
    }

    /// q [t, heads, head_dim] rotated, and k and v rotated and written into
    /// layer i's cache, from the qkv projection's partials (qkv_finish).
    fn qkv_finish(&self, i: usize, ws: &Tensor, pos: &Tensor, seq: &Tensor) -> Res<Tensor> {
        let c = &self.cfg;
        let t = pos.shape()[0];
        let q = self.empty(&[t, c.heads, c.head_dim], self.dtype)?;
        let flat = |x: &Tensor| x.reshape(&[-1]).map_err(err);
        let (qf, kf, vf) = (flat(&q)?, flat(&self.cache[i].0)?, flat(&self.cache[i].1)?);
        let n = (t * (c.heads + 2 * c.kv_heads) * c.head_dim) as usize;
        let k = self.kern("qkv_finish")?;
        let (cfg, args) = (LaunchConfig::for_elements(n, 256), [Arg::tensor(&qf), Arg::tensor(&kf), Arg::tensor(&vf),
            Arg::tensor(ws), Arg::tensor(pos), Arg::tensor(seq), Arg::tensor(&self.cos), Arg::tensor(&self.sin),
            Arg::u64(c.kv_heads as u64), Arg::u64(self.max_len as u64), Arg::u64(c.head_dim as u64)]);
        // unsafe: writes at the data's positions (llama.oxk says why); each (seq, pos) is one token's
        unsafe {
            match self.chain.borrow_mut().as_mut() {
                Some(ch) => ch.launch_unchecked(&k, &cfg, &args),
                None => k.launch_unchecked(None, &cfg, &args),
            }
        }
        .map_err(|e| format!("qkv_finish: {e}"))?;
        Ok(q)
    }

    /// One pass over tokens `ids` at `pos` of sequences `seq`; `attend` is the
    /// attention of layer i on q; `last` picks the rows whose logits are wanted.
    fn forward(&self, ids: &Tensor, pos: &Tensor, seq: &Tensor, attend: &dyn Fn(usize, &Tensor) -> Res<Tensor>,
               last: &dyn Fn(&Tensor) -> Res<Tensor>) -> Res<Tensor> {
        let c = &self.cfg;
        let t = ids.shape()[0];
        let x = self.empty(&[t, c.hidden], self.dtype)?;
        let bd = pow2(c.hidden).min(256);
        self.tile("embed", &[Arg::tensor(&x.partition(&[16, bd]).map_err(err)?), Arg::tensor(&self.embed), Arg::tensor(ids)])?;
        let (mut out, mut h): (Option<Tensor>, Tensor) = (None, x);
        for (i, l) in self.layers.iter().enumerate() {
            let (xn, h1) = self.norm(&l.in_norm, &h, out.as_ref())?;
            let q = self.qkv_finish(i, &self.part(&xn, &l.qkv, None, false)?, pos, seq)?;
            let o = attend(i, &q)?;
            let (x2, h2) = self.norm(&l.post_norm, &h1, Some(&self.part(&o, &l.o, None, true)?))?;
            let inter = l.down.shape()[1];
            out = Some(self.part(&self.mlp_in(&x2, &l.gate_up, inter)?, &l.down, None, true)?);
            h = h2;
        }
        let (xn, _) = self.norm(&self.norm, &h, out.as_ref())?;
        self.linear(&last(&xn)?, &self.lm_head)
    }

    fn i32s(&self, v: &[i32]) -> Res<Tensor> {
        Tensor::from_slice(self.dev, v).map_err(err)
    }

    fn prefill(&mut self, ids: &[i32]) -> Res<Tensor> {
        let (c, s) = (&self.cfg, ids.len() as i64);
        let pos = self.i32s(&(0..s as i32).collect::<Vec<_>>())?;
        let seq = self.i32s(&vec![0; s as usize])?;
        let tok = self.i32s(ids)?;
        let (heads, dh) = (c.heads, c.head_dim);
        let attend = |i: usize, q: &Tensor| -> Res<Tensor> {
            let o = self.empty(&[s, heads * dh], self.dtype)?;
            let view = |t: &Tensor| t.reshape(&[1, s, heads, dh]).and_then(|r| r.permute(&[0, 2, 1, 3])).map_err(err);
            // the prompt's keys and values where qkv_finish wrote them: the cache's first s positions
            let cached = |t: &Tensor| t.slice(0, 0, 1, 1).and_then(|r| r.slice(2, 0, s, 1)).map_err(err);
            let (kc, vc) = (cached(&self.cache[i].0)?, cached(&self.cache[i].1)?);
            let bm = if self.gpu { 64 } else { 16 };
            let op = view(&o)?.partition(&[1, 1, bm, dh]).map_err(err)?;
            self.tile("prefill_attention", &[Arg::tensor(&op), Arg::tensor(&view(q)?), Arg::tensor(&kc), Arg::tensor(&vc),
                                             Arg::f32(1.0 / (dh as f32).sqrt())])?;
            Ok(o)
        };
        let last = |xn: &Tensor| xn.slice(0, s - 1, s, 1).map_err(err);
        let logits = self.forward(&tok, &pos, &seq, &attend, &last)?;
        self.lens = vec![s];
        self.pos = Some((self.i32s(&[s as i32])?, self.i32s(&[s as i32 + 1])?, self.i32s(&[0])?));
        Ok(logits)
    }

    /// The cache positions a decode attention block takes, for b sequences of
    /// up to `context` positions (as _split in model.py).
    fn split_for(&self, b: i64, context: i64) -> i64 {
        let want = (b * self.cfg.kv_heads * context) as f64 / (4 * self.dev.multiprocessors() as i64 * self.split) as f64;
        self.split * pow2(want.ceil() as i64).min(64)
    }

    /// One token per sequence at each one's next position (device tensors:
    /// the host uploads nothing); `context`: the cache positions attention
    /// covers (None: the longest sequence's; a recorded step covers the whole
    /// cache). The positions move on, on the device (advance), so that a
    /// recorded step replays alone.
    fn decode(&mut self, ids: &Tensor, context: Option<i64>) -> Res<Tensor> {
        let c = &self.cfg;
        let b = ids.shape()[0];
        if self.lens.iter().any(|&x| x >= self.max_len) {
            return Err(format!("a sequence reached the cache's {} positions", self.max_len));
        }
        let (pos, lens, seq) = self.pos.as_ref().ok_or("decode follows prefill")?;
        let context = context.unwrap_or_else(|| self.lens.iter().max().unwrap() + 1);
        let split = self.split_for(b, context);
        let splits = cdiv(context, split);
        let (heads, kvh, dh) = (c.heads, c.kv_heads, c.head_dim);
        let group = heads / kvh;
        let attend = |i: usize, q: &Tensor| -> Res<Tensor> {
            let (kc, vc) = &self.cache[i];
            let po = self.empty(&[b * kvh, splits, group, dh], Dtype::F32)?;
            let lse = self.empty(&[b * kvh, splits, group, 1], Dtype::F32)?;
            // the query rows: the group's heads, or on the GPU the 64 rows of a wgmma (llama.oxk)
            let g = pow2(group).max(if self.gpu { 64 } else { 1 });
            let (kb, vb) = (kc.slice(0, 0, b, 1).map_err(err)?, vc.slice(0, 0, b, 1).map_err(err)?);
            self.tile("decode_attention", &[Arg::tensor(&po.partition(&[1, 1, g, dh]).map_err(err)?),
                Arg::tensor(&lse.partition(&[1, 1, g, 1]).map_err(err)?), Arg::tensor(q), Arg::tensor(&kb), Arg::tensor(&vb),
                Arg::tensor(lens), Arg::i32(split as i32), Arg::f32(1.0 / (dh as f32).sqrt())])?;
            let o = self.empty(&[b, heads * dh], self.dtype)?;
            let op = o.reshape(&[b, heads, dh]).and_then(|r| r.partition(&[1, 1, dh])).map_err(err)?;
            self.tile("decode_combine", &[Arg::tensor(&op), Arg::tensor(&po), Arg::tensor(&lse)])?;
            Ok(o)
        };
        let logits = self.forward(ids, pos, seq, &attend, &|xn: &Tensor| Ok(xn.clone()))?;
        self.launch("advance", &LaunchConfig::for_elements(b as usize, 32), &[Arg::tensor(pos), Arg::tensor(lens)])?;
        if self.chain.borrow().is_none() {
            for l in self.lens.iter_mut() {
                *l += 1;
            }
        }
        Ok(logits)
    }

    /// The decode step recorded once as a chain, from prefill's `logits`
    /// (which the step reuses): each run samples greedily from them into
    /// .ids, then decodes those tokens into them. `stream`: capture it there
    /// as one CUDA graph (the CPU has nothing to capture).
    fn decode_chain(&mut self, logits: Tensor, stream: Option<&oxide::Stream>) -> Res<Step<'m>> {
        *self.chain.borrow_mut() = Some(Chain::new(self.dev).map_err(err)?);
        let recorded = (|| {
            let ids = self.greedy(&logits)?;
            let out = self.decode(&ids, Some(self.max_len))?;
            self.chain.borrow_mut().as_mut().unwrap().copy(&logits, &out).map_err(err)?;
            Ok::<_, String>(ids)
        })();
        let mut chain = self.chain.borrow_mut().take().unwrap();
        let ids = recorded?;
        if let Some(s) = stream {
            chain.capture(s).map_err(err)?;
        }
        Ok(Step { chain, ids })
    }

    /// The largest logit's index of each row, on the device.
    fn greedy(&self, logits: &Tensor) -> Res<Tensor> {
        let (b, v) = (logits.shape()[0], logits.shape()[1]);
        let chunks = cdiv(v, self.bv);
        let pv = self.empty(&[b, chunks], Dtype::F32)?;
        let pi = self.empty(&[b, chunks], Dtype::I32)?;
        self.tile("argmax_part", &[Arg::tensor(&pv.partition(&[1, 1]).map_err(err)?), Arg::tensor(&pi.partition(&[1, 1]).map_err(err)?),
                                   Arg::tensor(logits)])?;
        let ids = self.empty(&[b], Dtype::I32)?;
        self.tile("argmax_final", &[Arg::tensor(&ids.partition(&[1]).map_err(err)?), Arg::tensor(&pv), Arg::tensor(&pi)])?;
        Ok(ids)
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("llama_oxide: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: llama_oxide MODEL_DIR --prompt 5,17,250 [--steps 32] [--device cpu|cuda] [--dtype f32|bf16] [--graph]";
    let dir = args.get(1).filter(|a| !a.starts_with("--")).ok_or(usage)?;
    let (mut prompt, mut steps, mut device, mut dtype, mut graph) = (Vec::new(), 32usize, "cpu".to_string(), None, false);
    let mut i = 2;
    while i < args.len() {
        if args[i] == "--graph" {
            graph = true;
            i += 1;
            continue;
        }
        let v = args.get(i + 1).ok_or(usage)?;
        match args[i].as_str() {
            "--prompt" => prompt = v.split(',').map(|t| t.trim().parse::<i32>().map_err(|e| format!("--prompt: {e}"))).collect::<Res<_>>()?,
            "--steps" => steps = v.parse().map_err(|e| format!("--steps: {e}"))?,
            "--device" => device = v.clone(),
            "--dtype" => {
                dtype = Some(match v.as_str() {
                    "f32" => Dtype::F32,
                    "bf16" => Dtype::BF16,
                    d => return Err(format!("--dtype takes f32 or bf16, not {d}")),
                })
            }
            _ => return Err(usage.into()),
        }
        i += 2;
    }
    if prompt.is_empty() {
        return Err(usage.into());
    }
    let dev = match device.as_str() {
        "cpu" => Device::cpu(),
        "cuda" => Device::cuda(0),
        d => return Err(format!("--device takes cpu or cuda, not {d}")),
    }
    .map_err(err)?;
    // bf16 on the GPU, f32 on the CPU, unless --dtype says
    let dtype = dtype.unwrap_or(if device == "cuda" { Dtype::BF16 } else { Dtype::F32 });
    let module = kernels(dev)?;
    let mut model = Model::load(dir, &module, dtype, 1, (prompt.len() + steps + 1) as i64)?;
    let start = Instant::now();
    let mut logits = model.prefill(&prompt)?;
    let mut out = Vec::new();
    let t0;
    if graph {
        // the step recorded once (on CUDA one graph, captured on a stream of
        // its own), then one run a token: the host launches nothing else
        let stream = dev.stream().map_err(err)?;
        let gpu = dev.device_type() == oxide::DeviceType::Cuda;
        let step = model.decode_chain(logits, gpu.then_some(&stream))?;
        t0 = Instant::now();
        for _ in 0..steps {
            step.chain.run(Some(&stream)).map_err(err)?;
            stream.synchronize().map_err(err)?;
            out.push(step.ids.to_vec::<i32>().map_err(err)?[0]);
        }
    } else {
        t0 = Instant::now();
        for s in 0..steps {
            let ids = model.greedy(&logits)?;
            out.push(ids.to_vec::<i32>().map_err(err)?[0]);
            if s + 1 < steps {
                logits = model.decode(&ids, None)?;
            }
        }
    }
    dev.synchronize().map_err(err)?;
    let decode = t0.elapsed().as_secs_f64();
    println!("{}", out.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(","));
    eprintln!("prefill+decode {:.3} s; {} tokens in {:.3} s: {:.1} tokens/s", start.elapsed().as_secs_f64(), steps,
              decode, steps as f64 / decode.max(1e-9));
    Ok(())
}
