"""suite_policy.py on real pytest runs: each test writes a small suite beside copies of conftest.py
and suite_policy.py and runs pytest on it in a fresh interpreter, as scripts/test.sh does.

- Under SPK_REQUIRE a skipped test fails with the reason, and a module skipped at import fails the
  session (named in its own section) without stopping the other tests; without it they are plain
  skips. A skip on the allow-list stays a skip under SPK_REQUIRE too.
- With SPK_BINARY_ONLY=1 only the tests that use a binary fixture and no release-only fixture are
  collected; module fixtures that request `spk` count.
- Under two xdist workers (as scripts/test.sh runs them) the same holds, the allow-list matches node
  ids that carry xdist's "@group", and a module's tests, and all tests on vLLM, each share a worker.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SUITE = '''
import pytest

@pytest.fixture(scope="module")
def made_with_the_binary(spk):
    return "made"

def test_python_only():
    pass

def test_runs_the_binary(spk):
    pass

def test_starts_the_binary(spk_path):
    pass

def test_through_a_module_fixture(made_with_the_binary):
    pass

def test_the_python_package(spk, python_package):
    pass

def test_served_on_vllm(spk_path, vllm_venv):
    pass
'''


def run_suite(tmp_path: Path, files: dict, *args, **env) -> subprocess.CompletedProcess:
    for name in ("conftest.py", "suite_policy.py"):
        shutil.copy(HERE / name, tmp_path / name)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    clean = {k: v for k, v in os.environ.items() if k not in ("SPK_REQUIRE", "SPK_BINARY_ONLY")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           str(tmp_path), *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(clean, **env))


SKIPS = {"test_skips.py": 'import pytest\n\ndef test_needs_a_tool():\n'
                          '    pytest.skip("no frobnicator installed")\n',
         "test_module_skip.py": 'import pytest\npytest.skip("no tool at all", '
                                'allow_module_level=True)\n\ndef test_never():\n    pass\n'}


def test_skips_are_skips_without_spk_require(tmp_path):
    r = run_suite(tmp_path, SKIPS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 skipped" in r.stdout


def test_spk_require_turns_unlisted_skips_into_failures(tmp_path):
    r = run_suite(tmp_path, SKIPS, SPK_REQUIRE="vllm")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no frobnicator installed" in r.stdout and "no tool at all" in r.stdout
    assert r.stdout.count("not on tests/python/suite_policy.py's SKIP_ALLOWLIST") == 2
    assert "modules skipped outside the allow-list" in r.stdout  # the module's skip, named
    assert r.stdout.splitlines()[-1].startswith("1 failed")    # the test's skip, a failure


def test_an_allow_listed_skip_stays_a_skip_under_spk_require(tmp_path):
    # The allow-list's one entry, by its node id and reason.
    listed = {"test_python_api.py": 'import pytest\n\n'
              'def test_the_repaired_wheel_installs_and_runs_in_a_fresh_venv():\n'
              '    pytest.skip("the wheel build compiles the core again; set SPK_TEST_WHEEL=1")\n'}
    # The node id is relative to the rootdir: make it tests/python/test_python_api.py.
    nested = tmp_path / "tests" / "python"
    nested.mkdir(parents=True)
    r = run_suite(nested, listed, "--rootdir", str(tmp_path), SPK_REQUIRE="vllm")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout
    other = {"test_python_api.py": listed["test_python_api.py"].replace(
        "SPK_TEST_WHEEL=1", "nothing")}
    r = run_suite(nested, other, "--rootdir", str(tmp_path), SPK_REQUIRE="vllm")
    assert r.returncode == 1, "the reason must match too"


def collected(r: subprocess.CompletedProcess) -> set:
    return {line.split("::")[-1] for line in r.stdout.splitlines() if "::" in line}


def test_binary_only_selects_by_fixtures(tmp_path):
    everything = collected(run_suite(tmp_path, {"test_suite.py": SUITE}, "--collect-only"))
    assert len(everything) == 6
    r = run_suite(tmp_path, {"test_suite.py": SUITE}, "--collect-only", SPK_BINARY_ONLY="1")
    assert collected(r) == {"test_runs_the_binary", "test_starts_the_binary",
                            "test_through_a_module_fixture"}, r.stdout
    assert "3 deselected" in r.stdout


def workers(*args) -> tuple:
    return ("-n", "2", "--dist", "loadgroup", *args)


def test_spk_require_holds_under_two_workers(tmp_path):
    r = run_suite(tmp_path, SKIPS, *workers(), SPK_REQUIRE="vllm")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no frobnicator installed" in r.stdout
    # The module's skip, reported by both workers' collections, is named once in the controller.
    section = r.stdout.split("modules skipped outside the allow-list", 1)[1]
    assert section.count("test_module_skip.py: skipped") == 1, r.stdout
    # A module skip alone fails the session too (the controller's exit status, not a worker's).
    alone = {"test_module_skip.py": SKIPS["test_module_skip.py"],
             "test_fine.py": "def test_fine():\n    pass\n"}
    (tmp_path / "alone").mkdir()
    r = run_suite(tmp_path / "alone", alone, *workers(), SPK_REQUIRE="vllm")
    assert r.returncode == 1, r.stdout + r.stderr


def test_an_allow_listed_skip_stays_a_skip_under_two_workers(tmp_path):
    # Under loadgroup the node id ends in "@group": the allow-list matches it without the suffix.
    listed = {"test_python_api.py": 'import pytest\n\n'
              'def test_the_repaired_wheel_installs_and_runs_in_a_fresh_venv():\n'
              '    pytest.skip("the wheel build compiles the core again; set SPK_TEST_WHEEL=1")\n'}
    nested = tmp_path / "tests" / "python"
    nested.mkdir(parents=True)
    r = run_suite(nested, listed, "--rootdir", str(tmp_path), *workers(), SPK_REQUIRE="vllm")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout


# Each test records the worker it ran on; the fixture closure decides the group.
RECORD = '''
import os, pathlib
import pytest

@pytest.fixture
def vllm_venv():  # stands in for conftest's: only its name in the closure matters here
    return None

def record(name):
    d = pathlib.Path(os.environ["RAN_DIR"])
    (d / name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
'''


def test_a_modules_tests_and_the_vllm_tests_each_share_one_worker(tmp_path):
    ran = tmp_path / "ran"
    ran.mkdir()
    files = {}
    for m in "abcd":
        body = RECORD + "".join(f"\ndef test_{m}{i}():\n    record('{m}{i}')\n" for i in range(4))
        body += f"\ndef test_{m}_served(vllm_venv):\n    record('{m}_served')\n"
        files[f"test_{m}.py"] = body
    r = run_suite(tmp_path, files, *workers(), RAN_DIR=str(ran))
    assert r.returncode == 0, r.stdout + r.stderr
    worker = {p.name: p.read_text() for p in ran.iterdir()}
    assert len(worker) == 20 and "none" not in worker.values(), worker
    for m in "abcd":
        assert len({worker[f"{m}{i}"] for i in range(4)}) == 1, worker
    assert len({worker[f"{m}_served"] for m in "abcd"}) == 1, worker
    assert len(set(worker.values())) == 2, "both workers got work"
