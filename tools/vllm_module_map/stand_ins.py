"""Stand-ins for modules vLLM's Python code imports that are absent where the maps are made.

Anything / Stub: a name or module that stands for what is missing (falsy, callable, any
attribute). fake_cuda.py uses them for vLLM's compiled extensions (--release V=DIR);
stand_in_torchvision() for torchvision, which neither the CI-built .venv-vllm nor the unzipped
0.33 tree has: transformers' and vLLM's image processors import it at module level, so a model
class whose file imports a vision model's processing code (Qwen3.5 and Qwen4-exp through qwen3_vl,
Step5 through step3_vl) cannot even be inspected. torchvision only transforms images in the
processors (vLLM's own code uses torchvision.transforms alone); no Linear is built from it, so
the stand-in changes nothing a Linear gets.

Error policy: process-wide and not undone; where the real module imports, it is used and nothing
is stood in.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class Anything:
    """Stands for a missing op or name: falsy, callable (answers False), any attribute."""
    def __call__(self, *a, **k):
        return False

    def __bool__(self):
        return False

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self


anything = Anything()


class Stub(types.ModuleType):
    """A module whose every name is `anything`."""
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return anything


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `root` and every submodule of it as a Stub (a package, so submodules import)."""
    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.root and not fullname.startswith(self.root + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = Stub(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def stand_in_torchvision() -> None:
    try:
        import torchvision  # noqa: F401 - a real one is used as it is
        return
    except ImportError:
        pass
    # transformers decides once (lru_cache) whether torchvision is there; asked before the
    # stand-in exists it keeps its true answer, so that no processor takes the torchvision path.
    try:
        from transformers.utils import import_utils
        import_utils.is_torchvision_available()
    except ImportError:
        pass
    sys.meta_path.insert(0, _StubFinder("torchvision"))
