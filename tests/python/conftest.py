"""Shared fixtures for the interop and end-to-end suites: where the built binaries are, and a runner
for the `sparkulator` CLI that returns the finished process."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    b = Path(os.environ.get("SPK_BUILD_DIR", "build"))
    return b if b.is_absolute() else REPO / b


def spk_bin() -> str:
    return os.environ.get("SPK_BIN", str(build_dir() / "sparkulator"))


def load_dir(d: Path) -> dict:
    """Every tensor of a checkpoint folder, read with the safetensors library."""
    from safetensors.torch import load_file
    tensors = {}
    for f in sorted(Path(d).glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return tensors


def run_spk(*args, expect=0, timeout=300):
    proc = subprocess.run([spk_bin(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    if expect is not None:
        assert proc.returncode == expect, (
            f"sparkulator {' '.join(map(str, args))} exited {proc.returncode}, expected {expect}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def spk():
    if not Path(spk_bin()).is_file():
        pytest.fail(f"{spk_bin()} not found: build first (cmake --build build) or set SPK_BIN")
    return run_spk
