"""The names sparkulator gives a draft's modules are the names vLLM asks its quantization config.

vLLM matches a compressed-tensors `ignore` entry against the prefix it builds a Linear under, which
for several draft kinds is not the checkpoint's name with "model." and the target's layer count
added: a model's load_weights renames (MiniMax DSpark's
"language_model.model.dspark.layers.N.decoder_layer." is "model.layers.M."; Ernie, Kimi-K3 and
LongCat MTP drop "mtp_block.", Step-3.5 adds it; Nemotron-3.5 drops "llm."; Gemma4 MTP builds
under "draft_model."), fuses outside the standard groups (MLA's fused_qkv_a_proj, Qwen4-exp's
input_mix_weight_down_block_inject) or keeps a shard as a module of its own (Laguna DFlash's
gate_proj). The module maps record, for every built architecture, the prefix vLLM asked for each
checkpoint name. Here a synthetic checkpoint of every built architecture of every map, stored
under those checkpoint names, goes through `inspect --json`: each Linear's `vllm_module` (what the
plan's ignore entries and check's findings are written from) must be the map's prefix. Kinds whose
layers vLLM numbers after the target's are inspected for a target of another layer count than the
generator's tiny one, so the layer index must move with it.
"""
import json
import re
from pathlib import Path

import pytest

from test_draft_kinds import quantize_refuses, write_checkpoint, write_target
from test_plan_check_agree import MAPS, built

TARGET_LAYERS = 7  # not the generator's tiny target (2), so a copied index would show

# (A kind quantize refuses for the release is planned by no one, and inspect says the refusal:
# test_draft_kinds_refused.py and test_plan_check_agree.py assert it.)
CASES = [(release, name) for release in MAPS for name in built(release)
         if not quantize_refuses(MAPS[release]["architectures"][name])]


def first_index(name: str):
    """(start, value) of the first all-digit component of a dotted name, or None."""
    m = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
    return (m.start(1), int(m.group(1))) if m else None


def expected_names(arch: dict, real_layers: int) -> dict:
    """checkpoint module -> the vLLM module the map says it loads into, for a target (or, for MTP
    layers, a model) of `real_layers` layers: the tiny model's prefix, where vLLM shifted the
    checkpoint's layer index there, shifted by `real_layers` instead."""
    tiny_shift = arch.get("layer_offset") or 0
    out = {}
    for prefix, module in arch["modules"].items():
        for name in module.get("checkpoint_names") or []:
            vllm, ckpt = first_index(prefix), first_index(name)
            shifted = (vllm and ckpt and vllm[1] != ckpt[1]) or (vllm and not ckpt and tiny_shift)
            if shifted:
                start, value = vllm
                prefix_here = prefix[:start] + re.sub(r"^\d+", str(value - tiny_shift + real_layers), prefix[start:])
            else:
                prefix_here = prefix
            out[name] = prefix_here
    return out


@pytest.mark.parametrize("release,name", CASES, ids=[f"{r}-{n}" for r, n in CASES])
def test_inspect_names_modules_as_vllm_asks(tmp_path, spk, release, name):
    arch = MAPS[release]["architectures"][name]
    mtp = "mtp" in arch["methods"]
    shifts = bool(arch.get("layer_offset"))
    # MTP layers are numbered after their own model's layers; a draft's after its target's, but
    # DeepSeek-V4 DSpark's after its own config's num_hidden_layers (the tiny build shifted by 1,
    # not by its target's 2).
    own_count = mtp or (shifts and arch["layer_offset"] != arch["built"].get("target_layers"))
    config = {"num_hidden_layers": TARGET_LAYERS} if own_count else None
    write_checkpoint(tmp_path / "src", name, arch, config=config)
    args = ["inspect", tmp_path / "src", "--json", "--vllm-version", release]
    if shifts and not mtp:
        args += ["--target-layers", TARGET_LAYERS]
    if arch.get("quant_config_from") == "target" and not mtp:
        args += ["--target", write_target(tmp_path / "target", quantized=False)]
    report = json.loads(spk(*args, expect=None).stdout or "{}")
    assert "tensors" in report, f"{name}: inspect gave no plan"
    want = expected_names(arch, TARGET_LAYERS)
    got = {t["name"].removesuffix(".weight"): t.get("vllm_module") for t in report["tensors"]}
    compared = {m: (got[m], want[m]) for m in want if got.get(m)}
    assert compared, f"{name}: no Linear of the map's checkpoint names was planned"
    wrong = {m: pair for m, pair in compared.items() if pair[0] != pair[1]}
    assert not wrong, f"{name} on {release}: (ours, vLLM's) differ: {wrong}"
