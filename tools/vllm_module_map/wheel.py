"""A vLLM release's wheel: fetched, keyed by its sha256, unpacked, and its pins read and sorted.

release.py (the one-command release procedure) uses these; none imports vLLM or needs a network
except download(). cache_root() is the cache (~/.cache/sparkulator/vllm-release, or under
$XDG_CACHE_HOME); a release's entries live in a folder named by the first 16 hex digits of its
wheel's sha256 (cache_key()), so that a re-published wheel of the same version is not confused
with the old one and a cached one is reused.

pins(metadata, python_version) reads the wheel's METADATA Requires-Dist lines that apply on a
Linux x86_64 CPython of that version (extras left out), and classify() sorts them into what the
release's environment installs as pinned, substitutes (torch: a CPU build stands in for the
wheel's CUDA torch) or stands in for (CUDA-only packages; the generator's stand-ins answer their
imports, stand_ins.py).

Error policy: download() raises CalledProcessError when pip cannot fetch the wheel; unpack() is
atomic (a folder renamed into place when complete), so an interrupted unpack is redone; a
malformed Requires-Dist line raises packaging's InvalidRequirement.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

# Packages of the wheel's pins that exist only for CUDA (or are built against the wheel's CUDA
# torch): not installed; vLLM imports them lazily or guarded, and the generator's stand-ins
# answer those it imports unguarded. A name is matched after PEP 503 normalization.
CUDA_ONLY = [r"nvidia-.*", r"flashinfer.*", r"cupy.*", r"pynvvideocodec", r"tilelang",
             r"apache-tvm-ffi", r"quack-kernels", r"tokenspeed-.*", r"humming-kernels",
             r"fastsafetensors", r"instanttensor", r"deep-gemm", r"deep-ep", r"flash-attn.*",
             r"xformers", r"triton", r"b12x", r"nvtx",
             # Built against the pinned CUDA torch (its exact version): torchvision has a
             # stand-in (stand_ins.py); torchaudio and torchcodec are imported only for audio
             # and video inputs.
             r"torchvision", r"torchaudio", r"torchcodec"]
TORCH = "torch"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cache_root() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "sparkulator" / "vllm-release"


def sha256(path: pathlib.Path) -> str:
    with open(path, "rb") as f:  # hashlib reads it in blocks: a wheel is hundreds of MiB
        return hashlib.file_digest(f, "sha256").hexdigest()


def cached_release(version: str) -> pathlib.Path | None:
    """The cache folder release.py made for vLLM `version` (src/, venv/ and the environment.json
    naming its wheel), or None where it made none."""
    root = cache_root()
    for env in sorted(root.glob("*/environment.json")) if root.is_dir() else []:
        name = json.loads(env.read_text()).get("wheel", {}).get("name", "")
        if name.startswith(f"vllm-{version}-") and (env.parent / "venv" / "bin" / "python").exists():
            return env.parent
    return None


def cache_key(digest: str) -> str:
    """The cache folder name of a wheel with sha256 `digest`."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError(f"not a sha256 hex digest: {digest!r}")
    return digest[:16]


def download(version: str, into: pathlib.Path, python: str = sys.executable) -> pathlib.Path:
    """vllm==`version`'s wheel (no dependencies) in `into`, fetched by pip unless already there."""
    into.mkdir(parents=True, exist_ok=True)
    found = sorted(into.glob(f"vllm-{version}-*.whl"))
    if not found:
        subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}",
                        "-d", str(into)], check=True)
        found = sorted(into.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip fetched no vllm-{version} wheel into {into}")
    return found[-1]


def unpack(wheel: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """The wheel's Python code (no compiled extensions: they need CUDA) in `dest`, made once."""
    if (dest / ".complete").exists():
        return dest
    part = dest.with_name(dest.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(part, [n for n in z.namelist() if not n.endswith(".so")])
    (part / ".complete").write_text(wheel.name + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    part.rename(dest)
    return dest


def metadata(src: pathlib.Path) -> str:
    """The METADATA text of the unpacked wheel in `src`."""
    found = sorted(src.glob("vllm-*.dist-info/METADATA"))
    if not found:
        raise FileNotFoundError(f"no vllm-*.dist-info/METADATA in {src}")
    return found[0].read_text()


def pins(metadata_text: str, python_version: str) -> list[str]:
    """The Requires-Dist requirements that apply on Linux x86_64 CPython `python_version`
    ("3.11"), without extras' own, as written (marker dropped)."""
    from packaging.requirements import Requirement
    env = {"platform_machine": "x86_64", "platform_system": "Linux", "sys_platform": "linux",
           "os_name": "posix", "python_version": python_version,
           "python_full_version": python_version + ".0", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "extra": ""}
    out = []
    for line in metadata_text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        req.marker = None
        out.append(str(req))
    return out


def classify(requirements: list[str]) -> dict:
    """{"pinned": installed as the wheel pins them, "torch": the torch pin (a CPU build is
    substituted for it) or None, "stood_in": CUDA-only ones (CUDA_ONLY), not installed}."""
    from packaging.requirements import Requirement
    out: dict = {"pinned": [], "torch": None, "stood_in": []}
    for r in requirements:
        name = normalize(Requirement(r).name)
        if name == TORCH:
            out["torch"] = r
        elif any(re.fullmatch(p, name) for p in CUDA_ONLY):
            out["stood_in"].append(r)
        else:
            out["pinned"].append(r)
    return out


def torch_candidates(torch_pin: str | None) -> list[str]:
    """CPU torch builds to try for the wheel's torch pin, best first: the pinned version's +cpu
    build, then +cpu builds of the earlier minor releases of the same major (a CUDA-only pin
    may have no CPU build reachable)."""
    from packaging.requirements import Requirement
    if torch_pin is None:
        return ["torch"]
    specs = list(Requirement(torch_pin).specifier)
    pinned = next((s.version for s in specs if s.operator == "=="), None)
    if pinned is None:
        return [torch_pin]
    parts = [int(x) for x in re.findall(r"\d+", pinned)[:3]] + [0, 0]
    major, minor = parts[0], parts[1]
    return [f"torch=={pinned}+cpu"] + [f"torch=={major}.{m}.0+cpu"
                                       for m in range(minor - 1, max(minor - 4, -1), -1)]
