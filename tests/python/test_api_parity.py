"""The command line against the Python package (issue 39, "One option table"): every subcommand has
its function, every flag its parameter and every parameter its flag, with the same default where
the CLI's help shows one.

The flags are read from ``sparkulator SUB --help`` (CLI11 writes it from the flag declarations in
tools/*_cmd.cc) by python/generate_api.py's readers, which also write docs/python.md's table of
flags and parameters; the parameters come from the package's signatures (python/src/api.h).
A difference fails unless it is listed below with its reason: ALLOWED for a difference that is
meant (``--json``: Python returns the report object), KNOWN_GAPS for one still to close; a gap
that was closed fails too, so that its line is removed and the list only shrinks.
"""

import inspect as pyinspect
import json
import sys

import pytest

from conftest import REPO
sys.path.insert(0, str(REPO / "python"))
from generate_api import FUNCTIONS, RENAMED, cli_flags, parameter_name, subcommands  # noqa: E402
from test_bench import standin  # noqa: F401 (fixture)
from test_python_api import cli_json, sources, sp, tree_bytes  # noqa: F401 (fixtures)

# Differences that are meant, each with its reason.
ALLOWED = {
    ("*", "--help"): "CLI11's help; Python has help() and the docstrings",
    ("*", "--help-all"): "CLI11's help of every subcommand",
    ("*", "--json"): "Python returns the report object that --json prints",
    ("version", "*"): "Python has sparkulator.__version__",
    ("quantize", "--shard"): "the old name of --part, kept for old command lines",
    ("quantize", "progress"): "the Python callback or tqdm bar; the CLI draws its bar on stderr",
    ("compare", "--top"): "the length of the text report; Python returns every layer",
}

# Differences still to close, each as ALLOWED's lines; a line goes when its gap is closed (none is
# open now: a new flag gets its parameter in the same change).
KNOWN_GAPS: dict = {}

# Where the CLI's help shows a default that Python spells otherwise for the same behaviour.
SAME_DEFAULT = {
    ("*", "--threads"): "0 on the CLI, None in Python: all cores",
    ("bench", "--repeats"): "None in Python: 12, or with prompts their number, as the CLI",
    ("bench", "--prompt-lengths"): "None in Python: the same grid; given, it refuses prompts",
}


def cli(spk):
    """`run(*args)` for generate_api's readers: the CLI's stdout."""
    return lambda *args: spk(*args).stdout


def listed(table: dict, sub: str, name: str) -> bool:
    return any(key in table for key in [(sub, name), ("*", name), (sub, "*")])


def differences(spk, sp, sub: str) -> list[tuple[str, str, str]]:
    """(subcommand, flag or parameter, what differs) for every difference of one subcommand."""
    function = getattr(sp, FUNCTIONS.get(sub, ""), None) if sub in FUNCTIONS else None
    if function is None:
        return [(sub, "*", f"no Python function for `sparkulator {sub}`")]
    params = pyinspect.signature(function).parameters
    found, seen = [], set()
    for flag, cli_default in cli_flags(cli(spk), sub).items():
        name = parameter_name(sub, flag)
        if name not in params:
            found.append((sub, flag, f"{flag} has no parameter {name}"))
            continue
        seen.add(name)
        default = params[name].default
        if cli_default is None or default is pyinspect.Parameter.empty or isinstance(default, bool):
            continue
        if listed(SAME_DEFAULT, sub, flag):
            continue
        if str(default).lower() != cli_default.lower() and not (
                isinstance(default, (int, float)) and float(default) == float(cli_default)):
            found.append((sub, flag, f"{flag} defaults to {cli_default}, {name} to {default!r}"))
    for name in params:
        if name not in seen:
            found.append((sub, name, f"parameter {name} has no flag"))
    return found


def test_every_subcommand_is_a_function_with_every_flag_as_a_parameter(spk, sp):  # noqa: F811
    problems, gaps_seen = [], set()
    for sub in subcommands(cli(spk)):
        for s, name, what in differences(spk, sp, sub):
            if listed(ALLOWED, s, name):
                continue
            gap = next((k for k in [(s, name), ("*", name), (s, "*")] if k in KNOWN_GAPS), None)
            if gap:
                gaps_seen.add(gap)
                continue
            problems.append(f"{s}: {what}")
    closed = [f"{k}: {v}" for k, v in KNOWN_GAPS.items() if k not in gaps_seen]
    assert not problems, "CLI and Python differ (add the parameter, or the flag):\n" + \
        "\n".join(problems)
    assert not closed, "closed gaps still listed in KNOWN_GAPS (remove them):\n" + "\n".join(closed)


def test_the_allow_list_names_flags_that_exist(spk, sp):  # noqa: F811
    """A stale ALLOWED or RENAMED line (its flag gone) would hide a future difference."""
    subs = subcommands(cli(spk))
    for table in (ALLOWED, RENAMED):
        for sub, name in table:
            if sub == "*" or name == "*":
                continue
            assert sub in subs, f"{sub}: no such subcommand"
            params = set()
            if sub in FUNCTIONS and hasattr(sp, FUNCTIONS[sub]):
                params = set(pyinspect.signature(getattr(sp, FUNCTIONS[sub])).parameters)
            assert name in cli_flags(cli(spk), sub) or name in params, f"{sub} {name}: no such flag"



# ---- the parameters that closed a gap, against the CLI on the same input ----------------------

def test_example_writes_what_the_cli_writes(spk, sp, tmp_path):  # noqa: F811
    spk("example", tmp_path / "cli", "--family", "llm", "--shards", "2", "--hidden", "128")
    written = sp.example(tmp_path / "py", family="llm", shards=2, hidden=128)
    assert written == sp.ExampleCheckpoint(dir=str(tmp_path / "py"), family="llm")
    assert tree_bytes(tmp_path / "py") == tree_bytes(tmp_path / "cli")
    with pytest.raises(FileExistsError):
        sp.example(tmp_path / "py")
    with pytest.raises(ValueError, match="seed = -1 is negative"):
        sp.example(tmp_path / "seed", seed=-1)


def test_plan_vllm_version_and_target_match_the_cli(spk, sp, sources, tmp_path):  # noqa: F811
    src = sources / "dflash"
    assert sp.inspect(src, vllm_version="0.32.0").to_json() == cli_json(
        spk, "inspect", src, "--vllm-version", "0.32.0")
    assert sp.inspect(src, target=sources / "llm").to_json() == cli_json(
        spk, "inspect", src, "--target", sources / "llm")
    summary = sp.quantize(src, tmp_path / "py", vllm_version="0.33.0", dry_run=True,
                          progress=False)
    assert summary.vllm_module_map == sp.inspect(src, vllm_version="0.33.0").vllm_module_map


def test_check_module_map_switches_match_the_cli(spk, sp, sources, tmp_path):  # noqa: F811
    out = tmp_path / "q"
    sp.quantize(sources / "dflash", out, progress=False)
    assert sp.check(out, vllm_map_build=False).to_json() == cli_json(
        spk, "check", out, "--no-vllm-map-build")
    with pytest.raises(FileNotFoundError):
        sp.check(out, vllm_module_map=tmp_path / "no-such-map.json")



def test_card_writes_what_the_cli_writes(spk, sp, sources, tmp_path):  # noqa: F811
    out = tmp_path / "q"
    sp.quantize(sources / "dflash", out, progress=False)
    printed = spk("card", out, "--repo-id", "me/draft").stdout
    assert sp.card(out, repo_id="me/draft") == sp.ModelCard(markdown=printed, check_errors=0,
                                                            files=[])
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    spk("card", out, "-o", tmp_path / "cli" / "README.md")
    card = sp.card(out, output=tmp_path / "py" / "README.md")
    assert card.files == [str(tmp_path / "py" / "README.md")]
    assert tree_bytes(tmp_path / "py") == tree_bytes(tmp_path / "cli")
    with pytest.raises(FileExistsError, match="pass --update"):
        sp.card(out, output=tmp_path / "py" / "README.md")
    spk("card", out, "-o", tmp_path / "cli" / "README.md", "--update")
    sp.card(out, output=tmp_path / "py" / "README.md", update=True)
    assert tree_bytes(tmp_path / "py") == tree_bytes(tmp_path / "cli")



def test_bench_and_its_report_match_the_cli(spk, sp, standin, tmp_path):  # noqa: F811
    arms = ["a=" + standin("--accept-pattern", "1"), "b=" + standin("--accept-pattern", "2,1,3,0")]
    spk("bench", "--arm", arms[0], "--arm", arms[1], "--prompt-lengths", "32", "--repeats", "2",
        "--warmup", "1", "--max-tokens", "17", "--json", tmp_path / "cli.json", timeout=120)
    results = sp.bench(arms, prompt_lengths="32", repeats=2, warmup=1, max_tokens=17,
                       json_path=tmp_path / "py.json")
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert results == json.loads((tmp_path / "py.json").read_text())
    assert set(results) == set(cli)
    for py_arm, cli_arm in zip(results["arms"], cli["arms"]):
        assert py_arm["name"] == cli_arm["name"] and py_arm["failures"] == 0
        assert py_arm["spec_decode"]["draft_tokens"] == cli_arm["spec_decode"]["draft_tokens"]
    files = [tmp_path / "cli.json", tmp_path / "py.json"]
    spk("bench", "report", *files, "--json", tmp_path / "pooled-cli.json")
    pooled = sp.bench_report(files, json_path=tmp_path / "pooled.json")
    assert pooled == json.loads((tmp_path / "pooled.json").read_text())
    assert pooled == json.loads((tmp_path / "pooled-cli.json").read_text())
    with pytest.raises(ValueError, match="--port-range: '9-1'"):
        sp.bench(arms, port_range="9-1")



def test_compare_html_matches_the_cli(spk, sp, sources, tmp_path):  # noqa: F811
    out = tmp_path / "q"
    sp.quantize(sources / "llm", out, progress=False)
    spk("compare", sources / "llm", out, "--html", tmp_path / "cli.html")
    sp.compare(sources / "llm", out, html=tmp_path / "py.html")
    assert (tmp_path / "py.html").read_bytes() == (tmp_path / "cli.html").read_bytes()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
