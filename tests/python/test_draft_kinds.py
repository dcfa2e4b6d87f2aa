"""Every draft kind vLLM builds, planned and checked from vLLM's own module map.

For each draft architecture of the newest module map (data/vllm_module_map/, made by vLLM itself:
tools/vllm_module_map/generate.py), a checkpoint in that architecture's exact names and config:
the names its `load_weights` accepts and the parameters it holds, random F16 weights. Then:
- `quantize` never quantizes a weight that vLLM builds without a quantization scheme, reads in its
  forward, or holds as a plain parameter (a head quantized silently), and quantizes the decoder
  Linears vLLM does take quantized;
- the serve line carries the architecture's own method (dspark, eagle, mtp, ...);
- `check` passes the output, and fails a copy quantized with `--preset none` (every Linear weight,
  heads too) with the finding that names each head vLLM cannot load quantized.
The kinds quantize refuses (and check fails) are test_draft_kinds_refused.py's. The map's own
agreement with vLLM is test_vllm_module_map.py's; this tests that the tool follows it.
"""
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# The generator's layout of a speculators-format config (no vLLM needed to import it).
from tools.vllm_module_map.speculators import config_dict as speculators_config  # noqa: E402

MAPS = Path(__file__).resolve().parents[2] / "data" / "vllm_module_map"
NEWEST = max(MAPS.glob("vllm-*.json"),
             key=lambda p: tuple(int(x) for x in p.stem.split("-")[1].split(".")))
MAP = json.loads(NEWEST.read_text())
RELEASE = MAP["vllm_version"]
SIDE = 256  # every weight [SIDE, SIDE]: whole groups of 128 and Marlin tiles

# A DFlash draft's q/k/v stay dense by the family rule (vLLM's guarded read of qkv_proj.weight;
# docs/check.md); routers by the router rule. The map's verdict on them is not the plan's.
FAMILY_DENSE_LEAVES = {"q_proj", "k_proj", "v_proj", "qkv_proj", "g_proj", "eh_proj", "gate",
                       "shared_expert_gate"}
QKV_LEAVES = {"q_proj", "k_proj", "v_proj", "qkv_proj"}
MAP_ERROR_CODES = {"vllm-map-no-scheme", "vllm-map-plain-param", "vllm-map-weight-read-directly"}


def draft_architectures():
    return sorted(name for name, a in MAP["architectures"].items()
                  if a.get("error") is None and a["role"] == "draft"
                  and a["methods"] != ["extract_hidden_states"])


# The map fields by which vLLM refuses a kind from any compressed-tensors checkpoint, each with the
# check finding that fails the checkpoint: its load_weights wants the KV-cache parameters only a
# kv_cache_scheme stores (Step-3.5's MTP up to 0.33.0), or takes only dense names for its Linears
# (LongCat-Flash MTP: quantize keeps them dense, and nothing is left to quantize).
REFUSED_BY = {"refuses_unstored": "vllm-refuses-unstored-params",
              "load_weights_takes_only": "vllm-load-weights-dense-only"}


def builds_nothing_quantized(arch: dict) -> bool:
    """vLLM builds no module of the kind quantized (DFlash2Beam: every Linear is built with
    quant_config=None): quantize refuses it, the output would be the source."""
    return not any(m.get("quantized") for m in arch["modules"].values())


def quantize_refuses(arch: dict) -> bool:
    """A map entry of a kind quantize refuses for its release rather than write: vLLM refuses it
    from any compressed-tensors checkpoint (REFUSED_BY), builds it with no quantized Linear, or
    loads no checkpoint of it at all ("load_fails": the release is judged to lack it)."""
    return (any(arch.get(field) for field in REFUSED_BY) or builds_nothing_quantized(arch)
            or bool(arch.get("load_fails")))


def refused_architectures():
    """The newest map's kinds quantize refuses (quantize_refuses)."""
    return [n for n in draft_architectures() if quantize_refuses(MAP["architectures"][n])]


def planned_architectures():
    return [n for n in draft_architectures() if n not in refused_architectures()]


def module_weights(arch: dict) -> dict:
    """Checkpoint weight name -> the map's module entry, for every Linear-like module."""
    weights = {}
    for entry in arch["modules"].values():
        if entry["class"] in ("Attention",) or "Experts" in entry["class"]:
            continue
        for name in entry.get("checkpoint_names") or [entry["path"]]:
            weights[name + ".weight"] = entry
    return weights


def plain_weights(arch: dict) -> list:
    return [p for p in arch["other_params"] if p not in module_weights(arch)]


def config_for(name: str, arch: dict, extra: dict | None = None) -> dict:
    """config.json of the architecture, with `extra` merged into the model's own config (a
    speculators draft's transformer_layer_config)."""
    built = arch["built"]
    config = {"architectures": [name], "model_type": built["model_type"], "hidden_size": SIDE,
              "torch_dtype": "float16", **built.get("config_extra", {})}
    if built.get("config_format", "").startswith("speculators "):
        # vLLM reaches it only from a speculators-format config (PEAGLE): the generator's own
        # layout of one, with no top-level architecture, so that only the format names it (vLLM
        # replaces that list with the format's architecture; speculators/algos.py).
        return speculators_config(built["config_format"].split()[1], {**config, **(extra or {})},
                                  "target", [])
    if "mtp" in arch["methods"]:
        config["architectures"] = [built["target"]]  # an MTP model's config names the target
        config.setdefault("num_nextn_predict_layers", 1)
    elif arch.get("layer_offset"):
        config.setdefault("num_target_layers", built["target_layers"])
    return {**config, **(extra or {})}


def square_layout(weight: str) -> list:
    """The map's name itself, [SIDE, SIDE] (a norm or a plain parameter [SIDE])."""
    shape = (SIDE,) if "norm" in weight or not weight.endswith(".weight") else (SIDE, SIDE)
    return [(weight, shape)]


def write_checkpoint(folder: Path, name: str, arch: dict, layout=square_layout,
                     config: dict | None = None, base: dict | None = None) -> None:
    """Every weight of the architecture, random F16 (an integer one, zeros). `layout(weight)`
    gives the (name, shape[, torch dtype name]) a weight is stored as (default: the map's name,
    square); test_e2e_draft_kinds.py passes the names and shapes vLLM's load_weights reads, with `config` (merged into config_for's) and
    `base` (tensors stored with the draft's: an MTP checkpoint's target)."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    tensors = dict(base or {})
    for weight in list(module_weights(arch)) + plain_weights(arch):
        for stored, shape, *dtype in layout(weight):
            if dtype and "int" in dtype[0]:
                # A vocabulary map (d2t): integer offsets, zero maps each id to itself.
                tensors[stored] = np.zeros(shape, dtype=dtype[0].removeprefix("torch."))
                continue
            tensors[stored] = (rng.standard_normal(shape) * 0.02).astype(np.float16)
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config_for(name, arch, config)))


def leaf(name: str) -> str:
    return name.removesuffix(".weight").rsplit(".", 1)[-1]


def quantized_modules(folder: Path) -> set:
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        return {k.removesuffix(".weight_packed") for k in f.keys() if k.endswith(".weight_packed")}


def target_args(root: Path, name: str) -> list:
    """The --target a kind is quantized and checked with: a w4a16 target for a draft vLLM builds
    under the target's quantization config (quantize refuses it without one), else none."""
    if not takes_target_config(name):
        return []
    return ["--target", write_target(root / name / "w4-target", quantized=True)]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory, spk):
    """name -> (source, default output, --preset none output, the plan's --json or, for a kind
    quantize refuses, its message)."""
    root = tmp_path_factory.mktemp("kinds")
    out = {}
    for name in draft_architectures():
        arch = MAP["architectures"][name]
        src = root / name / "src"
        write_checkpoint(src, name, arch)
        proc = spk("quantize", src, root / name / "q", "--json", "--no-fsync",
                   *target_args(root, name), expect=2 if name in refused_architectures() else 0)
        plan = json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr
        spk("quantize", src, root / name / "all", "--preset", "none", "--no-fsync")
        out[name] = (src, root / name / "q", root / name / "all", plan)
    return out


def check_findings(spk, ckpt, *args) -> tuple:
    """check's exit code and findings, judged for the newest map's release."""
    proc = spk("check", ckpt, "--vllm-version", RELEASE, "--json", *args, expect=None)
    return proc.returncode, json.loads(proc.stdout)["findings"]


def errors_of(findings: list) -> list:
    return [f for f in findings if f["severity"] == "error"]


def expected_map_errors(name: str, stored: set) -> set:
    """The modules of `stored` (quantized) that check must fail by the map: built with no scheme,
    read in the forward (a DFlash draft's q/k/v are the release rules' instead), or held as a
    plain parameter."""
    arch = MAP["architectures"][name]
    dflash = "dflash_config" in config_for(name, arch) or "DFlash" in name
    expected = set()
    for weight, entry in module_weights(arch).items():
        module = weight.removesuffix(".weight")
        if module not in stored:
            continue
        if entry.get("weight_read_directly"):
            # check's read_at: the first unguarded read of the module's leaf (vllm_module_map.cc).
            vllm_leaf = entry["prefix"].rsplit(".", 1)[-1]
            read_at = next((r["file"] for r in arch["weight_reads"]
                            if r["name"] == vllm_leaf and r.get("guard") is None), "")
            if not (dflash and leaf(module) in QKV_LEAVES and read_at.endswith("_dflash.py")):
                expected.add(module)
        elif not entry["quantized"]:
            expected.add(module)
    for weight in plain_weights(arch):
        if weight.removesuffix(".weight") in stored:
            expected.add(weight.removesuffix(".weight"))
    return expected


@pytest.mark.parametrize("name", planned_architectures())
def test_plan_quantizes_only_what_vllm_loads_quantized(kinds, name):
    arch = MAP["architectures"][name]
    _, q, _, plan = kinds[name]
    stored = quantized_modules(q)
    for weight, entry in module_weights(arch).items():
        module = weight.removesuffix(".weight")
        vllm_takes_it = entry["quantized"] and not entry.get("weight_read_directly")
        if module in stored:
            assert vllm_takes_it, f"{name}: {module} quantized, but vLLM {RELEASE} builds it as " \
                f"{entry['class']} (quantized={entry['quantized']}, read directly=" \
                f"{entry.get('weight_read_directly')})"
        elif vllm_takes_it and leaf(weight) not in FAMILY_DENSE_LEAVES:
            reasons = {t["name"]: t["reason"] for t in plan["tensors"]}
            pytest.fail(f"{name}: {module} left dense ({reasons.get(weight)}), though vLLM "
                        f"{RELEASE} takes it quantized")
    for weight in plain_weights(arch):
        assert weight.removesuffix(".weight") not in stored, f"{name}: plain parameter {weight}"
    assert plan["vllm_module_map"]["release"] == RELEASE


@pytest.mark.parametrize("name", planned_architectures())
def test_serve_line_uses_the_architectures_method(kinds, name):
    method = next(m for m in MAP["architectures"][name]["methods"]
                  if m not in ("target", "draft_model"))
    serve = kinds[name][3]["serve"]
    assert f'"method":"{method}"' in serve, serve
    # A speculators-format draft is served with the fields its format fixes (PEAGLE:
    # parallel_drafting) and the format's method.
    built = MAP["architectures"][name]["built"]
    for key, value in built.get("speculative_config", {}).items():
        assert f'"{key}":{json.dumps(value)}' in serve, serve


@pytest.mark.parametrize("name", planned_architectures())
def test_check_passes_the_plan_and_names_each_head_quantized_anyway(kinds, spk, tmp_path, name):
    _, q, everything, _ = kinds[name]
    # The plan's output, checked beside the target it was planned for: no error at all.
    rc, findings = check_findings(spk, q, *target_args(tmp_path, name))
    assert (rc, errors_of(findings)) == (0, []), findings
    report = json.loads(spk("check", q, "--vllm-version", RELEASE, "--json", expect=None).stdout)
    assert report["vllm_module_map"] == RELEASE
    # The head-quantized copy: each module vLLM builds with no scheme, reads in its forward, or
    # holds as a parameter, is an error naming it, and only those.
    rc, findings = check_findings(spk, everything)
    flagged = {f["module"] for f in findings if f["code"] in MAP_ERROR_CODES}
    assert flagged == expected_map_errors(name, quantized_modules(everything)), findings
    assert rc == (1 if errors_of(findings) else 0), findings


def test_the_kinds_of_the_field_are_covered():
    # The kinds the field moved to, by vLLM's architecture names: each has a built map entry.
    for name in ("Qwen3DSparkModel", "Gemma4DSparkModel", "DFlash2DraftModel", "Qwen3XPressModel",
                 "MiMoMTPModel", "EagleLlamaForCausalLM", "DeepSeekMTPModel", "Qwen3NextMTP",
                 "Glm4MoeMTPModel"):
        assert name in draft_architectures(), name


def test_a_release_newer_than_every_map_is_checked_with_a_warning(kinds, spk):
    _, q, _, _ = kinds["Qwen3DSparkModel"]
    report = json.loads(spk("check", q, "--vllm-version", "0.99.0", "--json",
                            expect=None).stdout)
    warning = [f for f in report["findings"] if f["code"] == "vllm-release-not-mapped"]
    assert warning and f"judged by the map of vLLM {RELEASE}" in warning[0]["message"], \
        report["findings"]


def takes_target_config(name: str) -> bool:
    a = MAP["architectures"][name]
    return a.get("quant_config_from") == "target" and "mtp" not in a["methods"]


def write_target(folder: Path, quantized: bool) -> Path:
    config = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": SIDE,
              "num_hidden_layers": 2, "torch_dtype": "bfloat16"}
    if quantized:
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                "group_size": 128}}},
            "ignore": ["lm_head"]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_some_drafts_take_the_targets_quant_config():
    # vLLM 0.33's Gemma4 DSpark (gemma4_dspark.py) builds its Linears with vllm_config.quant_config;
    # its DFlash and EAGLE-3 drafts ask their own (get_draft_quant_config).
    assert takes_target_config("Gemma4DSparkModel")
    assert not takes_target_config("DFlashDraftModel")
    assert not takes_target_config("Eagle3LlamaForCausalLM")


@pytest.mark.parametrize("name", [n for n in draft_architectures() if takes_target_config(n)])
def test_a_draft_built_under_the_targets_config_is_planned_from_it(kinds, spk, tmp_path, name):
    src, q, _, plan = kinds[name]
    assert quantized_modules(q), f"{name}: the plan beside a w4a16 target quantizes nothing"
    # Without --target quantize refuses: vLLM would build the draft from a config it never reads.
    proc = spk("quantize", src, tmp_path / "refused", "--no-fsync", expect=2)
    arch = MAP["architectures"][name]
    assert (f"vLLM {RELEASE} builds {name} ({arch['file']}) under the target's quantization "
            "config and never reads the draft's own: pass --target T") in proc.stderr, proc.stderr
    assert not (tmp_path / "refused").exists()
    code = "vllm-map-draft-takes-target-config"

    def findings(ckpt, *extra):
        rc, found = check_findings(spk, ckpt, *extra)
        return rc, [f for f in found if f["code"] == code]

    rc, found = findings(q, "--target", write_target(tmp_path / "bf16", quantized=False))
    assert rc == 1 and [f["severity"] for f in found] == ["error"], found
    assert arch["file"] in found[0]["message"]
    # Beside a target quantized the same way it may load: a warning, not an error.
    _, found = findings(q, "--target", write_target(tmp_path / "w4", quantized=True))
    assert [f["severity"] for f in found] == ["warning"], found
    # The field's report: a dense draft beside a quantized target is built quantized.
    rc, found = findings(src, "--target", tmp_path / "w4")
    assert rc == 1 and [f["severity"] for f in found] == ["error"], found
    _, found = findings(src, "--target", tmp_path / "bf16")
    assert found == []
    # Planned beside the dense target, it stays dense, and check passes it.
    spk("quantize", src, tmp_path / "dense", "--no-fsync", "--target", tmp_path / "bf16")
    assert quantized_modules(tmp_path / "dense") == set()
    assert findings(tmp_path / "dense", "--target", tmp_path / "bf16") == (0, [])


def test_a_draft_that_reads_its_own_config_is_not_flagged(kinds, spk, tmp_path):
    _, q, _, plan = kinds["DFlashDraftModel"]
    assert not any("under the target's quantization config" in w for w in plan["warnings"])
    proc = spk("check", q, "--vllm-version", RELEASE, "--json", "--target",
               write_target(tmp_path / "bf16", quantized=False), expect=None)
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert "vllm-map-draft-takes-target-config" not in codes


def low_bits_mtp(spk, ckpt) -> list:
    report = json.loads(spk("check", ckpt, "--vllm-version", RELEASE, "--json",
                            expect=None).stdout)
    return [f for f in report["findings"] if f["code"] == "mtp-layer-low-bits"]


def test_int4_mtp_layers_are_flagged_and_the_fix_keeps_them_dense(spk, tmp_path):
    # DeepSeek's MTP layer is the layer after num_hidden_layers, in the model's own checkpoint.
    name = "DeepSeekMTPModel"
    arch = MAP["architectures"][name]
    src = tmp_path / "src"
    write_checkpoint(src, name, arch, config={"num_hidden_layers": 2})
    mtp_modules = {w.removesuffix(".weight") for w in module_weights(arch)
                   if w.startswith("model.layers.2.")}
    plan = json.loads(spk("quantize", src, tmp_path / "w4", "--no-fsync", "--json").stdout)
    assert mtp_modules & quantized_modules(tmp_path / "w4")
    # quantize says so too, with the same fix.
    (warned,) = [w for w in plan["warnings"] if "MTP layer(s) model.layers.2." in w]
    (found,) = low_bits_mtp(spk, tmp_path / "w4")
    assert found["severity"] == "warning"
    assert "model.layers.2." in found["message"] and "4 bits" in found["message"], found
    ignore = re.search(r"--ignore '([^']+)'", found["fix"]).group(1)
    assert f"--ignore '{ignore}'" in warned, (warned, found["fix"])
    spk("quantize", src, tmp_path / "fixed", "--ignore", ignore, "--no-fsync")
    assert not mtp_modules & quantized_modules(tmp_path / "fixed")
    assert low_bits_mtp(spk, tmp_path / "fixed") == []
    plan = json.loads(spk("quantize", src, tmp_path / "w8", "--scheme", "w8a16", "--no-fsync",
                          "--json").stdout)
    assert low_bits_mtp(spk, tmp_path / "w8") == []
    assert not [w for w in plan["warnings"] if "MTP layer" in w], plan["warnings"]


def test_mtp_layers_under_mtp_are_flagged_and_the_decoders_are_not(spk, tmp_path):
    # Qwen3-Next keeps its MTP layer under "mtp." beside the decoder's "model.layers.".
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    leaves = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    tensors = {f"{p}.{m}.weight": (rng.standard_normal((SIDE, SIDE)) * 0.02).astype(np.float16)
               for p in ("model.layers.0", "mtp.layers.0") for m in leaves}
    src = tmp_path / "src"
    src.mkdir()
    save_file(tensors, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": SIDE,
        "num_hidden_layers": 1, "torch_dtype": "float16"}))
    spk("quantize", src, tmp_path / "w4", "--no-fsync")
    assert {"model.layers.0.mlp.down_proj", "mtp.layers.0.mlp.down_proj"} <= \
        quantized_modules(tmp_path / "w4")
    (found,) = low_bits_mtp(spk, tmp_path / "w4")
    assert "mtp.layers.0." in found["message"] and "model.layers.0" not in found["message"], found


def fc_action(spk, tmp_path, name: str, tp: int) -> dict:
    src = tmp_path / f"{name}-src"
    if not src.exists():
        write_checkpoint(src, name, MAP["architectures"][name])
    plan = json.loads(spk("quantize", src, tmp_path / f"{name}-{tp}", "--dry-run", "--json",
                          "--tp", tp).stdout)
    (fc,) = [t for t in plan["tensors"] if t["name"].endswith("fc.weight")]
    return fc


def test_the_tp_split_of_a_linear_follows_its_class_in_the_map(spk, tmp_path):
    # fc [256, 256]: vLLM builds Mistral EAGLE's as a RowParallelLinear (its 256 input columns
    # split over --tp 4 into 64, half a group: it stays dense) and DFlash's as a ReplicatedLinear
    # (never split: it stays quantized at any --tp).
    classes = {n: MAP["architectures"][n]["modules"]["model.fc"]["class"]
               for n in ("EagleMistralForCausalLM", "DFlashDraftModel")}
    assert classes == {"EagleMistralForCausalLM": "RowParallelLinear",
                       "DFlashDraftModel": "ReplicatedLinear"}, classes
    assert fc_action(spk, tmp_path, "EagleMistralForCausalLM", 1)["action"] == "quantize"
    row = fc_action(spk, tmp_path, "EagleMistralForCausalLM", 4)
    assert row["action"] == "keep" and "in_features per partition 64" in row["reason"], row
    assert fc_action(spk, tmp_path, "DFlashDraftModel", 4)["action"] == "quantize"


# 0.33 kinds the map builds since their tiny configs carry the keys their code reads (issue 23):
# each one's plan keeps dense what vLLM builds dense, and `check` flags a copy with those
# modules quantized anyway.
NEWLY_BUILT_033 = ["BailingMoeV3MTPModel", "DSparkDraftModel", "DSparkV41DraftModel",
                   "DeepSeekV4MTPModel", "EagleLlama4ForCausalLM", "EagleMistralLarge3ForCausalLM",
                   "MiMoV2MTPModel", "MiMoV2OmniMTPModel"]


def test_the_newly_built_033_kinds_are_in_the_newest_map():
    assert tuple(int(p) for p in RELEASE.split(".")) >= (0, 33, 0)
    assert set(NEWLY_BUILT_033) <= set(draft_architectures())


@pytest.mark.parametrize("name", NEWLY_BUILT_033)
def test_a_newly_built_033_kind_keeps_dense_what_vllm_builds_dense(kinds, spk, tmp_path, name):
    arch = MAP["architectures"][name]
    _, q, everything, plan = kinds[name]
    action = {t["name"]: t["action"] for t in plan["tensors"]}
    weights = module_weights(arch)
    dense = {w for w, e in weights.items()
             if not e["quantized"] or e.get("weight_read_directly")}
    taken = set(weights) - dense
    for w in dense:
        assert action.get(w) == "keep", (name, w, action.get(w))
    # The draft's decoder Linears are quantized (but the family's q/k/v, eh_proj, routers).
    assert any(action.get(w) == "quantize" for w in taken if leaf(w) not in FAMILY_DENSE_LEAVES), \
        (name, {w: action.get(w) for w in taken})
    # The head-quantized copy: every module vLLM builds dense and that copy stores quantized is
    # an error of `check --vllm-version 0.33.0`, which then fails.
    stored = quantized_modules(everything)
    expected = {w.removesuffix(".weight") for w in dense
                if w.removesuffix(".weight") in stored and not weights[w]["quantized"]}
    expected |= {w.removesuffix(".weight") for w in plain_weights(arch)
                 if w.removesuffix(".weight") in stored}
    rc, findings = check_findings(spk, everything)
    flagged = {f["module"] for f in findings if f["code"] in MAP_ERROR_CODES}
    assert flagged == expected_map_errors(name, stored), (name, findings)
    assert expected <= flagged
    assert rc == (1 if errors_of(findings) else 0), findings
    # The plan's own output passes.
    rc, findings = check_findings(spk, q, *target_args(tmp_path, name))
    assert (rc, errors_of(findings)) == (0, []), findings


def test_the_heads_of_some_newly_built_kinds_are_flagged(kinds, spk):
    # At least the kinds whose map shows dense Linears (MiMo-V2's MTP eh_proj, DSpark's heads):
    # their head-quantized copies fail `check`.
    failing = []
    for name in NEWLY_BUILT_033:
        proc = spk("check", kinds[name][2], "--vllm-version", "0.33.0", "--json", expect=None)
        if proc.returncode == 1:
            failing.append(name)
    assert len(failing) >= 2, failing


def test_draft_lm_head_quantization_is_a_serve_option_since_033(kinds, spk, tmp_path):
    # vLLM 0.33's SpeculativeConfig takes it for EAGLE/MTP drafts, not for dspark; 0.32 has none.
    option = MAP["serve_options"]["draft_lm_head_quantization"]
    assert option["values"] == ["fp8", "nvfp4"]
    src, _, _, plan = kinds["DeepSeekMTPModel"]
    assert plan["serve_options"] == {"draft_lm_head_quantization": ["fp8", "nvfp4"]}
    assert kinds["EagleLlamaForCausalLM"][3]["serve_options"] == {
        "draft_lm_head_quantization": ["fp8", "nvfp4"]}
    assert kinds["Qwen3DSparkModel"][3]["serve_options"] == {}
    old = json.loads(spk("inspect", src, "--json", "--vllm-version", "0.32.0").stdout)
    assert old["serve_options"] == {}
    text = spk("inspect", src).stdout
    assert f'serve option: "draft_lm_head_quantization":"fp8|nvfp4" (vLLM {RELEASE}, ' \
           'vllm/config/speculative.py:' in text, text
    # The quantized output, inspected, says the same.
    shown = json.loads(spk("inspect", kinds["DeepSeekMTPModel"][1], "--json").stdout)
    assert shown["serve_options"] == {"draft_lm_head_quantization": ["fp8", "nvfp4"]}
    # vLLM shares the target's head (and quantizes its copy) only with a draft without a lm_head
    # of its own, or one equal to the target's: a draft that ships one (EAGLE-Llama4, its
    # draft_vocab_size head) or whose class declares one (Step-3.5's MTP) gets a note; EAGLE-1
    # Llama, which ships none, does not.
    def notes(name):
        return kinds[name][3]["serve_options_notes"]
    assert "lm_head.weight" in plain_weights(MAP["architectures"]["EagleLlama4ForCausalLM"])
    # (Step-3.5's MTP, whose class declares one, is refused by quantize: refused_architectures.)
    for name in ("EagleLlama4ForCausalLM",):
        assert any("needs a drafter that shares the target lm_head" in n for n in notes(name)), \
            (name, notes(name))
    assert notes("EagleLlamaForCausalLM") == []
