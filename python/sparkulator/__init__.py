"""sparkulator: quantize speculative-decoding drafts and Hugging Face safetensors checkpoints into
vLLM-ready compressed-tensors checkpoints, from Python.

One function per subcommand of the ``sparkulator`` command line, over the same native core (no
subprocess): :func:`quantize`, :func:`inspect`, :func:`check`, :func:`compare`, :func:`dequantize`,
:func:`merge`.
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

import json
import os
from typing import Optional, Sequence, Union

from . import _core
from ._progress import ProgressArg, ProgressCallback, callback_for
from ._reports import (CheckReport, CompareReport, ConfigGroup, DequantizeSummary, Finding,
                       GainReport, LayerError, MergeSummary, ModuleMapUse, PlannedTensor,
                       QuantizedCheckpoint,
                       QuantizedModule, QuantizeSummary, Size, StoredTensor, from_json)

__version__: str = _core.__version__
__all__ = [
    "quantize", "inspect", "check", "compare", "dequantize", "merge",
    "QuantizeSummary", "QuantizedCheckpoint", "QuantizedModule", "PlannedTensor", "StoredTensor",
    "ConfigGroup", "Size", "ModuleMapUse",
    "CheckReport", "Finding", "CompareReport", "GainReport", "LayerError", "DequantizeSummary",
    "MergeSummary",
    "ProgressCallback", "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]


def quantize(src: PathLike, dst: PathLike, scheme: str = "W4A16", group_size: Optional[int] = None,
             preset: str = "auto", ignore: Sequence[str] = (), method: str = "rtn",
             threads: Optional[int] = None, force: bool = False, dry_run: bool = False,
             progress: ProgressArg = True, target_precision: str = "unquantized", tp: int = 1,
             target_layers: Optional[int] = None, fsync: bool = True,
             resume: bool = False, shard: Optional[str] = None) -> QuantizeSummary:
    """Quantizes the checkpoint ``src`` into a compressed-tensors checkpoint at ``dst``
    (``sparkulator quantize SRC DST``).

    Args:
        src: the source: a folder, an ``org/name`` in the local Hugging Face cache, or a snapshot.
        dst: the output folder; it must not exist (or be empty) unless ``force``. It is written into
            a temporary folder beside it and renamed at the end.
        scheme: a scheme name or llm-compressor preset name, any case (``sparkulator quantize
            --help`` lists them): W4A16, W8A16, W4A16_ASYM, ...
        group_size: columns per scale, one of the scheme's group sizes; -1 for one scale per output
            channel; None for the scheme's default (128 for the integer schemes).
        preset: the draft-family rules: auto (from config.json), dflash, eagle3, mtp, llm, none.
        ignore: modules kept dense: exact vLLM module names or ``re:REGEX`` (Python ``re.match``).
        method: ``rtn`` (min-max round-to-nearest, bit-exact with llm-compressor) or ``search``.
        threads: worker threads; None for all cores. The output does not depend on it.
        force: replace ``dst`` if it exists.
        dry_run: plan and report only; write nothing.
        progress: True draws a tqdm bar when tqdm is installed, False draws nothing, a callable
            ``(what, done_bytes, total_bytes, finished)`` gets the counts instead.
        target_precision: for drafts, the precision of the target they were trained against.
        tp: the tensor-parallel size the Marlin shape rules are checked for.
        target_layers: for drafts, the target's num_hidden_layers when config.json lacks it.
        fsync: wait for every file to reach the disk before the rename (the CLI's default;
            False is ``--no-fsync``).
        resume: continue an interrupted run of the same job (``--resume``): the shards it
            finished and recorded, verified by their content hash, are taken over
            (``summary.reused_shards``), the rest written; the result is the same bytes.
        shard: ``"I/N"``: write part I of the job split into N (``--shard``), for :func:`merge`
            (``summary.part_shards`` lists the shards this part wrote).

    Returns:
        The summary ``quantize --json`` prints.

    Raises:
        ValueError: bad arguments or a malformed source. FileNotFoundError: ``src`` not found.
        FileExistsError: ``dst`` exists. OSError: the file system failed. KeyboardInterrupt: Ctrl-C
        (nothing is left behind).
    """
    callback = callback_for(progress)
    try:
        text = _core.quantize(os.fspath(src), os.fspath(dst), scheme, group_size, preset,
                              list(ignore), method, threads or 0, force, dry_run, target_precision,
                              tp, target_layers, fsync, resume, shard, callback)
    finally:
        close = getattr(callback, "close", None)
        if close is not None:
            close()
    return from_json(QuantizeSummary, json.loads(text))


def inspect(ckpt: PathLike, scheme: str = "W4A16", group_size: Optional[int] = None,
            preset: str = "auto", ignore: Sequence[str] = (), tp: int = 1,
            target_layers: Optional[int] = None) -> Union[QuantizeSummary, QuantizedCheckpoint]:
    """What is in ``ckpt`` (``sparkulator inspect CKPT``); writes nothing.

    For a dense checkpoint: the plan ``quantize`` would follow with these arguments (same meaning
    as :func:`quantize`'s), as a QuantizeSummary of a dry run. For a compressed-tensors checkpoint:
    its scheme and quantized modules, as a QuantizedCheckpoint.

    Raises:
        ValueError, FileNotFoundError, OSError: as :func:`quantize`.
    """
    report = json.loads(_core.inspect(os.fspath(ckpt), scheme, group_size, preset, list(ignore), tp,
                                      target_layers))
    if report.get("quantized"):
        return from_json(QuantizedCheckpoint, report)
    return from_json(QuantizeSummary, report)


def check(ckpt: PathLike, target: Optional[PathLike] = None, tp: int = 1,
          vllm_version: Optional[str] = None, vllm: Optional[PathLike] = None,
          target_layers: Optional[int] = None,
          vllm_batch_invariant: bool = False) -> CheckReport:
    """Will vLLM load ``ckpt``, and load it right? (``sparkulator check CKPT``)

    Findings are returned, never raised: ``report.ok`` is False when one is an error (where the CLI
    exits 1), and ``report.findings`` lists them with what to do about each.

    Args:
        ckpt: the checkpoint: a folder, an ``org/name`` in the local Hugging Face cache, a snapshot.
        target: the target model a draft is served with, for the pairing checks.
        tp: the tensor-parallel size the kernel rules are checked for.
        vllm_version: judge the version-dependent rules for this vLLM release (default: the newest
            one verified).
        vllm: a vLLM installation (site-packages holding ``vllm``) or source tree whose version and
            model code decide those rules instead.
        target_layers: the target's layer count, when the draft's config.json lacks it.
        vllm_batch_invariant: the checkpoint is served with ``VLLM_BATCH_INVARIANT=1`` (``check
            --vllm-batch-invariant``): where the release judged then loads a WNA16 Linear
            without choosing a kernel (0.33), kernel shape findings become the info finding
            ``vllm-batch-invariant-no-kernel``.

    Raises:
        ValueError: bad arguments or an unreadable checkpoint. FileNotFoundError: ``ckpt`` or
        ``target`` not found. OSError: the file system failed.
    """
    text = _core.check(os.fspath(ckpt), os.fspath(target) if target is not None else "", tp,
                       target_layers, vllm_version or "",
                       os.fspath(vllm) if vllm is not None else "", vllm_batch_invariant)
    return from_json(CheckReport, json.loads(text))


def compare(src: PathLike, q: PathLike, q2: Optional[PathLike] = None,
            samples: Optional[int] = None,
            seed: Optional[int] = None) -> Union[CompareReport, GainReport]:
    """Per-layer error of the quantized checkpoint ``q`` against its source ``src``
    (``sparkulator compare SRC Q [Q2]``).

    With ``q2`` (another quantization of ``src``, e.g. ``method="search"``): both errors and the
    gain Q2/Q per layer, as a GainReport. ``samples`` and ``seed`` set the random inputs of the
    output error (the CLI's defaults when None).

    Raises:
        ValueError, FileNotFoundError, OSError: as :func:`quantize`.
    """
    text = _core.compare(os.fspath(src), os.fspath(q), os.fspath(q2) if q2 is not None else None,
                         samples, seed)
    if q2 is not None:
        return from_json(GainReport, json.loads(text))
    return from_json(CompareReport, json.loads(text))


def merge(dst: PathLike, parts: Sequence[PathLike], force: bool = False,
          fsync: bool = True) -> MergeSummary:
    """The parts of a job split across machines (``quantize(..., shard="I/N")`` for I = 1..N) made
    into one checkpoint at ``dst``, byte for byte the single-machine output
    (``sparkulator merge DST PART...``; docs/distributed.md).

    Raises:
        ValueError: the parts are not one job's parts 1..N, or a shard changed since its part wrote
        it (the message names the part and the file). FileNotFoundError: a part folder or its
        record is missing. FileExistsError: ``dst`` exists. OSError: the file system failed.
    """
    text = _core.merge(os.fspath(dst), [os.fspath(p) for p in parts], force, fsync)
    return from_json(MergeSummary, json.loads(text))


def dequantize(src: PathLike, dst: PathLike, force: bool = False, threads: Optional[int] = None,
               fsync: bool = True) -> DequantizeSummary:
    """A dense copy of the compressed-tensors checkpoint ``src`` at ``dst``
    (``sparkulator dequantize SRC DST``), exactly as compressed-tensors decompresses it.

    Raises:
        ValueError, FileNotFoundError, FileExistsError, OSError, KeyboardInterrupt: as
        :func:`quantize`.
    """
    text = _core.dequantize(os.fspath(src), os.fspath(dst), force, threads or 0, fsync)
    return from_json(DequantizeSummary, json.loads(text))
