"""`check --vllm-module-map FILE` and `check CKPT --vllm DIR`: what vLLM builds as a quantized Linear,
judged by a map the user gives or by the map that DIR's own vLLM builds (check/vllm_map_build.h).

Without vLLM: a map file edited so that vLLM builds DFlash's fc with no quantization scheme turns
the default output's quantized fc into vllm-map-no-scheme, and a file that is no map is a clear
error. With the vLLM CPU venv (the `vllm_venv` tests): the map built from its site-packages judges
the output as the committed 0.32 map does; a copy of that vLLM whose qwen3_dflash.py builds fc with
quant_config=None (a symlink tree with that one file patched) is judged by what the patched code
builds; a Python that cannot run the generator falls back to the compiled-in map with
vllm-map-not-built.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

MAP_032 = REPO / "data" / "vllm_module_map" / "vllm-0.32.0.json"
FC_LINE = "                quant_config=self.quant_config,"


@pytest.fixture(scope="module")
def dflash_w4(tmp_path_factory, spk) -> Path:
    root = tmp_path_factory.mktemp("tree-map")
    spk("example", root / "src", "--family", "dflash")
    spk("quantize", root / "src", root / "q", "--no-fsync")
    return root / "q"


def check(spk, ckpt, *args, expect=None) -> dict:
    return json.loads(spk("check", ckpt, "--json", *args, expect=expect).stdout)


def codes_on(report: dict, leaf: str) -> set:
    """The codes of findings on a checkpoint module of that last name part (DFlash's "fc")."""
    return {f["code"] for f in report["findings"]
            if f["module"] == leaf or f["module"].endswith("." + leaf)}


def test_a_map_file_judges_instead_of_the_compiled_in_ones(dflash_w4, spk, tmp_path):
    plain = check(spk, dflash_w4, "--vllm-module-map", MAP_032, expect=0)
    assert plain["vllm_module_map_source"] == str(MAP_032)
    assert plain["vllm_module_map"] == "0.32.0"
    edited = json.loads(MAP_032.read_text())
    fc = edited["architectures"]["DFlashDraftModel"]["modules"]["model.fc"]
    fc.update(quantized=False, scheme=None, quant_method="UnquantizedLinearMethod",
              params=["weight"])
    edited["vllm_version"] = "0.34.0"
    (tmp_path / "map.json").write_text(json.dumps(edited))
    report = check(spk, dflash_w4, "--vllm-module-map", tmp_path / "map.json", expect=1)
    assert report["vllm_module_map"] == "0.34.0"
    assert "vllm-map-no-scheme" in codes_on(report, "fc"), report["findings"]


def test_a_map_with_a_field_of_the_wrong_type_is_refused(dflash_w4, spk, tmp_path):
    # Never read as absent: a mistyped field would judge every module as unlisted, and answer OK.
    edited = json.loads(MAP_032.read_text())
    edited["architectures"]["DFlashDraftModel"]["modules"] = "oops"
    edited["architectures"]["DFlashDraftModel"]["weight_reads"] = {"qkv_proj": 1}
    bad = tmp_path / "mistyped.json"
    bad.write_text(json.dumps(edited))
    proc = spk("check", dflash_w4, "--vllm-module-map", bad, expect=2)
    assert (f"{bad}: architectures.DFlashDraftModel.weight_reads: expected an array, got an "
            "object") in proc.stderr, proc.stderr
    edited["architectures"]["DFlashDraftModel"]["weight_reads"] = []
    bad.write_text(json.dumps(edited))
    proc = spk("check", dflash_w4, "--vllm-module-map", bad, expect=2)
    assert (f"{bad}: architectures.DFlashDraftModel.modules: expected an object, got a string"
            in proc.stderr), proc.stderr
    del edited["schema_version"]
    bad.write_text(json.dumps(edited))
    proc = spk("check", dflash_w4, "--vllm-module-map", bad, expect=2)
    assert f"{bad}: schema_version: missing" in proc.stderr, proc.stderr


def test_a_file_that_is_no_map_is_a_clear_error(dflash_w4, spk, tmp_path):
    bad = tmp_path / "bad.json"
    # The schema this sparkulator reads (every committed map has it), so that the next error is the
    # missing vllm_version.
    schema = json.loads(next((REPO / "data" / "vllm_module_map").glob("vllm-*.json")).read_text())[
        "schema_version"]
    bad.write_text(json.dumps({"schema_version": schema, "architectures": {}}))
    # Exit 2 (an input error), not 1 (findings) or 3 (I/O).
    proc = spk("check", dflash_w4, "--vllm-module-map", bad, expect=2)
    assert f"{bad}: vllm_version: missing" in proc.stderr, proc.stderr
    bad.write_text("not json")
    proc = spk("check", dflash_w4, "--vllm-module-map", bad, expect=2)
    assert f"{bad}: not a JSON object" in proc.stderr, proc.stderr
    proc = spk("check", dflash_w4, "--vllm-module-map", tmp_path / "missing.json", expect=2)
    assert f"no such file: {tmp_path / 'missing.json'}" in proc.stderr, proc.stderr


def site_packages(venv_python: Path) -> Path:
    out = subprocess.run([str(venv_python), "-c", "import vllm, os; "
                          "print(os.path.dirname(os.path.dirname(vllm.__file__)))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def test_the_map_built_from_the_installed_vllm_agrees_with_the_committed_one(
        dflash_w4, spk, vllm_venv):
    site = site_packages(vllm_venv)
    built = check(spk, dflash_w4, "--vllm", site)
    assert built["vllm_module_map_source"].startswith(f"built from {site} by "), built
    assert built["vllm_module_map"] == "0.32.0"
    committed = check(spk, dflash_w4, "--vllm", site, "--no-vllm-map-build")
    assert committed["vllm_module_map_source"] == "compiled in"
    assert built["findings"] == committed["findings"] and built["ok"], built["findings"]


def test_a_patched_vllm_is_judged_by_what_it_builds(dflash_w4, spk, vllm_venv, tmp_path):
    site = site_packages(vllm_venv)
    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["cp", "-as", str(site / "vllm"), str(tree / "vllm")], check=True)
    model = tree / "vllm" / "model_executor" / "models" / "qwen3_dflash.py"
    text = model.read_text()
    fc = text.index("self.fc = ReplicatedLinear(")
    at = text.index(FC_LINE, fc)
    assert at - fc < 400, "qwen3_dflash.py's fc no longer takes self.quant_config"
    model.unlink()  # the symlink: the patched copy replaces it, the venv's file stays
    model.write_text(text[:at] + "                quant_config=None," + text[at + len(FC_LINE):])
    report = check(spk, dflash_w4, "--vllm", tree, "--vllm-python", vllm_venv, expect=1)
    assert report["vllm_module_map_source"].startswith(f"built from {tree}"), report
    assert "vllm-map-no-scheme" in codes_on(report, "fc"), report["findings"]
    # The compiled-in map of the same release still passes it: the verdict came from the tree.
    assert check(spk, dflash_w4, "--vllm", tree, "--no-vllm-map-build")["ok"]


def test_a_python_that_cannot_build_the_map_falls_back_with_a_warning(dflash_w4, spk, vllm_venv,
                                                                      tmp_path):
    site = site_packages(vllm_venv)
    report = check(spk, dflash_w4, "--vllm", site, "--vllm-python", tmp_path / "no-python",
                   expect=0)
    (found,) = [f for f in report["findings"] if f["code"] == "vllm-map-not-built"]
    assert found["severity"] == "warning" and "no-python" in found["message"], found
    assert report["vllm_module_map_source"] == "compiled in"
    assert report["vllm_module_map"] == "0.32.0"
