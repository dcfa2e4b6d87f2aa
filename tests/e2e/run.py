"""The e2e runs: `smoke` (CI) and `full`, each writing WORK/summary.json.

smoke: the tiny Qwen3 target and its W4A16 copy on vLLM (kernel line, greedy agreement), the tiny
Qwen3-MoE with fused 3-D experts and the tiny Laguna MoE quantized to W4A16 (moe_run.py: fused-MoE
method line, greedy agreement with their dequantized weights; Laguna's dense router and correction
bias; `full` also serves its router-quantized copy, which fails as check says), the Qwen3 DFlash
draft BF16 vs W4A16-RTN (short bench, predicted vs reported acceptance of one greedy request), and
one broken copy of the target. Five vLLM starts (summary["vllm_starts"]): the two DFlash servers are
also the target part (`target_in_draft_servers`: BF16 target + BF16 draft is the BF16 greedy
reference, as greedy speculative decoding returns the target's tokens; W4A16 target + W4A16 draft
is the W4A16 target), then the Qwen3-MoE, the Laguna MoE and the broken copy start together.
full: the target pair on its own servers (every draft arm then runs on the BF16 target, so the
arms' acceptance compares), longer training and benches, the W4A16-search arm, all three broken
copies, every draft kind present (dflash_qwen3 here; eagle3 and laguna when their modules exist),
each kind's failure cases (each draft case also records the acceptance of two greedy requests, so
the wrong-target pairing compares with the BF16 target's compile-cache-bf16 case).

Error policy: an assertion that fails is recorded in summary["failures"] (exit 1) and the run goes on;
setup errors (no venv: exit 4, a sparkulator command that fails: exit 2) stop the run, and the summary
written so far says where. Servers are always stopped (server.py).
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import threading
import time
import traceback

from tests.e2e import cases, env, measure, moe_run, server
from tests.e2e.server import Server

KIND_MODULES = ["dflash_qwen3", "eagle3", "laguna"]
PORT = int(os.environ.get("E2E_PORT", "18100"))  # ports PORT .. PORT+14 are used
MOE_PORT_OFFSET = 13  # moe_run.py's Qwen3-MoE server
LAGUNA_MOE_PORT_OFFSET = 14  # moe_run.py's Laguna MoE servers (one at a time)
KERNEL_LINE = "Using CPUWNA16LinearKernel for CompressedTensorsWNA16"
DRAFTER_LINE = "Loading drafter model"
TARGET_ARM = "w4a16-rtn"  # smoke: the arm whose server serves the W4A16 target (Run.kind_part)
LANES = 3  # vLLM servers at once for failure cases


def settings(smoke: bool) -> dict:
    if smoke:
        return {"prompts": 4, "tokens": 24, "bench_lengths": [128], "bench_tokens": 48,
                "repeats": 2, "warmup": 1, "arms": ["bf16", "w4a16-rtn"],
                "broken": ["zero_point"], "predict_tokens": 48, "target_in_draft_servers": True}
    return {"prompts": 12, "tokens": 48, "bench_lengths": [128, 512], "bench_tokens": 96,
            "repeats": 3, "warmup": 1, "arms": ["bf16", "w4a16-rtn", "w4a16-search"],
            "broken": list(cases.BREAKAGES), "predict_tokens": 128,
            "target_in_draft_servers": False}


def discover_kinds(smoke: bool) -> tuple[list, dict]:
    """(kinds, skipped): every KIND_MODULES module that imports and exposes KIND; smoke runs the
    Qwen3 DFlash kind only."""
    kinds, skipped = [], {}
    for name in KIND_MODULES[:1] if smoke else KIND_MODULES:
        try:
            module = importlib.import_module(f"tests.e2e.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"tests.e2e.{name}":
                raise
            skipped[name] = f"tests/e2e/{name}.py is not on this branch"
            print(f"== kind {name} skipped: {skipped[name]}", flush=True)
            continue
        if not hasattr(module, "KIND"):
            skipped[name] = f"tests/e2e/{name}.py has no KIND"
            continue
        kinds.append(module.KIND)
    return kinds, skipped


class Run:
    def __init__(self, work: pathlib.Path, smoke: bool, cache: pathlib.Path | None):
        self.work, self.smoke = work, smoke
        self.cache = env.cache_root(cache)
        self.s = settings(smoke)
        self.logs = work / "logs"
        self.models = work / "models"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.models.mkdir(parents=True, exist_ok=True)
        self.t0 = time.time()
        self.summary = {"mode": "smoke" if smoke else "full", "versions": env.versions(),
                        "sparkulator": str(env.sparkulator_path()), "timings_s": {},
                        "failures": [], "kinds": {}, "failure_cases": [],
                        "wna16_gemm": ("e2e reference GEMM plugin (this CPU has no AVX-512: vLLM "
                                       "0.32's _C_AVX2 has no cpu_gemm_wna16)"
                                       if server.wna16_fallback_needed()
                                       else "vLLM's cpu_gemm_wna16")}

    # -- bookkeeping -------------------------------------------------------------------------------
    def fail(self, what: str) -> None:
        print(f"FAIL: {what}", flush=True)
        self.summary["failures"].append(what)

    def timed(self, label: str, t: float) -> None:
        self.summary["timings_s"][label] = round(time.time() - t)

    def write(self) -> pathlib.Path | None:
        """summary.json now; from the main thread only (parts running together in threads are
        written once they are all done, see `together`)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        self.summary["seconds"] = round(time.time() - self.t0)
        self.summary["vllm_starts"] = list(server.STARTS)
        path = self.work / "summary.json"
        path.write_text(json.dumps(self.summary, indent=1))
        return path

    def together(self, parts: list) -> None:
        """Runs the callables `parts` at once, one thread each (each waits on its own vLLM
        server); once all are done, re-raises the first exception one of them raised."""
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
            futures = [pool.submit(part) for part in parts]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise errors[0]

    def quantize(self, src: pathlib.Path, name: str, extra: list[str]) -> pathlib.Path:
        return env.quantize(src, self.models / name, ["--scheme", "w4a16"] + extra, self.logs)

    # -- the target ---------------------------------------------------------------------------------
    def target_models(self, kind) -> tuple[pathlib.Path, pathlib.Path]:
        """The trained BF16 target and its W4A16 copy (sparkulator quantize)."""
        t = time.time()
        target = kind.build_target(self.cache, self.smoke)
        self.timed("target_build", t)
        return target, self.quantize(target, "target-w4a16", [])

    def target_part(self, target: pathlib.Path, target_w4a16: pathlib.Path) -> str:
        """full: serves the BF16 target and its W4A16 copy on their own (kernel line, greedy
        agreement). Returns the W4A16 target's completion of the probe prompt."""
        t = time.time()
        with Server("target-bf16", target, PORT, self.work) as ref, \
                Server("target-w4a16", target_w4a16, PORT + 1, self.work) as q:
            up = ref.wait_healthy(900), q.wait_healthy(900)
            if not all(up):
                self.fail(f"vLLM did not start on the target (bf16 up={up[0]}, w4a16 up={up[1]}): "
                          f"{ref.root_cause() or q.root_cause()}")
                raise SystemExit(2)
            probe = self.target_requests(ref, q)
        self.target_checks(target, target_w4a16, ref, q)
        self.timed("target_serve", t)
        return probe

    def target_requests(self, ref: Server, q: Server) -> str:
        """The same greedy requests on the BF16 server `ref` and the W4A16 one `q` (their token
        agreement goes into summary["target"]); returns q's completion of the probe prompt."""
        prompts = measure.held_out_prompts(self.s["prompts"])
        a, b = measure.greedy(ref, prompts, self.s["tokens"]), measure.greedy(q, prompts,
                                                                            self.s["tokens"])
        self.summary["target"] = {"greedy": measure.agreement(a, b),
                                  "greedy_tokens": {"bf16": [x["token_ids"] for x in a],
                                                    "w4a16": [x["token_ids"] for x in b]}}
        return q.complete(cases.PROBE_PROMPT, 8)["choices"][0]["text"]

    def target_checks(self, target: pathlib.Path, target_w4a16: pathlib.Path, ref: Server,
                      q: Server) -> None:
        """After target_requests: the W4A16 target loaded through compressed-tensors' W4A16 path
        (its kernel line, which on a draft server must come before vLLM's "Loading drafter model":
        the target's own layers), and greedy agreement >= 0.5 with the BF16 target."""
        log = q.log_text()
        own = log.split(DRAFTER_LINE, 1)[0]  # the whole log on a server without a draft
        kernel = [l.split("] ", 1)[-1] for l in own.splitlines() if KERNEL_LINE in l]
        out = self.summary["target"]
        agree = out["greedy"]
        out.update({"model": str(target), "w4a16": str(target_w4a16),
                    "kernel_log_line": kernel[0] if kernel else None,
                    "servers": [ref.name, q.name], "startup_s": [ref.up_after_s, q.up_after_s]})
        if not kernel or "quantization=compressed-tensors" not in own:
            self.fail("the W4A16 target did not load through compressed-tensors' W4A16 path")
        if agree["token_agreement"] < 0.5:
            self.fail(f"greedy agreement of the W4A16 target {agree['token_agreement']} < 0.5")

    # -- one draft kind ------------------------------------------------------------------------------
    def kind_part(self, kind, target: pathlib.Path, target_w4a16: pathlib.Path | None,
                  serve_target: bool = False) -> str | None:
        """The kind's arms, each a server of the target with that draft: the drafter's kernel
        lines, the prediction (BF16 arm), the bench. With serve_target (smoke) the same servers
        are also the target part: the BF16 arm's server is the BF16 greedy reference (greedy
        speculative decoding returns the target's tokens) and the TARGET_ARM's serves the W4A16
        target, so its draft runs on the W4A16 target. Returns the W4A16 target's probe
        completion with serve_target, else None."""
        out = self.summary["kinds"].setdefault(kind.name, {})
        t = time.time()
        draft = kind.build_draft(self.cache, target, self.smoke)
        self.timed(f"{kind.name}_draft_build", t)
        t = time.time()
        drafts = {"bf16": draft}
        for arm in self.s["arms"][1:]:
            method = ["--method", "search"] if arm.endswith("search") else []
            drafts[arm] = self.quantize(draft, f"{kind.name}-draft-{arm}",
                                        kind.quantize_args() + method)
        out["drafts"] = {arm: str(p) for arm, p in drafts.items()}
        out["spec_config"] = kind.spec_config(draft)
        targets = {arm: target for arm in drafts}
        extra = {arm: {} for arm in drafts}
        if serve_target:
            targets[TARGET_ARM] = target_w4a16
            # vLLM logs the W4A16 kernel once per process; the e2e plugin logs it again for the
            # drafter's layers (wna16_fallback/, _register_drafter_kernel_log).
            extra[TARGET_ARM] = dict(server.plugin_env(), SPK_E2E_DRAFTER_KERNEL_LOG="1")
        out["targets"] = {arm: str(t) for arm, t in targets.items()}
        servers = [Server(f"{kind.name}-{arm}", targets[arm], PORT + 2 + i, self.work,
                          args=["--speculative-config", json.dumps(kind.spec_config(d))],
                          extra_env=extra[arm])
                   for i, (arm, d) in enumerate(drafts.items())]
        by_arm = dict(zip(drafts, servers))
        probe = None
        try:
            for s in servers:
                s.start()
            if not all(s.wait_healthy(900) for s in servers):
                why = "; ".join(f"{s.name}: {s.root_cause()}" for s in servers if not s.alive())
                self.fail(f"{kind.name}: vLLM did not start with the drafts: {why}")
                if serve_target:  # as target_part: without the target nothing else is meaningful
                    raise SystemExit(2)
                return None
            self.drafter_logs(kind, servers, out)
            if serve_target:
                probe = self.target_requests(by_arm["bf16"], by_arm[TARGET_ARM])
            self.prediction(kind, servers[0], draft, target, out)
            t_bench = time.time()
            result = measure.bench({arm: s.url for arm, s in zip(drafts, servers)},
                                   self.work / f"bench-{kind.name}.json", self.s["bench_lengths"],
                                   self.s["bench_tokens"], self.s["repeats"], self.s["warmup"])
            self.timed(f"{kind.name}_bench", t_bench)
        finally:
            for s in servers:
                s.stop()
        out["acceptance"] = result["arms"]
        out["bench_exit"] = result["exit"]
        out["startup_s"] = {s.name: s.up_after_s for s in servers}
        for arm, fig in result["arms"].items():
            if not fig["drafted"] or fig["rate"] is None:
                self.fail(f"{kind.name} {arm}: no speculative-decoding counters moved")
        if result["exit"] > 1:
            self.fail(f"{kind.name}: sparkulator bench exited {result['exit']}")
        if serve_target:
            self.target_checks(target, target_w4a16, by_arm["bf16"], by_arm[TARGET_ARM])
        self.timed(f"{kind.name}_serve_and_bench", t)
        return probe

    def drafter_logs(self, kind, servers, out: dict) -> None:
        """The quantized drafts must load through the W4A16 kernel: its line after the drafter's."""
        lines = {}
        for s in servers:
            log = s.log_text()
            start = log.find(DRAFTER_LINE)
            after = log[start:] if start >= 0 else ""
            lines[s.name] = {"drafter_line": start >= 0, "kernel_after_drafter": KERNEL_LINE in after}
            quantized = not s.name.endswith("-bf16")
            if start < 0:
                self.fail(f"{s.name}: no '{DRAFTER_LINE}' in {s.log}")
            elif quantized != lines[s.name]["kernel_after_drafter"]:
                self.fail(f"{s.name}: '{KERNEL_LINE}' after the drafter line: "
                          f"{lines[s.name]['kernel_after_drafter']}, expected {quantized}")
        out["drafter_log"] = lines

    def prediction(self, kind, server: Server, draft, target, out: dict) -> None:
        """For kinds with a torch mirror: vLLM's counters for one greedy request == the mirror's."""
        module = importlib.import_module(type(kind).__module__)
        if not hasattr(module, "predict_acceptance"):
            return
        prompt = measure.held_out_prompts(1, 800)[0]
        got = measure.request_counters(server, prompt, self.s["predict_tokens"])
        want = module.predict_acceptance(draft, target, got["prompt_ids"], got["token_ids"])
        keys = ("drafts", "drafted", "accepted")
        exact = all(got[k] == want[k] for k in keys)
        # A kind may allow a difference of a few accepted tokens over the request, where its mirror
        # runs in fp32 and vLLM in BF16 and a near-tie flips (the kind's prediction_tolerance says
        # why); the drafts must still line up within the same bound.
        tolerance = getattr(kind, "prediction_tolerance", 0)
        per_draft = got["drafted"] // max(1, got["drafts"])  # num_speculative_tokens
        bound = {"drafts": tolerance, "accepted": tolerance, "drafted": tolerance * per_draft}
        match = exact or all(abs(got[k] - want[k]) <= bound[k] for k in keys)
        out["prediction"] = {"vllm": {k: got[k] for k in keys + ("per_position",)},
                             "mirror": {k: want[k] for k in keys}, "match": match, "exact": exact,
                             "tolerance": tolerance,
                             "tokens": len(got["token_ids"]), "prompt_ids": got["prompt_ids"],
                             "token_ids": got["token_ids"],
                             "mirror_steps": want["steps"][:8]}
        if not match:
            self.fail(f"{kind.name}: vLLM's counters {[got[k] for k in keys]} != the mirror's "
                      f"{[want[k] for k in keys]} for one greedy request")

    def kind_failure_part(self, kind, target, work: pathlib.Path | None = None) -> None:
        """The kind's failure cases, on its BF16 draft (the one kind_part served, else built)."""
        out = self.summary["kinds"].setdefault(kind.name, {})
        draft = pathlib.Path(out.get("drafts", {}).get("bf16") or
                             kind.build_draft(self.cache, target, self.smoke))
        kind_cases = kind.failure_cases(work or self.work, target, draft, env.sparkulator_path())
        self.failure_part(kind_cases, out.setdefault("failure_cases", []))

    def failure_part(self, case_list: list, out: list, reference: str | None = None) -> None:
        """Runs the cases on up to LANES servers at once (the CPU is shared: at most 3 vLLM). Cases
        that share a VLLM_CACHE_ROOT run in one lane, in list order; results keep list order."""
        import concurrent.futures
        groups: dict[str, list[int]] = {}
        for i, case in enumerate(case_list):
            root = case.extra_env.get("VLLM_CACHE_ROOT") or f"own-{i}"
            groups.setdefault(root, []).append(i)
        lanes: list[list[int]] = [[] for _ in range(LANES)]
        for group in sorted(groups.values(), key=len, reverse=True):  # longest first, then fill
            min(lanes, key=len).extend(group)
        results: dict[int, dict] = {}

        def run_lane(lane: int) -> None:
            for i in lanes[lane]:
                case, t = case_list[i], time.time()
                ref = reference if case.draft is None else None
                results[i] = cases.run_case(case, self.work, PORT + 10 + lane, reference_text=ref)
                self.timed(f"case_{case.name}", t)

        with concurrent.futures.ThreadPoolExecutor(LANES) as pool:
            for f in [pool.submit(run_lane, lane) for lane in range(LANES) if lanes[lane]]:
                f.result()
        for i, case in enumerate(case_list):
            r = results[i]
            out.append(r)
            if not r["as_expected"]:
                self.fail(f"{case.name}: vLLM loaded={r['vllm_loaded']}, expected "
                          f"{case.expect_vllm_loaded} (expect_error {case.expect_error!r}): "
                          f"{r['vllm_error']}")
            if r["agree"] is False:  # None: not a checkpoint fault (the host's vLLM build)
                self.fail(f"{case.name}: sparkulator check exited {r['check_exit']} "
                          f"{r['check_codes']}, but vLLM loaded={r['vllm_loaded']}")
        self.write()


def main(work: pathlib.Path, smoke: bool, cache: pathlib.Path | None = None) -> int:
    run = Run(work, smoke, cache)
    kinds, skipped = discover_kinds(smoke)
    run.summary["skipped_kinds"] = skipped
    try:
        target, target_w4a16 = run.target_models(kinds[0])
        merged = run.s["target_in_draft_servers"]
        if merged:  # smoke: the first kind's two servers are the target part too (kind_part)
            probe = run.kind_part(kinds[0], target, target_w4a16, serve_target=True)
        else:
            probe = run.target_part(target, target_w4a16)
        run.write()
        # The two MoE parts and the target-only cases (broken copies of the W4A16 target, before
        # the other kinds: they need no draft) need nothing from each other.
        broken = cases.broken_target_cases(run.work, target_w4a16, run.s["broken"])
        parts = [lambda: moe_run.moe_part(run, PORT + MOE_PORT_OFFSET),
                 lambda: moe_run.laguna_moe_part(run, PORT + LAGUNA_MOE_PORT_OFFSET,
                                                 router_case=not smoke),
                 lambda: run.failure_part(broken, run.summary["failure_cases"], reference=probe)]
        if smoke:  # one server each, 3 at once (the LANES bound); full: 3 broken copies, so in turn
            run.together(parts)
        else:
            for part in parts:
                part()
                run.write()
        run.write()
        # A kind drafts for its own target (the Laguna draft needs a Laguna target); kinds that
        # share the Qwen3 target get the cached folder back.
        rest = kinds[1:] if merged else kinds
        targets = {kind.name: kind.build_target(run.cache, smoke) for kind in rest}
        for kind in rest:
            try:
                run.kind_part(kind, targets[kind.name], target_w4a16)
            except env.SparkulatorError as e:
                run.fail(f"{kind.name}: {e}")
            run.write()
        if not smoke:
            for kind in kinds:
                run.kind_failure_part(kind, kind.build_target(run.cache, smoke))
    except env.SparkulatorError as e:
        run.fail(f"sparkulator: {e}")
        run.write()
        return 2
    except SystemExit as e:
        run.write()
        return int(e.code or 2)
    except Exception:
        run.fail("harness error: " + traceback.format_exc()[-3000:])
        run.write()
        return 2
    path = run.write()
    print(f"summary: {path} ({run.summary['seconds']} s, {len(run.summary['failures'])} failures)")
    return 1 if run.summary["failures"] else 0
