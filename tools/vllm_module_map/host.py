"""The generating host's CPU, held fixed: a map must not depend on the machine that made it.

vLLM's CPU build decides some things by the host's instruction set: its W4A16 MoE experts
(CPUExpertsInt4) exist only with AMX tiles, MLA keeps prefix caching only with AMX (platforms/cpu.py,
which made BailingMoeV3MTPModel fail with "--mamba-block-size can only be set with
--enable-prefix-caching" on a host without AMX and build on to its MoE elsewhere), the WNA16 Linear
and scaled-mm kernels choose by AMX, and AMD Zen hosts get zentorch kernels. The CI machines differ
in that, so each map is made as on an x86 host without AMX and without zentorch, on every host.

Used by generate.generate (the builds) and kernel_probe.run_case (its own processes), for the running
platform only: a faked CUDA platform (fake_cuda.py) asks none of this.
Error policy: none; a vLLM without one of these hooks is left as it is.
"""
from __future__ import annotations


def as_on_a_host_without_amx() -> None:
    import torch
    # Every AMX test of the CPU build asks torch (CPUExpertsInt4 among them).
    torch.cpu._is_amx_tile_supported = lambda: False
    from vllm.platforms import current_platform
    if hasattr(current_platform, "is_zen_cpu"):
        type(current_platform).is_zen_cpu = lambda *a: False
    # ZentorchExpertsInt4 asks whether the zentorch package is installed, not the platform.
    try:
        from vllm.model_executor.layers.fused_moe.experts import zentorch_moe
    except ImportError:
        return
    experts = getattr(zentorch_moe, "ZentorchExpertsInt4", None)
    if experts is not None and hasattr(experts, "_supports_current_device"):
        experts._supports_current_device = staticmethod(lambda: False)
