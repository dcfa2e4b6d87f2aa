"""scripts/check-layers.py catches what it is for: each test plants one violation in a temporary copy
of the checkout's src/, tools/, python/src/, docs/design.md and the script (never in the tree itself) and asserts
that the checker fails naming the file, the line and the layers; the untouched copy passes.

Needs no build: the checker reads text only."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SCRIPT = Path("scripts") / "check-layers.py"


@pytest.fixture()
def tree(tmp_path):
    """A copy of the parts of the checkout that the checker reads."""
    for part in ("src", "tools", "python/src"):
        shutil.copytree(REPO / part, tmp_path / part)
    for part in (SCRIPT, Path("docs") / "design.md"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / part, tmp_path / part)
    return tmp_path


def run_checker(root: Path):
    return subprocess.run([sys.executable, str(root / SCRIPT), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


def plant_line(path: Path, after: str, line: str) -> int:
    """Inserts `line` after the first line starting with `after`; returns its 1-based number."""
    lines = path.read_text().splitlines()
    index = next(i for i, text in enumerate(lines) if text.startswith(after)) + 1
    lines.insert(index, line)
    path.write_text("\n".join(lines) + "\n")
    return index + 1


def test_the_checkout_passes(tree):
    proc = run_checker(tree)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


@pytest.mark.parametrize("path,first_include,used,why", [
    ("src/plan/plan.cc", "plan/plan.h", "quantize", "a layer above"),
    ("src/base/status.cc", "base/status.h", "io", "from the bottom layer"),
    ("src/check/check.cc", "check/check.h", "compare", "a sibling: both sit above plan"),
    ("src/check/check.cc", "check/check.h", "quantize", "a layer only check's tests may use"),
])
def test_an_include_up_the_table_is_named_with_file_and_line(tree, path, first_include, used, why):
    number = plant_line(tree / path, f'#include "{first_include}"', f'#include "{used}/x.h"')
    proc = run_checker(tree)
    assert proc.returncode == 1, why
    layer = path.split("/")[1]
    assert (f"{path}:{number}: layer '{layer}' includes \"{used}/...\", which is not below it"
            in proc.stderr), why
    assert "1 layer violation(s)" in proc.stderr


def test_a_test_may_use_its_rows_test_layers(tree):
    # check's tests write their checkpoints with quantize; the table allows it for tests only.
    plant_line(tree / "src/check/check_test.cc", "#include", '#include "quantize/quantize.h"')
    proc = run_checker(tree)
    assert proc.returncode == 0, proc.stderr


def test_a_link_up_the_table_is_named(tree):
    cmake = tree / "src/model/CMakeLists.txt"
    text = cmake.read_text().replace("DEPS spk_quant_scheme", "DEPS spk_check spk_quant_scheme", 1)
    cmake.write_text(text)
    line = next(n for n, l in enumerate(text.splitlines(), 1) if "DEPS spk_check " in l)
    proc = run_checker(tree)
    assert proc.returncode == 1
    assert (f"src/model/CMakeLists.txt:{line}: spk_model (layer 'model') links "
            "spk_check of layer 'check', which is not below it") in proc.stderr


def test_a_folder_without_a_row_and_a_stale_docs_table_fail(tree):
    (tree / "src/newlayer").mkdir()
    design = tree / "docs/design.md"
    design.write_text(design.read_text().replace("| `src/io/` | `base` |", "| `src/io/` | `tensor` |"))
    proc = run_checker(tree)
    assert proc.returncode == 1
    assert ("src/newlayer: a folder the layer table of scripts/check-layers.py does not place"
            in proc.stderr)
    assert "docs/design.md:" in proc.stderr and "the layer table differs" in proc.stderr


def test_the_tools_may_include_every_layer(tree):
    plant_line(tree / "tools/main.cc", "#include", '#include "bench/arm.h"')
    assert run_checker(tree).returncode == 0


def test_the_python_module_sits_above_the_tools(tree):
    plant_line(tree / "python/src/module.cc", "#include", '#include "tools/cli.h"')
    plant_line(tree / "python/src/module.cc", "#include", '#include "bench/arm.h"')
    assert run_checker(tree).returncode == 0
    number = plant_line(tree / "tools/main.cc", "#include", '#include "python/module.h"')
    proc = run_checker(tree)
    assert proc.returncode == 1
    assert f"tools/main.cc:{number}: layer 'tools' includes \"python/...\"" in proc.stderr
