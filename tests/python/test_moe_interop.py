"""Interop: MoE checkpoints quantized by sparkulator must equal llm-compressor's model_free_ptq BYTE
FOR BYTE (llmcompressor 0.14.0.1, compressed-tensors 0.19.0, on the CPU).

The checkpoint is the tiny Qwen3-MoE of tests/e2e/moe_model.py (2 layers, 8 experts, router
`mlp.gate` [8, 256]) in both layouts: per-expert 2-D weights (what save_pretrained writes) and the
fused 3-D `mlp.experts.gate_up_proj` / `down_proj` of transformers 5, which model_free_ptq splits into
per-expert weights (converter.py split_fused_moe_experts) and sparkulator splits the same way.
Both tools quantize the same Linear weights: the reference is told to ignore the embeddings, lm_head
and the routers (re:.*mlp\\.gate$, as llm-compressor's MoE examples do; it has no router default of
its own), sparkulator keeps them dense by rule.

Asserted, per layout and preset (W4A16, W4A16_ASYM, FP8_DYNAMIC, NVFP4A16): the same tensor names,
dtypes, shapes and bytes, every expert projection quantized, the routers dense; the
quantization_config's scheme parses to the same QuantizationScheme, and its ignore list names the
routers (vLLM builds Qwen3-MoE's GateLinear with the model's quant_config). The integer presets'
`observer` field is left out of the scheme comparison (see the test).

Laguna (moe_model.build_laguna: a dense first layer, two MoE layers with a shared expert and
`mlp.experts.e_score_correction_bias`), for W4A16 and FP8_DYNAMIC: byte-equal to the reference told to ignore what
sparkulator keeps dense (the routers; for the integer presets also the per-head `g_proj` [4, 256],
which no W4A16 kernel takes), the bias copied bit for bit, the shared expert quantized. The
reference has no router rule: without the ignore entry it packs Laguna's `mlp.gate`, which vLLM
builds as GateLinear with no quant_config, and `check` says quantized-router.
"""

import json
import sys
from pathlib import Path

import pytest

from conftest import quantization_config, run_model_free_ptq, REPO, assert_same_tensors, load_dir

pytest.importorskip("llmcompressor")
sys.path.insert(0, str(REPO))

from tests.e2e import moe_model  # noqa: E402

PRESETS = ["W4A16", "W4A16_ASYM", "FP8_DYNAMIC", "NVFP4A16"]
LAYOUTS = ["per_expert", "fused"]



@pytest.fixture(scope="module")
def outputs(tmp_path_factory, spk):
    """(layout, preset) -> (reference folder, sparkulator folder)."""
    root = tmp_path_factory.mktemp("moe")
    jobs, out = [], {}
    for layout in LAYOUTS:
        src = moe_model.build(root / layout, layout, tokenizer=False)
        for preset in PRESETS:
            ref, ours = root / f"ref-{layout}-{preset}", root / f"ours-{layout}-{preset}"
            jobs.append((str(src), str(ref), preset))
            spk("quantize", src, ours, "--scheme", preset)
            out[layout, preset] = ref, ours
    run_model_free_ptq(jobs, ignore=["lm_head", "re:.*embed_tokens", "re:.*mlp\\.gate$"])
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("preset", PRESETS)
def test_tensors_equal_model_free_ptq_byte_for_byte(outputs, layout, preset):
    ref_dir, ours_dir = outputs[layout, preset]
    ref, ours = assert_same_tensors(ref_dir, ours_dir), load_dir(ours_dir)
    experts = moe_model.EXPERTS * 3 * 2  # gate, up, down per expert, 2 layers
    scales = [n for n in ref if n.endswith(".weight_scale") and ".mlp.experts." in n]
    assert len(scales) == experts  # every expert projection quantized: not a vacuous comparison
    assert not any(".experts.gate_up_proj" in n or ".experts.down_proj" in n for n in ours)
    for layer in range(2):
        assert ours[f"model.layers.{layer}.mlp.gate.weight"].shape == (moe_model.EXPERTS, 256)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("preset", PRESETS)
def test_quantization_config_parses_as_the_reference(outputs, layout, preset):
    ref, ours = map(quantization_config, outputs[layout, preset])
    assert (ours.format, ours.quantization_status) == (ref.format, ref.quantization_status)
    (theirs,), (mine,) = ref.config_groups.values(), ours.config_groups.values()
    mine, theirs = mine.model_dump(), theirs.model_dump()
    # For the integer presets sparkulator records the observer it emulates ("minmax"), the
    # reference None; vLLM and compressed-tensors' decompression read neither (the dense suites
    # compare the same way).
    mine["weights"].pop("observer"), theirs["weights"].pop("observer")
    assert mine == theirs
    assert "re:.*mlp\\.gate$" in ours.ignore


@pytest.mark.parametrize("layout", LAYOUTS)
def test_check_passes_our_moe_checkpoint(spk, outputs, layout):
    """Our W4A16 MoE output passes check: the experts quantized, the dense routers ignored."""
    report = json.loads(spk("check", outputs[layout, "W4A16"][1], "--json", expect=0).stdout)
    assert report["ok"] and report["quantized_modules"] == 2 * (4 + moe_model.EXPERTS * 3)


def test_compare_reads_the_fused_source_as_quantize_split_it(spk, outputs):
    """compare splits the fused 3-D source the way quantize did, so every expert is compared."""
    ours = outputs["fused", "W4A16"][1]
    report = json.loads(spk("compare", ours.parent / "fused", ours, "--json").stdout)
    names = {layer["module"] for layer in report["layers"]}
    assert "model.layers.1.mlp.experts.7.up_proj" in names and len(names) == 56
    assert all(0 < layer["rel_fro"] < 0.5 for layer in report["layers"])


def test_inspect_names_the_split_and_the_router_rule(spk, tmp_path):
    src = moe_model.build(tmp_path / "fused", "fused", tokenizer=False)
    report = json.loads(spk("inspect", src, "--json").stdout)
    reasons = {t["name"]: t["reason"] for t in report["tensors"]}
    split = reasons["model.layers.1.mlp.experts.7.up_proj.weight"]
    assert "split from the fused model.layers.1.mlp.experts.gate_up_proj" in split
    assert "GateLinear" in reasons["model.layers.0.mlp.gate.weight"]
    assert "quant_config=quant_config" in reasons["model.layers.0.mlp.gate.weight"]


def test_experts_stored_hidden_first_are_refused_where_the_reference_cuts_hidden(spk, tmp_path):
    """gpt-oss keeps its experts as batched-matmul weights (transformers' GptOssExperts):
    gate_up_proj [E, H, 2I] and down_proj [E, I, H]. model_free_ptq splits axis 1 as if it were
    [E, 2I, H], cutting the hidden axis: shown on the reference, whose gate_proj comes out
    [H / 2, 2I]. sparkulator refuses it, naming the file, the tensor and the axis, and writes
    nothing (docs/moe.md)."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM
    config = GptOssConfig(hidden_size=64, intermediate_size=48, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                          num_local_experts=4, num_experts_per_tok=2, vocab_size=128,
                          layer_types=["full_attention"], architectures=["GptOssForCausalLM"])
    torch.manual_seed(0)
    src = tmp_path / "gpt-oss"
    GptOssForCausalLM(config).to(torch.bfloat16).save_pretrained(src)
    fused = "model.layers.0.mlp.experts.gate_up_proj"
    assert load_dir(src)[fused].shape == (4, 64, 96)  # [E, H, 2I]
    ref = tmp_path / "ref"
    run_model_free_ptq([(src, ref, "FP8_DYNAMIC")], ignore=["lm_head"])
    gate = load_dir(ref)["model.layers.0.mlp.experts.0.gate_proj.weight"]
    assert gate.shape == (32, 96)  # half of hidden by both halves of gate/up: no expert's weight
    out = tmp_path / "out"
    r = spk("quantize", src, out, "--scheme", "FP8_DYNAMIC", expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    # The first fused tensor in the file is refused (safetensors orders names: down_proj first).
    for w in [f"{src}/model.safetensors: fused expert tensor 'model.layers.0.mlp.experts.down_proj'"
              " [4, 48, 64]", "hidden size (64) on axis 2, where a Linear weight [out, in] has it "
              "on axis 1", "[in, out]", "each one transposed"]:
        assert w in r.stderr, (w, r.stderr)
    assert not out.exists() and not list(tmp_path.glob(".out*"))


ROUTER_CASES = {"MixtralForCausalLM": True, "Qwen3MoeForCausalLM": False}


@pytest.fixture(scope="module")
def quantized_routers(tmp_path_factory):
    """architecture -> model_free_ptq's W4A16 output with no router ignore entry (one reference
    run for all cases)."""
    root = tmp_path_factory.mktemp("routers")
    jobs, out = [], {}
    for architecture in ROUTER_CASES:
        src = moe_model.build(root / architecture, "per_expert", tokenizer=False)
        config = json.loads((src / "config.json").read_text())
        config["architectures"] = [architecture]
        (src / "config.json").write_text(json.dumps(config))
        out[architecture] = root / f"ref-{architecture}"
        jobs.append((str(src), str(out[architecture]), "W4A16"))
    run_model_free_ptq(jobs, ignore=["lm_head", "re:.*embed_tokens"])
    return out


@pytest.mark.parametrize("architecture", ROUTER_CASES)
def test_check_flags_a_router_that_vllm_builds_without_quant_config(spk, quantized_routers,
                                                                    architecture):
    """model_free_ptq without a router ignore entry quantizes `mlp.gate` (it has no router default).
    vLLM builds Mixtral's GateLinear with no quant_config, so that checkpoint cannot load: check
    says quantized-router and names vLLM's reason; Qwen3-MoE's router takes the quant config, so
    the finding is not raised there. Its [8, 256] shape is judged by the kernel rules: vLLM 0.32's
    Marlin zero-pads it on CUDA, its CPU build refuses it (seen on vLLM CPU: "CPUWNA16LinearKernel
    cannot implement due to: Output size (8) not supported by CPUWNA16, supported sizes are
    multiples of 32"), so a warning naming the CPU, not an error."""
    ref, flagged = quantized_routers[architecture], ROUTER_CASES[architecture]
    assert "model.layers.0.mlp.gate.weight_packed" in load_dir(ref)
    report = json.loads(spk("check", ref, "--json", expect=1 if flagged else 0).stdout)
    routers = [f for f in report["findings"] if f["code"] == "quantized-router"]
    assert sorted(f["module"] for f in routers) == (
        ["model.layers.0.mlp.gate", "model.layers.1.mlp.gate"] if flagged else [])
    if flagged:
        assert "quant_config" in routers[0]["message"] and "weight_packed" in routers[0]["message"]
    platform = [f for f in report["findings"]
                if f["code"] == "kernel-rule-platform" and f["module"] == "model.layers.0.mlp.gate"]
    assert len(platform) == 1 and platform[0]["severity"] == "warning"
    assert "Output size (8) not supported by CPUWNA16" in platform[0]["message"]


def test_a_fused_expert_tensor_that_does_not_split_is_refused(spk, tmp_path):
    """model_free_ptq raises ValueError on a gate_up_proj whose rows do not split in two;
    quantize exits 2 naming the file and the tensor, and writes nothing."""
    import torch
    from safetensors.torch import save_file
    src = tmp_path / "src"
    src.mkdir()
    save_file({"model.layers.0.mlp.experts.gate_up_proj": torch.zeros(2, 5, 256, dtype=torch.bfloat16)},
              str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"]}))
    proc = spk("quantize", src, tmp_path / "out", expect=2)
    assert "model.safetensors" in proc.stderr and "experts.gate_up_proj" in proc.stderr
    assert "divisible by 2" in proc.stderr
    assert not (tmp_path / "out").exists()


LAGUNA_PRESETS = ["W4A16", "FP8_DYNAMIC"]  # one integer, one float preset (the Qwen3 cases run all)
LAGUNA_IGNORE = ["lm_head", "re:.*embed_tokens", "re:.*mlp\\.gate$"]
G_PROJ = "re:.*self_attn\\.g_proj$"  # out = heads = 4: kept dense by the W4A16 kernel rules


@pytest.fixture(scope="module")
def laguna_outputs(tmp_path_factory, spk):
    """preset -> (reference folder, sparkulator folder), and "router" -> the reference's W4A16
    output without the router ignore entry; "src" -> the BF16 Laguna."""
    root = tmp_path_factory.mktemp("laguna-moe")
    src = moe_model.build_laguna(root / "src", tokenizer=False)
    jobs, out = [], {"src": src}
    for preset in LAGUNA_PRESETS:
        ref, ours = root / f"ref-{preset}", root / f"ours-{preset}"
        spk("quantize", src, ours, "--scheme", preset)
        extra = [G_PROJ] if preset.startswith("W4A16") else []
        jobs.append((str(src), str(ref), preset, LAGUNA_IGNORE + extra))
        out[preset] = ref, ours
    out["router"] = root / "ref-router-quantized"
    jobs.append((str(src), str(out["router"]), "W4A16", ["lm_head", "re:.*embed_tokens", G_PROJ]))
    run_model_free_ptq(jobs, ignore=[])
    return out


@pytest.mark.parametrize("preset", LAGUNA_PRESETS)
def test_laguna_moe_equals_model_free_ptq_byte_for_byte(laguna_outputs, preset):
    ref_dir, ours_dir = laguna_outputs[preset]
    ref = assert_same_tensors(ref_dir, ours_dir)
    src = load_dir(laguna_outputs["src"])
    moe = [i for i, t in enumerate(moe_model.LAGUNA_LAYER_TYPES) if t == "sparse"]
    for i in moe:
        p = f"model.layers.{i}.mlp."
        bias = ref[p + "experts.e_score_correction_bias"]
        assert bias.dtype == src[p + "experts.e_score_correction_bias"].dtype
        assert bias.equal(src[p + "experts.e_score_correction_bias"]) and bias.abs().sum() > 0
        assert ref[p + "gate.weight"].equal(src[p + "gate.weight"])  # the router: dense, as is
        assert {p + f"shared_expert.{x}_proj.weight_scale" for x in ("gate", "up", "down")} <= set(ref)
    experts = [n for n in ref if n.endswith(".weight_scale") and ".mlp.experts." in n]
    assert len(experts) == len(moe) * moe_model.EXPERTS * 3
    g_proj_quantized = "model.layers.0.self_attn.g_proj.weight_scale" in ref
    assert g_proj_quantized != preset.startswith("W4A16")


@pytest.mark.parametrize("preset", LAGUNA_PRESETS)
def test_laguna_moe_ignore_names_what_stays_dense(laguna_outputs, preset):
    ours = quantization_config(laguna_outputs[preset][1])
    assert "re:.*mlp\\.gate$" in ours.ignore
    assert (G_PROJ in ours.ignore) == preset.startswith("W4A16")


def test_check_passes_our_laguna_moe_and_flags_the_references_router(spk, laguna_outputs):
    """Our W4A16 Laguna MoE passes check. The reference's, made without a router ignore entry, has
    `mlp.gate.weight_packed` in each MoE layer; check exits 1 with quantized-router for exactly
    those modules, naming vLLM's GateLinear without quant_config (vLLM's own error is in
    docs/moe.md and tests/e2e/moe_run.py)."""
    report = json.loads(spk("check", laguna_outputs["W4A16"][1], "--json", expect=0).stdout)
    moe = [i for i, t in enumerate(moe_model.LAGUNA_LAYER_TYPES) if t == "sparse"]
    assert report["ok"] and report["quantized_modules"] == (
        len(moe_model.LAGUNA_LAYER_TYPES) * 7 + len(moe) * moe_model.EXPERTS * 3)
    ref = laguna_outputs["router"]
    assert all(f"model.layers.{i}.mlp.gate.weight_packed" in load_dir(ref) for i in moe)
    report = json.loads(spk("check", ref, "--json", expect=1).stdout)
    routers = [f for f in report["findings"] if f["code"] == "quantized-router"]
    assert sorted(f["module"] for f in routers) == [f"model.layers.{i}.mlp.gate" for i in moe]
    assert "laguna.py" in routers[0]["message"] and "weight_packed" in routers[0]["message"]
