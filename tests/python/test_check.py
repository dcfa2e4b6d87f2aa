"""`sparkulator check` against real checkpoints: written by llm-compressor's model_free_ptq and by our own
`quantize`. Clean ones pass (exit 0); then each fault of the issue is planted and must be caught, named
by its stable code and module, with exit 1.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import REPO, run_model_free_ptq

sys.path.insert(0, str(REPO))
from tests.e2e import env  # noqa: E402

@pytest.fixture(scope="module")
def ckpts(tmp_path_factory, spk):
    root = tmp_path_factory.mktemp("check")
    out = {}
    for family in ("llm", "dflash", "eagle3"):
        spk("example", root / family, "--family", family)
        spk("quantize", root / family, root / f"q_{family}")
        out[family], out[f"q_{family}"] = root / family, root / f"q_{family}"
    spk("example", root / "llm2", "--family", "llm", "--shards", "2")
    spk("quantize", root / "llm2", root / "q_llm2")
    out["q_llm2"] = root / "q_llm2"
    pytest.importorskip("llmcompressor")
    # model_free_ptq: a small LLM with embeddings/norms/lm_head ignored, and a DFlash draft with
    # q/k/v quantized (which vLLM cannot load).
    run_model_free_ptq([(str(root / "llm"), str(root / "mfp_llm"), "W4A16",
                         ["lm_head", "re:.*embed_tokens", "re:.*norm"]),
                        (str(root / "dflash"), str(root / "mfp_dflash"), "W4A16", ["re:.*norm"])],
                       ignore=[])
    out["mfp_llm"], out["mfp_dflash"] = root / "mfp_llm", root / "mfp_dflash"
    return out


def check(spk, ckpt, *flags, expect):
    proc = spk("check", ckpt, "--json", *flags, expect=expect)
    report = json.loads(proc.stdout)
    assert report["ok"] == (expect == 0)
    return report


def codes(report, severity="error"):
    return {(f["code"], f["module"] or f["file"]) for f in report["findings"]
            if f["severity"] == severity}


def copy(ckpts, name, tmp_path) -> Path:
    dst = tmp_path / name
    shutil.copytree(ckpts[name], dst)
    return dst


def edit_config(d: Path, fn):
    cfg = json.loads((d / "config.json").read_text())
    fn(cfg)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def edit_tensors(d: Path, fn, shard="model.safetensors"):
    """Rewrites one shard through safetensors and keeps the index (if any) in step."""
    tensors = load_file(str(d / shard))
    fn(tensors)
    save_file(tensors, str(d / shard), metadata={"format": "pt"})
    index = d / "model.safetensors.index.json"
    if index.exists():
        idx = json.loads(index.read_text())
        wm = {k: v for k, v in idx["weight_map"].items() if v != shard}
        wm.update({k: shard for k in tensors})
        idx["weight_map"] = dict(sorted(wm.items()))
        index.write_text(json.dumps(idx, indent=2))


# --- clean checkpoints pass ---------------------------------------------------------------------

def test_model_free_ptq_llm_passes(ckpts, spk):
    report = check(spk, ckpts["mfp_llm"], expect=0)
    assert report["quantized_modules"] == 14 and report["scheme"].startswith("w4a16")
    # llm-compressor 0.14 writes "scale_dtype": null / "zp_dtype": null: only old releases mind.
    assert ("quant-args-key", "scale_dtype") in codes(report, "warning")


@pytest.mark.parametrize("family", ["llm", "dflash", "eagle3", "llm2"])
def test_our_quantize_outputs_pass(ckpts, spk, family):
    report = check(spk, ckpts[f"q_{family}"], expect=0)
    assert report["quantized_modules"] > 0
    assert not codes(report)


def test_dense_source_passes_and_text_output(ckpts, spk):
    proc = spk("check", ckpts["llm"], expect=0)
    assert "OK: vLLM loads it right" in proc.stdout and "scheme dense" in proc.stdout


# --- planted faults are caught and named --------------------------------------------------------

def test_ignore_with_literal_checkpoint_names_is_the_silent_miss(ckpts, spk, tmp_path):
    d = copy(ckpts, "q_dflash", tmp_path)
    literal = [f"layers.{i}.self_attn.{p}_proj" for i in (0, 1) for p in "qkv"]
    edit_config(d, lambda c: c["quantization_config"].update(ignore=literal))
    report = check(spk, d, expect=1)
    found = codes(report)
    assert ("ignore-matches-nothing", "layers.0.self_attn.q_proj") in found
    # vLLM's name carries the prefix and the 8-layer offset.
    msg = next(f for f in report["findings"] if f["module"] == "layers.0.self_attn.q_proj"
               and f["code"] == "ignore-matches-nothing")
    assert "model.layers.8.self_attn.qkv_proj" in msg["fix"]
    assert ("vllm-expects-quantized", "layers.1.self_attn.k_proj") in found


def test_missing_weight_scale(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)
    edit_tensors(d, lambda t: t.pop("model.layers.0.mlp.down_proj.weight_scale"))
    report = check(spk, d, expect=1)
    assert ("missing-weight-scale", "model.layers.0.mlp.down_proj") in codes(report)


def test_zero_point_in_symmetric_checkpoint(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)
    edit_tensors(d, lambda t: t.update({"model.layers.1.mlp.up_proj.weight_zero_point":
                                        torch.zeros(96, 2, dtype=torch.int32)}))
    report = check(spk, d, expect=1)
    assert ("zero-point-in-symmetric", "model.layers.1.mlp.up_proj") in codes(report)


def test_zero_nan_and_negative_scales(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)

    def plant(t):
        t["model.layers.0.self_attn.o_proj.weight_scale"][3, 1] = 0.0
        t["model.layers.1.self_attn.o_proj.weight_scale"][0, 0] = float("nan")
        t["model.layers.1.mlp.gate_proj.weight_scale"][5, 0] *= -1
    edit_tensors(d, plant)
    found = codes(check(spk, d, expect=1))
    assert ("scale-zero", "model.layers.0.self_attn.o_proj") in found
    assert ("scale-not-finite", "model.layers.1.self_attn.o_proj") in found
    assert ("scale-negative", "model.layers.1.mlp.gate_proj") in found


def test_mis_shaped_and_missing_tensors(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)

    def plant(t):
        m = "model.layers.0.self_attn.k_proj"
        t[f"{m}.weight_scale"] = t[f"{m}.weight_scale"][:, :1].contiguous()
        t.pop("model.layers.0.self_attn.v_proj.weight_shape")
        t["model.layers.1.self_attn.q_proj.weight_packed"] = \
            t["model.layers.1.self_attn.q_proj.weight_packed"][:, :16].contiguous()
    edit_tensors(d, plant)
    found = codes(check(spk, d, expect=1))
    assert ("weight-scale-shape", "model.layers.0.self_attn.k_proj") in found
    assert ("missing-weight-shape", "model.layers.0.self_attn.v_proj") in found
    assert ("weight-packed-shape", "model.layers.1.self_attn.q_proj") in found


def test_quantized_vs_dense_mismatch_both_ways(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)
    edit_config(d, lambda c: c["quantization_config"]["ignore"].append(
        "model.layers.1.mlp.down_proj"))
    assert ("vllm-expects-dense", "model.layers.1.mlp.down_proj") in codes(check(spk, d, expect=1))
    d2 = copy(ckpts, "q_dflash", tmp_path)
    edit_config(d2, lambda c: c["quantization_config"].update(ignore=[]))
    found = codes(check(spk, d2, expect=1))
    assert ("vllm-expects-quantized", "layers.0.self_attn.q_proj") in found


def test_fused_shards_disagree(ckpts, spk, tmp_path):
    d = copy(ckpts, "q_llm", tmp_path)
    edit_config(d, lambda c: c["quantization_config"]["ignore"].append(
        "model.layers.0.self_attn.q_proj"))
    assert ("fused-shards-disagree", "model.layers.0.self_attn.qkv_proj") in codes(
        check(spk, d, expect=1))


def test_quantized_embedding(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)

    def plant(t):
        src = "model.layers.0.mlp.up_proj"
        for s in ("weight_packed", "weight_scale", "weight_shape"):
            t[f"model.embed_tokens.{s}"] = t[f"{src}.{s}"].clone()
        t.pop("model.embed_tokens.weight")
    edit_tensors(d, plant)
    assert ("quantized-embedding", "model.embed_tokens") in codes(check(spk, d, expect=1))


def test_dflash_draft_with_quantized_qkv(ckpts, spk):
    # vLLM 0.32 and newer (the default: the newest module map's release, as quantize's) load a Qwen3
    # DFlash draft with quantized q/k/v: an info finding.
    report = check(spk, ckpts["mfp_dflash"], expect=0)
    newest = max((p.stem.removeprefix("vllm-") for p in
                  (REPO / "data" / "vllm_module_map").glob("vllm-*.json")),
                 key=lambda v: tuple(int(x) for x in v.split(".")))
    assert report["vllm_version"] == newest
    assert report["vllm_version_source"] == "the newest module map; --vllm-version V for another"
    assert "dflash-qkv-quantized" in {c for c, _ in codes(report, "info")}
    # vLLM 0.25.1 reads qkv_proj.weight and fails: an error per module.
    report = check(spk, ckpts["mfp_dflash"], "--vllm-version", "0.25.1", expect=1)
    assert report["vllm_version_source"] == "--vllm-version"
    found = codes(report)
    assert ("dflash-qkv-quantized", "layers.0.self_attn.q_proj") in found
    assert ("dflash-qkv-quantized", "layers.1.self_attn.v_proj") in found
    # Between the last version seen failing and the first seen working: not verified.
    report = check(spk, ckpts["mfp_dflash"], "--vllm-version", "0.29.0", expect=0)
    assert "dflash-qkv-quantized" in {c for c, _ in codes(report, "warning")}
    proc = spk("check", ckpts["mfp_dflash"], "--vllm-version", "soon", expect=2)
    assert "not a vLLM version" in proc.stderr


def test_laguna_unfused_qkv_names(ckpts, spk, tmp_path):
    d = copy(ckpts, "dflash", tmp_path)
    edit_config(d, lambda c: c.update(architectures=["DFlashLagunaForCausalLM"]))
    # Seen failing on 0.32.0; a newer release (the default may be one) is not verified.
    newer = check(spk, d, "--vllm-version", "0.40.0", expect=0)
    assert ("laguna-unfused-qkv", "layers.0.self_attn.k_proj (and 5 more)") in codes(newer,
                                                                                   "warning")
    report = check(spk, d, "--vllm-version", "0.32.0", expect=1)
    bad = [f for f in report["findings"] if f["code"] == "laguna-unfused-qkv"]
    assert len(bad) == 1 and bad[0]["module"].startswith("layers.0.self_attn.k_proj")
    assert "KeyError: 'layers.0.self_attn.k_proj.weight'" in bad[0]["message"]
    assert "qkv_proj" in bad[0]["fix"]


def test_eagle3_example_names_aux_layers_and_check_catches_missing_ones(spk, tmp_path):
    head = tmp_path / "head"
    spk("example", head, "--family", "eagle3", "--target-layers", "4")
    cfg = json.loads((head / "config.json").read_text())
    assert cfg["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 3, 4]
    report = check(spk, head, "--target-layers", "4", expect=0)
    assert '"num_speculative_tokens":3' in report["serve"]
    edit_config(head, lambda c: (c.pop("eagle_config"), c.pop("num_target_layers")))
    assert ("eagle3-aux-layers-default", "config.json") in codes(check(spk, head, expect=0),
                                                                 "warning")
    report = check(spk, head, "--target-layers", "4", expect=1)
    bad = [f for f in report["findings"] if f["code"] == "eagle3-aux-layers-default"]
    assert bad and "[1, 2]" in bad[0]["message"] and "[2, 3, 4]" in bad[0]["fix"]


def test_inspect_and_check_take_num_speculative_tokens_from_block_size(ckpts, spk, tmp_path):
    d = copy(ckpts, "dflash", tmp_path)
    edit_config(d, lambda c: c.update(block_size=4))
    report = json.loads(spk("inspect", d, "--json").stdout)
    assert '"num_speculative_tokens":3' in report["serve"], report["serve"]
    assert "block_size 4" in report["num_speculative_tokens_reason"]
    assert '"num_speculative_tokens":3' in check(spk, d, expect=0)["serve"]


def test_kernel_rules_per_tp(ckpts, spk):
    # o_proj is row-parallel: in = 256 splits into 64 per GPU at --tp 4, below Marlin's 128.
    found = codes(check(spk, ckpts["q_llm"], "--tp", "4", expect=1))
    assert ("kernel-rule", "model.layers.0.self_attn.o_proj") in found
    assert ("kernel-rule", "model.layers.0.self_attn.q_proj") not in found


def test_unsupported_group_size_unknown_format_and_new_args_key(ckpts, spk, tmp_path):
    d = copy(ckpts, "mfp_llm", tmp_path)

    def plant(c):
        g = c["quantization_config"]["config_groups"]["W4A16"]
        g["weights"]["group_size"] = 96
        g["weights"]["scale_dtype"] = "bfloat16"
        c["quantization_config"]["format"] = "fancy-quantized"
    edit_config(d, plant)
    found = codes(check(spk, d, expect=1))
    assert ("group-size-unsupported", "W4A16") in found
    assert ("quant-args-key", "scale_dtype") in found
    assert ("unknown-format", "config.json") in found
    d2 = copy(ckpts, "mfp_llm", tmp_path / "b")
    edit_config(d2, lambda c: c["quantization_config"]["config_groups"]["W4A16"]["weights"].update(
        type="float"))
    assert ("unknown-scheme", "W4A16") in codes(check(spk, d2, expect=1))


def test_index_faults(ckpts, spk, tmp_path):
    d = copy(ckpts, "q_llm2", tmp_path)
    index = d / "model.safetensors.index.json"
    idx = json.loads(index.read_text())
    second = sorted(set(idx["weight_map"].values()))[1]
    idx["weight_map"] = {k: v for k, v in idx["weight_map"].items() if v != second}
    idx["weight_map"]["model.ghost.weight"] = "model-00009-of-00009.safetensors"
    index.write_text(json.dumps(idx, indent=2))
    found = codes(check(spk, d, expect=1))
    assert ("shard-not-in-index", second) in found
    assert ("index-file-missing", "model-00009-of-00009.safetensors") in found


def test_index_entry_for_a_tensor_the_shard_lacks(ckpts, spk, tmp_path):
    d = copy(ckpts, "q_llm2", tmp_path)
    index = d / "model.safetensors.index.json"
    idx = json.loads(index.read_text())
    first = sorted(set(idx["weight_map"].values()))[0]
    idx["weight_map"]["model.layers.0.extra.weight"] = first
    index.write_text(json.dumps(idx, indent=2))
    assert ("index-tensor-missing", "model.layers.0.extra.weight") in codes(check(spk, d, expect=1))


def test_safetensors_rules_for_every_shard(ckpts, spk, tmp_path):
    d = copy(ckpts, "q_llm2", tmp_path)
    shards = sorted(p.name for p in d.glob("*.safetensors"))
    with open(d / shards[1], "ab") as f:
        f.write(b"trailing")  # bytes after the last tensor
    report = check(spk, d, expect=1)
    bad = [f for f in report["findings"] if f["code"] == "safetensors-invalid"]
    assert bad and bad[0]["file"] == shards[1]


def test_target_pairing(ckpts, spk, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    cfg = json.loads((ckpts["llm"] / "config.json").read_text())
    cfg["num_hidden_layers"] = 8
    (target / "config.json").write_text(json.dumps(cfg))
    report = check(spk, ckpts["q_dflash"], "--target", target, expect=0)
    assert f"vllm serve {target}" in report["serve"] and '"method":"dflash"' in report["serve"]
    # Another target: other hidden size, fewer layers than target_layer_ids needs, and quantized.
    cfg.update(hidden_size=512, num_hidden_layers=4,
               quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
    (target / "config.json").write_text(json.dumps(cfg))
    report = check(spk, ckpts["q_dflash"], "--target", target, expect=1)
    found = codes(report)
    assert ("target-hidden-size", "config.json") in found
    assert ("target-layer-ids", "config.json") in found
    assert ("target-layer-count", "config.json") in found
    assert ("target-precision-mismatch", "config.json") in codes(report, "warning")


def test_draft_without_mapping_disagreement(ckpts, spk, tmp_path):
    # Only the fused name is ignored. vLLM 0.32 gives a draft's quant config no
    # packed_modules_mapping (vllm#53116) and compares the fused name itself: q/k/v stay dense and
    # the draft loads. On releases where that is not verified, a mapping would make vLLM compare
    # the shard names and quantize: an error there.
    d = copy(ckpts, "q_dflash", tmp_path)
    edit_config(d, lambda c: c["quantization_config"].update(ignore=["re:.*qkv_proj$"]))
    check(spk, d, expect=0)
    old = codes(check(spk, d, "--vllm-version", "0.25.1", expect=1))
    assert ("ignore-needs-fused-mapping", "model.layers.8.self_attn.qkv_proj") in old


def test_vllm_source_blockers_and_patch_applies(spk, tmp_path):
    models = tmp_path / "site" / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "qwen3_dflash.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass DFlashQwen3Model(nn.Module):\n"
        "    def _build_context_kv_buffers(self, layers_attn, has_bias):\n"
        "        kv_weights = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n"
        "        self._fused_kv_weight = torch.cat(kv_weights, dim=0)\n")
    (models / "laguna_dflash.py").write_text(
        "import torch\n\n\nclass M:\n    def load_weights(self, weights):\n"
        "        for name, w in weights:\n"
        "            if self.quant_config is not None and (\n"
        "                scale_name := self.quant_config.get_cache_scale(name)\n"
        "            ):\n                continue\n")
    proc = spk("check", "--vllm", tmp_path / "site", "--json", expect=1)
    findings = json.loads(proc.stdout)["findings"]
    assert {f["code"] for f in findings} == {"vllm-dflash-context-kv", "vllm-laguna-get-cache-scale"}
    for f in findings:
        subprocess.run(["patch", "-p1", "-s"], input=f["fix"], text=True, check=True,
                       cwd=tmp_path / "site")
    # The patched DFlash code now builds the context K/V from a packed int4 layer.
    ns = {}
    exec((models / "qwen3_dflash.py").read_text(), ns)
    from test_quant_interop import reference
    w = torch.randn(8, 128, dtype=torch.bfloat16)
    _, scale, _, compressed, decompressed, _ = reference(w, 4, True, 128)
    layer = type("L", (), {})()
    layer.weight_packed = torch.nn.Parameter(compressed["weight_packed"], requires_grad=False)
    layer.weight_scale = torch.nn.Parameter(compressed["weight_scale"], requires_grad=False)
    layer.input_size_per_partition = 128
    assert torch.equal(ns["_spk_dense_weight"](layer), decompressed)
    # Already patched: nothing left to report.
    proc = spk("check", "--vllm", tmp_path / "site", expect=0)
    assert "no known blocker" in proc.stdout


# --- the vLLM a check is judged for: fake trees per version marker, and the real installed one ---

GUARDED_QWEN3 = (
    "class DFlashQwen3Model:\n"
    "    def _build_context_kv_buffers(self, layers_attn, has_bias):\n"
    "        if all(\n"
    "            isinstance(a.qkv_proj.quant_method, UnquantizedLinearMethod)\n"
    "            for a in layers_attn\n"
    "        ):\n"
    "            kv_weights = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n")
UNGUARDED_QWEN3 = (
    "class DFlashQwen3Model:\n"
    "    def _build_context_kv_buffers(self, layers_attn, has_bias):\n"
    "        kv_weights = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]\n")


def fake_vllm(root: Path, qwen3_dflash: str, version_py=None, dist_info=None) -> Path:
    models = root / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "qwen3_dflash.py").write_text(qwen3_dflash)
    if version_py:
        (root / "vllm" / "_version.py").write_text(f"__version__ = version = '{version_py}'\n")
    if dist_info:
        meta = root / f"vllm-{dist_info}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {dist_info}\n")
    return root


@pytest.mark.parametrize("marker,code,expect_ok,version", [
    ("version_py", UNGUARDED_QWEN3, False, "0.25.1"),
    ("dist_info", GUARDED_QWEN3, True, "0.32.0+cpu"),
    # The code decides over the number: an old number with the guarded code loads.
    ("version_py", GUARDED_QWEN3, True, "0.25.1"),
    (None, UNGUARDED_QWEN3, False, None),   # a source checkout: no version, the code decides
])
def test_check_with_fake_vllm_trees(ckpts, spk, tmp_path, marker, code, expect_ok, version):
    kwargs = {marker: version} if marker else {}
    tree = fake_vllm(tmp_path / "site", code, **kwargs)
    report = check(spk, ckpts["mfp_dflash"], "--vllm", tree, expect=0 if expect_ok else 1)
    assert report["vllm_tree"] == str(tree)
    if version:
        assert report["vllm_version"] == version
        assert ("_version.py" if marker == "version_py" else "METADATA") in \
            report["vllm_version_source"]
    else:
        assert "judged by its code" in report["vllm_version_source"]
    severity = "info" if expect_ok else "error"
    assert "dflash-qkv-quantized" in {c for c, _ in codes(report, severity)}
    # Alone, --vllm reports only an unguarded read.
    proc = spk("check", "--vllm", tree, "--json", expect=0 if expect_ok else 1)
    found = json.loads(proc.stdout)["findings"]
    assert bool(found) == (not expect_ok)


REAL_VLLM = env.site_packages()


@pytest.mark.skipif(not (REAL_VLLM / "vllm" / "model_executor").is_dir(),
                    reason=f"no installed vLLM tree at {REAL_VLLM}")
def test_check_against_the_installed_vllm_tree(ckpts, spk, tmp_path):
    # The real 0.32 code: qwen3_dflash.py guards its read, laguna_dflash.py does not.
    proc = spk("check", "--vllm", REAL_VLLM, "--json", expect=1)
    out = json.loads(proc.stdout)
    files = {f["file"] for f in out["findings"] if f["code"] == "vllm-dflash-context-kv"}
    assert files == {"vllm/model_executor/models/laguna_dflash.py"}, files
    assert out["vllm_version"].startswith("0.32.0")
    report = check(spk, ckpts["mfp_dflash"], "--vllm", REAL_VLLM, expect=0)
    assert report["vllm_version"].startswith("0.32.0") and "_version.py" in \
        report["vllm_version_source"]
    info = [f for f in report["findings"] if f["code"] == "dflash-qkv-quantized"]
    assert info and info[0]["severity"] == "info" and "guard" in info[0]["message"]
    d = copy(ckpts, "mfp_dflash", tmp_path)
    edit_config(d, lambda c: c.update(architectures=["DFlashLagunaForCausalLM"]))
    found = codes(check(spk, d, "--vllm", REAL_VLLM, expect=1))
    assert ("dflash-qkv-quantized", "layers.0.self_attn.q_proj") in found
