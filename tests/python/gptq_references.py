"""The GPTQ and AWQ reference code the source-decode tests run: the libraries' own functions, from
their published sources on PyPI, loaded without the rest of their packages.

Neither library installs beside our pins: GPTQModel 7.7.0 requires torch>=2.14.1 and
transformers>=5.20.2 (tests/requirements.txt pins 2.13.0 and 5.17.0) and builds CUDA extensions;
AutoAWQ 0.2.9 pins an old transformers. Their decode and pack functions are pure torch, so
`pip download --no-deps` fetches the two source archives (unpacked under $SPK_CACHE, default
~/.cache/sparkulator, pip-refs/NAME-VERSION, renamed there when complete) and the few modules below
are loaded from them as they are:

- GPTQModel's checkpoint dequantizer `gptqmodel/utils/model_dequant.py` (`convert_gptq_file`,
  `pack_cols`, `_revert_gptq_v1_qzeros_correction`) with its `planar_packing.py`. Its other two
  imports, the logger (which needs the `pcre` and `logbar` packages) and the FP8/FP4 dtype
  tables, serve only other formats' paths and are replaced by empty stand-ins.
- AutoAWQ's `awq/utils/packing_utils.py` (`dequantize_gemm`) and `awq/modules/linear/gemm.py`
  (`WQLinear_GEMM.from_linear`, its packer), without `awq/__init__.py`, which imports its model
  zoo through transformers; and `awq/models/_config.py` (`AwqConfig`: its quant_config.json keys
  and `to_transformers_dict`, the quantization_config they stand for), which imports only
  transformers' hub helpers.

Error policy: a download that fails raises (pip's message); nothing is skipped.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

GPTQMODEL = "gptqmodel==7.7.0"
AUTOAWQ = "autoawq==0.2.9"


def _cache() -> Path:
    root = os.environ.get("SPK_CACHE") or Path(os.environ.get("XDG_CACHE_HOME",
                                                              Path.home() / ".cache")) / "sparkulator"
    return Path(root) / "pip-refs"


def _source(pin: str) -> Path:
    """The unpacked source archive of `pin`, downloaded once."""
    name, version = pin.split("==")
    cache = _cache()
    tree = cache / f"{name}-{version}"
    if (tree / "PKG-INFO").exists():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{name}-{version}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                    str(tmp / "dl"), pin], check=True)
    (archive,) = (tmp / "dl").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp / "src", filter="data")
    (unpacked,) = (tmp / "src").iterdir()
    try:
        unpacked.rename(tree)
    except OSError:  # another worker unpacked it first
        pass
    shutil.rmtree(tmp)
    return tree


def _package(name: str, path: Path) -> None:
    """An empty package `name` whose submodules load from `path` (its __init__ is not run)."""
    if name not in sys.modules:
        mod = types.ModuleType(name)
        mod.__path__ = [str(path)]
        sys.modules[name] = mod


def _load(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def gptqmodel_dequant():
    """GPTQModel's gptqmodel/utils/model_dequant.py."""
    root = _source(GPTQMODEL) / "gptqmodel"
    _package("gptqmodel", root)
    _package("gptqmodel.utils", root / "utils")
    _package("gptqmodel.quantization", root / "quantization")
    dtype = types.ModuleType("gptqmodel.quantization.dtype")  # the FP8/FP4 tables: unused here
    for f in ("available_float4_packed_dtypes", "available_float8_dtype_names",
              "available_float8_dtypes", "quark_floatx_formats"):
        setattr(dtype, f, lambda *a, **k: ())
    for f in ("decode_e8m0_scale", "dequantize_f4_e2m1", "dequantize_fp8"):
        setattr(dtype, f, None)
    sys.modules.setdefault("gptqmodel.quantization.dtype", dtype)
    logger = types.ModuleType("gptqmodel.utils.logger")  # needs pcre and logbar: unused here
    logger.setup_logger = None
    sys.modules.setdefault("gptqmodel.utils.logger", logger)
    _load("gptqmodel.utils.planar_packing", root / "utils" / "planar_packing.py")
    return _load("gptqmodel.utils.model_dequant", root / "utils" / "model_dequant.py")


def autoawq_gemm():
    """AutoAWQ's awq/modules/linear/gemm.py (WQLinear_GEMM, and dequantize_gemm through it)."""
    root = _source(AUTOAWQ) / "awq"
    _package("awq", root)
    _package("awq.modules", root / "modules")
    _package("awq.modules.linear", root / "modules" / "linear")
    return _load("awq.modules.linear.gemm", root / "modules" / "linear" / "gemm.py")


def autoawq_config():
    """AutoAWQ's awq/models/_config.py (AwqConfig)."""
    root = _source(AUTOAWQ) / "awq"
    _package("awq", root)
    _package("awq.models", root / "models")
    return _load("awq.models._config", root / "models" / "_config.py")
