"""Stand-ins for tests/e2e/target.py and tests/e2e/server.py (branch e2e) while that branch has none.

STAND-IN: the lead replaces this module by imports from tests.e2e.target / tests.e2e.server once branch
e2e has them; eagle3.py imports those first and falls back to this module only when they are missing.

- `build_target`: the tiny Qwen3 target of scripts/e2e-vllm-cpu.sh (make-model + train): a 2048-token
  byte-level BPE tokenizer trained on the first 100 stdlib `*.py` files, Qwen3ForCausalLM hidden 256,
  2 layers, 4 heads x 64, 2 KV heads, intermediate 512, untied lm_head, AdamW on the same text.
- `Server`: one `vllm serve` in its own process group on 127.0.0.1, waited on via /health, always
  killed as a group. Errors: a server that dies or does not come up raises RuntimeError naming its log.
"""
from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sysconfig
import time
import urllib.request

VENV = pathlib.Path(os.environ.get("VENV", "/work/main/.venv-vllm"))


def stdlib_files() -> list[str]:
    return sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))


def read(path: str) -> str:
    return open(path, encoding="utf-8", errors="replace").read()


def training_text(count: int = 100) -> str:
    """The text the tokenizer, the target and the head are trained on (prompts come from later files)."""
    return "".join(read(f) for f in stdlib_files()[:count])


def build_target(out: pathlib.Path, *, layers: int = 2, hidden: int = 256, vocab: int = 2048,
                 steps: int = 400, seed: int = 0) -> pathlib.Path:
    """Creates and trains the target into `out` (which must not exist yet); returns `out`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(stdlib_files()[:100], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.save_pretrained(out)
    cfg = Qwen3Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=hidden // 64,
                      num_key_value_heads=max(1, hidden // 128), head_dim=64,
                      max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=0)
    model = Qwen3ForCausalLM(cfg)
    ids = torch.tensor(fast(training_text())["input_ids"])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        starts = torch.randint(0, len(ids) - 129, (8,), generator=gen)
        x = torch.stack([ids[s:s + 128] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"  target step {step} loss {loss.item():.3f}", flush=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    return out


class Server:
    """`vllm serve MODEL` on 127.0.0.1:PORT, in its own process group; use as a context manager."""

    def __init__(self, name: str, model: pathlib.Path, port: int, log: pathlib.Path,
                 extra_args: list[str] | None = None, extra_env: dict | None = None):
        self.name, self.model, self.port, self.log = name, model, port, log
        self.extra_args, self.extra_env = extra_args or [], extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> "Server":
        cache = self.log.parent / f"vllm-cache-{self.name}"
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, VLLM_CACHE_ROOT=str(cache), VLLM_CPU_KVCACHE_SPACE="1",
                   VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS="1", **self.extra_env)
        cmd = [str(VENV / "bin" / "vllm"), "serve", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "--served-model-name", self.name, "--dtype", "bfloat16",
               "--max-model-len", "1024", "--max-num-seqs", "4", "--enforce-eager",
               *self.extra_args]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        return self

    def wait_up(self, timeout: float = 600) -> bool:
        """True once /health answers; False when the server exited or timed out."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(2)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def __enter__(self) -> "Server":
        self.start()
        if not self.wait_up():
            tail = self.log.read_text(errors="replace")[-3000:]
            self.stop()
            raise RuntimeError(f"vllm serve {self.name} did not come up (log {self.log}):\n{tail}")
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def post(url: str, body: dict, timeout: float = 300) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def metrics(url: str) -> dict[str, float]:
    """vLLM's spec-decode counters from /metrics, summed over labels (per-position kept apart)."""
    out: dict[str, float] = {}
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if not line.startswith("vllm:spec_decode") or "_created" in line:
                continue
            name_labels, value = line.rsplit(" ", 1)
            name = name_labels.split("{")[0]
            if "position=" in name_labels:
                name += "[" + name_labels.split('position="')[1].split('"')[0] + "]"
            out[name] = out.get(name, 0.0) + float(value)
    return out
