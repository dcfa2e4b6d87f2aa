"""quantize and check decide what vLLM builds with one function (vllm/vllm_build.h
DecideVllmBuild): what the plan writes, check passes.

For every architecture that every compiled-in module map built (data/vllm_module_map/*.json),
a small checkpoint in that architecture's own checkpoint names (the map's checkpoint_names and
other_params, [256, 256] F16: whole groups of 128 and Marlin tiles), quantized and then checked,
by default and with --vllm-version for each release. Either check reports no error, or
quantize refuses (exit 2) and check's error on that draft quantized anyway gives the same reason.

Per scheme (the maps' scheme_verdicts: vLLM's verdict under each compressed-tensors format): each
architecture again under its release, with one representative scheme of another format (in turn,
so every format meets many architectures), and with every format under which vLLM builds one of
its modules otherwise than under W4A16.
"""
import json
from pathlib import Path

import pytest

from test_draft_kinds import config_for, write_checkpoint

MAPS = {json.loads(p.read_text())["vllm_version"]: json.loads(p.read_text())
        for p in sorted((Path(__file__).resolve().parents[2] / "data" / "vllm_module_map")
                        .glob("vllm-*.json"))}
SIDE = 256


def built(release: str) -> list:
    archs = MAPS[release]["architectures"]
    return sorted(n for n, a in archs.items()
                  if a.get("error") is None and "modules" in a
                  and a["methods"] != ["extract_hidden_states"])


CASES = [(release, name) for release in MAPS for name in built(release)]

# A representative scheme of each non-base format the maps cover (src/quant/scheme.cc's rows).
SCHEME_OF_FORMAT = {"int-quantized": "w8a8", "float-quantized": "fp8-dynamic",
                    "nvfp4-pack-quantized": "nvfp4a16", "mxfp4-pack-quantized": "mxfp4a16",
                    "mxfp8-quantized": "mxfp8a16"}


# Found by the per-scheme cases, not a verdict of the maps (vLLM's is W4A16's there): under NVFP4
# quantize shares one weight_global_scale across the fused groups it knows, while check fuses by
# vLLM's names (global-scale-differs). Since both name modules by the map (ToFusedVllmModuleName)
# and quantize shares the scale per module vLLM fuses, none is known; a pair found goes here.
NVFP4_GLOBAL_SCALE_DISAGREES: set = set()


def scheme_cases() -> list:
    cases = set()
    for i, (release, name) in enumerate(CASES):
        formats = sorted(f for f, s in MAPS[release]["schemes"].items() if not s["base"])
        assert set(formats) == set(SCHEME_OF_FORMAT), formats
        cases.add((release, name, SCHEME_OF_FORMAT[formats[i % len(formats)]]))
        verdicts = MAPS[release]["architectures"][name]["scheme_verdicts"]
        for fmt, v in verdicts.items():
            if v["modules"]:
                cases.add((release, name, SCHEME_OF_FORMAT[fmt]))
    return [pytest.param(*c, marks=pytest.mark.xfail(
                strict=True, reason="NVFP4 global scale: quantize and check fuse differently"))
            if c[2] == "nvfp4a16" and c[:2] in NVFP4_GLOBAL_SCALE_DISAGREES else c
            for c in sorted(cases)]


def errors(spk, ckpt, *args) -> tuple:
    proc = spk("check", ckpt, "--json", *args, expect=None)
    report = json.loads(proc.stdout)
    return proc.returncode, [f for f in report["findings"] if f["severity"] == "error"]


def default_releases(spk, tmp_path) -> tuple:
    """The releases quantize and check judge by when given no --vllm-version."""
    src = tmp_path / "probe"
    write_eagle1(src)
    plan = json.loads(spk("quantize", src, tmp_path / "probe-q", "--dry-run", "--json").stdout)
    report = json.loads(spk("check", src, "--json", expect=None).stdout)
    return plan["vllm_module_map"]["release"], report["vllm_module_map"]


def test_quantize_and_check_default_to_the_same_release(spk, tmp_path):
    newest = max(MAPS, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert default_releases(spk, tmp_path) == (newest, newest)


def takes_target_config(arch: dict) -> bool:
    return arch.get("quant_config_from") == "target" and "mtp" not in arch["methods"]


# Each checkpoint under every release, not only its map's: a Qwen3-Next MTP checkpoint (0.33's
# map builds Qwen3NextMTP, 0.32's cannot) is planned and checked under 0.32 too.
@pytest.mark.parametrize("version", ["default", *MAPS])
@pytest.mark.parametrize("release,name", CASES)
def test_check_passes_what_quantize_writes(spk, tmp_path, release, name, version):
    flags = [] if version == "default" else ["--vllm-version", version]
    quantize_then_check(spk, tmp_path, release, name, flags, version)


@pytest.mark.parametrize("release,name,scheme", scheme_cases())
def test_check_passes_what_quantize_writes_per_scheme(spk, tmp_path, release, name, scheme):
    quantize_then_check(spk, tmp_path, release, name, ["--vllm-version", release],
                        f"{release} {scheme}", ["--scheme", scheme])


def quantize_then_check(spk, tmp_path, release: str, name: str, flags: list, label: str,
                        scheme: tuple = ()) -> None:
    arch = MAPS[release]["architectures"][name]
    src = tmp_path / "src"
    write_checkpoint(src, name, arch)

    def agree(ok: bool, detail) -> None:
        if not ok:
            pytest.fail(f"{name} ({release}'s map), {label}: {detail}")

    out = tmp_path / "q"
    proc = spk("quantize", src, out, "--no-fsync", *scheme, *flags, expect=None)
    if proc.returncode == 2:
        # Refused: check fails the draft quantized anyway (--preset none) for the same reason
        # (a draft built under the target's config: pass --target; a kind vLLM refuses from any
        # compressed-tensors checkpoint; a release without the architecture).
        reason = proc.stderr.strip().split("error: ", 1)[-1]
        reason = reason.split(": pass --target")[0].split("; ")[0].split(": plan for a release")[0]
        # Every Linear kept dense by one rule: check names the first one's reason.
        if "so nothing would be quantized (" in reason:
            reason = reason.split("so nothing would be quantized (", 1)[1].rsplit(")", 1)[0]
        anyway = spk("quantize", src, tmp_path / "all", "--preset", "none", "--no-fsync", *scheme,
                     *flags, expect=None)
        # A kind the release lacks is refused whatever the preset: check judges the source then.
        checked = tmp_path / "all" if anyway.returncode == 0 else src
        assert anyway.returncode in (0, 2), anyway.stderr
        rc, found = errors(spk, checked, *flags)
        agree(rc == 1 and any(reason in f["message"] for f in found), (reason, found))
        return
    assert proc.returncode == 0, proc.stderr
    rc, found = errors(spk, out, *flags)
    agree((rc, found) == (0, []), found)


def write_target(folder: Path, scheme_bits: int | None) -> Path:
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
              "hidden_size": SIDE, "num_hidden_layers": 2, "torch_dtype": "bfloat16"}
    if scheme_bits:
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": scheme_bits, "type": "int", "symmetric": True, "strategy": "group",
                "group_size": 128}}},
            "ignore": ["lm_head"]}
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("release", [r for r in MAPS
                                     if "Gemma4DSparkModel" in built(r)])
def test_a_draft_under_the_targets_config_is_planned_from_the_target(spk, tmp_path, release):
    name = "Gemma4DSparkModel"
    arch = MAPS[release]["architectures"][name]
    assert takes_target_config(arch)
    src = tmp_path / "src"
    write_checkpoint(src, name, arch)
    v = ["--vllm-version", release]
    proc = spk("quantize", src, tmp_path / "none", "--no-fsync", *v, expect=2)
    assert (f"vLLM {release} builds {name} ({arch['file']}) under the target's quantization "
            "config and never reads the draft's own: pass --target T") in proc.stderr
    dense, w4 = write_target(tmp_path / "bf16", None), write_target(tmp_path / "w4", 4)
    # Beside a dense target: every Linear dense, and check passes it with or without --target.
    plan = json.loads(spk("quantize", src, tmp_path / "d", "--no-fsync", "--json", "--target",
                          dense, *v).stdout)
    assert [t for t in plan["tensors"] if t["action"] == "quantize"] == []
    assert errors(spk, tmp_path / "d", *v) == (0, [])
    assert errors(spk, tmp_path / "d", "--target", dense, *v) == (0, [])
    # Beside a w4a16 target: the target's scheme; check --target passes it (a warning: the target
    # must quantize the same modules).
    plan = json.loads(spk("quantize", src, tmp_path / "q", "--no-fsync", "--json", "--target",
                          w4, *v).stdout)
    assert [t for t in plan["tensors"] if t["action"] == "quantize"] != []
    assert errors(spk, tmp_path / "q", "--target", w4, *v) == (0, [])
    # Another scheme than the target's is refused, naming the one to pass.
    w8 = write_target(tmp_path / "w8", 8)
    proc = spk("quantize", src, tmp_path / "x", "--no-fsync", "--target", w8, *v, expect=2)
    assert "the draft's Linears load only with that scheme: pass --scheme w8a16 --group-size " \
        "128" in proc.stderr, proc.stderr


def write_eagle1(folder: Path) -> None:
    """EAGLE-1's common layout: LlamaForCausalLM, one decoder layer, fc [H, 2H], no Eagle name."""
    import numpy as np
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    names = [f"layers.0.self_attn.{p}_proj.weight" for p in "qkvo"] + \
        [f"layers.0.mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
    tensors = {n: (rng.standard_normal((SIDE, SIDE)) * 0.02).astype(np.float16) for n in names}
    tensors["fc.weight"] = (rng.standard_normal((SIDE, 2 * SIDE)) * 0.02).astype(np.float16)
    tensors["embed_tokens.weight"] = (rng.standard_normal((512, SIDE)) * 0.02).astype(np.float16)
    tensors["layers.0.post_attention_layernorm.weight"] = np.ones(SIDE, np.float16)
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": SIDE,
        "intermediate_size": SIDE, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "vocab_size": 512, "torch_dtype": "float16"}))


@pytest.mark.parametrize("release", list(MAPS))
def test_an_eagle1_head_is_served_as_eagle(spk, tmp_path, release):
    src = tmp_path / "src"
    write_eagle1(src)
    v = ["--vllm-version", release]
    plan = json.loads(spk("quantize", src, tmp_path / "q", "--no-fsync", "--json",
                          "--target-layers", "2", *v).stdout)
    assert '"method":"eagle"' in plan["serve"], plan["serve"]
    assert plan["serve"].startswith("vllm serve <target> --speculative-config"), plan["serve"]
    # The map's EAGLE-1 verdicts: its fc and decoder Linears quantized, named after the target's
    # layers (EagleLlamaForCausalLM's layers follow them).
    actions = {t["name"]: (t["action"], t.get("vllm_module")) for t in plan["tensors"]}
    assert actions["fc.weight"][0] == "quantize", actions
    assert actions["layers.0.mlp.down_proj.weight"] == ("quantize", "model.layers.2.mlp.down_proj")
    assert errors(spk, tmp_path / "q", "--target-layers", "2", *v) == (0, [])


DIFFERING = sorted((release, name, fmt, sorted(v["modules"]))
                   for release in MAPS for name in built(release)
                   for fmt, v in MAPS[release]["architectures"][name]["scheme_verdicts"].items()
                   if v["modules"])


@pytest.mark.parametrize("release,name,fmt,modules", DIFFERING)
def test_the_plan_follows_the_verdict_of_the_scheme_written(spk, tmp_path, release, name, fmt,
                                                           modules):
    # Where vLLM builds a module otherwise under a format than under W4A16 (Kimi-K3 MTP's layer
    # under MXFP4: UnquantizedLinearMethod), the plan for that format follows it.
    arch = MAPS[release]["architectures"][name]
    src = tmp_path / "src"
    write_checkpoint(src, name, arch)

    def actions(scheme: str) -> dict:
        plan = json.loads(spk("quantize", src, tmp_path / scheme, "--dry-run", "--json",
                              "--scheme", scheme, "--vllm-version", release).stdout)
        return {t["name"]: t["action"] for t in plan["tensors"]}
    base, other = actions("w4a16"), actions(SCHEME_OF_FORMAT[fmt])
    verdicts = arch["scheme_verdicts"][fmt]["modules"]
    checked = 0
    for key in modules:
        names = arch["modules"][key].get("checkpoint_names") or [arch["modules"][key]["path"]]
        for n in names:
            t = f"{n}.weight"
            if t not in base:
                continue
            want = "quantize" if verdicts[key]["quantized"] else "keep"
            assert other[t] == want, (t, other[t], base[t])
            assert base[t] != want, (t, base[t])
            checked += 1
    assert checked, (modules, sorted(base))
