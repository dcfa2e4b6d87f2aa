"""Shared paths, content hashing and the vLLM server helper of the fidelity bench (issue 38).

Every artefact lives under ~/.cache/sparkulator/fidelity/ (never in the repo: the target, the
prompts and the distilled data are third-party or derived from it) in a folder named by a hash of
what made it, so a rerun with the same inputs reuses it and a changed input makes a new folder.

Error policy: helpers raise on any failure (SystemExit with a one-line reason for a missing tool);
callers decide what is a result and what is fatal.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CACHE = pathlib.Path(os.environ.get("SPK_FIDELITY_CACHE",
                                    pathlib.Path.home() / ".cache/sparkulator/fidelity"))
# vLLM 0.32.0 CPU build: the worktree may lack it, the main checkout has it.
VLLM_VENV = pathlib.Path(os.environ.get("VENV", "/work/main/.venv-vllm"))
os.environ.setdefault("VENV", str(VLLM_VENV))
# speculators 0.9.0 venv (bench/dspark's; sees the vLLM venv's torch/transformers through a .pth)
TRAIN_VENV = pathlib.Path.home() / ".cache/sparkulator/venv-bench-dspark"


def sha256_file(path: pathlib.Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def key(*parts) -> str:
    """A short hash of the JSON of `parts` (inputs, parameters, source digests)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def source_digest(*files: str) -> str:
    """Hash of this folder's named source files: a cache built by changed code is rebuilt."""
    here = pathlib.Path(__file__).resolve().parent
    return key(*[sha256_file(here / f) for f in files])


def spk_binary() -> str:
    for p in (ROOT / "build/sparkulator", pathlib.Path("/work/main/build/sparkulator")):
        if p.is_file():
            return str(p)
    raise SystemExit("no sparkulator binary: run /work/tools/wt-build.sh sparkulator")


def pip_download(spec: str, dest: pathlib.Path) -> pathlib.Path:
    """The wheel of `spec` (name==version), downloaded once with pip (no deps) into `dest`."""
    name = spec.split("==")[0].replace("-", "_")
    version = spec.split("==")[1]
    dest.mkdir(parents=True, exist_ok=True)
    hits = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if not hits:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(dest), spec], check=True)
        hits = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if not hits:
        raise SystemExit(f"pip download {spec}: no wheel in {dest}")
    return hits[0]


def serve(name: str, model: pathlib.Path, port: int, work: pathlib.Path, args=(), threads=2):
    """A tests.e2e Server (own process group, fresh cache, killed on every exit path) for `model`
    with vLLM 0.32 CPU; `args` are appended (later flags override the e2e defaults)."""
    from tests.e2e import server
    server.install_exit_handlers()
    return server.Server(name, model, port, work, args=list(args),
                         extra_env={"OMP_NUM_THREADS": str(threads)})
