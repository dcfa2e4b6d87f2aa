"""Failure cases of the Qwen3 DFlash draft (dflash_qwen3.KIND.failure_cases), each run on vLLM 0.32.

The expected values are what was observed on vLLM 0.32 CPU on 2026-12-01 (docs/e2e.md, full run),
not the published claims:
- qkv-quantized: q/k/v quantized too (`--preset none`): loads and serves. qwen3_dflash.py has a
  quantized context-KV path (`_build_context_kv_buffers`: a quantized qkv_proj runs through its quant
  method). `sparkulator check` still reports dflash-qkv-quantized (they disagree).
- ignore-literal-local / ignore-literal-global: the preset's `re:` ignore entry replaced by literal
  per-projection names, checkpoint-local (`layers.0.self_attn.q_proj`) or vLLM's
  (`model.layers.T.self_attn.q_proj`, T = target layers): both fail with
  `AttributeError: 'QKVParallelLinear' object has no attribute 'data'`.
- ignore-fused-literal / ignore-regex: the fused literal `model.layers.T.self_attn.qkv_proj`, and the
  `re:` pattern sparkulator writes: both load.
- wrong-target: the BF16-trained draft on the W4A16 target (acceptance is measured in run.py).
- compile-cache-bf16 then compile-cache-w4a16: two servers, same VLLM_CACHE_ROOT, without
  --enforce-eager; run in this order: both load (no KeyError: 'weight_packed' on 0.32 CPU).

Error policy: a checkpoint that cannot be written raises (sparkulator's error is in the message).
"""

from __future__ import annotations

import json
import pathlib
import shutil

from tests.e2e import env
from tests.e2e.cases import FailureCase

QKV = ("q_proj", "k_proj", "v_proj")


def with_ignore(src: pathlib.Path, dst: pathlib.Path, ignore: list[str]) -> pathlib.Path:
    """A copy of the quantized draft `src` whose quantization_config.ignore is `ignore`."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"]["ignore"] = ignore
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def failure_cases(kind, work: pathlib.Path, target: pathlib.Path,
                  draft: pathlib.Path) -> list[FailureCase]:
    models, logs = work / "models" / "dflash-qwen3", work / "logs"
    models.mkdir(parents=True, exist_ok=True)
    target_layers = json.loads((target / "config.json").read_text())["num_hidden_layers"]
    draft_layers = range(json.loads((draft / "config.json").read_text())["num_hidden_layers"])
    rtn = models / "draft-w4a16-rtn"
    if not rtn.exists():
        env.quantize(draft, rtn, ["--scheme", "w4a16"], logs)
    target_w4a16 = models / "target-w4a16"
    if not target_w4a16.exists():
        env.quantize(target, target_w4a16, ["--scheme", "w4a16"], logs)
    qkv = env.quantize(draft, models / "draft-w4a16-qkv", ["--scheme", "w4a16", "--preset", "none"],
                       logs)
    local = with_ignore(rtn, models / "draft-ignore-literal-local",
                        [f"layers.{i}.self_attn.{p}" for i in draft_layers
                                       for p in QKV])
    global_ = with_ignore(rtn, models / "draft-ignore-literal-global",
                          [f"model.layers.{target_layers + i}.self_attn.{p}"
                                         for i in draft_layers for p in QKV])
    fused = with_ignore(rtn, models / "draft-ignore-fused-literal",
                        [f"model.layers.{target_layers + i}.self_attn.qkv_proj"
                                       for i in draft_layers])
    shared_cache = work / "vllm-cache" / "dflash-qwen3-shared"

    def case(name, what, d, loaded, error="", tgt=target, **kw):
        return FailureCase(name=f"dflash-qwen3-{name}", what=what, target=tgt, draft=d,
                           spec_config=kind.spec_config(d),
                           check_args=[str(d), "--target", str(tgt)],
                           expect_vllm_loaded=loaded, expect_error=error, **kw)

    compile_env = {"VLLM_CACHE_ROOT": str(shared_cache)}
    return [
        case("qkv-quantized", "q/k/v quantized too (--preset none): vLLM 0.32 projects the context "
             "K/V through the quantized qkv_proj", qkv, True,
             "Using CPUWNA16LinearKernel for CompressedTensorsWNA16"),
        case("ignore-literal-local", "ignore lists checkpoint-local literal names "
             "layers.N.self_attn.{q,k,v}_proj, which match no vLLM module", local, False,
             "'QKVParallelLinear' object has no attribute 'data'"),
        case("ignore-literal-global", f"ignore lists vLLM's literal names model.layers.{target_layers}"
             ".self_attn.{q,k,v}_proj (unfused)", global_, False,
             "'QKVParallelLinear' object has no attribute 'data'"),
        case("ignore-fused-literal", f"ignore lists the fused literal model.layers.{target_layers}"
             ".self_attn.qkv_proj", fused, True),
        case("ignore-regex", "the re: ignore pattern sparkulator writes (control)", rtn, True),
        case("wrong-target", "the BF16-trained draft served on the W4A16 target", draft, True,
             tgt=target_w4a16),
        case("compile-cache-bf16", "first of two: BF16 draft, torch.compile on, shared "
             "VLLM_CACHE_ROOT", draft, True, extra_env=compile_env,
             extra_args=["--no-enforce-eager"]),
        case("compile-cache-w4a16", "second of two: W4A16 draft, same VLLM_CACHE_ROOT as the "
             "BF16 one (the compile cache is not keyed on the draft's quantization)", rtn, True,
             extra_env=compile_env, extra_args=["--no-enforce-eager"]),
    ]
