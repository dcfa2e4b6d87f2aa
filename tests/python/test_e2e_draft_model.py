"""Proof on vLLM, continued: a plain causal LM served as a `draft_model` draft (issue 23 item 4).

vLLM builds a method="draft_model" draft under its proposer's prefix (v1/spec_decode/draft_model.py:
get_model(..., prefix="draft_model"); the module map records it), so its compressed-tensors config
matches `config_groups` targets and `ignore` entries against "draft_model.model.layers.0...":
a literal or anchored entry matches nothing there (the mixed-precision report, vllm#49893). In the
same vLLM interpreter as test_e2e_draft_kinds.py (its MORE_KINDS), beside its tiny Qwen3 target,
a tiny random 2-layer Qwen3 draft:
- `sparkulator quantize --ignore model.layers.0.mlp.down_proj` (one layer's module dense: a
  per-module ignore entry, which quantize writes as `re:(.*\\.)?model\\.layers\\.0...$`) serves on
  the serve line `check --target` prints, and check passes it;
- the same output with that entry written literally ("model.layers.0.mlp.down_proj", what served
  alone works) does not load, and check --target predicts it (ignore-matches-nothing);
- the default output whose config group names its down_proj modules literally (a mixed-precision
  recipe's style) does not load with vLLM's own error, and check --target predicts it
  (target-matches-nothing, vllm-expects-dense), while check without --target passes both copies.

Skipped and required as test_e2e_draft_kinds.py is (its `vllm_venv` fixture).
"""
import json
import shutil

import test_e2e_draft_kinds as e2e
from conftest import on_release
from conftest import run_spk as run_spk_newest
# `proof` (and `vllm_tier`, which it asks for) are that module's fixtures, by their names here.
from test_e2e_draft_kinds import (MAX_TOKENS, PROMPTS, proof, qwen3_layout, served_ok,  # noqa: F401
                                  spec_of, spk, vllm_tier, write_target)

RELEASE = e2e.RELEASE
run_spk = on_release(run_spk_newest, RELEASE)
DENSE_ENTRY = "re:(.*\\.)?model\\.layers\\.0\\.mlp\\.down_proj$"
LITERAL_TARGETS = ["re:.*self_attn\\..*", "re:.*mlp\\.(gate|up)_proj$",
                   "model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"]
# vLLM 0.32 loading the copy whose down_proj modules only a literal target names: the proposer's
# names do not match it, the layer is built dense, and the stored weight_packed has no parameter.
LITERAL_ERROR = ("ValueError: There is no module or parameter named "
                 "'layers.0.mlp.down_proj.weight_packed' in Qwen3Model")


def edit_config(folder, edit) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    edit(config["quantization_config"])
    path.write_text(json.dumps(config, indent=2))


def check(folder, target=None) -> tuple:
    args = ["check", folder, "--vllm-version", RELEASE, "--json"]
    proc = run_spk(*args, *(["--target", target] if target else []), expect=None)
    return proc.returncode, json.loads(proc.stdout)


def build(root, quantize, built, job) -> list:
    target = root / "qwen3-target"  # test_e2e_draft_kinds.py's run_proof wrote it
    src = root / "draft_model" / "src"
    write_target(src, "Qwen3ForCausalLM", qwen3_layout)
    out = {"src": src}
    out["q"] = root / "draft_model" / "q"
    run_spk("quantize", src, out["q"], "--ignore", "model.layers.0.mlp.down_proj", "--no-fsync")
    out["anchored"] = root / "draft_model" / "anchored"
    shutil.copytree(out["q"], out["anchored"])
    edit_config(out["anchored"], lambda qc: qc.update(
        ignore=["model.layers.0.mlp.down_proj" if e == DENSE_ENTRY else e for e in qc["ignore"]]))
    out["literal"] = root / "draft_model" / "literal"
    run_spk("quantize", src, out["literal"], "--no-fsync")
    edit_config(out["literal"], lambda qc: qc["config_groups"]["group_0"].update(
        targets=LITERAL_TARGETS))
    for key in ("q", "anchored", "literal"):
        out[f"check_{key}"] = check(out[key], target)
        out[f"check_{key}_alone"] = check(out[key])
    built["draft_model"] = out
    _, spec = spec_of(out["check_q"][1]["serve"])
    return [{"name": f"draft_model-{key}", "model": str(target),
             "speculative_config": {**spec, "model": str(out[key])}, "prompts": PROMPTS,
             "max_tokens": MAX_TOKENS} for key in ("src", "q", "anchored", "literal")]


e2e.MORE_KINDS.append(build)


def errors(check_result: tuple) -> list:
    return [(f["code"], f["module"]) for f in check_result[1]["findings"]
            if f.get("severity") == "error"]


def test_check_target_serves_a_plain_model_as_a_draft_model_draft(proof):
    built = proof["built"]["draft_model"]
    code, report = built["check_q"]
    target, spec = spec_of(report["serve"])
    assert target.endswith("qwen3-target")
    assert spec == {"method": "draft_model", "model": str(built["q"]),
                    "num_speculative_tokens": 3}, spec
    assert "draft_model." in report["vllm_naming"], report["vllm_naming"]
    # quantize wrote the one dense module's entry so that it holds under the prefix too.
    config = json.loads((built["q"] / "config.json").read_text())
    assert DENSE_ENTRY in config["quantization_config"]["ignore"]
    assert code == 0 and errors(built["check_q"]) == [], report["findings"]
    for key in ("src", "q"):
        served_ok(proof["results"][f"draft_model-{key}"], 3)


def test_an_anchored_ignore_entry_fails_as_check_predicts(proof):
    built, result = proof["built"]["draft_model"], proof["results"]["draft_model-anchored"]
    assert not result["loaded"], result
    # vLLM builds the dense down_proj quantized, and the stored .weight has no parameter.
    assert "There is no module or parameter named" in result["error"], result["error"]
    assert "layers.0.mlp.down_proj.weight" in result["error"], result["error"]
    assert errors(built["check_anchored_alone"]) == [], built["check_anchored_alone"]
    found = errors(built["check_anchored"])
    assert ("ignore-matches-nothing", "model.layers.0.mlp.down_proj") in found, found
    fix = [f["fix"] for f in built["check_anchored"][1]["findings"]
           if f["code"] == "ignore-matches-nothing"]
    assert DENSE_ENTRY in fix[0], fix


def test_literal_config_group_targets_fail_as_check_predicts(proof):
    built, result = proof["built"]["draft_model"], proof["results"]["draft_model-literal"]
    assert not result["loaded"], result
    assert result["error"].startswith(LITERAL_ERROR), (result["error"], result["log"][-3000:])
    assert errors(built["check_literal_alone"]) == [], built["check_literal_alone"]
    found = errors(built["check_literal"])
    assert ("target-matches-nothing", "model.layers.0.mlp.down_proj") in found, found
    assert ("target-matches-nothing", "model.layers.1.mlp.down_proj") in found, found
    assert ("vllm-expects-dense", "model.layers.0.mlp.down_proj") in found, found
