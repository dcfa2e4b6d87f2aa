"""Draft checkpoints on vLLM's offline engine, many in one interpreter: `python -m
tests.e2e.served_drafts JOBS.json RESULTS.json` inside the vLLM venv (tests/python/
test_e2e_draft_kinds.py runs it).

On this CPU a fresh vLLM process spends most of its start importing vLLM: the engine core child,
its worker child and one registry-inspection child per new architecture each import it again
(~20 s each measured on two busy cores, against ~1 s to build and load a tiny model). So every job
of JOBS.json runs in this one process, one after the other, with the engine in-process
(VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's CPU platform then keeps the "uni" executor, the worker
in this process too) and the registry's model-class inspection run here instead of in a child
(`_run_in_subprocess`, which only exists so that a CUDA host does not initialise CUDA in the
parent; it reads the class's interfaces, no weights). vLLM's loading, kernels and speculative
decoding are its own. Between jobs the distributed state is torn down
(cleanup_dist_env_and_memory), as vLLM's own tests do between engines, and what vLLM logs once
per process is reset, so each job's log reads as a fresh process's (`_fresh_logs`). Where
torchvision is absent (this venv leaves it out: tests/e2e/env.py), the module-map generator's
stand-in answers its imports (tools/vllm_module_map/stand_ins.py): vLLM's qwen3_5.py imports
Qwen2-VL's image processor at module level, so without it a Qwen3.5 target cannot even be
inspected; only image processors use torchvision, no text model's Linear.

Each job builds `vllm.LLM(model, speculative_config=...)`, greedily generates from token-id
prompts (no tokenizer: skip_tokenizer_init), reads the spec-decode counters (LLM.get_metrics) and
shuts the engine down. A job is
  {"name", "model", "speculative_config" (dict), "prompts" ([[token ids]]), "max_tokens"} and
optionally "engine_args" (more keyword arguments of LLM(...), e.g. enable_prefix_caching).
Its result is {"name", "loaded", "error", "outputs" ([[token ids]]), "spec" (drafts, drafted,
accepted), "seconds"}. A job whose engine fails to start is a result (loaded false, error: the
exception's type and message), not a failure of the run; its log is this process's stderr
between the lines `=== job NAME` that this script writes before each job (`job_logs`).

Error policy: a malformed JOBS.json raises; everything a job's engine raises is recorded.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback

MARK = "=== job "
COUNTERS = {"vllm:spec_decode_num_drafts": "drafts",
            "vllm:spec_decode_num_draft_tokens": "drafted",
            "vllm:spec_decode_num_accepted_tokens": "accepted"}


def _mark(text: str) -> None:
    """A line on fd 2 itself, so it sits in order with what the engine core child writes there."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(2, (text + "\n").encode())


def _spec_counters(llm) -> dict:
    out = {v: 0 for v in COUNTERS.values()}
    for metric in llm.get_metrics():
        if metric.name in COUNTERS:
            out[COUNTERS[metric.name]] += int(metric.value)
    return out


def _shutdown(llm) -> None:
    engine = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if engine is not None and hasattr(engine, "shutdown"):
        engine.shutdown()


def _in_process_inspection() -> None:
    from vllm.model_executor.models import registry
    registry._run_in_subprocess = lambda fn: fn()


def _fresh_logs() -> None:
    """What vLLM logs once per process (logger.*_once, e.g. "Loading drafter model...", and the
    W4A16 kernel line: a class-level set) is logged again for each job, as by a fresh process."""
    from vllm import logger as vllm_logger
    for name in ("_print_debug_once", "_print_info_once", "_print_warning_once"):
        getattr(vllm_logger, name).cache_clear()
    from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
        compressed_tensors_wNa16 as wna16)
    backends = getattr(wna16.CompressedTensorsWNA16, "_kernel_backends_being_used", None)
    if isinstance(backends, set):
        backends.clear()


def _teardown() -> None:
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    cleanup_dist_env_and_memory()


def run_job(job: dict) -> dict:
    from vllm import LLM, SamplingParams
    t0 = time.time()
    result = {"name": job["name"], "loaded": False, "error": "", "outputs": [], "spec": None}
    llm = None
    _fresh_logs()
    try:
        llm = LLM(model=job["model"], speculative_config=job["speculative_config"],
                  dtype="bfloat16", max_model_len=512, max_num_seqs=2, enforce_eager=True,
                  skip_tokenizer_init=True, disable_log_stats=False, seed=0,
                  **job.get("engine_args", {}))
        result["loaded"] = True
        params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True,
                                detokenize=False)
        outs = llm.generate([{"prompt_token_ids": p} for p in job["prompts"]], params,
                            use_tqdm=False)
        result["outputs"] = [list(o.outputs[0].token_ids) for o in outs]
        result["spec"] = _spec_counters(llm)
    except Exception as e:  # noqa: BLE001 - the engine's error is the result
        result["error"] = f"{type(e).__name__}: {e}"[:3000]
        traceback.print_exc()  # into this job's log, for the failure message
    finally:
        if llm is not None:
            _shutdown(llm)
        del llm
        gc.collect()
        _teardown()
    result["seconds"] = round(time.time() - t0, 1)
    return result


def main(argv: list[str]) -> int:
    jobs_path, results_path = argv
    jobs = json.loads(open(jobs_path).read())
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from tools.vllm_module_map.stand_ins import stand_in_torchvision
    stand_in_torchvision()
    _in_process_inspection()
    results = []
    for job in jobs:
        _mark(MARK + job["name"])
        results.append(run_job(job))
        _mark(f"=== done {job['name']}: {json.dumps(results[-1])}")
        with open(results_path, "w") as f:  # written after each job: a crash keeps the others
            json.dump(results, f, indent=1)
    return 0


def job_logs(log: str) -> dict:
    """NAME -> the stderr lines of that job (from its `=== job NAME` line to the next)."""
    out, name = {}, None
    for line in log.splitlines():
        if line.startswith(MARK):
            name = line[len(MARK):].strip()
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The results are written: skip the interpreter's teardown, where threads the in-process
    # engines left behind held the exit for up to 30 s here.
    os._exit(code)
