"""Speculators-format drafts: what vLLM makes of each format it registers, asked of vLLM itself.

A speculators checkpoint (config.json with speculators_model_type, transformer_layer_config and
speculators_config) is turned by vLLM into the architecture it builds and the speculative config it
serves with (vllm/transformers_utils/configs/speculators: algos.py names the architecture per
format, base.py build_vllm_speculative_config the method: peagle is served as eagle3 with
parallel_drafting, dflash2 as dflash). formats() records both for every format the release
registers, so that sparkulator's plan, check and serve line read them from the map instead of a
hand-kept copy. Some architectures are reachable only this way (PeagleLlamaForCausalLM: a plain
config.json with method eagle3 is renamed Eagle3Peagle... by EAGLEConfig and refused), so the
builder writes a speculators config for them (config_dict()).

split_refused() separates the formats vLLM refuses outright (the map's "speculators_refused",
format -> vLLM's refusal) from those it serves (the map's "speculators").

Error policy: formats() records a model_type that a format refuses by leaving it out, and a format
whose speculative config vLLM cannot build with an "error" text; it raises only when vLLM's
speculators package does not import (the map would be wrong without it).
"""
from __future__ import annotations

import copy

# The keys the formats read (algos.py: mask_token_id and aux_hidden_state_layer_ids are required
# by peagle, dflash, dflash2 and dspark); values that fit the tiny configs of configs.py.
FORMAT_KEYS = {"draft_vocab_size": 512, "target_hidden_size": 256, "mask_token_id": 3,
               "aux_hidden_state_layer_ids": [1, 2], "eagle_aux_hidden_state_layer_ids": [0, 1],
               "block_size": 4, "markov_rank": 64}
SPECULATIVE_TOKENS = 3


def config_dict(name: str, layer_config: dict, verifier: str, architectures: list[str]) -> dict:
    """A speculators-format config.json of format `name` around `layer_config` (a draft's own
    config: model_type, shapes, quantization_config), verified against `verifier`."""
    return {**FORMAT_KEYS, "speculators_model_type": name, "architectures": list(architectures),
            "transformer_layer_config": copy.deepcopy(layer_config),
            "speculators_config": {
                "algorithm": name,
                "proposal_methods": [{"proposal_type": "greedy",
                                      "speculative_tokens": SPECULATIVE_TOKENS}],
                "default_proposal_method": "greedy",
                "verifier": {"name_or_path": verifier, "architectures": []}}}


def formats(model_types: list[str]) -> dict:
    """Per registered format: the architecture vLLM builds for each transformer_layer_config
    model_type it accepts ("*" when every one tried gives the same; "" is a layer config without
    model_type) and the --speculative-config fields it serves with, without the token count."""
    from vllm.transformers_utils.configs.speculators.algos import SUPPORTED_SPECULATORS_TYPES
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig
    out = {}
    for name in sorted(SUPPORTED_SPECULATORS_TYPES):
        archs: dict[str, str] = {}
        for model_type in ["", *model_types]:
            layer = {"model_type": model_type} if model_type else {}
            try:
                pre = SpeculatorsConfig.extract_transformers_pre_trained_config(
                    config_dict(name, layer, "target", []))
            except (ValueError, KeyError, TypeError):
                continue  # this format refuses the model_type (algos.py raises ValueError)
            archs[model_type] = pre["architectures"][0]
        if archs and len(set(archs.values())) == 1 and len(archs) == len(model_types) + 1:
            archs = {"*": next(iter(archs.values()))}
        entry: dict = {"architectures": archs}
        try:
            spec = SpeculatorsConfig.extract_vllm_speculative_config(
                config_dict(name, {"model_type": "llama"}, "target", []))
            spec.pop("num_speculative_tokens", None)
            entry["speculative_config"] = spec
        except (ValueError, KeyError, TypeError) as ex:
            entry["error"] = f"{type(ex).__name__}: {' '.join(str(ex).split())[:300]}"
        out[name] = entry
    return out


def split_refused(table: dict) -> tuple[dict, dict]:
    """(the formats vLLM serves, {format: vLLM's refusal}) of formats()' table: a format still
    registered whose every model_type and whose speculative config vLLM refuses (0.34's peagle:
    "P-EAGLE (parallel drafting EAGLE-3) is not supported.") is not a format it serves."""
    served = {n: e for n, e in table.items() if e["architectures"] or "error" not in e}
    return served, {n: e["error"] for n, e in table.items() if n not in served}


def format_for(arch: str, table: dict) -> tuple[str, str | None] | None:
    """(format, model_type) of a speculators config that vLLM builds as `arch` (model_type None:
    any), or None when no format names `arch`."""
    for name, entry in sorted(table.items()):
        for model_type, built in sorted(entry["architectures"].items()):
            if built == arch and "speculative_config" in entry:
                return name, None if model_type in ("*", "") else model_type
    return None
