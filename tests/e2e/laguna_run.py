"""What the Laguna kind shows on vLLM beyond `python -m tests.e2e full` (run.py, which builds,
serves, benches the bf16/w4a16-rtn/w4a16-search arms, checks one request's predicted acceptance
and runs the failure cases):

  python -m tests.e2e.laguna_run match   --work W [--draft D] [--requests 6]
        greedy requests one at a time; vLLM's per-request spec-decode counters (per position too)
        vs the trainer's replay (laguna.predict_acceptance)
  python -m tests.e2e.laguna_run replay  --work W [--draft D]
        the trainer's side of a recorded match (no server)
  python -m tests.e2e.laguna_run overlay --work W
        the patched vLLM copy: `sparkulator check --vllm SITE`'s fix for laguna_dflash.py applied
  python -m tests.e2e.laguna_run compare --work W --a D1 --b D2 [--overlay]
        the same greedy requests on two drafts (both servers start together, on the overlay with
        --overlay): per-request counters and outputs must be equal (the patch proof: the
        quantized-q/k/v draft vs its dequantized-dense twin, laguna_breaks.with_dense_qkv)

Run under the vLLM venv's python from the repository root; at most two servers at once (server.py:
own process group, always stopped). Errors: a server that does not come up is recorded in the JSON
under W; misuse raises.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.e2e import env, measure, server
from tests.e2e import laguna_overlay as overlay
from tests.e2e.laguna import KIND, predict_acceptance
from tests.e2e.server import Server

PORT = 18230
COUNTERS = ("drafts", "drafted", "accepted", "per_position")
LAGUNA_DFLASH = "vllm/model_executor/models/laguna_dflash.py"


def models(smoke: bool) -> tuple[Path, Path]:
    target = KIND.build_target(env.cache_root(), smoke)
    return target, KIND.build_draft(env.cache_root(), target, smoke)


def spec_args(draft: Path) -> list[str]:
    return ["--speculative-config", json.dumps(KIND.spec_config(draft))]


def requests(srv: Server, count: int, tokens: int) -> list[dict]:
    """Greedy requests one at a time on held-out prompts; each with the counters it moved."""
    return [measure.request_counters(srv, p, tokens)
            for p in measure.held_out_prompts(count, 400)]


def with_predictions(runs: list[dict], target: Path, draft: Path) -> dict:
    for r in runs:
        r["predicted"] = {k: v for k, v in predict_acceptance(
            draft, target, r["prompt_ids"], r["token_ids"]).items() if k != "steps"}
        r["equal"] = all(r["predicted"][k] == r[k] for k in COUNTERS)
    return {"requests": len(runs), "equal": sum(r["equal"] for r in runs),
            "vllm_total": {k: sum(r[k] for r in runs) for k in COUNTERS[:3]},
            "predicted_total": {k: sum(r["predicted"][k] for r in runs) for k in COUNTERS[:3]},
            "runs": runs}


def cmd_match(a) -> dict:
    target, draft = models(a.smoke)
    draft = Path(a.draft) if a.draft else draft
    with Server("laguna-match", target, PORT, a.work, args=spec_args(draft)) as srv:
        if not srv.wait_healthy(900):
            return {"error": srv.root_cause(), "log": str(srv.log)}
        runs = requests(srv, a.requests, a.tokens)
    (a.work / "match-runs.json").write_text(json.dumps(runs) + "\n")
    return {"draft": str(draft), **with_predictions(runs, target, draft)}


def cmd_replay(a) -> dict:
    target, draft = models(a.smoke)
    draft = Path(a.draft) if a.draft else draft
    runs = json.loads((a.work / "match-runs.json").read_text())
    return {"draft": str(draft), **with_predictions(runs, target, draft)}


def overlay_dir(work: Path) -> Path:
    return work / "vllm-overlay"


def cmd_overlay(a) -> dict:
    site = env.site_packages()
    report = env.check(["--vllm", str(site)], a.work / "logs" / "check-vllm.txt")[2] or {}
    fixes = [f["fix"] for f in report.get("findings", [])
             if f.get("file", "").endswith("laguna_dflash.py") and f.get("fix")]
    if len(fixes) != 1:
        raise SystemExit(f"expected one laguna_dflash.py fix from check --vllm {site}, got "
                         f"{len(fixes)} (log: {a.work / 'logs' / 'check-vllm.txt'})")
    out = overlay.build(site, overlay_dir(a.work), fixes)
    return {"overlay": str(out), "patched": str(out / LAGUNA_DFLASH)}


def cmd_compare(a) -> dict:
    target, _ = models(a.smoke)
    extra = overlay.overlay_env(overlay_dir(a.work)) if a.overlay else {}
    servers = {label: Server(f"laguna-cmp-{label}", target, PORT + 1 + i, a.work,
                             args=spec_args(Path(d)), extra_env=extra)
               for i, (label, d) in enumerate((("a", a.a), ("b", a.b)))}
    runs = {}
    with servers["a"], servers["b"]:  # both start together; requests go to one at a time
        for label, srv in servers.items():
            if not srv.wait_healthy(900):
                runs[label] = {"error": srv.root_cause(), "log": str(srv.log)}
                continue
            try:
                runs[label] = {"log": str(srv.log), "requests": requests(srv, a.requests,
                                                                         a.tokens)}
            except OSError as e:  # HTTP 500 / a dead engine: the root cause, and go on
                runs[label] = {"error": f"{e}: {srv.root_cause()}", "log": str(srv.log)}
    out = {"a": a.a, "b": a.b, "overlay": bool(a.overlay)}
    if not all("requests" in r for r in runs.values()):
        return {**out, "errors": runs}
    ra, rb = runs["a"]["requests"], runs["b"]["requests"]
    return {**out, "requests": len(ra),
            "equal_counters": sum(all(x[k] == y[k] for k in COUNTERS) for x, y in zip(ra, rb)),
            "equal_outputs": sum(x["token_ids"] == y["token_ids"] for x, y in zip(ra, rb)),
            "per_request": [{"a": {k: x[k] for k in COUNTERS}, "b": {k: y[k] for k in COUNTERS}}
                            for x, y in zip(ra, rb)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=["match", "replay", "overlay", "compare"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--draft")
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--overlay", action="store_true", help="compare on WORK/vllm-overlay")
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    server.install_exit_handlers()
    result = {"match": cmd_match, "replay": cmd_replay, "overlay": cmd_overlay,
              "compare": cmd_compare}[a.command](a)
    (a.work / f"{a.command}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "per_request")},
                     indent=2))


if __name__ == "__main__":
    main()
