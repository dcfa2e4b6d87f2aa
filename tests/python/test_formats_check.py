"""`sparkulator check` on every format sparkulator writes besides pack-quantized (FP8_DYNAMIC, FP8_BLOCK,
W8A8/INT8, NVFP4A16, MXFP4A16, MXFP8A16, W4AFP8): their tensors are verified by the format's codec
(names, dtypes, shapes), their scales by value (finite and positive; E8M0 not 255; NVFP4's global scale
finite, positive and equal across fused q/k/v and gate/up, across shards too), and FP8 blocks by the
shape rule vLLM 0.32 states (fp8_utils.py validate_fp8_block_shape). Each defect is planted in a real
quantized output and the finding must name its code, the tensor and the file that holds it."""
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import run_model_free_ptq
from formats_sources import PRESETS, UNLOADABLE, layout_flags, write_checkpoint

L0 = "model.layers.0."


def check(spk, d):
    r = spk("check", d, "--json", expect=None)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """test_formats_interop's sharded checkpoint: q/gate/o in one file, k/v/up in the other."""
    src = tmp_path_factory.mktemp("check") / "src"
    write_checkpoint(src, torch.bfloat16, sharded=True)
    return src


def quantize(spk, source, dst, preset):
    r = spk("quantize", source, dst, "--scheme", preset, "--preset", "none", "--no-fsync",
            *layout_flags(preset), expect=None)
    assert r.returncode == 0, r.stderr
    return dst


def file_of(d: Path, tensor: str) -> Path:
    index = json.loads((d / "model.safetensors.index.json").read_text())
    return d / index["weight_map"][tensor]


def edit(d: Path, tensor: str, change):
    """Rewrites the shard holding `tensor` with change(tensors) applied; returns the shard's name."""
    f = file_of(d, tensor)
    tensors = load_file(str(f))
    change(tensors)
    save_file(tensors, str(f), metadata={"format": "pt"})
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"] = {**{k: v for k, v in index["weight_map"].items() if k in tensors or
                              v != f.name}, **{k: f.name for k in tensors}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    return f.name


@pytest.mark.parametrize("preset", PRESETS)
def test_every_format_is_checked_and_a_clean_output_passes(spk, tmp_path, preset):
    src = tmp_path / "src"
    assert spk("example", src, "--family", "llm", expect=None).returncode == 0
    report = check(spk, quantize(spk, src, tmp_path / "q", preset))
    codes = {f["code"] for f in report["findings"]}
    errors = [f["code"] for f in report["findings"] if f["severity"] == "error"]
    if preset in UNLOADABLE:  # the tensors check clean; the layout is what vLLM refuses
        assert errors == ["layout-loads-nowhere"], report["findings"]
    else:
        assert report["ok"], report["findings"]
    assert "format-not-checked" not in codes
    assert report["quantized_modules"] > 0 and report["dense_linear_modules"] == 0


def finding(report, code):
    hits = [f for f in report["findings"] if f["code"] == code]
    assert hits, f"no {code} in {[f['code'] for f in report['findings']]}"
    assert not report["ok"]
    return hits


def set_item(name, index, value):
    def change(t):
        t[name] = t[name].clone()
        t[name].view(-1)[index] = value
    return change


DEFECTS = {
    # preset, tensor, change, code
    "wrong_dtype": ("FP8_DYNAMIC", L0 + "self_attn.q_proj.weight",
                    lambda t: t.update({L0 + "self_attn.q_proj.weight":
                                        t[L0 + "self_attn.q_proj.weight"].view(torch.int8)}),
                    "quant-tensor-shape"),
    "wrong_scale_shape": ("NVFP4A16", L0 + "mlp.up_proj.weight_scale",
                          lambda t: t.update({L0 + "mlp.up_proj.weight_scale":
                                              t[L0 + "mlp.up_proj.weight_scale"][:, :-1].clone()}),
                          "quant-tensor-shape"),
    "missing_scale": ("MXFP4A16", L0 + "self_attn.o_proj.weight_scale",
                      lambda t: t.pop(L0 + "self_attn.o_proj.weight_scale"),
                      "missing-weight-scale"),
    "missing_global_scale": ("NVFP4A16", L0 + "self_attn.v_proj.weight_global_scale",
                             lambda t: t.pop(L0 + "self_attn.v_proj.weight_global_scale"),
                             "missing-quant-tensor"),
    "nan_scale": ("FP8_BLOCK", L0 + "mlp.down_proj.weight_scale",
                  set_item(L0 + "mlp.down_proj.weight_scale", 1, float("nan")), "scale-not-finite"),
    "zero_scale": ("W8A8", L0 + "mlp.gate_proj.weight_scale",
                   set_item(L0 + "mlp.gate_proj.weight_scale", 3, 0.0), "scale-zero"),
    "e8m0_255": ("MXFP8A16", L0 + "mlp.up_proj.weight_scale",
                 set_item(L0 + "mlp.up_proj.weight_scale", 5, 255), "scale-not-finite"),
    "e4m3_nan": ("NVFP4A16", L0 + "self_attn.q_proj.weight_scale",
                 lambda t: t.update({L0 + "self_attn.q_proj.weight_scale": torch.where(
                     torch.arange(t[L0 + "self_attn.q_proj.weight_scale"].numel()).reshape(
                         t[L0 + "self_attn.q_proj.weight_scale"].shape) == 0,
                     torch.tensor(float("nan")),
                     t[L0 + "self_attn.q_proj.weight_scale"].float()).to(torch.float8_e4m3fn)}),
                 "scale-not-finite"),
    "global_scale_zero": ("NVFP4A16", L0 + "self_attn.o_proj.weight_global_scale",
                          set_item(L0 + "self_attn.o_proj.weight_global_scale", 0, 0.0),
                          "global-scale-invalid"),
    # k_proj sits in the second shard, q_proj in the first: the partners must still agree.
    "global_scales_differ_across_shards": (
        "NVFP4A16", L0 + "self_attn.k_proj.weight_global_scale",
        lambda t: t[L0 + "self_attn.k_proj.weight_global_scale"].mul_(2), "global-scale-differs"),
    "zero_point_in_symmetric": ("W4AFP8", L0 + "mlp.gate_proj.weight",
                                lambda t: t.update({L0 + "mlp.gate_proj.weight_zero_point":
                                                    torch.zeros(256, 3, dtype=torch.int8)}),
                                "unexpected-quant-tensor"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_a_planted_defect_is_found_naming_file_and_tensor(source, spk, tmp_path, defect):
    preset, tensor, change, code = DEFECTS[defect]
    q = quantize(spk, source, tmp_path / "q", preset)
    clean = [f["code"] for f in check(spk, q)["findings"]]
    # FP8_BLOCK: k_proj's rule below; an UNLOADABLE preset: its layout's one finding.
    assert clean == (["layout-loads-nowhere"] if preset in UNLOADABLE else []) or \
        preset == "FP8_BLOCK", clean
    shard = edit(q, tensor, change)
    hits = finding(check(spk, q), code)
    module = tensor.rsplit(".", 1)[0]
    assert any(h["file"] == shard and (module in h["module"] or module in h["message"])
               for h in hits), hits


def test_fp8_blocks_follow_vllms_fused_partition_rule(source, spk, tmp_path):
    """q/k/v fuse into one GEMM; vLLM requires every member but the last (v) to be whole 128-row
    blocks: k_proj's 192 rows fail, v_proj's do not. model_free_ptq quantizes them anyway, and check
    flags its output; sparkulator's plan applies the same rule, keeps q/k/v dense, and checks clean."""
    pytest.importorskip("llmcompressor")
    ref = tmp_path / "ref"
    run_model_free_ptq([(str(source), str(ref), "FP8_BLOCK")], ignore=["lm_head", "re:.*embed_tokens"])
    hits = finding(check(spk, ref), "kernel-rule")
    assert [h["module"] for h in hits] == [L0 + "self_attn.k_proj"]
    assert "validate_fp8_block_shape" in hits[0]["message"]
    ours = check(spk, quantize(spk, source, tmp_path / "q", "FP8_BLOCK"))
    assert ours["ok"] and not [f for f in ours["findings"] if f["code"] == "kernel-rule"], ours
