"""`sparkulator quantize` from NVIDIA ModelOpt exports (nvidia-modelopt 0.47.0), decoded on the fly.

The sources are made by the real producer: a small Qwen3 model (seeded random weights) quantized on
CPU by `modelopt.torch.quantization.quantize` (NVFP4_DEFAULT_CFG with FP8_KV_CFG, W4A16_NVFP4_CFG,
FP8_DEFAULT_CFG, FP8_PER_CHANNEL_PER_TOKEN_CFG, NVFP4 with FP8 attention: MIXED_PRECISION) and
written by ModelOpt's own Hugging Face export (`modelopt.torch.export.export_hf_checkpoint`, in
small shards), in BF16 and in F16. The reference
decode of each weight is ModelOpt's own: `NVFP4QTensor.dequantize(scale=weight_scale,
double_scale=weight_scale_2)` and `FP8QTensor.dequantize(scale=weight_scale)` into the model's
dtype (a per-channel FP8 scale, stored [rows], broadcast per row, as ModelOpt divided by it),
saved as a dense checkpoint with the source's config.json minus its quantization_config.

The decode is proven through the bytes: a run that keeps every weight dense (`--ignore re:.*`) and
`sparkulator dequantize` write exactly the reference decode, and quantizing the ModelOpt source
writes exactly what quantizing the reference decode writes. The older form (the quantization
described only in hf_quant_config.json, as ModelOpt up to 0.29 wrote it) decodes the same. Bad
sources (a scale missing, misshapen, of the wrong dtype or non-finite; an algorithm not decoded;
ModelOpt's own export of gpt-oss's fused 3-D experts, not decoded yet) fail naming the file and
tensor, and write nothing.

ModelOpt runs in a child process (its import registers plugins into transformers and torch, which
must not leak into the other tests of a worker).
"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from source_edits import broken_copy, edit_shard, tensors_of

# (name, ModelOpt config expression, dtype): the sources the fixture exports.
VARIANTS = {
    "nvfp4": ("NVFP4_DEFAULT_CFG", "bfloat16", True),
    "w4a16_nvfp4": ("W4A16_NVFP4_CFG", "bfloat16", False),
    "fp8": ("FP8_DEFAULT_CFG", "bfloat16", False),
    "fp8_pc": ("FP8_PER_CHANNEL_PER_TOKEN_CFG", "bfloat16", False),
    "nvfp4_f16": ("NVFP4_DEFAULT_CFG", "float16", False),
    "fp8_f16": ("FP8_DEFAULT_CFG", "float16", False),
    # NVFP4 with FP8 attention: ModelOpt exports it as MIXED_PRECISION with quantized_layers.
    "mixed": ("NVFP4_DEFAULT_CFG", "bfloat16", False),
}

PRODUCER = textwrap.dedent("""
    import copy, json, sys
    from pathlib import Path
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3Config, Qwen3ForCausalLM
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    from modelopt.torch.quantization.qtensor import FP8QTensor, NVFP4QTensor

    root, variants = Path(sys.argv[1]), json.loads(sys.argv[2])
    for name, (cfg_name, dtype_name, kv) in variants.items():
        dtype = getattr(torch, dtype_name)
        config = Qwen3Config(hidden_size=256, intermediate_size=384, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=128,
                             vocab_size=64, torch_dtype=dtype_name,
                             architectures=["Qwen3ForCausalLM"])
        torch.manual_seed(11)
        model = Qwen3ForCausalLM(config).to(dtype)
        cfg = copy.deepcopy(getattr(mtq, cfg_name))
        if kv:
            cfg["quant_cfg"] = cfg["quant_cfg"] + mtq.FP8_KV_CFG["quant_cfg"]
        if name == "mixed":
            fp8 = {"num_bits": (4, 3), "axis": None}
            cfg["quant_cfg"] = cfg["quant_cfg"] + [
                {"quantizer_name": "*self_attn*weight_quantizer", "cfg": fp8},
                {"quantizer_name": "*self_attn*input_quantizer", "cfg": fp8}]
        calib = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(5))
        model = mtq.quantize(model, cfg, lambda m: m(calib))
        src = root / name
        export_hf_checkpoint(model, export_dir=src, max_shard_size="150KB")
        stored = {}
        for f in sorted(src.glob("*.safetensors")):
            stored.update(load_file(str(f)))
        group = 16  # every NVFP4 export's (MIXED_PRECISION records it per layer)
        ref = {}
        for k, t in stored.items():
            if k.endswith((".weight_scale", ".weight_scale_2", ".input_scale", ".k_scale",
                           ".v_scale")):
                continue
            m = k[:-len(".weight")]
            if t.dtype == torch.uint8:
                shape = torch.Size((t.shape[0], 2 * t.shape[1]))
                ref[k] = NVFP4QTensor(shape, dtype, t).dequantize(
                    dtype=dtype, scale=stored[m + ".weight_scale"],
                    double_scale=stored[m + ".weight_scale_2"], block_sizes={-1: group})
            elif t.dtype == torch.float8_e4m3fn:
                scale = stored[m + ".weight_scale"]
                scale = scale if scale.dim() == 0 else scale.reshape(-1, 1)
                ref[k] = FP8QTensor(t.shape, dtype, t).dequantize(dtype=dtype, scale=scale)
            else:
                ref[k] = t
        dense = root / (name + "-ref")
        dense.mkdir()
        save_file({k: v.contiguous() for k, v in ref.items()}, str(dense / "model.safetensors"),
                  metadata={"format": "pt"})
        c = json.loads((src / "config.json").read_text())
        del c["quantization_config"]
        (dense / "config.json").write_text(json.dumps(c, indent=2))
    """)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """Every variant's ModelOpt export (root/NAME) and its reference decode (root/NAME-ref)."""
    root = tmp_path_factory.mktemp("modelopt")
    proc = subprocess.run([sys.executable, "-c", PRODUCER, str(root), json.dumps(VARIANTS)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root


def assert_same_bytes(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for k in want:
        same = got[k].dtype == want[k].dtype and torch.equal(
            got[k].contiguous().view(torch.uint8), want[k].contiguous().view(torch.uint8))
        assert same, k


def test_the_exports_are_what_modelopt_writes(exports):
    """The fixture's sources hold what this file decodes: both config forms, the tensor layouts,
    several shards, and the E2M1 nibble 8 (ModelOpt decodes it as +0)."""
    src = exports / "nvfp4"
    assert len(list(src.glob("*.safetensors"))) > 1
    qc = json.loads((src / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "modelopt" and qc["quant_algo"] == "NVFP4"
    hf = json.loads((src / "hf_quant_config.json").read_text())
    assert hf["producer"]["name"] == "modelopt" and hf["quantization"]["group_size"] == 16
    index = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    t = tensors_of(src)
    q = "model.layers.0.self_attn.q_proj."
    assert t[q + "weight"].dtype == torch.uint8 and t[q + "weight"].shape == (256, 128)
    assert t[q + "weight_scale"].dtype == torch.float8_e4m3fn
    assert t[q + "weight_scale"].shape == (256, 16)
    assert t[q + "weight_scale_2"].shape == () and t[q + "input_scale"].shape == ()
    assert "model.layers.0.self_attn.k_proj.k_scale" in t
    assert len(set(index.values())) > 1
    assert any(((w & 0x0F) == 8).any() or ((w >> 4) == 8).any()
               for w in t.values() if w.dtype == torch.uint8)
    assert tensors_of(exports / "fp8_pc")[q + "weight_scale"].shape == (256,)
    mixed = json.loads((exports / "mixed" / "config.json").read_text())["quantization_config"]
    assert mixed["quant_algo"] == "MIXED_PRECISION"
    assert mixed["quantized_layers"]["model.layers.0.self_attn.q_proj"]["quant_algo"] == "FP8"
    assert mixed["quantized_layers"]["model.layers.0.mlp.up_proj"] == {"quant_algo": "NVFP4",
                                                                      "group_size": 16}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_weight_kept_dense_is_modelopts_dequantize(spk, exports, tmp_path, variant):
    out = tmp_path / "dense"
    spk("quantize", exports / variant, out, "--scheme", "W4A16", "--ignore", "re:.*", "--no-fsync")
    assert_same_bytes(tensors_of(out), tensors_of(exports / (variant + "-ref")))
    assert not (out / "hf_quant_config.json").exists()


@pytest.mark.parametrize("variant", ["nvfp4", "fp8_pc", "fp8_f16", "mixed"])
def test_dequantize_writes_modelopts_dequantize(spk, exports, tmp_path, variant):
    """`sparkulator dequantize` of a ModelOpt export: the same decode, written as a dense checkpoint
    whose config.json is the source's without quantization_config."""
    out = tmp_path / "dense"
    spk("dequantize", exports / variant, out, "--no-fsync")
    assert_same_bytes(tensors_of(out), tensors_of(exports / (variant + "-ref")))
    assert json.loads((out / "config.json").read_text()) == \
        json.loads((exports / (variant + "-ref") / "config.json").read_text())
    assert not (out / "hf_quant_config.json").exists()


@pytest.mark.parametrize("variant,scheme", [
    ("nvfp4", "W4A16"), ("nvfp4", "NVFP4A16"), ("nvfp4", "FP8_BLOCK"), ("fp8", "W4A16"),
    ("fp8", "NVFP4A16"), ("fp8", "FP8_BLOCK"), ("w4a16_nvfp4", "W4A16"), ("fp8_pc", "W4A16"),
    ("nvfp4_f16", "W4A16"), ("fp8_f16", "W8A16"), ("mixed", "W4A16"), ("mixed", "NVFP4A16")])
def test_a_modelopt_source_quantizes_to_the_bytes_of_its_reference_decode(spk, exports, tmp_path,
                                                                         variant, scheme):
    src = exports / variant
    spk("quantize", src, tmp_path / "from-modelopt", "--scheme", scheme, "--no-fsync")
    spk("quantize", exports / (variant + "-ref"), tmp_path / "from-ref", "--scheme", scheme,
        "--no-fsync")
    got, want = tensors_of(tmp_path / "from-modelopt"), tensors_of(tmp_path / "from-ref")
    assert_same_bytes(got, want)
    assert not any(k.endswith(("_scale_2", ".input_scale", ".k_scale")) for k in got)
    out = json.loads((tmp_path / "from-modelopt" / "config.json").read_text())
    ref = json.loads((tmp_path / "from-ref" / "config.json").read_text())
    assert out["quantization_config"] == ref["quantization_config"]
    src_qc = json.loads((src / "config.json").read_text())["quantization_config"]
    assert out["sparkulator"]["decoded_source"] == {"quantization_config": src_qc}
    assert not (tmp_path / "from-modelopt" / "hf_quant_config.json").exists()


def test_an_export_described_by_hf_quant_config_json_only_decodes_the_same(spk, exports, tmp_path):
    """ModelOpt up to 0.29 wrote no quantization_config into config.json: vLLM then reads
    hf_quant_config.json in its place, and so does sparkulator."""
    old = broken_copy(exports / "nvfp4", tmp_path / "old")
    c = json.loads((old / "config.json").read_text())
    del c["quantization_config"]
    (old / "config.json").write_text(json.dumps(c))
    spk("quantize", old, tmp_path / "from-old", "--scheme", "W4A16", "--no-fsync")
    spk("quantize", exports / "nvfp4", tmp_path / "from-new", "--scheme", "W4A16", "--no-fsync")
    assert_same_bytes(tensors_of(tmp_path / "from-old"), tensors_of(tmp_path / "from-new"))
    out = json.loads((tmp_path / "from-old" / "config.json").read_text())
    assert out["sparkulator"]["decoded_source"] == {
        "quantization_config": json.loads((old / "hf_quant_config.json").read_text()),
        "from": "hf_quant_config.json"}
    assert not (tmp_path / "from-old" / "hf_quant_config.json").exists()
    for folder in (old, exports / "nvfp4"):
        report = spk("inspect", folder).stdout
        assert "decoded from quant_method modelopt" in report, report
        assert "weight_scale" not in report and "input_scale" not in report, report


def test_a_quant_method_that_is_not_a_string_names_the_modelopt_producer(spk, exports, tmp_path):
    """hf_quant_config.json with a quant_method of another type decodes by its ModelOpt producer,
    and inspect names that producer (not nlohmann's type_error, exit 70)."""
    old = broken_copy(exports / "nvfp4", tmp_path / "old")
    c = json.loads((old / "config.json").read_text())
    del c["quantization_config"]
    (old / "config.json").write_text(json.dumps(c))
    hf = json.loads((old / "hf_quant_config.json").read_text())
    hf["quant_method"] = 5
    (old / "hf_quant_config.json").write_text(json.dumps(hf))
    report = spk("inspect", old).stdout
    assert "decoded from quant_method modelopt" in report, report


def test_scales_in_another_shard_than_their_weights_decode_the_same(spk, exports, tmp_path):
    """ModelOpt's export keeps a module's tensors together; a re-sharded copy need not."""
    moved = broken_copy(exports / "nvfp4", tmp_path / "moved")
    index = json.loads((moved / "model.safetensors.index.json").read_text())
    scales = {}
    for f in sorted(set(index["weight_map"].values())):
        t = load_file(str(moved / f))
        scales.update({k: t.pop(k) for k in list(t) if "_scale" in k})
        save_file(t, str(moved / f), metadata={"format": "pt"})
    save_file(scales, str(moved / "scales.safetensors"), metadata={"format": "pt"})
    index["weight_map"].update({k: "scales.safetensors" for k in scales})
    (moved / "model.safetensors.index.json").write_text(json.dumps(index))
    spk("quantize", moved, tmp_path / "from-moved", "--scheme", "NVFP4A16", "--no-fsync")
    spk("quantize", exports / "nvfp4", tmp_path / "from-export", "--scheme", "NVFP4A16",
        "--no-fsync")
    assert_same_bytes(tensors_of(tmp_path / "from-moved"), tensors_of(tmp_path / "from-export"))


def test_compare_measures_against_a_modelopt_sources_decoded_weights(spk, exports, tmp_path):
    q = tmp_path / "q"
    spk("quantize", exports / "fp8", q, "--scheme", "W4A16", "--no-fsync")
    got = json.loads(spk("compare", exports / "fp8", q, "--json").stdout)
    want = json.loads(spk("compare", exports / "fp8-ref", q, "--json").stdout)
    assert got["layers"] and got["layers"] == want["layers"]
    assert {k: v for k, v in got.items() if k not in ("source", "layers")} == \
        {k: v for k, v in want.items() if k not in ("source", "layers")}


Q = "model.layers.0.self_attn.q_proj."


def drop(name):
    return lambda t: t.pop(name)


def replace(name, make):
    def change(t):
        t[name] = make(t[name]).contiguous()
    return change


def poison_block(t):
    s = t[Q + "weight_scale"].clone()
    s.view(torch.uint8)[3, 2] = 0x7F  # E4M3 NaN
    t[Q + "weight_scale"] = s


@pytest.mark.parametrize("variant,tensor,change,words", [
    ("nvfp4", Q + "weight_scale", drop(Q + "weight_scale"),
     [Q + "weight", "U8 without its", "weight_scale"]),
    ("nvfp4", Q + "weight_scale_2", drop(Q + "weight_scale_2"),
     [Q + "weight", "without its", "weight_scale_2"]),
    ("nvfp4", Q + "weight_scale", replace(Q + "weight_scale", lambda s: s[:, :8]),
     [Q + "weight_scale", "shape [256, 8]", "need [256, 16]"]),
    ("nvfp4", Q + "weight_scale", replace(Q + "weight_scale", lambda s: s.float()),
     [Q + "weight_scale", "dtype F32", "F8_E4M3"]),
    ("nvfp4", Q + "weight_scale_2", replace(Q + "weight_scale_2", lambda s: s.repeat(2)),
     [Q + "weight_scale_2", "F32 [2]", "one F32 scale"]),
    ("nvfp4", Q + "weight_scale_2",
     replace(Q + "weight_scale_2", lambda s: torch.tensor(float("inf"))),
     [Q + "weight_scale_2", "non-finite scale inf"]),
    ("nvfp4", Q + "weight_scale", poison_block, [Q + "weight_scale", "non-finite scale nan",
                                                 "block [3, 2]"]),
    ("nvfp4", Q + "weight", drop(Q + "weight"),
     [Q + "weight_scale", "weight is not in the checkpoint"]),
    ("fp8", Q + "weight_scale", drop(Q + "weight_scale"),
     [Q + "weight", "F8_E4M3 without its", "weight_scale"]),
    ("fp8", Q + "weight_scale", replace(Q + "weight_scale", lambda s: s.repeat(3)),
     [Q + "weight_scale", "shape [3]", "[256]"]),
    ("fp8", Q + "weight_scale", replace(Q + "weight_scale", lambda s: s.to(torch.int32)),
     [Q + "weight_scale", "dtype I32"]),
    ("fp8", Q + "weight_scale", replace(Q + "weight_scale", lambda s: torch.tensor(float("nan"))),
     [Q + "weight_scale", "non-finite scale nan"]),
    ("fp8_pc", Q + "weight_scale",
     replace(Q + "weight_scale", lambda s: s.index_fill(0, torch.tensor([7]), float("-inf"))),
     [Q + "weight_scale", "non-finite scale -inf at element 7"]),
])
def test_a_bad_modelopt_source_fails_naming_the_file_and_tensor_and_writes_nothing(
        spk, exports, tmp_path, variant, tensor, change, words):
    bad = broken_copy(exports / variant, tmp_path / "bad")
    edit_shard(bad, tensor, change)
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", "--no-fsync", expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    # The file named is the one holding the tensor named first.
    named = json.loads((bad / "model.safetensors.index.json").read_text())["weight_map"][words[0]]
    for w in words + [f"{bad}/{named}"]:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


def test_a_modelopt_algorithm_not_decoded_is_refused_saying_what_is(spk, exports, tmp_path):
    bad = broken_copy(exports / "nvfp4", tmp_path / "awq")
    c = json.loads((bad / "config.json").read_text())
    c["quantization_config"]["quant_algo"] = "NVFP4_AWQ"
    (bad / "config.json").write_text(json.dumps(c))
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "already quantized" in r.stderr
    for w in [f"{bad}/config.json", "ModelOpt quant_algo NVFP4_AWQ", "NVFP4, W4A16_NVFP4, FP8"]:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


def test_a_mixed_precision_layer_not_decoded_is_refused_naming_it(spk, exports, tmp_path):
    bad = broken_copy(exports / "mixed", tmp_path / "mixed")
    c = json.loads((bad / "config.json").read_text())
    c["quantization_config"]["quantized_layers"]["model.layers.0.mlp.up_proj"]["quant_algo"] = \
        "W4A8_AWQ"
    (bad / "config.json").write_text(json.dumps(c))
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0
    for w in [f"{bad}/config.json", "MIXED_PRECISION with layer model.layers.0.mlp.up_proj in "
              "quant_algo W4A8_AWQ", "MIXED_PRECISION of those"]:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


def test_an_hf_quant_config_json_of_another_producer_is_refused(spk, exports, tmp_path):
    bad = broken_copy(exports / "fp8", tmp_path / "other")
    c = json.loads((bad / "config.json").read_text())
    del c["quantization_config"]
    (bad / "config.json").write_text(json.dumps(c))
    (bad / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "somebody"}, "quantization": {"quant_algo": "FP8"}}))
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0
    for w in [f"{bad}/hf_quant_config.json", "already quantized", "without a ModelOpt producer"]:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


# ModelOpt 0.47's export of gpt-oss's BMM experts (_export_bmm_experts, GptOssExperts): the fused
# `experts.gate_up_proj` stays 3-D, packed U8 [E, hidden / 2, 2 * inter] beside its 3-D
# `gate_up_proj_weight_scale` [E, hidden / 16, 2 * inter] and a scalar `_weight_scale_2`.
GPT_OSS_PRODUCER = textwrap.dedent("""
    import sys
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    config = GptOssConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                          num_local_experts=4, num_experts_per_tok=2, vocab_size=128,
                          layer_types=["full_attention"], architectures=["GptOssForCausalLM"])
    torch.manual_seed(0)
    model = GptOssForCausalLM(config).to(torch.bfloat16)
    calib = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(5))
    model = mtq.quantize(model, mtq.NVFP4_DEFAULT_CFG, lambda m: m(calib))
    export_hf_checkpoint(model, export_dir=sys.argv[1])
    """)


def test_modelopts_fused_3d_experts_are_refused_naming_the_tensor(spk, tmp_path):
    """Not decoded yet: refused naming the fused tensor and its file, nothing written (before, the
    packed bytes were split as dense rows and the error blamed a missing scale)."""
    src = tmp_path / "gpt-oss"
    proc = subprocess.run([sys.executable, "-c", GPT_OSS_PRODUCER, str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    fused = "model.layers.0.mlp.experts.gate_up_proj"
    stored = load_file(str(src / "model.safetensors"))
    assert stored[fused].dtype == torch.uint8 and stored[fused].shape == (4, 32, 128)
    assert stored[fused + "_weight_scale"].shape == (4, 4, 128)
    r = spk("quantize", src, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    for w in [f"{src}/model.safetensors: tensor 'model.layers.0.mlp.experts.",
              "a quantized fused 3-D expert tensor", "_weight_scale, as ModelOpt exports"]:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()
