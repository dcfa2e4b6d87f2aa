"""A context-managed `vllm serve` for the EAGLE-3 driver and test, on top of branch e2e's environment.

STAND-IN: written before tests/e2e/server.py existed; it takes that module's base_env (so W4A16 runs
on AVX2-only hosts through its plugin) and differs only in waiting for /health inside `with` and in
where the log goes. The lead may fold it into server.Server.
`Server`: one `vllm serve` in its own process group on 127.0.0.1, waited on via /health, always
killed as a group. Errors: a server that dies or does not come up raises RuntimeError naming its log.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.request

from tests.e2e import env
from tests.e2e.server import base_env



class Server:
    """`vllm serve MODEL` on 127.0.0.1:PORT, in its own process group; use as a context manager."""

    def __init__(self, name: str, model: pathlib.Path, port: int, log: pathlib.Path,
                 extra_args: list[str] | None = None, extra_env: dict | None = None):
        self.name, self.model, self.port, self.log = name, model, port, log
        self.extra_args, self.extra_env = extra_args or [], extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> "Server":
        cache = self.log.parent / f"vllm-cache-{self.name}"
        shutil.rmtree(cache, ignore_errors=True)
        environ = dict(os.environ, VLLM_CACHE_ROOT=str(cache))
        environ.update(base_env(1))   # branch e2e's: its W4A16 GEMM plugin on AVX2-only hosts
        environ.update(self.extra_env)
        cmd = [str(env.venv_dir() / "bin" / "vllm"), "serve", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "--served-model-name", self.name, "--dtype", "bfloat16",
               "--max-model-len", "1024", "--max-num-seqs", "4", "--enforce-eager",
               *self.extra_args]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     env=environ, start_new_session=True)
        return self

    def wait_up(self, timeout: float = 600) -> bool:
        """True once /health answers; False when the server exited or timed out."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(2)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def __enter__(self) -> "Server":
        self.start()
        if not self.wait_up():
            tail = self.log.read_text(errors="replace")[-3000:]
            self.stop()
            raise RuntimeError(f"vllm serve {self.name} did not come up (log {self.log}):\n{tail}")
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
