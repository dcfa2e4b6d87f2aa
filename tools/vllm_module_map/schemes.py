"""vLLM's verdict per compressed-tensors format: the map's "schemes" and "scheme_verdicts".

The maps' "modules" are what vLLM builds under the base config (configs.QUANT_CONFIG, W4A16
pack-quantized). generate.py builds every architecture again under each other format of
configs.SCHEME_CONFIGS, in a process of its own, recording only the module verdicts
(module_verdicts); merge() folds those into the base map, keeping only what differs from the
base verdict, so that a map where every format agrees carries empty objects:

- "schemes" (top level): per format, the "quantization_config" it was built with and the
  "platform" (the faked CUDA capability, or "the installed build's" for a vLLM that runs here):
  FP8, NVFP4 and MX kernels are chosen by capability. The base format has "base": true.
- "scheme_verdicts" (per architecture that the base built): per other format, "error" (vLLM's
  refusal to build the architecture under it, else null; "error_at" and "error_module" with it as
  for the base's "error") and "modules": for each module (the base's key) whose verdict differs,
  its "quantized", "quant_method" and "scheme" under that format. "quantized" is the same question
  for every format: the module registered a quantized weight (a *weight_packed or *weight_scale
  parameter), i.e. vLLM gave it a compressed-tensors scheme or MoE method.

Error policy: pure functions over the children's maps. A module the base lists that a format's
build lacks, or one the format's build adds, is a generator inconsistency: ValueError naming the
architecture, format and module (nothing is written).
"""
from __future__ import annotations

from collections.abc import Iterable


def quantized(params: Iterable[str]) -> bool:
    """A module that registered a quantized weight under any format (W4A16 and NVFP4/MXFP4 pack
    it into *weight_packed; W8A8, FP8 and MXFP8 store *weight with a *weight_scale)."""
    return any(p.endswith(("weight_packed", "weight_scale")) for p in params)


def module_verdicts(recorded: Iterable[tuple]) -> dict:
    """The verdicts of a built model, from build.Builder.recorded_modules, keyed as the base map's
    "modules" (the prefix, or the path where the prefix is empty)."""
    return {e["prefix"] or e["path"]: {"quant_method": e["quant_method"], "scheme": e["scheme"],
                                       "quantized": quantized(e["params"])}
            for _, _, _, e in recorded}


def _differences(arch: str, fmt: str, base: dict, other: dict) -> dict:
    if set(base) != set(other):
        raise ValueError(f"{arch} under {fmt}: modules differ from the base build's: "
                         f"only in the base {sorted(set(base) - set(other))}, "
                         f"only under {fmt} {sorted(set(other) - set(base))}")
    return {key: v for key, v in sorted(other.items())
            if v["quantized"] != base[key]["quantized"]}


def merge(base: dict, others: dict[str, dict], platform: str) -> dict:
    """`base` (the base format's map) with "schemes" and "scheme_verdicts" from `others`
    (format -> that format's verdicts-only map of the same release)."""
    base["schemes"] = {base["quantization_config"]["format"]: {
        "base": True, "quantization_config": base["quantization_config"], "platform": platform}}
    for fmt, other in sorted(others.items()):
        base["schemes"][fmt] = {"base": False, "quantization_config": other["quantization_config"],
                                "platform": platform}
    for arch, entry in base["architectures"].items():
        verdicts = {}
        for fmt, other in sorted(others.items()):
            o = other["architectures"][arch]
            v = {"error": o.get("error"), "modules": {}}
            for k in ("error_at", "error_module"):
                if o.get(k) is not None:
                    v[k] = o[k]
            if entry.get("error") is None and o.get("error") is None:
                v["modules"] = _differences(arch, fmt, entry["modules"], o["modules"])
            verdicts[fmt] = v
        entry["scheme_verdicts"] = verdicts
    return base
