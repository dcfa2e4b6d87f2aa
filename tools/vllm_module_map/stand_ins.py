"""Stand-ins for modules vLLM's Python code imports that are absent where the maps are made.

Anything / Stub: a name or module that stands for what is missing (falsy, callable, any
attribute). fake_cuda.py uses them for vLLM's compiled extensions (--release V=DIR);
stand_in_torchvision() for torchvision, which neither the CI-built .venv-vllm nor the unzipped
0.33 tree has: transformers' and vLLM's image processors import it at module level, so a model
class whose file imports a vision model's processing code (Qwen3.5 and Qwen4-exp through qwen3_vl,
Step5 through step3_vl) cannot even be inspected. torchvision only transforms images in the
processors (vLLM's own code uses torchvision.transforms alone); no Linear is built from it, so
the stand-in changes nothing a Linear gets. stand_in_kernel_modules() (fake_cuda.py, V=DIR only)
covers CUDA-only kernel packages a CPU environment does not install (CuTe DSL: cutlass of
nvidia-cutlass-dsl, quack of quack-kernels, cuda-python's cuda.bindings): a vLLM module whose
own code imports one of them unguarded is stood in as a whole (a Stub), as 0.34's CuTe DSL
BF16x3 router GEMM module, which the MoE router (GateLinear) imports on a faked Hopper only to
register the kernel's warm-up; an import vLLM guards (try/except ImportError) still fails, as on
any machine without the package. Kernel modules only: no Linear is built from them.

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


KERNEL_PACKAGES = ("cutlass", "quack", "cuda")


class _KernelModuleFinder(importlib.abc.MetaPathFinder):
    """Finds vllm.* modules with the other finders; one whose execution fails on a missing
    KERNEL_PACKAGES root becomes a Stub (keeping what it defined before the import)."""
    def __init__(self):
        self.stood_in: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("vllm."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        real_exec = getattr(loader, "exec_module", None)
        if real_exec is None:
            return spec
        stood_in = self.stood_in

        def exec_module(module):
            try:
                real_exec(module)
            except ModuleNotFoundError as ex:
                if (ex.name or "").split(".")[0] not in KERNEL_PACKAGES:
                    raise
                stub = Stub(fullname)
                stub.__dict__.update({k: v for k, v in module.__dict__.items()
                                      if k not in ("__spec__", "__loader__")})
                stub.__spec__, stub.__loader__ = module.__spec__, module.__loader__
                sys.modules[fullname] = stub
                stood_in.append(f"{fullname} (needs {ex.name})")
        loader.exec_module = exec_module
        return spec


kernel_module_finder = _KernelModuleFinder()


def stand_in_kernel_modules() -> None:
    if kernel_module_finder not in sys.meta_path:
        sys.meta_path.insert(0, kernel_module_finder)
