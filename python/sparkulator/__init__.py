"""sparkulator: quantize speculative-decoding drafts and Hugging Face safetensors checkpoints into
vLLM-ready compressed-tensors checkpoints, from Python.

One function per subcommand of the ``sparkulator`` command line, over the same native core (no
subprocess): :func:`quantize`, :func:`inspect`, :func:`check`, :func:`compare`, :func:`dequantize`,
:func:`merge`, :func:`example`, :func:`card`, :func:`bench` (and :func:`bench_report` for
``bench report``).
Each returns the dataclass of the report the subcommand prints with ``--json`` (same fields).

Sources (``src``, ``ckpt``) may be a folder, a Hugging Face repo id (``org/name``) in the local
Hugging Face cache, or a snapshot path such as ``huggingface_hub.snapshot_download`` returns.

Errors raise with the CLI's message: ValueError for bad input or arguments, FileNotFoundError for a
missing file, model or tensor, FileExistsError when DST exists (pass ``force=True``), OSError for the
file system. Ctrl-C raises KeyboardInterrupt and leaves nothing behind (no DST, no temporary
folder). The GIL is released while the core works, and a progress bar is drawn with tqdm when it is
installed (``progress=False`` silences it).

Example::

    import sparkulator
    summary = sparkulator.quantize("z-lab/Qwen3-8B-DFlash-b16", "out/dflash-w4a16")
    print(summary.quantized_tensors, summary.size.ratio, summary.serve)
    report = sparkulator.check("out/dflash-w4a16", target="Qwen/Qwen3-8B")
    for finding in report.findings:
        print(finding.severity, finding.message)
"""

from __future__ import annotations

from . import _core
from ._progress import ProgressCallback
from ._reports import (CheckReport, CompareReport, ConfigGroup, DequantizeSummary,
                       ExampleCheckpoint, Finding, GainReport, LayerError, MergeSummary, ModelCard,
                       ModuleMapUse, PlannedTensor, QuantizedCheckpoint, QuantizedModule,
                       QuantizeSummary, Size, StoredTensor)

__version__: str = _core.__version__
__all__ = [
    "quantize", "inspect", "check", "compare", "dequantize", "merge", "example", "card", "bench",
    "bench_report",
    "QuantizeSummary", "QuantizedCheckpoint", "QuantizedModule", "PlannedTensor", "StoredTensor",
    "ConfigGroup", "Size", "ModuleMapUse",
    "CheckReport", "Finding", "CompareReport", "GainReport", "LayerError", "DequantizeSummary",
    "MergeSummary", "ExampleCheckpoint", "ModelCard",
    "ProgressCallback", "__version__",
]

# The functions are generated from their one declaration (python/src/api.h) into _api.py.
from ._api import (bench, bench_report, card, check, compare, dequantize,  # noqa: E402
                   example, inspect, merge, quantize)
