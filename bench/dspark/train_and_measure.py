"""DSpark draft for the e2e suite's tiny Qwen3 target: trained with speculators' own DSparkDraftModel
on CPU, quantized by sparkulator (default W4A16), and measured offline, BF16 vs W4A16.

Run with the bench venv (speculators 0.9.0; never the project's .venv):
  ~/.cache/sparkulator/venv-bench-dspark/bin/python bench/dspark/train_and_measure.py [--steps N]

Acceptance is speculators' own eval-mode metrics of the same model on held-out target greedy text,
once with the BF16 weights and once with the W4A16 output decompressed by `sparkulator dequantize`.
vLLM 0.32's CPU build refuses to serve DSpark; the script records its refusal line.

Error policy: any failure raises; the summary JSON is printed only at the end.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.e2e import corpus  # noqa: E402
from tests.e2e.dflash_qwen3 import _greedy_sequences, load_target  # noqa: E402

BLOCK, MARKOV_RANK, LAYER_IDS = 4, 32, [0, 1]
IMPL = "eager"


def spk_binary() -> str:
    for p in (ROOT / "build/sparkulator", pathlib.Path("/work/main/build/sparkulator")):
        if p.is_file():
            return str(p)
    raise SystemExit("no sparkulator binary (build/sparkulator)")


def features(model, ids):
    """Aux hidden states (output of each layer in LAYER_IDS, concatenated) and the last hidden."""
    import torch
    out = model(input_ids=ids, output_hidden_states=True)
    hs = out.hidden_states  # [embeddings, layer0, layer1 (normed? no: pre-norm residual)]
    aux = torch.cat([hs[i + 1] for i in LAYER_IDS], -1)
    return aux, hs[-1]


def pack(model, seqs, prompt_len):
    """Packs sequences into one row as speculators' trainer does (document ids, loss on outputs)."""
    import torch
    with torch.no_grad():
        aux, last = zip(*(features(model, c) for c in seqs.split(32)))
    aux, last = torch.cat(aux), torch.cat(last)
    b, S = seqs.shape
    loss_mask = torch.zeros(b, S, dtype=torch.long)
    loss_mask[:, prompt_len:] = 1
    return {"hidden_states": aux.reshape(1, b * S, -1), "input_ids": seqs.reshape(1, -1),
            "loss_mask": loss_mask.reshape(1, -1),
            "verifier_last_hidden_states": last.reshape(1, b * S, -1),
            "document_ids": torch.arange(b).repeat_interleave(S)[None],
            "position_ids": torch.arange(S).repeat(b)[None]}


def build(target: pathlib.Path):
    from transformers import AutoConfig
    from speculators.models.dspark import DSparkDraftModel
    cfg = AutoConfig.from_pretrained(str(target))
    cfg.num_hidden_layers = 1
    if getattr(cfg, "layer_types", None):  # else vLLM refuses the config: 1 layer, 2 layer_types
        cfg.layer_types = cfg.layer_types[:1]
    return DSparkDraftModel.from_training_args(
        cfg, verifier_name_or_path=str(target), target_layer_ids=LAYER_IDS, block_size=BLOCK,
        markov_rank=MARKOV_RANK, draft_vocab_size=cfg.vocab_size, mask_token_id=corpus.MASK_ID,
        draft_attn_impl="sdpa")


def trainer_kwargs():
    """speculators' own DSpark loss, in its plain-torch implementation (the fused one is Triton)."""
    from speculators.models.dspark import DSparkDraftModel
    train, _ = DSparkDraftModel.get_trainer_kwargs(loss_fn="kl_div", loss_implementation=IMPL,
                                                   max_anchors=64)
    return train


def evaluate(model, batch, anchors):
    import torch
    model.eval()
    torch.manual_seed(7)  # the same anchors for every checkpoint measured
    with torch.no_grad():
        _, loss, metrics = model(**batch, **dict(trainer_kwargs(), max_anchors=anchors))
    m = {k: float(v) for k, v in metrics.items()}
    out = {"loss": float(loss)}
    for k in m:
        if k.endswith("_sum") and k[:-4] + "_total" in m:
            out[k[:-4]] = m[k] / max(m[k[:-4] + "_total"], 1.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path(tempfile.mkdtemp()))
    a = ap.parse_args()
    import torch
    torch.manual_seed(1)
    t0 = time.time()
    target = sorted(pathlib.Path.home().glob(".cache/sparkulator/e2e/qwen3-target-*"))[-1]
    tm = load_target(target)
    p = {"seed": 1, "sequences": 160, "prompt_tokens": 48, "new_tokens": 80}
    seqs = _greedy_sequences(tm, p)
    train, held = seqs[:128], seqs[128:]
    model = build(target)
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=2e-3)
    gen = torch.Generator().manual_seed(1)
    held_batch = pack(tm, held, p["prompt_tokens"])
    for step in range(a.steps):
        rows = torch.randint(0, len(train), (8,), generator=gen)
        model.train()
        _, loss, m = model(**pack(tm, train[rows], p["prompt_tokens"]), **trainer_kwargs())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
    train_s = time.time() - t0
    bf16 = a.out / "dspark-bf16"
    model.to(torch.bfloat16).save_pretrained(str(bf16))
    name_the_architecture(bf16)
    spk = spk_binary()
    run = lambda *args: subprocess.run([spk, *map(str, args)], capture_output=True, text=True)
    plan = run("inspect", bf16, "--vllm-version", "0.32.0")
    w4 = a.out / "dspark-w4a16"
    quant = run("quantize", bf16, w4, "--vllm-version", "0.32.0")
    check = run("check", w4, "--vllm-version", "0.32.0")
    deq = a.out / "dspark-w4a16-dequantized"
    run("dequantize", w4, deq).check_returncode()
    stats = {}
    for label, folder in (("bf16", bf16), ("w4a16", deq)):
        load_dense(model, folder)
        stats[label] = evaluate(model.float(), held_batch, 256)
    serve = {label: try_serve(target, folder) for label, folder in (("bf16", bf16), ("w4a16", w4))}
    summary = {"train_s": round(train_s, 1), "steps": a.steps, "total_s": round(time.time() - t0, 1),
               "out": str(a.out), "plan_ignore": [l for l in plan.stdout.splitlines() if l.startswith("ignore:")],
               "serve_line": [l for l in plan.stdout.splitlines() if l.startswith("serve with")],
               "quantize_rc": quant.returncode, "check_rc": check.returncode,
               "check_tail": check.stdout.strip().splitlines()[-3:], "metrics": stats,
               "accept_len_ratio_w4a16_over_bf16":
                   stats["w4a16"]["accept_len"] / stats["bf16"]["accept_len"],
               "vllm_0.32_cpu": serve}
    print(json.dumps(summary, indent=1))


def name_the_architecture(folder: pathlib.Path) -> None:
    """speculators writes architectures ["DSparkDraftModel"] (its training-only name, which is also
    vLLM's DeepSeek-V4 DSpark class); vLLM's speculators reader builds Qwen3DSparkModel for it and
    keeps that name when the config already carries it. Naming it makes sparkulator's map lookup
    pick the architecture vLLM builds."""
    cfg = json.loads((folder / "config.json").read_text())
    cfg["architectures"] = ["Qwen3DSparkModel"]
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))


def load_dense(model, folder: pathlib.Path) -> None:
    import torch
    from safetensors.torch import load_file
    state = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise SystemExit(f"{folder}: unexpected tensors {unexpected}")
    print(f"loaded {folder.name}: {len(state)} tensors, not in file: {missing}", flush=True)


def try_serve(target: pathlib.Path, draft: pathlib.Path) -> str:
    vllm = pathlib.Path("/work/main/.venv-vllm/bin/vllm")
    spec = json.dumps({"method": "dspark", "model": str(draft), "num_speculative_tokens": BLOCK})
    try:
        p = subprocess.run([str(vllm), "serve", str(target), "--speculative-config", spec,
                            "--port", "18733"], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return "still starting after 240 s (not refused)"
    lines = [l for l in (p.stdout + p.stderr).splitlines() if "Error" in l or "does not support" in l]
    return lines[-1] if lines else f"exit {p.returncode}"


if __name__ == "__main__":
    main()
