"""The faked CUDA platform a wheel-only vLLM release (--release V=DIR) is built under.

fake_cuda(cc) is called once, in the generator's child process, before vLLM's model registry is
imported: empty stand-ins for vLLM's compiled extensions, missing torch.ops of vLLM's namespaces
answer False, fake-kernel registrations for missing ops are skipped, CudaPlatform answers for
capability `cc`, vLLM modules that import CuTe DSL unguarded are stood in, the MoE aux stream is None, CUDA streams and events are stand-ins, an attention backend is named where none validates,
triton.Config of vLLM's Triton placeholder keeps its arguments and its tl.extra is `anything`, and
FlashInfer's sampler (FlashInfer is absent) is not supported. None of these changes what a Linear
gets; nothing calls a kernel (models are built on meta).

Error policy: it patches process-wide state and is not undone; an import error of vLLM's own
Python code propagates (the child fails and generate.py reports the release as failed).
"""
from __future__ import annotations

import sys

from tools.vllm_module_map.stand_ins import Anything, Stub, anything, stand_in_kernel_modules


# The CUDA capability faked where a vLLM has no CPU build (Hopper): the one place it is written;
# generate.py's --cc and `sparkulator check --vllm DIR` (which passes no capability) use it.
DEFAULT_CC = 90


def fake_cuda(cc: int) -> None:
    """Makes vLLM believe it runs on CUDA at capability `cc` (as tests/python/vllm_kernel_verdicts.py)."""
    import importlib
    # The wheel's compiled extensions are not unzipped (and would need CUDA): empty stand-ins, so
    # that the Python code imports. Nothing here calls a kernel: the model is built on meta.
    for name in ("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm.cumem_allocator",
                 "vllm._flashmla_C", "vllm._flashmla_extension_C", "vllm._rocm_C",
                 "vllm.vllm_flash_attn", "vllm.vllm_flash_attn.flash_attn_interface"):
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = Stub(name)
    # Ops of those extensions (torch.ops._C.*) asked at import time, for capability checks: a
    # missing op of a vLLM namespace answers False.
    # vLLM's kernel modules that need a CUDA-only kernel package (CuTe DSL) unguarded: stood in
    # (stand_ins.py).
    stand_in_kernel_modules()
    import torch._ops
    orig_getattr = torch._ops._OpNamespace.__getattr__

    def getattr_or_false(self, op_name):
        try:
            return orig_getattr(self, op_name)
        except AttributeError:
            if self.name.startswith("_") and not op_name.startswith("__"):
                return anything
            raise
    torch._ops._OpNamespace.__getattr__ = getattr_or_false
    # hasattr(torch.ops._C, op) is now true, so vLLM registers fake kernels for ops that do not
    # exist: those registrations are skipped.
    import torch.library
    orig_register_fake = torch.library.register_fake

    def register_fake(op, fn=None, **kw):
        def deco(f):
            try:
                return orig_register_fake(op, f, **kw)
            except (RuntimeError, ValueError):
                return f
        return deco(fn) if fn is not None else deco
    torch.library.register_fake = register_fake
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability
    CudaPlatform.get_device_capability = classmethod(
        lambda c, device_id=0: DeviceCapability(cc // 10, cc % 10))
    CudaPlatform.has_device_capability = classmethod(
        lambda c, capability, device_id=0: (cc >= (capability if isinstance(capability, int)
                                                   else capability[0] * 10 + capability[1])))
    CudaPlatform.get_device_name = classmethod(lambda c, device_id=0: "faked")
    CudaPlatform.get_device_total_memory = classmethod(lambda c, device_id=0: 1 << 36)
    CudaPlatform.is_fully_connected = classmethod(lambda c, ids: True)
    CudaPlatform.num_compute_units = classmethod(lambda c, device_id=0: 132)
    CudaPlatform.is_integrated_gpu = classmethod(lambda c, device_id=0: False)
    # The faked device has no streams: the MoE shared-expert overlap stream is None (its
    # CPU answer). The attention backend does not change what a Linear gets; when no CUDA
    # backend validates here (MLA backends check for their kernels), TRITON_MLA / FLASH_ATTN.
    import vllm.utils.torch_utils as torch_utils
    torch_utils.aux_stream = lambda: None
    orig_backend = CudaPlatform.get_attn_backend_cls.__func__

    def get_attn_backend_cls(c, selected_backend, attn_selector_config, *a, **k):
        try:
            return orig_backend(c, selected_backend, attn_selector_config, *a, **k)
        except ValueError:
            if getattr(attn_selector_config, "use_mla", False):
                return "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
            return "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    CudaPlatform.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    platforms._current_platform = CudaPlatform()
    # CPU torch's CUDA streams and events are dummy classes that refuse to be made; DeepSeek-V4's
    # layers make them in __init__ (overlap of GEMMs; nothing a Linear gets).
    import torch
    if not torch.cuda.is_available():
        class StreamOrEvent(Anything):
            def __init__(self, *a, **k):
                pass
        torch.cuda.Stream = torch.cuda.Event = StreamOrEvent
        # Step5's sparse attention asks which device it is on (device 0).
        torch.accelerator.current_device_index = lambda: 0
    # Without a usable Triton, vLLM's placeholder makes triton.Config a decorator; the Mamba
    # kernels read num_stages / num_warps / kwargs of their configs at import on capability 9.0.
    import vllm.triton_utils as triton_utils
    if not triton_utils.HAS_TRITON:
        class Config:
            def __init__(self, kwargs=None, num_warps=4, num_stages=1, **extra):
                self.kwargs, self.num_warps, self.num_stages = kwargs or {}, num_warps, num_stages
        triton_utils.triton.Config = Config
        # Kernel modules bind tl.extra.cuda.libdevice at import (Step5's sparse-attention ops);
        # the placeholder language module has no `extra`.
        if not hasattr(triton_utils.tl, "extra"):
            triton_utils.tl.extra = anything
    # FlashInfer is not in the wheel: a model that builds vLLM's Sampler (HY-V3 MTP) asks
    # whether FlashInfer's top-k/top-p sampler works, importing it; the answer is no (sampling
    # only, nothing a Linear gets).
    try:
        import flashinfer  # noqa: F401
    except ImportError:
        from vllm.v1.sample.ops import topk_topp_sampler
        topk_topp_sampler.flashinfer_sampler_supported = lambda: False
