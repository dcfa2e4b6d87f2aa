"""`sparkulator quantize` from pre-quantized sources, decoded on the fly.

A compressed-tensors source of every format sparkulator writes must quantize to the bytes that
quantizing its `sparkulator dequantize` output writes (that decode is compressed-tensors' own
decompress, bit for bit: test_formats_interop.py), with the source recorded in config.json.

An FP8 source (transformers' FineGrainedFP8 format, as DeepSeek-V3 and Kimi K2 ship: quant_method
"fp8", F8_E4M3 weights, one F32 `weight_scale_inv` per 128x128 block):

The decode is proven through the bytes: quantizing the FP8 source must write exactly what quantizing
its reference decode writes, where the reference is transformers' own `Fp8Dequantize._dequantize_one`
(to BF16, as a BF16 model loads it) for every weight whose shape is a multiple of the block. For a
weight that is not (the scale grid rounded up: DeepSeek's `weight_dequant` and vLLM cut the last
block), transformers derives the block from the grid instead and refuses or splits differently, so
that one's reference is the block rule written out in torch below. A weight kept dense is written
decoded. Bad sources (scale missing, misshapen, non-finite; a format not decoded) fail naming the file
and tensor, and write nothing.
"""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from source_edits import broken_copy, edit_shard, tensors_of

HIDDEN, KV, INTERMEDIATE = 256, 128, 384
BLOCK = 128
L0 = "model.layers.0."
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
              "weight_block_size": [BLOCK, BLOCK]}
SHAPES = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV, HIDDEN),
          "self_attn.v_proj": (KV, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
          # 320 rows: a last block of 64 rows, the grid rounded up (3 x 3 scales).
          "mlp.gate_proj": (320, HIDDEN), "mlp.up_proj": (320, HIDDEN),
          "mlp.down_proj": (HIDDEN, 320)}


def fp8_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek's block quantization: per 128x128 block absmax / 448, the grid rounded up."""
    rows, cols = w.shape
    sr, sc = -(-rows // BLOCK), -(-cols // BLOCK)
    scale = torch.empty(sr, sc, dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(sr):
        for j in range(sc):
            blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK].float()
            s = blk.abs().max().clamp(min=1e-12) / 448.0
            scale[i, j] = s
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (blk / s).to(torch.float8_e4m3fn)
    return q, scale


def reference_decode(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows, cols = q.shape
    if rows % BLOCK == 0 and cols % BLOCK == 0:
        from transformers.integrations.finegrained_fp8 import Fp8Dequantize
        return Fp8Dequantize(None)._dequantize_one(q, scale, output_dtype=torch.bfloat16)
    full = scale.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:rows, :cols]
    return (q.float() * full).to(torch.bfloat16)


def config(quantization: dict | None) -> dict:
    c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": HIDDEN,
         "intermediate_size": 320, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 64, "torch_dtype": "bfloat16"}
    if quantization:
        c["quantization_config"] = quantization
    return c


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """An FP8 source in two shards (a scale in the other shard than its weight) and its reference
    BF16 decode."""
    root = tmp_path_factory.mktemp("fp8")
    g = torch.Generator().manual_seed(7)
    fp8, ref = {}, {}
    for k, shape in SHAPES.items():
        w = torch.randn(*shape, generator=g) * 0.05
        q, s = fp8_blocks(w)
        fp8[L0 + k + ".weight"], fp8[L0 + k + ".weight_scale_inv"] = q, s
        ref[L0 + k + ".weight"] = reference_decode(q, s)
    dense = {"model.embed_tokens.weight": torch.randn(64, HIDDEN, generator=g).bfloat16(),
             "lm_head.weight": torch.randn(64, HIDDEN, generator=g).bfloat16(),
             L0 + "input_layernorm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16)}
    fp8.update(dense)
    ref.update(dense)
    src = root / "fp8"
    src.mkdir()
    first = {k: v for k, v in fp8.items() if "q_proj.weight" == k[-13:] or "mlp" in k}
    second = {k: v for k, v in fp8.items() if k not in first}
    files = {"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second}
    for name, part in files.items():
        save_file(part, str(src / name), metadata={"format": "pt"})
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: n for n, part in files.items() for k in part}}))
    (src / "config.json").write_text(json.dumps(config(FP8_CONFIG)))
    assert L0 + "self_attn.q_proj.weight_scale_inv" in second  # its weight is in the first
    dense_dir = root / "ref"
    dense_dir.mkdir()
    save_file(ref, str(dense_dir / "model.safetensors"), metadata={"format": "pt"})
    (dense_dir / "config.json").write_text(json.dumps(config(None)))
    return src, dense_dir


@pytest.mark.parametrize("scheme", ["W4A16", "NVFP4A16", "FP8_BLOCK"])
def test_an_fp8_source_quantizes_to_the_bytes_of_its_reference_decode(spk, sources, tmp_path,
                                                                     scheme):
    src, ref = sources
    spk("quantize", src, tmp_path / "from-fp8", "--scheme", scheme, "--no-fsync")
    spk("quantize", ref, tmp_path / "from-ref", "--scheme", scheme, "--no-fsync")
    got, want = tensors_of(tmp_path / "from-fp8"), tensors_of(tmp_path / "from-ref")
    assert sorted(got) == sorted(want)
    assert not any(k.endswith("weight_scale_inv") for k in got)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k].view(torch.uint8),
                                                             want[k].view(torch.uint8)), k
    out_config = json.loads((tmp_path / "from-fp8" / "config.json").read_text())
    ref_config = json.loads((tmp_path / "from-ref" / "config.json").read_text())
    assert out_config["quantization_config"] == ref_config["quantization_config"]
    assert out_config["sparkulator"]["decoded_source"]["quantization_config"] == FP8_CONFIG


def test_dequantize_writes_an_fp8_sources_reference_decode(spk, sources, tmp_path):
    src, ref = sources
    spk("dequantize", src, tmp_path / "dense", "--no-fsync")
    got, want = tensors_of(tmp_path / "dense"), tensors_of(ref)
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k].view(torch.uint8),
                                                             want[k].view(torch.uint8)), k
    assert "quantization_config" not in json.loads((tmp_path / "dense" / "config.json").read_text())


def test_a_decoded_weight_kept_dense_is_written_decoded(spk, sources, tmp_path):
    src, ref = sources
    spk("quantize", src, tmp_path / "out", "--scheme", "W4A16", "--no-fsync",
        "--ignore", "re:.*mlp\\.down_proj$")
    got = tensors_of(tmp_path / "out")[L0 + "mlp.down_proj.weight"]
    want = load_file(str(ref / "model.safetensors"))[L0 + "mlp.down_proj.weight"]
    assert got.dtype == torch.bfloat16 and torch.equal(got.view(torch.int16), want.view(torch.int16))


SCALE = L0 + "self_attn.q_proj.weight_scale_inv"


def drop(t):
    del t[SCALE]


def misshape(t):
    t[SCALE] = t[SCALE][:1].contiguous()


def poison(t):
    t[SCALE] = t[SCALE].clone()
    t[SCALE][1, 0] = float("inf")


def as_integers(t):
    t[SCALE] = t[SCALE].to(torch.int16)


@pytest.mark.parametrize("change,words", [
    (drop, ["self_attn.q_proj.weight", "without its", "weight_scale_inv"]),
    (misshape, [SCALE, "shape [1, 2]", "needs [2, 2]"]),
    (poison, [SCALE, "non-finite scale inf at block [1, 0]"]),
    (as_integers, [SCALE, "dtype I16"]),
])
def test_a_bad_scale_fails_naming_the_file_and_tensor_and_writes_nothing(spk, sources, tmp_path,
                                                                        change, words):
    src, _ = sources
    bad = broken_copy(src, tmp_path / "bad", lambda d: None)
    shard = edit_shard(bad, SCALE, change)
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", "--no-fsync", expect=None)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    if change is not drop:
        assert shard in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("quantization,words", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ["quant_method bitsandbytes", "fp8",
                                                              "gptq", "awq"]),
    ({"quant_method": "fp8", "fmt": "e4m3"}, ["weight_block_size", "per-tensor FP8"]),
])
def test_a_source_format_not_decoded_is_refused_saying_what_is(spk, sources, tmp_path,
                                                               quantization, words):
    src, _ = sources

    def reconfigure(d):
        (d / "config.json").write_text(json.dumps(config(quantization)))
    bad = broken_copy(src, tmp_path / "bad", reconfigure)
    r = spk("quantize", bad, tmp_path / "out", "--scheme", "W4A16", expect=None)
    assert r.returncode != 0 and "already quantized" in r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert not (tmp_path / "out").exists()


# ---- compressed-tensors sources ----------------------------------------------------------------

from formats_sources import PRESETS, layout_flags, write_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def dense_source(tmp_path_factory):
    src = tmp_path_factory.mktemp("ct") / "src"
    write_checkpoint(src, torch.bfloat16, sharded=True)
    return src


@pytest.mark.parametrize("source_scheme", ["W4A16", "w8a16-asym"] + PRESETS)
def test_a_compressed_tensors_source_quantizes_as_its_dequantized_copy(spk, dense_source, tmp_path,
                                                                      source_scheme):
    q = tmp_path / "q"
    spk("quantize", dense_source, q, "--scheme", source_scheme, "--preset", "none", "--no-fsync",
        *layout_flags(source_scheme))
    spk("dequantize", q, tmp_path / "dense", "--no-fsync")
    target = "NVFP4A16" if source_scheme == "W4A16" else "W4A16"
    spk("quantize", q, tmp_path / "from-q", "--scheme", target, "--no-fsync")
    spk("quantize", tmp_path / "dense", tmp_path / "from-dense", "--scheme", target, "--no-fsync")
    got, want = tensors_of(tmp_path / "from-q"), tensors_of(tmp_path / "from-dense")
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k].view(torch.uint8),
                                                             want[k].view(torch.uint8)), k
    out = json.loads((tmp_path / "from-q" / "config.json").read_text())
    ref = json.loads((tmp_path / "from-dense" / "config.json").read_text())
    src_qc = json.loads((q / "config.json").read_text())["quantization_config"]
    assert out["quantization_config"] == ref["quantization_config"]
    assert out["sparkulator"]["decoded_source"]["quantization_config"] == src_qc


# ---- an FP8 DeepSeek-V3 layout with its MTP layer ----------------------------------------------

def test_an_fp8_deepseek_checkpoints_mtp_layer_plans_as_an_mtp_draft(spk, tmp_path):
    """DeepSeek-V3 ships FP8 with its MTP layer (model.layers.N, N = num_hidden_layers) in the same
    checkpoint: decoded, it plans as MTP layers (eh_proj dense, the MTP serve line), with each
    decoded weight planned in BF16."""
    g = torch.Generator().manual_seed(3)
    t = {}

    def linear(name, rows, cols):
        t[name + ".weight"], t[name + ".weight_scale_inv"] = fp8_blocks(
            torch.randn(rows, cols, generator=g) * 0.05)
    for layer in (0, 1):
        p = f"model.layers.{layer}."
        for name, rows, cols in (("self_attn.q_proj", HIDDEN, HIDDEN),
                                 ("self_attn.kv_a_proj_with_mqa", 192, HIDDEN),
                                 ("self_attn.o_proj", HIDDEN, HIDDEN),
                                 ("mlp.gate_proj", 512, HIDDEN), ("mlp.up_proj", 512, HIDDEN),
                                 ("mlp.down_proj", HIDDEN, 512)):
            linear(p + name, rows, cols)
        t[p + "input_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    mtp = "model.layers.1."
    t[mtp + "eh_proj.weight"] = torch.randn(HIDDEN, 2 * HIDDEN, generator=g).bfloat16()
    for norm in ("enorm", "hnorm"):
        t[mtp + norm + ".weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    t[mtp + "shared_head.head.weight"] = torch.randn(64, HIDDEN, generator=g).bfloat16()
    t["model.embed_tokens.weight"] = torch.randn(64, HIDDEN, generator=g).bfloat16()
    t["lm_head.weight"] = torch.randn(64, HIDDEN, generator=g).bfloat16()
    src = tmp_path / "deepseek"
    src.mkdir()
    save_file(t, str(src / "model.safetensors"), metadata={"format": "pt"})
    (src / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "hidden_size": HIDDEN, "num_hidden_layers": 1, "num_nextn_predict_layers": 1,
        "vocab_size": 64, "torch_dtype": "bfloat16", "quantization_config": FP8_CONFIG}))
    plan = json.loads(spk("quantize", src, tmp_path / "out", "--dry-run", "--json").stdout)
    assert plan["family"] == "mtp", plan["family_reason"]
    assert '"method":"mtp"' in plan["serve"], plan["serve"]
    by_name = {x["name"]: x for x in plan["tensors"]}
    assert not any(n.endswith("weight_scale_inv") for n in by_name)
    assert by_name[mtp + "eh_proj.weight"]["action"] == "keep"
    assert plan["decoded_source"] == FP8_CONFIG
    # inspect shows the same plan for the decoded source, and says it is decoded.
    report = spk("inspect", src).stdout
    assert "decoded from quant_method fp8" in report and "weight_scale_inv" not in report, report
    assert by_name[mtp + "self_attn.o_proj.weight"] == {**by_name[mtp + "self_attn.o_proj.weight"],
                                                         "action": "quantize", "dtype": "BF16"}


def test_compare_measures_against_an_fp8_sources_decoded_weights(spk, sources, tmp_path):
    """compare FP8_SRC Q reads the source's weights decoded, as quantize did: the same report as
    comparing with the reference decode."""
    src, ref = sources
    q = tmp_path / "q"
    spk("quantize", src, q, "--scheme", "W4A16", "--no-fsync")
    got = json.loads(spk("compare", src, q, "--json").stdout)
    want = json.loads(spk("compare", ref, q, "--json").stdout)
    assert got["layers"] and got["layers"] == want["layers"]
    assert {k: v for k, v in got.items() if k not in ("source", "layers")} == \
        {k: v for k, v in want.items() if k not in ("source", "layers")}
