"""Measurements on running servers: greedy outputs and their agreement, spec-decode counters of
one request, and acceptance/decode speed per arm with `sparkulator bench` (URL arms).

Error policy: HTTP errors propagate (the caller records them); `bench` returns what sparkulator wrote
and its exit code (1 = some requests failed, counted in its tables), raising only when no results
file was written.
"""

from __future__ import annotations

import json
import math
import pathlib
import statistics
import time
import urllib.request

from tests.e2e import corpus, env
from tests.e2e.server import Server, post


# ---- greedy outputs ---------------------------------------------------------------------------------
def greedy(server: Server, prompts: list[str], tokens: int) -> list[dict]:
    """Greedy completions with their token ids (prompt ids too, via /tokenize)."""
    out = []
    for p in prompts:
        r = server.complete(p, tokens)
        prompt_ids = post(server.url + "/tokenize", {"model": server.name, "prompt": p,
                                                     "add_special_tokens": True})["tokens"]
        out.append({"prompt_ids": prompt_ids, "token_ids": r["choices"][0]["token_ids"],
                    "text": r["choices"][0]["text"]})
    return out


def agreement(ref: list[dict], other: list[dict]) -> dict:
    """Share of equal tokens position by position, and where outputs first diverge on average."""
    same = total = first = 0
    for x, y in zip(ref, other, strict=True):
        a, b = x["token_ids"], y["token_ids"]
        same += sum(i == j for i, j in zip(a, b))
        total += len(a)
        first += next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), len(a))
    return {"token_agreement": round(same / total, 4),
            "mean_first_divergence": round(first / len(ref), 2),
            "tokens_per_prompt": len(ref[0]["token_ids"]), "prompts": len(ref),
            "example_ref": ref[0]["text"][:80], "example_other": other[0]["text"][:80]}


# ---- counters -----------------------------------------------------------------------------------------
def scrape(url: str) -> dict:
    """vLLM's /metrics as {name: value}, summed over engines; per-position acceptance as name[pos]."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith("vllm:"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        if name.endswith("_created"):
            continue
        if "accepted_tokens_per_pos" in name:
            name += "[" + name_labels.split('position="', 1)[1].split('"', 1)[0] + "]"
        sums[name] = sums.get(name, 0.0) + float(value)
    return sums


def settled(url: str) -> dict:
    """Counters once no request runs and two scrapes agree."""
    prev = None
    for _ in range(100):
        cur = scrape(url)
        if cur.get("vllm:num_requests_running", 0) == 0 and cur == prev:
            return cur
        prev = cur
        time.sleep(0.2)
    return prev


def spec_counters(before: dict, after: dict) -> dict:
    def delta(key):
        return after.get(key, 0.0) - before.get(key, 0.0)
    drafts = delta("vllm:spec_decode_num_drafts_total")
    return {"drafts": int(drafts),
            "drafted": int(delta("vllm:spec_decode_num_draft_tokens_total")),
            "accepted": int(delta("vllm:spec_decode_num_accepted_tokens_total")),
            "per_position": [int(delta(k)) for k in sorted(after) if "per_pos" in k]}


def request_counters(server: Server, prompt: str, tokens: int) -> dict:
    """One greedy request with the spec-decode counters it moved, its prompt and output ids."""
    before = settled(server.url)
    [r] = greedy(server, [prompt], tokens)
    return dict(spec_counters(before, settled(server.url)), **r)


# ---- sparkulator bench --------------------------------------------------------------------------------
def bench(arms: dict[str, str], out: pathlib.Path, prompt_lengths: list[int], max_tokens: int,
          repeats: int, warmup: int) -> dict:
    """`sparkulator bench` over URL arms (the first is the baseline); returns
    {"exit", "json", "text", "arms": {NAME: acceptance figures}}."""
    args = ["bench"]
    for name, url in arms.items():
        args += ["--arm", f"{name}={url}"]
    args += ["--prompt-lengths", ",".join(map(str, prompt_lengths)), "--max-tokens", max_tokens,
             "--repeats", repeats, "--warmup", warmup, "--json", out, "--svg", out.with_suffix(".svg")]
    proc = env.sparkulator(*args, check=False, log=out.with_suffix(".txt"))
    if not out.exists():
        raise env.SparkulatorError(f"sparkulator bench wrote no {out} (exit {proc.returncode}):\n"
                                   f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    doc = json.loads(out.read_text())
    return {"exit": proc.returncode, "json": str(out), "text": proc.stdout,
            "arms": arm_figures(doc)}


def arm_figures(doc: dict) -> dict:
    """Per arm: drafted, accepted, rate, mean_acceptance_length (bench's counter deltas, warm-up
    excluded), decode_tok_s (mean over measured requests) with a 95% t interval, and the paired
    ratio to the baseline with its CI."""
    names = [a["name"] for a in doc["arms"]]
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in doc.get("requests", []):
        arm = r["arm"] if isinstance(r["arm"], str) else names[r["arm"]]
        if not r["warmup"] and r["ok"] and r["decode_tok_s"] is not None:
            rates[arm].append(r["decode_tok_s"])
    ratios = {c["arm"]: c for c in doc.get("comparisons", [])}
    out = {}
    for arm in doc["arms"]:
        s = arm.get("spec_decode") or {}
        name = arm["name"]
        mean, ci = mean_ci(rates[name])
        fig = {"drafted": s.get("draft_tokens"), "accepted": s.get("accepted_tokens"),
               "drafts": s.get("drafts"), "rate": s.get("acceptance_rate"),
               "mean_acceptance_length": s.get("mean_acceptance_length"),
               "per_position": s.get("per_position_rates"), "decode_tok_s": mean,
               "decode_tok_s_ci": ci, "requests": len(rates[name]), "failures": arm["failures"]}
        if name in ratios:
            c = ratios[name]
            fig["decode_ratio_vs_baseline"] = {k: c.get(k) for k in
                                               ("paired_ratio", "ci_low", "ci_high", "n_pairs")}
        out[name] = fig
    return out


_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 15: 2.13, 20: 2.09, 30: 2.04}


def mean_ci(values: list[float]) -> tuple[float | None, list[float] | None]:
    """Mean and its 95% Student-t interval (None with fewer than 2 values)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return round(mean, 2), None
    df = len(values) - 1
    t = _T95.get(df) or _T95[max(k for k in _T95 if k <= df)]
    half = t * statistics.stdev(values) / math.sqrt(len(values))
    return round(mean, 2), [round(mean - half, 2), round(mean + half, 2)]


def held_out_prompts(count: int, chars: int = 600) -> list[str]:
    return corpus.prompts(count, chars)
