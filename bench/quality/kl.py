#!/usr/bin/env python3
"""Figure 3 of the quality benchmark: end to end on a causal LM, `--method search` against RTN.

No causal LM's trained weights can be installed on this machine (no PyPI package ships one and
nothing downloads from the Hugging Face hub), so this script trains one: a tiny Qwen3 with a
byte-level BPE tokenizer, both trained on the first 100 files of the Python standard library, on
the CPU with transformers. Then:

  1. the BF16 model is quantized twice by the sparkulator CLI, `--scheme w4a16 --preset llm`
     (or the --scheme given),
     `--method rtn` and `--method search` (lm_head and embeddings stay dense, as the plan decides);
  2. the original and both quantized checkpoints are loaded with transformers'
     AutoModelForCausalLM.from_pretrained (compressed-tensors decompresses the pack-quantized
     weights on load); one Linear is checked to hold exactly compressed-tensors' own decompression
     of our file, and to differ from the BF16 weight;
  3. over held-out text (the stdlib files after the first 100, never seen by the tokenizer or the
     training), in windows: the mean KL(P_bf16 || P_quant) of the next-token distribution per
     token, each model's perplexity, and the top-1 agreement with the BF16 model; the search / RTN
     ratios, with a bootstrap interval over windows;
  4. per Linear, with the real inputs of 8 held-out windows: weight SSE and output SSE, search /
     RTN, and how much of the activation-weighted error sits on each group's peak weight (the
     search clips peaks; on input channels with outlier activations that costs more than it saves).

The trained model is cached in --work (keyed by its sizes, steps and seed) and reused.
Weights stay BF16 values; the forward passes run in float32 so that the figures measure the
quantization and not BF16 activation rounding.

Usage: python3 bench/quality/kl.py [--spk build/sparkulator] [--work /tmp/spk-kl] [--seed 0]
                                   [--json kl.json]
Needs: torch, transformers, tokenizers, safetensors, compressed-tensors, and the sparkulator CLI.
"""

import argparse
import glob
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
METHODS = ("rtn", "search")
TRAIN_FILES = 100  # the first 100 stdlib files train the tokenizer and the model; the rest is held out
CHECK_MODULE = "model.layers.0.mlp.down_proj"


# -- prerequisites ---------------------------------------------------------------------------------
def require_prerequisites(spk):
    """Exits non-zero with a message that says what to install when anything needed is missing."""
    missing = []
    for module, hint in (("torch", "pip install torch"),
                         ("transformers", "pip install transformers"),
                         ("tokenizers", "pip install tokenizers"),
                         ("safetensors", "pip install safetensors"),
                         ("compressed_tensors", "pip install compressed-tensors")):
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing.append(f"Python module '{module}' cannot be imported ({e}); {hint}")
    if not (os.path.isfile(spk) and os.access(spk, os.X_OK)):
        missing.append(f"sparkulator CLI not found at '{spk}'; build it (cmake --build build "
                       "--target sparkulator) or pass --spk PATH / set SPK_BIN")
    if missing:
        sys.exit("kl.py: cannot run:\n  " + "\n  ".join(missing))


def spk_bin(arg):
    return arg or os.environ.get("SPK_BIN", str(REPO / "build" / "sparkulator"))


# -- corpus ----------------------------------------------------------------------------------------
def stdlib_files():
    return sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))


def read_all(files):
    return "".join(open(f, encoding="utf-8", errors="replace").read() for f in files)


# -- the model -------------------------------------------------------------------------------------
def model_dir(a):
    return Path(a.work) / (f"qwen3-h{a.hidden}-i{a.intermediate}-l{a.layers}-v{a.vocab}"
                           f"-steps{a.steps}-b{a.batch}x{a.seq}-seed{a.seed}")


def make_tokenizer(out, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(stdlib_files()[:TRAIN_FILES], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.save_pretrained(out)
    return fast


def new_model(a):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(a.seed)
    # Every Linear's in-dim is a multiple of 128: hidden 512 gives q/k/v/o/gate/up 4 groups per
    # row and down_proj 12. lm_head is not tied, so it is a dense weight of its own.
    cfg = Qwen3Config(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                      num_hidden_layers=a.layers, num_attention_heads=a.hidden // 64,
                      num_key_value_heads=max(1, a.hidden // 128), head_dim=64,
                      max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return Qwen3ForCausalLM(cfg)


def heldout_loss(model, ids, seq, windows):
    """Mean next-token loss over the first `windows` windows of `seq` tokens of `ids`."""
    import torch
    total = 0.0
    with torch.no_grad():
        for w in range(windows):
            x = ids[w * seq:(w + 1) * seq].unsqueeze(0)
            total += model(input_ids=x, labels=x).loss.item()
    return total / windows


def train_model(a, out, heldout_ids):
    """AdamW with a one-cycle schedule on random windows of the training files; saves BF16."""
    import torch
    out.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer(str(out), a.vocab)
    ids = torch.tensor(tok(read_all(stdlib_files()[:TRAIN_FILES]))["input_ids"])
    model = new_model(a)
    params = sum(p.numel() for p in model.parameters())
    print(f"training: {params / 1e6:.1f}M parameters, {len(ids)} training tokens, "
          f"{a.steps} steps of {a.batch} x {a.seq} tokens", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=a.steps,
                                                pct_start=0.1)
    gen = torch.Generator().manual_seed(a.seed)
    start, losses = time.time(), []
    for step in range(a.steps):
        starts = torch.randint(0, len(ids) - a.seq - 1, (a.batch,), generator=gen)
        x = torch.stack([ids[s:s + a.seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == a.steps - 1:
            print(f"  step {step} loss {loss.item():.3f} ({time.time() - start:.0f}s)", flush=True)
    seconds = time.time() - start
    model = model.to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)
    model.float().eval()
    loss = heldout_loss(model, heldout_ids(tok), a.seq, 16)
    info = {"parameters": params, "training_tokens": len(ids), "steps": a.steps,
            "batch": a.batch, "seq": a.seq, "lr": a.lr, "seed": a.seed,
            "train_seconds": round(seconds, 1),
            "final_train_loss_mean_last_20": round(sum(losses[-20:]) / len(losses[-20:]), 4),
            "heldout_loss_bf16_16x_seq": round(loss, 4)}
    (out / "train.json").write_text(json.dumps(info, indent=1))
    return info


# -- quantization ----------------------------------------------------------------------------------
def quantize(spk, src, dst, method, scheme):
    cmd = [spk, "quantize", str(src), str(dst), "--force", "--scheme", scheme, "--preset", "llm",
           "--method", method, "--threads", "1"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return " ".join(cmd[1:]), time.perf_counter() - start


def load_causal_lm(folder):
    """BF16 weights (dequantized on load for a compressed-tensors checkpoint), run in float32."""
    import torch
    from transformers import AutoModelForCausalLM
    kwargs = {}
    if "quantization_config" in json.loads((Path(folder) / "config.json").read_text()):
        from transformers import CompressedTensorsConfig
        kwargs["quantization_config"] = CompressedTensorsConfig(dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16, **kwargs)
    return model.float().eval()


def check_loaded_weights(models, folders):
    """The quantized models hold compressed-tensors' decompression of our files, not BF16 copies;
    lm_head and the embeddings are the BF16 ones."""
    import torch
    from run import dequantized_weights  # beside this file; imports torch and compressed-tensors

    def weight(model, name):
        return dict(model.named_parameters())[name].detach()

    bf16 = models["bf16"]
    checks = {}
    for m in METHODS:
        loaded = weight(models[m], CHECK_MODULE + ".weight")
        reference = dequantized_weights(folders[m])[0][CHECK_MODULE].float()
        same = torch.equal(loaded, reference)
        changed = (loaded != weight(bf16, CHECK_MODULE + ".weight")).float().mean().item()
        dense = all(torch.equal(weight(models[m], n), weight(bf16, n))
                    for n in ("lm_head.weight", "model.embed_tokens.weight"))
        if not (same and changed > 0.5 and dense):
            sys.exit(f"{m}: loaded {CHECK_MODULE}.weight equal to compressed-tensors' "
                     f"decompression: {same}; fraction differing from BF16: {changed:.3f}; "
                     f"lm_head/embeddings dense: {dense}. The loader did not dequantize our file.")
        checks[m] = {"module": CHECK_MODULE, "equals_compressed_tensors_decompression": same,
                     "fraction_of_weights_differing_from_bf16": round(changed, 4),
                     "lm_head_and_embeddings_bf16": dense}
    if torch.equal(weight(models["rtn"], CHECK_MODULE + ".weight"),
                   weight(models["search"], CHECK_MODULE + ".weight")):
        sys.exit("rtn and search checkpoints hold the same weights: --method was not applied")
    return checks


# -- evaluation ------------------------------------------------------------------------------------
def evaluate(models, ids, window, windows):
    """Per window and model: sum over positions of KL(P_bf16 || P_quant), NLL, top-1 agreement.
    Every position but the window's last one predicts a known next token."""
    import torch
    import torch.nn.functional as F
    per_window = []
    with torch.no_grad():
        for w in range(windows):
            x = ids[w * window:(w + 1) * window].unsqueeze(0)
            target = x[0, 1:]
            logp = {name: F.log_softmax(model(input_ids=x).logits[0, :-1].double(), dim=-1)
                    for name, model in models.items()}
            ref = logp["bf16"]
            row = {}
            for name, lp in logp.items():
                row[name] = {"nll": -lp.gather(1, target[:, None]).sum().item()}
                if name != "bf16":
                    row[name]["kl"] = (ref.exp() * (ref - lp)).sum().item()
                    row[name]["top1"] = (lp.argmax(-1) == ref.argmax(-1)).sum().item()
            per_window.append(row)
    return per_window


def layer_errors(models, ids, window, windows):
    """Why the end-to-end figure goes the way it goes, per Linear: weight SSE and output SSE with
    the real inputs (captured from the BF16 model on `windows` held-out windows), search / RTN;
    and, per method, the share of the activation-weighted error sum_ij r_j^2 d_ij^2 (r_j the RMS
    of input channel j) that sits on each group's largest-magnitude weight."""
    import torch
    captured = {}
    linears = {n: m for n, m in models["bf16"].named_modules()
               if isinstance(m, torch.nn.Linear) and n != "lm_head"}
    hooks = [m.register_forward_hook(
        lambda mod, inp, out, n=n: captured.setdefault(n, []).append(
            inp[0].reshape(-1, inp[0].shape[-1])))
             for n, m in linears.items()]
    with torch.no_grad():
        for w in range(windows):
            models["bf16"](input_ids=ids[w * window:(w + 1) * window].unsqueeze(0))
    for h in hooks:
        h.remove()
    params = {name: dict(model.named_parameters()) for name, model in models.items()}
    rows, totals = {}, {m: [0.0, 0.0] for m in METHODS}
    for n in linears:
        x = torch.cat(captured[n]).double()
        r2 = x.pow(2).mean(0)
        w = params["bf16"][n + ".weight"].double()
        g = w.abs().reshape(w.shape[0], -1, 128)
        peak = (g == g.amax(-1, keepdim=True)).reshape(w.shape)
        row = {}
        for m in METHODS:
            d = params[m][n + ".weight"].double() - w
            weight_sse, output_sse = d.pow(2).sum().item(), (x @ d.T).pow(2).sum().item()
            weighted = d.pow(2) * r2
            row[m] = {"weight_sse": weight_sse, "output_sse": output_sse,
                      "peak_share": (weighted[peak].sum() / weighted.sum()).item()}
            totals[m][0] += weight_sse
            totals[m][1] += output_sse
        row["weight_sse_ratio"] = row["search"]["weight_sse"] / row["rtn"]["weight_sse"]
        row["output_sse_ratio"] = row["search"]["output_sse"] / row["rtn"]["output_sse"]
        rows[n] = row
    return rows, {"weight_sse": totals["search"][0] / totals["rtn"][0],
                  "output_sse_real_inputs": totals["search"][1] / totals["rtn"][1]}


def print_layer_errors(rows, totals):
    print(f"\n{'Linear':<34} {'weight SSE s/r':>14} {'output SSE s/r':>14} "
          f"{'peak share rtn':>14} {'search':>7}")
    for n, r in rows.items():
        print(f"{n:<34} {r['weight_sse_ratio']:>14.3f} {r['output_sse_ratio']:>14.3f} "
              f"{r['rtn']['peak_share']:>14.3f} {r['search']['peak_share']:>7.3f}")
    print(f"{'all':<34} {totals['weight_sse']:>14.3f} {totals['output_sse_real_inputs']:>14.3f}")


def summarize(per_window, tokens_per_window, seed, resamples=2000):
    import torch
    n = len(per_window) * tokens_per_window
    out = {}
    for name in per_window[0]:
        nll = sum(r[name]["nll"] for r in per_window) / n
        out[name] = {"nll": nll, "perplexity": math.exp(nll)}
        if name != "bf16":
            out[name]["kl"] = sum(r[name]["kl"] for r in per_window) / n
            out[name]["top1_agreement"] = sum(r[name]["top1"] for r in per_window) / n
    # Bootstrap over windows (the same resampled windows for both methods): how much of the KL
    # ratio is the choice of text.
    kl = {m: torch.tensor([r[m]["kl"] for r in per_window], dtype=torch.float64) for m in METHODS}
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randint(0, len(per_window), (resamples, len(per_window)), generator=gen)
    ratios = (kl["search"][pick].sum(1) / kl["rtn"][pick].sum(1)).sort().values
    ratio = {
        "kl": out["search"]["kl"] / out["rtn"]["kl"],
        "kl_bootstrap_95": [ratios[int(0.025 * resamples)].item(),
                            ratios[int(0.975 * resamples)].item()],
        "kl_windows_where_search_is_lower": sum(
            r["search"]["kl"] < r["rtn"]["kl"] for r in per_window) / len(per_window),
        "perplexity_gap": ((out["search"]["perplexity"] - out["bf16"]["perplexity"])
                           / (out["rtn"]["perplexity"] - out["bf16"]["perplexity"])),
        "top1_disagreement": ((1 - out["search"]["top1_agreement"])
                              / (1 - out["rtn"]["top1_agreement"])),
    }
    return out, ratio


def print_table(info, res, ratio, tokens):
    print(f"\nheld-out text: {tokens} tokens; model: {info['parameters'] / 1e6:.1f}M parameters, "
          f"{info['steps']} steps, BF16 held-out loss {res['bf16']['nll']:.3f} "
          f"(perplexity {res['bf16']['perplexity']:.2f})")
    print(f"{'model':<8} {'KL(bf16||q) /tok':>17} {'perplexity':>11} {'ppl gap':>8} "
          f"{'top-1 agree':>12}")
    base = res["bf16"]["perplexity"]
    print(f"{'bf16':<8} {'':>17} {base:>11.4f} {'':>8} {'':>12}")
    for m in METHODS:
        r = res[m]
        print(f"{m:<8} {r['kl']:>17.5f} {r['perplexity']:>11.4f} {r['perplexity'] - base:>8.4f} "
              f"{r['top1_agreement']:>12.4f}")
    lo, hi = ratio["kl_bootstrap_95"]
    print(f"search / rtn: KL {ratio['kl']:.3f} (bootstrap 95% over windows {lo:.3f}-{hi:.3f}; "
          f"search lower in {ratio['kl_windows_where_search_is_lower']:.0%} of windows), "
          f"perplexity gap {ratio['perplexity_gap']:.3f}, "
          f"top-1 disagreement {ratio['top1_disagreement']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spk", help="sparkulator CLI (default: $SPK_BIN or build/sparkulator)")
    ap.add_argument("--work", default="/tmp/spk-kl", help="cache of trained and quantized models")
    ap.add_argument("--seed", type=int, default=0, help="model init and training data order")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128, help="training window")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--window", type=int, default=256, help="evaluation window (tokens)")
    ap.add_argument("--windows", type=int, default=48, help="evaluation windows")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--scheme", default="w4a16", help="sparkulator quantize --scheme")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    spk = spk_bin(a.spk)
    require_prerequisites(spk)

    import torch
    import transformers
    from transformers import AutoTokenizer
    torch.set_num_threads(a.threads)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    total_start = time.time()

    def heldout_ids(tok):
        return torch.tensor(tok(read_all(stdlib_files()[TRAIN_FILES:]))["input_ids"])

    src = model_dir(a)
    if (src / "train.json").exists():
        info = json.loads((src / "train.json").read_text())
        print(f"reusing the trained model in {src}")
    else:
        info = train_model(a, src, heldout_ids)
    ids = heldout_ids(AutoTokenizer.from_pretrained(str(src)))
    needed = a.window * a.windows
    if len(ids) < needed:
        sys.exit(f"held-out text has {len(ids)} tokens, fewer than --window x --windows = {needed}")

    folders, commands, quantize_seconds = {"bf16": src}, {}, {}
    for m in METHODS:
        folders[m] = Path(a.work) / f"{src.name}-{a.scheme}-{m}"
        commands[m], quantize_seconds[m] = quantize(spk, src, folders[m], m, a.scheme)
    models = {name: load_causal_lm(folder) for name, folder in folders.items()}
    checks = check_loaded_weights(models, folders)

    eval_start = time.time()
    per_window = evaluate(models, ids, a.window, a.windows)
    res, ratio = summarize(per_window, a.window - 1, a.seed)
    tokens = a.windows * (a.window - 1)
    rows, totals = layer_errors(models, ids, a.window, 8)
    print_layer_errors(rows, totals)
    print_table(info, res, ratio, tokens)
    print(f"evaluation {time.time() - eval_start:.0f}s, total {time.time() - total_start:.0f}s")
    if a.json:
        config = {k: getattr(a, k) for k in ("scheme", "hidden", "intermediate", "layers", "vocab",
                                             "seed", "window", "windows")}
        Path(a.json).write_text(json.dumps(
            {"model": dict(info, **config), "scored_tokens": tokens, "commands": commands,
             "quantize_seconds": quantize_seconds, "load_checks": checks, "results": res,
             "search_over_rtn": ratio, "layer_errors_search_over_rtn": totals,
             "layers": rows}, indent=1))


if __name__ == "__main__":
    main()
