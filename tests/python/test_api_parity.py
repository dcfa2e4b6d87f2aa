"""The command line against the Python package (issue 39, "One option table"): every subcommand has
its function, every flag its parameter and every parameter its flag, with the same default where
the CLI's help shows one.

The flags are read from ``sparkulator SUB --help`` (CLI11 writes it from the flag declarations in
tools/*_cmd.cc), the parameters from the package's signatures (generated from python/src/api.h).
A difference fails unless it is listed below with its reason: ALLOWED for a difference that is
meant (``--json``: Python returns the report object), KNOWN_GAPS for one still to close; a gap
that was closed fails too, so that its line is removed and the list only shrinks.
"""

import inspect as pyinspect
import re
import sys

import pytest

from test_python_api import cli_json, sources, sp, tree_bytes  # noqa: F401 (fixtures)

# Subcommand -> its function in the package.
FUNCTIONS = {"quantize": "quantize", "inspect": "inspect", "check": "check",
             "compare": "compare", "dequantize": "dequantize", "merge": "merge",
             "example": "example", "card": "card", "bench": "bench"}

# A flag (or positional) whose parameter is spelled otherwise than the flag with its dashes made
# underscores ("*": in every subcommand).
RENAMED = {
    ("compare", "QUANTIZED"): "q",
    ("compare", "QUANTIZED2"): "q2",
    ("merge", "PART"): "parts",
    ("*", "--no-fsync"): "fsync",  # a switch: fsync=False is --no-fsync
    ("check", "--no-vllm-map-build"): "vllm_map_build",
    ("card", "--output"): "output",
}

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

# Differences still to close (issue 39); each line goes when its gap is closed.
KNOWN_GAPS = {
    ("compare", "--html"): "Python compare writes no HTML report yet",
    ("card", "*"): "no Python card() yet",
    ("bench", "*"): "no Python bench() yet",
}

# Where the CLI's help shows a default that Python spells otherwise for the same behaviour.
SAME_DEFAULT = {
    ("*", "--threads"): "0 on the CLI, None in Python: all cores",
    ("*", "--scheme"): None,  # compared without case: a scheme name is read in any case
}


def subcommands(spk) -> list[str]:
    text = spk("--help").stdout
    listing = text[text.index("Subcommands:"):]
    return re.findall(r"^  (\S+) ", listing, re.M)


def cli_flags(spk, sub: str) -> dict[str, str | None]:
    """Flag or positional name (the long spelling) -> the default its help shows, or None."""
    text = spk(sub, "--help").stdout
    text = text.split("Subcommands:")[0]  # bench report: its own help
    flags = {}
    for name, kind in re.findall(r"^  (\S+)(?: (\S+))?", text, re.M):
        name = re.sub(r"\{.*\}$", "", name.split(",")[-1])  # -o,--output; --no-metrics{false}
        default = kind.split("=", 1)[1] if kind and "=" in kind else None
        flags[name] = default
    return flags


def parameter_name(sub: str, flag: str) -> str:
    renamed = RENAMED.get((sub, flag), RENAMED.get(("*", flag)))
    if renamed:
        return renamed
    return flag.lstrip("-").replace("-", "_").lower()


def listed(table: dict, sub: str, name: str) -> bool:
    return any(key in table for key in [(sub, name), ("*", name), (sub, "*")])


def differences(spk, sp, sub: str) -> list[tuple[str, str, str]]:
    """(subcommand, flag or parameter, what differs) for every difference of one subcommand."""
    function = getattr(sp, FUNCTIONS.get(sub, ""), None) if sub in FUNCTIONS else None
    if function is None:
        return [(sub, "*", f"no Python function for `sparkulator {sub}`")]
    params = pyinspect.signature(function).parameters
    found, seen = [], set()
    for flag, cli_default in cli_flags(spk, sub).items():
        name = parameter_name(sub, flag)
        if name not in params:
            found.append((sub, flag, f"{flag} has no parameter {name}"))
            continue
        seen.add(name)
        default = params[name].default
        if cli_default is None or default is pyinspect.Parameter.empty or isinstance(default, bool):
            continue
        if listed(SAME_DEFAULT, sub, flag) and SAME_DEFAULT.get((sub, flag),
                                                                SAME_DEFAULT.get(("*", flag))):
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
    for sub in subcommands(spk):
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
    subs = subcommands(spk)
    for table in (ALLOWED, RENAMED):
        for sub, name in table:
            if sub == "*" or name == "*":
                continue
            assert sub in subs, f"{sub}: no such subcommand"
            params = set()
            if sub in FUNCTIONS and hasattr(sp, FUNCTIONS[sub]):
                params = set(pyinspect.signature(getattr(sp, FUNCTIONS[sub])).parameters)
            assert name in cli_flags(spk, sub) or name in params, f"{sub} {name}: no such flag"



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


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
