"""The MoE part of the e2e smoke: the tiny Qwen3-MoE (moe_model.py) with transformers 5's fused 3-D
experts, quantized to W4A16 by sparkulator and served by vLLM's CPU build.

What it records in summary["moe"] and asserts (failures go to summary["failures"]):
- the fused `mlp.experts.gate_up_proj` / `down_proj` became per-expert packed weights and the routers
  stayed dense and ignored (`re:.*mlp\\.gate$`): vLLM 0.32 builds Qwen3-MoE's router with the model's
  quant_config, and without the entry it fails to load ("Output size (8) not supported by
  CPUWNA16");
- vLLM loaded the experts through compressed-tensors' fused-MoE W4A16 method, on its 'CPU' backend
  (the log lines "Using CompressedTensorsWNA16MoEMethod" and "Using 'CPU' WNA16 MoE backend.");
- its greedy tokens are what transformers predicts on `sparkulator dequantize`'s BF16 copy of the
  same checkpoint (the same weights, dequantized), fed the same context: argmax agreement >= 0.9 and
  the median |logprob difference| of the chosen tokens <= 0.1 (teacher_forced; single positions
  move more where the router's top-k is a near-tie: 2.86 was the largest measured).
On a host without AMX vLLM has no CPU W4A16 MoE kernel; the e2e plugin (wna16_fallback/) then
stands in for CPUExpertsInt4's AMX weight packing and expert GEMMs, and the summary says so
(summary["moe"]["experts_kernel"]). Everything else (config parsing, the MoE method and backend
choice, weight loading into w13/w2, routing, top-k) is vLLM's own.

Error policy: as run.py: sparkulator errors raise env.SparkulatorError; assertion failures are
recorded; the server is always stopped.
"""

from __future__ import annotations

import json
import pathlib
import time

from tests.e2e import env, measure, moe_model, server
from tests.e2e.server import Server

MOE_METHOD_LINE = "Using CompressedTensorsWNA16MoEMethod"
MOE_BACKEND_LINE = "Using 'CPU' WNA16 MoE backend."
STANDIN_LINE = "W4A16 experts use the e2e's stand-in"
MIN_AGREEMENT = 0.9
MAX_LOGPROB_DIFF = 0.1  # the median: a near-tie in the router's top-k moves single positions


def served_greedy(q: Server, prompts: list[str], tokens: int) -> list[dict]:
    """vLLM's greedy completions with their prompt ids and the logprob of each chosen token."""
    out = measure.greedy(q, prompts, tokens)
    for o, p in zip(out, prompts):
        r = server.post(q.url + "/v1/completions",
                        {"model": q.name, "prompt": p, "max_tokens": tokens, "temperature": 0,
                         "ignore_eos": True, "logprobs": 1, "return_token_ids": True})
        assert r["choices"][0]["token_ids"] == o["token_ids"], "greedy is not deterministic"
        o["logprobs"] = r["choices"][0]["logprobs"]["token_logprobs"]
    return out


def teacher_forced(model: pathlib.Path, served: list[dict]) -> dict:
    """transformers on `model`, fed each prompt plus vLLM's own tokens in one forward: how often its
    argmax is vLLM's token, and how far its logprob of vLLM's token is from vLLM's. Each position is
    judged on the same context, so one near-tie does not derail the rest of the sequence (as it
    does in free-running greedy decoding of a random model)."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    m = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.bfloat16).eval()
    same = 0
    diffs = []
    with torch.no_grad():
        for s in served:
            ids = torch.tensor([s["prompt_ids"] + s["token_ids"]])
            lp = torch.log_softmax(m(ids).logits[0].float(), dim=-1)
            start = len(s["prompt_ids"]) - 1
            for k, (tok, vllm_lp) in enumerate(zip(s["token_ids"], s["logprobs"])):
                row = lp[start + k]
                same += int(row.argmax().item() == tok)
                diffs.append(abs(row[tok].item() - vllm_lp))
    diffs.sort()
    return {"argmax_agreement": round(same / len(diffs), 4),
            "median_logprob_diff": round(diffs[len(diffs) // 2], 4),
            "max_logprob_diff": round(diffs[-1], 4), "positions": len(diffs)}


def moe_part(run, port: int) -> None:
    t = time.time()
    out = run.summary.setdefault("moe", {})
    src = moe_model.build(run.models / "moe-bf16-fused", "fused")
    w4a16 = run.quantize(src, "moe-w4a16", [])
    deq = run.models / "moe-w4a16-dequantized"
    env.sparkulator("dequantize", w4a16, deq, "--force", log=run.logs / "dequantize-moe.txt")
    qc = json.loads((w4a16 / "config.json").read_text())["quantization_config"]
    out["ignore"] = qc["ignore"]
    if "re:.*mlp\\.gate$" not in qc["ignore"]:
        run.fail(f"MoE: the routers are not in ignore: {qc['ignore']}")
    prompts = measure.held_out_prompts(run.s["prompts"])
    with Server("moe-w4a16", w4a16, port, run.work) as q:
        if not q.wait_healthy(900):
            run.fail(f"vLLM did not start on the W4A16 MoE: {q.root_cause()}")
            return
        served = served_greedy(q, prompts, run.s["tokens"])
    log = q.log_text().splitlines()
    lines = {key: next((l.split("] ", 1)[-1] for l in log if key in l), None)
             for key in (MOE_METHOD_LINE, MOE_BACKEND_LINE, STANDIN_LINE)}
    out["moe_method_log_line"], out["moe_backend_log_line"] = lines[MOE_METHOD_LINE], \
        lines[MOE_BACKEND_LINE]
    out["experts_kernel"] = ("e2e stand-in for CPUExpertsInt4 (no AMX on this CPU)"
                             if lines[STANDIN_LINE] else "vLLM's CPUExpertsInt4")
    if not lines[MOE_METHOD_LINE] or not lines[MOE_BACKEND_LINE]:
        run.fail("MoE: vLLM did not load the experts through the W4A16 fused-MoE CPU path")
    out["teacher_forced_vs_dequantized"] = tf = teacher_forced(deq, served)
    if tf["argmax_agreement"] < MIN_AGREEMENT or tf["median_logprob_diff"] > MAX_LOGPROB_DIFF:
        run.fail(f"MoE: vLLM's W4A16 tokens against transformers on the dequantized weights: {tf} "
                 f"(want argmax agreement >= {MIN_AGREEMENT}, median logprob diff <= {MAX_LOGPROB_DIFF})")
    out["wna16_fallback"] = server.wna16_fallback_needed()
    run.timed("moe", t)
