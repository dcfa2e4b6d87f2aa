"""Measures the EAGLE-3 kind alone on a real vLLM with the full run's own machinery (run.py's `Run`):
the BF16, W4A16 RTN and W4A16 search heads served with `"method": "eagle3"`, the drafter's kernel
lines, run.py's prediction (vLLM's counters for one greedy request == predict_acceptance), the
`sparkulator bench` arms and the kind's failure cases. `python -m tests.e2e full` runs the same steps
for every kind; this entry point exists to rerun the EAGLE-3 figures (docs/e2e-eagle3.md) without
the target serving and the other kinds.

What only EAGLE-3 adds: the served-vs-trainer match on the quantized heads too, one server at a time
(`match_quantized`): the trainer replays the `sparkulator dequantize` copy of each arm. That copy is
BF16 (scale x q rounded to BF16, then a BF16 matmul) while the served GEMM on an AVX2 host (the
e2e's wna16_fallback) multiplies in fp32; a near-tie can then flip one draft token (seen once:
the search arm over 128 tokens, 45/135/82 served vs 44/132/83 replayed, cause not confirmed), which
this driver records as a failure rather than hides.

  E2E_PORT=18150 $VENV/bin/python -m tests.e2e.eagle3_measure --work DIR [--cache DIR] [--smoke]
      [--skip-match] [--skip-cases]
E2E_PORT is run.py's base port (it uses PORT .. PORT+12). Writes DIR/summary.json in run.py's layout
(kind "eagle3" only, plus kinds.eagle3.match). Exit as run.py: 0 every assertion held, 1 one failed
(summary["failures"]), 2 a sparkulator command failed. Every server is stopped (server.py).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

from tests.e2e import eagle3, env, measure, run, server
from tests.e2e.server import Server


def match_quantized(r: run.Run, target: pathlib.Path, drafts: dict[str, pathlib.Path]) -> dict:
    """eagle3.match_request on each quantized arm (the BF16 arm is run.py's `prediction`)."""
    out = {}
    prompt = measure.held_out_prompts(1, 800)[0]
    for arm, packed in drafts.items():
        if arm == "bf16":
            continue
        dense = r.models / f"{packed.name}-dequantized"
        env.sparkulator("dequantize", packed, dense, "--force", log=r.logs / f"dequantize-{arm}.txt")
        spec = json.dumps(eagle3.KIND.spec_config(packed))
        with Server(f"eagle3-match-{arm}", target, run.PORT + 2, r.work,
                    args=["--speculative-config", spec]) as s:
            if not s.wait_healthy(900):
                r.fail(f"eagle3 match {arm}: vLLM did not start: {s.root_cause()} ({s.log})")
                continue
            out[arm] = eagle3.match_request(s, dense, target, prompt, r.s["predict_tokens"])
        if not out[arm]["equal"]:
            r.fail(f"eagle3 match {arm}: vLLM {out[arm]['served']} != trainer {out[arm]['simulated']}")
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.eagle3_measure",
                                 description="The EAGLE-3 kind alone on a real vLLM: run.py's "
                                 "steps plus the served-vs-trainer match on the quantized heads.")
    ap.add_argument("--work", type=pathlib.Path, required=True)
    ap.add_argument("--cache", type=pathlib.Path, help="trained-model cache (env.cache_root)")
    ap.add_argument("--smoke", action="store_true", help="run.py's smoke settings and smoke head")
    ap.add_argument("--skip-match", action="store_true", help="no match on the quantized heads")
    ap.add_argument("--skip-cases", action="store_true", help="no failure cases")
    a = ap.parse_args(argv)
    server.install_exit_handlers()
    r = run.Run(a.work.resolve(), a.smoke, a.cache)
    kind = eagle3.KIND
    try:
        target = kind.build_target(r.cache, a.smoke)
        r.kind_part(kind, target, None)   # the W4A16 target is not served here
        out = r.summary["kinds"][kind.name]
        drafts = {arm: pathlib.Path(p) for arm, p in out.get("drafts", {}).items()}
        if not a.skip_match and drafts:
            out["match"] = match_quantized(r, target, drafts)
        r.write()
        if not a.skip_cases:
            r.kind_failure_part(kind, target, r.work / "eagle3-cases")
    except env.SparkulatorError as e:
        r.fail(f"sparkulator: {e}")
        r.write()
        return 2
    path = r.write()
    print(f"summary: {path} ({r.summary['seconds']} s, {len(r.summary['failures'])} failures)")
    return 1 if r.summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
