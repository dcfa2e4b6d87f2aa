"""The vLLM module maps (data/vllm_module_map/vllm-<version>.json, tools/vllm_module_map/generate.py).

- test_map_matches_installed_vllm: regenerates the map with the vLLM venv's interpreter (tests/e2e/env.py
  venv_dir(): $VENV; else the running interpreter's environment when it has vLLM; else the
  repository's .venv-vllm) and fails when it differs from the committed file of that version (or no
  file is committed for it). Skipped, with the reason, when that venv has no vLLM (SPK_REQUIRE
  makes that skip a failure: tests/python/suite_policy.py).
- test_docs_match_maps: docs/draft-kinds.md is what `generate.py --docs` writes from the maps.
- The rest assert facts read from vLLM's source on the committed data (no vLLM needed).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


GEN = ROOT / "tools" / "vllm_module_map" / "generate.py"
DATA = ROOT / "data" / "vllm_module_map"


def load(version: str) -> dict:
    return json.loads((DATA / f"vllm-{version}.json").read_text())


def arch(version: str, name: str) -> dict:
    e = load(version)["architectures"][name]
    assert e["error"] is None, f"{name} did not build on vLLM {version}: {e['error']}"
    return e


def module(entry: dict, suffix: str) -> tuple[str, dict]:
    found = [(n, m) for n, m in entry["modules"].items() if n.endswith(suffix)]
    assert found, f"no module ending in {suffix}: {sorted(entry['modules'])}"
    return found[0]


def test_map_matches_installed_vllm(vllm_venv):
    out = subprocess.run(["nice", "-n", "15", str(vllm_venv), str(GEN), "--print"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    fresh = json.loads(out.stdout)
    committed = DATA / f"vllm-{fresh['vllm_version']}.json"
    assert committed.exists(), (f"no committed map for vLLM {fresh['vllm_version']}: run "
                                f"generate.py --release {fresh['vllm_version']}")
    old = json.loads(committed.read_text())
    changed = sorted(a for a in set(old["architectures"]) | set(fresh["architectures"])
                     if old["architectures"].get(a) != fresh["architectures"].get(a))
    assert not changed, f"the map differs from {committed.name} for: {changed}"
    assert out.stdout == committed.read_text()


def test_docs_match_maps():
    from tools.vllm_module_map import docs
    assert (ROOT / "docs" / "draft-kinds.md").read_text() == docs.docs_text(docs.load_maps())


def test_maps_cover_the_registry_and_say_why_a_build_failed():
    for f in sorted(DATA.glob("vllm-*.json")):
        m = json.loads(f.read_text())
        assert m["architectures"], f.name
        for name, e in m["architectures"].items():
            assert e["methods"], name
            if e["error"] is None:
                assert "modules" in e and e["built"]["class"], f"{f.name} {name}"
            else:
                assert ":" in e["error"], f"{f.name} {name}: error without its text"


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_dflash_qwen3_qkv_is_quantized_and_its_dense_read_guarded(version):
    # qwen3_dflash.py builds the context K/V from `a.qkv_proj.weight[a.q_size:]` only when every
    # context projection is unquantized (the guard of _build_context_kv_buffers); a quantized
    # qkv_proj takes the other branch, so the map records the read with its guard and does not
    # call the weight read directly.
    e = arch(version, "DFlashDraftModel")
    assert e["methods"] == ["dflash"]
    assert e["file"] == "vllm/model_executor/models/qwen3_dflash.py"
    name, qkv = module(e, "self_attn.qkv_proj")
    assert qkv["class"] == "QKVParallelLinear" and qkv["scheme"] == "CompressedTensorsWNA16"
    assert not qkv["weight_read_directly"]
    assert [f["shard"] for f in qkv["fused"]] == ["q_proj", "k_proj", "v_proj"]
    reads = [r for r in e["weight_reads"]
             if "qkv_proj.weight[" in r["code"] and r["file"].endswith("qwen3_dflash.py")]
    assert reads and all("UnquantizedLinearMethod" in (r["guard"] or "") for r in reads)
    # The draft's layer i is vLLM's layer T + i (T: the target's layer count); the module tree
    # and so the checkpoint keep i.
    t = e["built"]["target_layers"]
    assert e["layer_offset"] == t
    assert name == f"model.layers.{t}.self_attn.qkv_proj" and qkv["path"] == "model.layers.0.self_attn.qkv_proj"
    # Its load_weights prepends "model." to every name but lm_head's and d2t's: a DFlash
    # checkpoint stores layers.0.self_attn.q_proj, and model.layers.0... would load nowhere.
    assert qkv["checkpoint_names"] == [f"layers.0.self_attn.{s}_proj" for s in "qkv"]
    assert qkv["checkpoint_shard_ids"] == {f"layers.0.self_attn.{s}_proj": s for s in "qkv"}
    assert qkv["checkpoint_names_source"] == "load_weights"
    _, fc = module(e, "model.fc")
    assert fc["scheme"] == "CompressedTensorsWNA16" and not fc["weight_read_directly"]
    # The draft's own quant config (get_draft_quant_config) gets no packed_modules_mapping:
    # configure_quant_config fills the target's only, so a draft's ignore entry must name
    # the fused module (docs/vllm.md, vllm#53116).
    assert e["packed_modules_mapping"] and e["quant_config_packed_modules_mapping"] == {}


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_eagle3_head_fc_is_quantized_lm_head_dense(version):
    for name in ("Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM"):
        e = arch(version, name)
        assert e["methods"] == ["eagle3"]
        _, fc = module(e, "model.fc")
        assert fc["class"] == "ReplicatedLinear" and fc["scheme"] == "CompressedTensorsWNA16"
        _, head = module(e, "lm_head")
        assert head["class"] == "ParallelLMHead" and head["scheme"] is None
        assert not [r for r in e["weight_reads"] if r["name"] in ("fc", "qkv_proj")]


def test_moe_mtp_fails_on_the_cpu_build_with_vllms_reason():
    # A MoE MTP layer needs a WNA16 MoE kernel: the CPU build has none, so vLLM 0.32's CPU build
    # cannot build it at W4A16; the map keeps vLLM's reason instead of dropping the architecture.
    e = load("0.32.0")["architectures"]["Qwen3NextMTP"]
    assert e["methods"] == ["mtp"] and "No WNA16 MoE backend" in e["error"]


def test_deepseek_mtp_eh_proj_is_a_torch_linear_never_quantized():
    # deepseek_mtp.py builds eh_proj as torch.nn.Linear (no quant method) and shared_head.head as a
    # ParallelLMHead; the MTP layer is vLLM's layer T (the target's layer count). The tiny config
    # keeps the MTP layer's MLP dense (first_k_dense_replace), see test_moe_mtp_fails_... for why.
    e = arch("0.32.0", "DeepSeekMTPModel")
    assert e["methods"] == ["mtp"] and e["built"]["architecture"] == "DeepSeekMTPModel"
    t = e["built"]["target_layers"]
    eh = e["modules"][f"model.layers.{t}.eh_proj"]
    assert eh["class"] == "Linear" and eh["quant_method"] is None and not eh["asked"]
    head = e["modules"][f"model.layers.{t}.head"]
    assert head["path"] == f"model.layers.{t}.shared_head.head" and head["scheme"] is None
    assert e["modules"][f"model.layers.{t}.self_attn.o_proj"]["scheme"] == "CompressedTensorsWNA16"


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_deepseek_mtp_checkpoint_names_follow_load_weights_rename(version):
    # deepseek_mtp.py builds the MTP layer's block under `mtp_block` (module path
    # model.layers.T.mtp_block.mlp.down_proj), but its load_weights (_rewrite_spec_layer_name)
    # inserts `mtp_block.` into checkpoint names, which are DeepSeek's model.layers.T.mlp.down_proj;
    # eh_proj is one of the names it leaves alone. The map has the names load_weights took.
    e = arch(version, "DeepSeekMTPModel")
    t = e["built"]["target_layers"]
    down = e["modules"][f"model.layers.{t}.mlp.down_proj"]
    assert down["path"] == f"model.layers.{t}.mtp_block.mlp.down_proj"
    assert down["checkpoint_names"] == [f"model.layers.{t}.mlp.down_proj"]
    assert down["checkpoint_names_source"] == "load_weights"
    gu = e["modules"][f"model.layers.{t}.mlp.gate_up_proj"]
    assert gu["checkpoint_shard_ids"] == {f"model.layers.{t}.mlp.gate_proj": 0,
                                          f"model.layers.{t}.mlp.up_proj": 1}
    assert e["modules"][f"model.layers.{t}.eh_proj"]["checkpoint_names"] == \
        [f"model.layers.{t}.eh_proj"]
    for m in e["modules"].values():
        assert not any("mtp_block" in n for n in m.get("checkpoint_names") or []), m["path"]


def test_laguna_dflash_keeps_reading_qkv_weight():
    # laguna_dflash.py reads `qkv_proj.weight` in _build_context_kv_buffers; its layer names carry
    # no offset. On the 0.32 CPU build the per-head gate g_proj (out = heads) has no W4A16 kernel.
    failed = load("0.32.0")["architectures"]["DFlashLagunaForCausalLM"]
    assert "CPUWNA16" in failed["error"] and failed["error_module"].endswith("self_attn.g_proj")
    e = arch("0.33.0", "DFlashLagunaForCausalLM")
    assert e["layer_offset"] == 0
    qkv = e["modules"]["model.layers.0.self_attn.qkv_proj"]
    assert qkv["scheme"] == "CompressedTensorsWNA16" and qkv["weight_read_directly"]
    assert e["modules"]["model.layers.0.self_attn.g_proj"]["class"] == "ColumnParallelLinear"


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_targets_fuse_qkv_and_gate_up(version):
    for name in ("Qwen3ForCausalLM", "LlamaForCausalLM"):
        e = arch(version, name)
        assert e["packed_modules_mapping"]["qkv_proj"] == ["q_proj", "k_proj", "v_proj"]
        _, gu = module(e, "layers.0.mlp.gate_up_proj")
        assert gu["scheme"] == "CompressedTensorsWNA16"
        assert gu["checkpoint_names"] == ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]
        _, emb = module(e, "embed_tokens")
        assert emb["scheme"] is None
        # As a method="draft_model" draft the model is the draft's own main model: its quant
        # config gets packed_modules_mapping and its layers keep their own numbers (no offset).
        d = e["as_draft_model"]
        assert d["error"] is None and d["built"]["method"] == "draft_model"
        assert d["quant_config_packed_modules_mapping"]["qkv_proj"] == ["q_proj", "k_proj", "v_proj"]
        assert "model.layers.0.self_attn.qkv_proj" in d["modules"]


def test_moe_experts_are_quantized_where_a_moe_kernel_exists():
    # On (faked) CUDA 0.33 the routed experts get CompressedTensorsWNA16MoEMethod and packed
    # weights; Qwen3-MoE's router (GateLinear, prefix ...mlp.gate) is asked and quantized unless
    # ignored, GLM-4.5's is built without a quant config.
    e = arch("0.33.0", "Qwen3MoeForCausalLM")
    ex = e["modules"]["model.layers.1.mlp.experts"]
    assert ex["quantized"] and ex["quant_method"] == "CompressedTensorsWNA16MoEMethod"
    assert e["modules"]["model.layers.1.mlp.gate"]["quantized"]
    g = arch("0.33.0", "Glm4MoeMTPModel")["modules"]["model.layers.2.mlp.gate"]
    assert not g["asked"] and not g["quantized"]


# hf_config_override's rules as speculative.py writes them (0.33's Step-3.5 test joins a
# model_type and an architecture with `or`): the model_types and checkpoint architectures each
# rewritten architecture is reached from.
OVERRIDE = '''
def hf_config_override(hf_config):
    if hf_config.model_type in ("step3p5", "step3p7") or hf_config.architectures[
        0
    ] in ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration"):
        hf_config.update({"n_predict": 1, "architectures": ["Step3p5MTP"]})
    if hf_config.model_type == "gemma4_assistant":
        hf_config.update({"architectures": ["Gemma4MTPModel"]})
    if n_predict > 1:
        hf_config.update({"architectures": ["UntestedMTP"]})
'''


def test_override_sources_reads_model_types_and_architectures_through_or():
    from tools.vllm_module_map.configs import mtp_architectures, override_sources
    found = override_sources(OVERRIDE)
    assert found == {
        "Step3p5MTP": {"model_types": ["step3p5", "step3p7"],
                       "architectures": ["Step3p5ForCausalLM",
                                         "Step3p7ForConditionalGeneration"]},
        "Gemma4MTPModel": {"model_types": ["gemma4_assistant"], "architectures": []}}
    assert mtp_architectures(OVERRIDE) == {"Step3p5MTP", "Gemma4MTPModel", "UntestedMTP"}


def test_step3p5_mtp_is_found_from_its_target_and_refuses_unstored_kv_params():
    for version in ("0.32.0", "0.33.0"):
        e = arch(version, "Step3p5MTP")
        assert e["built"]["target"] == "Step3p5ForCausalLM"
        refusal = e["refuses_unstored"]
        assert {p.rsplit(".", 1)[-1] for p in refusal["params"]} >= {
            "k_zero_point", "q_zero_point", "v_zero_point"}
        assert refusal["error"].startswith("RuntimeError: Some parameters like {param} are not")
    # Models whose load_weights does not check completeness record nothing.
    assert "refuses_unstored" not in arch("0.33.0", "DeepSeekMTPModel")


def test_every_committed_map_has_the_schema_version():
    # The C++ reader refuses a map without it (or of another type): every map carries the
    # generator's SCHEMA_VERSION, an int.
    from tools.vllm_module_map.configs import SCHEMA_VERSION
    maps = sorted(DATA.glob("vllm-*.json"))
    assert maps
    for f in maps:
        v = json.loads(f.read_text()).get("schema_version")
        assert type(v) is int and v == SCHEMA_VERSION == 2, f"{f.name}: schema_version {v!r}"
