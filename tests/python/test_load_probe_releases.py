"""Proof on vLLM 0.33 and 0.34, which have no CPU build (issue 37 item 6): each release's own
load_weights takes what `sparkulator quantize` writes, on the faked CUDA platform of the map.

For each draft kind (every architecture the release's committed map built) and scheme:
1. tools/vllm_module_map/output_probe.py (shapes, in the release's environment) builds the kind as
   the map did and gives each checkpoint name of the map its shape in that tiny model;
2. a synthetic checkpoint in the map's own names (test_draft_kinds.write_checkpoint, as
   test_plan_check_agree.py's) with those shapes is quantized by `sparkulator quantize --scheme S
   --vllm-version R`; where the map has no name load_weights takes (a head; a model whose
   load_weights took none of the map's candidates), the name the probe found load_weights sends
   to the module, a fused module's shards only (not also the fused form the map lists), and what
   load_weights refuses to go without and copies itself (P-EAGLE's mask_hidden);
3. output_probe.py (load) builds the kind under the output's own quantization_config and feeds
   the output's tensors to the model's load_weights with vLLM's real weight loaders, stopping
   before process_weights_after_loading (CUDA-only kernel transforms). The verdict must be ok:
   every stored tensor taken into a parameter, each Linear's into the module the map names for
   it, every parameter of those modules loaded, no tensor loaded into a parameter of another
   kind (integer / FP8 / float), and no error.
A kind quantize refuses for a scheme (a draft built under the target's config, planned from a w4a16
target, takes only w4a16; LongCat-Flash MTP, whose load_weights takes only dense names: the map's
load_weights_takes_only) is reported as refused; test_plan_check_agree.py proves that refusal.
Experts of MoE layers are not in the synthetic checkpoints (the map records no checkpoint names
for them), so their loads are not proven here.

Tiers: CI runs CI_CASES (4 kinds, one scheme each, per release, and a control output with a
shard's scale dropped that the probe must report: about 1.5 to 2.5 minutes here); with
SPK_E2E_FULL=1 (the full e2e tier) every kind x every scheme with a stock vLLM kernel of both
releases (both releases in about 9 minutes here). The verdicts are written to
$SPK_BUILD_DIR/load-probe-<release>.json.

Full tier only: `check --vllm DIR` on 0.34.0's unpacked code, with the release environment's
Python, builds a module map equal to the committed one, field for field (but "environment"), for
every architecture of that map (--vllm-map-out writes the map it built).

Skipped only without a release environment (tools/vllm_module_map/release.py V makes it; the
`vllm_releases` fixture), a failure under SPK_REQUIRE (suite_policy.py).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import build_dir
from test_draft_kinds import module_weights, write_checkpoint
from test_plan_check_agree import MAPS, built, takes_target_config, write_target

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tools" / "vllm_module_map" / "output_probe.py"
RELEASES = ("0.33.0", "0.34.0")
# Every scheme vLLM has a stock kernel for (the int2/3/5/6/7 ones have none: vLLM refuses to build
# their Linears on any platform).
SCHEMES = ("w4a16", "w4a16-asym", "w8a16", "w8a16-asym", "w4afp8", "w8a8", "fp8-dynamic",
           "fp8-block", "nvfp4a16", "mxfp4a16", "mxfp8a16")
# CI: each scheme family on a DFlash, an EAGLE-3, an MTP with MLA and a fused-shard MTP kind.
CI_CASES = {
    "0.33.0": [("DFlashDraftModel", "w4a16"), ("Eagle3LlamaForCausalLM", "fp8-dynamic"),
               ("DeepSeekMTPModel", "w8a8"), ("Qwen3_5MTP", "nvfp4a16")],
    "0.34.0": [("DFlashDraftModel", "mxfp4a16"), ("Eagle3LlamaForCausalLM", "w8a16"),
               ("DeepSeekMTPModel", "w4a16"), ("Qwen3_5MTP", "fp8-block")],
}
FULL = os.environ.get("SPK_E2E_FULL") == "1"
VERDICT_LISTS = ("unconsumed", "misplaced", "not_loaded", "shard_incomplete", "dtype_mismatch",
                 "returned_missing")


# SPK_LOAD_PROBE_CASES="Arch:scheme,...": those cases on every release that builds the
# architecture, in place of CI's or the full tier's (to rerun what a change touches).
CHOSEN = [tuple(c.split(":", 1)) for c in os.environ.get("SPK_LOAD_PROBE_CASES", "").split(",")
          if c]


def cases(release: str) -> list:
    if CHOSEN:
        return [(a, s) for a, s in CHOSEN if a in built(release)]
    if FULL:
        return [(a, s) for a in built(release) for s in SCHEMES]
    return CI_CASES[release]


def run_probe(release_dir: Path, mode: str, jobs: list, work: Path) -> list:
    """output_probe.py in the release's environment, its unpacked code first on the path."""
    work.mkdir(parents=True, exist_ok=True)
    job_file = work / f"{mode}.json"
    job_file.write_text(json.dumps(jobs))
    src = release_dir / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}",
           "VLLM_CACHE_ROOT": str(work / "vllm-cache")}
    proc = subprocess.run([str(release_dir / "venv" / "bin" / "python"), str(PROBE), "--src",
                           str(src), mode, str(job_file)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def linear_names(arch: dict) -> dict:
    """Checkpoint name (without .weight) -> (module path, shard id) of every Linear-like module
    the synthetic checkpoint stores (test_draft_kinds.module_weights) that holds parameters."""
    out = {}
    for weight, entry in module_weights(arch).items():
        # An attention layer's parameters are KV-cache scales, not a weight (Llama4's
        # ChunkedLocalAttention, DeepSeek's MLAAttention).
        if not entry["params"] or ("Attention" in entry["class"] and
                                   "Linear" not in entry["class"]):
            continue
        name = weight.removesuffix(".weight")
        ids = entry.get("checkpoint_shard_ids") or {}
        if ids and name not in ids:
            # The fused form beside its shards (DeepSeek-V2 EAGLE-3's fused_qkv_a_proj next to
            # q_a_proj and kv_a_proj_with_mqa): a checkpoint holds one of them, the shards here;
            # both would add the fused rows to the GEMM twice over in quantize's plan.
            continue
        out[name] = (entry["path"], (entry.get("checkpoint_shard_ids") or {}).get(name))
    return out


def stored_names(arch: dict, shapes: dict) -> dict:
    """Checkpoint name (without .weight) the synthetic checkpoint stores each Linear under ->
    (module path, shard id): linear_names, renamed where the probe found the name load_weights
    takes (output_probe.linear_name_reaching)."""
    out = {}
    for n, v in linear_names(arch).items():
        t = shapes["tensors"].get(f"{n}.weight")
        out[t[0].removesuffix(".weight") if t and isinstance(t[0], str) else n] = v
    return out


def quantize(spk, root: Path, release: str, name: str, arch: dict, scheme: str,
             shapes: dict) -> tuple:
    """(output folder, None) or (None, quantize's refusal)."""
    src = root / name / "src"
    if not src.exists():
        tensors = shapes["tensors"]
        # A Linear's weight by its own name; a plain parameter under the name that reaches it.
        # Nothing for a module without parameters (DeepSeek MTP's MLAAttention), nor for a plain
        # parameter no checkpoint name reaches (DFlash's mask_embedding, made from the target's
        # embedding; Qwen3.5 MTP's norms, whose names the probe's candidates lack: the `mtp.`
        # rename); sparkulator copies plain tensors as they are. A Linear the map names by its
        # path (a head, or a model whose load_weights took none of the map's candidates) is
        # stored under the name the probe found load_weights sends to it (stored_names).
        unreached = set(shapes["unreached"])
        # What load_weights refuses to go without and copies itself (output_probe's
        # required_extras: P-EAGLE's mask_hidden, XPress's xpress_head.mix.L).
        rng = np.random.default_rng(1)
        extras = {n: (rng.standard_normal(shape) * 0.02).astype(np.float16)
                  for n, shape in shapes.get("extras", {}).items()}
        write_checkpoint(src, name, arch, base=extras, layout=lambda w: [] if w not in tensors or
                         w in unreached else [
            (w, tuple(tensors[w])) if isinstance(tensors[w][0], int) else
            (tensors[w][0], tuple(tensors[w][1]), *tensors[w][2:])])
    out = root / name / scheme
    target = []
    if takes_target_config(arch):
        target = ["--target", write_target(root / name / "w4-target", 4)] \
            if not (root / name / "w4-target").exists() else ["--target", root / name / "w4-target"]
    proc = spk("quantize", src, out, "--no-fsync", "--scheme", scheme, "--vllm-version", release,
               *target, expect=None)
    if proc.returncode == 2:
        return None, proc.stderr.strip().split("error: ", 1)[-1]
    assert proc.returncode == 0, proc.stderr
    return out, None


CONTROL = "control: a weight_scale dropped"


def control_job(job: dict, dst: Path) -> dict:
    """The first output with one stored weight_scale left out, a fused module's shard's where
    there is one (the parameter is still loaded, by the other shards): vLLM loads it without a
    word and runs on uninitialized scales (docs VLLM.md), which the probe must report."""
    from safetensors.numpy import load_file, save_file
    src = Path(job["out"])
    tensors = {}
    for f in sorted(src.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    paths = list(job["linear_paths"].values())
    dropped = min((n for n in tensors if n.endswith(".weight_scale")), key=lambda n: (
        paths.count(job["linear_paths"].get(n.removesuffix(".weight_scale"))) < 2, n))
    del tensors[dropped]
    dst.mkdir(parents=True)
    save_file(tensors, str(dst / "model.safetensors"))
    (dst / "config.json").write_text((src / "config.json").read_text())
    return {**job, "out": str(dst), "scheme": CONTROL, "dropped": dropped}


@pytest.fixture(scope="module")
def proof(spk, vllm_releases, tmp_path_factory):
    """release -> {(arch, scheme): verdict}, each release's cases run once (two processes)."""
    done = {}

    def of(release: str) -> dict:
        if release in done:
            return done[release]
        release_dir = vllm_releases(release)
        root = tmp_path_factory.mktemp(f"load-probe-{release}")
        archs = MAPS[release]["architectures"]
        want = cases(release)
        t0 = time.monotonic()
        shape_jobs = [{"arch": a, "plain": [p for p in archs[a]["other_params"]
                                            if p not in module_weights(archs[a])],
                       "linears": [{"name": f"{n}.weight", "path": p, "shard": s,
                                    "reach": module_weights(archs[a])[f"{n}.weight"].get(
                                        "checkpoint_names_source") != "load_weights"}
                                   for n, (p, s) in linear_names(archs[a]).items()]}
                      for a in sorted({a for a, _ in want})]
        shapes = {r["arch"]: r for r in run_probe(release_dir, "shapes", shape_jobs, root)}
        t1 = time.monotonic()
        verdicts, load_jobs = {}, []
        for a, s in want:
            if "tensors" not in shapes[a]:
                verdicts[(a, s)] = {"error": f"not built for its shapes: {shapes[a]['error']}",
                                    "ok": False}
                continue
            out, refused = quantize(spk, root, release, a, archs[a], s, shapes[a])
            if refused:
                verdicts[(a, s)] = {"refused": refused, "ok": True}
                continue
            load_jobs.append({"arch": a, "scheme": s, "out": str(out),
                              "extras": sorted(shapes[a].get("extras", {})), "linear_paths":
                              {n: p for n, (p, _) in stored_names(archs[a], shapes[a]).items()}})
        control = control_job(load_jobs[0], root / "control") if load_jobs else None
        t2 = time.monotonic()
        for r in run_probe(release_dir, "load", load_jobs + ([control] if control else []), root):
            if r["scheme"] == CONTROL:
                verdicts[("control", CONTROL)] = {**r, "dropped": control["dropped"]}
            else:
                verdicts[(r["arch"], r["scheme"])] = r
        times = {"shapes_s": round(t1 - t0, 1), "quantize_s": round(t2 - t1, 1),
                 "load_s": round(time.monotonic() - t2, 1)}
        record = build_dir() / f"load-probe-{release}.json"
        record.write_text(json.dumps({"release": release, "full": FULL, "times": times,
                                      "verdicts": [{"arch": a, "scheme": s, **v} for (a, s), v
                                                   in sorted(verdicts.items())]},
                                     indent=1, sort_keys=True) + "\n")
        done[release] = verdicts
        return verdicts
    return of


@pytest.mark.parametrize("release", RELEASES)
def test_the_probe_reports_a_missing_scale(proof, release):
    """The control (control_job): the checkpoint name whose scale was dropped is named."""
    verdict = proof(release)[("control", CONTROL)]
    assert verdict["error"] is None and not verdict["ok"], verdict
    prefix = verdict["dropped"].removesuffix(".weight_scale")
    assert f"{prefix}: weight_scale" in verdict["shard_incomplete"], verdict


@pytest.mark.parametrize("release,arch,scheme",
                         [(r, a, s) for r in RELEASES for a, s in cases(r)])
def test_the_release_loads_what_quantize_writes(proof, release, arch, scheme):
    verdict = proof(release)[(arch, scheme)]
    if "refused" in verdict:
        return  # quantize writes nothing (module docstring)
    assert verdict.get("error") is None, verdict
    assert {k: verdict[k] for k in VERDICT_LISTS if verdict[k]} == {}, verdict
    assert verdict["ok"] and "process_weights_after_loading" in verdict["stopped_before"]


# The full tier only: even one architecture took 66 to 84 s here beside the other suites (over
# the minute CI has for it). Defined only there: a skip would fail CI (suite_policy.py).
def check_builds_the_committed_map(spk, vllm_releases, tmp_path):
    """check --vllm DIR (0.34.0's unpacked code) with that release environment's Python, on a
    DFlash draft whose config.json names every architecture of the committed map (check builds
    each it names), builds the committed map field for field: every top-level field but
    "environment" (release.py's record of the wheel and pins), and every architecture."""
    release = "0.34.0"
    release_dir = vllm_releases(release)
    committed = MAPS[release]
    name = "DFlashDraftModel"
    src = tmp_path / "src"
    write_checkpoint(src, name, committed["architectures"][name])
    config = json.loads((src / "config.json").read_text())
    config["architectures"] = [name] + sorted(set(committed["architectures"]) - {name})
    (src / "config.json").write_text(json.dumps(config))
    dumped = tmp_path / "map.json"
    spk("check", src, "--vllm", release_dir / "src", "--vllm-python",
        release_dir / "venv" / "bin" / "python", "--vllm-map-out", dumped, expect=None,
        timeout=900)
    got = json.loads(dumped.read_text())
    want = {k: v for k, v in committed.items() if k not in ("environment", "architectures")}
    assert {k: v for k, v in got.items() if k != "architectures"} == want
    assert sorted(got["architectures"]) == sorted(committed["architectures"])
    for a in committed["architectures"]:
        assert got["architectures"][a] == committed["architectures"][a], a


if FULL:
    def test_check_builds_the_committed_map_from_the_release(spk, vllm_releases, tmp_path):
        check_builds_the_committed_map(spk, vllm_releases, tmp_path)
