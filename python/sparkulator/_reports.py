"""The dataclasses the API returns, one per ``--json`` report of the CLI.

Every dataclass has exactly the keys of the JSON object the subcommand prints with ``--json``
(the native module hands over that same JSON text), so the fields are defined once, in the C++
report functions; ``from_json`` builds a dataclass from the object and ``to_json`` gives it back
(tests/python/test_python_api.py checks both against the CLI's output). A key the C++ side adds
without a field here is a TypeError in ``from_json``, caught by those tests.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar, Union

T = TypeVar("T")


def _convert(hint: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` says: dataclasses and lists of them recursively."""
    origin = typing.get_origin(hint)
    if origin is Union:  # Optional[X]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _convert(args[0], value)
    if origin is list and value is not None:
        (item,) = typing.get_args(hint)
        return [_convert(item, v) for v in value]
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_json(hint, value)  # type: ignore[arg-type]
    return value


def from_json(cls: type[T], obj: dict[str, Any]) -> T:
    """An instance of the dataclass ``cls`` from the JSON object ``obj`` of the same fields."""
    hints = typing.get_type_hints(cls, vars(sys.modules[__name__]))
    return cls(**{key: _convert(hints[key], value) if key in hints else value
                  for key, value in obj.items()})


def to_json(report: Any) -> Any:
    """The JSON value of a report: the object ``--json`` prints (optional keys it omits stay out)."""
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        out = {}
        for f in dataclasses.fields(report):
            value = getattr(report, f.name)
            if value is None and f.default is None:
                continue  # a key the C++ report writes only when it applies
            out[f.name] = to_json(value)
        return out
    if isinstance(report, list):
        return [to_json(v) for v in report]
    return report


class _Report:
    def to_json(self) -> dict[str, Any]:
        """The JSON object the CLI's ``--json`` prints for this report."""
        return to_json(self)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Size(_Report):
    """Tensor bytes before and after quantizing."""
    bytes_before: int
    bytes_after: int
    gib_before: float
    gib_after: float
    ratio: float


@dataclass(frozen=True)
class StoredTensor(_Report):
    """One tensor of a checkpoint; in ``inspect`` of a compressed-tensors checkpoint, ``action`` is
    quantized or as stored."""
    name: str
    dtype: str
    shape: list[int]
    bytes: int
    action: str
    reason: str


@dataclass(frozen=True)
class PlannedTensor(StoredTensor):
    """One tensor of the source and what the plan does with it (``action``: quantize or keep, for
    ``reason``)."""
    vllm_module: Optional[str] = None  # the vLLM module name, for the weights of linear layers


@dataclass(frozen=True)
class ModuleMapUse(_Report):
    """Which release's vLLM module map judged a plan, and what it knows of the checkpoint's
    architecture (None where the map does not list it)."""
    release: str
    # Why that release: "--vllm-version V", or the default's "the newest module map; ...".
    release_source: str
    architecture: Optional[str]
    mtp_architecture: Optional[str]
    method: Optional[str]  # the speculative method vLLM serves the architecture with


@dataclass(frozen=True)
class QuantizeSummary(_Report):
    """What ``quantize --json`` prints: the plan, the sizes, the files, the ``vllm serve`` line."""
    path: str
    quantized: bool
    # A pre-quantized source's quantization_config, which its weights were decoded from (FP8
    # blocks, compressed-tensors, GPTQ, AWQ, ModelOpt; an older ModelOpt export's
    # hf_quant_config.json; what AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json
    # stands for); None for a dense source.
    decoded_source: Optional[dict[str, Any]]
    destination: str
    family: str
    family_reason: str
    vllm_naming: str
    vllm_module_map: Optional[ModuleMapUse]  # None where no map applies
    scheme: str
    group_size: int
    quantized_tensors: int
    kept_tensors: int
    ignore: list[str]
    shards: int
    reused_shards: int  # quantize --resume: shards taken over from the interrupted run
    part_shards: list[str]  # quantize --part I/N: the shards this part wrote
    tensors: list[PlannedTensor]
    size: Size
    serve: str
    # --speculative-config options the judged release's vLLM accepts for this draft, with their
    # values ({"draft_lm_head_quantization": ["fp8", "nvfp4"]} on 0.33; {} for a plain model),
    # and what limits them for this checkpoint.
    serve_options: dict[str, list[str]]
    serve_options_notes: list[str]
    num_speculative_tokens_reason: str
    copied_files: list[str]
    warnings: list[str]
    seconds: float


@dataclass(frozen=True)
class ConfigGroup(_Report):
    """One group of a checkpoint's ``quantization_config``."""
    name: str
    targets: list[str]
    format: str
    scheme: Optional[str] = None


@dataclass(frozen=True)
class QuantizedModule(_Report):
    """One quantized module of a compressed-tensors checkpoint: its stored bytes and its dense size."""
    module: str
    scheme: str
    shape: list[int]
    bytes: int
    dense_dtype: str
    dense_bytes: int


@dataclass(frozen=True)
class QuantizedCheckpoint(_Report):
    """What ``inspect --json`` prints for a compressed-tensors checkpoint."""
    path: str
    quantized: bool
    quant_method: str
    format: str
    config_groups: list[ConfigGroup]
    ignore: list[str]
    family: str
    family_reason: str
    vllm_module_map: Optional[ModuleMapUse]  # the newest map, for the serve line's method
    quantized_modules: int
    modules: list[QuantizedModule]
    tensors: list[StoredTensor]
    size: Size
    serve: str
    # --speculative-config options the judged release's vLLM accepts for this draft, with their
    # values ({"draft_lm_head_quantization": ["fp8", "nvfp4"]} on 0.33; {} for a plain model),
    # and what limits them for this checkpoint.
    serve_options: dict[str, list[str]]
    serve_options_notes: list[str]
    num_speculative_tokens_reason: str
    warnings: list[str]


@dataclass(frozen=True)
class Finding(_Report):
    """One finding of ``check``: ``severity`` is error, warning or info; ``fix`` says what to do."""
    severity: str
    code: str
    module: str
    file: str
    message: str
    fix: str


@dataclass(frozen=True)
class CheckReport(_Report):
    """What ``check --json`` prints; ``ok`` is False when a finding is an error (the CLI's exit 1)."""
    path: str
    ok: bool
    errors: int
    warnings: int
    family: str
    vllm_naming: str
    scheme: str
    shards: int
    quantized_modules: int
    dense_linear_modules: int
    vllm_version: str
    vllm_version_source: str
    vllm_tree: str
    vllm_module_map: str  # the release of the module map that judged it ("" when none did)
    # "compiled in", the map file given, or "built from DIR by PYTHON" (check(vllm=DIR))
    vllm_module_map_source: str
    vllm_module_map_architecture: str  # the map's architecture for it ("" when not listed)
    serve: str
    # Shards whose header could not be read, and the rules that did not run for it (they judge the
    # set of stored tensors, which is incomplete then)
    unreadable_shards: list[str] = field(default_factory=list)
    rules_not_run: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class LayerError(_Report):
    """The error of one quantized layer against its source (``compare``)."""
    module: str
    kind: str
    shape: list[int]
    rel_fro: float
    snr_db: Optional[float]
    cosine: float
    max_abs: float
    clipped_fraction: float
    output_rel_error: float


@dataclass(frozen=True)
class CompareReport(_Report):
    """What ``compare SRC Q --json`` prints: totals, per kind of layer, per layer (worst first)."""
    source: str
    quantized: str
    scheme: str
    summary: dict[str, Any]
    by_kind: list[dict[str, Any]]
    layers: list[LayerError]


@dataclass(frozen=True)
class GainReport(_Report):
    """What ``compare SRC Q Q2 --json`` prints: both errors and the gain Q2/Q, largest gain first."""
    source: str
    q: dict[str, Any]
    q2: dict[str, Any]
    summary: dict[str, Any]
    by_kind: list[dict[str, Any]]
    layers: list[dict[str, Any]]


@dataclass(frozen=True)
class MergeSummary(_Report):
    """What ``merge --json`` prints."""
    destination: str
    parts: int
    shards: int
    shard_bytes: int
    copied_files: list[str]


@dataclass(frozen=True)
class DequantizeSummary(_Report):
    """What ``dequantize --json`` prints."""
    source: str
    destination: str
    dequantized_modules: int
    copied_tensors: int
    shards: int
    copied_files: list[str]
    warnings: list[str]


@dataclass(frozen=True)
class ExampleCheckpoint(_Report):
    """What :func:`example` wrote (the CLI prints it as a line: ``wrote a FAMILY example ...``)."""
    dir: str
    family: str


@dataclass(frozen=True)
class ModelCard(_Report):
    """What :func:`card` made (the CLI prints ``markdown``, or writes it with ``-o``)."""
    markdown: str
    check_errors: int  # error findings of check (card(check=True)); the CLI exits 1 on any
    files: list[str]  # written: each chart, then the card
