"""Interop: every data-free format sparkulator writes must equal llm-compressor's model_free_ptq BYTE FOR
BYTE (llmcompressor 0.14.0.1 with compressed-tensors 0.19.0, on the CPU), per preset: FP8_DYNAMIC,
FP8_BLOCK, W8A8 (and its alias INT8), NVFP4A16, MXFP4A16, MXFP8A16 and W4AFP8.

The checkpoints are built here with weights that stress every rounding step of the formats: FP8 ties
and subnormals, -0.0, all-zero rows, groups and 128x128 blocks (the eps scales), tiny groups (E8M0
exponents clamped at 0, NVFP4 scales of 0), outliers, exact E2M1 midpoints, partial FP8 row blocks,
rows, in BF16, F16 and F32; and one checkpoint sharded so that q_proj and gate_proj sit in one
file and k/v_proj and up_proj in the other (NVFP4's global scale is shared across the fused partners,
across shards). Both tools quantize the same Linear weights: sparkulator with --preset none, the
reference with the embeddings and lm_head ignored (sparkulator keeps them dense by rule).

Asserted: the same tensor names, dtypes, shapes and bytes; the quantization_config's scheme parses to
the same QuantizationScheme with compressed-tensors; `sparkulator dequantize` equals compressed-tensors'
decompression of the reference's own tensors bit for bit.
"""

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from conftest import quantization_config, run_model_free_ptq, assert_same_tensors, load_dir

pytest.importorskip("llmcompressor")

PRESETS = ["FP8_DYNAMIC", "FP8_BLOCK", "W8A8", "INT8", "NVFP4A16", "MXFP4A16", "MXFP8A16", "W4AFP8"]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# Partial FP8 row blocks (k/v: 192 rows); columns in whole blocks, as vLLM's block kernels need
# (model_free_ptq itself fails to save a partial column block). 32 divides every in_features.
HIDDEN, INTERMEDIATE, KV = 384, 256, 192



def pattern_rows(cols: int, gen: torch.Generator) -> list:
    """Rows (float64) that each hit a rounding edge of some format."""
    rows = []
    rows.append(torch.randn(cols, generator=gen, dtype=torch.float64) * 0.02)
    outliers = torch.randn(cols, generator=gen, dtype=torch.float64) * 0.02
    outliers[[3, 77, 130, 200 % cols]] *= 150.0
    rows.append(outliers)
    rows.append(torch.zeros(cols, dtype=torch.float64))  # all-zero row: eps scales everywhere
    zero_groups = torch.randn(cols, generator=gen, dtype=torch.float64)
    zero_groups[:64] = 0.0
    zero_groups[64:80] = -0.0  # negative zeros inside a zero group
    rows.append(zero_groups)
    # Max 448 makes the FP8 channel scale 1: the values are FP8 ties (to even), subnormal ties,
    # and values past the last subnormal.
    ties = torch.tensor([448.0, 1.0625, 1.1875, -1.0625, 2.0**-10, 3 * 2.0**-10, -(2.0**-10),
                         2.0**-7 * 1.5, 240.0, 232.0, 0.0, -0.0], dtype=torch.float64)
    rows.append(ties.repeat(cols // len(ties) + 1)[:cols])
    # Group max 6 makes the MX scale 1: the E2M1 midpoints, positive and negative, and -0.0.
    fp4 = torch.tensor([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -5.0, -0.0, 0.1,
                        -0.1, 4.5, 5.5], dtype=torch.float64)
    rows.append(fp4.repeat(cols // len(fp4) + 1)[:cols])
    tiny = torch.randn(cols, generator=gen, dtype=torch.float64) * 1e-7  # F16 subnormals
    tiny[32:64] *= 1e-30  # a group that underflows F16 entirely and is tiny in BF16/F32
    rows.append(tiny)
    mixed = torch.randn(cols, generator=gen, dtype=torch.float64)
    mixed[::7] *= 40.0
    mixed[1::5] *= 1e-4
    rows.append(mixed)
    return rows


def weight(out: int, cols: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    patterns = pattern_rows(cols, gen)
    w = torch.randn(out, cols, generator=gen, dtype=torch.float64) * 0.05
    for r in range(out):
        if r % 3 == 0:
            w[r] = patterns[(r // 3) % len(patterns)]
    w[0:128, 0:128] = 0.0  # one all-zero FP8 block
    return w.to(dtype)


def write_checkpoint(d: Path, dtype: torch.dtype, sharded: bool):
    d.mkdir(parents=True)
    p = "model.layers.0."
    shapes = {
        "self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV, HIDDEN),
        "self_attn.v_proj": (KV, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
        "mlp.gate_proj": (INTERMEDIATE, HIDDEN), "mlp.up_proj": (INTERMEDIATE, HIDDEN),
        "mlp.down_proj": (HIDDEN, INTERMEDIATE),
    }
    tensors = {p + k + ".weight": weight(*s, dtype, seed=i) for i, (k, s) in enumerate(shapes.items())}
    # k/v and up get a larger range than q and gate, so a shared global scale differs from a
    # per-tensor one.
    for k in ("self_attn.k_proj", "mlp.up_proj"):
        tensors[p + k + ".weight"] = (tensors[p + k + ".weight"].double() * 3).to(dtype)
    tensors[p + "input_layernorm.weight"] = torch.ones(HIDDEN, dtype=dtype)
    tensors["model.embed_tokens.weight"] = torch.randn(64, HIDDEN).to(dtype)
    tensors["lm_head.weight"] = torch.randn(64, HIDDEN).to(dtype)
    if sharded:
        first = {k: v for k, v in tensors.items()
                 if "q_proj" in k or "gate_proj" in k or "o_proj" in k or "embed" in k}
        second = {k: v for k, v in tensors.items() if k not in first}
        files = {"model-00001-of-00002.safetensors": first,
                 "model-00002-of-00002.safetensors": second}
        for name, part in files.items():
            save_file(part, str(d / name), metadata={"format": "pt"})
        index = {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
                 "weight_map": {k: n for n, part in files.items() for k in part}}
        (d / "model.safetensors.index.json").write_text(json.dumps(index))
    else:
        save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": INTERMEDIATE, "num_hidden_layers": 1,
              "num_attention_heads": 6, "num_key_value_heads": 3, "vocab_size": 64,
              "torch_dtype": str(dtype).removeprefix("torch.")}
    (d / "config.json").write_text(json.dumps(config))


CHECKPOINTS = ["bf16", "f16", "f32", "bf16-sharded"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, spk):
    """(checkpoint, preset) -> (reference folder, sparkulator folder)."""
    root = tmp_path_factory.mktemp("formats")
    jobs, out = [], {}
    for ckpt in CHECKPOINTS:
        src = root / ckpt
        write_checkpoint(src, DTYPES[ckpt.split("-")[0]], sharded=ckpt.endswith("sharded"))
        for preset in PRESETS:
            ref, ours = root / f"ref-{ckpt}-{preset}", root / f"ours-{ckpt}-{preset}"
            jobs.append((str(src), str(ref), preset))
            spk("quantize", src, ours, "--scheme", preset, "--preset", "none")
            out[ckpt, preset] = ref, ours
    run_model_free_ptq(jobs, ignore=["lm_head", "re:.*embed_tokens"])
    return out


@pytest.mark.parametrize("ckpt", CHECKPOINTS)
@pytest.mark.parametrize("preset", PRESETS)
def test_tensors_equal_model_free_ptq_byte_for_byte(outputs, ckpt, preset):
    ref = assert_same_tensors(*outputs[ckpt, preset])
    quantized = [n for n in ref if n.endswith((".weight_scale"))]
    assert len(quantized) == 7  # every projection, not a vacuous comparison


@pytest.mark.parametrize("ckpt", ["bf16", "bf16-sharded"])
@pytest.mark.parametrize("preset", PRESETS)
def test_quantization_config_parses_as_the_reference(outputs, ckpt, preset):
    ref, ours = map(quantization_config, outputs[ckpt, preset])
    assert ours.format == ref.format
    assert ours.quantization_status == ref.quantization_status
    (theirs,), (mine,) = ref.config_groups.values(), ours.config_groups.values()
    assert mine.model_dump() == theirs.model_dump()


def test_nvfp4_global_scale_is_shared_across_shards(outputs):
    ours = load_dir(outputs["bf16-sharded", "NVFP4A16"][1])
    gs = lambda m: ours[f"model.layers.0.{m}.weight_global_scale"].item()  # noqa: E731
    assert gs("self_attn.q_proj") == gs("self_attn.k_proj") == gs("self_attn.v_proj")
    assert gs("mlp.gate_proj") == gs("mlp.up_proj")
    assert gs("self_attn.o_proj") != gs("self_attn.q_proj")  # not one scale for everything
