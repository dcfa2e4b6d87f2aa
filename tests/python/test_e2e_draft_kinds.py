"""Proof on vLLM (issue 23 item 5): draft kinds quantized by `sparkulator quantize` on real vLLM 0.32 CPU.

For the draft kinds vLLM 0.32's CPU build serves, a tiny random-init checkpoint in the kind's own
layout (test_draft_kinds.py's builder, with the names and shapes vLLM's load_weights reads) is
quantized twice: with the default W4A16 preset and with `--preset none` (every Linear, heads too).
- EAGLE-1 (`EagleLlamaForCausalLM`, method eagle) beside a tiny random Qwen3 target;
- PEAGLE (`PeagleQwen3ForCausalLM`, a speculators-format config, served as eagle3 with
  parallel_drafting), beside the same target: the dense source serves; the default W4A16 output
  fails on this CPU build at the drafter's setup (its quantized `fc`), which check warns of
  (parallel-drafting-fc-cpu), and with check's fix (`--ignore model.fc`) it serves;
- MiMo MTP (`MiMoForCausalLM` with `model.mtp_layers.0`, method mtp) and DeepSeek MTP
  (`DeepseekV3ForCausalLM` with MLA and `model.layers.2`, method mtp): the target and its MTP
  layer in one checkpoint.
The default output of each loads in vLLM (the drafter's layers through the W4A16 kernel) and serves
greedy requests through the method on sparkulator's own serve line, and vLLM's spec-decode
counters show the draft drafted. The `--preset none` copy of each MTP kind, whose head vLLM builds
as a plain nn.Linear (MiMo's `input_proj`, DeepSeek's `eh_proj`) is packed, does not load, with
vLLM's error naming that weight, and `sparkulator check` predicts it: error `vllm-map-no-scheme` on
that module, while the default output passes. EAGLE-1 has no head vLLM builds dense (its lm_head is
the target's), so its `--preset none` copy is the default output tensor for tensor, and check passes
it.
DSpark (Qwen3DSparkModel) and DFlash2 (DFlash2DraftModel) are in 0.32's map, but its CPU build
refuses them before loading anything (V1 model runner; only the V2 GPU runner has them): that
refusal is asserted here, with its text, so a release that serves them shows up.

More MTP kinds (Gemma4's assistant, Qwen3.5, Step-3.5) are test_e2e_mtp_kinds.py's, whose
checkpoints join this run (MORE_KINDS) when that module is collected too.

Every vLLM engine runs in one `nice -n 10` interpreter of the vLLM venv (tests/e2e/served_drafts.py)
one after the other: one import of vLLM for all of them. Skipped only with SPK_E2E_VLLM=0 or without
the vLLM venv (the `vllm_venv` fixture), each a failure under SPK_REQUIRE (suite_policy.py); its
tests use `vllm_venv`, so the sanitizer pass leaves them out.
"""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import test_draft_kinds as kinds
from conftest import assert_same_tensors, on_release

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.e2e import server, served_drafts  # noqa: E402

RELEASE = "0.32.0"  # vLLM's CPU build, which serves the tier (tests/e2e/env.py SERVED_RELEASE)
MAP = json.loads((kinds.MAPS / f"vllm-{RELEASE}.json").read_text())["architectures"]
H, HEADS, KV, HD, INTER, VOCAB, LAYERS = 256, 4, 2, 64, 512, 512, 2
SHAPES = {"q_proj": (HEADS * HD, H), "k_proj": (KV * HD, H), "v_proj": (KV * HD, H),
          "o_proj": (H, HEADS * HD), "gate_proj": (INTER, H), "up_proj": (INTER, H),
          "down_proj": (H, INTER), "fc": (H, 2 * H), "input_proj": (H, 2 * H),
          "embed_tokens": (VOCAB, H), "lm_head": (VOCAB, H)}
ATTENTION = {"hidden_size": H, "num_attention_heads": HEADS, "num_key_value_heads": KV,
             "head_dim": HD, "intermediate_size": INTER, "vocab_size": VOCAB,
             "rms_norm_eps": 1e-6, "max_position_embeddings": 2048, "rope_theta": 10000.0,
             "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0}
PROMPTS = [[(7 * i + 3 * j) % (VOCAB - 2) + 2 for j in range(24)] for i in range(2)]
MAX_TOKENS = 8
# vLLM 0.32 loading the MiMo copy whose input_proj is packed: MiMoMTP.load_weights maps the
# checkpoint's layer 0 to vLLM's layer 2, where input_proj is a plain nn.Linear with `weight` only.
MIMO_HEAD_ERROR = ("ValueError: There is no module or parameter named "
                   "'model.mtp_layers.2.input_proj.weight_packed' in MiMoMTP")
# DeepSeekMTP.load_weights looks the packed eh_proj up in its parameters (a plain nn.Linear).
DEEPSEEK_HEAD_ERROR = "KeyError: 'model.layers.2.eh_proj.weight_packed'"
DRAFTER_LINE = "Loading drafter model"
KERNEL_LINE = "Using CPUWNA16LinearKernel for CompressedTensorsWNA16"
REFUSED = {"Qwen3DSparkModel": "Model Runner V1 does not support: dspark speculative decoding",
           "DFlash2DraftModel": "Model Runner V1 does not support: DFlash candidate-head drafts"}


def leaf(weight: str) -> str:
    return weight.removesuffix(".weight").rsplit(".", 1)[-1]


def shape(stored: str) -> tuple:
    if "norm" in stored:
        return (HD,) if leaf(stored) in ("q_norm", "k_norm") else (H,)
    if stored.endswith(".bias"):
        return (SHAPES[leaf(stored.removesuffix(".bias"))][0],)
    if leaf(stored) == "mask_embedding":
        return (H,)
    return SHAPES.get(leaf(stored), (H, H))


def split(weight: str) -> list:
    """A fused vLLM module as the unfused names a checkpoint stores."""
    base = weight.removesuffix(".weight")
    if base.endswith(".qkv_proj"):
        return [base[:-len("qkv_proj")] + p + ".weight" for p in ("q_proj", "k_proj", "v_proj")]
    if base.endswith(".gate_up_proj"):
        return [base[:-len("gate_up_proj")] + p + ".weight" for p in ("gate_proj", "up_proj")]
    return [weight]


def eagle_layout(weight: str) -> list:
    # EagleLlamaForCausalLM.load_weights prefixes "model." to every name but lm_head's: an EAGLE-1
    # checkpoint stores `fc`, `layers.0...`, `embed_tokens` (the map's names are vLLM's paths).
    return [(w.removeprefix("model."), shape(w)) for w in split(weight)]


def peagle_layout(weight: str) -> list:
    # Eagle3Qwen3ForCausalLM.load_weights prefixes "model." to every name but lm_head's; its one
    # layer's q/k/v take the embedding and the hidden state side by side (2H, qwen3_eagle3.py).
    wide = lambda w: (shape(w)[0], 2 * H) if leaf(w) in ("q_proj", "k_proj", "v_proj") \
        else shape(w)  # noqa: E731
    return [(w.removeprefix("model."), wide(w)) for w in split(weight)]


def mimo_layout(weight: str) -> list:
    # MiMoMTP's hf_to_vllm_mapper: the checkpoint numbers its MTP layers from 0, without the
    # `mtp_block.` wrapper, with q/k/v and gate/up unfused; embed_tokens and lm_head are the target's.
    if not weight.startswith("model.mtp_layers."):
        return []
    disk = re.sub(r"^model\.mtp_layers\.\d+\.", "model.mtp_layers.0.", weight).replace(
        "mtp_block.", "")
    out = [(w, shape(w)) for w in split(disk)]
    if disk.endswith("qkv_proj.weight"):  # Qwen2's attention has q/k/v biases
        out += [(b, shape(b)) for b in (w.removesuffix(".weight") + ".bias" for w, _ in out)]
    return out


# DeepSeek MTP (MLA): vLLM 0.32's CPU MLA decode kernel has the latent width 576 only
# (kv_lora_rank 512 + qk_rope_head_dim 64; cpu_mla.py), not the map's tiny 128.
QL, KL, NOPE, ROPE, VH = 128, 512, 128, 64, 128
MLA_SHAPES = {"q_a_proj": (QL, H), "q_b_proj": (HEADS * (NOPE + ROPE), QL),
              "kv_a_proj_with_mqa": (KL + ROPE, H), "kv_b_proj": (HEADS * (NOPE + VH), KL),
              "o_proj": (H, HEADS * VH), "eh_proj": (H, 2 * H), "head": (VOCAB, H),
              "q_a_layernorm": (QL,), "kv_a_layernorm": (KL,)}
DEEPSEEK = {**ATTENTION, "num_hidden_layers": LAYERS, "num_key_value_heads": HEADS,
            "q_lora_rank": QL, "kv_lora_rank": KL, "qk_nope_head_dim": NOPE,
            "qk_rope_head_dim": ROPE, "v_head_dim": VH, "n_routed_experts": 4,
            "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
            "n_group": 1, "topk_group": 1, "moe_layer_freq": 1, "rope_scaling": None,
            "hidden_act": "silu", "topk_method": "noaux_tc", "scoring_func": "sigmoid",
            "norm_topk_prob": True, "routed_scaling_factor": 1.0}


def deepseek_layout(weight: str) -> list:
    # DeepSeekMTP.load_weights adds `mtp_block.` to the MTP layer's decoder weights itself: the
    # checkpoint stores model.layers.2.self_attn... (layer 2 = after the target's two). The target's
    # layers 0 and 1 are the same dense decoder layer (first_k_dense_replace 8), so the MTP
    # layer's decoder names give them too; embed_tokens is the target's.
    if leaf(weight) == "mla_attn":  # the map's MLAAttention entry: no tensor
        return []
    mla = lambda w: MLA_SHAPES.get(leaf(w), shape(w))  # noqa: E731
    if ".mtp_block." in weight:
        rest = weight.split(".mtp_block.", 1)[1]
        return [(f"model.layers.{i}.{rest}", mla(weight)) for i in range(LAYERS + 1)]
    return [(weight, mla(weight))]


def qwen3_layout(weight: str) -> list:
    return [(weight, shape(weight))]


def qwen2_layout(weight: str) -> list:
    # MiMo's target is Qwen2: Qwen3's names without the q/k norms, with q/k/v biases.
    if leaf(weight) in ("q_norm", "k_norm"):
        return []
    if leaf(weight) in ("q_proj", "k_proj", "v_proj"):
        bias = weight.removesuffix(".weight") + ".bias"
        return [(weight, shape(weight)), (bias, shape(bias))]
    return [(weight, shape(weight))]


def write_target(folder: Path, architecture: str, layout, extra: dict | None = None) -> dict:
    """A tiny random target through the same builder, from the map's Qwen3ForCausalLM (the target
    its drafts were built against): its config.json; the tensors are in `folder`."""
    name = "Qwen3ForCausalLM"
    config = {**ATTENTION, "num_hidden_layers": LAYERS, "architectures": [architecture],
              **(extra or {})}
    kinds.write_checkpoint(folder, name, MAP[name], layout=layout, config=config)
    return json.loads((folder / "config.json").read_text())


def spec_of(serve: str) -> tuple:
    """(model served, speculative config) of sparkulator's serve line."""
    words = shlex.split(serve)
    assert words[:2] == ["vllm", "serve"], serve
    return words[2], json.loads(words[words.index("--speculative-config") + 1])


def check_report(spk, folder: Path) -> tuple:
    proc = spk("check", folder, "--vllm-version", RELEASE, "--json", expect=None)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="session")
def spk(spk):
    """conftest's runner judging by the release the tier serves on (conftest.on_release); the
    modules that take `proof` from here import this too."""
    return on_release(spk, RELEASE)


@pytest.fixture(scope="session")
def vllm_tier():
    """Skips under SPK_E2E_VLLM=0 (scripts/test.sh --quick); requested before vllm_venv, so that
    tier does not even look for the venv."""
    if os.environ.get("SPK_E2E_VLLM") == "0":
        pytest.skip("SPK_E2E_VLLM=0: no vLLM in this tier (scripts/test.sh --quick)")


# Builders of more kinds, run in the same vLLM interpreter: test_e2e_mtp_kinds.py appends its own
# when it is collected. Each is called as build(root, quantize, built, job) after this file's
# checkpoints are built and returns its jobs.
MORE_KINDS = []
_RUN = {}


@pytest.fixture(scope="module")
def proof(vllm_tier, vllm_venv, tmp_path_factory, spk):
    # vllm_venv (skips without the venv; a failure under SPK_REQUIRE) is a fixture of every test
    # here, so the sanitizer pass leaves them out (suite_policy.RELEASE_ONLY_FIXTURES).
    # One run for the session: the sibling module's `proof` is this fixture, whose first call
    # runs every engine of both files.
    if "proof" not in _RUN:
        _RUN["proof"] = run_proof(vllm_venv, tmp_path_factory, spk)
    return _RUN["proof"]


def run_proof(vllm_python, tmp_path_factory, spk) -> dict:
    root = tmp_path_factory.mktemp("served")
    qwen3 = root / "qwen3-target"
    write_target(qwen3, "Qwen3ForCausalLM", qwen3_layout)
    built = {}

    def quantize(key, src, *flags):
        plan = json.loads(spk("quantize", src, root / key / "q", "--json", "--no-fsync",
                              *flags).stdout)
        spk("quantize", src, root / key / "all", "--preset", "none", "--no-fsync")
        built[key] = {"src": src, "q": root / key / "q", "all": root / key / "all", "plan": plan,
                      "check_q": check_report(spk, root / key / "q"),
                      "check_all": check_report(spk, root / key / "all")}

    eagle = "EagleLlamaForCausalLM"
    kinds.write_checkpoint(root / "eagle" / "src", eagle, MAP[eagle], layout=eagle_layout,
                           config={**ATTENTION, "num_hidden_layers": 1})
    quantize("eagle", root / "eagle" / "src")
    # PEAGLE: a speculators-format draft (the only way vLLM reaches it), with the parallel-drafting
    # mask slot it must ship (mask_hidden, the fc's input width: two aux layers of H).
    # Its transformer_layer_config is a whole Qwen3 config, as the speculators library writes it
    # (vLLM reads hidden_act and the rest from it alone).
    from transformers import Qwen3Config
    peagle = "PeagleQwen3ForCausalLM"
    layer_config = Qwen3Config(**ATTENTION, num_hidden_layers=1).to_dict()
    kinds.write_checkpoint(root / "peagle" / "src", peagle, MAP[peagle], layout=peagle_layout,
                           config={**layer_config, "architectures": [peagle]},
                           base={"mask_hidden": np.zeros((1, 2 * H), np.float16)})
    quantize("peagle", root / "peagle" / "src")
    # The fix check gives for the CPU build: fc kept dense by its vLLM name.
    fix = root / "peagle" / "fc-dense"
    spk("quantize", root / "peagle" / "src", fix, "--ignore", "model.fc", "--no-fsync")
    built["peagle"].update({"fc-dense": fix, "check_fc_dense": check_report(spk, fix)})
    mimo = "MiMoMTPModel"
    config = write_target(root / "mimo-target", "MiMoForCausalLM", qwen2_layout,
                          {"model_type": "qwen2", "num_nextn_predict_layers": 1})
    from safetensors.numpy import load_file
    kinds.write_checkpoint(root / "mimo" / "src", mimo, MAP[mimo], layout=mimo_layout,
                           config=config,
                           base=load_file(str(root / "mimo-target" / "model.safetensors")))
    quantize("mimo", root / "mimo" / "src")
    deepseek = "DeepSeekMTPModel"
    rng = np.random.default_rng(1)
    kinds.write_checkpoint(root / "deepseek" / "src", deepseek, MAP[deepseek],
                           layout=deepseek_layout, config=DEEPSEEK,
                           base={"model.norm.weight": np.ones(H, np.float16),
                                 "lm_head.weight": (rng.standard_normal((VOCAB, H)) * 0.02
                                                    ).astype(np.float16)})
    quantize("deepseek", root / "deepseek" / "src")
    for name in REFUSED:
        arch = MAP[name]
        kinds.write_checkpoint(root / name / "src", name, arch,
                               layout=lambda w: [(w.removeprefix("model."), shape(w))],
                               config={**ATTENTION, "num_hidden_layers": 1})
        quantize(name, root / name / "src")

    def job(name, key, variant):
        model, spec = spec_of(built[key]["plan"]["serve"])
        if "model" in spec:  # a separate draft: served beside the Qwen3 target
            spec["model"], model = str(built[key][variant]), str(qwen3)
        else:  # MTP: the checkpoint is the target
            model = str(built[key][variant])
        return {"name": name, "model": model, "speculative_config": spec, "prompts": PROMPTS,
                "max_tokens": MAX_TOKENS}

    jobs = [job("eagle-w4a16", "eagle", "q"), job("peagle-w4a16", "peagle", "q"),
            job("peagle-dense", "peagle", "src"), job("peagle-fc-dense", "peagle", "fc-dense"),
            job("mimo-w4a16", "mimo", "q"),
            job("mimo-preset-none", "mimo", "all"), job("deepseek-w4a16", "deepseek", "q"),
            job("deepseek-preset-none", "deepseek", "all")]
    jobs += [job(name, name, "q") for name in REFUSED]
    for build in MORE_KINDS:
        jobs += build(root, quantize, built, job)
    (root / "jobs.json").write_text(json.dumps(jobs, indent=1))
    environ = dict(os.environ, **server.base_env(), VLLM_CACHE_ROOT=str(root / "cache"),
                   SPK_E2E_DRAFTER_KERNEL_LOG="1")
    environ["PYTHONPATH"] = server.plugin_env()["PYTHONPATH"]  # the drafter's kernel line
    log = root / "vllm.log"
    with open(log, "w") as f:
        proc = subprocess.run(["nice", "-n", "10", str(vllm_python), "-m", "tests.e2e.served_drafts",
                               str(root / "jobs.json"), str(root / "results.json")], cwd=ROOT,
                              stdout=f, stderr=subprocess.STDOUT, env=environ, timeout=900)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0 and (root / "results.json").exists(), text[-6000:]
    results = {r["name"]: r for r in json.loads((root / "results.json").read_text())}
    logs = served_drafts.job_logs(text)
    for name, r in results.items():
        r["log"] = logs.get(name, "")
        r["root_cause"] = server.root_cause(r["log"])  # for the failure messages
    return {"built": built, "results": results, "log": log}


def served_ok(result: dict, k: int) -> None:
    assert result["loaded"] and not result["error"], (result["error"], result["root_cause"],
                                                      result["log"][-4000:])
    assert [len(o) for o in result["outputs"]] == [MAX_TOKENS] * len(PROMPTS), result["outputs"]
    spec = result["spec"]
    # The draft drafted: vLLM counted its drafts, k tokens each (the serve line's
    # num_speculative_tokens). Acceptance of a random draft on a random target is chance: not
    # asserted (0 to 1 of 14 drafts measured).
    assert spec["drafts"] > 0 and spec["drafted"] == spec["drafts"] * k, spec
    assert 0 <= spec["accepted"] <= spec["drafted"], spec


@pytest.mark.parametrize("key,job,method", [("eagle", "eagle-w4a16", "eagle"),
                                            ("mimo", "mimo-w4a16", "mtp"),
                                            ("deepseek", "deepseek-w4a16", "mtp")])
def test_default_output_serves_with_its_method(proof, key, job, method):
    built, result = proof["built"][key], proof["results"][job]
    _, spec = spec_of(built["plan"]["serve"])
    assert spec["method"] == method
    served_ok(result, spec["num_speculative_tokens"])
    # vLLM loaded the quantized draft through compressed-tensors' W4A16 scheme: its kernel line
    # comes after "Loading drafter model" (logged again for the drafter's layers:
    # SPK_E2E_DRAFTER_KERNEL_LOG, wna16_fallback/).
    log = result["log"]
    assert DRAFTER_LINE in log, log[-3000:]
    assert KERNEL_LINE in log[log.index(DRAFTER_LINE):], log[log.index(DRAFTER_LINE):][-3000:]
    # check passes the default output: no error, no map finding.
    code, report = built["check_q"]
    errors = [f for f in report["findings"] if f.get("severity") == "error"]
    assert code == 0 and errors == [], report["findings"]


@pytest.mark.parametrize("key,head,error", [("mimo", "model.mtp_layers.0.input_proj",
                                             MIMO_HEAD_ERROR),
                                            ("deepseek", "model.layers.2.eh_proj",
                                             DEEPSEEK_HEAD_ERROR)])
def test_head_quantized_copy_fails_as_check_predicts(proof, key, head, error):
    built, result = proof["built"][key], proof["results"][f"{key}-preset-none"]
    # The exception vLLM's LLM(...) raised (the engine runs in-process: its own error).
    assert not result["loaded"], result
    assert result["error"].startswith(error), (result["error"], result["log"][-4000:])
    code, report = built["check_all"]
    flagged = {f["module"] for f in report["findings"]
               if f["code"] == "vllm-map-no-scheme" and f.get("severity") == "error"}
    assert code == 1 and head in flagged, report["findings"]
    # The default output left that head dense (and vLLM loaded it: the test above).
    assert head in kinds.quantized_modules(built["all"])
    assert head not in kinds.quantized_modules(built["q"])


# vLLM 0.32 CPU loading the default W4A16 PEAGLE: the proposer's load_model sends the 1-D
# mask_hidden through combine_hidden_states -> fc (llm_base_proposer.py), and cpu_gemm_wna16 takes
# 2-D input only (CUDA's Marlin flattens it first).
PEAGLE_CPU_ERROR = "IndexError: Dimension out of range (expected to be in range of [-1, 0], but got 1)"


def test_peagle_is_served_from_its_speculators_format_with_parallel_drafting(proof):
    # The serve line carries what the speculators format fixes (vLLM's build_vllm_speculative_config:
    # peagle -> eagle3 with parallel_drafting) and the config's own token count; the dense source
    # serves through it, 3 tokens a draft.
    built = proof["built"]["peagle"]
    _, spec = spec_of(built["plan"]["serve"])
    assert spec == {**spec, "method": "eagle3", "parallel_drafting": True,
                    "num_speculative_tokens": 3}, spec
    served_ok(proof["results"]["peagle-dense"], 3)
    assert "mask_hidden" not in kinds.quantized_modules(built["q"])


def test_peagle_quantized_fc_fails_on_the_cpu_build_as_check_warns(proof):
    built, results = proof["built"]["peagle"], proof["results"]
    # The default output (fc quantized, for CUDA) does not load on this CPU build ...
    result = results["peagle-w4a16"]
    assert not result["loaded"] and result["error"] == PEAGLE_CPU_ERROR, (
        result["error"], result["log"][-4000:])
    assert DRAFTER_LINE in result["log"]  # the draft's weights loaded; the proposer's setup failed
    # ... which check says, naming fc and the fix, as a platform warning (CUDA loads it).
    code, report = built["check_q"]
    found = [f for f in report["findings"] if f["code"] == "parallel-drafting-fc-cpu"]
    assert code == 0 and [(f["module"], f["severity"]) for f in found] == [("fc", "warning")], \
        report["findings"]
    assert "--ignore model.fc" in found[0]["fix"]
    # With that fix the W4A16 draft (every other Linear quantized) serves on the CPU build, and
    # check has nothing left to say about it.
    assert kinds.quantized_modules(built["fc-dense"]) == kinds.quantized_modules(built["q"]) - {"fc"}
    served_ok(results["peagle-fc-dense"], 3)
    log = results["peagle-fc-dense"]["log"]
    assert KERNEL_LINE in log[log.index(DRAFTER_LINE):]
    code, report = built["check_fc_dense"]
    assert code == 0 and not [f for f in report["findings"]
                              if f["code"] == "parallel-drafting-fc-cpu"], report["findings"]


def test_eagle_has_no_dense_head_so_preset_none_is_the_served_output(proof):
    # EAGLE-1's lm_head is the target's and every Linear of the draft is built with the draft's
    # quantization scheme: --preset none writes the very tensors of the default output (served
    # above), and check passes it as it passes that one.
    built = proof["built"]["eagle"]
    assert kinds.quantized_modules(built["q"]), "nothing quantized"
    assert_same_tensors(built["q"], built["all"])
    code, report = built["check_all"]
    assert code == 0 and not [f for f in report["findings"] if f.get("severity") == "error"], \
        report["findings"]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cpu_build_refuses_the_kind_before_loading(proof, name):
    result = proof["results"][name]
    assert not result["loaded"] and REFUSED[name] in result["error"], result
    # sparkulator's side is test_draft_kinds.py's; its serve line has the kind's method.
    _, spec = spec_of(proof["built"][name]["plan"]["serve"])
    assert spec["method"] == MAP[name]["methods"][0]
