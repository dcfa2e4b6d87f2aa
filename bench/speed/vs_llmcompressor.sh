#!/usr/bin/env bash
# sparkulator quantize against llm-compressor's model_free_ptq on the same checkpoint and scheme
# (SCHEME, an llm-compressor preset name, default W4A16, or a width with no preset, W2A16 .. W7A16
# with an optional _ASYM, which llmcompressor_ptq.py builds as a QuantizationScheme), interleaved
# rounds, medians; then checks that the two outputs are bit-identical (every tensor, torch.equal).
#   [SCHEME=FP8_DYNAMIC] vs_llmcompressor.sh SPARKULATOR CHECKPOINT_DIR [ROUNDS]
# sparkulator runs with --preset none, so that it quantizes the same Linear weights as
# model_free_ptq with ignore=[] (a DFlash preset would keep q/k/v dense). Both the default (fsync)
# and --no-fsync are timed; llm-compressor does not fsync. CPU seconds (user + sys, all threads)
# are recorded too: on a shared machine they move far less with the load than wall times do.
set -euo pipefail
spk=$(realpath "$1") ckpt=$(realpath "$2") rounds=${3:-3} scheme=${SCHEME:-W4A16}
here=$(dirname "$(realpath "$0")")
work=${WORK:-$(dirname "$ckpt")/vs-llmc.$$}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# The project's interpreter (.venv, or $SPK_PYTHON: scripts/python-env.sh), which the install gives
# llm-compressor; python3 from PATH where there is none.
. "$here/../../scripts/python-env.sh"
py=$SPK_PY
[[ -x $py ]] || py=python3
"$py" -c "import llmcompressor" 2>/dev/null ||
  { echo "$py cannot import llmcompressor: pip install llmcompressor==0.14.0.1" >&2; exit 2; }

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: >"$work/proc"; : >"$work/call"; : >"$work/spk"; : >"$work/spkn"; : >"$work/cpu_l"; : >"$work/cpu_s"
# Runs "$@" under /usr/bin/time and appends its user + sys CPU seconds to file $1.
cpu() { local out=$1; shift; /usr/bin/time -f "%U %S" -o "$work/t" "$@"; awk '{print $1 + $2}' "$work/t" >>"$out"; }
for ((i = 1; i <= rounds; ++i)); do
  rm -rf "$work/l"; sync
  t0=$(now); call=$(cpu "$work/cpu_l" "$py" "$here/llmcompressor_ptq.py" "$ckpt" "$work/l" "$scheme" 2>/dev/null | tail -1); t1=$(now)
  echo "$t1 - $t0" | bc -l >>"$work/proc"; echo "$call" >>"$work/call"
  for mode in spk spkn; do
    rm -rf "$work/s"; sync
    # --allow-unloadable: W4AFP8's model_free_ptq layout loads on no vLLM (quantize refuses it
    # without); here only the bytes and the speed are compared.
    flags=(--preset none --scheme "$scheme" --allow-unloadable)
    [[ $mode == spkn ]] && flags+=(--no-fsync)
    t0=$(now)
    if [[ $mode == spk ]]; then cpu "$work/cpu_s" "$spk" quantize "$ckpt" "$work/s" "${flags[@]}" >/dev/null
    else "$spk" quantize "$ckpt" "$work/s" "${flags[@]}" >/dev/null; fi
    t1=$(now)
    echo "$t1 - $t0" | bc -l >>"$work/$mode"
  done
  echo "round $i: llm-compressor process $(tail -1 "$work/proc") s, call $call s;" \
    "sparkulator $(tail -1 "$work/spk") s, --no-fsync $(tail -1 "$work/spkn") s"
done
proc=$(median <"$work/proc") call=$(median <"$work/call") s=$(median <"$work/spk") sn=$(median <"$work/spkn")
cl=$(median <"$work/cpu_l") cs=$(median <"$work/cpu_s")
echo "---"
printf "medians: llm-compressor process %.3f s, call %.3f s; sparkulator %.3f s, --no-fsync %.3f s\n" \
  "$proc" "$call" "$s" "$sn"
printf "llm-compressor / sparkulator: call %.1fx, process %.1fx; against --no-fsync: %.1fx, %.1fx\n" \
  "$(echo "$call / $s" | bc -l)" "$(echo "$proc / $s" | bc -l)" \
  "$(echo "$call / $sn" | bc -l)" "$(echo "$proc / $sn" | bc -l)"
printf "CPU seconds (user + sys): llm-compressor process %.2f, sparkulator %.2f: %.1fx\n" \
  "$cl" "$cs" "$(echo "$cl / $cs" | bc -l)"
# One line for all_presets.sh: the ratios call, process, call and process against --no-fsync, CPU.
printf "ratios: %s %.1f %.1f %.1f %.1f %.1f\n" "$scheme" "$(echo "$call / $s" | bc -l)" \
  "$(echo "$proc / $s" | bc -l)" "$(echo "$call / $sn" | bc -l)" "$(echo "$proc / $sn" | bc -l)" \
  "$(echo "$cl / $cs" | bc -l)"
"$py" - "$work/l" "$work/s" <<'PY'
import glob, sys
import torch
from safetensors import safe_open

def load(folder):
    out = {}
    for f in glob.glob(folder + "/*.safetensors"):
        with safe_open(f, "pt") as s:
            for k in s.keys():
                out[k] = s.get_tensor(k)
    return out

a, b = load(sys.argv[1]), load(sys.argv[2])
same = sorted(k for k in a if k in b and torch.equal(a[k], b[k]))
print(f"tensors: llm-compressor {len(a)}, sparkulator {len(b)}, bit-identical {len(same)}")
sys.exit(0 if len(same) == len(a) == len(b) else 1)
PY
