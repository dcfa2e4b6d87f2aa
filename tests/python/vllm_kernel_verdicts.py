"""Asks vLLM's own shape-check code what it does with some Linear shapes; run by the vLLM venv's
interpreter (test_kernel_rules.py), not by pytest.

  python vllm_kernel_verdicts.py '[{"rule": "w4afp8", "k": 1024, "n": 1088, "cc": 90}, ...]'

prints one JSON list: for each case {"ok": true, "kernel": NAME} or {"ok": false, "error": TEXT}.

- "fp8-block" calls quantization/utils/fp8_utils.py validate_fp8_block_shape with the layer sizes
  vLLM's create_weights passes (input_size, output_size, input_size_per_partition,
  output_partition_sizes, [128, 128]) and a layer carrying tp_size. The function also asks
  vllm.distributed for the tensor-parallel world size, which only a running engine has: that
  one call is answered with `tp`; the check itself is vLLM's.
- "w4afp8" calls kernels/linear/__init__.py choose_mp_linear_kernel with the MPLinearLayerConfig
  that compressed_tensors_w4a8_fp8.py builds (signed int4, FP8 activations, group 128). The
  chooser asks the platform whether it is CUDA and which compute capability it has: this machine
  has no GPU, so THE PLATFORM IS FAKED (CUDA, capability `cc`); the kernels' can_implement code
  that judges the shape is vLLM's own. Kernels that need a package the venv lacks (Humming) say so
  and are skipped, as on a GPU host without it. "cc": "device" fakes nothing: on a GPU host
  (bench/gpu/load_formats.sh) vLLM asks the real device.
- "wna16" calls choose_mp_linear_kernel alone with the MPLinearLayerConfig of a K x N layer at
  group 128 ("symmetric", "bits"; test_widths_vllm.py); "cc" as for "wna16-layer".
- "wna16-layer" calls compressed_tensors_wNa16.py CompressedTensorsWNA16.create_weights, the code vLLM
  runs for a pack-quantized Linear: it builds the MPLinearLayerConfig (K = input columns per rank,
  N = the fused rows per rank), asks choose_mp_linear_kernel and checks whole groups per rank
  (verify_group_size_divides_partition). "cc": "cpu" runs on this machine's real platform (the
  vLLM CPU build); a number fakes CUDA at that capability as for "w4afp8". The CPU cases must come
  before the CUDA ones in a run (the fake cannot be undone); the script orders them so. The
  parameters it creates ask vllm.distributed for this rank and the tensor-parallel size, which only
  a running engine has: they are answered with rank 0 and `tp` (the parameters only store them).
- "wna16-load" asks whether vLLM's weight loader takes a `weight_packed` of `cols` int32 words a
  row for a K x N shard of a two-shard fused Linear (gate_up_proj) at `bits`: the parameter comes
  from CompressedTensorsWNA16.create_weights and the load is its load_merged_column_weight, the
  calls vLLM makes. No kernel of the CPU build (nor a stock CUDA one) takes 3/5/6/7 bits, so the
  KERNEL CHOOSER IS ANSWERED with a stand-in class (it only stores its arguments; the load never
  reaches a kernel). Answers {"ok": true} or {"ok": false, "error": "AssertionError at FILE:LINE"}.
"""
import json
import sys
import traceback
import types


def fake_cuda(cc: int) -> None:
    from vllm.platforms import PlatformEnum, current_platform
    from vllm.platforms.interface import DeviceCapability
    cls = type(current_platform)
    current_platform._enum = PlatformEnum.CUDA
    cls.is_cuda = lambda self=None: True
    cls.is_cpu = lambda self=None: False
    cls.get_device_capability = classmethod(
        lambda c, device_id=0: DeviceCapability(cc // 10, cc % 10))


def fp8_block(case: dict) -> dict:
    import vllm.distributed
    from vllm.model_executor.layers.quantization.utils.fp8_utils import validate_fp8_block_shape
    tp = case["tp"]
    vllm.distributed.get_tensor_model_parallel_world_size = lambda: tp
    parts, k = case["partition_sizes"], case["k"]
    column_split = case.get("row_parallel") is not True
    in_full = k if column_split else k * tp
    out_full = sum(parts) * tp if column_split else sum(parts)
    layer = types.SimpleNamespace(tp_size=tp)
    try:
        validate_fp8_block_shape(layer, in_full, out_full, k, parts, [128, 128])
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    return {"ok": True, "kernel": "validate_fp8_block_shape"}


def w4afp8(case: dict) -> dict:
    import torch
    from vllm.model_executor.kernels.linear import MPLinearLayerConfig, choose_mp_linear_kernel
    from vllm.scalar_type import scalar_types
    cc = None
    if case["cc"] != "device":
        cc = case["cc"]
        fake_cuda(cc)
    config = MPLinearLayerConfig(
        full_weight_shape=(case["k"], case["n"]), partition_weight_shape=(case["k"], case["n"]),
        weight_type=scalar_types.int4, act_type=torch.float8_e4m3fn, group_size=128,
        zero_points=False, out_type=torch.bfloat16)
    try:
        return {"ok": True, "kernel": choose_mp_linear_kernel(config, cc).__name__}
    except ValueError as e:
        return {"ok": False, "error": str(e)}


def wna16(case: dict) -> dict:
    """choose_mp_linear_kernel with the MPLinearLayerConfig compressed_tensors_wNa16.py builds for
    a pack-quantized width (its WNA16 type maps, BF16 activations, group 128), on this CPU ("cc":
    "cpu") or on a faked CUDA platform of capability `cc` (as w4afp8). Run the CPU cases in a
    process of their own: faking CUDA cannot be undone."""
    import torch
    from vllm.model_executor.kernels.linear import MPLinearLayerConfig, choose_mp_linear_kernel
    from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
        compressed_tensors_wNa16 as wna16_scheme)
    cc = None
    if case["cc"] not in ("cpu", "device"):
        cc = case["cc"]
        fake_cuda(cc)
    types_map = (wna16_scheme.WNA16_SUPPORTED_TYPES_MAP if case["symmetric"]
                 else wna16_scheme.WNA16_ZP_SUPPORTED_TYPES_MAP)
    config = MPLinearLayerConfig(
        full_weight_shape=(case["k"], case["n"]), partition_weight_shape=(case["k"], case["n"]),
        weight_type=types_map[case["bits"]], act_type=torch.bfloat16, group_size=128,
        zero_points=not case["symmetric"])
    try:
        return {"ok": True, "kernel": choose_mp_linear_kernel(config, cc).__name__}
    except ValueError as e:
        return {"ok": False, "error": str(e)}


def wna16_layer(case: dict) -> dict:
    """The whole CompressedTensorsWNA16.create_weights for one Linear (see the module docstring):
    the chooser as in wna16, at any group size and TP partition, then whole groups per rank."""
    import torch
    from vllm.model_executor.layers.quantization.compressed_tensors.schemes.compressed_tensors_wNa16 \
        import CompressedTensorsWNA16
    import vllm.model_executor.parameter as parameter
    parameter.get_tensor_model_parallel_rank = lambda: 0
    parameter.get_tensor_model_parallel_world_size = lambda: case.get("tp", 1)
    if case["cc"] != "cpu":
        fake_cuda(case["cc"])
    group = case["group"]
    scheme = CompressedTensorsWNA16(strategy="channel" if group == -1 else "group",
                                    num_bits=case["bits"], group_size=None if group == -1 else group,
                                    symmetric=case["sym"], layer_name=case["layer"])
    try:
        scheme.create_weights(torch.nn.Module(), output_size=case["n_full"],
                              input_size=case["k_full"], output_partition_sizes=case["parts"],
                              input_size_per_partition=case["k"], params_dtype=torch.bfloat16,
                              weight_loader=lambda *args: None)
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    return {"ok": True, "kernel": type(scheme.kernel).__name__}


def wna16_load(case: dict) -> dict:
    """vLLM's loader on one shard's weight_packed of case["cols"] words (module docstring)."""
    import torch
    import vllm.model_executor.layers.quantization.compressed_tensors.schemes.\
compressed_tensors_wNa16 as wna16_module
    import vllm.model_executor.parameter as parameter
    parameter.get_tensor_model_parallel_rank = lambda: 0
    parameter.get_tensor_model_parallel_world_size = lambda: 1

    class StandInKernel:
        def __init__(self, *args, **kwargs):
            pass

    chooser = wna16_module.choose_mp_linear_kernel
    wna16_module.choose_mp_linear_kernel = lambda *args, **kwargs: StandInKernel
    try:
        scheme = wna16_module.CompressedTensorsWNA16(strategy="group", num_bits=case["bits"],
                                                     group_size=128, symmetric=True)
        layer = torch.nn.Module()
        n, k = case["n"], case["k"]
        scheme.create_weights(layer, output_size=2 * n, input_size=k,
                              output_partition_sizes=[n, n], input_size_per_partition=k,
                              params_dtype=torch.bfloat16, weight_loader=lambda *args: None)
    finally:
        wna16_module.choose_mp_linear_kernel = chooser
    try:
        layer.weight_packed.load_merged_column_weight(
            torch.zeros(n, case["cols"], dtype=torch.int32), shard_offset=0, shard_size=n)
    except AssertionError as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = frame.filename.replace("\\", "/").split("/vllm/", 1)[-1]
        return {"ok": False, "error": f"AssertionError at vllm/{where}:{frame.lineno}"}
    return {"ok": True}


if __name__ == "__main__":
    cases = json.loads(sys.argv[1])
    judges = {"fp8-block": fp8_block, "w4afp8": w4afp8, "wna16": wna16, "wna16-layer": wna16_layer,
              "wna16-load": wna16_load}
    on_cpu = [i for i, c in enumerate(cases) if c.get("cc") == "cpu"]
    order = on_cpu + [i for i in range(len(cases)) if i not in set(on_cpu)]
    answers = {}
    for i in order:
        answers[i] = judges[cases[i]["rule"]](cases[i])
    print(json.dumps([answers[i] for i in range(len(cases))]))
