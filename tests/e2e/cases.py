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
import pathlib


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
