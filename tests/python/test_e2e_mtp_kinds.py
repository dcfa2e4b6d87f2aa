"""Proof on vLLM, continued: the MTP kinds vLLM 0.32's map lists as built beyond MiMo and DeepSeek.

test_e2e_draft_kinds.py's proof, for three more kinds, in the same vLLM interpreter (this module
adds its builder to that file's MORE_KINDS; its `proof` is that fixture, run once for both):
- Gemma4's assistant (Gemma4MTPModel, method mtp): its own checkpoint in transformers' own config
  (model_type gemma4_assistant, architectures Gemma4AssistantForCausalLM; vLLM renames it
  gemma4_mtp) beside a tiny random Gemma4 target of transformers' own class, one sliding and one
  full-attention layer. The dense and the W4A16 assistant serve, its one Q-only layer reading the
  target's KV cache. Like EAGLE-1 it has no head vLLM builds dense: its `--preset none` copy is
  the default output. The plan finds the architecture by the model_type vLLM rewrites (the map's
  checkpoint_model_types), and the jobs serve its serve line beside the Gemma4 target.
- Qwen3.5 MTP (Qwen3_5MTP: transformers' own Qwen3_5ForCausalLM, a gated-delta-net layer, then
  full attention, with the builder's MTP layer under `mtp.`): with vLLM's defaults the CPU build
  loads it, then fails at the first step in a Triton kernel (prefix caching puts the GDN layer's
  mamba cache in "align" mode): that refusal is asserted with its text. Without prefix caching
  the dense, W4A16 and `--preset none` copies serve; vLLM builds the MTP `fc` quantized and serves
  the copy that has it, which check passes (the map, not the MTP family rule, decides fc).
- Step-3.5 MTP (Step3p5MTP: a Step3p5ForCausalLM target, which vLLM requires to have a MoE layer,
  with its MTP layer as model.layers.2 in the same checkpoint, DeepSeek's layout): the dense
  source serves; the default W4A16 output does not load (vLLM's MTP completeness check counts the
  KV-cache scales and zero points compressed-tensors' attention registers and no checkpoint
  stores); the `--preset none` copy fails on its packed eh_proj (a plain nn.Linear), as check
  predicts.
Exaone4_5_MTP and GlmOcrMTPModel (vision-language targets) are not served yet.

Skipped and required as test_e2e_draft_kinds.py is (its `vllm_venv` fixture).
"""
import json
import re

import numpy as np
import pytest

import test_draft_kinds as kinds
from conftest import on_release, run_spk
import test_e2e_draft_kinds as e2e
from conftest import assert_same_tensors
# `proof` (and `vllm_tier`, which it asks for) are that module's fixtures, by their names here:
# its run is made once for both modules.
from test_e2e_draft_kinds import (DRAFTER_LINE, H, HD, HEADS, INTER, KERNEL_LINE, KV,  # noqa: F401
                                  LAYERS, MAP, MAX_TOKENS, PROMPTS, VOCAB, leaf, proof, served_ok,
                                  shape, spec_of, spk, split, vllm_tier)

spk_run = on_release(run_spk, e2e.RELEASE)

# One head_dim for every Gemma4 layer (global_head_dim too): one KV spec, as the tiny target has.
GEMMA4_TEXT = {"vocab_size": VOCAB, "hidden_size": H, "intermediate_size": INTER,
               "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HD,
               "global_head_dim": HD, "max_position_embeddings": 2048, "sliding_window": 64,
               "vocab_size_per_layer_input": 0, "hidden_size_per_layer_input": 0,
               "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
# Step3p5Config is vLLM's own (transformers has none): a 2-layer target whose layer 1 is MoE
# (vLLM's default MoE layers are 1..num_hidden_layers-1 and it asserts there is one).
STEP3P5 = {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5", "hidden_size": H,
           "intermediate_size": INTER, "num_attention_heads": HEADS, "num_attention_groups": KV,
           "num_hidden_layers": LAYERS, "head_dim": HD, "vocab_size": VOCAB,
           "moe_num_experts": 4, "moe_top_k": 2, "moe_intermediate_size": 256,
           "share_expert_dim": 256, "num_nextn_predict_layers": 1, "max_seq_len": 2048,
           "max_position_embeddings": 2048, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
           "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float16"}


def gemma4_layout(weight: str) -> list:
    # Gemma4MTP.hf_to_vllm_mapper: the checkpoint stores pre_/post_projection at the top level
    # (vLLM adds `model.`) and gate/up unfused; lm_head is tied to embed_tokens (not stored).
    if weight in ("lm_head.weight", "model.pre_projection.weight", "model.post_projection.weight"):
        return []
    wide = lambda w: (H, 2 * H) if leaf(w) == "pre_projection" else shape(w)  # noqa: E731
    return [(w, wide(w)) for w in split(weight)]


def qwen3_5_layout(weight: str) -> list:
    # Qwen3_5MTP.load_weights reads the checkpoint's `mtp.` as its `model.`; embed_tokens and
    # lm_head are the target's. The full-attention q_proj carries the output gate (2x heads).
    if weight in ("lm_head.weight", "model.embed_tokens.weight"):
        return []
    # The map names the MTP layer by vLLM's path (`model.`) or as load_weights reads it (`mtp.`).
    disk = "mtp." + re.sub(r"^(model|mtp)\.", "", weight)
    gated = lambda w: (2 * HEADS * HD, H) if leaf(w) == "q_proj" else shape(w)  # noqa: E731
    return [(w, gated(w)) for w in split(disk)]


def step3p5_layout(weight: str) -> list:
    # Step3p5MTP.load_weights adds `mtp_block.` itself (DeepSeek's layout): the MTP layer's
    # decoder weights give the target's layers too, its MLP the dense layer 0 only (layer 1 is
    # the MoE layer, STEP3P5_MOE).
    # The map names them by vLLM's path (with `mtp_block.`) or as load_weights reads them; of
    # several names load_weights takes for one weight, the checkpoint stores the model.layers one.
    if not weight.startswith("model.layers.") and "eh_proj" in weight:
        return []
    rest = re.sub(r"^model\.layers\.2\.(mtp_block\.)?", "", weight)
    if rest.startswith(("self_attn.", "mlp.", "input_layernorm.", "post_attention_layernorm.")):
        layers = (0, 2) if rest.startswith("mlp.") else (0, 1, 2)
        return [(f"model.layers.{i}.{rest}", shape(weight)) for i in layers]
    return [(weight, {"eh_proj": (H, 2 * H), "head": (VOCAB, H)}.get(leaf(weight), shape(weight)))]


def step3p5_moe() -> dict:
    """Layer 1's MoE as vLLM's Step3p5 loader reads it: experts stacked [E, ...] under `moe.`,
    the router and its bias, the shared expert."""
    rng = np.random.default_rng(2)
    E, MI = STEP3P5["moe_num_experts"], STEP3P5["moe_intermediate_size"]
    r = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float16)  # noqa: E731
    p = "model.layers.1."
    return {p + "moe.gate.weight": r(E, H), p + "moe.router_bias": np.zeros(E, np.float32),
            p + "moe.gate_proj.weight": r(E, MI, H), p + "moe.up_proj.weight": r(E, MI, H),
            p + "moe.down_proj.weight": r(E, H, MI), p + "share_expert.gate_proj.weight": r(MI, H),
            p + "share_expert.up_proj.weight": r(MI, H),
            p + "share_expert.down_proj.weight": r(H, MI),
            "model.norm.weight": np.ones(H, np.float16), "lm_head.weight": r(VOCAB, H)}


def hf_model(folder, model_cls, config) -> None:
    """A tiny random model of transformers' own class, saved as transformers saves it (F16)."""
    import torch
    torch.manual_seed(0)
    model_cls(config).to(torch.float16).save_pretrained(folder)


def hf_config(folder, config) -> None:
    """The checkpoint's config.json: transformers' own config object, as it writes it."""
    (folder / "config.json").write_text(config.to_json_string())


def build(root, quantize, built, job) -> list:
    from safetensors.numpy import load_file
    from transformers import (Gemma4AssistantConfig, Gemma4ForCausalLM, Gemma4TextConfig,
                              Qwen3_5ForCausalLM, Qwen3_5TextConfig)
    hf_model(root / "gemma4-target", Gemma4ForCausalLM, Gemma4TextConfig(
        num_hidden_layers=LAYERS, layer_types=["sliding_attention", "full_attention"],
        **GEMMA4_TEXT))
    gemma4 = "Gemma4MTPModel"
    kinds.write_checkpoint(root / "gemma4" / "src", gemma4, MAP[gemma4], layout=gemma4_layout)
    hf_config(root / "gemma4" / "src", Gemma4AssistantConfig(
        text_config=Gemma4TextConfig(num_hidden_layers=1, layer_types=["full_attention"],
                                     **GEMMA4_TEXT),
        backbone_hidden_size=H, architectures=["Gemma4AssistantForCausalLM"]))
    quantize("gemma4", root / "gemma4" / "src")
    qwen3_5 = Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=H, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD, linear_key_head_dim=HD,
        linear_value_head_dim=HD, linear_num_key_heads=KV, linear_num_value_heads=HEADS,
        layer_types=["linear_attention", "full_attention"], max_position_embeddings=2048,
        bos_token_id=0, eos_token_id=0, mtp_num_hidden_layers=1)
    hf_model(root / "qwen3_5-target", Qwen3_5ForCausalLM, qwen3_5)
    kinds.write_checkpoint(root / "qwen3_5" / "src", "Qwen3_5MTP", MAP["Qwen3_5MTP"],
                           layout=qwen3_5_layout,
                           base=load_file(str(root / "qwen3_5-target" / "model.safetensors")))
    hf_config(root / "qwen3_5" / "src", qwen3_5)
    quantize("qwen3_5", root / "qwen3_5" / "src")
    kinds.write_checkpoint(root / "step3p5" / "src", "Step3p5MTP", MAP["Step3p5MTP"],
                           layout=step3p5_layout, base=step3p5_moe())
    (root / "step3p5" / "src" / "config.json").write_text(json.dumps(STEP3P5))
    # quantize refuses it (vLLM would refuse any compressed-tensors Step3p5 MTP checkpoint): the
    # copy vLLM is shown is the default plan's, written with the map's rules off and the one
    # head they keep dense ignored by hand.
    step3p5 = root / "step3p5" / "src"
    refused = spk_run("quantize", step3p5, root / "step3p5" / "refused", "--no-fsync", expect=2)
    built_refusal["step3p5"] = refused.stderr
    quantize("step3p5", step3p5, "--preset", "none", "--ignore", "model.layers.2.eh_proj")
    # sparkulator's serve line for the assistant, with the draft beside its Gemma4 target.
    jobs = []
    for variant, key in (("dense", "src"), ("w4a16", "q")):
        jobs.append({**job(f"gemma4-{variant}", "gemma4", key), "model": str(root / "gemma4-target")})
    # Qwen3.5 with vLLM's defaults (prefix caching on), then without prefix caching.
    jobs.append(job("qwen3_5-dense-prefix-caching", "qwen3_5", "src"))
    for variant, key in (("dense", "src"), ("w4a16", "q"), ("preset-none", "all")):
        jobs.append({**job(f"qwen3_5-{variant}", "qwen3_5", key),
                     "engine_args": {"enable_prefix_caching": False}})
    jobs += [job(f"step3p5-{variant}", "step3p5", key)
             for variant, key in (("dense", "src"), ("w4a16", "q"), ("preset-none", "all"))]
    return jobs


e2e.MORE_KINDS.append(build)
built_refusal = {}  # what `quantize` said refusing a kind, by key


def no_errors(check: tuple) -> bool:
    code, report = check
    return code == 0 and not [f for f in report["findings"] if f.get("severity") == "error"]


GEMMA4_QUANTIZED = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj",
                    "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj",
                    "model.layers.0.mlp.down_proj", "pre_projection", "post_projection"}
GEMMA4_KV_LINE = "Gemma4 MTP: draft layer 0 (full_attention) -> model.layers.1.self_attn.attn"


def test_gemma4_assistant_serves_beside_its_target(proof):
    built, results = proof["built"]["gemma4"], proof["results"]
    # The dense and the default W4A16 assistant serve beside the Gemma4 target (one token a
    # draft: n_predict 1), its layer on the KV cache of the target's last full-attention layer.
    _, spec = spec_of(built["plan"]["serve"])
    for name in ("gemma4-dense", "gemma4-w4a16"):
        served_ok(results[name], spec["num_speculative_tokens"])
        assert GEMMA4_KV_LINE in results[name]["log"], results[name]["log"][-3000:]
    log = results["gemma4-w4a16"]["log"]
    assert KERNEL_LINE in log[log.index(DRAFTER_LINE):], log[log.index(DRAFTER_LINE):][-3000:]
    # Greedy speculative decoding returns the target's own tokens, whatever the draft.
    assert results["gemma4-w4a16"]["outputs"] == results["gemma4-dense"]["outputs"]
    # Every Linear vLLM builds with the draft's scheme is quantized, the projections to and from
    # the target's width too (ColumnParallelLinear / RowParallelLinear in vLLM's map).
    assert kinds.quantized_modules(built["q"]) == GEMMA4_QUANTIZED
    assert no_errors(built["check_q"]), built["check_q"]


def test_gemma4_assistant_has_no_dense_head_so_preset_none_is_the_served_output(proof):
    # Its lm_head is tied to embed_tokens (not stored) and embed_tokens is replaced by the
    # target's: like EAGLE-1's, its --preset none copy is the served W4A16 output.
    built = proof["built"]["gemma4"]
    assert_same_tensors(built["q"], built["all"])
    assert no_errors(built["check_all"]), built["check_all"]


def test_gemma4_assistant_plan_knows_the_kind(proof):
    # Its config names Gemma4AssistantForCausalLM, which no registry lists; the map records the
    # model_type vLLM rewrites to Gemma4MTPModel (hf_config_override), and the plan finds it so:
    # a separate MTP draft, served with its own model (the jobs above use this serve line).
    built = proof["built"]["gemma4"]
    assert MAP["Gemma4MTPModel"]["checkpoint_model_types"][0] == "gemma4_assistant"
    assert not any("does not know architecture" in w for w in built["plan"]["warnings"])
    _, spec = spec_of(built["plan"]["serve"])
    assert spec["method"] == "mtp" and spec["model"] == str(built["q"]), spec


# vLLM 0.32 CPU, Qwen3.5 with prefix caching on (its default): the GDN layer's mamba cache is in
# "align" mode, whose pre-copy is a Triton kernel (mamba_utils.run_fused_precopy); the CPU build's
# Triton placeholder is a plain function, so the first step fails after loading.
QWEN3_5_REFUSED = "TypeError: 'function' object is not subscriptable"
QWEN3_5_REFUSED_AT = "precopy_mamba_align_fused_kernel[grid]("


def test_qwen3_5_mtp_is_refused_with_prefix_caching_on_the_cpu_build(proof):
    result = proof["results"]["qwen3_5-dense-prefix-caching"]
    assert result["loaded"] and result["error"] == QWEN3_5_REFUSED, (result["error"],
                                                                    result["log"][-4000:])
    assert QWEN3_5_REFUSED_AT in result["log"]


def test_qwen3_5_mtp_serves_without_prefix_caching(proof):
    built, results = proof["built"]["qwen3_5"], proof["results"]
    _, spec = spec_of(built["plan"]["serve"])
    assert spec["method"] == "mtp"
    for name in ("qwen3_5-dense", "qwen3_5-w4a16", "qwen3_5-preset-none"):
        served_ok(results[name], spec["num_speculative_tokens"])
    log = results["qwen3_5-w4a16"]["log"]
    assert KERNEL_LINE in log[log.index(DRAFTER_LINE):], log[log.index(DRAFTER_LINE):][-3000:]
    # The default output quantizes the MTP layer, its fc too: vLLM builds fc as a
    # ColumnParallelLinear with the quantization config (the map's entry, which the plan follows
    # over the MTP family rule), and it loaded and served it; check passes it.
    assert MAP["Qwen3_5MTP"]["modules"]["mtp.fc"]["quantized"]
    assert {"mtp.layers.0.self_attn.q_proj", "mtp.fc"} <= kinds.quantized_modules(built["q"])
    assert no_errors(built["check_q"]), built["check_q"]
    assert "mtp.fc" in kinds.quantized_modules(built["all"])


# vLLM builds Qwen3.5's MTP fc as a quantized ColumnParallelLinear: the map, not the MTP family
# rule (which is for eh_proj), decides, so check passes the copy vLLM serves.
def test_qwen3_5_check_passes_the_head_quantized_copy_vllm_serves(proof):
    assert no_errors(proof["built"]["qwen3_5"]["check_all"]), proof["built"]["qwen3_5"]["check_all"]


# vLLM 0.32 loading any compressed-tensors Step3p5 MTP: Step3p5MTP.load_weights wants every
# parameter loaded but the k/v/q scales it deems optional (one element, no grad), and
# compressed-tensors' attention also holds k/v/q scales and zero points no checkpoint stores
# (which one it names is a set's order: q_scale and each zero point measured).
STEP3P5_W4A16_ERROR = re.compile(
    r"RuntimeError: Some parameters like model\.layers\.2\.mtp_block\.self_attn\.attn\.[kqv]"
    r"_(scale|zero_point) are not in the checkpoint and will falsely use random initialization")
# The packed eh_proj: Step3p5MTP.load_weights looks it up in its parameters (a plain nn.Linear).
STEP3P5_HEAD_ERROR = "KeyError: 'model.layers.2.eh_proj.weight_packed'"


def test_step3p5_mtp_dense_serves_and_w4a16_is_refused_by_vllms_completeness_check(proof):
    built, results = proof["built"]["step3p5"], proof["results"]
    _, spec = spec_of(built["plan"]["serve"])
    assert spec["method"] == "mtp"
    served_ok(results["step3p5-dense"], spec["num_speculative_tokens"])
    # The target's layers and the MTP layer are all in the checkpoint (vLLM does not check the
    # target's completeness): each one's q_proj was quantized in the default output.
    assert {f"model.layers.{i}.self_attn.q_proj" for i in range(3)} <= \
        kinds.quantized_modules(built["q"])
    result = results["step3p5-w4a16"]
    assert not result["loaded"] and STEP3P5_W4A16_ERROR.fullmatch(result["error"]), (
        result["error"], result["log"][-4000:])
    assert DRAFTER_LINE in result["log"]  # the target loaded; the drafter's load refused
    assert "model.layers.2.eh_proj" not in kinds.quantized_modules(built["q"])
    # check predicts it from the map (refuses_unstored: found by loading the tiny model), with
    # vLLM's own message, and so does the plan's warning; the map's target entry is found.
    code, report = built["check_q"]
    refused = [f for f in report["findings"] if f["code"] == "vllm-refuses-unstored-params"]
    assert code == 1 and len(refused) == 1 and refused[0]["severity"] == "error", report["findings"]
    assert STEP3P5_W4A16_ERROR.search(refused[0]["message"]), refused[0]
    assert report.get("vllm_module_map_architecture") == "Step3p5MTP", report
    assert "refuses to load Step3p5MTP" in built_refusal["step3p5"], built_refusal


def test_step3p5_head_quantized_copy_fails_as_check_predicts(proof):
    built, result = proof["built"]["step3p5"], proof["results"]["step3p5-preset-none"]
    assert not result["loaded"] and result["error"] == STEP3P5_HEAD_ERROR, (
        result["error"], result["log"][-4000:])
    code, report = built["check_all"]
    flagged = {f["module"] for f in report["findings"] if f.get("severity") == "error"}
    assert code == 1 and "model.layers.2.eh_proj" in flagged, report["findings"]
    assert "model.layers.2.eh_proj" in kinds.quantized_modules(built["all"])
