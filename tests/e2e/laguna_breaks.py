"""Broken Laguna DFlash checkpoints, each a FailureCase for the e2e harness (INTERFACE.md).

Every break starts from a checkpoint sparkulator wrote (or the BF16 draft) and changes one thing:
  laguna-qkv-quantized       `quantize --preset none`: q/k/v (the fused qkv_proj) quantized
  laguna-unfused-qkv         the BF16 draft with q_proj/k_proj/v_proj instead of fused qkv_proj
  laguna-literal-qkv-ignore  W4A16 whose ignore names qkv_proj by its checkpoint name
  laguna-literal-gproj-ignore W4A16 whose ignore names g_proj by its checkpoint name
The expect_error strings are the root-cause lines vLLM 0.32.0's CPU build printed for them
(docs/e2e-laguna.md). Errors: plain exceptions; a failed `sparkulator quantize` raises
env.SparkulatorError.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.e2e import env
from tests.e2e.cases import FailureCase


def quantize(src: Path, dst: Path, *args: str) -> Path:
    """`sparkulator quantize SRC DST --scheme w4a16 ARGS` (env.quantize; log beside DST)."""
    return env.quantize(src, dst, ["--scheme", "w4a16", *args], dst.parent / "logs")


def _rewrite_ignore(src: Path, dst: Path, replace: dict[str, str]) -> Path:
    """Copies `src` and replaces ignore entries (exact strings) in its quantization_config."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    ignore = cfg["quantization_config"]["ignore"]
    for old, new in replace.items():
        if old not in ignore:
            raise ValueError(f"{src}/config.json: ignore has no entry {old!r} (has {ignore})")
        ignore[ignore.index(old)] = new
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return dst


def entry_for(ignore: list[str], leaf: str) -> str:
    """The ignore entry sparkulator wrote for a module leaf name (e.g. qkv_proj, g_proj)."""
    hits = [e for e in ignore if leaf in e or (leaf == "qkv_proj" and "(q|k|v|qkv)_proj" in e)]
    if len(hits) != 1:
        raise ValueError(f"expected one ignore entry for {leaf}, got {hits} in {ignore}")
    return hits[0]


def unfuse_qkv(src: Path, dst: Path, q_size: int, kv_size: int) -> Path:
    """The BF16 draft with its fused qkv_proj split into q_proj/k_proj/v_proj."""
    from safetensors.torch import load_file, save_file
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    sd = load_file(str(dst / "model.safetensors"))
    for name in [n for n in sd if n.endswith("self_attn.qkv_proj.weight")]:
        q, k, v = sd.pop(name).split([q_size, kv_size, kv_size])
        base = name[: -len("qkv_proj.weight")]
        sd[base + "q_proj.weight"], sd[base + "k_proj.weight"], sd[base + "v_proj.weight"] = (
            q.contiguous(), k.contiguous(), v.contiguous())
    save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def failure_cases(kind, work: Path, target: Path, draft: Path) -> list[FailureCase]:
    """The four cases, their checkpoints written under WORK/models (run.py's models folder)."""
    from tests.e2e.laguna_model import Shapes
    s = Shapes()
    work = work / "models"
    work.mkdir(parents=True, exist_ok=True)
    rtn = quantize(draft, work / "laguna-w4a16-rtn")
    ignore = json.loads((rtn / "config.json").read_text())["quantization_config"]["ignore"]
    qkv_entry, g_entry = entry_for(ignore, "qkv_proj"), entry_for(ignore, "g_proj")

    def case(name, what, folder, error):
        return FailureCase(name=name, what=what, target=target, draft=folder,
                           spec_config=kind.spec_config(folder),
                           check_args=[str(folder), "--target", str(target)],
                           expect_vllm_loaded=False, expect_error=error)

    return [
        case("laguna-qkv-quantized",
             "q/k/v quantized (--preset none): laguna_dflash.py reads qkv_proj.weight",
             quantize(draft, work / "laguna-qkv-quantized", "--preset", "none"),
             "AttributeError: 'QKVParallelLinear' object has no attribute 'weight'"),
        case("laguna-unfused-qkv",
             "q_proj/k_proj/v_proj stored unfused: DFlashLagunaModel.load_weights has no "
             "stacked mapping",
             unfuse_qkv(draft, work / "laguna-unfused-qkv", s.heads * s.head_dim,
                        s.kv_heads * s.head_dim),
             "KeyError: 'layers.0.self_attn.k_proj.weight'"),
        case("laguna-literal-qkv-ignore",
             "ignore names qkv_proj by its checkpoint name: vLLM quantizes the dense qkv_proj",
             _rewrite_ignore(rtn, work / "laguna-literal-qkv-ignore",
                             {qkv_entry: "layers.0.self_attn.qkv_proj"}),
             "KeyError: 'layers.0.self_attn.qkv_proj.weight'"),
        case("laguna-literal-gproj-ignore",
             "ignore names the per-head g_proj by its checkpoint name: vLLM quantizes it",
             _rewrite_ignore(rtn, work / "laguna-literal-gproj-ignore",
                             {g_entry: "layers.0.self_attn.g_proj"}),
             "Output size (4) not supported by CPUWNA16"),
    ]


def with_dense_qkv(quantized: Path, dequantized: Path, dst: Path) -> Path:
    """`quantized` with its qkv_proj replaced by the dense weights of `dequantized` (the output of
    `sparkulator dequantize quantized ...`) and an ignore entry for it: the same draft, except that
    vLLM runs q/k/v dense with exactly the values the quantized q/k/v stand for."""
    from safetensors.torch import load_file, save_file
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(quantized, dst)
    sd = load_file(str(dst / "model.safetensors"))
    dense = load_file(str(dequantized / "model.safetensors"))
    for name in [n for n in dense if n.endswith("self_attn.qkv_proj.weight")]:
        base = name[: -len("weight")]
        for suffix in ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point"):
            sd.pop(base + suffix, None)
        sd[name] = dense[name]
    save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"]["ignore"].append(r"re:.*self_attn\.(q|k|v|qkv)_proj$")
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return dst
