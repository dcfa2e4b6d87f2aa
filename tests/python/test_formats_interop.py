"""Interop: every data-free format sparkulator writes must equal llm-compressor's model_free_ptq BYTE FOR
BYTE (llmcompressor 0.14.0.1 with compressed-tensors 0.19.0, on the CPU), per preset: FP8_DYNAMIC,
FP8_BLOCK, W8A8 (and its alias INT8), NVFP4A16, MXFP4A16, MXFP8A16 and W4AFP8; and the integer widths
W2/3/5/6/7A16 (the presets, and the asymmetric and channel-wise widths, which model_free_ptq takes as
a QuantizationScheme object).

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
from pathlib import Path

import pytest
import torch

from conftest import quantization_config, run_model_free_ptq, assert_same_tensors, load_dir
from formats_sources import (CHECKPOINTS, DTYPES, HIDDEN, KV, PRESETS,  # noqa: F401
                             REFERENCE_EXTRA_IGNORE, write_checkpoint)

pytest.importorskip("llmcompressor")
REFERENCE_IGNORE = ["lm_head", "re:.*embed_tokens"]


def quantize_both(root: Path, spk, checkpoints: list, cases: dict) -> dict:
    """Both tools on each checkpoint (name: "bf16", "f16-sharded", ...) and case (key -> (the
    reference's scheme, extra reference ignores, sparkulator's quantize flags)): returns
    (checkpoint, key) -> (reference folder, sparkulator folder). The reference runs in one batch."""
    jobs, out = [], {}
    for ckpt in checkpoints:
        src = root / ckpt
        write_checkpoint(src, DTYPES[ckpt.split("-")[0]], sharded=ckpt.endswith("sharded"))
        for key, (scheme, extra_ignore, flags) in cases.items():
            ref, ours = root / f"ref-{ckpt}-{key}", root / f"ours-{ckpt}-{key}"
            jobs.append((str(src), str(ref), scheme, extra_ignore))
            spk("quantize", src, ours, *flags, "--preset", "none")
            out[ckpt, key] = ref, ours
    run_model_free_ptq(jobs, ignore=REFERENCE_IGNORE)
    return out


@pytest.fixture(scope="module")
def outputs(format_quantized):
    """(checkpoint, preset) -> (reference folder, sparkulator folder). Sparkulator's are the
    session's (conftest.py format_quantized, shared with test_formats_read_back.py); the references
    come from the cache, copied beside them in one batch."""
    jobs, out = [], {}
    for (ckpt, preset), ours in format_quantized.items():
        ref = ours.parent / f"ref-{ckpt}-{preset}"
        if not ref.exists():
            jobs.append((str(ours.parent / ckpt), str(ref), preset,
                         REFERENCE_EXTRA_IGNORE.get(preset, [])))
        out[ckpt, preset] = ref, ours
    run_model_free_ptq(jobs, ignore=REFERENCE_IGNORE)
    return out


@pytest.mark.parametrize("ckpt", CHECKPOINTS)
@pytest.mark.parametrize("preset", PRESETS)
def test_tensors_equal_model_free_ptq_byte_for_byte(outputs, ckpt, preset):
    ref = assert_same_tensors(*outputs[ckpt, preset])
    quantized = [n for n in ref if n.endswith((".weight_scale"))]
    # Every projection (FP8_BLOCK: all but q/k/v), not a vacuous comparison.
    assert len(quantized) == (4 if preset == "FP8_BLOCK" else 7)


def test_fp8_block_keeps_a_fused_group_dense_when_vllm_refuses_its_partial_block(spk, tmp_path):
    src = tmp_path / "src"
    write_checkpoint(src, torch.bfloat16, sharded=False)
    plan = json.loads(spk("quantize", src, tmp_path / "q", "--scheme", "FP8_BLOCK", "--preset",
                          "none", "--dry-run", "--json").stdout)
    reasons = {t["name"]: t for t in plan["tensors"]}
    for m in ("q_proj", "k_proj", "v_proj"):
        entry = reasons[f"model.layers.0.self_attn.{m}.weight"]
        assert entry["action"] != "quantize", entry
    k = reasons["model.layers.0.self_attn.k_proj.weight"]["reason"]
    assert "validate_fp8_block_shape" in k and "192" in k, k
    assert reasons["model.layers.0.mlp.gate_proj.weight"]["action"] == "quantize"


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


# ---- W2/3/5/6/7A16 --------------------------------------------------------------------------------
# compressed-tensors 0.19 has presets W2A16 .. W7A16 (symmetric, group 128); the asymmetric widths and
# other group sizes reach model_free_ptq as a QuantizationScheme object (weights =
# QuantizationArgs(num_bits=N, type="int", symmetric, strategy group/channel), targets ["Linear"]).
# sparkulator's rows w2a16 .. w7a16-asym. Every width sym and asym at group 128, two channel-wise
# cases, BF16 and F16: the values of 3/5/6/7 bits straddle int32 words, and the zero points pack
# down the rows.
WIDTH_CASES = [(f"w{b}a16{'' if sym else '-asym'}", b, sym, 128)
               for b in (2, 3, 5, 6, 7) for sym in (True, False)]
WIDTH_CASES += [("w3a16", 3, True, -1), ("w6a16-asym", 6, False, -1)]
WIDTH_CKPTS = ["bf16", "f16"]


def width_id(case) -> str:
    return f"{case[0]}-g{case[3]}" if case[3] > 0 else f"{case[0]}-channel"


def reference_scheme(bits: int, symmetric: bool, group: int):
    """What a user gives model_free_ptq: compressed-tensors' preset (W3A16: symmetric, group 128),
    else the QuantizationScheme (as a dict) of the asymmetric or channel-wise width."""
    if symmetric and group == 128:
        return f"W{bits}A16"
    weights = {"num_bits": bits, "type": "int", "symmetric": symmetric,
               "strategy": "group" if group > 0 else "channel"}
    if group > 0:
        weights["group_size"] = group
    return {"targets": ["Linear"], "weights": weights}


@pytest.fixture(scope="module")
def width_outputs(tmp_path_factory, spk):
    """(checkpoint, case id) -> (reference folder, sparkulator folder)."""
    cases = {width_id(c): (reference_scheme(*c[1:]), [],
                           ["--scheme", c[0], "--group-size", c[3], "--no-fsync"])
             for c in WIDTH_CASES}
    return quantize_both(tmp_path_factory.mktemp("widths"), spk, WIDTH_CKPTS, cases)


@pytest.mark.parametrize("ckpt", WIDTH_CKPTS)
@pytest.mark.parametrize("case", WIDTH_CASES, ids=width_id)
def test_widths_equal_model_free_ptq_byte_for_byte(width_outputs, ckpt, case):
    ref = assert_same_tensors(*width_outputs[ckpt, width_id(case)])
    _, bits, symmetric, _ = case
    assert len([n for n in ref if n.endswith(".weight_scale")]) == 7  # every projection
    assert any(n.endswith(".weight_zero_point") for n in ref) == (not symmetric)
    # k_proj is [192, 384]: ceil(384 * bits / 32) words per row, zero points ceil(192 * bits / 32).
    k = "model.layers.0.self_attn.k_proj."
    assert ref[k + "weight_packed"].shape == (KV, -(-HIDDEN * bits // 32))


@pytest.mark.parametrize("case", WIDTH_CASES, ids=width_id)
def test_widths_quantization_config_is_the_reference(width_outputs, case):
    ref_dir, ours_dir = width_outputs["bf16", width_id(case)]
    theirs, mine = (json.loads((d / "config.json").read_text())["quantization_config"]
                    for d in (ref_dir, ours_dir))
    # The config group as model_free_ptq writes a scheme object: its name, every key and value.
    assert mine["config_groups"] == theirs["config_groups"]
    # Every other key too, but the ignore list (sparkulator writes the modules it keeps dense) and
    # sparsity_config, which sparkulator writes as {} and model_free_ptq leaves out.
    differ = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    assert differ <= {"ignore", "sparsity_config"}, differ
    ref, ours = map(quantization_config, (ref_dir, ours_dir))
    (theirs,), (mine,) = ref.config_groups.values(), ours.config_groups.values()
    assert mine.model_dump() == theirs.model_dump()


@pytest.mark.parametrize("case", WIDTH_CASES, ids=width_id)
def test_widths_read_back_as_compressed_tensors_decompresses(width_outputs, spk, tmp_path, case):
    """dequantize equals compressed-tensors' decompression bit for bit, compare reports its error;
    inspect counts the modules; check predicts what vLLM 0.32 does with the width (no kernel)."""
    from test_formats_read_back import reference_decompression
    _, ours_dir = width_outputs["f16", width_id(case)]
    dense = tmp_path / "dense"
    spk("dequantize", ours_dir, dense)
    reference, ours = reference_decompression(ours_dir), load_dir(dense)
    assert len(reference) == 7
    for module, want in reference.items():
        got = ours[module + ".weight"]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), module
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)), module
    # compare: the error of that same decompression against the source weights.
    source = load_dir(ours_dir.parent / "f16")
    layers = {l["module"]: l for l in json.loads(
        spk("compare", ours_dir.parent / "f16", ours_dir, "--json", "--samples", "2").stdout)["layers"]}
    assert sorted(layers) == sorted(reference)
    for module, dq in reference.items():
        w = source[module + ".weight"].double()
        e = w - dq.double()
        assert layers[module]["rel_fro"] == pytest.approx((e.norm() / w.norm()).item(), rel=1e-9)
        assert layers[module]["max_abs"] == pytest.approx(e.abs().max().item(), rel=1e-12)
    assert json.loads(spk("inspect", ours_dir, "--json").stdout)["quantized_modules"] == 7
    report = json.loads(spk("check", ours_dir, "--json", expect=1).stdout)
    assert {f["code"] for f in report["findings"]} == {"no-vllm-kernel"}, report["findings"]
    _, bits, symmetric, _ = case
    vllm_type = f"uint{bits}b{1 << (bits - 1)}" if symmetric else f"uint{bits}"
    assert f"Quant type ({vllm_type}) not supported by CPUWNA16" in report["findings"][0]["message"]
