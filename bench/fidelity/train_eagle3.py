"""EAGLE-3 head for the fidelity target, trained on CPU with speculators 0.9.0's own
Eagle3DraftModel (its forward, test-time-training unroll, KL loss and metrics) on the target's
self-distilled responses and the target's hidden states, in process (speculators' CLI trainer
wants vLLM-extracted data and a GPU; the model and loss are the same).

  python bench/fidelity/train_eagle3.py [--hours H] [--steps N] [--eval-every N]
Run with the speculators venv. Prints the head folder (speculators format, loads in vLLM).

Pieces, each cached by content hash under ~/.cache/sparkulator/fidelity/:
- features-<hash>/<sha of the conversation>.pt: the target's states for one distilled
  conversation (transformers, BF16): the residual stream entering target layers AUX_IDS (vLLM's
  aux ids: id k is what layer k reads, k=0 the embeddings), the last layer's output before the final
  norm (speculators' verifier_last_hidden_states), the token ids and the assistant-token mask.
- eagle3-<hash>/: checkpoint.pt (model, optimizer, step, data order: a killed run resumes at its
  last checkpoint), curve.jsonl (train loss per step, held-out metrics every --eval-every steps),
  head/ (the latest saved head, written at every eval).
The held-out metrics are speculators' per-step conditional accuracies on held-out conversations;
their offline acceptance length is 1 + sum_k prod_{j<=k} cond_acc_j (k = 1..ttt steps).

Error policy: any failure raises; features of a conversation that does not tokenize to a
non-empty assistant part are skipped and counted in curve.jsonl's first line.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402
import distill  # noqa: E402
import make_target  # noqa: E402
import prompts as prompts_mod  # noqa: E402

AUX_IDS = [2, 15, 27]      # speculators' and vLLM's default for 30 layers: [2, L // 2, L - 3]
MAX_LEN = 1024             # tokens per conversation kept (prompt + response)
PACK = 2048                # tokens per packed training row
PARAMS = {"draft_vocab": 8192, "ttt_steps": 3, "lr": 1e-3, "weight_decay": 0.01,
          "warmup": 50, "loss": "kl_div", "layers": 1, "seed": 1, "pack": PACK}


def features_dir(target: pathlib.Path) -> pathlib.Path:
    return common.CACHE / f"features-{common.key(target.name, AUX_IDS, MAX_LEN, 'v1')}"


def conversation_features(model, tok, conv: dict):
    """Token ids, assistant mask, aux states and pre-norm last states of one conversation."""
    import torch
    msgs = conv["messages"]
    full = tok.apply_chat_template(msgs, tokenize=True, return_dict=False)
    ids = torch.tensor(full[:MAX_LEN])[None]
    mask = torch.zeros_like(ids)
    if len(msgs) > 1:  # a distilled conversation: the loss is on the target's own answer
        head = tok.apply_chat_template(msgs[:1], tokenize=True, add_generation_prompt=True,
                                       return_dict=False)
        mask[0, len(head):] = 1
    else:  # a prompt alone: the target's next-token distribution over the user's text
        mask[0, :] = 1
    if mask.sum() == 0:
        return None
    caught: dict = {}
    hooks = [model.model.layers[k].register_forward_pre_hook(
        lambda m, a, k=k: caught.__setitem__(k, a[0])) for k in AUX_IDS]
    hooks.append(model.model.norm.register_forward_pre_hook(
        lambda m, a: caught.__setitem__("last", a[0])))
    try:
        with torch.no_grad():
            model.model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    aux = torch.cat([caught[k] for k in AUX_IDS], -1).to(torch.bfloat16)
    return {"input_ids": ids[0], "loss_mask": mask[0], "aux": aux[0],
            "last": caught["last"].to(torch.bfloat16)[0]}


def make_features(target: pathlib.Path, conversations: list[dict]) -> list[pathlib.Path]:
    """The features file of each conversation, computing those not cached yet."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    out = features_dir(target)
    out.mkdir(parents=True, exist_ok=True)
    paths, model, tok, t0 = [], None, None, time.time()
    for i, conv in enumerate(conversations):
        p = out / (common.key(conv["messages"]) + ".pt")
        if not p.is_file():
            if model is None:
                tok = AutoTokenizer.from_pretrained(str(target))
                model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.bfloat16)
                model.eval()
            f = conversation_features(model, tok, conv)
            if f is None:
                continue
            torch.save(f, str(p) + ".tmp")
            pathlib.Path(str(p) + ".tmp").rename(p)
            if i % 100 == 0:
                print(f"features {i}/{len(conversations)} {time.time() - t0:.0f} s", flush=True)
        paths.append(p)
    return paths


def pack(files: list[pathlib.Path]) -> dict:
    """Concatenates conversations into one row as speculators' trainer does: each conversation
    first aligned by speculators' own `shift_batch` (token x_{t+1} with the target's states g_t and
    the target's next states y_{t+1}: what vLLM feeds the head when it drafts), then document ids
    and positions restarting per conversation. Without the shift the head learns to predict the
    token it is given: the first run's offline acceptance 2.07 served as 1.14 (docs/fidelity.md)."""
    import torch
    from speculators.models.eagle3.data import shift_batch
    fs = []
    for f in files:
        d = torch.load(f)
        n = len(d["input_ids"])
        fs.append(shift_batch({"input_ids": d["input_ids"], "hidden_states": d["aux"],
                               "verifier_last_hidden_states": d["last"],
                               "loss_mask": d["loss_mask"], "lengths": torch.tensor([n]),
                               "position_ids": torch.arange(n)}))
    return {"hidden_states": torch.cat([f["hidden_states"] for f in fs])[None].float(),
            "input_ids": torch.cat([f["input_ids"] for f in fs])[None],
            "loss_mask": torch.cat([f["loss_mask"] for f in fs])[None],
            "verifier_last_hidden_states":
                torch.cat([f["verifier_last_hidden_states"] for f in fs])[None].float(),
            "document_ids": torch.cat([torch.full((len(f["input_ids"]),), i)
                                       for i, f in enumerate(fs)])[None],
            "position_ids": torch.cat([f["position_ids"] for f in fs])[None]}


def rows(files: list[pathlib.Path], lengths: dict, rng: random.Random) -> list[list]:
    """Groups the files (shuffled) into rows of at most PACK tokens."""
    order = list(files)
    rng.shuffle(order)
    out, cur, n = [], [], 0
    for f in order:
        if cur and n + lengths[f] > PACK:
            out.append(cur)
            cur, n = [], 0
        cur.append(f)
        n += lengths[f]
    return out + ([cur] if cur else [])


def build_model(target: pathlib.Path, train_files: list[pathlib.Path]):
    import torch
    from transformers import AutoConfig
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution
    cfg = AutoConfig.from_pretrained(str(target))
    freq: dict = {}
    for f in train_files:  # the draft vocab: the most frequent tokens of the target's answers
        d = torch.load(f)
        for t in d["input_ids"][d["loss_mask"].bool()].tolist():
            freq[t] = freq.get(t, 0) + 1
    d2t, t2d = build_vocab_mappings_from_distribution(freq, PARAMS["draft_vocab"], cfg.vocab_size)
    cfg.num_hidden_layers = PARAMS["layers"]
    return Eagle3DraftModel.from_training_args(
        cfg, t2d=t2d, d2t=d2t, verifier_name_or_path=str(target), target_layer_ids=AUX_IDS,
        draft_vocab_size=PARAMS["draft_vocab"], norm_before_residual=True,
        ttt_steps=PARAMS["ttt_steps"], draft_attn_impl="sdpa")


def trainer_kwargs():
    from speculators.models.eagle3 import Eagle3DraftModel
    train, _ = Eagle3DraftModel.get_trainer_kwargs(
        loss_fn=PARAMS["loss"], loss_implementation="eager", ttt_steps=PARAMS["ttt_steps"],
        ttt_step_loss_decay=1.0)
    return train


def evaluate(model, held_rows: list[list]) -> dict:
    """speculators' metrics summed over the held-out rows; offline acceptance length."""
    import torch
    model.eval()
    sums: dict = {}
    with torch.no_grad():
        for r in held_rows:
            _, _, m = model(**pack(r), **trainer_kwargs())
            for k, v in m.items():
                sums[k] = sums.get(k, 0.0) + float(v)
    model.train()
    out, run, al = {}, 1.0, 1.0
    for k in range(PARAMS["ttt_steps"]):
        c = sums[f"cond_acc_{k}_sum"] / max(sums[f"cond_acc_{k}_total"], 1.0)
        out[f"cond_acc_{k}"] = round(c, 4)
        out[f"full_acc_{k}"] = round(sums[f"full_acc_{k}_sum"] / max(sums[f"full_acc_{k}_total"], 1.0), 4)
        run *= c
        al += run
    out["offline_accept_len"] = round(al, 4)
    out["loss"] = round(sums["loss_sum"] / max(sums["loss_total"], 1.0), 4)
    return out


def save_head(model, dest: pathlib.Path) -> None:
    tmp = dest.parent / (dest.name + ".tmp")
    model.save_pretrained(str(tmp))
    cfg = json.loads((tmp / "config.json").read_text())
    # A 1-layer draft: keep the per-layer lists the target's config carried consistent with it.
    tl = cfg.get("transformer_layer_config", {})
    if isinstance(tl.get("layer_types"), list):
        tl["layer_types"] = tl["layer_types"][:PARAMS["layers"]]
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    # BF16 on disk, as a served head is (the trainer keeps fp32 master weights).
    from safetensors.torch import load_file, save_file
    import torch
    for f in tmp.glob("*.safetensors"):
        t = load_file(str(f))
        save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in t.items()},
                  str(f), metadata={"format": "pt"})
    cfg["dtype"] = "bfloat16"
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    import shutil
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=8.0, help="stop after this much wall time")
    ap.add_argument("--steps", type=int, default=100000, help="stop at this step")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-only", type=int, default=600,
                    help="training prompts not distilled yet that join as prompt-only text")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    target = make_target.build()
    tr = distill.out_dir(target, prompts_mod.build() / "train.jsonl", distill.MAX_TOKENS) / "train.jsonl"
    he = distill.out_dir(target, prompts_mod.build() / "held_out.jsonl", distill.MAX_TOKENS) / "held_out.jsonl"
    # The run trains on the distilled answers present when it first starts (their hash names it);
    # a rerun after more answers arrived starts a new run rather than mixing data sets.
    train_convs = [json.loads(x) for x in open(tr)] if tr.is_file() else []
    # Prompts not distilled yet join as prompt-only text (the KL target is the target's own
    # distribution at each position, so real prompt text teaches the draft too, if less well
    # than the target's answers, which are what it sees when serving).
    have = {c["id"] for c in train_convs}
    # Both in a fixed hash order (distill.py's): a smaller --prompt-only takes a prefix, and the
    # features are computed in that order, so a cut-short run's cache serves the next one.
    extra = sorted((json.loads(x) for x in open(prompts_mod.build() / "train.jsonl")),
                   key=lambda c: common.key(c["id"]))
    train_convs += [c for c in extra if c["id"] not in have][:a.prompt_only]
    train_convs.sort(key=lambda c: common.key(c["id"]))
    # 32 held-out conversations in the hash order (a source mixture): eval costs scarce CPU time.
    held_convs = sorted((json.loads(x) for x in open(he)), key=lambda c: common.key(c["id"]))[:32]
    run = common.CACHE / ("eagle3-" + common.key(target.name, PARAMS, AUX_IDS,
                                                 common.key(train_convs),
                                                 common.source_digest("train_eagle3.py")))
    run.mkdir(parents=True, exist_ok=True)
    print(f"run {run}: {len(train_convs)} train, {len(held_convs)} held-out conversations", flush=True)
    train_files = make_features(target, train_convs)
    held_files = make_features(target, held_convs)
    lengths = {f: int(torch.load(f)["input_ids"].numel()) for f in train_files + held_files}
    held_rows = rows(held_files, lengths, random.Random(0))
    torch.manual_seed(PARAMS["seed"])
    model = build_model(target, train_files)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=PARAMS["lr"], weight_decay=PARAMS["weight_decay"])
    step, epoch, pos, ck = 0, 0, 0, run / "checkpoint.pt"  # pos: rows done in this epoch
    if ck.is_file():
        state = torch.load(ck, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, epoch, pos = state["step"], state["epoch"], state["pos"]
        print(f"resumed at step {step}", flush=True)
    curve = open(run / "curve.jsonl", "a")
    if step == 0:
        curve.write(json.dumps({"params": PARAMS, "train_conversations": len(train_files),
                                "distilled": len(have), "prompt_only": len(train_files) - len(have),
                                "held_out_conversations": len(held_files),
                                "train_tokens": sum(lengths[f] for f in train_files)}) + "\n")
        curve.write(json.dumps({"step": 0, "eval": evaluate(model, held_rows)}) + "\n")
        curve.flush()
    t0 = time.time()
    while step < a.steps and time.time() - t0 < a.hours * 3600:
        order = rows(train_files, lengths, random.Random(PARAMS["seed"] * 1000 + epoch))
        for r in order[pos:]:
            lr = PARAMS["lr"] * min(1.0, (step + 1) / PARAMS["warmup"])
            for g in opt.param_groups:
                g["lr"] = lr
            _, loss, m = model(**pack(r), **trainer_kwargs())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step, pos = step + 1, pos + 1
            rec = {"step": step, "epoch": epoch, "loss": round(float(loss), 4),
                   "s": round(time.time() - t0, 1)}
            if step % a.eval_every == 0:
                rec["eval"] = evaluate(model, held_rows)
                save_head(model, run / "head")
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                            "epoch": epoch, "pos": pos}, str(ck) + ".tmp")
                pathlib.Path(str(ck) + ".tmp").rename(ck)
                print(json.dumps(rec), flush=True)
            curve.write(json.dumps(rec) + "\n")
            curve.flush()
            if step >= a.steps or time.time() - t0 >= a.hours * 3600:
                break
        else:
            epoch, pos = epoch + 1, 0
    save_head(model, run / "head")
    print(run / "head")


if __name__ == "__main__":
    main()
