#!/usr/bin/env bash
# Two sparkulator binaries on the same quantize, interleaved (the order reverses every round),
# medians of wall and CPU (user + sys) seconds: the check for a change to the kernels or the
# pipeline, where the difference is smaller than one run's noise.
#   ab.sh SPARKULATOR_A SPARKULATOR_B CHECKPOINT_DIR [ROUNDS] [QUANTIZE_FLAGS...]
# Default flags: --no-fsync (the compute, not the disk). Output folders go to WORK (default: beside
# the checkpoint) and are removed.
set -euo pipefail
a=$(realpath "$1") b=$(realpath "$2") ckpt=$(realpath "$3") rounds=${4:-7}
shift $(($# < 4 ? $# : 4))
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--no-fsync)
work=${WORK:-$(dirname "$ckpt")/ab-work.$$}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
command -v /usr/bin/time >/dev/null || { echo "install GNU time (apt-get install time)" >&2; exit 2; }
cat "$ckpt"/* >/dev/null # warm the page cache
: >"$work/times"
for ((i = 1; i <= rounds; ++i)); do
  order=("$a" "$b")
  if ((i % 2 == 0)); then order=("$b" "$a"); fi
  for bin in "${order[@]}"; do
    rm -rf "$work/out"
    sync
    /usr/bin/time -f "$bin %e %U %S" -a -o "$work/times" "$bin" quantize "$ckpt" "$work/out" \
      "${flags[@]}" >/dev/null
  done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A wall cpu
for bin in "$a" "$b"; do
  wall[$bin]=$(awk -v b="$bin" '$1 == b {print $2}' "$work/times" | median)
  cpu[$bin]=$(awk -v b="$bin" '$1 == b {print $3 + $4}' "$work/times" | median)
  printf "%s: wall %.3f s, CPU %.3f s (median of %d)\n" "$bin" "${wall[$bin]}" "${cpu[$bin]}" "$rounds"
done
printf "B / A: wall %.2f, CPU %.2f\n" "$(echo "${wall[$b]} / ${wall[$a]}" | bc -l)" \
  "$(echo "${cpu[$b]} / ${cpu[$a]}" | bc -l)"
