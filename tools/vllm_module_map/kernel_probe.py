"""Whether VLLM_BATCH_INVARIANT=1 lets vLLM build a compressed-tensors WNA16 Linear that no kernel
takes: the map's "kernels" section ({"wna16_batch_invariant": ...}).

One Linear (ReplicatedLinear 256 -> 256, prefix model.layers.0.mlp.down_proj) is built the way a
model builds it, with configs.QUANT_CONFIG changed to 3 bits (vLLM scalar type uint3b4, which no
stock kernel of the CPU build or of CUDA without the optional humming package takes): once with
VLLM_BATCH_INVARIANT unset and once with VLLM_BATCH_INVARIANT=1, each in a process of its own
(vLLM reads the variable through vllm.envs; a fresh process has nothing cached, and a faked
platform cannot be undone). The process runs the interpreter and PYTHONPATH of the generator's
child, so it imports the same vLLM, and fakes CUDA at the same capability when the child does.

Recorded ("kernels" -> "wna16_batch_invariant"):
- "bits": the width probed (3);
- "refused": vLLM's error without the variable ("ValueError: Failed to find a kernel ...");
- "loads_without_kernel": the Linear was built with the variable set, its scheme holding no kernel
  (CompressedTensorsWNA16.kernel is None: the batch-invariant dequantize + matmul path);
- "evidence": when it loads, the file:line of the scheme's create_weights that tests
  use_batch_invariant before choose_mp_linear_kernel; else vLLM's error with the variable set
  (the variable did not bypass kernel selection).
Called by generate.py (kernels()); run as a script it is that one process:
`kernel_probe.py --case CC,BI` prints one case as JSON (CC "" for the running platform).

Error policy: vLLM refusing the layer is the recorded result, not a failure. A probe process that
fails otherwise (an import error, a crash) raises RuntimeError with its stderr's tail, which fails
the release's generation as any other generator error.
"""
from __future__ import annotations

import copy
import inspect
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
BITS = 3
PREFIX = "model.layers.0.mlp.down_proj"


def _error_text(ex: BaseException) -> str:
    # One line per line of vLLM's message, trailing spaces dropped, so the map diffs cleanly.
    return f"{type(ex).__name__}: " + "\n".join(line.rstrip() for line in str(ex).splitlines())


def _skip_line(scheme_cls) -> str:
    """file:line of the `if self.use_batch_invariant:` that create_weights tests before it asks
    choose_mp_linear_kernel (relative to the vllm package's parent)."""
    import vllm
    lines, first = inspect.getsourcelines(scheme_cls.create_weights)
    root = pathlib.Path(vllm.__file__).resolve().parents[1]
    path = pathlib.Path(inspect.getsourcefile(scheme_cls)).resolve().relative_to(root)
    for i, line in enumerate(lines):
        if "use_batch_invariant" in line and line.strip().startswith("if"):
            return f"{path}:{first + i}"
    return str(path)


def run_case(cc: int | None) -> dict:
    """Builds the Linear in this process (VLLM_BATCH_INVARIANT as the environment has it)."""
    if cc is not None:
        from tools.vllm_module_map.fake_cuda import fake_cuda
        fake_cuda(cc)
    else:
        from tools.vllm_module_map.host import as_on_a_host_without_amx
        as_on_a_host_without_amx()
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.layers.linear import ReplicatedLinear
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import \
        CompressedTensorsConfig
    from tools.vllm_module_map.configs import QUANT_CONFIG
    qc = copy.deepcopy(QUANT_CONFIG)
    qc["config_groups"]["group_0"]["weights"]["num_bits"] = BITS
    tmp = tempfile.mkdtemp(prefix="vllm_kernel_probe_")
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method=f"file://{tmp}/dist", backend="gloo")
        initialize_model_parallel(1, 1)
        try:
            with torch.device("meta"):
                layer = ReplicatedLinear(256, 256, bias=False,
                                         quant_config=CompressedTensorsConfig.from_config(qc),
                                         prefix=PREFIX)
        except Exception as ex:  # noqa: BLE001 - vLLM's refusal is the result
            return {"loads": False, "error": _error_text(ex)}
    # CompressedTensorsLinearMethod.create_weights puts the scheme on the layer.
    scheme = getattr(layer, "scheme", None)
    return {"loads": True, "scheme": type(scheme).__name__,
            "kernel": None if getattr(scheme, "kernel", None) is None
            else type(scheme.kernel).__name__,
            "skip_at": _skip_line(type(scheme)) if scheme is not None else None}


def _case(cc: int | None, batch_invariant: bool) -> dict:
    env = dict(os.environ)
    env.pop("VLLM_BATCH_INVARIANT", None)
    if batch_invariant:
        env["VLLM_BATCH_INVARIANT"] = "1"
    # The child's PYTHONPATH (a V=DIR release's tree first) is kept: the same vLLM is imported.
    env["PYTHONPATH"] = os.pathsep.join([p for p in (env.get("PYTHONPATH"), str(REPO)) if p])
    arg = f"{'' if cc is None else cc},{int(batch_invariant)}"
    out = subprocess.run([sys.executable, __file__, "--case", arg], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"kernel probe {arg} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernels(cc: int | None) -> dict:
    """The map's "kernels" section for the vLLM this process imports (cc: the faked CUDA
    capability, None for the running platform)."""
    plain, invariant = _case(cc, False), _case(cc, True)
    # The layer is one no stock kernel takes: a probe that finds a kernel for it is not probing
    # what it says.
    if plain["loads"]:
        raise RuntimeError(f"kernel probe: {BITS}-bit layer built without "
                           f"VLLM_BATCH_INVARIANT ({plain}); choose a width no kernel takes")
    loads = invariant["loads"] and invariant["scheme"] == "CompressedTensorsWNA16" and \
        invariant["kernel"] is None
    return {"wna16_batch_invariant": {
        "bits": BITS,
        "refused": plain["error"],
        "loads_without_kernel": loads,
        "evidence": invariant["skip_at"] if loads else invariant.get("error", str(invariant)),
    }}


if __name__ == "__main__":
    import argparse
    import contextlib
    import io
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", required=True, help="CC,BI: faked capability ('' none), 0/1")
    a = ap.parse_args()
    cc_text, _, _ = a.case.partition(",")
    sys.path.insert(0, str(REPO))
    import logging
    logging.disable(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_case(int(cc_text) if cc_text else None)
    print(json.dumps(result))
