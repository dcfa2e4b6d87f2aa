"""The vLLM module maps (data/vllm_module_map/vllm-<version>.json, tools/vllm_module_map/generate.py).

- test_map_matches_installed_vllm: regenerates the map with the vLLM venv's interpreter (tests/e2e/env.py
  venv_dir(): $VENV; else the running interpreter's environment when it has vLLM; else the
  repository's .venv-vllm) and fails when it differs from the committed file of that version (or no
  file is committed for it). Skipped, with the reason, when that venv has no vLLM (SPK_REQUIRE
  makes that skip a failure: tests/python/suite_policy.py).
- test_docs_match_maps: docs/draft-kinds.md is what `generate.py --docs` writes from the maps.
- The release procedure's parts without vLLM or a network: the wheel's METADATA pins and their
  sorting, the cache keyed by the wheel's sha256, the "Changes since the previous release"
  section from two small fake maps, every committed map's schema_version.
- The generator's source-derived rules on small snippets (recipes per release, derived recipes,
  checkpoint renames undone, refused speculators formats).
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
                         capture_output=True, text=True, timeout=1800, cwd=ROOT)
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


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
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


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
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


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
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


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
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
        assert type(v) is int and v == SCHEMA_VERSION == 3, f"{f.name}: schema_version {v!r}"


METADATA = """Metadata-Version: 2.4
Name: vllm
Requires-Dist: regex
Requires-Dist: transformers<5.23.0,>=5.16.1
Requires-Dist: protobuf==7.36.1; platform_machine == "s390x"
Requires-Dist: six>=1.16.0; python_version > "3.11"
Requires-Dist: torch==2.14.0
Requires-Dist: torchvision==0.29.0
Requires-Dist: nvidia-cutlass-dsl[cu13]==4.8.0
Requires-Dist: tokenspeed-mla==2.0.3; platform_system == "Linux"
Requires-Dist: pandas; extra == "bench"
"""


def test_release_pins_are_read_from_metadata_and_sorted():
    # The wheel's Requires-Dist lines that apply on Linux x86_64 CPython (markers evaluated,
    # extras left out); torch is substituted by a CPU build, CUDA-only packages stood in.
    from tools.vllm_module_map import wheel
    pins = wheel.pins(METADATA, "3.11")
    assert pins == ["regex", "transformers<5.23.0,>=5.16.1", "torch==2.14.0",
                    "torchvision==0.29.0", "nvidia-cutlass-dsl[cu13]==4.8.0",
                    "tokenspeed-mla==2.0.3"]
    assert "six>=1.16.0" in wheel.pins(METADATA, "3.12")
    c = wheel.classify(pins)
    assert c == {"pinned": ["regex", "transformers<5.23.0,>=5.16.1"], "torch": "torch==2.14.0",
                 "stood_in": ["torchvision==0.29.0", "nvidia-cutlass-dsl[cu13]==4.8.0",
                              "tokenspeed-mla==2.0.3"]}
    assert wheel.torch_candidates("torch==2.14.0") == [
        "torch==2.14.0+cpu", "torch==2.13.0+cpu", "torch==2.12.0+cpu", "torch==2.11.0+cpu"]
    assert wheel.torch_candidates(None) == ["torch"]


def test_release_cache_is_keyed_by_the_wheels_sha256(tmp_path, monkeypatch):
    import zipfile
    from tools.vllm_module_map import wheel
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert wheel.cache_root() == tmp_path / "cache" / "sparkulator" / "vllm-release"
    whl = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("vllm/__init__.py", "__version__ = '9.9.9'\n")
        z.writestr("vllm/_C.abi3.so", b"\0")
        z.writestr("vllm-9.9.9.dist-info/METADATA", METADATA)
    digest = wheel.sha256(whl)
    key = wheel.cache_key(digest)
    assert key == digest[:16] and len(digest) == 64
    with pytest.raises(ValueError):
        wheel.cache_key("not-a-digest")
    src = wheel.unpack(whl, tmp_path / key / "src")
    assert (src / "vllm" / "__init__.py").exists() and not (src / "vllm" / "_C.abi3.so").exists()
    assert "torch==2.14.0" in wheel.pins(wheel.metadata(src), "3.11")
    # A second unpack reuses the folder; another wheel's bytes give another key.
    (src / "vllm" / "marker").write_text("kept")
    assert (wheel.unpack(whl, src) / "vllm" / "marker").exists()
    with zipfile.ZipFile(whl, "a") as z:
        z.writestr("vllm/extra.py", "")
    assert wheel.cache_key(wheel.sha256(whl)) != key


def _fake_map(archs: dict, speculators: dict, refused: dict | None = None,
              options: dict | None = None) -> dict:
    return {"schema_version": 3, "architectures": archs, "speculators": speculators,
            "speculators_refused": refused or {}, "serve_options": options or {}}


def _draft(cls: str, file: str, modules: dict | None = None, error: str | None = None) -> dict:
    return {"role": "draft", "methods": ["mtp"], "registry": {"module": "m", "class": cls},
            "file": file, "error": error, "modules": modules or {}}


def test_changes_section_lists_what_differs_between_two_maps():
    from tools.vllm_module_map.changes import changes, changes_section
    q = {"quantized": True, "scheme": "CompressedTensorsWNA16", "quant_method": "X"}
    d = {"quantized": False, "scheme": None, "quant_method": "UnquantizedLinearMethod"}
    prev = _fake_map({
        "Kept": _draft("Kept", "a.py", {"m.fc": q, "m.o": q}),
        "Gone": _draft("Gone", "g.py"),
        "OldName": _draft("SameClass", "r.py"),
        "Moved": _draft("Moved", "old/moved.py", error="ImportError: x")},
        {"peagle": {"architectures": {"*": "P"}, "speculative_config": {"method": "eagle3"}},
         "eagle3": {"architectures": {"*": "E"}, "speculative_config": {"method": "eagle3"}}})
    cur = _fake_map({
        "Kept": _draft("Kept", "a.py", {"m.fc": d, "m.o": q, "m.new": q}),
        "NewName": _draft("SameClass", "r.py"),
        "Added": _draft("Added", "n.py", error="LookupError: no recipe"),
        "Moved": _draft("Moved", "new/moved.py")},
        {"eagle3": {"architectures": {"*": "E"}, "speculative_config": {"method": "eagle3"}}},
        refused={"peagle": "ValueError: P-EAGLE (parallel drafting EAGLE-3) is not supported."},
        options={"opt": {"values": ["a"]}})
    out = changes(prev, cur)
    assert "- architecture added: `Added` (mtp; `n.py`; not built: LookupError: no recipe)" in out
    assert "- architecture removed: `Gone` (mtp; `g.py`)" in out
    assert "- architecture renamed: `OldName` -> `NewName`" in out
    assert "- `Moved` moved: `old/moved.py` -> `new/moved.py`" in out
    assert "- `Moved` now built" in out
    assert ("  - `Kept`: `m.fc`: quantized (CompressedTensorsWNA16) -> dense (X)".replace(
        "(X)", "(UnquantizedLinearMethod)")) in out
    assert "  - `Kept`: modules now built: `m.new` (quantized (CompressedTensorsWNA16))" in out
    assert not any("`m.o`" in line for line in out)
    assert "- speculators format removed: `peagle`" in out
    assert ("- speculators format refused: `peagle`: \"ValueError: P-EAGLE (parallel drafting "
            "EAGLE-3) is not supported.\"") in out
    assert "- serve option added: `opt`: a (\"None\")" in out
    moved = _fake_map(cur["architectures"], cur["speculators"],
                      options={"opt": {"values": ["a"], "defined_at": "other.py:9"}})
    assert not any("serve option" in line for line in changes(cur, moved))
    assert changes(prev, prev) == ["- nothing the maps record"]
    section = changes_section({"1.0.0": prev, "1.1.0": cur}, ["1.0.0", "1.1.0"])
    assert section[1] == "## Changes since the previous release: vLLM 1.1.0 (from 1.0.0)"


def test_changes_compare_per_format_verdicts_on_one_platform_only():
    from tools.vllm_module_map.changes import changes
    q = {"quantized": True, "scheme": "CompressedTensorsWNA16", "quant_method": "X"}
    gpu = {"pack-quantized": {"base": True, "platform": "CUDA capability 90"},
           "mxfp4-pack-quantized": {"base": False, "platform": "CUDA capability 90"},
           "nvfp4-pack-quantized": {"base": False, "platform": "CUDA capability 90"}}

    def arch(mx_dense: bool, nv_error: str | None):
        a = _draft("K", "k.py", {"m.fc": q, "m.o": q})
        a["scheme_verdicts"] = {
            "mxfp4-pack-quantized": {"error": None, "modules": (
                {"m.fc": {"quantized": False}} if mx_dense else {})},
            "nvfp4-pack-quantized": {"error": nv_error, "modules": {}}}
        return a

    prev = _fake_map({"K": arch(False, None)}, {})
    cur = _fake_map({"K": arch(True, "ValueError: no FP4 kernel")}, {})
    prev["schemes"] = cur["schemes"] = gpu
    out = changes(prev, cur)
    assert "  - `K`: under mxfp4-pack-quantized: `m.fc` quantized -> dense" in out
    assert "  - `K`: under nvfp4-pack-quantized: no longer built: ValueError: no FP4 kernel" in out
    assert not any("`m.o`" in line for line in out)
    # Built on another platform (0.32's CPU build), the per-format verdicts are not compared.
    cpu = {f: dict(v, platform="CPU") for f, v in gpu.items()}
    prev["schemes"] = cpu
    out = changes(prev, cur)
    assert not any("under " in line for line in out)
    assert ("- per-format verdicts not compared (built on another platform than the previous "
            "map's): `mxfp4-pack-quantized`, `nvfp4-pack-quantized`") in out


def test_a_release_recipe_holds_for_later_releases():
    # 0.33's Step-3.5 recipe (layer_types padded with the MTP layer) serves 0.34, whose code is
    # 0.33's; 0.32 keeps RECIPES'.
    from tools.vllm_module_map.configs import RECIPES, RELEASE_RECIPES, recipe
    step = RELEASE_RECIPES["0.33"]["step3p5_mtp"]
    assert recipe("Step3p5MTP", "step3p5_mtp", "0.34.0") is step
    assert recipe("Step3p5MTP", "step3p5_mtp", "0.33.0") is step
    assert recipe("Step3p5MTP", "step3p5_mtp", "0.32.0") is RECIPES["step3p5_mtp"]
    # Two packages' modules share the last name part `dspark`: the full name decides.
    assert recipe("MuseSparkDSparkModel", "vllm.models.muse_spark.common.dspark", "0.34.0")[0] \
        == "muse_spark_dspark"
    assert recipe("X", "vllm.models.other.common.dspark", "0.34.0") is None


RENAMES = '''
def hf_config_override(hf_config):
    initial_architecture = hf_config.architectures[0]
    if initial_architecture == "DFlash2DraftModel" and getattr(
        hf_config, "no_rope_layers", None
    ):
        hf_config.update({"architectures": ["DFlash2RicursiveDraftModel"]})
        return hf_config
'''


def test_a_draft_without_a_recipe_takes_its_base_class_and_the_rename_asked():
    from tools.vllm_module_map.configs import (CHECKPOINT_ARCH, DFLASH2, derive_recipe,
                                               renamed_from)
    rule = renamed_from(RENAMES)
    assert rule == {"DFlash2RicursiveDraftModel": {"architectures": ["DFlash2DraftModel"],
                                                   "keys": ["no_rope_layers"]}}
    base = type("DFlash2Qwen3ForCausalLM", (), {"__module__":
                                                "vllm.model_executor.models.qwen3_dflash2"})
    cls = type("RicursiveDFlash2ForCausalLM", (base,), {"__module__": "vllm.x.ricursive"})
    (model_type, extra, *_), derived = derive_recipe(
        cls, "DFlash2RicursiveDraftModel", "0.34.0", rule["DFlash2RicursiveDraftModel"], {})
    assert model_type == "qwen3" and extra["dflash_config"] == DFLASH2["dflash_config"]
    assert extra[CHECKPOINT_ARCH] == "DFlash2DraftModel" and extra["no_rope_layers"] == [0]
    assert derived["base_class"] == "DFlash2Qwen3ForCausalLM"
    orphan = type("Orphan", (), {"__module__": "vllm.x.orphan"})
    with pytest.raises(LookupError):
        derive_recipe(orphan, "Orphan", "0.34.0", None, {})


RENAMING_MODEL = '''
_CHECKPOINT_PREFIX = "language_model.model.dspark."


class M:
    @staticmethod
    def _rename_checkpoint_weights(weights):
        for name, tensor in weights:
            name = name.removeprefix(_CHECKPOINT_PREFIX)
            name = name.replace(".decoder_layer.", ".")
            name = name.replace(".weight_scale_inv", ".weight_scale")
            yield name, tensor

    def load_weights(self, weights):
        return super().load_weights(self._rename_checkpoint_weights(weights))

    def unrelated(self, name):
        return name.removeprefix("ignored.")
'''


def test_checkpoint_names_undo_the_renames_load_weights_applies(tmp_path):
    # MiniMax-M3 DSpark's load_weights strips language_model.model.dspark. and .decoder_layer.:
    # the checkpoint's names are the module names with both put back.
    from tools.vllm_module_map.load_probe import renamed
    from tools.vllm_module_map.scan import checkpoint_renames
    (tmp_path / "m.py").write_text(RENAMING_MODEL)
    r = checkpoint_renames(["m.py"], tmp_path)
    assert r == {"prefixes": ["language_model.model.dspark."], "inserted": ["decoder_layer"],
                 "rewrites": []}
    assert renamed(["layers.0.mlp.down_proj", "fc"], r) == [
        "language_model.model.dspark.layers.0.decoder_layer.mlp.down_proj",
        "language_model.model.dspark.fc"]
    assert renamed(["layers.0.mlp.down_proj"], {"prefixes": [], "inserted": []}) == []


def test_rename_dict_keys_are_the_load_weights_dicts_of_dotted_names(tmp_path):
    # LongCat MTP's new_to_old_names_mapping: the names load_probe.dense_only feeds; a dict of
    # other values, or outside load_weights, names no checkpoint tensor.
    from tools.vllm_module_map.scan import rename_dict_keys
    (tmp_path / "m.py").write_text(
        "class M:\n"
        "    def load_weights(self, weights):\n"
        "        names = {'model.mtp.layers.0.eh_proj.weight': 'eh_proj.weight',\n"
        "                 'model.mtp.layers.0.eh_proj.weight_scale_inv':\n"
        "                 'eh_proj.weight_scale_inv'}\n"
        "        shards = {'gate_proj': 0}\n"
        "    def other(self):\n"
        "        return {'a.weight': 'b.weight'}\n")
    assert rename_dict_keys(["m.py"], tmp_path) == ["model.mtp.layers.0.eh_proj.weight",
                                                    "model.mtp.layers.0.eh_proj.weight_scale_inv"]
    for version in ("0.32.0", "0.33.0", "0.34.0"):  # found by feeding them to load_weights
        only = arch(version, "LongCatFlashMTPModel")["load_weights_takes_only"]
        assert only["params"] == ["weight", "weight_scale_inv"], version
        assert only["error"] == "KeyError: 'model.mtp.layers.0.eh_proj.weight_packed'", version


def test_a_format_vllm_refuses_outright_is_not_served():
    from tools.vllm_module_map.speculators import split_refused
    table = {"eagle3": {"architectures": {"*": "E"}, "speculative_config": {"method": "eagle3"}},
             "peagle": {"architectures": {}, "error": "ValueError: P-EAGLE (parallel drafting "
                                                      "EAGLE-3) is not supported."}}
    served, refused = split_refused(table)
    assert list(served) == ["eagle3"]
    assert refused == {"peagle": "ValueError: P-EAGLE (parallel drafting EAGLE-3) is not "
                                 "supported."}


def test_0_34_drops_peagle_and_records_vllms_refusal():
    m = load("0.34.0")
    assert "peagle" not in m["speculators"] and "peagle" in load("0.33.0")["speculators"]
    assert m["speculators_refused"]["peagle"] == \
        "ValueError: P-EAGLE (parallel drafting EAGLE-3) is not supported."
    assert not {"PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM"} & \
        set(m["architectures"])
    env = m["environment"]
    assert env["substituted"]["torch==2.14.0"].endswith("+cpu")
    assert any(p.startswith("nvidia-cutlass-dsl") for p in env["stood_in"])
    assert len(env["wheel"]["sha256"]) == 64


def test_0_34_new_kinds_build_from_vllms_code():
    e = arch("0.34.0", "DFlash2RicursiveDraftModel")
    assert e["methods"] == ["dflash"] and e["built"]["class"] == "RicursiveDFlash2ForCausalLM"
    assert e["built"]["recipe_derived"]["base_class"] == "DFlash2Qwen3ForCausalLM"
    assert e["built"]["checkpoint_architecture"] == "DFlash2DraftModel"
    # MiniMax-M3 DSpark: the names its load_weights renames from, as the checkpoint holds them.
    e = arch("0.34.0", "DSparkMiniMaxDraftModel")
    down = next(m for m in e["modules"].values() if m["path"].endswith("mlp.down_proj"))
    assert down["checkpoint_names"] == \
        ["language_model.model.dspark.layers.0.decoder_layer.mlp.down_proj"]
    # Nemotron 3.5 Transcribe's MTP head: the speech checkpoint's llm.mtp.*.
    e = arch("0.34.0", "Nemotron3_5TranscribeMTPModel")
    assert e["built"]["target"] == "Nemotron3_5TranscribeForConditionalGeneration"
    names = [n for m in e["modules"].values() for n in m.get("checkpoint_names") or []]
    assert names and all(n.startswith("llm.mtp.") for n in names)
    for name in ("BailingMoeV3MTPModel", "Glm4MoeLiteMTPModel", "Glm4MoeMTPModel", "Qwen3_5MTP",
                 "Step3p5MTP"):
        arch("0.34.0", name)


def test_scheme_verdicts_keep_only_what_differs_from_the_base():
    # schemes.merge: per other format, the modules whose "quantized" differs from the base's
    # (every format asks the same question: a *weight_packed or *weight_scale parameter), and
    # vLLM's refusal to build the architecture under it.
    from tools.vllm_module_map.schemes import merge, quantized
    assert quantized(["weight_packed", "weight_scale"]) and quantized(["weight", "weight_scale"])
    assert quantized(["w13_weight", "w13_weight_scale"]) and not quantized(["weight", "bias"])

    def mod(q: bool) -> dict:
        return {"quantized": q, "quant_method": "M" if q else None, "scheme": "S" if q else None}
    base = {"quantization_config": {"format": "pack-quantized"}, "faked_platform": None,
            "architectures": {"A": {"error": None, "modules": {"x": mod(True), "y": mod(False)}},
                              "B": {"error": None, "modules": {"x": mod(True)}},
                              "C": {"error": "E: base"}}}
    fp8 = {"quantization_config": {"format": "float-quantized"},
           "architectures": {"A": {"error": None, "modules": {"x": mod(False), "y": mod(False)}},
                             "B": {"error": "RuntimeError: no", "error_module": "x"},
                             "C": {"error": "E: base"}}}
    m = merge(base, {"float-quantized": fp8}, "CUDA capability 90")
    assert m["schemes"]["pack-quantized"]["base"] and not m["schemes"]["float-quantized"]["base"]
    assert m["schemes"]["float-quantized"]["platform"] == "CUDA capability 90"
    a = m["architectures"]
    assert a["A"]["scheme_verdicts"] == {"float-quantized": {"error": None, "modules": {
        "x": mod(False)}}}
    assert a["B"]["scheme_verdicts"] == {"float-quantized": {
        "error": "RuntimeError: no", "error_module": "x", "modules": {}}}
    assert a["C"]["scheme_verdicts"]["float-quantized"]["modules"] == {}
    # A module the format's build lacks is not quantized under it; one only it has is left out.
    fp8["architectures"]["A"]["modules"] = {"z": mod(True)}
    fp8["architectures"]["B"] = {"error": None, "modules": {}}
    m = merge(base, {"float-quantized": fp8}, "x")["architectures"]
    assert m["A"]["scheme_verdicts"]["float-quantized"]["modules"] == {"x": mod(False)}
    assert m["B"]["scheme_verdicts"]["float-quantized"]["modules"] == {"x": mod(False)}


def test_every_map_records_each_format_for_each_built_architecture():
    from tools.vllm_module_map.configs import BASE_FORMAT, SCHEME_CONFIGS
    for f in sorted(DATA.glob("vllm-*.json")):
        m = json.loads(f.read_text())
        assert set(m["schemes"]) == set(SCHEME_CONFIGS), f.name
        assert [k for k, s in m["schemes"].items() if s["base"]] == [BASE_FORMAT]
        for name, e in m["architectures"].items():
            assert set(e["scheme_verdicts"]) == set(SCHEME_CONFIGS) - {BASE_FORMAT}, name
