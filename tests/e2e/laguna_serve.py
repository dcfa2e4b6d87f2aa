"""STAND-IN for branch e2e's tests/e2e/server.py and measure.py, so the Laguna kind can be run and
recorded before that branch is merged: one `vllm serve` lifecycle (own process group, 127.0.0.1,
fresh VLLM_CACHE_ROOT, 1 thread, always killed), a greedy completion and the spec-decode counters
from /metrics. The lead replaces the uses in laguna_run.py by server.py/measure.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

VENV = Path(os.environ.get("VENV", "/work/main/.venv-vllm"))


@contextlib.contextmanager
def serve(name: str, model: Path, port: int, logs: Path, spec: dict | None = None,
          extra_env: dict | None = None, extra_args: list | None = None, vllm_bin: Path | None = None):
    """Yields (process, log path); the process group is killed on exit, also on error."""
    logs.mkdir(parents=True, exist_ok=True)
    cache = logs / f"cache-{name}"
    cache.mkdir(exist_ok=True)
    env = dict(os.environ, VLLM_CACHE_ROOT=str(cache), VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS="1",
               **(extra_env or {}))
    args = [str(vllm_bin or VENV / "bin/vllm"), "serve", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--served-model-name", name, "--dtype", "bfloat16",
            "--max-model-len", "1024", "--max-num-seqs", "4", "--enforce-eager"]
    if spec:
        args += ["--speculative-config", json.dumps(spec)]
    args += list(extra_args or [])
    log = logs / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        yield proc, log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_up(proc, port: int, timeout: float = 900) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(Exception):
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200:
                return True
        time.sleep(2)
    return False


def post(url: str, body: dict, timeout: float = 900) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=timeout))


def greedy(port: int, name: str, prompt_ids: list[int], tokens: int) -> list[int]:
    r = post(f"http://127.0.0.1:{port}/v1/completions",
             {"model": name, "prompt": prompt_ids, "max_tokens": tokens, "temperature": 0,
              "ignore_eos": True, "return_token_ids": True})
    return r["choices"][0]["token_ids"]


def spec_counters(port: int) -> dict:
    """vllm:spec_decode_* counters (summed over labels; per position for accepted_per_pos)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out: dict = {"num_drafts": 0.0, "num_draft_tokens": 0.0, "num_accepted_tokens": 0.0,
                 "accepted_per_pos": {}}
    for line in text.splitlines():
        m = re.match(r"vllm:spec_decode_(num_drafts|num_draft_tokens|num_accepted_tokens"
                     r"|num_accepted_tokens_per_pos)_total\{([^}]*)\} ([0-9.e+]+)", line)
        if not m:
            continue
        key, labels, value = m.group(1), m.group(2), float(m.group(3))
        if key == "num_accepted_tokens_per_pos":
            pos = int(re.search(r'position="(\d+)"', labels).group(1))
            out["accepted_per_pos"][pos] = out["accepted_per_pos"].get(pos, 0.0) + value
        else:
            out[key] += value
    return out


def diff_counters(after: dict, before: dict) -> dict:
    d = {k: int(after[k] - before[k]) for k in ("num_drafts", "num_draft_tokens",
                                              "num_accepted_tokens")}
    pos = sorted(after["accepted_per_pos"])
    d["accepted_per_pos"] = [int(after["accepted_per_pos"][p] - before["accepted_per_pos"].get(p, 0))
                             for p in pos]
    return d
