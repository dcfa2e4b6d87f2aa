"""What a release's vLLM says about serving a draft, read from its own code: the prefix its
draft_model proposer builds a plain model under, and the --speculative-config options that change
what it does with a draft's weights at load time (draft_lm_head_quantization), with the values its
SpeculativeConfig accepts per draft. Used by build.py; runs in the vLLM venv."""
from __future__ import annotations

import pathlib
import re


def draft_model_prefix(root: pathlib.Path) -> str:
    """The prefix vLLM's draft_model proposer builds its model under (v1/spec_decode/draft_model.py:
    get_model(..., prefix="draft_model")), with the dot that joins it to the module names: every
    module of a method="draft_model" draft is named "draft_model.model.layers.0...." when vLLM's
    compressed-tensors config matches it against config_groups targets and ignore entries. Empty
    when the release passes no prefix. 0.34 moved the proposer to the V2 model runner
    (v1/worker/gpu/spec_decode/standalone_ar/speculator.py, "standalone_ar" in its speculator
    registry): the first of DRAFT_MODEL_PROPOSERS that exists is read."""
    found = None
    for rel in DRAFT_MODEL_PROPOSERS:
        if (root / rel).exists():
            source = (root / rel).read_text()
            call = re.search(r"\bget_model\((.*?)\)", source, re.S)
            found = re.search(r"prefix\s*=\s*[\"']([^\"']*)[\"']", call.group(1)) if call else None
            break
    else:
        raise FileNotFoundError(f"no draft_model proposer in {DRAFT_MODEL_PROPOSERS}")
    return f"{found.group(1)}." if found and found.group(1) else ""


# Where a release's method="draft_model" proposer builds the draft (get_model), newest last.
DRAFT_MODEL_PROPOSERS = ("vllm/v1/spec_decode/draft_model.py",
                         "vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py")


# --speculative-config options that change what vLLM does with a draft's weights at load time
# (not in the checkpoint): the release's SpeculativeConfig fields of this name, where it has them.
SERVE_OPTIONS = ("draft_lm_head_quantization",)


def _literal_values(hint) -> list[str]:
    """The strings of the Literal in `hint` (Literal[...] or Literal[...] | None)."""
    import typing
    parts = [hint] if typing.get_origin(hint) is typing.Literal else typing.get_args(hint)
    return sorted({a for p in parts if typing.get_origin(p) is typing.Literal
                   for a in typing.get_args(p) if isinstance(a, str)})


def release_serve_options(root: pathlib.Path) -> dict:
    """SERVE_OPTIONS the release's SpeculativeConfig has: per option the values its annotation's
    Literal allows, the file:line of the field and the first sentence of its docstring (the
    attribute docstring that follows it in vllm/config/speculative.py)."""
    import ast
    import typing
    from vllm.config import SpeculativeConfig
    hints = typing.get_type_hints(SpeculativeConfig)
    path = root / "vllm/config/speculative.py"
    body = next((n.body for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"), [])
    out = {}
    for name in SERVE_OPTIONS:
        if name not in hints:
            continue
        values = _literal_values(hints[name])
        at, doc = None, ""
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
                at = f"vllm/config/speculative.py:{node.lineno}"
                nxt = body[i + 1] if i + 1 < len(body) else None
                if isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None),
                                                            ast.Constant):
                    doc = " ".join(str(nxt.value.value).split())
        out[name] = {"values": values, "defined_at": at, "doc": doc}
    return out


def serve_options_of_draft(make_config) -> dict:
    """Whether vLLM's SpeculativeConfig accepts each SERVE_OPTIONS option for this draft:
    `make_config(**{option: value})` builds it with the option set to its first value. Per
    option: {"values", "accepted"} and, refused, vLLM's "error". {} on a release without them."""
    import typing
    from vllm.config import SpeculativeConfig
    hints = typing.get_type_hints(SpeculativeConfig)
    out = {}
    for name in SERVE_OPTIONS:
        if name not in hints:
            continue
        values = _literal_values(hints[name])
        if not values:
            continue
        try:
            make_config(**{name: values[0]})
            out[name] = {"values": values, "accepted": True}
        except Exception as ex:  # noqa: BLE001 - vLLM's refusal is the record
            text = " ".join(str(ex).split())
            m = re.search(r"Value error, (.*?)( \[type=|$)", text)
            out[name] = {"values": values, "accepted": False,
                         "error": f"{type(ex).__name__}: {(m.group(1) if m else text)[:300]}"}
    return out
