"""Runs the Laguna DFlash kind on the real vLLM and records what happened (JSON under --work).

  python -m tests.e2e.laguna_run build   --work W            train/cached target and draft
  python -m tests.e2e.laguna_run match   --work W [--draft D] greedy requests: vLLM's per-request
                                                           spec counters vs the trainer's replay
  python -m tests.e2e.laguna_run replay  --work W            the trainer's side of a recorded match
  python -m tests.e2e.laguna_run cases   --work W --spk BIN each failure case on vLLM + check
  python -m tests.e2e.laguna_run bench   --work W --spk BIN --arm bf16=D --arm w4a16-rtn=D2 ...
                                                           sparkulator bench, baseline vs each arm
  python -m tests.e2e.laguna_run compare --work W --a D1 --b D2 [--vllm-bin BIN]
                                                           same greedy requests on two drafts
                                                           (both servers start together):
                                                           per-request counters must be equal
Run under the vLLM venv's python from the repository root. At most two servers at once, one thread
each (laguna_serve). STAND-IN driver until branch e2e's run.py calls KIND (INTERFACE.md).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from tests.e2e import laguna_corpus as corpus
from tests.e2e import laguna_serve as srv
from tests.e2e.laguna import KIND, default_cache, load_draft

PORT = 18200


def models(work: Path, smoke: bool):
    t0 = time.time()
    target = KIND.build_target(default_cache(), smoke)
    t1 = time.time()
    draft = KIND.build_draft(default_cache(), target, smoke)
    return target, draft, {"target_s": round(t1 - t0, 1), "draft_s": round(time.time() - t1, 1)}


def greedy_counters(port: int, name: str, prompts: list[list[int]], tokens: int) -> list[dict]:
    """One request at a time; the counters' difference around each is that request's."""
    out = []
    for ids in prompts:
        before = srv.spec_counters(port)
        got = srv.greedy(port, name, ids, tokens)
        time.sleep(1.0)  # the engine publishes stats after the request finishes
        out.append({"prompt": ids, "output": got,
                    "vllm": srv.diff_counters(srv.spec_counters(port), before)})
    return out


def prompt_ids(target: Path, count: int, chars: int = 400) -> list[list[int]]:
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(target))
    return [tok(p)["input_ids"] for p in corpus.prompts(count, chars)]


def cmd_match(a) -> dict:
    target, draft, times = models(a.work, a.smoke)
    draft = Path(a.draft) if a.draft else draft
    prompts = prompt_ids(target, a.requests)
    with srv.serve("laguna-match", target, PORT, a.work / "logs", KIND.spec_config(draft)) as (p, log):
        if not srv.wait_up(p, PORT):
            raise SystemExit(f"server did not come up: {log}")
        runs = greedy_counters(PORT, "laguna-match", prompts, a.tokens)
    return {"draft": str(draft), "times": times, **with_predictions(runs, target, draft)}


def with_predictions(runs: list[dict], target: Path, draft: Path) -> dict:
    """Adds the trainer's replay of each greedy request and compares its counters with vLLM's."""
    import torch
    from transformers import LagunaForCausalLM
    from tests.e2e.laguna_model import predicted_acceptance
    tgt = LagunaForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    mine = load_draft(draft)
    mask_id = json.loads((draft / "config.json").read_text())["dflash_config"]["mask_token_id"]
    keys = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
    for r in runs:
        pred = predicted_acceptance(mine, tgt, r["prompt"], r["output"], mask_id)
        r["predicted"] = {k: v for k, v in pred.items() if k != "steps"}
        r["equal"] = all(r["predicted"][k] == r["vllm"][k] for k in (*keys, "accepted_per_pos"))
    return {"requests": len(runs), "equal": sum(r["equal"] for r in runs),
            "vllm_total": {k: sum(r["vllm"][k] for r in runs) for k in keys},
            "predicted_total": {k: sum(r["predicted"][k] for r in runs) for k in keys},
            "runs": runs}


def cmd_replay(a) -> dict:
    """Recomputes the trainer's side of a recorded `match` (no server)."""
    target, draft, _ = models(a.work, a.smoke)
    draft = Path(a.draft) if a.draft else draft
    runs = json.loads((a.work / "match.json").read_text())["runs"]
    return {"draft": str(draft), **with_predictions(runs, target, draft)}


def root_cause(log: Path, expect: str) -> str:
    lines = log.read_text(errors="replace").splitlines()
    hits = [l for l in lines if expect and expect in l]
    if hits:
        return hits[-1].strip()
    errs = [l for l in lines if re.search(r"(Error|Exception):", l)]
    return errs[-1].strip() if errs else ""


def cmd_cases(a) -> dict:
    import subprocess
    target, draft, _ = models(a.work, a.smoke)
    results = []
    for c in KIND.failure_cases(a.work / "cases", target, draft, Path(a.spk)):
        if a.only and c.name not in a.only:
            continue
        chk = subprocess.run([a.spk, "check", *c.check_args, "--json"], capture_output=True,
                             text=True)
        codes = sorted({f.get("code", "") for f in _findings(chk.stdout)})
        t0 = time.time()
        with srv.serve(c.name, c.target, PORT + 1, a.work / "logs", c.spec_config,
                       c.extra_env, c.extra_args) as (p, log):
            up = srv.wait_up(p, PORT + 1)
            served = False
            if up and c.probe_request:
                try:
                    srv.greedy(PORT + 1, c.name, [1, 2, 3], 8)
                    served = True
                except Exception as e:  # a 5xx or a dead engine: served wrongly
                    served = False
        line = root_cause(log, c.expect_error)
        results.append({"name": c.name, "what": c.what, "vllm_loaded": served,
                        "expected_loaded": c.expect_vllm_loaded,
                        "root_cause": line, "expected_error": c.expect_error,
                        "error_matches": bool(c.expect_error) and c.expect_error in line,
                        "check_exit": chk.returncode, "check_codes": codes,
                        "seconds": round(time.time() - t0, 1), "log": str(log)})
        print(json.dumps(results[-1]), flush=True)
    return {"cases": results}


def _findings(text: str) -> list[dict]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return []
    if isinstance(doc, dict):
        for key in ("findings", "results"):
            if isinstance(doc.get(key), list):
                return doc[key]
    return doc if isinstance(doc, list) else []


def cmd_compare(a) -> dict:
    target, _, _ = models(a.work, a.smoke)
    prompts = prompt_ids(target, a.requests)
    vllm_bin = Path(a.vllm_bin) if a.vllm_bin else None
    runs = {}
    logs = a.work / "logs"
    # Both servers start together (two at most); requests go to one at a time.
    with srv.serve("laguna-cmp-a", target, PORT + 2, logs, KIND.spec_config(Path(a.a)),
                   vllm_bin=vllm_bin) as pa, \
            srv.serve("laguna-cmp-b", target, PORT + 3, logs, KIND.spec_config(Path(a.b)),
                      vllm_bin=vllm_bin) as pb:
        for label, (p, log), port in (("a", pa, PORT + 2), ("b", pb, PORT + 3)):
            if not srv.wait_up(p, port):
                runs[label] = {"error": root_cause(log, "Error"), "log": str(log)}
                continue
            try:
                runs[label] = {"log": str(log), "requests": greedy_counters(
                    port, f"laguna-cmp-{label}", prompts, a.tokens)}
            except OSError as e:  # HTTP 500 / dead engine: record the root cause, go on
                runs[label] = {"error": f"{e}: {root_cause(log, 'Error:')}", "log": str(log)}
    out = {"a": str(a.a), "b": str(a.b), "vllm_bin": str(vllm_bin or srv.VENV / "bin/vllm")}
    if all("requests" in r for r in runs.values()):
        ra, rb = runs["a"]["requests"], runs["b"]["requests"]
        out["equal_counters"] = sum(x["vllm"] == y["vllm"] for x, y in zip(ra, rb))
        out["equal_outputs"] = sum(x["output"] == y["output"] for x, y in zip(ra, rb))
        out["requests"] = len(ra)
        out["per_request"] = [{"a": x["vllm"], "b": y["vllm"]} for x, y in zip(ra, rb)]
    else:
        out["errors"] = runs
    return out


KERNEL_LINE = "Using CPUWNA16LinearKernel for CompressedTensorsWNA16"


def kernel_after_drafter(log: Path) -> bool:
    """The W4A16 kernel line appears after vLLM starts loading the drafter (the target is dense)."""
    text = log.read_text(errors="replace")
    at = text.find("Loading drafter model...")
    return at >= 0 and KERNEL_LINE in text[at:]


def cmd_bench(a) -> dict:
    """`sparkulator bench` of the baseline arm against each other arm in turn: two servers at
    most (the baseline stays up), URL arms, warm-up excluded, >= 2 repeats."""
    import subprocess
    target, draft, _ = models(a.work, a.smoke)
    arms = [x.split("=", 1) for x in a.arm]
    base_name, base_draft = arms[0]
    out = {"pairs": []}
    prompts = prompt_ids(target, a.requests)
    vllm_bin = Path(a.vllm_bin) if a.vllm_bin else None
    with srv.serve(base_name, target, PORT + 4, a.work / "logs",
                   KIND.spec_config(Path(base_draft)), vllm_bin=vllm_bin) as (bp, blog):
        for i, (name, d) in enumerate(arms[1:]):
            with srv.serve(name, target, PORT + 5, a.work / "logs",
                           KIND.spec_config(Path(d)), vllm_bin=vllm_bin) as (p, log):
                if not srv.wait_up(bp, PORT + 4):
                    raise SystemExit(f"{base_name} did not come up: {blog}")
                if i == 0 and a.requests:  # the match requests, while the other arm starts
                    runs = greedy_counters(PORT + 4, base_name, prompts, a.tokens)
                    (a.work / "match.json").write_text(json.dumps({"runs": runs}) + "\n")
                if not srv.wait_up(p, PORT + 5):
                    raise SystemExit(f"{name} did not come up: {log}")
                js = a.work / f"bench-{base_name}-vs-{name}.json"
                cmd = [a.spk, "bench", "--arm", f"{base_name}=http://127.0.0.1:{PORT + 4}",
                       "--arm", f"{name}=http://127.0.0.1:{PORT + 5}", "--prompt-lengths",
                       str(a.prompt_tokens), "--max-tokens", str(a.tokens), "--repeats",
                       str(a.repeats), "--warmup", "1", "--json", str(js)]
                r = subprocess.run(cmd, capture_output=True, text=True)
                (a.work / f"bench-{base_name}-vs-{name}.txt").write_text(r.stdout + r.stderr)
                print(r.stdout, flush=True)
                out["pairs"].append({"arm": name, "cmd": cmd, "exit": r.returncode,
                                     "json": str(js), "kernel_after_drafter":
                                     kernel_after_drafter(log), "log": str(log)})
        out["baseline_kernel_after_drafter"] = kernel_after_drafter(blog)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=["build", "match", "replay", "cases", "compare", "bench"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--draft")
    ap.add_argument("--spk", default="build/sparkulator")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--vllm-bin")
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--arm", action="append", default=[], help="NAME=DRAFT (first: baseline)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.command == "build":
        result = dict(zip(("target", "draft", "times"), map(str, models(a.work, a.smoke))))
    else:
        result = {"match": cmd_match, "replay": cmd_replay, "cases": cmd_cases,
                  "compare": cmd_compare, "bench": cmd_bench}[a.command](a)
    out = a.work / f"{a.command}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "per_request")},
                     indent=2))


if __name__ == "__main__":
    main()
