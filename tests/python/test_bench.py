"""End-to-end tests of `sparkulator bench` against real HTTP servers on 127.0.0.1: the stand-in server
(tests/python/standin_server.py, which says in its docstring and Server header that it is a stand-in)
with known ground truth."""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import standin_server  # noqa: E402

STANDIN = os.path.join(HERE, "standin_server.py")
STEP = 0.02
MAX_TOKENS = 41


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("stand-in did not start")


def _standins():
    """Starts stand-in servers on request (`start(*flags)` -> URL); kills them all at the end."""
    procs = []

    def start(*flags):
        port = free_port()
        p = subprocess.Popen([sys.executable, STANDIN, "--port", str(port), "--step-delay", str(STEP), *flags],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_up(port)
        return "http://127.0.0.1:%d" % port
    yield start
    for p in procs:
        p.kill()
        p.wait()


standin = pytest.fixture(_standins, name="standin")
# For a module fixture that serves once for all its tests (test_card.py's bench results).
standin_per_module = pytest.fixture(_standins, scope="module", name="standin_per_module")


@pytest.fixture(scope="module")
def bench(spk):
    """`sparkulator bench ARGS`, the finished process (any exit code: the tests check it)."""
    return lambda *args, timeout=60: spk("bench", *args, expect=None, timeout=timeout)


def expected(pattern, num_spec=3, max_tokens=MAX_TOKENS):
    steps, drafted, accepted, per_pos, chunks = standin_server.simulate(max_tokens, pattern, num_spec)
    tok_s = (max_tokens - 1) / (steps * STEP)
    return steps, drafted, accepted, per_pos, tok_s


def arm(results, name):
    return next(a for a in results["arms"] if a["name"] == name)


def test_two_arms_match_ground_truth(bench, standin, tmp_path):
    a = standin("--accept-pattern", "1", "--warmup-requests", "2", "--warmup-pattern", "0")
    b = standin("--accept-pattern", "2,1,3,0", "--engines", "2", "--counter-delay", "0.15",
                "--warmup-requests", "2", "--warmup-pattern", "0", "--token-ids")
    out, svg = tmp_path / "r.json", tmp_path / "p.svg"
    r = bench("--arm", "a=" + a, "--arm", "b=" + b, "--prompt-lengths", "32,128", "--repeats", "3",
              "--warmup", "2", "--max-tokens", str(MAX_TOKENS), "--json", str(out), "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    for name, pattern in (("a", [1]), ("b", [2, 1, 3, 0])):
        steps, drafted, accepted, per_pos, tok_s = expected(pattern)
        got = arm(res, name)
        spec = got["spec_decode"]
        n = 6  # 2 cells x 3 repeats; warm-ups (which accept nothing) must be excluded
        assert spec["draft_tokens"] == n * drafted
        assert spec["accepted_tokens"] == n * accepted
        assert spec["drafts"] == n * steps
        assert spec["acceptance_rate"] == pytest.approx(accepted / drafted, abs=1e-12)
        assert spec["mean_acceptance_length"] == pytest.approx(1 + accepted / steps, abs=1e-12)
        assert spec["per_position_rates"] == pytest.approx([p / steps for p in per_pos], abs=1e-12)
        for cell in got["cells"]:
            assert cell["n"] == 3 and cell["failures"] == 0
            assert cell["median_tok_s"] == pytest.approx(tok_s, rel=0.05)
            for key in ("mean_tok_s", "stdev_tok_s", "mad_tok_s", "relative_mad", "noisy"):
                assert key in cell
    # Prompts were cut to the exact length with /tokenize.
    measured = [q for q in res["requests"] if not q["warmup"]]
    assert len(measured) == 12
    assert all(q["prompt_tokens"] == q["prompt_length"] for q in measured)
    assert sum(q["warmup"] for q in res["requests"]) == 4
    assert res["prompts"]["exact"] is True
    # Arm b sends token_ids: first-chunk tokens come from them; arm a falls back to 1.
    assert {q["first_chunk_tokens_source"] for q in measured if q["arm"] == "b"} == {"token_ids"}
    # Comparison with a CI around the true ratio.
    cmp = res["comparisons"][0]
    assert (cmp["baseline"], cmp["arm"]) == ("a", "b")
    true_ratio = expected([2, 1, 3, 0])[4] / expected([1])[4]
    assert cmp["ratio"] == pytest.approx(true_ratio, rel=0.05)
    assert cmp["ci_low"] < cmp["ratio"] < cmp["ci_high"]
    assert cmp["bootstrap_ci_low"] is not None and cmp["log_ratio_se"] > 0
    assert cmp["decomposition"]["verify_steps_ratio"] == pytest.approx(
        expected([2, 1, 3, 0])[0] / expected([1])[0], rel=1e-9)
    for key in ("server", "model", "flags", "build", "host"):
        assert key in res
    assert res["model"] == "standin-model"
    # ABBA order of measured requests.
    order = []
    for q in measured:
        if not order or order[-1] != q["arm"]:
            order.append(q["arm"])
    assert "".join(order) == "abab"  # blocks AB BA AB: a bb aa b
    # Card tables and SVG.
    assert "| prompt | a tok/s | b tok/s | delta b |" in r.stdout
    assert "| arm | drafted | accepted | acceptance |" in r.stdout
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    assert len([e for e in root.iter() if e.tag.endswith("circle")]) == 4


def test_llamacpp_schema_chat_and_no_spec(bench, standin, tmp_path):
    a = standin("--no-spec", "--tokens-per-chunk", "4")
    b = standin("--llamacpp", "--accept-pattern", "3")
    out = tmp_path / "r.json"
    r = bench("--arm", "plain=" + a, "--arm", "llama=" + b, "--chat", "--prompt-lengths", "16", "--repeats", "2",
              "--warmup", "1", "--max-tokens", str(MAX_TOKENS), "--json", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    plain = arm(res, "plain")
    assert plain["spec_decode"] is None
    assert "| plain | no speculative decoding |" in r.stdout
    # 4 tokens per chunk: counting chunks would give a quarter of the rate.
    chunks = math.ceil((MAX_TOKENS - 1) / 4)
    assert plain["cells"][0]["median_tok_s"] == pytest.approx((MAX_TOKENS - 1) / (chunks * STEP), rel=0.05)
    steps, drafted, accepted, _, _ = expected([3])
    assert arm(res, "llama")["spec_decode"]["accepted_tokens"] == 2 * accepted
    assert arm(res, "llama")["spec_decode"]["draft_tokens"] == 2 * drafted


def test_failures_are_counted(bench, standin, tmp_path):
    a = standin()
    b = standin("--fail-every", "3", "--malformed-every", "5")
    out = tmp_path / "r.json"
    r = bench("--arm", "a=" + a, "--arm", "b=" + b, "--prompt-lengths", "16", "--repeats", "6", "--warmup", "1",
              "--max-tokens", "21", "--json", str(out))
    assert r.returncode == 1, r.stderr
    res = json.loads(out.read_text())
    errors = [q["error"] for q in res["requests"] if q["arm"] == "b" and not q["warmup"]]
    # Completion requests 2..7 are measured: #3 and #6 answer 503, #5 is malformed.
    assert sum(e is not None and e.startswith("HTTP 503") for e in errors) == 2
    assert sum(e is not None and "malformed" in e for e in errors) == 1
    assert arm(res, "b")["cells"][0]["failures"] == 3
    assert arm(res, "b")["cells"][0]["n"] == 3
    assert "[3 failed]" in r.stdout


def test_stream_delivered_in_a_burst_is_counted_not_timed(bench, standin, tmp_path):
    a = standin("--burst-every", "2")
    out = tmp_path / "r.json"
    r = bench("--arm", "a=" + a, "--prompt-lengths", "16", "--repeats", "4", "--warmup", "1",
              "--max-tokens", "21", "--json", str(out))
    assert r.returncode == 1, r.stderr
    res = json.loads(out.read_text())
    measured = [q for q in res["requests"] if not q["warmup"]]
    bursts = [q for q in measured if q["error"] and "burst" in q["error"]]
    assert len(bursts) == 2 and all(q["decode_tok_s"] is None for q in bursts)
    cell = arm(res, "a")["cells"][0]
    assert cell["failures"] == 2 and cell["n"] == 2
    # The timed requests are plausible: no absurd rate leaks into the mean.
    assert cell["mean_tok_s"] < 10_000


def test_hang_times_out_and_dead_server_fails(bench, standin, tmp_path):
    hang = standin("--hang-after", "2")
    out = tmp_path / "r.json"
    r = bench("--arm", "h=" + hang, "--prompt-lengths", "16", "--repeats", "2", "--warmup", "1",
              "--max-tokens", "21", "--request-timeout", "1", "--no-metrics", "--json", str(out))
    assert r.returncode == 1
    errs = [q["error"] for q in json.loads(out.read_text())["requests"] if not q["warmup"]]
    assert errs[0] is None and "timed out" in errs[1]

    dies = standin("--die-after", "2")
    r = bench("--arm", "d=" + dies, "--prompt-lengths", "16", "--repeats", "3", "--warmup", "1",
              "--max-tokens", "21", "--json", str(out))
    assert r.returncode == 1
    errs = [q["error"] for q in json.loads(out.read_text())["requests"] if not q["warmup"]]
    assert errs[0] is None and all(e for e in errs[1:])


def test_unreachable_server(bench):
    r = bench("--arm", "x=http://127.0.0.1:%d" % free_port(), "--repeats", "1")
    assert r.returncode == 3
    assert "cannot connect to http://127.0.0.1" in r.stderr and "arm x" in r.stderr


def standin_processes(marker):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def test_cmd_arm_launches_and_leaves_no_orphan(bench, tmp_path):
    marker = "--warmup-pattern=%d" % free_port()  # unique text in the child's argv
    cmd = "cmd:%s %s --port {port} --step-delay %s --accept-pattern 2 %s" % (sys.executable, STANDIN, STEP, marker)
    out = tmp_path / "r.json"
    r = bench("--arm", "one=" + cmd, "--arm", "two=" + cmd, "--prompt-lengths", "16", "--repeats", "2",
              "--warmup", "1", "--max-tokens", "21", "--json", str(out), "--log-dir", str(tmp_path), "--stop-grace", "2")
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    # ABBA with launched arms: one | two two | one -> 3 launches, logs kept.
    logs = arm(res, "one")["logs"] + arm(res, "two")["logs"]
    assert len(logs) == 3 and all(os.path.exists(p) for p in logs)
    assert "standin listening" in open(logs[0]).read()
    assert arm(res, "two")["spec_decode"]["accepted_tokens"] == 2 * expected([2], max_tokens=21)[2]
    assert standin_processes(marker) == []


def test_launch_command_that_exits_early_shows_its_log(bench, tmp_path):
    cmd = "cmd:%s -c \"import sys; print('model file missing: /nope'); sys.exit(4)\"" % sys.executable
    r = bench("--arm", "bad=" + cmd, "--repeats", "1", "--log-dir", str(tmp_path))
    assert r.returncode == 3
    assert "exited with status 4" in r.stderr
    assert "model file missing: /nope" in r.stderr


def test_ctrl_c_stops_servers_and_keeps_results(spk_path, tmp_path):
    marker = "--warmup-pattern=%d" % free_port()
    cmd = "cmd:%s %s --port {port} --step-delay %s %s" % (sys.executable, STANDIN, STEP, marker)
    out = tmp_path / "r.json"
    p = subprocess.Popen([spk_path, "bench", "--arm", "a=" + cmd, "--prompt-lengths", "16", "--repeats", "200",
                          "--warmup", "1", "--max-tokens", "21", "--json", str(out), "--log-dir", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = 0
    for line in p.stderr:
        if "block" in line:
            seen += 1
            if seen == 3:
                break
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 130, stderr
    assert "interrupted" in stderr
    res = json.loads(out.read_text())
    assert res["interrupted"] is True
    assert len([q for q in res["requests"] if not q["warmup"]]) >= 3
    assert "| prompt | a tok/s |" in stdout
    assert standin_processes(marker) == []


def test_report_pools_by_inverse_variance(spk, tmp_path):
    files = []
    for i, (lr, se) in enumerate(((0.10, 0.02), (0.16, 0.04), (0.05, 0.08))):
        doc = {"comparisons": [{"baseline": "bf16", "arm": "w4a16", "ratio": math.exp(lr), "log_ratio": lr,
                                "log_ratio_se": se, "cells": [{"prompt_tokens": 512, "ratio": math.exp(lr),
                                                               "log_ratio": lr, "log_ratio_se": se}]}]}
        path = tmp_path / ("m%d.json" % i)
        path.write_text(json.dumps(doc))
        files.append(str(path))
    pooled_json = tmp_path / "pooled.json"
    r = spk("bench", "report", *files, "--json", pooled_json, expect=None)
    assert r.returncode == 0, r.stderr
    w = [1 / 0.02 ** 2, 1 / 0.04 ** 2, 1 / 0.08 ** 2]
    mean = (0.10 * w[0] + 0.16 * w[1] + 0.05 * w[2]) / sum(w)
    se = 1 / math.sqrt(sum(w))
    pooled = json.loads(pooled_json.read_text())["pooled"]
    overall = next(p for p in pooled if p["prompt_tokens"] == "all")
    assert overall["n_machines"] == 3
    assert overall["log_ratio"] == pytest.approx(mean, abs=1e-12)
    assert overall["log_ratio_se"] == pytest.approx(se, abs=1e-12)
    assert overall["ci_low"] == pytest.approx(math.exp(mean - 1.96 * se), abs=1e-12)
    assert "| w4a16 vs bf16 | all | 3 |" in r.stdout


PROMPTS = [
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Write a haiku about d\u00e9lta."}]},
    {"prompt": "def fibonacci(n):", "max_tokens": 5},
    {"messages": [{"role": "user", "content": "Explain ABBA blocks."}]},
]


def write_prompts(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def sent(record):
    return [json.loads(line) for line in record.read_text().splitlines()]


def ratio_interval(num, den, cap=math.inf):
    """EstimateRatioOfTotals (stats.h) in Python: the ratio of totals and its 95% t interval over blocks."""
    n, ratio = len(num), sum(num) / sum(den)
    ss = sum((a - ratio * d) ** 2 for a, d in zip(num, den))
    half = {2: 4.303, 3: 3.182}[n - 1] * math.sqrt(ss / (n * (n - 1))) / (sum(den) / n)
    return ratio, max(0.0, ratio - half), min(cap, ratio + half)


def test_prompts_file_sends_its_prompts_to_both_arms_and_stops_at_eos(bench, standin, tmp_path):
    records = {name: tmp_path / ("sent-%s.jsonl" % name) for name in "ab"}
    a = standin("--accept-pattern", "1", "--eos-after", "9", "--record", str(records["a"]))
    b = standin("--accept-pattern", "2,1,3,0", "--eos-after", "9", "--record", str(records["b"]))
    prompts, out = write_prompts(tmp_path / "prompts.jsonl", PROMPTS), tmp_path / "r.json"
    r = bench("--arm", "a=" + a, "--arm", "b=" + b, "--prompts", prompts, "--warmup", "1",
              "--max-tokens", str(MAX_TOKENS), "--json", str(out))
    assert r.returncode == 0, r.stderr
    # Each arm: one warm-up (the first prompt), then blocks 0, 1, 2 (the default repeats is the number of
    # prompts) send the file's prompts in order, the same to both arms.
    for name in "ab":
        bodies = sent(records[name])
        assert [q["path"] for q in bodies] == ["/v1/chat/completions", "/v1/chat/completions",
                                               "/v1/completions", "/v1/chat/completions"]
        assert bodies[1]["body"]["messages"] == PROMPTS[0]["messages"]
        assert bodies[2]["body"]["prompt"] == PROMPTS[1]["prompt"]
        assert bodies[3]["body"]["messages"] == PROMPTS[2]["messages"]
        assert [q["body"]["max_tokens"] for q in bodies] == [MAX_TOKENS, MAX_TOKENS, 5, MAX_TOKENS]
        for q in bodies:  # EOS is not ignored by default: nothing forces the length
            assert "ignore_eos" not in q["body"] and "min_tokens" not in q["body"]
            assert q["body"]["model"] == "standin-model" and q["body"]["stream"] is True
    res = json.loads(out.read_text())
    assert res["prompts"]["method"] == "file" and res["prompts"]["count"] == 3
    assert (res["prompts"]["chat"], res["prompts"]["text"]) == (2, 1)
    assert res["flags"]["prompts_file"] == prompts and res["flags"]["ignore_eos"] is False
    measured = [q for q in res["requests"] if not q["warmup"]]
    assert [(q["arm"], q["block"], q["variant"]) for q in measured] == [
        ("a", 0, 0), ("b", 0, 0), ("b", 1, 1), ("a", 1, 1), ("a", 2, 2), ("b", 2, 2)]
    # Stopped at EOS (9 tokens) or at the line's max_tokens (5), and still counted as complete.
    assert [q["completion_tokens"] for q in measured if q["arm"] == "a"] == [9, 5, 9]
    assert all(q["ok"] and q["error"] is None for q in measured)
    assert [c["prompt_tokens"] for c in arm(res, "a")["cells"]] == [0]
    assert "| prompts file |" in r.stdout
    assert "in file order, cycled over the blocks; generation ends at EOS" in r.stdout
    # Acceptance with its 95% interval over the blocks (one request per block), from the ground truth.
    for name, pattern in (("a", [1]), ("b", [2, 1, 3, 0])):
        blocks = [standin_server.simulate(n, pattern, 3) for n in (9, 5, 9)]
        steps = [s[0] for s in blocks]
        spec = arm(res, name)["spec_decode"]
        assert spec["ci_blocks"] == 3
        length, low, high = ratio_interval([s[2] for s in blocks], steps)
        assert spec["mean_acceptance_length"] == pytest.approx(1 + length, abs=1e-12)
        assert spec["mean_acceptance_length_ci_low"] == pytest.approx(1 + low, abs=1e-12)
        assert spec["mean_acceptance_length_ci_high"] == pytest.approx(1 + high, abs=1e-12)
        rate, low, high = ratio_interval([s[2] for s in blocks], [s[1] for s in blocks], cap=1.0)
        assert (spec["acceptance_rate_ci_low"], spec["acceptance_rate_ci_high"]) == pytest.approx((low, high), abs=1e-12)
        for i in range(3):
            _, low, high = ratio_interval([s[3][i] for s in blocks], steps, cap=1.0)
            assert spec["per_position_ci_low"][i] == pytest.approx(low, abs=1e-12)
            assert spec["per_position_ci_high"][i] == pytest.approx(high, abs=1e-12)
    spec_b = arm(res, "b")["spec_decode"]
    assert spec_b["mean_acceptance_length_ci_low"] < spec_b["mean_acceptance_length"] < spec_b["mean_acceptance_length_ci_high"]
    assert "%.3f [%.3f, %.3f]" % (spec_b["mean_acceptance_length"], spec_b["mean_acceptance_length_ci_low"],
                                  spec_b["mean_acceptance_length_ci_high"]) in r.stdout


def test_prompts_file_with_ignore_eos_forces_the_length(bench, standin, tmp_path):
    record = tmp_path / "sent.jsonl"
    a = standin("--eos-after", "9", "--record", str(record))
    prompts, out = write_prompts(tmp_path / "prompts.jsonl", PROMPTS[:2]), tmp_path / "r.json"
    r = bench("--arm", "a=" + a, "--prompts", prompts, "--ignore-eos", "--repeats", "4", "--warmup", "1",
              "--max-tokens", "21", "--json", str(out))
    assert r.returncode == 0, r.stderr
    bodies = [q["body"] for q in sent(record)]
    assert len(bodies) == 5
    assert all(q["ignore_eos"] is True and q["min_tokens"] == q["max_tokens"] for q in bodies)
    measured = [q for q in json.loads(out.read_text())["requests"] if not q["warmup"]]
    assert [q["variant"] for q in measured] == [0, 1, 0, 1]  # cycled
    assert [q["completion_tokens"] for q in measured] == [21, 5, 21, 5]


@pytest.mark.parametrize("text, message", [
    ('{"prompt": "a"}\n{oops\n', ":2: not valid JSON"),
    ('{"prompt": "a"}\n\n[1, 2]\n', ":3: not a JSON object"),
    ('{"max_tokens": 3}\n', ':1: needs a "messages" or a "prompt" field'),
    ('{"prompt": 7}\n', ':1: "prompt" must be a non-empty string'),
    ('{"messages": {"role": "user"}}\n', ':1: "messages" must be a non-empty array of {"role", "content"} objects'),
    ('{"messages": [{"role": "user", "content": 1}]}\n',
     ':1: "messages"[0]."content" must be a string or an array of parts'),
    ('{"prompt": "a", "max_tokens": "9"}\n', ':1: "max_tokens" must be a positive integer'),
    ('{"prompt": "a", "temperature": 1}\n', ':1: unknown field "temperature" (known: messages, prompt, max_tokens)'),
    ("", ': no prompts (one JSON object per line: {"messages": [...]} or {"prompt": "..."})'),
], ids=["not-json", "not-object", "neither-field", "prompt-type", "messages-type", "content-type",
        "max-tokens-type", "unknown-field", "empty-file"])
def test_malformed_prompts_file_is_refused_before_any_server(bench, tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    # No server listens on this port: exit 2 (not 3) shows the file was refused before any request.
    r = bench("--arm", "x=http://127.0.0.1:%d" % free_port(), "--prompts", str(path))
    assert r.returncode == 2, r.stderr
    assert r.stderr == "sparkulator: error: --prompts %s%s\n" % (path, message)


def test_prompts_file_refuses_the_grid_flags(bench, tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    url = "x=http://127.0.0.1:%d" % free_port()
    r = bench("--arm", url, "--prompts", prompts, "--chat")
    assert r.returncode == 2
    assert r.stderr == ('sparkulator: error: --chat and --prompts: each line of the file chooses its endpoint '
                        '("messages": chat, "prompt": completions)\n')
    r = bench("--arm", url, "--prompts", prompts, "--prompt-lengths", "16")
    assert r.returncode == 2
    assert r.stderr == ("sparkulator: error: --prompt-lengths and --prompts: the file's prompts replace the "
                        "length grid; give one\n")
