"""The Llama model on Oxide kernels (models/llama/model.py) against the real
transformers LlamaForCausalLM, on the GPU in bf16: two configurations with
random weights from a fixed seed (no machine here can download a checkpoint),
the logits at every step within bf16's tolerance, and 32 greedy steps giving
the same tokens. Needs torch and transformers: tools/gpu_llama.sh installs
transformers there from wheels carried to the GPU machine."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

pytestmark = pytest.mark.gpu

CONFIGS = {
    "small": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=688, vocab_size=1000, max_position_embeddings=256, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=False,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 128}),
    "wide": dict(hidden_size=1024, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                 intermediate_size=2816, vocab_size=32000, max_position_embeddings=512, rms_norm_eps=1e-6,
                 rope_theta=10000.0, tie_word_embeddings=False),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_transformers(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers",
                                       reason="transformers is installed on the GPU machine by tools/gpu_llama.sh")
    from models.llama.model import Llama
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**CONFIGS[name])
    config._attn_implementation = "sdpa"
    ref = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
    with torch.no_grad():  # weights a little larger than the init's, so that tokens are not all alike
        for p in ref.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.05)
    model = Llama(config, ref.state_dict(), device="cuda", dtype="bf16", max_batch=2, max_len=128)
    prompts = torch.randint(0, config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    steps = 32
    with torch.no_grad():
        out = ref.generate(prompts.cuda(), max_new_tokens=steps, do_sample=False, output_logits=True,
                           return_dict_in_generate=True, pad_token_id=0)
    want_tokens = out.sequences[:, prompts.shape[1]:].cpu().numpy()
    logits = model.prefill(prompts.numpy().astype(np.int32))
    got = []
    for s in range(steps):
        lg = np.asarray(logits, dtype=np.float32).astype(np.float64)
        ref_lg = out.logits[s].float().cpu().numpy().astype(np.float64)
        # bf16 through a whole model: compared to the logits' scale
        scale = np.abs(ref_lg).max()
        assert np.abs(lg - ref_lg).max() <= 0.06 * scale + 0.05, f"step {s}"
        ids = model.greedy(logits).numpy()
        got.append(ids)
        # teacher forcing: the reference's tokens go in, so that every step compares one position
        logits = model.decode(want_tokens[:, s].astype(np.int32))
    got = np.stack(got, 1)
    for b, s in zip(*np.nonzero(got != want_tokens)):
        # greedy choices may differ only where the reference's two candidates tie to bf16's precision
        ref_lg = out.logits[s][b].float().cpu().numpy()
        gap = ref_lg[want_tokens[b, s]] - ref_lg[got[b, s]]
        assert gap <= 0.02 * np.abs(ref_lg).max(), f"sequence {b}, step {s}: a gap of {gap} between the tokens"
