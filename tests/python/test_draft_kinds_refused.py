"""The draft kinds that quantize refuses for a release and check fails, each for the reason the
other gives: a kind vLLM refuses from any compressed-tensors checkpoint (the map fields of
test_draft_kinds.REFUSED_BY), a draft vLLM builds with no quantized Linear, a speculators format
the release does not read, and P-EAGLE under the release that removed it. The kinds are written from
the module maps' own names (test_draft_kinds.write_checkpoint).
"""
import json

import pytest

from test_draft_kinds import (MAP, MAPS, NEWEST, REFUSED_BY, RELEASE, builds_nothing_quantized,
                              config_for, speculators_config, write_checkpoint)


# Every map's refusing kinds, with the finding (REFUSED_BY; vLLM 0.34.0's step3p5_mtp.py dropped
# the completeness check).
REFUSING = [(m["vllm_version"], n, code) for m in (json.loads(p.read_text()) for p in
                                                   sorted(MAPS.glob("vllm-*.json")))
            for n, a in m["architectures"].items() for field, code in REFUSED_BY.items()
            if a.get("error") is None and a.get(field) and a["role"] == "draft"]


def test_some_release_refuses_a_kind_from_any_compressed_tensors_checkpoint():
    assert ("0.33.0", "Step3p5MTP", "vllm-refuses-unstored-params") in REFUSING, REFUSING
    assert ("0.34.0", "LongCatFlashMTPModel", "vllm-load-weights-dense-only") in REFUSING


@pytest.mark.parametrize("release,name,code", REFUSING)
def test_a_kind_vllm_refuses_quantized_is_refused_as_check_fails_it(spk, tmp_path, release, name,
                                                                     code):
    # quantize says what check says of the copy written anyway (--preset none): vLLM's refusal
    # (a per-module finding's, "stored quantized, but ...", for the module quantize names).
    arch = json.loads((MAPS / f"vllm-{release}.json").read_text())["architectures"][name]
    src, q, everything = tmp_path / "src", tmp_path / "q", tmp_path / "all"
    write_checkpoint(src, name, arch)
    v = ["--vllm-version", release]
    refusal = spk("quantize", src, q, "--no-fsync", *v, expect=2).stderr
    assert not q.exists()
    spk("quantize", src, everything, "--preset", "none", "--no-fsync", *v)
    proc = spk("check", everything, "--json", *v, expect=None)
    findings = json.loads(proc.stdout)["findings"]
    found = [f for f in findings if f["code"] == code]
    assert proc.returncode == 1 and found, findings
    assert all(f["severity"] == "error" for f in found), found
    assert any(f"error: {f['message']}; {f['fix']}" in refusal or
               f["message"].removeprefix("stored quantized, but ") in refusal for f in found), \
        (refusal, found)


def test_a_draft_vllm_builds_dense_is_refused_and_its_source_serves(spk, tmp_path):
    # vLLM 0.34.0's DFlash2Beam draft builds every Linear with quant_config=None
    # (beam/nvidia/dflash2.py): a "quantized" copy would be the source under a quantization_config.
    name = "DFlash2BeamDraftModel"
    arch = MAP["architectures"][name]
    assert builds_nothing_quantized(arch)
    assert any(m["class"].endswith("Linear") for m in arch["modules"].values())
    src = tmp_path / "src"
    write_checkpoint(src, name, arch)
    refusal = spk("quantize", src, tmp_path / "q", "--no-fsync", expect=2).stderr
    assert not (tmp_path / "q").exists()
    assert f"vLLM {RELEASE} builds no Linear of {name} (" in refusal, refusal
    assert "serve the source checkpoint as it is" in refusal, refusal
    # Every other scheme format too: the map quantizes none of its modules under any.
    for scheme in ("fp8-dynamic", "nvfp4a16"):
        spk("quantize", src, tmp_path / scheme, "--scheme", scheme, "--no-fsync", expect=2)


OLD_MAP = json.loads((NEWEST.parent / "vllm-0.33.0.json").read_text())


def test_a_speculators_format_vllm_does_not_read_is_an_error(spk, tmp_path):
    # vLLM reads a speculators config by its format's code (transformers_utils/configs/
    # speculators); a format the release does not register stops it with "Expected one of". The
    # message lists the formats of the release judged, never one it lacks.
    name = "Eagle3Qwen3ForCausalLM"
    src = tmp_path / "eagle3"
    write_checkpoint(src, name, MAP["architectures"][name])
    config = speculators_config("eagle3", config_for(name, MAP["architectures"][name]),
                                "target", [])
    config["speculators_model_type"] = "eagle"  # EAGLE-1: no speculators format in vLLM
    (src / "config.json").write_text(json.dumps(config))
    proc = spk("check", src, "--vllm-version", RELEASE, "--json", expect=1)
    found = [f for f in json.loads(proc.stdout)["findings"]
             if f["code"] == "vllm-speculators-format-unknown"]
    assert [f["severity"] for f in found] == ["error"], found
    message = found[0]["message"]
    assert "'eagle'" in message and "eagle3" in message, message
    for lacked in MAP.get("speculators_refused", {}):  # P-EAGLE on 0.34
        assert lacked not in message.replace("'eagle'", ""), message


def test_peagle_is_refused_for_the_release_that_removed_it(spk, tmp_path):
    # vLLM 0.34.0 removed P-EAGLE (no Peagle* architecture; its speculators reader raises "P-EAGLE
    # (parallel drafting EAGLE-3) is not supported."). quantize refuses it for that release and
    # check fails it, both naming the release that serves it; 0.33.0 plans and passes it.
    assert "peagle" in MAP["speculators_refused"] and "peagle" not in MAP["speculators"]
    name = "PeagleQwen3ForCausalLM"
    assert name not in MAP["architectures"]
    src = tmp_path / "peagle"
    write_checkpoint(src, name, OLD_MAP["architectures"][name])
    want = (f"vLLM {RELEASE} does not build {name} (removed after 0.33.0): serve it on 0.33.0, or "
            "check/quantize with --vllm-version 0.33.0")
    proc = spk("quantize", src, tmp_path / "q", "--no-fsync", expect=2)
    assert proc.stderr.strip() == f"sparkulator: error: {want}", proc.stderr
    assert not (tmp_path / "q").exists()
    report = json.loads(spk("check", src, "--json", expect=1).stdout)
    assert [(f["code"], f["severity"], f["message"]) for f in report["findings"]
            if f["severity"] == "error"] == [("vllm-release-lacks-architecture", "error", want)]
    assert "--speculative-config" in report["serve"], report["serve"]
    assert "parallel_drafting" not in report["serve"], report["serve"]
    old = ["--vllm-version", "0.33.0"]
    plan = json.loads(spk("quantize", src, tmp_path / "q33", "--no-fsync", "--json", *old).stdout)
    assert '"parallel_drafting":true' in plan["serve"], plan["serve"]
    assert spk("check", tmp_path / "q33", "--json", *old, expect=None).returncode == 0
