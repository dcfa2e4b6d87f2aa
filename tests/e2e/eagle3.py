"""The EAGLE-3 draft kind of the real-vLLM e2e harness (INTERFACE.md): a 1-layer EAGLE-3 head for the
tiny Qwen3 target, served with `"method": "eagle3"`, and the ways vLLM 0.32 fails on such heads.

`KIND` is what run.py/cases.py (branch e2e) call. The head's layout, forward and training live in
eagle3_head.py; this module caches them, names the speculative config and builds the failure cases.
`predict_acceptance` replays a greedy request served by vLLM with the trainer's own forward (run.py's
prediction hook calls it; `match_request` does the same on any running server): vLLM's spec-decode
counters must equal the simulated ones, which is how the head is shown to match vLLM.

CLI (vLLM venv python, repository root):
  python -m tests.e2e.eagle3 build [--cache DIR] [--smoke]      # target + head, prints their folders
  python -m tests.e2e.eagle3 replay --target T --head bf16=H --head w4a16-rtn=H2 [--prompts 12]
Errors: a failed build leaves only a `.tmp` folder (never a folder that looks done); `match_request`
raises RuntimeError when the server answers without spec-decode counters.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

from tests.e2e import corpus, env, target as shared_target
from tests.e2e import eagle3_head as head_mod
from tests.e2e.cases import FailureCase


NUM_SPECULATIVE_TOKENS = 3      # = TrainParams.ttt_steps: the chain length the head was trained for
# The CI-sized head (`build --smoke`, and test_e2e_eagle3.py builds it when the cache lacks it):
# a few minutes of one thread here instead of the full head's ~30; still accepted > 0 on the
# served greedy request, whose counters must equal the trainer's replay (docs/e2e-eagle3.md).
SMOKE_PARAMS = head_mod.TrainParams(sequences=32, continuation=64, steps=120)
FULL_PARAMS = head_mod.TrainParams()
# What each cached model depends on: a change to these files (or to the parameters) rebuilds it.
_HEAD_SOURCES = [pathlib.Path(head_mod.__file__)]


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
        """The shared tiny Qwen3 target (target.py: 2 layers, which is enough: see AUX_LAYER_IDS)."""
        return shared_target.build_target(cache, smoke)

    def build_draft(self, cache: pathlib.Path, target: pathlib.Path, smoke: bool) -> pathlib.Path:
        params = SMOKE_PARAMS if smoke else FULL_PARAMS

        def build(out: pathlib.Path) -> None:
            head, cfg, stats = head_mod.train_head(target, corpus.training_text(), params)
            stats["target"] = str(target)
            head_mod.save_head(head, cfg, out, stats)

        return env.cached_model(cache, "eagle3-head", _HEAD_SOURCES, self.head_params(target, smoke),
                                build)

    def head_params(self, target: pathlib.Path, smoke: bool) -> dict:
        """The cache key: the target's weights (by content, not by folder), the training
        parameters and the smoke flag (and, in build_draft, eagle3_head.py's source)."""
        params = SMOKE_PARAMS if smoke else FULL_PARAMS
        return {"target": env.file_digest(target / "model.safetensors"),
                **dataclasses.asdict(params), "smoke": smoke}

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
        W8A16 head has no CPU kernel at all (CPUWNA16 takes uint4/uint4b8 only). Those two record
        this host's vLLM build, not a fault of the head (checkpoint_fault=False: `sparkulator check`
        is not expected to predict them); the missing aux ids are the head's fault."""
        work.mkdir(parents=True, exist_ok=True)

        def quantized(src: pathlib.Path, name: str, scheme: str) -> pathlib.Path:
            out = work / name
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([str(spk), "quantize", str(src), str(out), "--scheme", scheme,
                            "--vllm-version", env.SERVED_RELEASE, *self.quantize_args()],
                           check=True, capture_output=True)
            return out

        def case(name, what, head, error, loaded=False, extra_env=None, checkpoint_fault=True):
            return FailureCase(name=name, what=what, target=target, draft=head,
                               spec_config=self.spec_config(head),
                               check_args=[str(head), "--target", str(target)], probe_request=True,
                               expect_vllm_loaded=loaded, expect_error=error,
                               extra_env=extra_env or {}, checkpoint_fault=checkpoint_fault)

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
                 "" if avx512 else "object has no attribute 'cpu_gemm_wna16'", loaded=avx512,
                 # VLLM_PLUGINS="" loads no plugin: vLLM as a user has it, without branch e2e's
                 # reference GEMM (wna16_fallback/) that serves W4A16 on AVX2-only hosts.
                 extra_env={"VLLM_PLUGINS": ""}, checkpoint_fault=False),
            case("eagle3-w8a16-on-cpu", "W8A16 head (sparkulator --scheme w8a16): vLLM's CPU build "
                 "has no W8A16 kernel, the engine does not start",
                 quantized(draft, "eagle3-w8a16", "w8a16"),
                 "Quant type (uint8b128) not supported by CPUWNA16", checkpoint_fault=False)]


def host_has_avx512() -> bool:
    """vLLM's CPU platform loads _C_AVX512 only where the CPU has avx512f (platforms/cpu.py)."""
    try:
        return " avx512f" in pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


KIND = Eagle3Kind()


def ci_models(cache: pathlib.Path | None = None) -> tuple[pathlib.Path, pathlib.Path]:
    """(target, head) for the test suite: the shared tiny target and the CI-sized head
    (SMOKE_PARAMS), each trained once per machine and cache (env.cached_model), read back after."""
    cache = env.cache_root(cache)
    target = KIND.build_target(cache, True)
    return target, KIND.build_draft(cache, target, True)


# ---- match: vLLM's counters for one greedy request == the trainer's forward's --------------------
def predict_acceptance(draft: pathlib.Path, target: pathlib.Path, prompt_ids: list[int],
                       token_ids: list[int]) -> dict:
    """What vLLM's counters should say for a greedy request that produced `token_ids` after
    `prompt_ids` (run.py's `prediction` hook): the trainer's forward replays vLLM's loop."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    tgt = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16).eval()
    sim = head_mod.simulate(head_mod.load_head(draft, target), tgt, list(prompt_ids),
                            list(token_ids), NUM_SPECULATIVE_TOKENS)
    return {"drafts": sim["drafts"], "drafted": sim["draft_tokens"], "accepted": sim["accepted"],
            "per_position": sim["per_position"], "steps": sim["proposals"]}


def match_request(server, head_dir: pathlib.Path, target_dir: pathlib.Path, prompt: str,
                  tokens: int) -> dict:
    """One greedy request on a running `server.Server` with the spec-decode counters it moved
    (measure.request_counters), compared with predict_acceptance for the same prompt and output.
    `head_dir` is what the trainer replays: the served head, or the dequantized copy of a quantized
    one (BF16: the same weights up to rounding of scale x q). Raises RuntimeError when no counter moved (no drafting happened)."""
    from tests.e2e import measure
    served = measure.request_counters(server, prompt, tokens)
    if not served["drafts"]:
        raise RuntimeError(f"{server.url}/metrics: no vllm:spec_decode_* counter moved: no drafting")
    want = predict_acceptance(head_dir, target_dir, served["prompt_ids"], served["token_ids"])
    keys = ("drafts", "drafted", "accepted", "per_position")
    return {"served": {k: served[k] for k in keys}, "simulated": {k: want[k] for k in keys},
            "equal": all(served[k] == want[k] for k in keys), "tokens": len(served["token_ids"])}


def replay_acceptance(heads: dict[str, pathlib.Path], target_dir: pathlib.Path, prompts: int,
                      tokens: int) -> dict:
    """Acceptance of several heads over `prompts` held-out prompts without a server: the target's
    greedy continuation (transformers, BF16) replayed through predict_acceptance's loop, which the
    served match shows to equal vLLM's counters. Returns {name: {drafted, accepted, rate, ...}}."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    tgt = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.bfloat16).eval()
    loaded = {name: head_mod.load_head(h, target_dir) for name, h in heads.items()}
    totals = {name: {"drafts": 0, "drafted": 0, "accepted": 0} for name in heads}
    for i in range(prompts):
        prompt = prompt_ids(target_dir, corpus.TRAIN_FILES + 10 + i)
        with torch.no_grad():
            out = tgt.generate(torch.tensor([prompt]), max_new_tokens=tokens, min_new_tokens=tokens,
                               do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()
        for name, head in loaded.items():
            sim = head_mod.simulate(head, tgt, prompt, out, NUM_SPECULATIVE_TOKENS)
            totals[name]["drafts"] += sim["drafts"]
            totals[name]["drafted"] += sim["draft_tokens"]
            totals[name]["accepted"] += sim["accepted"]
    for t in totals.values():
        t["rate"] = round(t["accepted"] / t["drafted"], 4)
        t["mean_acceptance_length"] = round(1 + t["accepted"] / t["drafts"], 3)
    return totals


def prompt_ids(target_dir: pathlib.Path, file_index: int = 110, n_tokens: int = 96) -> list[int]:
    """A prompt the tokenizer, target and head never saw: the start of stdlib file `file_index`."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(target_dir)
    return tok(corpus.read(corpus.stdlib_files()[file_index]))["input_ids"][:n_tokens]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.eagle3", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="train (or reuse) the target and the BF16 head")
    b.add_argument("--cache", type=pathlib.Path, default=env.cache_root())
    b.add_argument("--smoke", action="store_true")
    b.add_argument("--target", type=pathlib.Path, help="use this target folder instead of building one")
    r = sub.add_parser("replay", help="acceptance of heads over held-out prompts, no server")
    r.add_argument("--target", type=pathlib.Path, required=True)
    r.add_argument("--head", action="append", required=True, metavar="NAME=DIR")
    r.add_argument("--prompts", type=int, default=12)
    r.add_argument("--tokens", type=int, default=96)
    a = ap.parse_args(argv)
    if a.cmd == "replay":
        heads = {h.split("=", 1)[0]: pathlib.Path(h.split("=", 1)[1]) for h in a.head}
        print(json.dumps(replay_acceptance(heads, a.target, a.prompts, a.tokens), indent=1))
        return 0
    target = a.target.resolve() if a.target else KIND.build_target(a.cache, a.smoke)
    print(json.dumps({"target": str(target), "draft": str(KIND.build_draft(a.cache, target, a.smoke))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
