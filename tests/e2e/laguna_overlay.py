"""A patched copy of the installed vLLM, for proving `sparkulator check --vllm`'s patch without
touching the virtual environment: a symlink farm of SITE/vllm under DIR/vllm in which only the
patched files are real copies, used with PYTHONPATH=DIR (DIR/vllm-serve wraps the venv's `vllm`).

Optionally (`wna16_fallback`) a reference stand-in for the W4A16 CPU kernel: vLLM 0.32.0's CPU
build loads `_C_AVX2.abi3.so` on hosts without AVX-512, and that library has no `cpu_gemm_wna16`
(`_C` and `_C_AVX512` have it), so no W4A16 layer runs there. The stand-in decodes the
CPUWNA16LinearKernel's repacked weight (model_executor/kernels/linear/mixed_precision/cpu.py,
`_process_gptq_weights_w4a16`: [in, out] int4 packed 8 per int32 along out, blocks of 16 output
channels) and does a dense matmul. It is a mock where the real kernel cannot run, and says so in
every log it touches; its numbers (acceptance) stand for the math, not for the kernel's speed.
Errors: exceptions (test tooling).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

FALLBACK = '''

# ---- STAND-IN appended by sparkulator's tests/e2e/laguna_overlay.py --------------------------
# This CPU build has no cpu_gemm_wna16 (_C_AVX2); the reference below inverts cpu.py's
# _process_gptq_weights_w4a16 layout and does a dense matmul. Where the kernel exists, it is used.
_spk_kernel_cpu_gemm_wna16 = cpu_gemm_wna16


def _spk_reference_gemm_wna16(x, q_weight, scales, zeros, bias, pack_factor):
    assert zeros is None and pack_factor == 8, "stand-in handles symmetric int4 only"
    n_out = scales.size(1)
    n_in = q_weight.numel() * 8 // n_out
    words = q_weight.view(n_out // 16, n_in, 2).permute(1, 0, 2).reshape(n_in, n_out // 8)
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    vals = ((words.unsqueeze(-1) >> shifts) & 15).reshape(n_in, n_out) - 8
    group = n_in // scales.size(0)
    w = vals.to(torch.float32) * scales.to(torch.float32).repeat_interleave(group, dim=0)
    out = x.to(torch.float32) @ w
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(x.dtype)


def cpu_gemm_wna16(input, q_weight, scales, zeros, bias, pack_factor, isa_hint):
    if hasattr(torch.ops._C, "cpu_gemm_wna16"):
        return _spk_kernel_cpu_gemm_wna16(input, q_weight, scales, zeros, bias, pack_factor,
                                          isa_hint)
    x_2d = input.reshape(-1, input.shape[-1])
    out = _spk_reference_gemm_wna16(x_2d, q_weight, scales, zeros, bias, pack_factor)
    return out.reshape(input.shape[:-1] + (out.size(-1),))
'''


def make_real(overlay: Path, rel: str) -> Path:
    """Replaces the symlink at overlay/rel by a copy of the file it points to."""
    path = overlay / rel
    target = path.resolve()
    path.unlink()
    shutil.copy(target, path)
    for pyc in (path.parent / "__pycache__").glob(path.stem + ".*"):
        pyc.unlink()
    return path


def build(site: Path, overlay: Path, patches: list[str], wna16_fallback: bool,
          venv_bin: Path) -> Path:
    """patches: unified diffs (paths vllm/...) applied with patch -p1 inside the overlay."""
    shutil.rmtree(overlay, ignore_errors=True)
    overlay.mkdir(parents=True)
    subprocess.run(["cp", "-as", str(site / "vllm"), str(overlay / "vllm")], check=True)
    for diff in patches:
        rel = diff.splitlines()[0].split(" ", 1)[1].removeprefix("a/")
        make_real(overlay, rel)
        subprocess.run(["patch", "-p1", "--forward"], input=diff, text=True, cwd=overlay,
                       check=True, capture_output=True)
    if wna16_fallback:
        ops = make_real(overlay, "vllm/_custom_ops.py")
        ops.write_text(ops.read_text() + FALLBACK)
    wrapper = overlay / "vllm-serve"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={overlay}${{PYTHONPATH:+:$PYTHONPATH}} '
                       f'exec {venv_bin}/vllm "$@"\n')
    wrapper.chmod(0o755)
    return wrapper
