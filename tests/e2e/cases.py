"""Failure cases: a checkpoint or setup that is wrong in one way, run on a real vLLM and checked by
`sparkulator check`.

Each draft-kind module (dflash_qwen3.py, eagle3.py, laguna.py) returns a list of `FailureCase` from
`KIND.failure_cases(...)`; `run_case` serves it, records what vLLM did (loaded and served, or the
root-cause log line), runs `sparkulator check` on it, and says whether the two agree: check must exit
non-zero exactly when vLLM failed or served wrongly.

Error policy: a case that cannot be set up raises; a vLLM that fails is a recorded result, not an
exception.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time


@dataclasses.dataclass
class FailureCase:
    name: str                 # e.g. "laguna-qkv-quantized"
    what: str                 # one line: what is wrong with this checkpoint / setup
    target: pathlib.Path      # target model folder to serve
    draft: pathlib.Path | None     # draft folder (None: a target-only case)
    spec_config: dict | None       # the --speculative-config dict (None: no drafting)
    check_args: list[str]     # arguments for `sparkulator check` (checkpoint first)
    probe_request: bool = True     # after /health, send one completion; a 5xx or a dead engine
                                   # counts as "vllm_loaded": False (served wrongly)
    expect_vllm_loaded: bool = False   # what we observed on vLLM 0.32 (recorded evidence)
    expect_error: str = ""         # a substring of the root-cause log line vLLM prints
    extra_env: dict = dataclasses.field(default_factory=dict)
    extra_args: list = dataclasses.field(default_factory=list)   # extra `vllm serve` args
    # False: the case records what vLLM does on this host or build (no W8A16 CPU kernel, no
    # cpu_gemm_wna16 in vLLM's AVX2 library), not a fault of the checkpoint, so `sparkulator check`
    # is not expected to predict it and `agree` is None.
    checkpoint_fault: bool = True


PROBE_PROMPT = "def f(x):\n    return"


def run_case(case: FailureCase, work: pathlib.Path, port: int,
             reference_text: str | None = None) -> dict:
    """Serves the case, probes it, runs `sparkulator check`, and records the result.

    vllm_loaded: /health answered and (with probe_request) one greedy completion came back without
    an HTTP error from a live engine, and, when `reference_text` is given (the intact checkpoint's
    completion of the same prompt), the completion equals it: otherwise vLLM served wrongly.
    agree: check_exit != 0 exactly when vLLM failed or served wrongly (None for a case that is not a
    checkpoint fault)."""
    from tests.e2e import env
    from tests.e2e.server import Server
    args = list(case.extra_args)
    if case.spec_config is not None:
        args = ["--speculative-config", json.dumps(case.spec_config)] + args
    t0 = time.time()
    server = Server(case.name, case.target, port, work, args=args, extra_env=case.extra_env)
    served, detail, health = False, "", False
    with server:
        health = server.wait_healthy(900)
        if health and case.probe_request:
            served, detail = server.probe()
            if served and reference_text is not None and json.loads(detail) != reference_text:
                served = False
                detail = f"served {detail}, the intact checkpoint serves {json.dumps(reference_text)}"
        elif health:
            served = True
        acceptance = _acceptance(server) if served and case.spec_config is not None else None
    log = server.log_text()
    loaded = health and served
    check_exit, check_codes, _ = env.check(case.check_args, work / "logs" / f"check-{case.name}.txt")
    # The root cause: the first exception the log shows; for a server that answered but served
    # wrongly without one (e.g. a missing weight_scale), what the probe saw.
    error = server.root_cause() or ("" if loaded or not health else detail)
    result = {"name": case.name, "what": case.what, "vllm_loaded": loaded,
              "vllm_error": error,
              "probe": detail, "acceptance": acceptance, "check_exit": check_exit, "check_codes": check_codes,
              "agree": ((check_exit != 0) == (not loaded)) if case.checkpoint_fault else None,
              "checkpoint_fault": case.checkpoint_fault,
              "expect_vllm_loaded": case.expect_vllm_loaded,
              "as_expected": loaded == case.expect_vllm_loaded and
              (not case.expect_error or case.expect_error in log),
              "log": str(server.log), "seconds": round(time.time() - t0),
              "kernel_lines": [l.split("] ", 1)[-1] for l in log.splitlines()
                               if "for CompressedTensorsWNA16" in l][:4]}
    print(f"  case {case.name}: vLLM {'loaded' if loaded else 'failed'}; check exit {check_exit} "
          f"{check_codes}; agree={result['agree']}; {error[:160]}", flush=True)
    return result


def _acceptance(server) -> dict:
    """Spec-decode counters over the same two held-out greedy requests for every draft case, so
    that cases compare with each other (e.g. wrong-target with compile-cache-bf16)."""
    from tests.e2e import measure
    total = {"drafts": 0, "drafted": 0, "accepted": 0}
    for prompt in measure.held_out_prompts(2, 800):
        r = measure.request_counters(server, prompt, 64)
        for k in total:
            total[k] += r[k]
    total["rate"] = round(total["accepted"] / total["drafted"], 4) if total["drafted"] else None
    return total


# ---- broken copies of a W4A16 checkpoint ------------------------------------------------------------
BROKEN_MODULE = "model.layers.0.mlp.down_proj"
BREAKAGES = {
    "zero_point": "weight_zero_point added to a symmetric checkpoint (vLLM has no parameter for it)",
    "dense_leftover": "a dense .weight in place of weight_packed/scale/shape of a quantized module",
    "missing_scale": "weight_scale deleted (vLLM is said to run on uninitialised memory)",
}


def break_copy(src: pathlib.Path, dst: pathlib.Path, kind: str) -> pathlib.Path:
    """Copies the W4A16 checkpoint `src` to `dst` and breaks BROKEN_MODULE in one way."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = dst / "model.safetensors"
    t = load_file(str(path))
    m = BROKEN_MODULE
    if kind == "zero_point":
        rows = t[m + ".weight_shape"][0].item()
        groups = t[m + ".weight_scale"].shape[1]
        t[m + ".weight_zero_point"] = torch.zeros((rows * 4 // 32, groups), dtype=torch.int32)
    elif kind == "dense_leftover":
        rows, cols = t[m + ".weight_shape"].tolist()
        for suffix in ("weight_packed", "weight_scale", "weight_shape"):
            del t[m + "." + suffix]
        t[m + ".weight"] = torch.zeros((rows, cols), dtype=torch.bfloat16)
    elif kind == "missing_scale":
        del t[m + ".weight_scale"]
    else:
        raise ValueError(f"unknown breakage {kind!r}; known: {sorted(BREAKAGES)}")
    save_file(t, str(path), metadata={"format": "pt"})
    return dst


def broken_target_cases(work: pathlib.Path, target_w4a16: pathlib.Path,
                        kinds: list[str]) -> list[FailureCase]:
    """Target-only cases: broken copies of the W4A16 target (observed on vLLM 0.32 CPU: the zero point
    and the dense leftover stop the start with ValueError; the missing scale serves garbage)."""
    expected = {"zero_point": (False, "There is no module or parameter named"),
                "dense_leftover": (False, "There is no module or parameter named"),
                "missing_scale": (False, "")}
    cases = []
    for kind in kinds:
        dst = break_copy(target_w4a16, work / "models" / f"broken-{kind}", kind)
        loaded, err = expected[kind]
        cases.append(FailureCase(name=f"target-{kind.replace('_', '-')}",
                                 what=f"{BREAKAGES[kind]}; module {BROKEN_MODULE}",
                                 target=dst, draft=None, spec_config=None, check_args=[str(dst)],
                                 expect_vllm_loaded=loaded, expect_error=err))
    return cases
