"""The checkpoints of the format suites (test_formats_interop.py, test_formats_read_back.py,
test_formats_check.py): Linear weights that stress every rounding step of the data-free formats (FP8
ties and subnormals, -0.0, all-zero rows, groups and 128x128 blocks, tiny groups, outliers, exact
E2M1 midpoints, partial FP8 row blocks) in BF16, F16 and F32, one of them sharded so that q_proj and
gate_proj sit in one file and k/v_proj and up_proj in the other.

`write_checkpoint` writes one; conftest.py's session fixtures `format_sources` and
`format_quantized` write them once per pytest run and quantize them with sparkulator once, for every
suite that reads them (the reference results come from references.py's cache).

Error policy: none of its own; a failing sparkulator call fails the test that needed it (spk).
"""
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

PRESETS = ["FP8_DYNAMIC", "FP8_BLOCK", "W8A8", "INT8", "NVFP4A16", "MXFP4A16", "MXFP8A16", "W4AFP8"]
# Presets whose model_free_ptq layout no vLLM release loads: quantize writes them only with
# --allow-unloadable (and check reports layout-loads-nowhere), which the byte comparisons pass.
UNLOADABLE = {"W4AFP8"}


def layout_flags(preset: str) -> list:
    """The quantize flags a preset needs to be written at all (see UNLOADABLE)."""
    return ["--allow-unloadable"] if preset.upper() in UNLOADABLE else []
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
    # Seeded like the rest, so that a checkpoint has the same bytes every run: the references made
    # from it (references.py, keyed by its content) are then computed once, not in every run.
    dense = torch.Generator().manual_seed(len(shapes))
    tensors["model.embed_tokens.weight"] = torch.randn(64, HIDDEN, generator=dense).to(dtype)
    tensors["lm_head.weight"] = torch.randn(64, HIDDEN, generator=dense).to(dtype)
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
# FP8 blocks: k_proj's 192 rows end in a partial block, which vLLM refuses for a fused member other
# than the last ("Weight output_partition_size = 192 is not divisible by weight quantization
# block_n = 128", fp8_utils.py validate_fp8_block_shape). sparkulator's plan keeps q/k/v dense for
# it; model_free_ptq quantizes them, so the reference is told to ignore them.
REFERENCE_EXTRA_IGNORE = {"FP8_BLOCK": ["re:.*self_attn\\.[qkv]_proj$"]}


def write_sources(root: Path) -> dict:
    """checkpoint name -> its folder under `root`, every one of CHECKPOINTS written."""
    out = {}
    for ckpt in CHECKPOINTS:
        out[ckpt] = root / ckpt
        write_checkpoint(out[ckpt], DTYPES[ckpt.split("-")[0]], sharded=ckpt.endswith("sharded"))
    return out


def quantize_presets(spk, sources: dict) -> dict:
    """(checkpoint, preset) -> sparkulator's output (--scheme P --preset none), beside the sources
    (so that `out.parent / checkpoint` is its source)."""
    out = {}
    for ckpt, src in sources.items():
        for preset in PRESETS:
            q = src.parent / f"ours-{ckpt}-{preset}"
            spk("quantize", src, q, "--scheme", preset, "--preset", "none", "--no-fsync",
                *layout_flags(preset))
            out[ckpt, preset] = q
    return out
