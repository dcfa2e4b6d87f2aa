"""Type stubs of sparkulator._core, the native module (python/src/module.cc).

call() runs one function of the package's declaration (python/src/api.h) on its request (JSON text
of every parameter but ``progress``) and returns the JSON text that the subcommand's ``--json``
prints; api() is that declaration as JSON. The package's functions (sparkulator.quantize, ...,
generated into _api.py) are the way to call them."""

from typing import Callable, Optional

__version__: str

ProgressCallback = Callable[[str, int, int, bool], None]

def main(argv: list[str]) -> int: ...
def call(function: str, request: str, on_progress: Optional[ProgressCallback]) -> str: ...
def api() -> str: ...
