"""`sparkulator bench` against every server shape it must cope with, each a stand-in server on
127.0.0.1 (tests/python/standin_server.py; it says in its docstring and Server header that it is not
a real LLM server): vLLM (token ids as the prompt), a text-only server with /detokenize, one with
/tokenize alone, one without a tokenizer, SGLang's metrics, and a launched arm's memory. A missing
optional endpoint must degrade the run, say how, and never end it."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import standin_server  # noqa: E402
from test_bench import MAX_TOKENS, STANDIN, arm, bench, standin  # noqa: E402,F401

LENGTHS = [24, 77]


def run_shape(bench, start, tmp_path, *flags, extra=()):
    url = start(*flags)
    out = tmp_path / "r.json"
    r = bench("--arm", "a=" + url, "--prompt-lengths", ",".join(map(str, LENGTHS)), "--repeats", "2",
              "--warmup", "1", "--max-tokens", str(MAX_TOKENS), "--json", str(out), *extra)
    assert r.returncode == 0, r.stderr
    return r, json.loads(out.read_text())


def measured_prompt_tokens(res):
    return {(q["prompt_length"], q["prompt_tokens"]) for q in res["requests"] if not q["warmup"]}


def test_vllm_shape_sends_token_ids(bench, standin, tmp_path):
    r, res = run_shape(bench, standin, tmp_path)
    assert res["prompts"]["method"] == "token-ids" and res["prompts"]["exact"]
    assert res["prompts"]["degraded"] == []
    assert measured_prompt_tokens(res) == {(n, n) for n in LENGTHS}


def test_text_only_server_uses_detokenize(bench, standin, tmp_path):
    r, res = run_shape(bench, standin, tmp_path, "--no-token-prompts")
    assert res["prompts"]["method"] == "tokenize+detokenize" and res["prompts"]["exact"]
    assert "HTTP 400" in res["prompts"]["degraded"][0]
    assert "degraded: token ids as the prompt" in r.stderr
    assert measured_prompt_tokens(res) == {(n, n) for n in LENGTHS}


def test_no_detokenize_cuts_by_bisection(bench, standin, tmp_path):
    r, res = run_shape(bench, standin, tmp_path, "--no-token-prompts", "--no-detokenize")
    p = res["prompts"]
    assert p["method"] == "tokenize-bisection", p
    assert any("/detokenize answered HTTP 404" in d for d in p["degraded"])
    assert p["exact"] and p["largest_length_error_tokens"] == 0
    assert measured_prompt_tokens(res) == {(n, n) for n in LENGTHS}
    assert "degraded: no usable /detokenize" in r.stdout  # the Markdown says it too


def test_no_tokenize_estimates_loudly(bench, standin, tmp_path):
    r, res = run_shape(bench, standin, tmp_path, "--no-tokenize")
    assert res["prompts"]["method"] == "estimate" and not res["prompts"]["exact"]
    assert "ESTIMATED" in r.stderr and "ESTIMATED" in r.stdout
    # Speed and acceptance are still measured.
    assert arm(res, "a")["cells"][0]["n"] == 2 and arm(res, "a")["spec_decode"]["draft_tokens"] > 0


def test_sglang_metrics_give_acceptance_length_not_counts(bench, standin, tmp_path):
    pattern = [2, 1, 3, 0]
    r, res = run_shape(bench, standin, tmp_path, "--sglang", "--accept-pattern", "2,1,3,0")
    s = arm(res, "a")["spec_decode"]
    steps = standin_server.simulate(MAX_TOKENS, pattern, 3)[0]
    assert s["draft_tokens"] is None and s["accepted_tokens"] is None
    assert s["mean_acceptance_length"] == MAX_TOKENS / steps
    assert s["server_gauges"]["sglang:spec_accept_length"] > 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("| a | not available"))
    assert "%.3f" % (MAX_TOKENS / steps) in row


def test_memory_per_arm_url_and_launched(bench, standin, tmp_path):
    url = standin()
    out = tmp_path / "r.json"
    launched = "b=cmd:%s %s --port {port} --step-delay 0.02 --log-like-vllm" % (sys.executable, STANDIN)
    r = bench("--arm", "a=" + url, "--arm", launched, "--prompt-lengths", "16", "--repeats", "2",
              "--warmup", "1", "--max-tokens", "21", "--json", str(out), "--log-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    a, b = arm(res, "a")["memory"], arm(res, "b")["memory"]
    assert a["kind"] == "url" and 1 << 20 < a["metrics"]["process_resident_memory_bytes"] < 1 << 33
    assert b["kind"] == "launched"
    proc = b["process"]
    assert proc["samples"] >= 2 and proc["peak_rss_bytes"] == sum(p["rss_bytes"] for p in proc["processes"])
    assert any("python" in p["name"] for p in proc["processes"]) and proc["peak_rss_bytes"] > 1 << 20
    log = b["vllm_log"]
    assert (log["model_loading_gib"], log["target_checkpoint_gib"], log["draft_checkpoint_gib"]) == (1.52, 1.25, 0.25)
    assert any("Model loading took 1.52 GiB" in line for line in log["lines"])
    row = next(line for line in r.stdout.splitlines() if line.startswith("| b | 1.52 GiB"))
    assert "| 1.25 GiB | 0.25 GiB |" in row
