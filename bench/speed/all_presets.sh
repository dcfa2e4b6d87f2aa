#!/usr/bin/env bash
# Every llm-compressor preset against model_free_ptq in one run: vs_llmcompressor.sh once per
# scheme (ROUNDS interleaved rounds each, default 1), its full output appended to LOG, then one
# Markdown table line per scheme: the 1-minute load average before and after, the ratios
# llm-compressor / sparkulator of the model_free_ptq call and of the whole process (against
# sparkulator's default fsync and against --no-fsync), the CPU-second ratio (user + sys, both
# processes, all threads) and how many tensors are bit-identical.
#   [SCHEMES="W4A16 FP8_DYNAMIC"] [LOG=FILE] all_presets.sh SPARKULATOR CHECKPOINT_DIR [ROUNDS]
# Takes several minutes per scheme on 2 cores (the reference takes 20 s to 4 min each). Exits 1 if
# a scheme failed or an output was not bit-identical; its table line then says so.
set -euo pipefail
spk=$1 ckpt=$2 rounds=${3:-1}
here=$(dirname "$(realpath "$0")")
schemes=${SCHEMES:-W4A16 W8A8 W4AFP8 FP8_DYNAMIC FP8_BLOCK NVFP4A16 MXFP4A16 MXFP8A16}
log=${LOG:-$(mktemp -t all_presets.XXXXXX.log)}
load() { cut -d' ' -f1 /proc/loadavg; }

status=0 lines=()
for s in $schemes; do
  before=$(load)
  echo "=== $s $(date -u +%H:%M:%S) load $before" | tee -a "$log" >&2
  if ! out=$(SCHEME=$s "$here/vs_llmcompressor.sh" "$spk" "$ckpt" "$rounds" 2>&1); then status=1; fi
  echo "$out" >>"$log"
  after=$(load)
  # ratios: SCHEME CALL PROCESS CALL_NOFSYNC PROCESS_NOFSYNC CPU; tensors: ... bit-identical K
  read -r _ _ call proc calln procn cpu <<<"$(grep '^ratios:' <<<"$out" || echo "ratios: $s - - - - -")"
  tensors=$(grep -o 'llm-compressor [0-9]*, sparkulator [0-9]*, bit-identical [0-9]*' <<<"$out" || true)
  if [[ $tensors =~ llm-compressor\ ([0-9]+),\ sparkulator\ ([0-9]+),\ bit-identical\ ([0-9]+) ]]; then
    same="${BASH_REMATCH[3]} of ${BASH_REMATCH[1]}"
    [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" && ${BASH_REMATCH[3]} == "${BASH_REMATCH[1]}" ]] ||
      status=1
  else
    same="FAILED (see $log)" status=1
  fi
  lines+=("| $s | $before-$after | ${call}x / ${proc}x | ${calln}x / ${procn}x | ${cpu}x | $same |")
done

echo "rounds per scheme: $rounds; full output: $log"
echo "| scheme | load (1 min) | call / process | --no-fsync: call / process | CPU seconds | bit-identical |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${lines[@]}"
exit "$status"
