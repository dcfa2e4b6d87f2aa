"""The Python environment a release's map is made in: a venv per release wheel, with its pins.

make_env() builds (once; cached beside the unpacked wheel, in the folder keyed by the wheel's
sha256, wheel.py) a venv with the wheel's own Requires-Dist pins where they install on a CPU
machine: the torch pin is substituted by a CPU build (the pinned version's +cpu build, else the
nearest earlier one pip finds: wheel.torch_candidates), CUDA-only packages are not installed
(wheel.CUDA_ONLY; the generator's stand-ins answer their imports), and every other pin is
installed as the wheel pins it, torch held at the CPU build (a constraint, so no pin pulls the
CUDA build back in). It returns the "environment" object the map records: what was pinned,
substituted, stood in, and what would not install or import.

Error policy: no CPU torch among the candidates raises RuntimeError (no map can be made). A pin
that will not install is retried alone and, still failing, recorded in "not_installed"
(the generator then records what vLLM does without it); one that installs but does not import
is recorded in "not_importable". An environment is marked complete only when made; an
interrupted one is made again.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

from tools.vllm_module_map import wheel

DONE = ".sparkulator-environment.json"


def _pip(python: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "install", "-q", *args],
                          capture_output=True, text=True)


def _last_line(out: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else f"exit {out.returncode}"


# Run in the venv: which of the installed distributions' top-level modules do not import.
_IMPORT_CHECK = r"""
import importlib, importlib.metadata as md, json, sys
bad = {}
for name in json.loads(sys.argv[1]):
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    tops = (dist.read_text("top_level.txt") or "").split()
    if not tops:
        tops = sorted({f.parts[0] for f in dist.files or [] if f.suffix == ".py"
                       and len(f.parts) > 1 and not f.parts[0].endswith((".dist-info", ".data"))})
    for top in tops[:3]:
        top = top.replace("\\", "/").split("/")[0]
        if top.startswith("_") or "-" in top:
            continue
        try:
            importlib.import_module(top)
        except BaseException as ex:  # noqa: BLE001 - recorded
            bad[name] = f"{top}: {type(ex).__name__}: {' '.join(str(ex).split())[:160]}"
            break
print(json.dumps(bad))
"""


def make_env(folder: pathlib.Path, classified: dict, log=print) -> tuple[pathlib.Path, dict]:
    """(the venv's python, the map's "environment" object) for a release whose pins were sorted
    by wheel.classify into `classified`; the venv is `folder`/venv, reused when complete."""
    venv = folder / "venv"
    python = venv / "bin" / "python"
    if (venv / DONE).exists():
        return python, json.loads((venv / DONE).read_text())
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    torch = None
    tried = []
    for cand in wheel.torch_candidates(classified["torch"]):
        log(f"  installing {cand}")
        out = _pip(python, cand)
        if out.returncode == 0:
            torch = cand
            break
        tried.append(f"{cand}: {_last_line(out)}")
    if torch is None:
        raise RuntimeError("no CPU build of torch installs: " + "; ".join(tried))
    constraint = folder / "torch-constraint.txt"
    constraint.write_text(torch + "\n")
    log(f"  installing {len(classified['pinned'])} pins")
    not_installed = {}
    out = _pip(python, "-c", str(constraint), *classified["pinned"])
    if out.returncode != 0:
        log("  the pins do not install together; one at a time")
        for req in classified["pinned"]:
            one = _pip(python, "-c", str(constraint), req)
            if one.returncode != 0:
                not_installed[req] = _last_line(one)
    names = [req.split(";")[0] for req in classified["pinned"] if req not in not_installed]
    from packaging.requirements import Requirement
    check = subprocess.run([str(python), "-c", _IMPORT_CHECK,
                            json.dumps([Requirement(n).name for n in names])],
                           capture_output=True, text=True)
    not_importable = json.loads(check.stdout) if check.returncode == 0 else \
        {"(import check)": _last_line(check)}
    version = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    env = {"kind": "venv per release wheel", "python": version,
           "pinned": sorted(classified["pinned"]),
           "substituted": {classified["torch"] or "torch": torch},
           "stood_in": sorted(classified["stood_in"]),
           "not_installed": not_installed, "not_importable": not_importable}
    (venv / DONE).write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    return python, env


def shared_env(python: str, classified: dict) -> dict:
    """The "environment" object for a map made in an existing venv (release.py --venv): the
    wheel's pins are not installed there, so each is recorded as unchecked beside what the venv
    holds (torch's version stands for the pin)."""
    out = subprocess.run([python, "-c", "import sys, torch; print('%d.%d' % sys.version_info[:2]);"
                          "print(torch.__version__)"], capture_output=True, text=True, check=True)
    version, torch = out.stdout.split()
    return {"kind": "shared venv (the wheel's pins not installed)", "python": version,
            "pinned": [], "substituted": {classified["torch"] or "torch": f"torch=={torch}"},
            "stood_in": sorted(classified["stood_in"]),
            "not_installed": {r: "not tried: shared venv" for r in classified["pinned"]},
            "not_importable": {}}
