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

A module the base lists that a format's build lacks (Kimi-K3 MTP's head and attention under
MXFP4: never asked of the quant config) is recorded as not quantized under it where the base
quantizes it; a module only the format's build has is not recorded (the C++ reader keeps a module
the map does not list dense, whatever the format).

Error policy: pure functions over the children's maps; a missing field raises KeyError.
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


NOT_BUILT = {"quantized": False, "quant_method": None, "scheme": None}


def _differences(base: dict, other: dict) -> dict:
    """The base's modules whose verdict under the format differs (absent: not quantized)."""
    return {key: other.get(key, NOT_BUILT) for key in sorted(base)
            if other.get(key, NOT_BUILT)["quantized"] != base[key]["quantized"]}


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
                v["modules"] = _differences(entry["modules"], o["modules"])
            verdicts[fmt] = v
        entry["scheme_verdicts"] = verdicts
    return base
