"""Shared helpers for the interop and end-to-end suites: the one place that finds the built binaries,
a runner for the `sparkulator` CLI that returns the finished process, the one model_free_ptq runner
(through references.py's cache of reference results) and the session-wide format outputs.

The build folder is $SPK_BUILD_DIR, default `build`; a relative path is taken from the repository root,
never from the current directory, so every suite finds the same build wherever pytest is started.
$SPK_BIN overrides the `sparkulator` binary alone. A binary that is not there FAILS the test that needs
it (pytest.fail), never skips it: a suite must not pass by not running. A test reaches the binary only
through the fixtures spk, spk_path and build_file (BINARY_FIXTURES below).

Reference results (model_free_ptq's checkpoints, vLLM's verdicts) are cached across runs under
$SPK_REF_CACHE (default ~/.cache/sparkulator/refs; references.py says how they are keyed); anything
sparkulator writes is made again in every run. A failing reference library fails the test."""

import os
import subprocess
import sys
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


def assert_same_tree(a: Path, b: Path) -> None:
    """The folders `a` and `b` hold the same files (names, sub-folders included) with the same
    bytes."""
    import filecmp
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*"))
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*"))
    for name in names:
        if (a / name).is_file():
            assert filecmp.cmp(a / name, b / name, shallow=False), name


def assert_same_tensors(ref_dir: Path, ours_dir: Path) -> dict:
    """Every tensor of `ours_dir` equals `ref_dir`'s byte for byte: the same names, dtypes, shapes
    and bytes (the first differing bytes are named). Returns the reference's tensors."""
    import torch
    ref, ours = load_dir(ref_dir), load_dir(ours_dir)
    assert sorted(ours) == sorted(ref)
    raw = lambda t: t.contiguous().view(torch.uint8).numpy().tobytes()  # noqa: E731
    for name, theirs in ref.items():
        mine = ours[name]
        assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape), name
        if raw(mine) != raw(theirs):
            differ = (mine.view(torch.uint8) != theirs.view(torch.uint8)).nonzero()[:5].tolist()
            pytest.fail(f"{name}: bytes differ, first at {differ}")
    return ref


def quantization_config(d: Path):
    """The quantization_config of folder `d`'s config.json, parsed by compressed-tensors."""
    import json
    from compressed_tensors.quantization import QuantizationConfig
    return QuantizationConfig.model_validate(
        json.loads((Path(d) / "config.json").read_text())["quantization_config"])


def run_model_free_ptq(jobs: list, ignore: list) -> None:
    """llm-compressor's model_free_ptq (on the CPU, one thread, one worker) on each (source folder,
    destination folder, scheme[, extra ignore entries]) of `jobs`, with `ignore`: the results come
    from the reference cache (references.py; the misses computed in one batch by the session's one
    worker interpreter) and are copied to the destinations. Fails on any error of model_free_ptq. A
    scheme is a preset name, or a dict that model_free_ptq gets as the QuantizationScheme it
    validates to (the widths compressed-tensors has no preset for)."""
    import references
    pairs = [(references.model_free_ptq_ref(src, scheme, ignore + (extra[0] if extra else [])), dst)
             for src, dst, scheme, *extra in jobs]
    try:
        references.copy_references(pairs)
    except references.ReferenceFailed as e:
        pytest.fail(str(e), pytrace=False)


def run_spk(*args, expect=0, timeout=300):
    proc = subprocess.run([spk_bin(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    if expect is not None:
        assert proc.returncode == expect, (
            f"sparkulator {' '.join(map(str, args))} exited {proc.returncode}, expected {expect}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


# The fixtures below are the only way a test reaches what the build made. suite_policy.py reads a
# test's fixture closure for them: a test that uses one of BINARY_FIXTURES depends on the binary
# under test and runs again against the sanitizer build; every other test runs once.
# Two kinds of test use the binary but stay out of the sanitizer pass, named by their fixtures:
# the Python package's (the module is not built with the sanitizers) and the vLLM-served ones (their
# verdict is vLLM's; the CLI runs inside them are the ones the interop tests make).
BINARY_FIXTURES = ("spk", "spk_path", "build_file")
RELEASE_ONLY_FIXTURES = ("python_package", "vllm_venv", "vllm_releases")


# The subcommands that judge by a vLLM release (--vllm-version; default: the newest module map).
JUDGING_SUBCOMMANDS = ("quantize", "check", "inspect", "card")


def on_release(run, release: str):
    """`run` (run_spk) judging by vLLM `release` where the call names none: the vLLM tier serves on
    vLLM's CPU build (tests/e2e/env.py SERVED_RELEASE), older than the newest map that sparkulator
    judges by when given no --vllm-version, so its quantize and check name the release served."""
    def run_on(*args, **kwargs):
        named = {str(a) for a in args} & {"--vllm-version", "--vllm", "--vllm-module-map"}
        if args and args[0] in JUDGING_SUBCOMMANDS and not named:
            args = (*args, "--vllm-version", release)
        return run(*args, **kwargs)
    return run_on


@pytest.fixture(scope="session")
def spk():
    """run_spk: runs the `sparkulator` binary and asserts its exit code (expect=None: any)."""
    spk_bin()  # fails here, once, with the path it looked for
    return run_spk


@pytest.fixture(scope="session")
def spk_path() -> str:
    """The `sparkulator` binary's path, for a test that starts it itself (Popen, another cwd)."""
    return spk_bin()


@pytest.fixture(scope="session")
def build_file():
    """built(relative): another file of the build folder (a test tool, the Python module)."""
    return built


@pytest.fixture(scope="session")
def python_package() -> Path:
    """The importable copy of the Python package the release build made ($SPK_BUILD_DIR/python)."""
    path = build_dir() / "python"
    if not (path / "sparkulator").is_dir():
        pytest.fail(f"{path}/sparkulator not found: build with -DSPK_PYTHON_MODULE=ON "
                    "(scripts/test.sh does)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def vllm_venv() -> Path:
    """The python of the vLLM CPU venv the e2e tier serves with (tests/e2e/env.py); skips when it is
    not installed, which SPK_REQUIRE=vllm turns into a failure (suite_policy.py)."""
    sys.path.insert(0, str(REPO))
    from tests.e2e import env
    if not env.venv_has_vllm():
        pytest.skip(f"no vLLM CPU venv at {env.venv_dir()} (python -m tests.e2e.env --ensure-venv)")
    return env.venv_python()


@pytest.fixture(scope="session")
def vllm_releases():
    """release -> the folder tools/vllm_module_map/release.py made for it (src/: the wheel's
    Python code, venv/: its environment; wheel.cached_release); skips the test where there is
    none, which SPK_REQUIRE turns into a failure (suite_policy.py)."""
    sys.path.insert(0, str(REPO))
    from tools.vllm_module_map import wheel

    def folder(release: str) -> Path:
        found = wheel.cached_release(release)
        if found is None:
            pytest.skip(f"no environment of vLLM {release} in {wheel.cache_root()} "
                        f"(.venv/bin/python tools/vllm_module_map/release.py {release})")
        return found
    return folder


@pytest.fixture(scope="session")
def format_sources(tmp_path_factory) -> dict:
    """formats_sources.py's checkpoints, written once per run: name -> folder."""
    from formats_sources import write_sources
    return write_sources(tmp_path_factory.mktemp("formats"))


@pytest.fixture(scope="session")
def format_quantized(format_sources, spk) -> dict:
    """(checkpoint, preset) -> sparkulator's output of every format preset, made once per run for
    test_formats_interop.py and test_formats_read_back.py (it depends on the binary: never cached
    across runs). Read only: a test that changes one copies it first."""
    from formats_sources import quantize_presets
    return quantize_presets(spk, format_sources)


pytest_plugins = ["suite_policy"]
