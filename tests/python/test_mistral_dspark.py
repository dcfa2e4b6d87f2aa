"""Mistral Large 4's DSpark draft, which rides in its target's checkpoint as `mtp_dspark.*`.

vLLM 0.34 reads Mistral Large 4 from Mistral's own format only (params.json beside
consolidated*.safetensors: transformers_utils/configs/mistral.py adapt_config_dict), and builds the
draft its params.json's `mtp.dspark` block describes as MistralLarge4DSparkModel with
quantization_config None (get_mistral_large_4_dspark_config): the draft's tensors stay BF16
whatever the target's quantization. sparkulator does not read that format:
- every command refuses a Mistral-format folder with exit 2, naming params.json and saying what to
  do (for Mistral Large 4: serve it as shipped; otherwise: pass the Hugging Face-format folder);
- where a Hugging Face folder does hold `mtp_dspark.*` tensors, quantize keeps them dense (the plan
  says why) and check fails a copy whose `mtp_dspark.*` Linear is quantized
  (quantized-embedded-draft), the one decision (vllm_build.h) deciding both.
"""
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

SIDE = 256
DRAFT = ["mtp_dspark.backbone.layers.0.attention.wo",
         "mtp_dspark.backbone.layers.0.feed_forward.w2"]
TARGET = ["model.layers.0.self_attn.o_proj", "model.layers.0.mlp.down_proj"]


def weights(names: list) -> dict:
    rng = np.random.default_rng(0)
    return {n + ".weight": (rng.standard_normal((SIDE, SIDE)) * 0.02).astype(np.float16)
            for n in names}


def mistral_folder(root: Path, dspark: bool) -> Path:
    """params.json (Mistral Large 4's DSA layout with an mtp.dspark block, or a plain Mistral one)
    and consolidated.safetensors, no config.json."""
    root.mkdir()
    params = {"dim": SIDE, "n_layers": 1, "n_heads": 2, "vocab_size": 64}
    if dspark:
        params["mtp"] = {"n_layers": 1, "depth": 4, "target_activation_layers": "0",
                         "dspark": {"markov_rank": 16}}
    (root / "params.json").write_text(json.dumps(params))
    names = [n.replace("model.", "", 1) for n in TARGET] + (DRAFT if dspark else [])
    save_file(weights(names), str(root / "consolidated.safetensors"))
    return root


@pytest.mark.parametrize("command", ["quantize", "check", "inspect", "dequantize"])
def test_a_mistral_large_4_folder_is_refused_naming_params_json(spk, tmp_path, command):
    src = mistral_folder(tmp_path / "ml4", dspark=True)
    out = [tmp_path / "out"] if command in ("quantize", "dequantize") else []
    proc = spk(command, src, *out, expect=2)
    assert f"{src}/params.json: a Mistral-format checkpoint" in proc.stderr, proc.stderr
    assert ("vLLM 0.34 builds as MistralLarge4DSparkModel from the mtp_dspark.* tensors with "
            "quantization_config None, so they must stay BF16") in proc.stderr
    assert f"serve it as Mistral ships it (vllm serve {src}" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_mistral_large_4_target_is_refused_as_a_target_too(spk, tmp_path):
    target = mistral_folder(tmp_path / "ml4", dspark=True)
    draft = tmp_path / "draft"
    draft.mkdir()
    save_file(weights(TARGET), str(draft / "model.safetensors"))
    (draft / "config.json").write_text(json.dumps({"architectures": ["MistralForCausalLM"],
                                                   "model_type": "mistral"}))
    proc = spk("quantize", draft, tmp_path / "out", "--target", target, expect=2)
    assert f"{target}/params.json: a Mistral-format checkpoint" in proc.stderr, proc.stderr


def test_another_mistral_format_folder_is_pointed_at_its_hf_copy(spk, tmp_path):
    src = mistral_folder(tmp_path / "mistral", dspark=False)
    proc = spk("quantize", src, tmp_path / "out", expect=2)
    assert (f"{src}/params.json: a Mistral-format checkpoint (params.json and consolidated "
            "safetensors, no config.json), which sparkulator does not read: pass the model's "
            "Hugging Face-format folder") in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def hf_with_draft(tmp_path_factory, spk):
    """A Hugging Face folder holding the target's Linears and mtp_dspark.* ones, and its W4A16
    quantization's plan."""
    root = tmp_path_factory.mktemp("mtp_dspark")
    src = root / "src"
    src.mkdir()
    save_file(weights(TARGET + DRAFT), str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": SIDE,
        "num_hidden_layers": 1, "torch_dtype": "float16"}))
    plan = json.loads(spk("quantize", src, root / "q", "--json", "--no-fsync").stdout)
    return src, root / "q", plan


def test_quantize_keeps_the_embedded_draft_dense_and_says_why(hf_with_draft):
    _, q, plan = hf_with_draft
    stored = load_file(str(q / "model.safetensors"))
    for m in DRAFT:
        assert stored[m + ".weight"].dtype == np.float16, m
        assert m + ".weight_packed" not in stored, m
    for m in TARGET:
        assert m + ".weight_packed" in stored, m
    reasons = {t["name"]: t["reason"] for t in plan["tensors"]}
    for m in DRAFT:
        assert "MistralLarge4DSparkModel with quantization_config None" in reasons[m + ".weight"]


def test_check_passes_the_dense_draft_and_fails_a_quantized_one(hf_with_draft, spk, tmp_path):
    src, q, _ = hf_with_draft
    proc = spk("check", q, "--json", expect=None)
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert "quantized-embedded-draft" not in codes
    # The same checkpoint with the draft's o_proj stored as the target's is: quantize a copy whose
    # draft tensor is named as a target Linear, then give the packed tensors the draft's name back.
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    w = load_file(str(src / "model.safetensors"))
    w["model.layers.0.self_attn.q_proj.weight"] = w.pop(DRAFT[0] + ".weight")
    save_file(w, str(renamed / "model.safetensors"))
    (renamed / "config.json").write_text((src / "config.json").read_text())
    bad = tmp_path / "bad"
    spk("quantize", renamed, bad, "--no-fsync", "--preset", "none")
    stored = load_file(str(bad / "model.safetensors"))
    for suffix in ("weight_packed", "weight_scale", "weight_shape"):
        stored[f"{DRAFT[0]}.{suffix}"] = stored.pop(f"model.layers.0.self_attn.q_proj.{suffix}")
    save_file(stored, str(bad / "model.safetensors"), metadata={"format": "pt"})
    proc = spk("check", bad, "--json", expect=1)
    found = [f for f in json.loads(proc.stdout)["findings"]
             if f["code"] == "quantized-embedded-draft"]
    assert [f["severity"] for f in found] == ["error"], proc.stdout
    assert f"stored as {DRAFT[0]}.weight_packed" in found[0]["message"]
    assert "MistralLarge4DSparkModel with quantization_config None" in found[0]["message"]
