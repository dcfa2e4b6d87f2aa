"""A patched copy of the installed vLLM, for proving `sparkulator check --vllm`'s patch without
touching the virtual environment: a symlink farm of SITE/vllm under DIR/vllm in which only the
patched files (here laguna_dflash.py) are real copies. A server runs it with `overlay_env(DIR)` as
its extra_env: DIR first on PYTHONPATH, then what server.base_env puts there (the wna16_fallback
plugin on an AVX2-only host), so the patched tree serves exactly like the e2e's other servers.
Errors: exceptions (test tooling); a patch that does not apply raises CalledProcessError.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.e2e import server


def make_real(overlay: Path, rel: str) -> Path:
    """Replaces the symlink at overlay/rel by a copy of the file it points to."""
    path = overlay / rel
    target = path.resolve()
    path.unlink()
    shutil.copy(target, path)
    for pyc in (path.parent / "__pycache__").glob(path.stem + ".*"):
        pyc.unlink()
    return path


def build(site: Path, overlay: Path, patches: list[str]) -> Path:
    """patches: unified diffs (paths vllm/...) applied with patch -p1 inside the overlay."""
    shutil.rmtree(overlay, ignore_errors=True)
    overlay.mkdir(parents=True)
    subprocess.run(["cp", "-as", str(site / "vllm"), str(overlay / "vllm")], check=True)
    for diff in patches:
        rel = diff.splitlines()[0].split(" ", 1)[1].removeprefix("a/")
        make_real(overlay, rel)
        subprocess.run(["patch", "-p1", "--forward"], input=diff, text=True, cwd=overlay,
                       check=True, capture_output=True)
    return overlay


def overlay_env(overlay: Path) -> dict:
    """The extra_env of a server that runs the overlay instead of the venv's vLLM."""
    rest = server.base_env().get("PYTHONPATH") or os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(overlay), rest]))}
