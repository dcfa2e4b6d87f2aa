#!/usr/bin/env bash
# Loads one small checkpoint per data-free format in vLLM on a GPU and generates a few tokens, so
# that each format's vLLM kernel is exercised, then proves the plan's kernel rules
# (src/vllm/kernel_rules.h) on the real device (not run in CI: these kernels need a GPU).
#   load_formats.sh SPARKULATOR [WORK_DIR]        (PYTHON: the interpreter with vLLM; python3)
# About 9 vLLM starts of a 2-layer model: under 5 minutes on one Hopper GPU.
# Kernels vLLM 0.32 picks (docs/formats.md, "Kernels and shape rules"):
#   w8a8        CompressedTensorsW8A8Int8  (CUTLASS int8 scaled_mm; Triton for K or N % 16 != 0)
#   fp8-dynamic CompressedTensorsW8A8Fp8   (CUTLASS FP8 on sm89+, Marlin FP8 before)
#   fp8-block   CompressedTensorsW8A8Fp8   (block-scaled FP8 GEMM, 128x128)
#   nvfp4a16    CompressedTensorsW4A4Fp4   (Marlin FP4; FlashInfer CuTe-DSL W4A16 on sm100/103)
#   mxfp4a16    CompressedTensorsW4A16Mxfp4 / Marlin MXFP4
#   mxfp8a16    CompressedTensorsW8A8Mxfp8 (Marlin MXFP8 weight-only; FlashInfer on Blackwell)
#   w4afp8      CompressedTensorsW4A8Fp8   (CUTLASS W4A8: Hopper only), expected to refuse
#               model_free_ptq's int-quantized layout (check: layout-loads-nowhere)
# Rule boundaries, one shape on each side:
#   fp8-block  k_proj of 192 rows (12 heads, 3 KV heads of 64): the plan keeps q/k/v dense and the
#              checkpoint loads; vLLM's validate_fp8_block_shape would refuse them quantized.
#   w4afp8     vLLM's W4A8 kernel chooser on this device: K 1024 x N 1152 (q/k/v 1024+64+64) takes
#              CutlassW4A8LinearKernel, N 1088 (960+64+64) has no kernel, as the plan predicts.
# Prints one line per check and exits non-zero if any fails.
set -euo pipefail
spk=$(realpath "$1") work=${2:-$(mktemp -d)} python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
failed=0

# Loads $1 in vLLM and generates 8 tokens; the log goes to $1.log.
load() {
  "$python" - "$1" >"$1.log" 2>&1 <<'PY'
import sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], max_model_len=512, enforce_eager=True, gpu_memory_utilization=0.3)
out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=8, temperature=0))
print("GENERATED:", out[0].outputs[0].text)
PY
}

report() {  # report NAME LOG: ok with vLLM's kernel line, or FAILED with the last line
  if [ "$2" = ok ]; then
    echo "$1: ok: $(grep -m1 -iE 'Using .*Kernel|Selected .*Kernel|scheme' "$3" || true)"
  else
    echo "$1: FAILED: $(tail -1 "$3")"; failed=1
  fi
}

"$spk" example "$work/src" --family llm --force >/dev/null
for scheme in w8a8 fp8-dynamic fp8-block nvfp4a16 mxfp4a16 mxfp8a16; do
  "$spk" quantize "$work/src" "$work/$scheme" --scheme "$scheme" --force >/dev/null
  if load "$work/$scheme"; then report "$scheme" ok "$work/$scheme.log"
  else report "$scheme" failed "$work/$scheme.log"; fi
done
# w4afp8 in model_free_ptq's layout: check's layout-loads-nowhere says Hopper's
# CompressedTensorsW4A8Fp8 refuses its I8 .weight (seen with the weight loaders on a faked Hopper);
# a load here would prove that wrong.
"$spk" quantize "$work/src" "$work/w4afp8" --scheme w4afp8 --allow-unloadable --force >/dev/null
if load "$work/w4afp8"; then
  echo "w4afp8 (int-quantized): FAILED: it loaded, so layout-loads-nowhere is wrong"; failed=1
else
  echo "w4afp8 (int-quantized): ok: refused as check says: $(grep -m1 -E 'no module or parameter' "$work/w4afp8.log" || tail -1 "$work/w4afp8.log")"
fi

# fp8-block boundary: the plan keeps the 192-row k_proj's q/k/v dense; the rest loads as blocks.
"$spk" example "$work/src192" --family llm --hidden 768 --kv-heads 3 --force >/dev/null
"$spk" inspect "$work/src192" --scheme fp8-block --json >"$work/fp8-block-192.plan.json"
if grep -q 'block_n = 128' "$work/fp8-block-192.plan.json" &&
  "$spk" quantize "$work/src192" "$work/fp8-block-192" --scheme fp8-block --force >/dev/null &&
  load "$work/fp8-block-192"; then
  report "fp8-block k_proj 192 rows kept dense" ok "$work/fp8-block-192.log"
else
  report "fp8-block k_proj 192 rows kept dense" failed "$work/fp8-block-192.log"
fi

# w4afp8 boundary: vLLM's own chooser on this device, both sides.
verdicts=$("$python" "$here/../../tests/python/vllm_kernel_verdicts.py" \
  '[{"rule": "w4afp8", "k": 1024, "n": 1152, "cc": "device"},
    {"rule": "w4afp8", "k": 1024, "n": 1088, "cc": "device"}]' 2>"$work/w4afp8-verdicts.log" |
  tail -1)
echo "w4afp8 chooser: $verdicts"
if ! "$python" -c '
import json, sys
take, refuse = json.loads(sys.argv[1])
assert take["ok"] and take["kernel"] == "CutlassW4A8LinearKernel", take
assert not refuse["ok"] and "K and N must be divisible by 128" in refuse["error"], refuse
' "$verdicts"; then
  echo "w4afp8 boundary: FAILED (the plan keeps N % 128 != 0 dense; vLLM disagrees above)"
  failed=1
fi
exit $failed
