"""End to end: `sparkulator example` -> `sparkulator quantize` -> the real Python libraries read it.

- safetensors loads every file we write;
- compressed-tensors validates our quantization_config and, from the SOURCE weights, computes the same
  packed words, scales and zero points bit for bit (calculate_qparams on min/max + its compressor), and
  decompresses our tensors to exactly its own dequantized values;
- the plan follows the draft family (DFlash q/k/v dense, EAGLE-3 head kept, LLM lm_head/embeddings kept)
  and the written ignore list matches vLLM's module names;
- transformers loads our quantized small Qwen3 and its logits stay close to the original's.
"""

import json
import shutil
from pathlib import Path

import pytest
import torch
from compressed_tensors.quantization import QuantizationConfig
from safetensors import safe_open

import references
from test_quant_interop import reference
from conftest import load_dir

DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}



@pytest.fixture(scope="module")
def examples(tmp_path_factory, spk):
    root = tmp_path_factory.mktemp("examples")
    out = {}
    for family in ("dflash", "eagle3", "eagle3-speculators", "llm"):
        src = root / family
        spk("example", src, "--family", family)
        out[family] = src
    return out


def quantize(spk, src: Path, dst: Path, *flags):
    proc = spk("quantize", src, dst, "--json", *flags)
    return json.loads(proc.stdout)


def test_dflash_plan_files_and_config(examples, spk, tmp_path):
    dst = tmp_path / "q"
    report = quantize(spk, examples["dflash"], dst)
    assert report["family"] == "dflash"
    assert report["ignore"] == ["re:.*self_attn\\.(q|k|v|qkv)_proj$"]
    t = load_dir(dst)
    for layer in (0, 1):
        for p in ("q_proj", "k_proj", "v_proj"):
            assert f"layers.{layer}.self_attn.{p}.weight" in t
            assert f"layers.{layer}.self_attn.{p}.weight_packed" not in t
        for m in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            name = f"layers.{layer}.{m}"
            assert f"{name}.weight" not in t
            packed, scale = t[f"{name}.weight_packed"], t[f"{name}.weight_scale"]
            shape = t[f"{name}.weight_shape"]
            assert packed.dtype == torch.int32 and scale.dtype == torch.bfloat16
            assert shape.dtype == torch.int64
            out_f, in_f = shape.tolist()
            assert list(packed.shape) == [out_f, in_f // 8]
            assert list(scale.shape) == [out_f, in_f // 128]
            assert f"{name}.weight_zero_point" not in t  # symmetric: vLLM has no parameter for it
    assert "fc.weight_packed" in t and "hidden_norm.weight" in t
    cfg = json.loads((dst / "config.json").read_text())
    qc = QuantizationConfig.model_validate(cfg["quantization_config"])
    assert qc.format == "pack-quantized"
    assert qc.config_groups["group_0"].weights.group_size == 128
    assert cfg["dflash_config"] == json.loads(
        (examples["dflash"] / "config.json").read_text())["dflash_config"]
    for f in ("README.md", "generation_config.json"):
        assert (dst / f).read_bytes() == (examples["dflash"] / f).read_bytes()
    # Every file safetensors can open also carries the metadata transformers requires.
    with safe_open(str(dst / "model.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt"}


@pytest.mark.parametrize("layout", ["eagle3", "eagle3-speculators"])
def test_eagle3_keeps_head_and_index_tensors(examples, spk, tmp_path, layout):
    dst = tmp_path / "q"
    report = quantize(spk, examples[layout], dst)
    assert report["family"] == "eagle3"
    t = load_dir(dst)
    src = load_dir(examples[layout])
    for kept in ("lm_head.weight", "embed_tokens.weight", "d2t", "t2d", "norm.weight"):
        assert torch.equal(t[kept], src[kept]), kept
    assert "layers.0.self_attn.q_proj.weight_packed" in t
    assert "fc.weight_packed" in t
    # vLLM reads a speculators draft's config from transformer_layer_config only.
    cfg = json.loads((dst / "config.json").read_text())
    if layout == "eagle3-speculators":
        assert cfg["transformer_layer_config"]["quantization_config"] == cfg["quantization_config"]
    else:
        assert "transformer_layer_config" not in cfg and "quantization_config" in cfg


@pytest.mark.parametrize("scheme,group,dtype", [
    ("w4a16", 128, "BF16"), ("w4a16", 32, "F16"), ("w4a16", -1, "F32"),
    ("w4a16-asym", 64, "BF16"), ("w8a16", 128, "BF16"), ("w8a16-asym", -1, "F16"),
])
def test_bit_exact_against_compressed_tensors(spk, tmp_path, scheme, group, dtype):
    src = tmp_path / "src"
    spk("example", src, "--family", "llm", "--dtype", dtype, "--layers", "1", "--shards", "2")
    dst = tmp_path / "q"
    quantize(spk, src, dst, "--scheme", scheme, "--group-size", group)
    bits = 8 if scheme.startswith("w8") else 4
    symmetric = not scheme.endswith("asym")
    ours, source = load_dir(dst), load_dir(src)
    index = json.loads((dst / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(ours)
    quantized = [n[: -len(".weight_packed")] for n in ours if n.endswith(".weight_packed")]
    assert len(quantized) == 7
    for m in quantized:
        w = source[m + ".weight"]
        assert w.dtype == DTYPES[dtype]
        _, scale, _, compressed, decompressed, _ = reference(w, bits, symmetric, group)
        assert torch.equal(ours[m + ".weight_packed"], compressed["weight_packed"]), m
        assert torch.equal(ours[m + ".weight_scale"].view(torch.uint8),
                           scale.to(w.dtype).contiguous().view(torch.uint8)), m
        assert ours[m + ".weight_shape"].tolist() == list(w.shape)
        if symmetric:
            assert m + ".weight_zero_point" not in ours
        else:
            assert torch.equal(ours[m + ".weight_zero_point"], compressed["weight_zero_point"]), m


@pytest.mark.parametrize("scheme,bound,rounding", [("w4a16", 0.6, 0.1), ("w8a16", 0.05, 0.5)])
def test_transformers_loads_quantized_qwen3(spk, tmp_path, scheme, bound, rounding):
    """transformers (through compressed-tensors) loads our checkpoint and computes exactly what the
    original model computes with compressed-tensors' own dequantized weights; the logits stay close to
    the original's (random weights amplify 4-bit noise: the bound is loose there)."""
    transformers = pytest.importorskip("transformers")
    src = tmp_path / "src"
    spk("example", src, "--family", "llm")
    dst = tmp_path / "q"
    quantize(spk, src, dst, "--scheme", scheme)
    bits = 8 if scheme == "w8a16" else 4
    ids = torch.randint(0, 1000, (1, 24), generator=torch.Generator().manual_seed(0))
    # transformers' logits of the source: a reference, cached by the folder's bytes (sparkulator
    # example writes the same bytes every run). Those of our checkpoint are computed here.
    a = references.transformers_logits(src, ids)
    quant = transformers.AutoModelForCausalLM.from_pretrained(str(dst), dtype=torch.float32)
    source = load_dir(src)
    expected = transformers.AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    ours = load_dir(dst)
    replaced = 0
    with torch.no_grad():
        for name, module in expected.named_modules():
            if name + ".weight_packed" in ours:
                deq = reference(source[name + ".weight"], bits, True, 128)[4]
                module.weight.copy_(deq.float())
                replaced += 1
        b, c = quant(ids).logits, expected(ids).logits
    assert replaced == 14
    rel = ((a - b).norm() / a.norm()).item()
    assert rel < bound, f"relative logit error {rel}"
    # transformers dequantizes in float32 (q * s) where the reference rounds to BF16 first, so the two
    # differ by rounding only: less than the quantization error itself (at 8 bits the BF16 rounding
    # of the reference is of the same order as the quantization step, hence the looser ratio).
    assert ((b - c).norm() / (a - b).norm()).item() < rounding


def shard_names(d: Path):
    return sorted(p.name for p in d.glob("*.safetensors"))


@pytest.mark.parametrize("family", ["dflash", "eagle3", "llm"])
def test_sharded_layout_index_and_determinism(spk, tmp_path, family):
    src = tmp_path / "src"
    spk("example", src, "--family", family, "--shards", "3")
    a, b = tmp_path / "a", tmp_path / "b"
    quantize(spk, src, a, "--threads", "1")
    quantize(spk, src, b, "--threads", "2")
    # Same shard files as the source, each holding what the matching source shard held.
    assert shard_names(a) == shard_names(src) and len(shard_names(a)) == 3
    src_index = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    index = json.loads((a / "model.safetensors.index.json").read_text())
    for name, shard in index["weight_map"].items():
        base = name
        for suffix in ("_packed", "_scale", "_shape", "_zero_point"):
            if name.endswith(".weight" + suffix):
                base = name[: -len(suffix)]
        assert src_index[base] == shard, name
    tensors = load_dir(a)
    assert set(index["weight_map"]) == set(tensors)
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size()
                                                  for t in tensors.values())
    # Byte-identical whatever the thread count, and whether or not it waits for the disk.
    c = tmp_path / "c"
    quantize(spk, src, c, "--no-fsync")
    assert not list(tmp_path.glob(".c.tmp-*")), "the temporary folder must be renamed away"
    for f in shard_names(a) + ["config.json", "model.safetensors.index.json"]:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
        assert (a / f).read_bytes() == (c / f).read_bytes(), f


def test_single_file_stays_single_and_inspect_reports(spk, examples, tmp_path):
    dst = tmp_path / "q"
    quantize(spk, examples["llm"], dst)
    assert shard_names(dst) == ["model.safetensors"]
    assert not (dst / "model.safetensors.index.json").exists()
    before = json.loads(spk("inspect", examples["llm"], "--json").stdout)
    assert before["quantized"] is False and before["family"] == "llm"
    reasons = {t["name"]: (t["action"], t["reason"]) for t in before["tensors"]}
    assert reasons["lm_head.weight"][0] == "keep" and "lm_head" in reasons["lm_head.weight"][1]
    assert reasons["model.layers.0.mlp.up_proj.weight"] == ("quantize", "Linear weight")
    on_disk = sum(p.stat().st_size for p in dst.glob("*.safetensors"))
    assert abs(before["size"]["bytes_after"] - on_disk) < 64 * 1024  # tensor bytes vs file bytes
    after = json.loads(spk("inspect", dst, "--json").stdout)
    assert after["quantized"] is True
    assert after["quantized_modules"] == before["quantized_tensors"]
    text = spk("inspect", examples["dflash"]).stdout
    assert "vllm serve" in text and '"method":"dflash"' in text


def test_hf_cache_repo_id(spk, examples, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    snap = hub / "models--acme--tiny-draft" / "snapshots" / "abc123"
    shutil.copytree(examples["dflash"], snap)
    (hub / "models--acme--tiny-draft" / "refs").mkdir()
    (hub / "models--acme--tiny-draft" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    dst = tmp_path / "q"
    report = quantize(spk, "acme/tiny-draft", dst)
    assert report["path"].endswith("snapshots/abc123")
    proc = spk("quantize", "acme/missing", tmp_path / "q2", expect=2)
    assert "models--acme--missing" in proc.stderr


def test_draft_records_its_target_precision_for_check(spk, examples, tmp_path):
    target = tmp_path / "target"
    spk("example", target, "--family", "llm", "--layers", "8")  # 8 = the draft's num_target_layers
    dst = tmp_path / "q"
    quantize(spk, examples["dflash"], dst, "--target-precision", "fp8")
    record = json.loads((dst / "config.json").read_text())["sparkulator"]
    assert record["target_precision"] == "fp8" and record["scheme"] == "w4a16"
    report = json.loads(spk("check", dst, "--target", target, "--json").stdout)
    codes = [f["code"] for f in report["findings"]]
    assert "target-precision-mismatch" in codes  # an fp8-trained draft on a BF16 target
    same = tmp_path / "q2"
    quantize(spk, examples["dflash"], same)  # default: trained against the unquantized target
    report = json.loads(spk("check", same, "--target", target, "--json").stdout)
    assert report["ok"] and "target-precision-mismatch" not in [f["code"] for f in report["findings"]]


def test_target_precision_is_a_weight_format(spk, examples, tmp_path):
    """--target-precision takes a format or a scheme name, records the weight format, and check
    compares formats: a w4a16-trained draft fits a GPTQ int4 target and not an FP8 one."""
    bad = spk("quantize", examples["dflash"], tmp_path / "bad", "--target-precision", "fp9",
              expect=2)
    assert "'fp9' is not a precision" in bad.stderr and "int4" in bad.stderr
    assert not (tmp_path / "bad").exists()
    dst = tmp_path / "q"
    quantize(spk, examples["dflash"], dst, "--target-precision", "W4A16")
    assert json.loads((dst / "config.json").read_text())["sparkulator"]["target_precision"] == "int4"
    target = tmp_path / "target"
    spk("example", target, "--family", "llm", "--layers", "8")
    cfg_path = target / "config.json"
    cfg = json.loads(cfg_path.read_text())

    def mismatch(quantization_config):
        cfg["quantization_config"] = quantization_config
        cfg_path.write_text(json.dumps(cfg))
        report = json.loads(spk("check", dst, "--target", target, "--json").stdout)
        found = [f for f in report["findings"] if f["code"] == "target-precision-mismatch"]
        return found[0]["message"] if found else None

    assert mismatch({"quant_method": "gptq", "bits": 4, "group_size": 128}) is None
    message = mismatch({"quant_method": "fp8", "weight_block_size": [128, 128]})
    assert message and "this target is fp8" in message and "int4" in message
    assert mismatch({"quant_method": "gptq", "bits": 8, "group_size": 128})
