"""`python -m tests.e2e.card_example --work DIR [--docs]`: the model card of a W4A16 DFlash draft from
a real vLLM bench, end to end, on the CPU build of vLLM.

1. The cached tiny Qwen3 target and its trained DFlash draft (target.py, dflash_qwen3.py; trained
   once and cached, see docs/e2e.md), the draft quantized with `sparkulator quantize --scheme w4a16`.
2. `sparkulator bench` with two LAUNCHED arms (`cmd:vllm serve ...`): the target with the BF16 draft
   and with the W4A16 draft, so that memory per arm comes from vLLM's log and /proc.
3. `sparkulator card` of the W4A16 draft with those results; `--docs` copies it to
   docs/card-example.md (and the results beside it).

Asserts what this run is there to show: prompts sent as token ids (exact lengths), acceptance counts
for both arms, both arms' checkpoint-size lines from vLLM's log and their resident memory, and a card
whose front matter parses. Exit 0: all held; 1: one failed (printed); 2: setup error.
Ports: E2E_PORT (default 18130) .. +9, one server at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import shutil
import sys

from tests.e2e import env
from tests.e2e.dflash_qwen3 import KIND
from tests.e2e.server import base_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVED_NAME = "tiny-qwen3"


def serve_command(target: pathlib.Path, draft: pathlib.Path) -> str:
    """The `cmd:` of one arm: vLLM's CPU recipe of docs/e2e.md, with the draft's spec config."""
    spec = json.dumps(KIND.spec_config(draft), separators=(",", ":"))
    words = [str(env.venv_dir() / "bin" / "vllm"), "serve", str(target), "--host", "127.0.0.1",
             "--port", "{port}", "--served-model-name", SERVED_NAME, "--dtype", "bfloat16",
             "--max-model-len", "1024", "--max-num-seqs", "4", "--enforce-eager",
             "--speculative-config", spec]
    return " ".join(shlex.quote(w) if w != "{port}" else w for w in words)


def run(work: pathlib.Path, cache: pathlib.Path | None, docs: bool, card_only: bool) -> int:
    cache = env.cache_root(cache)
    target = KIND.build_target(cache, smoke=False)
    draft = KIND.build_draft(cache, target, smoke=False)
    w4a16 = env.quantize(draft, work / "draft-w4a16", ["--scheme", "w4a16"], work)
    port = int(os.environ.get("E2E_PORT", "18130"))
    results = work / "bench.json"
    os.environ.update(base_env())  # the launched servers inherit sparkulator's environment
    proc = None if card_only else env.sparkulator(
        "bench", "--arm", "bf16=cmd:" + serve_command(target, draft),
        "--arm", "w4a16=cmd:" + serve_command(target, w4a16),
        "--prompt-lengths", "128,512", "--max-tokens", "48", "--repeats", "3", "--warmup", "1",
        "--port-range", f"{port}-{port + 9}", "--log-dir", work / "logs", "--json", results,
        "--svg", work / "bench.svg", check=False, log=work / "bench.txt")
    if not results.exists():
        print(f"bench wrote no results:\n{proc.stderr[-3000:] if proc else ''}")
        return 2
    card = work / "README.md"
    card.unlink(missing_ok=True)
    env.sparkulator("card", w4a16, "--bench", results, "--target", SERVED_NAME, "--check", "-o",
                    card, log=work / "card.txt")
    failures = check(json.loads(results.read_text()), card.read_text())
    for f in failures:
        print("FAILED:", f)
    if docs and not failures:
        text = card.read_text().replace("](bench-1.svg)", "](card-example-bench-1.svg)")
        (ROOT / "docs" / "card-example.md").write_text(text)
        shutil.copy(work / "bench-1.svg", ROOT / "docs" / "card-example-bench-1.svg")
        shutil.copy(results, ROOT / "docs" / "card-example-bench.json")
    print(f"bench exit {proc.returncode if proc else '-'}; card {card}; results {results}")
    return 1 if failures else 0


def check(res: dict, card: str) -> list[str]:
    """What the run must show; each failure as a sentence."""
    out = []
    if res["prompts"]["method"] != "token-ids":
        out.append(f"prompts were not sent as token ids: {res['prompts']}")
    for arm in res["arms"]:
        s, mem = arm["spec_decode"] or {}, arm["memory"]
        if not s.get("draft_tokens"):
            out.append(f"{arm['name']}: no drafted tokens counted")
        log = mem.get("vllm_log") or {}
        if log.get("target_checkpoint_gib") is None or log.get("draft_checkpoint_gib") is None:
            out.append(f"{arm['name']}: vLLM's checkpoint-size lines not found: {log}")
        if not (mem.get("process") or {}).get("peak_rss_bytes"):
            out.append(f"{arm['name']}: no resident memory sampled")
    if not card.startswith("---\n") or "base_model_relation: quantized" not in card:
        out.append("the card has no front matter")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.card_example", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=pathlib.Path, required=True)
    ap.add_argument("--cache", type=pathlib.Path)
    ap.add_argument("--docs", action="store_true", help="copy the card to docs/card-example.md")
    ap.add_argument("--card-only", action="store_true", help="reuse WORK/bench.json: card only")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    return run(a.work.resolve(), a.cache, a.docs, a.card_only)


if __name__ == "__main__":
    sys.exit(main())
