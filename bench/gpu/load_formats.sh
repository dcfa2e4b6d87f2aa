#!/usr/bin/env bash
# Loads one small checkpoint per data-free format in vLLM on a GPU and generates a few tokens, so
# that each format's vLLM kernel is exercised (not run in CI: these kernels need a GPU).
#   load_formats.sh SPARKULATOR [WORK_DIR]
# Needs: vllm with CUDA, a GPU of the capability each kernel asks for (FP8: sm89+; NVFP4/MXFP4
# native: sm100, else vLLM's Marlin FP4/FP8 weight-only fallbacks). Prints one line per scheme with
# vLLM's linear-method log line, and exits non-zero if any scheme fails to load or generate.
#   w8a8        CompressedTensorsW8A8Int8  (CUTLASS int8 scaled_mm)
#   fp8-dynamic CompressedTensorsW8A8Fp8   (CUTLASS / Marlin FP8, channel scales)
#   fp8-block   CompressedTensorsW8A8Fp8   (block-scaled FP8 GEMM, 128x128)
#   nvfp4a16    CompressedTensorsW4A16Fp4  (Marlin FP4)
#   mxfp4a16    CompressedTensorsW4A16Mxfp4 / Marlin MXFP4
#   mxfp8a16    CompressedTensorsW8A8Mxfp8 (Marlin MXFP8 weight-only)
#   w4afp8      CompressedTensorsW4A8Fp8   (CUTLASS W4A8, Hopper)
set -euo pipefail
spk=$(realpath "$1") work=${2:-$(mktemp -d)}
mkdir -p "$work"
"$spk" example "$work/src" --family llm --force >/dev/null
failed=0
for scheme in w8a8 fp8-dynamic fp8-block nvfp4a16 mxfp4a16 mxfp8a16 w4afp8; do
  "$spk" quantize "$work/src" "$work/$scheme" --scheme "$scheme" --force >/dev/null
  if python3 - "$work/$scheme" >"$work/$scheme.log" 2>&1 <<'PY'
import sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], max_model_len=512, enforce_eager=True, gpu_memory_utilization=0.3)
out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=8, temperature=0))
print("GENERATED:", out[0].outputs[0].text)
PY
  then
    echo "$scheme: ok: $(grep -m1 -iE 'scheme|kernel|linear method' "$work/$scheme.log" || true)"
  else
    echo "$scheme: FAILED: $(tail -1 "$work/$scheme.log")"; failed=1
  fi
done
exit $failed
