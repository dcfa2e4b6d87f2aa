"""The EAGLE-3 draft kind of the real-vLLM e2e harness (INTERFACE.md): a 1-layer EAGLE-3 head for the
tiny Qwen3 target, served with `"method": "eagle3"`, and the ways vLLM 0.32 fails on such heads.

`KIND` is what run.py/cases.py (branch e2e) call. The head's layout, forward and training live in
eagle3_head.py; this module caches them, names the speculative config and builds the failure cases.
`match_request` replays one greedy request served by vLLM with the trainer's own forward and compares
vLLM's spec-decode counters with the simulated ones: that is how the head is shown to match vLLM.

CLI (vLLM venv python, repository root):
  python -m tests.e2e.eagle3 build [--cache DIR] [--smoke]      # target + head, prints their folders
  python -m tests.e2e.eagle3 match --url URL --head H --target T [--tokens N] [--prompt-file F]
Errors: a failed build leaves only a `.tmp` folder (never a folder that looks done); `match` raises
RuntimeError when the server answers without spec-decode counters.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

from tests.e2e import eagle3_head as head_mod
from tests.e2e import eagle3_standin as standin

# ---- FailureCase: STAND-IN until tests/e2e/cases.py (branch e2e) exists; the lead replaces this block
# by `from tests.e2e.cases import FailureCase`.
try:
    from tests.e2e.cases import FailureCase
except ImportError:
    @dataclasses.dataclass
    class FailureCase:
        name: str
        what: str
        target: pathlib.Path
        draft: pathlib.Path | None
        spec_config: dict | None
        check_args: list[str]
        probe_request: bool = True
        expect_vllm_loaded: bool = False
        expect_error: str = ""
        extra_env: dict = dataclasses.field(default_factory=dict)
        extra_args: list = dataclasses.field(default_factory=list)
# ---- end of stand-in block

NUM_SPECULATIVE_TOKENS = 3      # = TrainParams.ttt_steps: the chain length the head was trained for
SMOKE_PARAMS = head_mod.TrainParams(sequences=48, steps=200)
FULL_PARAMS = head_mod.TrainParams()
_SOURCES = [pathlib.Path(__file__), pathlib.Path(head_mod.__file__), pathlib.Path(standin.__file__)]


def default_cache() -> pathlib.Path:
    env = os.environ.get("SPK_E2E_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "sparkulator" / "e2e"


def cached(cache: pathlib.Path, label: str, params: dict, build) -> pathlib.Path:
    """cache/LABEL-HASH, built by build(tmp_folder) into a temporary folder renamed at the end; the hash
    covers this kind's source files and `params`, so a changed trainer retrains."""
    h = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode())
    for src in _SOURCES:
        h.update(src.read_bytes())
    final = cache / f"{label}-{h.hexdigest()[:16]}"
    if final.is_dir():
        return final
    tmp = cache / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    build(tmp)
    os.replace(tmp, final)
    return final


def _strip_aux_ids(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """A copy of head `src` whose config names no aux layers (neither top level nor eagle_config)."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.pop("eagle_aux_hidden_state_layer_ids", None)
    cfg.get("eagle_config", {}).pop("eagle_aux_hidden_state_layer_ids", None)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return dst


class Eagle3Kind:
    name = "eagle3"
    method = "eagle3"

    def build_target(self, cache: pathlib.Path, smoke: bool) -> pathlib.Path:
        """The shared tiny Qwen3 target (branch e2e's target.py when present: 2 layers, as here)."""
        try:
            from tests.e2e import target as shared
        except ImportError:
            shared = None
        if shared is not None and hasattr(shared, "build_target"):
            return shared.build_target(cache, smoke)
        steps = 150 if smoke else 400
        return cached(cache, "qwen3-target-standin", {"layers": 2, "steps": steps},
                      lambda out: standin.build_target(out, steps=steps))

    def build_draft(self, cache: pathlib.Path, target: pathlib.Path, smoke: bool) -> pathlib.Path:
        params = SMOKE_PARAMS if smoke else FULL_PARAMS

        def build(out: pathlib.Path) -> None:
            head, cfg, stats = head_mod.train_head(target, standin.training_text(), params)
            stats["target"] = str(target)
            head_mod.save_head(head, cfg, out, stats)

        return cached(cache, "eagle3-head", {"target": str(target), **dataclasses.asdict(params),
                                              "smoke": smoke}, build)

    def spec_config(self, draft: pathlib.Path) -> dict:
        return {"method": self.method, "model": str(draft),
                "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}

    def quantize_args(self) -> list[str]:
        return ["--preset", "eagle3"]

    def failure_cases(self, work: pathlib.Path, target: pathlib.Path, draft: pathlib.Path,
                      spk: pathlib.Path) -> list[FailureCase]:
        """Observed on vLLM 0.32 CPU. Without aux ids vLLM takes the target's default layers
        (2, L//2, L-3) = (2, 1, -1) for L = 2: two distinct states (512 wide) while fc was built for the
        default 3 x 256 = 768, and torch's matmul fails on the first request. A W4A16 head needs the
        `cpu_gemm_wna16` op, which only vLLM's AVX-512 library has (`_C_AVX2.abi3.so` lacks it, yet
        CPUWNA16LinearKernel is still chosen), so on an AVX2-only host it dies on the first request. A
        W8A16 head has no CPU kernel at all (CPUWNA16 takes uint4/uint4b8 only)."""
        work.mkdir(parents=True, exist_ok=True)

        def quantized(src: pathlib.Path, name: str, scheme: str) -> pathlib.Path:
            out = work / name
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([str(spk), "quantize", str(src), str(out), "--scheme", scheme,
                            *self.quantize_args()], check=True, capture_output=True)
            return out

        def case(name, what, head, error, loaded=False):
            return FailureCase(name=name, what=what, target=target, draft=head,
                               spec_config=self.spec_config(head),
                               check_args=[str(head), "--target", str(target)], probe_request=True,
                               expect_vllm_loaded=loaded, expect_error=error)

        no_aux = _strip_aux_ids(draft, work / "eagle3-no-aux-ids")
        avx512 = host_has_avx512()
        return [
            case("eagle3-no-aux-layer-ids", "BF16 head whose config names no aux layers: vLLM's "
                 "default (2, L//2, L-3) gives the 2-layer target 2 distinct states while fc expects "
                 "3 x hidden; the engine dies on the first request", no_aux,
                 "mat1 and mat2 shapes cannot be multiplied (8x512 and 768x256)"),
            case("eagle3-w4a16-cpu-kernel", "W4A16 head (sparkulator --scheme w4a16) on vLLM's CPU "
                 "build: CPUWNA16LinearKernel is chosen, but its op exists only in the AVX-512 "
                 "library" + ("" if avx512 else "; this host is AVX2-only, the first request kills "
                 "the engine"), quantized(draft, "eagle3-w4a16", "w4a16"),
                 "" if avx512 else "object has no attribute 'cpu_gemm_wna16'", loaded=avx512),
            case("eagle3-w8a16-on-cpu", "W8A16 head (sparkulator --scheme w8a16): vLLM's CPU build "
                 "has no W8A16 kernel, the engine does not start",
                 quantized(draft, "eagle3-w8a16", "w8a16"),
                 "Quant type (uint8b128) not supported by CPUWNA16")]


def host_has_avx512() -> bool:
    """vLLM's CPU platform loads _C_AVX512 only where the CPU has avx512f (platforms/cpu.py)."""
    try:
        return " avx512f" in pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


KIND = Eagle3Kind()


# ---- match: vLLM's counters for one greedy request == the trainer's forward's --------------------
def match_request(url: str, head_dir: pathlib.Path, target_dir: pathlib.Path, prompt: list[int],
                  tokens: int, model: str | None = None) -> dict:
    """Sends one greedy request, differences vLLM's spec-decode counters around it, and replays the same
    request with eagle3_head.simulate. Returns both sets of counters and whether they are equal."""
    import torch
    from transformers import AutoModelForCausalLM
    k = json.loads(urllib_get(url + "/v1/models"))["data"][0]["id"] if model is None else model
    before = standin.metrics(url)
    out = standin.post(url + "/v1/completions",
                       {"model": k, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens,
                        "temperature": 0, "ignore_eos": True, "return_token_ids": True})
    after = standin.metrics(url)
    if "vllm:spec_decode_num_drafts_total" not in after:
        raise RuntimeError(f"{url}/metrics has no vllm:spec_decode_* counters: no drafting happened")
    generated = out["choices"][0]["token_ids"]
    served = {"drafts": after["vllm:spec_decode_num_drafts_total"] - before.get("vllm:spec_decode_num_drafts_total", 0),
              "draft_tokens": after["vllm:spec_decode_num_draft_tokens_total"] - before.get("vllm:spec_decode_num_draft_tokens_total", 0),
              "accepted": after["vllm:spec_decode_num_accepted_tokens_total"] - before.get("vllm:spec_decode_num_accepted_tokens_total", 0)}
    served["per_position"] = [after.get(f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]", 0)
                              - before.get(f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]", 0)
                              for i in range(NUM_SPECULATIVE_TOKENS)]
    served = {key: (int(v) if isinstance(v, float) else [int(x) for x in v]) for key, v in served.items()}
    torch.set_num_threads(1)
    tgt = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.bfloat16).eval()
    sim = head_mod.simulate(head_mod.load_head(head_dir, target_dir), tgt, prompt, generated,
                            NUM_SPECULATIVE_TOKENS)
    keys = ("drafts", "draft_tokens", "accepted", "per_position")
    return {"served": served, "simulated": {key: sim[key] for key in keys},
            "equal": all(served[key] == sim[key] for key in keys), "generated": generated}


def urllib_get(url: str) -> str:
    import urllib.request
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def prompt_ids(target_dir: pathlib.Path, file_index: int = 110, n_tokens: int = 96) -> list[int]:
    """A prompt the tokenizer, target and head never saw: the start of stdlib file `file_index`."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(target_dir)
    return tok(standin.read(standin.stdlib_files()[file_index]))["input_ids"][:n_tokens]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.eagle3", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="train (or reuse) the target and the BF16 head")
    b.add_argument("--cache", type=pathlib.Path, default=default_cache())
    b.add_argument("--smoke", action="store_true")
    b.add_argument("--target", type=pathlib.Path, help="use this target folder instead of building one")
    m = sub.add_parser("match", help="one served greedy request vs the trainer's forward")
    m.add_argument("--url", required=True)
    m.add_argument("--head", type=pathlib.Path, required=True)
    m.add_argument("--target", type=pathlib.Path, required=True)
    m.add_argument("--tokens", type=int, default=64)
    m.add_argument("--file-index", type=int, default=110, help="stdlib file the prompt comes from")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        target = a.target.resolve() if a.target else KIND.build_target(a.cache, a.smoke)
        print(json.dumps({"target": str(target), "draft": str(KIND.build_draft(a.cache, target, a.smoke))}))
        return 0
    r = match_request(a.url, a.head, a.target, prompt_ids(a.target, a.file_index), a.tokens)
    print(json.dumps({k: v for k, v in r.items() if k != "generated"}))
    return 0 if r["equal"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
