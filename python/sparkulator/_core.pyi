"""Type stubs of sparkulator._core, the native module (python/src/module.cc).

Each function returns the JSON text that the subcommand's ``--json`` prints; the package's
functions (sparkulator.quantize, ...) turn it into dataclasses. Defaults live in the package."""

from typing import Callable, Optional

__version__: str

ProgressCallback = Callable[[str, int, int, bool], None]

def main(argv: list[str]) -> int: ...
def quantize(
    source: str,
    destination: str,
    scheme: str,
    group_size: Optional[int],
    preset: str,
    ignore: list[str],
    method: str,
    threads: int,
    force: bool,
    dry_run: bool,
    target_precision: str,
    tp: int,
    target_layers: Optional[int],
    fsync: bool,
    resume: bool,
    shard: Optional[str],
    on_progress: Optional[ProgressCallback],
) -> str: ...
def inspect(
    checkpoint: str,
    scheme: str,
    group_size: Optional[int],
    preset: str,
    ignore: list[str],
    tp: int,
    target_layers: Optional[int],
) -> str: ...
def check(
    checkpoint: str,
    target: str,
    tp: int,
    target_layers: Optional[int],
    vllm_version: str,
    vllm_dir: str,
    vllm_batch_invariant: bool,
) -> str: ...
def compare(
    source: str,
    quantized: str,
    quantized2: Optional[str],
    samples: Optional[int],
    seed: Optional[int],
) -> str: ...
def merge(destination: str, parts: list[str], force: bool, fsync: bool) -> str: ...
def dequantize(source: str, destination: str, force: bool, threads: int, fsync: bool) -> str: ...
