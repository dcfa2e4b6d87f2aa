"""`vllm serve` lifecycle for the e2e: start, wait for /health, probe, stop.

Every server runs in its own process group (setsid), binds 127.0.0.1, gets a fresh VLLM_CACHE_ROOT
(unless the caller passes one on purpose: the compile-cache case), and writes its log under the work
folder, which is kept. Every server started here is killed, process group and all, on every exit path:
`stop()`, the context manager, and `stop_all()` at interpreter exit and on SIGTERM/SIGINT (turned
into SystemExit so the same path runs; `install_exit_handlers`).

Error policy: a server that exits or never answers /health is a result (`wait_healthy` returns False and
the log says why), not an exception; only misuse (a port in use by us) raises.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

from tests.e2e import env

_RUNNING: list["Server"] = []
STARTS: list[str] = []  # the name of every server this process started, in order (summary.json)


FALLBACK_DIR = pathlib.Path(__file__).resolve().parent / "wna16_fallback"


def wna16_fallback_needed() -> bool:
    """vLLM 0.32's CPU wheel has cpu_gemm_wna16 only in its AVX-512 libraries (_C, _C_AVX512); on
    an AVX2-only host W4A16 loads and then fails on the first request (wna16_fallback/). The e2e
    then serves with the reference GEMM plugin, unless SPK_E2E_WNA16_FALLBACK=0."""
    import torch
    return os.environ.get("SPK_E2E_WNA16_FALLBACK", "") != "0" and \
        not torch.cpu._is_avx512_supported()


def base_env(threads: int = 1) -> dict:
    """The variables every CPU server runs with (docs/e2e.md, "Timings")."""
    out = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "OMP_NUM_THREADS": str(threads), "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    if wna16_fallback_needed():
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FALLBACK_DIR),
                                                          os.environ.get("PYTHONPATH")]))
    return out


def plugin_env() -> dict:
    """The extra_env of a server that needs the plugin on every host, not only without AVX-512:
    vLLM 0.32's CPU router cannot route Laguna's sigmoid MoE (wna16_fallback/, which only fills
    the gaps it finds in the installed vLLM)."""
    rest = (base_env().get("PYTHONPATH") or os.environ.get("PYTHONPATH") or "").split(os.pathsep)
    paths = [str(FALLBACK_DIR)] + [p for p in rest if p and p != str(FALLBACK_DIR)]
    return {"PYTHONPATH": os.pathsep.join(paths)}


class Server:
    def __init__(self, name: str, model: pathlib.Path, port: int, work: pathlib.Path,
                 args: list[str] | None = None, extra_env: dict | None = None,
                 cache_root: pathlib.Path | None = None, enforce_eager: bool = True):
        self.name, self.model, self.port = name, pathlib.Path(model), port
        self.url = f"http://127.0.0.1:{port}"
        self.log = work / "logs" / f"{name}.log"
        self.cache_root = cache_root or work / "vllm-cache" / name
        self.args = list(args or [])
        self.extra_env = dict(extra_env or {})
        self.enforce_eager = enforce_eager
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.up_after_s: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "Server":
        if any(s.port == self.port for s in _RUNNING):
            raise RuntimeError(f"port {self.port} is already used by a server of this run")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.cache_root.mkdir(parents=True, exist_ok=True)
        cmd = [str(env.venv_dir() / "bin" / "vllm"), "serve", str(self.model),
               "--host", "127.0.0.1", "--port", str(self.port), "--served-model-name", self.name,
               "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-seqs", "4"]
        if self.enforce_eager and "--no-enforce-eager" not in self.args:
            cmd.append("--enforce-eager")
        cmd += [str(a) for a in self.args]
        environ = dict(os.environ, **base_env())
        environ["VLLM_CACHE_ROOT"] = str(self.cache_root)
        environ.update(self.extra_env)  # may set VLLM_CACHE_ROOT on purpose (compile-cache case)
        with open(self.log, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=environ,
                                         start_new_session=True)
        self.started_at = time.time()
        _RUNNING.append(self)
        STARTS.append(self.name)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_healthy(self, timeout: float = 600) -> bool:
        """True once /health answers 200; False when the server exits first or times out."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.alive():
                return False
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        self.up_after_s = round(time.time() - self.started_at, 1)
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(2)
        return False

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 20 s; waits for the leader."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        # The engine core and workers are children in the same group: make sure none outlives us.
        _signal_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self in _RUNNING:
            _RUNNING.remove(self)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what happened -----------------------------------------------------------------------------
    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def root_cause(self) -> str:
        return root_cause(self.log_text())

    def complete(self, prompt: str, max_tokens: int = 8, timeout: float = 300) -> dict:
        body = {"model": self.name, "prompt": prompt, "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "return_token_ids": True}
        return post(self.url + "/v1/completions", body, timeout)

    def probe(self) -> tuple[bool, str]:
        """One short completion: (served, detail). An HTTP error or a dead engine is "not served"."""
        try:
            r = self.complete("def f(x):\n    return", 8, timeout=300)
        except urllib.error.HTTPError as e:
            return False, f"HTTP {e.code}: {e.read()[:300].decode(errors='replace')}"
        except (urllib.error.URLError, OSError) as e:
            return False, f"request failed: {e}"
        if not self.alive():
            return False, "the server died while answering"
        return True, json.dumps(r["choices"][0].get("text", ""))


def post(url: str, body: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


_ERROR_LINE = re.compile(r"(Error|Exception|KeyError)[:(]")
_NOT_ROOT = re.compile(r"ulimit|Too many open|Engine core initialization failed|"
                       r"Triton is installed|^\s*raise |"
                       # a warning on every CPU start (oneDNN has no bf16 matmul without AVX-512):
                       r"Failed to create oneDNN linear, fallback to torch linear")


def root_cause(log: str) -> str:
    """The first exception line a worker logged before the server was told to stop (the API server's
    last line is only "Engine core initialization failed"), without the logger prefix; "" when there
    is none. A kernel-selection error ("... Reasons:") gets the reason lines that follow it (one per
    kernel, "X cannot implement due to: ...")."""
    # What vLLM prints after our SIGTERM ("[shutdown] ...", then EngineDeadError) is not a cause.
    lines = [_strip_prefix(line) for line in log.split("[shutdown]", 1)[0].splitlines()]
    for i, text in enumerate(lines):
        if _ERROR_LINE.search(text) and not _NOT_ROOT.search(text) and \
                not text.startswith(("File ", "Traceback")):
            if text.endswith("Reasons:"):
                reasons = [r for r in lines[i + 1:i + 9] if " cannot implement due to: " in r]
                return (text[:400] + " " + "; ".join(reasons))[:1000]
            return text[:400]
    return ""


def _strip_prefix(line: str) -> str:
    """A log line without vLLM's "(Worker pid=N) LEVEL date [file:line] " prefix."""
    text = re.sub(r"^.*?\] ", "", line).strip() if "] " in line[:120] else line.strip()
    return re.sub(r"^\(\w+ pid=\d+\)\s*", "", text)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def install_exit_handlers() -> None:
    """Entry points call this: servers are stopped at interpreter exit and on SIGTERM/SIGINT/SIGHUP
    (turned into SystemExit, so `finally` blocks and atexit run)."""
    atexit.register(stop_all)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
