"""Measures the EAGLE-3 kind on a real vLLM: the served-vs-trainer match, acceptance of the BF16, W4A16
RTN and W4A16 search heads with `sparkulator bench`, and the failure cases with `sparkulator check`.

STAND-IN for branch e2e's run.py kind loop (`python -m tests.e2e full`), which calls the same KIND;
this module exists so the figures in docs/e2e-eagle3.md can be reproduced before that loop runs here.

  $VENV/bin/python -m tests.e2e.eagle3_measure --work DIR --spk build/sparkulator [--port 18150]
      [--target T] [--head H] [--smoke] [--repeats 2] [--skip-bench] [--skip-cases]
Writes DIR/eagle3-summary.json and the server logs under DIR/logs. At most two servers run at once,
each with one OpenMP thread; every server is killed as a process group, also on errors.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time

from tests.e2e import eagle3, env
from tests.e2e import server as e2e_server
from tests.e2e import eagle3_standin as standin

ARMS = {"w4a16-rtn": [], "w4a16-search": ["--method", "search"]}
KERNEL = "Using CPUWNA16LinearKernel for CompressedTensorsWNA16"


def sh(cmd: list[str], log: pathlib.Path) -> tuple[int, str]:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    log.write_text(p.stdout + p.stderr)
    return p.returncode, p.stdout + p.stderr


def drafter_kernel_line(log: str) -> str | None:
    """The W4A16 kernel line printed after `Loading drafter model...` (the draft's own layers)."""
    after = log.split("Loading drafter model...", 1)
    if len(after) < 2:
        return None
    line = next((l for l in after[1].splitlines() if KERNEL in l), None)
    return line.split("] ", 1)[-1] if line else None


def root_cause(log: str) -> str:
    """The first error line a worker logs (WARNING lines such as oneDNN's matmul fallback are not
    causes); a kernel-selection error gets its CPUWNA16 reason line appended."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"(Error|Exception): ", line) and " WARNING " not in line:
            text = re.sub(r"^.*?\] ", "", line).strip()
            if text.endswith("Reasons:"):
                reason = next((l for l in lines[i:] if "CPUWNA16LinearKernel cannot" in l), "")
                text += " " + re.sub(r"^.*?\] ", "", reason).strip()
            return text[:400]
    return ""


def check(spk: pathlib.Path, args: list[str], log: pathlib.Path) -> dict:
    rc, out = sh([spk, "check", *args, "--json"], log)
    try:
        codes = sorted({f.get("code") for f in json.loads(out).get("findings", [])})
    except (json.JSONDecodeError, AttributeError):
        codes = sorted(set(re.findall(r"\b([A-Z][A-Z0-9_]{3,})\b", out)))
    return {"args": args, "exit": rc, "codes": codes}


def bench(spk: pathlib.Path, arms: dict[str, str], out: pathlib.Path, repeats: int, tokens: int) -> dict:
    cmd = [spk, "bench", *[a for n, u in arms.items() for a in ("--arm", f"{n}={u}")],
           "--prompt-lengths", "256", "--repeats", str(repeats), "--warmup", "1",
           "--max-tokens", str(tokens), "--json", out]
    t0 = time.time()
    rc, text = sh(cmd, out.with_suffix(".txt"))
    doc = json.loads(out.read_text()) if out.exists() else {}
    return {"exit": rc, "seconds": round(time.time() - t0), "doc": doc, "stdout_tail": text[-3000:]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.eagle3_measure")
    ap.add_argument("--work", type=pathlib.Path, required=True)
    ap.add_argument("--spk", type=pathlib.Path, required=True)
    ap.add_argument("--cache", type=pathlib.Path, default=env.cache_root())
    ap.add_argument("--port", type=int, default=18150)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--target", type=pathlib.Path, help="use this target folder instead of building one")
    ap.add_argument("--head", type=pathlib.Path, help="use this BF16 head folder instead of training one")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-cases", action="store_true")
    a = ap.parse_args(argv)
    work, logs = a.work.resolve(), a.work.resolve() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary: dict = {"timings_s": {}}
    t = time.time()
    target = a.target.resolve() if a.target else eagle3.KIND.build_target(a.cache, a.smoke)
    head = a.head.resolve() if a.head else eagle3.KIND.build_draft(a.cache, target, a.smoke)
    summary.update(target=str(target), head=str(head), timings_s={"build": round(time.time() - t)})
    # The quantized arms are served packed. On an AVX2-only host branch e2e's plugin supplies the
    # cpu_gemm_wna16 that vLLM's _C_AVX2 lacks (eagle3-w4a16-cpu-kernel case); the trainer's replay
    # uses the dequantized copy (`sparkulator dequantize`), the same weights.
    heads, dense_heads = {"bf16": head}, {"bf16": head}
    for arm, flags in ARMS.items():
        out = work / f"head-{arm}"
        t = time.time()
        rc, text = sh([a.spk, "quantize", head, out, "--scheme", "w4a16", *flags,
                       *eagle3.KIND.quantize_args()], logs / f"quantize-{arm}.txt")
        summary["timings_s"][f"quantize-{arm}"] = round(time.time() - t)
        if rc != 0:
            raise RuntimeError(f"sparkulator quantize for {arm} exited {rc}:\n{text[-2000:]}")
        dense = work / f"head-{arm}-dequantized"
        rc, text = sh([a.spk, "dequantize", out, dense, "--force"], logs / f"dequantize-{arm}.txt")
        if rc != 0:
            raise RuntimeError(f"sparkulator dequantize for {arm} exited {rc}:\n{text[-2000:]}")
        heads[arm], dense_heads[arm] = out, dense
        sh([a.spk, "inspect", out, "--json"], logs / f"inspect-{arm}.json")
        summary.setdefault("check", {})[arm] = check(a.spk, [str(out), "--target", str(target)],
                                                     logs / f"check-{arm}.txt")

    def server(arm: str, port: int) -> standin.Server:
        spec = json.dumps(eagle3.KIND.spec_config(heads[arm]))
        return standin.Server(arm, target, port, logs / f"{arm}.log", ["--speculative-config", spec])

    if not a.skip_bench:
        benches = {}
        t = time.time()
        with server("bf16", a.port) as bf16:
            prompt = eagle3.prompt_ids(target)
            summary["match"] = {"bf16": {k: v for k, v in eagle3.match_request(
                bf16.url, head, target, prompt, 48).items() if k != "generated"}}
            summary["timings_s"]["match"] = round(time.time() - t)
            for i, arm in enumerate(ARMS):
                with server(arm, a.port + 1 + i) as q:
                    summary["match"][arm] = {k: v for k, v in eagle3.match_request(
                        q.url, dense_heads[arm], target, prompt, 48).items() if k != "generated"}
                    t = time.time()
                    benches[arm] = bench(a.spk, {"bf16": bf16.url, arm: q.url},
                                         work / f"bench-{arm}.json", a.repeats, a.tokens)
                    summary["timings_s"][f"bench-{arm}"] = round(time.time() - t)
                summary.setdefault("drafter_kernel_line", {})[arm] = drafter_kernel_line(
                    (logs / f"{arm}.log").read_text(errors="replace"))
        summary["bench"] = {arm: {k: v for k, v in b.items() if k != "doc"} for arm, b in benches.items()}
        summary["bench_files"] = {arm: str(work / f"bench-{arm}.json") for arm in benches}
        summary["bf16_log_has_kernel_line"] = KERNEL in (logs / "bf16.log").read_text(errors="replace")
    if not a.skip_cases:
        cases = eagle3.KIND.failure_cases(work / "cases", target, head, a.spk)
        summary["cases"] = []
        for i, case in enumerate(cases):
            t = time.time()
            spec = json.dumps(case.spec_config) if case.spec_config else None
            srv = standin.Server(case.name, case.target, a.port + 10 + i, logs / f"{case.name}.log",
                                 (["--speculative-config", spec] if spec else []) + case.extra_args,
                                 case.extra_env)
            srv.start()
            up, probe = srv.wait_up(900), None
            try:
                if up and case.probe_request:
                    try:
                        probe = e2e_server.post(srv.url + "/v1/completions", {
                            "model": case.name, "prompt": "def f(x):\n    return",
                            "max_tokens": 8, "temperature": 0}, timeout=300)["choices"][0]["text"]
                    except OSError as e:
                        probe = f"request failed: {e}"
                    time.sleep(3)
                alive = srv.alive()
            finally:
                srv.stop()
            log = (logs / f"{case.name}.log").read_text(errors="replace")
            loaded = up and alive and not (probe or "").startswith("request failed")
            summary["cases"].append({
                "name": case.name, "what": case.what, "vllm_loaded": loaded, "probe": probe,
                "root_cause": root_cause(log), "expect_error_seen": case.expect_error in log,
                "drafter_kernel_line": drafter_kernel_line(log),
                "check_with_target": check(a.spk, case.check_args, logs / f"check-{case.name}.txt"),
                "check_alone": check(a.spk, case.check_args[:1], logs / f"check-{case.name}-alone.txt"),
                "seconds": round(time.time() - t)})
            print(json.dumps(summary["cases"][-1]), flush=True)
    (work / "eagle3-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
