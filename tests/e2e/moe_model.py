"""The tiny MoE checkpoints of the MoE tests, made with transformers (no model hub here): a
Qwen3-MoE (`build`) and a Laguna with MoE layers (`build_laguna`).

`Qwen3MoeForCausalLM`: hidden 256, 2 layers, 4 heads x 64, 2 KV heads, 8 experts of intermediate 128,
top-2, a router `mlp.gate` [8, 256] per layer, untied `lm_head`, the shared BPE tokenizer (corpus.py).
Every expert projection is a multiple of 128 in and out (Marlin, and vLLM's CPU W4A16 MoE kernel).
Written in the two layouts a user meets:
- `per_expert`: what `save_pretrained` writes (`mlp.experts.N.{gate,up,down}_proj.weight`, 2-D);
- `fused`: the model's own state dict, with transformers 5's fused 3-D expert parameters
  (`mlp.experts.gate_up_proj` [E, 2I, H] gate rows first, `mlp.experts.down_proj` [E, H, I]), as
  fused-expert checkpoints store them.
The weights are random with a wide init (std 0.1) so that greedy choices have margins; the same seed
gives the same weights in both layouts.

`LagunaForCausalLM` (transformers >= 5.17 has the class): the dense Laguna of laguna_model.py
(hidden 256, 4 heads x 64, 2 KV heads, per-head softplus gate `g_proj` [4, 256]) with 3 layers whose
`mlp_layer_types` are ["dense", "sparse", "sparse"]: a dense layer before the MoE ones, so both
kinds are in one checkpoint (vLLM's LagunaDecoderLayer builds LagunaMoE where the type is "sparse",
LagunaMLP elsewhere).
Each MoE layer: 8 experts of intermediate 128, top-2 sigmoid routing, the router `mlp.gate` [8, 256],
a shared expert of intermediate 128 (`mlp.shared_expert.*`) and the load-balancing bias
`mlp.experts.e_score_correction_bias` [8], F32 and non-zero, so that a dropped or rounded bias
changes the routing. `save_pretrained` writes the names vLLM loads (transformers' conversion
mapping renames `mlp.gate.e_score_correction_bias` and `mlp.shared_experts.` back on save) and
per-expert 2-D weights.

Error policy: none of its own; transformers' errors propagate.
"""

from __future__ import annotations

import json
import pathlib

from tests.e2e import corpus

EXPERTS, HIDDEN, MOE_INTERMEDIATE = 8, 256, 128


def config_kwargs() -> dict:
    return dict(vocab_size=corpus.VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                moe_intermediate_size=MOE_INTERMEDIATE, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                num_experts=EXPERTS, num_experts_per_tok=2, decoder_sparse_step=1,
                mlp_only_layers=[], norm_topk_prob=True, tie_word_embeddings=False,
                max_position_embeddings=2048, initializer_range=0.1,
                bos_token_id=corpus.EOS_ID, eos_token_id=corpus.EOS_ID)


LAGUNA_LAYER_TYPES = ["dense", "sparse", "sparse"]
LAGUNA_SHARED_INTERMEDIATE = 128


def laguna_config():
    """The dense e2e Laguna's config (laguna_model.laguna_config, left as it is: its source keys
    the trained-model cache) with MoE layers."""
    from transformers import LagunaConfig
    from tests.e2e import laguna_model
    layers = len(LAGUNA_LAYER_TYPES)
    cfg = laguna_model.laguna_config(laguna_model.Shapes(vocab=corpus.VOCAB), layers,
                                     corpus.EOS_ID).to_dict()
    cfg.update(mlp_layer_types=LAGUNA_LAYER_TYPES, num_experts=EXPERTS, num_experts_per_tok=2,
               moe_intermediate_size=MOE_INTERMEDIATE,
               shared_expert_intermediate_size=LAGUNA_SHARED_INTERMEDIATE,
               initializer_range=0.1)
    for key in ("architectures", "model_type", "transformers_version", "dtype"):
        cfg.pop(key, None)
    return LagunaConfig(**cfg)


def build_laguna(out: pathlib.Path, seed: int = 0, tokenizer: bool = True) -> pathlib.Path:
    """Writes the tiny BF16 Laguna MoE (config, safetensors, tokenizer) into `out`; returns `out`."""
    import torch
    from transformers import LagunaForCausalLM

    torch.manual_seed(seed)
    model = LagunaForCausalLM(laguna_config()).to(torch.bfloat16).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            if hasattr(layer.mlp, "gate"):  # LagunaTopKRouter: keep its bias F32, as vLLM does
                layer.mlp.gate.e_score_correction_bias.data = 0.5 * torch.randn(EXPERTS)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    if tokenizer:
        corpus.write_tokenizer(out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "laguna" and cfg["mlp_layer_types"] == LAGUNA_LAYER_TYPES, cfg
    return out


def build(out: pathlib.Path, layout: str = "per_expert", seed: int = 0,
          tokenizer: bool = True) -> pathlib.Path:
    """Writes the BF16 checkpoint (config, safetensors, tokenizer) into `out`; returns `out`."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    assert layout in ("per_expert", "fused"), layout
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**config_kwargs())).to(torch.bfloat16).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    if layout == "fused":
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        assert any(k.endswith("mlp.experts.gate_up_proj") and v.ndim == 3 for k, v in state.items())
        for f in out.glob("*.safetensors*"):
            f.unlink()
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    if tokenizer:
        corpus.write_tokenizer(out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_moe", cfg["model_type"]
    return out
