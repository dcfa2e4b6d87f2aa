"""The MoE part of the e2e smoke: two tiny MoE models made with transformers (moe_model.py), quantized
to W4A16 by sparkulator and served by vLLM's CPU build.

Qwen3-MoE with transformers 5's fused 3-D experts (`moe_part`, summary["moe"]):
- the fused `mlp.experts.gate_up_proj` / `down_proj` became per-expert packed weights and the routers
  stayed dense and ignored (`re:.*mlp\\.gate$`): vLLM 0.32 builds Qwen3-MoE's router with the model's
  quant_config, and without the entry it fails to load ("Output size (8) not supported by
  CPUWNA16").
Laguna with a dense first layer and two MoE layers (`laguna_moe_part`, summary["laguna_moe"]):
- the router `mlp.gate` stays dense BF16 (vLLM's LagunaMoE builds GateLinear without quant_config),
  `mlp.experts.e_score_correction_bias` is copied bit for bit (F32), the shared expert and every
  routed expert are packed;
- a copy whose routers are packed (what model_free_ptq writes without a router ignore entry) does
  not load on vLLM, and `sparkulator check` says quantized-router (cases.run_case: they agree;
  the full run and the command below, not the smoke, to keep CI short).
For both:
- vLLM loaded the experts through compressed-tensors' fused-MoE W4A16 method, on its 'CPU' backend
  (the log lines "Using CompressedTensorsWNA16MoEMethod" and "Using 'CPU' WNA16 MoE backend.");
- its greedy tokens are what transformers predicts on `sparkulator dequantize`'s BF16 copy of the
  same checkpoint (the same weights, dequantized), fed the same context: argmax agreement up to a
  BF16 near-tie >= 0.9 and the median |logprob difference| of the chosen tokens <= 0.1
  (teacher_forced; single positions move more where the router's top-k is a near-tie: 4.41 was the
  largest measured on Qwen3-MoE).
  For Laguna the same is also recorded against the unquantized BF16 model (the quantization error,
  asserted loosely: LAGUNA_MIN_AGREEMENT_VS_BF16).
On a host without AMX vLLM has no CPU W4A16 MoE kernel; the e2e plugin (wna16_fallback/) stands
in for CPUExpertsInt4's AMX weight packing and expert GEMMs, there and (unless
SPK_E2E_MOE_EXPERTS=vllm) on AMX hosts too, so every host gets the same verdict (spk_e2e_wna16.py
gives what vLLM's own AMX experts did on one), and the summary says so
(summary[...]["experts_kernel"]). Everything else (config parsing, the MoE method and backend
choice, weight loading into w13/w2, routing with Laguna's sigmoid scores and correction bias,
top-k) is vLLM's own.

  python -m tests.e2e.moe_run laguna --work W [--port P] [--smoke]
        the Laguna part alone (with --smoke as the smoke runs it, without the router-quantized copy)

Error policy: as run.py: sparkulator errors raise env.SparkulatorError; assertion failures are
recorded; the server is always stopped.
"""
from __future__ import annotations

import json
import pathlib
import threading
import time

from tests.e2e import env, measure, moe_model, server
from tests.e2e.server import Server

MOE_METHOD_LINE = "Using CompressedTensorsWNA16MoEMethod"
MOE_BACKEND_LINE = "Using 'CPU' WNA16 MoE backend."
STANDIN_LINE = "W4A16 experts use the e2e's stand-in"
MIN_AGREEMENT = 0.9
# A random model's next-token distribution is nearly flat, so its top two logits are often equal or
# a few BF16 steps apart, and which of them wins moves with the GEMMs' accumulation order (AMX tiles,
# oneDNN or vLLM's own kernels; measured on a Sapphire Rapids host: 3 of 96 positions exact ties, 6
# more 1-7 steps of 1/32 apart, strict agreement 0.875; on an AVX-512 host without AMX 0.99). Such a
# position agrees when transformers' logprob of vLLM's token is within NEAR_TIE of its best: 8 BF16
# steps at these logit magnitudes. A flipped router top-k moves a token by 2-4.4 nats, far outside.
NEAR_TIE = 0.25
MAX_LOGPROB_DIFF = 0.1  # the median: a near-tie in the router's top-k moves single positions
LINEAR_KERNEL_LINE = "for CompressedTensorsWNA16"
ROUTING_STANDIN_LINE = "it runs through vLLM's _grouped_topk with one group instead"
BIAS_STANDIN_LINE = "drops mlp.experts.e_score_correction_bias (Laguna MoE); the e2e loads it"
# Against the unquantized BF16 model the W4A16 rounding itself moves most argmaxes of a random model
# (no margins: 0.31 measured, docs/moe.md); far above chance (1/2048), so a wrong expert mapping or
# routing, which leaves nothing of the model's choices, still fails. The tight check is the one
# against the dequantized weights above.
LAGUNA_MIN_AGREEMENT_VS_BF16 = 0.15
ROUTER_ERROR = "There is no module or parameter named 'layers.1.mlp.gate.weight_packed'"


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


# The smoke runs both parts at once (run.Run.together), and torch's state is per process: the
# random models are built one at a time, so that each seeds and draws torch's global generator alone
# and gets the same weights; and models are loaded one at a time, because transformers'
# from_pretrained(dtype=...) sets torch's default dtype for the whole process while it builds the
# model: two loads at once can each restore the other's default mid-build and leave a model with
# F32 norms beside BF16 Linears ("expected m1 and m2 to have the same dtype, but got: float !=
# c10::BFloat16", seen on a cold CI run).
_BUILD = threading.Lock()


def teacher_forced(model: pathlib.Path, served: list[dict]) -> dict:
    """transformers on `model`, fed each prompt plus vLLM's own tokens in one forward: how often its
    argmax is vLLM's token (strictly, and up to a NEAR_TIE), and how far its logprob of vLLM's token
    is from vLLM's. Each position is judged on the same context, so one near-tie does not derail the
    rest of the sequence (as it does in free-running greedy decoding of a random model); the gaps of
    the positions that disagree strictly are listed, so a failure shows whether they were ties."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    with _BUILD:
        m = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.bfloat16).eval()
    same = 0
    diffs = []
    gaps = []  # transformers' best logprob minus its logprob of vLLM's token, where they differ
    with torch.no_grad():
        for s in served:
            ids = torch.tensor([s["prompt_ids"] + s["token_ids"]])
            lp = torch.log_softmax(m(ids).logits[0].float(), dim=-1)
            start = len(s["prompt_ids"]) - 1
            for k, (tok, vllm_lp) in enumerate(zip(s["token_ids"], s["logprobs"])):
                row = lp[start + k]
                if row.argmax().item() == tok:
                    same += 1
                else:
                    gaps.append(round(row.max().item() - row[tok].item(), 4))
                diffs.append(abs(row[tok].item() - vllm_lp))
    diffs.sort()
    near = same + sum(g <= NEAR_TIE for g in gaps)
    return {"argmax_agreement": round(same / len(diffs), 4),
            "near_tie_agreement": round(near / len(diffs), 4), "disagreeing_gaps": sorted(gaps),
            "median_logprob_diff": round(diffs[len(diffs) // 2], 4),
            "max_logprob_diff": round(diffs[-1], 4), "positions": len(diffs)}


def serve_w4a16(run, out: dict, label: str, src: pathlib.Path, name: str, port: int,
                extra_env: dict | None = None) -> tuple[pathlib.Path, list[dict]] | None:
    """Quantizes `src` to W4A16 and dequantizes it again, serves the W4A16 copy, records the MoE
    log lines in `out` and asserts them (as `label`); returns (the W4A16 folder, vLLM's greedy
    tokens with logprobs), or None when vLLM did not start."""
    w4a16 = run.quantize(src, name, [])
    deq = run.models / f"{name}-dequantized"
    env.sparkulator("dequantize", w4a16, deq, "--force", log=run.logs / f"dequantize-{name}.txt")
    out["ignore"] = json.loads((w4a16 / "config.json").read_text())["quantization_config"]["ignore"]
    if "re:.*mlp\\.gate$" not in out["ignore"]:
        run.fail(f"{label}: the routers are not in ignore: {out['ignore']}")
    prompts = measure.held_out_prompts(run.s["prompts"])
    with Server(name, w4a16, port, run.work, extra_env=extra_env) as q:
        if not q.wait_healthy(900):
            run.fail(f"vLLM did not start on the W4A16 {label}: {q.root_cause()}")
            return None
        served = served_greedy(q, prompts, run.s["tokens"])
    log = q.log_text().splitlines()
    lines = {key: next((l.split("] ", 1)[-1] for l in log if key in l), None)
             for key in (MOE_METHOD_LINE, MOE_BACKEND_LINE, STANDIN_LINE, LINEAR_KERNEL_LINE,
                         ROUTING_STANDIN_LINE, BIAS_STANDIN_LINE)}
    out["moe_method_log_line"], out["moe_backend_log_line"] = lines[MOE_METHOD_LINE], \
        lines[MOE_BACKEND_LINE]
    out["linear_kernel_log_line"] = lines[LINEAR_KERNEL_LINE]
    out["experts_kernel"] = ("e2e stand-in for CPUExpertsInt4 (spk_e2e_wna16.py says why)"
                             if lines[STANDIN_LINE] else "vLLM's CPUExpertsInt4")
    out["wna16_fallback"] = server.wna16_fallback_needed()
    out["routing_standin_log_line"] = lines[ROUTING_STANDIN_LINE]
    out["bias_standin_log_line"] = lines[BIAS_STANDIN_LINE]
    if not lines[MOE_METHOD_LINE] or not lines[MOE_BACKEND_LINE]:
        run.fail(f"{label}: vLLM did not load the experts through the W4A16 fused-MoE CPU path")
    out["teacher_forced_vs_dequantized"] = tf = teacher_forced(deq, served)
    if tf["near_tie_agreement"] < MIN_AGREEMENT or tf["median_logprob_diff"] > MAX_LOGPROB_DIFF:
        run.fail(f"{label}: vLLM's W4A16 tokens against transformers on the dequantized weights: "
                 f"{tf} (want argmax agreement up to a {NEAR_TIE}-nat tie >= {MIN_AGREEMENT}, "
                 f"median logprob diff <= {MAX_LOGPROB_DIFF})")
    # What the same measure gives weights that differ (the W4A16 rounding): the margin the check
    # above has over a comparison that is wrong.
    out["teacher_forced_vs_bf16"] = teacher_forced(src, served)
    return w4a16, served


def moe_part(run, port: int) -> None:
    t = time.time()
    with _BUILD:
        src = moe_model.build(run.models / "moe-bf16-fused", "fused")
    # The plugin on every host: without AMX vLLM 0.32 has no CPU W4A16 MoE kernel, AVX-512 or not
    # (it only fills the gaps it finds in the installed vLLM).
    serve_w4a16(run, run.summary.setdefault("moe", {}), "MoE", src, "moe-w4a16", port,
                server.plugin_env())
    run.timed("moe", t)


def laguna_tensors(src: pathlib.Path, w4a16: pathlib.Path) -> dict:
    """What became of the Laguna MoE layers' tensors: routers dense and unchanged, correction bias
    bit for bit, shared and routed experts packed, the dense layer's MLP packed."""
    from safetensors.torch import load_file
    a, b = load_file(str(src / "model.safetensors")), load_file(str(w4a16 / "model.safetensors"))
    moe = [i for i, t in enumerate(moe_model.LAGUNA_LAYER_TYPES) if t == "sparse"]
    dense = [i for i, t in enumerate(moe_model.LAGUNA_LAYER_TYPES) if t == "dense"]
    mlp = "model.layers.{}.mlp."
    return {
        "routers_dense_unchanged": all(b[mlp.format(i) + "gate.weight"].equal(a[mlp.format(i) + "gate.weight"])
                                       for i in moe),
        "correction_bias_kept": all(
            b[k].dtype == a[k].dtype and b[k].equal(a[k])
            for k in (mlp.format(i) + "experts.e_score_correction_bias" for i in moe)),
        "packed_experts": sum(k.endswith(".weight_packed") and ".mlp.experts." in k for k in b),
        "packed_shared_expert": sum(k.endswith(".weight_packed") and ".mlp.shared_expert." in k
                                    for k in b),
        "packed_dense_mlp": sum(mlp.format(i) + f"{p}_proj.weight_packed" in b
                                for i in dense for p in ("gate", "up", "down")),
    }


def quantized_router_copy(w4a16: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A copy of the W4A16 Laguna MoE whose routers are packed as model_free_ptq packs them without
    a router ignore entry (weight_packed / weight_scale / weight_shape; the values do not matter:
    vLLM stops at loading the names, test_moe_interop.py shows the reference's real bytes)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(w4a16, dst)
    path = dst / "model.safetensors"
    t = load_file(str(path))
    for name in [k for k in t if k.endswith(".mlp.gate.weight")]:
        rows, cols = t.pop(name).shape
        base = name.removesuffix(".weight")
        t[base + ".weight_packed"] = torch.zeros((rows, cols // 8), dtype=torch.int32)
        t[base + ".weight_scale"] = torch.ones((rows, cols // 128), dtype=torch.bfloat16)
        t[base + ".weight_shape"] = torch.tensor([rows, cols])
    save_file(t, str(path), metadata={"format": "pt"})
    return dst


def laguna_moe_part(run, port: int, router_case: bool) -> None:
    """router_case: also serve the router-quantized copy (a second vLLM start, ~1-2 minutes: the
    full run and `python -m tests.e2e.moe_run laguna` do, the smoke leaves it to check's tests)."""
    from tests.e2e import cases
    t = time.time()
    out = run.summary.setdefault("laguna_moe", {})
    with _BUILD:
        src = moe_model.build_laguna(run.models / "laguna-moe-bf16")
    got = serve_w4a16(run, out, "Laguna MoE", src, "laguna-moe-w4a16", port, server.plugin_env())
    if got is None:
        return
    w4a16, served = got
    out["tensors"] = tensors = laguna_tensors(src, w4a16)
    moe_layers = moe_model.LAGUNA_LAYER_TYPES.count("sparse")
    want = {"routers_dense_unchanged": True, "correction_bias_kept": True,
            "packed_experts": moe_layers * moe_model.EXPERTS * 3,
            "packed_shared_expert": moe_layers * 3,
            "packed_dense_mlp": 3 * moe_model.LAGUNA_LAYER_TYPES.count("dense")}
    if tensors != want:
        run.fail(f"Laguna MoE: tensors {tensors}, want {want}")
    if not out["linear_kernel_log_line"]:
        run.fail("Laguna MoE: no W4A16 linear kernel line (the shared expert and attention)")
    tf = out["teacher_forced_vs_bf16"]
    if tf["argmax_agreement"] < LAGUNA_MIN_AGREEMENT_VS_BF16:
        run.fail(f"Laguna MoE: vLLM's W4A16 tokens against transformers on the BF16 model: {tf} "
                 f"(want argmax agreement >= {LAGUNA_MIN_AGREEMENT_VS_BF16})")
    if not router_case:
        run.timed("laguna_moe", t)
        return
    broken = quantized_router_copy(w4a16, run.models / "laguna-moe-router-quantized")
    case = cases.FailureCase(
        name="laguna-moe-router-quantized", what="the Laguna MoE routers packed (W4A16)",
        target=broken, draft=None, spec_config=None, check_args=[str(broken)],
        expect_vllm_loaded=False, expect_error=ROUTER_ERROR, extra_env=server.plugin_env())
    out["router_quantized"] = r = cases.run_case(case, run.work, port)
    if not r["as_expected"] or not r["agree"] or "quantized-router" not in r["check_codes"]:
        run.fail(f"Laguna MoE router-quantized copy: vLLM loaded={r['vllm_loaded']} "
                 f"({r['vllm_error']}), check {r['check_exit']} {r['check_codes']}")
    run.timed("laguna_moe", t)


def main() -> None:
    import argparse

    from tests.e2e import run as e2e_run
    ap = argparse.ArgumentParser(description="The Laguna MoE part of the e2e smoke, alone.")
    ap.add_argument("part", choices=["laguna", "qwen3"])
    ap.add_argument("--work", type=pathlib.Path, required=True)
    ap.add_argument("--port", type=int, default=e2e_run.PORT + e2e_run.LAGUNA_MOE_PORT_OFFSET)
    ap.add_argument("--smoke", action="store_true",
                    help="as the smoke runs it: without the router-quantized copy")
    a = ap.parse_args()
    server.install_exit_handlers()
    run = e2e_run.Run(a.work, smoke=True, cache=None)
    if a.part == "laguna":
        laguna_moe_part(run, a.port, router_case=not a.smoke)
    else:
        moe_part(run, a.port)
    print(json.dumps(run.summary, indent=1))
    run.write()
    raise SystemExit(1 if run.summary["failures"] else 0)


if __name__ == "__main__":
    main()
