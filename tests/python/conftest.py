"""Shared helpers for the interop and end-to-end suites: the one place that finds the built binaries,
and a runner for the `sparkulator` CLI that returns the finished process.

The build folder is $SPK_BUILD_DIR, default `build`; a relative path is taken from the repository root,
never from the current directory, so every suite finds the same build wherever pytest is started.
$SPK_BIN overrides the `sparkulator` binary alone. A binary that is not there FAILS the test that needs
it (pytest.fail), never skips it: a suite must not pass by not running."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    b = Path(os.environ.get("SPK_BUILD_DIR", "build"))
    return b if b.is_absolute() else REPO / b


def built(relative: str) -> str:
    """Path of the built file `relative` (e.g. "st_rewrite", "src/quant/quant_tool") in the build
    folder; fails the calling test when it is not there."""
    path = build_dir() / relative
    if not path.is_file():
        pytest.fail(f"{path} not found: build first (cmake --build {build_dir()}) or set SPK_BUILD_DIR "
                    "to the build folder", pytrace=False)
    return str(path)


def spk_bin() -> str:
    """The `sparkulator` binary: $SPK_BIN, or sparkulator in the build folder; fails when missing."""
    override = os.environ.get("SPK_BIN")
    if override is None:
        return built("sparkulator")
    if not Path(override).is_file():
        pytest.fail(f"SPK_BIN={override} not found", pytrace=False)
    return override


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
    spk_bin()  # fails here, once, with the path it looked for
    return run_spk
